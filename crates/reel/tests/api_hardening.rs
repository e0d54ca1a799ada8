//! The REST API's defences against a real `reel serve`: bounded login bodies and audit
//! entries, the login rate limit, password changes that end other sessions, the live stream
//! ending with its token, `/metrics` for loopback peers only, certificate and data directory
//! checks at start, and `reel ctl` logging out.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::api::{Api, admin_password};
use common::{ANY_PORTAL, Server, free_portal};
use serde_json::{Value, json};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Sends one request over a raw connection (the body written from another thread, since the
/// server may answer before reading it) and returns the status line's code.
fn raw_status(base: &str, request_head: &str, body: Vec<u8>) -> Option<u16> {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request_head.as_bytes()).ok()?;
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&body);
    });
    let mut head = String::new();
    let _ = BufReader::new(&mut stream).read_line(&mut head);
    let _ = sender.join();
    head.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn login_bodies_and_audited_usernames_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let base = server.http.clone().unwrap();
    let api = Api::new(&base);
    let admin = api.login("admin", &admin_password(dir.path()));

    // A 1 MB username: refused before anything is stored.
    let body = json!({"username": "u".repeat(1 << 20), "password": "whatever-password"})
        .to_string()
        .into_bytes();
    let head = format!(
        "POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    assert_eq!(raw_status(&base, &head, body), Some(413));

    // A long username that fits the body limit: audited, but cut to a bound.
    let long = "v".repeat(3000);
    let (status, _) = api.call(
        "POST",
        "/api/v1/login",
        None,
        Some(&json!({"username": long, "password": "whatever-password"}).to_string()),
    );
    assert_eq!(status, 401);
    let events = api.ok("GET", "/api/v1/events?limit=10", &admin, None);
    let login = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "login" && e["result"] != "ok")
        .expect("the failed login is audited");
    let (user, target) = (
        login["user"].as_str().unwrap(),
        login["target"].as_str().unwrap(),
    );
    assert!(user.len() <= 100 && target.len() <= 150, "{login}");
    assert!(target.ends_with("from 127.0.0.1"), "{login}");
    // Other routes take small bodies too.
    let (status, _) = api.call(
        "POST",
        "/api/v1/tokens",
        Some(&admin),
        Some(&json!({"name": "n".repeat(1 << 20)}).to_string()),
    );
    assert_eq!(status, 413);
    server.stop();
}

#[test]
fn failed_logins_are_rate_limited_per_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let base = server.http.clone().unwrap();
    let api = Api::new(&base);
    let bad = json!({"username": "admin", "password": "wrong-password"}).to_string();

    // Concurrent attempts beyond the per-client cap are turned away at once.
    let answers: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| api.call("POST", "/api/v1/login", None, Some(&bad)).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        answers.iter().all(|s| *s == 401 || *s == 429),
        "{answers:?}"
    );
    assert!(answers.contains(&429), "8 logins at once: {answers:?}");

    // Then, one at a time, the budget runs out: 429 with Retry-After.
    let mut limited = None;
    for _ in 0..30 {
        let answer = api.send("POST", "/api/v1/login", None, Some(&bad));
        let (status, retry, v) = (answer.status, answer.retry_after.clone(), answer.json());
        if status == 429 {
            assert_eq!(v["error"]["code"], "too_many_requests", "{v}");
            limited = retry;
            break;
        }
        assert_eq!(status, 401, "{v}");
    }
    let retry: u64 = limited
        .expect("429 with Retry-After within 30 failed logins")
        .parse()
        .unwrap();
    assert!((1..=120).contains(&retry), "Retry-After {retry}");
    // After waiting as told, a correct password works again.
    std::thread::sleep(Duration::from_secs(retry));
    api.login("admin", &admin_password(dir.path()));
    server.stop();
}

