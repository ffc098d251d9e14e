//! The NBD server's handshake (options, export names, info requests) and request headers.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_cli::nbd::fuzz(data));
