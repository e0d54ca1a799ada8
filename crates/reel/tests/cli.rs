//! The `reel` binary end to end: serve on a fresh data directory, stop with SIGTERM, restart,
//! and the administration commands on what it left.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn reel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_reel"))
}

fn run_ok(args: &[&str]) -> String {
    let out = reel().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "reel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Starts `reel serve`, waits until it is ready, stops it with SIGTERM; returns its stdout.
fn serve_once(dir: &str) -> String {
    let child = reel()
        .args(["serve", "--data", dir, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Ready once the store exists and the banner is out; poll for the catalog file.
    while !std::path::Path::new(dir)
        .join("catalog/catalog.redb")
        .exists()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "serve exited with {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn serve_makes_a_ready_library_that_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let first = serve_once(data);
    assert!(
        first.contains("20 cartridges (REL001L9 … REL020L9)"),
        "{first}"
    );
    assert!(first.contains("everything is synced"), "{first}");
    let second = serve_once(data);
    assert!(
        second.contains("20 cartridges"),
        "restart must keep the cartridges, not add more: {second}"
    );

    let list = run_ok(&["cartridges", "list", "--data", data]);
    assert_eq!(list.lines().count(), 21, "{list}");
    assert!(
        list.contains("REL007L9") && list.contains("LTO-9"),
        "{list}"
    );
    let created = run_ok(&[
        "cartridges",
        "create",
        "--prefix",
        "WRM",
        "--count",
        "2",
        "--media",
        "lto9-worm",
        "--data",
        data,
    ]);
    assert!(
        created.contains("WRM001LZ") && created.contains("WRM002LZ"),
        "{created}"
    );
    let refused = reel()
        .args(["cartridges", "delete", "WRM001LZ", "--data", data])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "deleting WORM media must fail");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("WORM"));
    run_ok(&["cartridges", "delete", "REL020L9", "--data", data]);
    assert!(run_ok(&["verify", "--data", data]).contains("no damage found"));
    run_ok(&["reclaim", "--data", data]);
    assert!(run_ok(&["stats", "--data", data]).contains("cartridges        21"));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = reel()
        .args(["cartridges", "create", "--media", "dlt7000", "--data", data])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown media"));
    let out = reel()
        .args([
            "cartridges",
            "create",
            "--prefix",
            "TOOLONG",
            "--data",
            data,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("prefix"));
}
