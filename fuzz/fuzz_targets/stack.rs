//! A policy stack as TOML, the `[cache]` table of an experiment file that `tiercache run`
//! reads: parsed by serde and checked; one that parses is built and decides requests.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_policy::fuzz::stack(data));
