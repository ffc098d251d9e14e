//! Replays the committed fuzz corpus of `tiercache serve`'s connection loop
//! (`fuzz/corpus/serve`) through the fuzz target's own entry point: every input must run to
//! its end without a panic or a hang.

#[path = "../../../fuzz/replay.rs"]
mod corpus;

#[test]
fn the_serve_corpus_replays() {
    corpus::replay("serve", tiercache_cli::serve::fuzz);
}
