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
    // The store's close left spare pages under its 1 MiB floor; the operator's ask takes them.
    let compacted = run_ok(&["compact", "--data", data]);
    assert!(compacted.contains("catalog file compacted"), "{compacted}");
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

/// `--log-format json`: every log line on stderr is one JSON object (here the audit event of
/// a refused console login), so log shippers take them as they are.
#[test]
fn json_logs_are_one_object_per_line() {
    use std::io::{BufRead, BufReader, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = reel()
        .args(["--log-format", "json", "serve", "--data"])
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut console = None;
    let mut line = String::new();
    while console.is_none() && stdout.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.strip_prefix("web console and REST API: http://") {
            console = rest.split('/').next().map(str::to_string);
        }
        line.clear();
    }
    let console = console.expect("the console's address on stdout");
    let body = r#"{"username":"admin","password":"not-the-password"}"#;
    let mut http = std::net::TcpStream::connect(&console).unwrap();
    write!(
        http,
        "POST /api/v1/login HTTP/1.1\r\nHost: {console}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let logs: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let audit = logs
        .iter()
        .find(|l| l["fields"]["message"] == "audit" && l["fields"]["user"] == "admin")
        .unwrap_or_else(|| panic!("no audit event of the refused login in {stderr}"));
    assert_eq!(audit["level"], "INFO");
    assert!(audit["timestamp"].is_string());
    // Lines that are not JSON are reel's own messages (eprintln), never the logger's.
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with('{') || l.starts_with("reel:")),
        "{stderr}"
    );
}
