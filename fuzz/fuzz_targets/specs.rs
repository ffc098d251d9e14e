//! The policy, admission, NVCache, NHC, placement, size and device-profile parsers; a policy
//! that parses is built and decides requests.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tiercache_policy::fuzz::specs(data));
