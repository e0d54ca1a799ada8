//! iSCSI PDU framing and parsing of arbitrary bytes, with and without digests
//! (see `reel_iscsi::fuzzing::fuzz_pdu`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    reel_iscsi::fuzzing::fuzz_pdu(data);
});
