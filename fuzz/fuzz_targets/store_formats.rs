//! Every chunk-store decoder (pack header/trailer/footer, chunk locations, extent rows, blob
//! decompression, pack id lists) on arbitrary bytes: errors are fine, panics are bugs.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_chunkstore::format::fuzzing::decode_anything(data));
