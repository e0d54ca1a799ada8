//! Arbitrary bytes as a saved changer inventory: decoding never panics, and what decodes
//! re-encodes to the same bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_smc::fuzzing::fuzz_inventory(data));
