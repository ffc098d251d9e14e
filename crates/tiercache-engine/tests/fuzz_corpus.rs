//! Replays the committed fuzz corpus of the NBD handshake and request parsers
//! (`fuzz/corpus/nbd`) through the fuzz target's own entry point: every input must run to its
//! end without a panic.

#[path = "../../../fuzz/replay.rs"]
mod corpus;

#[test]
fn the_nbd_corpus_replays() {
    corpus::replay("nbd", tiercache_engine::nbd::fuzz);
}
