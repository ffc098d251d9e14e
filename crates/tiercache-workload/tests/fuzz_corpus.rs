//! Replays the committed fuzz corpus (`fuzz/corpus/`) through the fuzz targets' own entry
//! points, so that what fuzzing found (and fixed) stays fixed: every input must run to its end
//! without a panic. The targets run under cargo-fuzz; this needs nothing but the repository.

#[path = "../../../fuzz/replay.rs"]
mod corpus;

use corpus::replay;

#[test]
fn the_trace_corpus_replays() {
    replay("trace", tiercache_workload::fuzz::trace);
}

#[test]
fn the_csv_spec_corpus_replays() {
    replay("csv_spec", tiercache_workload::fuzz::csv_spec);
}
