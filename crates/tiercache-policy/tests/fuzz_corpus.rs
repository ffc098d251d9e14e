//! Replays the committed fuzz corpora of the policy and capacity parsers (`fuzz/corpus/specs`)
//! and of policy stacks (`fuzz/corpus/stack`) through the fuzz targets' own entry points:
//! every input must run to its end without a panic.

#[path = "../../../fuzz/replay.rs"]
mod corpus;

use corpus::replay;

#[test]
fn the_specs_corpus_replays() {
    replay("specs", tiercache_policy::fuzz::specs);
}

#[test]
fn the_stack_corpus_replays() {
    replay("stack", tiercache_policy::fuzz::stack);
}