#[test]
fn events_are_paged() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let admin = api.login("admin", &admin_password(dir.path()));
    for i in 0..12 {
        api.ok(
            "POST",
            "/api/v1/tokens",
            &admin,
            Some(json!({"name": format!("t{i}")})),
        );
    }
    let seqs = |v: &Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let first = seqs(&api.ok("GET", "/api/v1/events?limit=5", &admin, None));
    assert_eq!(first.len(), 5);
    assert!(
        first.windows(2).all(|w| w[0] > w[1]),
        "newest first: {first:?}"
    );
    let before = first[4];
    let second = seqs(&api.ok(
        "GET",
        &format!("/api/v1/events?limit=5&before={before}"),
        &admin,
        None,
    ));
    assert_eq!(second.len(), 5);
    assert!(
        second.iter().all(|s| *s < before),
        "{first:?} then {second:?}"
    );
    assert_eq!(second[0], before - 1, "no gap between pages");
    server.stop();
}

#[test]
fn a_password_change_needs_the_current_one_and_ends_other_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let password = admin_password(dir.path());
    let admin = api.login("admin", &password);
    api.ok(
        "POST",
        "/api/v1/users",
        &admin,
        Some(json!({"username": "vera", "password": "viewer-pass", "role": "viewer"})),
    );
    let vera = api.login("vera", "viewer-pass");
    let vera_other = api.login("vera", "viewer-pass");
    let vera_token = api.ok(
        "POST",
        "/api/v1/tokens",
        &vera,
        Some(json!({"name": "script"})),
    )["token"]
        .as_str()
        .unwrap()
        .to_string();

    let path = "/api/v1/users/vera/password";
    let (status, v) = api.call(
        "PUT",
        path,
        Some(&vera),
        Some(r#"{"password":"new-password"}"#),
    );
    assert_eq!(status, 400, "own password without the current one: {v}");
    let (status, v) = api.call(
        "PUT",
        path,
        Some(&vera),
        Some(r#"{"password":"new-password","current_password":"not-it-at-all"}"#),
    );
    assert_eq!(status, 403, "a wrong current password: {v}");
    api.ok(
        "PUT",
        path,
        &vera,
        Some(json!({"password": "new-password", "current_password": "viewer-pass"})),
    );
    // The caller's own session goes on; every other one and every API token ends.
    api.ok("GET", "/api/v1/me", &vera, None);
    for gone in [&vera_other, &vera_token] {
        let (status, _) = api.call("GET", "/api/v1/me", Some(gone), None);
        assert_eq!(status, 401);
    }
    // An admin setting someone's password needs no current one and ends all their sessions.
    api.ok(
        "PUT",
        path,
        &admin,
        Some(json!({"password": "third-password"})),
    );
    let (status, _) = api.call("GET", "/api/v1/me", Some(&vera), None);
    assert_eq!(status, 401);
    api.login("vera", "third-password");
    server.stop();
}

#[test]
fn the_live_stream_ends_when_its_token_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let base = server.http.clone().unwrap();
    let api = Api::new(&base);
    let token = api.login("admin", &admin_password(dir.path()));
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    write!(
        stream,
        "GET /api/v1/monitor/stream?token={token} HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut logged_out = false;
    let ended = loop {
        if Instant::now() > deadline {
            break false;
        }
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break true,
        }
        // The chunked body's last chunk also ends it.
        if logged_out && seen.ends_with(b"0\r\n\r\n") {
            break true;
        }
        if !logged_out && String::from_utf8_lossy(&seen).contains("event: monitor") {
            api.ok("POST", "/api/v1/logout", &token, None);
            logged_out = true;
            seen.clear();
        }
    };
    assert!(logged_out, "the stream sent a sample");
    assert!(ended, "the stream still ran 20 s after logout");
    server.stop();
}

