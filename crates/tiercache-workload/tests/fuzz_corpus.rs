//! Replays the committed fuzz corpus (`fuzz/corpus/`) through the fuzz targets' own entry
//! points, so that what fuzzing found (and fixed) stays fixed: every input must run to its end
//! without a panic. The targets run under cargo-fuzz; this needs nothing but the repository.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{} panicked", path.display());
        inputs += 1;
    }
    assert!(inputs >= 5, "{}: only {inputs} inputs", dir.display());
}

#[test]
fn the_trace_corpus_replays() {
    replay("trace", tiercache_workload::fuzz::trace);
}

#[test]
fn the_csv_spec_corpus_replays() {
    replay("csv_spec", tiercache_workload::fuzz::csv_spec);
}
