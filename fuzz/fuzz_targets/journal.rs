//! The catalog journal object decoder (`reel-chunkstore/src/journal.rs`) on arbitrary bytes, as
//! stored and with a valid checksum appended: errors are fine, panics are bugs, and whatever
//! decodes must round-trip through the encoder and survive the checks an exported stream's
//! bundle (the same format) gets before an import.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_chunkstore::journal_fuzzing::decode_anything(data));
