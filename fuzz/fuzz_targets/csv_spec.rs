//! The `--csv-spec` parser, and a parsed spec over a line of the same bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_workload::fuzz::csv_spec(data));
