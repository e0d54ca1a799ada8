//! Arbitrary CDB sequences to an LTO-9 tape drive holding a memory cartridge: every command
//! must get a proper response (CHECK CONDITION with parseable sense, or a status without
//! sense), whatever the order, the nexus or the insert/remove cycles in between.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_ssc::fuzzing::fuzz_drive(data));
