//! What the benchmarks' end-to-end tests share: the `reel` binary they start (built once if
//! it is not in the target directory) and whether Debian's tgt is installed.
//!
//! The `reel` binary is not a dependency cargo can build for this crate's tests, so it is
//! taken from the target directory (`target/PROFILE/reel`) and built with cargo if missing.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use reel_bench::harness::procs;

/// The `reel` binary of this profile, built once if it is not there.
pub fn reel() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = procs::reel_binary(None) {
            return bin;
        }
        let exe = std::env::current_exe().unwrap();
        let release = exe.components().any(|c| c.as_os_str() == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "reel"]);
        if release {
            cmd.arg("--release");
        }
        eprintln!("building the reel binary for this test: {cmd:?}");
        assert!(
            cmd.status().unwrap().success(),
            "cargo build -p reel failed"
        );
        procs::reel_binary(None).expect("reel binary after building it")
    })
    .clone()
}

pub fn tgt_installed() -> bool {
    ["tgtd", "tgtadm", "tgtimg"]
        .iter()
        .all(|t| procs::which(t).is_some())
}
