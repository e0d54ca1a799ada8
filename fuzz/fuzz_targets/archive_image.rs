//! The archive tier's image decoders (pieces and manifests) on arbitrary bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_volume::fuzzing::decode_archive_image(data));
