//! Replays the committed fuzz corpus of the policy and capacity parsers (`fuzz/corpus/specs`)
//! through the fuzz target's own entry point: every input must run to its end without a panic.

use std::path::Path;

#[test]
fn the_specs_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/specs");
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| tiercache_policy::fuzz::specs(&data));
        assert!(outcome.is_ok(), "{} panicked", path.display());
        inputs += 1;
    }
    assert!(inputs >= 5, "{}: only {inputs} inputs", dir.display());
}
