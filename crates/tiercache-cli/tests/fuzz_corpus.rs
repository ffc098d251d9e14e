//! Replays the committed fuzz corpora of `tiercache serve`'s connection loop
//! (`fuzz/corpus/serve`) and of the NBD handshake and request parsers (`fuzz/corpus/nbd`)
//! through the fuzz targets' own entry points: every input must run to its end without a
//! panic or a hang.

#[path = "../../../fuzz/replay.rs"]
mod corpus;

#[test]
fn the_serve_corpus_replays() {
    corpus::replay("serve", tiercache_cli::serve::fuzz);
}

#[test]
fn the_nbd_corpus_replays() {
    corpus::replay("nbd", tiercache_cli::nbd::fuzz);
}
