//! The cartridge identity / cartridge-memory record decoder on arbitrary bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_media::fuzzing::fuzz_decode_cartridge_info(data));
