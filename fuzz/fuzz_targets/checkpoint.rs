//! The catalog checkpoint manifest decoder and key parser (`reel-chunkstore/src/checkpoint.rs`)
//! on arbitrary bytes, as stored and with a valid checksum appended: errors are fine, panics
//! are bugs, and whatever decodes must round-trip through the encoder.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_chunkstore::checkpoint_fuzzing(data));