/// A local address that is not loopback (the host's own interface address): a connection
/// to it comes from it, so the server sees a non-loopback peer.
fn non_loopback_address() -> Option<std::net::IpAddr> {
    // Connecting a UDP socket sends nothing; it only picks the route's source address.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn metrics_answer_loopback_peers_only() {
    let Some(ip) = non_loopback_address() else {
        eprintln!("skipped: this machine has no non-loopback address");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &["--http", "0.0.0.0:0"]);
    let url = server.http.clone().unwrap();
    let port = url.rsplit(':').next().unwrap().to_string();
    let local = Api::new(&format!("http://127.0.0.1:{port}"));
    let (status, _) = local.call("GET", "/metrics", None, None);
    assert_eq!(status, 200, "from loopback");
    let remote = Api::new(&format!("http://{ip}:{port}"));
    let (status, v) = remote.call("GET", "/metrics", None, None);
    assert_eq!(status, 403, "from {ip}: {v}");
    // The API itself still answers that peer.
    let token = remote.login("admin", &admin_password(dir.path()));
    remote.ok("GET", "/api/v1/me", &token, None);
    drop(server);

    // With `metrics = "token"`, other peers may read them with a token.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(&config, "[http]\nmetrics = \"token\"\n").unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        ANY_PORTAL,
        &["--http", "0.0.0.0:0", "--config", config.to_str().unwrap()],
    );
    let port = server
        .http
        .clone()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let remote = Api::new(&format!("http://{ip}:{port}"));
    let (status, _) = remote.call("GET", "/metrics", None, None);
    assert_eq!(status, 401);
    let token = remote.login("admin", &admin_password(&dir.path().join("data")));
    let (status, _) = remote.call("GET", "/metrics", Some(&token), None);
    assert_eq!(status, 200);
    server.stop();
}

/// Runs `reel serve` expecting it to stop on its own; returns (exit ok, stdout, stderr).
fn serve_until_exit(args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "reel serve still runs after 30 s; stdout:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_bad_certificate_stops_reel_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(&key, "not a key\n").unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let portal = free_portal().to_string();
    let data = dir.path().join("data");
    let (ok, out, err) = serve_until_exit(&[
        "--listen",
        &portal,
        "--http",
        "127.0.0.1:0",
        "--data",
        data.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        !out.contains("https://"),
        "no URL for a console that cannot run: {out}"
    );
    assert!(err.contains("certificate"), "{err}");
    assert!(
        err.contains(cert.to_str().unwrap()),
        "names the file: {err}"
    );
}

#[test]
fn the_data_directory_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let reel = |data: &Path| {
        Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(["cartridges", "list", "--data"])
            .arg(data)
            .output()
            .unwrap()
    };
    // Created 0700.
    let new = dir.path().join("new");
    let out = reel(&new);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&new), 0o700);

    // A group- or world-readable one is refused, with the fix in the message.
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = reel(&open);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chmod 700") && err.contains(open.to_str().unwrap()),
        "{err}"
    );
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o750)).unwrap();
    assert!(!reel(&open).status.success(), "group-readable");

    // The first admin password is written 0600 even over an existing file.
    let data = dir.path().join("serve");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = data.join("initial-admin-password");
    std::fs::write(&file, "stale\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = Server::start(&data, ANY_PORTAL, &[]);
    assert_eq!(mode(&file), 0o600);
    assert_ne!(admin_password(&data), "stale");
    server.stop();
}

#[test]
fn open_listeners_without_chap_or_tls_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_portal().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args([
            "serve",
            "--listen",
            &format!("0.0.0.0:{port}"),
            "--http",
            "0.0.0.0:0",
            "--data",
        ])
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        if line.unwrap().starts_with("Ctrl-C") {
            break;
        }
    }
    let drain = std::thread::spawn(move || for _ in lines {});
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    drain.join().unwrap();
    // (Not its exit status: a SIGTERM right after the banner can come before the handler.)
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("iSCSI") && err.contains("CHAP"),
        "{err}"
    );
    assert!(err.contains("HTTP") && err.contains("TLS"), "{err}");
}

#[test]
fn ctl_prints_the_drive_model_and_logs_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let url = server.http.clone().unwrap();
    let password = admin_password(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["ctl", "--url", &url, "--user", "admin", "status"])
        .env("REEL_PASSWORD", &password)
        .env_remove("REEL_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text.lines().find(|l| l.starts_with("library ")).unwrap();
    assert!(
        summary.contains(" 4 x ") && !summary.contains('{') && !summary.contains('['),
        "{summary}"
    );
    // Its session ended with the call: the audit log shows the logout.
    let api = Api::new(&url);
    let admin = api.login("admin", &password);
    let events = api.ok("GET", "/api/v1/events?limit=20", &admin, None);
    let actions: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert!(actions.contains(&"logout"), "{actions:?}");
    server.stop();
}
