//! Object key validation on arbitrary strings.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(key) = reel_backend::Key::new(s) {
            assert_eq!(key.as_str(), s);
        }
    }
});
