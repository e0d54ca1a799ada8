//! `reel serve` against libiscsi's real command-line clients (Debian `libiscsi-bin`):
//! `iscsi-ls` (discovery, with and without CHAP), `iscsi-inq` (standard INQUIRY and VPD
//! pages, CHAP one-way and refused logins) and the `iscsi-test-cu` SCSI/iSCSI suite.
//!
//! The tools are required: `scripts/test-all.sh` installs them. The suite's results
//! are compared with `tests/libiscsi-known-failures.txt`, where every failure we
//! accept has its reason; a new failure fails this test.

use std::collections::BTreeSet;
use std::process::Command;

mod common;
use common::{Server, free_portal};

const CONFIG: &str = r#"
[[iscsi.target]]
name = "iqn.2026-11.org.reel.test:open"
alias = "open"
kind = "null-disk"
luns = 2
[[iscsi.target]]
name = "iqn.2026-11.org.reel.test:chap"
kind = "null-disk"
chap = { user = "reel-user", secret = "reel-secret-12" }
[[iscsi.target]]
name = "iqn.2026-11.org.reel.test:acl"
kind = "null-disk"
allow_initiators = ["iqn.2026-11.org.reel.test:someone-else"]
"#;

/// `reel serve` with CONFIG on a free port, and the directory that holds its data.
struct Running {
    _server: Server,
    portal: String,
    _dir: tempfile::TempDir,
}

fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let portal = free_portal();
    let config = config.to_str().unwrap().to_string();
    let server = Server::start(
        &dir.path().join("data"),
        portal,
        &["--cartridges", "0", "--config", &config],
    );
    Running {
        _server: server,
        portal: portal.to_string(),
        _dir: dir,
    }
}

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!(
            "{name} is not runnable ({e}); install Debian's libiscsi-bin (scripts/test-all.sh does)"
        )
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn libiscsi_tools_discover_log_in_and_inquire() {
    let server = start();
    let portal = &server.portal;

    let (ok, out) = tool("iscsi-ls", &[&format!("iscsi://{portal}")]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Target:iqn.2026-11.org.reel.test:open Portal:"),
        "{out}"
    );
    assert!(
        out.contains("Target:iqn.2026-11.org.reel.test:chap"),
        "{out}"
    );
    assert!(
        !out.contains(":acl"),
        "an initiator outside the ACL must not see the target: {out}"
    );
    // Discovery with CHAP credentials offered: still works.
    let (ok, out) = tool(
        "iscsi-ls",
        &[&format!("iscsi://reel-user%reel-secret-12@{portal}")],
    );
    assert!(ok, "{out}");

    let open = format!("iscsi://{portal}/iqn.2026-11.org.reel.test:open/1");
    let (ok, out) = tool("iscsi-inq", &[&open]);
    assert!(
        ok && out.contains("Vendor:REEL") && out.contains("Product:NULLDISK"),
        "{out}"
    );
    let (ok, out) = tool("iscsi-inq", &["-e", "1", "-c", "0", &open]);
    assert!(
        ok && out.contains("UNIT_SERIAL_NUMBER") && out.contains("DEVICE_IDENTIFICATION"),
        "{out}"
    );
    let (ok, out) = tool("iscsi-inq", &["-e", "1", "-c", "128", &open]);
    assert!(
        ok && out.contains("Unit Serial Number:[REELNULL000001]"),
        "{out}"
    );
    let (ok, out) = tool("iscsi-inq", &["-e", "1", "-c", "131", &open]);
    assert!(
        ok && out.contains("NAA") && out.contains("T10_VENDORT_ID"),
        "{out}"
    );

    let chap = |secret: &str| {
        format!("iscsi://reel-user%{secret}@{portal}/iqn.2026-11.org.reel.test:chap/0")
    };
    let (ok, out) = tool("iscsi-inq", &[&chap("reel-secret-12")]);
    assert!(ok && out.contains("Vendor:REEL"), "{out}");
    let (ok, out) = tool("iscsi-inq", &[&chap("wrong-secret-1")]);
    assert!(!ok && out.contains("Authentication failure"), "{out}");
    let (ok, out) = tool(
        "iscsi-inq",
        &[&format!(
            "iscsi://{portal}/iqn.2026-11.org.reel.test:chap/0"
        )],
    );
    assert!(!ok && out.contains("Authentication failure"), "{out}");
    let (ok, out) = tool(
        "iscsi-inq",
        &[&format!("iscsi://{portal}/iqn.2026-11.org.reel.test:acl/0")],
    );
    assert!(!ok && out.contains("Authorization failure"), "{out}");
}

/// "Suite X, Test Y had failures:" lines of iscsi-test-cu's normal output.
fn failed_tests(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Suite "))
        .filter_map(|l| l.strip_suffix(" had failures:"))
        .map(|l| l.replace(", Test ", "."))
        .collect()
}

fn known_failures() -> BTreeSet<String> {
    let text = include_str!("libiscsi-known-failures.txt");
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn iscsi_test_cu_suite_has_no_new_failures() {
    let server = start();
    let url = format!("iscsi://{}/iqn.2026-11.org.reel.test:open/0", server.portal);
    // -d: destructive tests are fine on a null disk; -n: one line per failing test.
    let (_, out) = tool("iscsi-test-cu", &["-d", "-n", &url]);
    let summary = out
        .lines()
        .find(|l| l.trim_start().starts_with("tests"))
        .unwrap_or("")
        .to_string();
    eprintln!("iscsi-test-cu: {summary}");
    assert!(
        summary.contains("615"),
        "the suite did not run to its end:\n{out}"
    );
    let failed = failed_tests(&out);
    let known = known_failures();
    let new: Vec<&String> = failed.difference(&known).collect();
    assert!(new.is_empty(), "new iscsi-test-cu failures: {new:?}\n{out}");
    let fixed: Vec<&String> = known.difference(&failed).collect();
    if !fixed.is_empty() {
        eprintln!("now passing, remove from libiscsi-known-failures.txt: {fixed:?}");
    }
}

#[test]
fn failure_lines_are_parsed() {
    let sample = "Suite Verify10, Test Dpo had failures:\n    1. x.c:87 - CU_ASSERT\n";
    assert_eq!(
        failed_tests(sample),
        BTreeSet::from(["Verify10.Dpo".to_string()])
    );
}
