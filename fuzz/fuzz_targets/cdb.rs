//! Arbitrary CDB bytes plus data-out to a LUN table holding a NullDisk: every input must get a
//! proper response (CHECK CONDITION with parseable sense, or a status without sense).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_scsi::fuzzing::fuzz_cdb(data));
