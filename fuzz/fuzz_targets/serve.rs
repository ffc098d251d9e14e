//! `tiercache serve`'s connection loop after the handshake: requests, payloads, the budget,
//! the workers and their replies, over a socket pair.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_cli::serve::fuzz(data));
