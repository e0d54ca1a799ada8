//! A partition's record-map page decoder on arbitrary bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_volume::fuzzing::decode_record_map_page(data));
