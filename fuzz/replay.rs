//! Replays a committed corpus (`fuzz/corpus/TARGET`) through a fuzz target's entry point:
//! every input must run to its end without a panic. Included by the corpus tests of the crates
//! whose targets these are (`#[path]`), so that they need nothing but the repository.

use std::path::Path;

pub fn replay(target: &str, run: fn(&[u8])) {
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
