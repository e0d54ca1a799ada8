//! Arbitrary login/text key data through the target login machine and the SendTargets responder
//! (see `reel_iscsi::fuzzing::fuzz_login`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    reel_iscsi::fuzzing::fuzz_login(data);
});
