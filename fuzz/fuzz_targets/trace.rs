//! Every trace reader, with and without skip-bad, a block view and zstd, on arbitrary bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_workload::fuzz::trace(data));
