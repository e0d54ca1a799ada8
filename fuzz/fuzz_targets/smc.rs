//! Arbitrary command sequences to a medium changer with fake drive bays: every command gets a
//! proper response, and no cartridge is lost or duplicated.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_smc::fuzzing::fuzz_changer(data));
