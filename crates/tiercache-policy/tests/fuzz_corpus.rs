//! Replays the committed fuzz corpora of the policy and capacity parsers (`fuzz/corpus/specs`)
//! and of policy stacks (`fuzz/corpus/stack`) through the fuzz targets' own entry points:
//! every input must run to its end without a panic.

use std::path::Path;

#[test]
fn the_specs_corpus_replays() {
    replay("specs", tiercache_policy::fuzz::specs);
}

#[test]
fn the_stack_corpus_replays() {
    replay("stack", tiercache_policy::fuzz::stack);
}

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
