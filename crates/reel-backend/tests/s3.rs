//! The S3 back end against two real S3 servers on loopback, never a mock: versitygw and s3proxy
//! (started by `reel-s3test`; installed by `scripts/s3-servers.sh install`, and a missing server
//! fails the test, with that hint).
//!
//! One test per server: starting a server is the slow part (a JVM for s3proxy), so each test
//! starts its server once and runs every check against it in turn, each check on a fresh random
//! prefix of the one bucket. The restart check comes last since it takes the server away.

#![cfg(feature = "s3")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Check, backend, config, fresh_prefix, key, pattern};
use reel_backend::{
    Backend, BackendError, Key, PutMode, S3Backend, S3Config, S3Counters, S3Credentials,
    conformance,
};
use reel_s3test::{Fault, FaultProxy, Kind, S3Server};

#[test]
fn versitygw() {
    run_all_checks(Kind::Versitygw);
}

#[test]
fn s3proxy() {
    run_all_checks(Kind::S3proxy);
}

/// versitygw over https, its certificate signed by a CA no system trusts. Without that CA the
/// first request fails at once, naming the certificate (a refused certificate is not retried
/// for the retry window); with it (`ca_certificates_pem`, `[store.s3] ca_file` in reel) the
/// conformance suite passes. A CA file with no certificate in it is refused at open.
#[test]
fn versitygw_over_https() {
    let server = S3Server::start_https(Kind::Versitygw).unwrap_or_else(|e| panic!("{e}"));
    assert!(server.endpoint().starts_with("https://"));
    let mut c = config(&server, &fresh_prefix());
    c.allow_http = false;
    let untrusted = S3Backend::open(&c).unwrap();
    // "not retried" is the final error's (a retried one would wait out the window first).
    match untrusted.put(&key("k"), b"v", PutMode::Create) {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("TLS refused the server")
                    && text.contains("UnknownIssuer")
                    && text.contains("not retried"),
                "{text}"
            );
        }
        Ok(()) => panic!("a put to a server whose certificate no one trusts succeeded"),
    }

    c.ca_certificates_pem = Some(b"not a certificate".to_vec());
    let refused = S3Backend::open(&c).map(|_| ()).unwrap_err().to_string();
    assert!(refused.contains("no PEM certificate"), "{refused}");

    let ca = server.ca_certificate_pem().unwrap();
    conformance::run_all(&|| {
        let mut c = config(&server, &fresh_prefix());
        c.allow_http = false;
        c.ca_certificates_pem = Some(ca.clone());
        Box::new(S3Backend::open(&c).unwrap())
    });
}

fn run_all_checks(kind: Kind) {
    let checks: [(&str, Check); 17] = [
        ("conformance", conformance_suite),
        (
            "conformance of the write-back cache over S3",
            cached_conformance_suite,
        ),
        ("prefix isolation", prefix_isolation),
        ("wrong credentials", wrong_credentials),
        (
            "a credentials file that changes is followed",
            credentials_file_changes,
        ),
        (
            "temporary keys from a credentials service, renewed",
            credentials_service_keys,
        ),
        (
            "the instance profile, only when configured",
            instance_metadata_keys,
        ),
        ("inside a tokio runtime", inside_tokio_runtime),
        ("large object", large_object),
        ("counters", counters),
        (
            "flat store keys skip the conflict check; signed and unsigned bodies",
            flat_keys_and_payload_signing,
        ),
        ("list pagination", list_pagination),
        ("503 SlowDown and slow answers", slowdown_and_slow_answers),
        ("create whose answer times out", create_answer_times_out),
        ("create whose answer is lost", create_answer_lost),
        ("507 Insufficient Storage", insufficient_storage),
        ("upload cut short", upload_cut_short),
    ];
    let mut server = common::run_checks(kind, &checks);
    let t = Instant::now();
    put_while_server_restarts(&mut server);
    eprintln!(
        "[{kind}] put while the server restarts: ok in {:?}",
        t.elapsed()
    );
}

fn conformance_suite(server: &S3Server) {
    conformance::run_all(&|| Box::new(backend(server, &fresh_prefix())));
}

/// The write-back cache in front of this server meets the same contract (what reel runs).
fn cached_conformance_suite(server: &S3Server) {
    common::cached_conformance(&|| Arc::new(backend(server, &fresh_prefix())));
}

/// Two prefixes of one bucket are separate stores; keys come back without the prefix.
fn prefix_isolation(server: &S3Server) {
    let (pa, pb) = (fresh_prefix(), fresh_prefix());
    let a = backend(server, &pa);
    let b = backend(server, &pb);
    a.put(&key("packs/1.pack"), b"from a", PutMode::Create)
        .unwrap();
    b.put(&key("packs/1.pack"), b"from b", PutMode::Create)
        .unwrap();
    b.put(&key("only-b"), b"b", PutMode::Create).unwrap();
    assert_eq!(a.get(&key("packs/1.pack")).unwrap(), b"from a");
    assert_eq!(b.get(&key("packs/1.pack")).unwrap(), b"from b");
    assert!(matches!(
        a.get(&key("only-b")),
        Err(BackendError::NotFound(_))
    ));
    let keys = |be: &S3Backend| -> Vec<String> {
        be.list("")
            .unwrap()
            .into_iter()
            .map(|m| m.key.to_string())
            .collect()
    };
    assert_eq!(keys(&a), ["packs/1.pack"]);
    assert_eq!(keys(&b), ["only-b", "packs/1.pack"]);
    // A prefix that is a string prefix of another (`p` and `p1`) does not leak either: the
    // back end's prefix ends at a `/`.
    let shorter = backend(server, &pa[..pa.len() - 1]);
    assert!(keys(&shorter).is_empty(), "{:?}", keys(&shorter));
    a.delete(&key("packs/1.pack")).unwrap();
    assert_eq!(b.get(&key("packs/1.pack")).unwrap(), b"from b");
    assert!(
        a.describe()
            .contains(&format!("/{pa} at {}", server.endpoint()))
    );
}

/// A wrong secret is an `Io` error that says so, quickly: a 403 is not retried.
fn wrong_credentials(server: &S3Server) {
    let mut c = config(server, &fresh_prefix());
    c.credentials = S3Credentials::Static {
        access_key_id: server.access_key().to_string(),
        secret_access_key: "not-the-secret".to_string(),
        session_token: None,
    };
    let b = S3Backend::open(&c).unwrap();
    let t = Instant::now();
    let put = b.put(&key("k"), b"x", PutMode::Create);
    let get = b.get(&key("k"));
    let list = b.list("");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "refused credentials took {:?}: retried?",
        t.elapsed()
    );
    for r in [put.map(|()| Vec::new()), get, list.map(|_| Vec::new())] {
        match r {
            Err(e @ BackendError::Io { .. }) => {
                let text = e.to_string();
                assert!(text.contains("refused the credentials"), "{text}");
                assert!(text.contains(&server.endpoint()), "{text}");
                assert!(!text.contains("not-the-secret"), "{text}");
            }
            other => panic!("wrong credentials: expected an Io error, got {other:?}"),
        }
    }
    // Unknown access key as well.
    c.credentials = S3Credentials::Static {
        access_key_id: "NOSUCHKEY".to_string(),
        secret_access_key: server.secret_key().to_string(),
        session_token: None,
    };
    let b = S3Backend::open(&c).unwrap();
    let e = b.get(&key("k")).unwrap_err().to_string();
    assert!(e.contains("refused the credentials"), "{e}");
}

/// Keys from a shared credentials file follow the file while the back end runs: a wrong
/// secret fixed in the file is used from the next request on, a half-written version keeps the
/// last good keys, and a refusal names the version that could not be used.
fn credentials_file_changes(server: &S3Server) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials");
    let write = |secret: &str| {
        // Written aside and renamed into place, as `aws configure` and editors do.
        let text = format!(
            "[reel]\naws_access_key_id = {}\naws_secret_access_key = {secret}\n",
            server.access_key()
        );
        std::fs::write(dir.path().join("new"), text).unwrap();
        std::fs::rename(dir.path().join("new"), &file).unwrap();
    };
    write("not-the-secret");
    let mut c = config(server, &fresh_prefix());
    c.credentials = S3Credentials::Environment;
    let env = |name: &str| match name {
        "AWS_SHARED_CREDENTIALS_FILE" => Some(file.display().to_string()),
        "AWS_PROFILE" => Some("reel".to_string()),
        _ => None,
    };
    let b = S3Backend::open_with_env(&c, &env).unwrap();
    let e = b.put(&key("k"), b"one", PutMode::Create).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("refused the credentials from profile reel"),
        "{text}"
    );

    write(server.secret_key());
    b.put(&key("k"), b"one", PutMode::Create).unwrap();
    assert_eq!(b.get(&key("k")).unwrap(), b"one");

    // A version without the profile: the last good keys go on working.
    std::fs::write(&file, "[other]\naws_access_key_id = x\n").unwrap();
    assert_eq!(b.get(&key("k")).unwrap(), b"one");

    // Wrong keys in a good version are used (and refused); a broken version after them
    // leaves them in use, and the refusal says why the latest version is not.
    write("not-the-secret");
    assert!(b.get(&key("k")).is_err());
    std::fs::write(&file, "[reel\n").unwrap();
    let e = b.get(&key("k")).unwrap_err().to_string();
    assert!(
        e.contains("its latest version is not used") && e.contains("unterminated section"),
        "{e}"
    );
    assert!(!e.contains("not-the-secret"), "{e}");
    write(server.secret_key());
    assert_eq!(b.get(&key("k")).unwrap(), b"one");
}

/// Temporary keys from a container credentials service (EKS Pod Identity's protocol: a GET
/// with the token file's contents as `Authorization`, keys and their expiry in JSON). The real
/// service exists only inside AWS, so a stand-in on loopback serves the S3 server's keys with a
/// session token. Neither server here has STS, so neither accepts a session token: versitygw
/// answers InvalidToken, s3proxy 501 NotImplemented (final, not retried) — which shows the
/// fetched token reached the server. The client fetches keys with the token file's contents at
/// the first request, keeps them while they have more than five minutes left, and fetches new
/// ones before they expire, with no restart. A service that refuses the token fails the request.
fn credentials_service_keys(server: &S3Server) {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("pod-token");
    std::fs::write(&token_file, "pod-token-1").unwrap();
    let keys = temporary_keys(server);
    let (base, asked) = stand_in(move |request| {
        if request.header("authorization") == Some("pod-token-1") {
            ("200 OK", keys())
        } else {
            ("403 Forbidden", "{\"Message\":\"bad token\"}".to_string())
        }
    });
    let uri = format!("{base}/v1/credentials");
    let mut c = config(server, &fresh_prefix());
    c.credentials = S3Credentials::Environment;
    let env = |name: &str| match name {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI" => Some(uri.clone()),
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" => Some(token_file.display().to_string()),
        "HOME" => Some(dir.path().display().to_string()),
        _ => None,
    };
    // The server's answer to a request signed with the service's keys and session token.
    let session_refused = |r: Result<Vec<u8>, BackendError>| {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("InvalidToken") || e.contains("501 Not Implemented"),
            "{e}"
        );
    };
    let b = S3Backend::open_with_env(&c, &env).unwrap();
    session_refused(b.get(&key("k")));
    session_refused(
        b.put(&key("k"), b"one", PutMode::Create)
            .map(|()| Vec::new()),
    );
    // One fetch for both requests (the keys have more than five minutes left), with the token.
    assert_eq!(
        *asked.lock().unwrap(),
        ["GET /v1/credentials authorization=pod-token-1"]
    );
    std::thread::sleep(Duration::from_millis(2500));
    session_refused(b.get(&key("k")));
    assert_eq!(asked.lock().unwrap().len(), 2, "the keys were not renewed");

    // A service that refuses the token: the request fails, naming the service.
    let b = S3Backend::open_with_env(&c, &env).unwrap();
    std::fs::write(&token_file, "pod-token-2").unwrap();
    let e = b.get(&key("k")).unwrap_err().to_string();
    assert!(e.contains("403") && e.contains(&uri), "{e}");
}

/// The EC2 instance profile through the instance metadata service (IMDSv2: a session token from
/// a PUT, then the role's name and its keys), only when configured
/// (`S3Config::instance_metadata`); a stand-in on loopback plays the service, as in
/// [`credentials_service_keys`], and the S3 server's refusal of the session token shows the keys
/// were used.
fn instance_metadata_keys(server: &S3Server) {
    let keys = temporary_keys(server);
    let (base, asked) = stand_in(move |request| {
        let token = request.header("x-aws-ec2-metadata-token") == Some("imds-token");
        match (request.method.as_str(), request.path.as_str()) {
            ("PUT", "/latest/api/token") => ("200 OK", "imds-token".to_string()),
            ("GET", "/latest/meta-data/iam/security-credentials/") if token => {
                ("200 OK", "reel-node".to_string())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/reel-node") if token => {
                ("200 OK", keys())
            }
            _ => ("401 Unauthorized", String::new()),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let env = |name: &str| (name == "HOME").then(|| dir.path().display().to_string());
    let mut c = config(server, &fresh_prefix());
    c.credentials = S3Credentials::Environment;
    // Not configured: no keys anywhere is an error at open, and nothing is asked.
    let e = S3Backend::open_with_env(&c, &env).unwrap_err().to_string();
    assert!(e.contains("no instance metadata service configured"), "{e}");
    assert!(asked.lock().unwrap().is_empty());
    c.instance_metadata = Some(base);
    let b = S3Backend::open_with_env(&c, &env).unwrap();
    let e = b.get(&key("k")).unwrap_err().to_string();
    assert!(
        e.contains("InvalidToken") || e.contains("501 Not Implemented"),
        "{e}"
    );
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "PUT /latest/api/token",
            "GET /latest/meta-data/iam/security-credentials/ x-aws-ec2-metadata-token=imds-token",
            "GET /latest/meta-data/iam/security-credentials/reel-node \
             x-aws-ec2-metadata-token=imds-token",
        ]
    );
}

/// The server's keys as a credentials service hands them out (JSON, as ECS, EKS Pod Identity
/// and the EC2 metadata service do), with a session token numbered per call and an expiry
/// 302 s away: two seconds before the S3 client wants new keys (it renews with five minutes
/// left).
fn temporary_keys(server: &S3Server) -> impl Fn() -> String + Send + 'static {
    let (access_key, secret_key) = (
        server.access_key().to_string(),
        server.secret_key().to_string(),
    );
    let served = std::sync::atomic::AtomicUsize::new(0);
    move || {
        let n = served.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let expiration = std::process::Command::new("date")
            .args(["-u", "-d", "+302 seconds", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .unwrap();
        let expiration = String::from_utf8(expiration.stdout).unwrap();
        format!(
            "{{\"AccessKeyId\":\"{access_key}\",\"SecretAccessKey\":\"{secret_key}\",\
             \"Token\":\"session-{n}\",\"Expiration\":\"{}\"}}",
            expiration.trim()
        )
    }
}

/// A request to a [`stand_in`].
struct StandInRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl StandInRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A stand-in HTTP service on loopback for a credentials service that only exists inside AWS:
/// each request answered by `answer` (status line, JSON or text body), one connection per
/// request. Returns its base URL and a log of "METHOD PATH" plus the credential headers
/// (`authorization`, `x-aws-ec2-metadata-token`) of each request.
fn stand_in(
    answer: impl Fn(&StandInRequest) -> (&'static str, String) + Send + 'static,
) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let asked: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut first = String::new();
            if reader.read_line(&mut first).unwrap_or(0) == 0 {
                continue;
            }
            let mut parts = first.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let mut request = StandInRequest {
                method: method.to_string(),
                path: path.to_string(),
                headers: Vec::new(),
            };
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    request
                        .headers
                        .push((name.trim().to_string(), value.trim().to_string()));
                }
            }
            let mut entry = format!("{} {}", request.method, request.path);
            for name in ["authorization", "x-aws-ec2-metadata-token"] {
                if let Some(value) = request.header(name) {
                    entry.push_str(&format!(" {name}={value}"));
                }
            }
            log.lock().unwrap().push(entry);
            let (status, body) = answer(&request);
            let _ = (&stream).write_all(
                format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    (base, asked)
}

/// The server calls the back end from threads inside its tokio runtime, where a nested
/// `block_on` would panic; the back end's own runtime does the work. Dropping it there is fine.
fn inside_tokio_runtime(server: &S3Server) {
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for rt in [current, multi] {
        let prefix = fresh_prefix();
        rt.block_on(async {
            let b = backend(server, &prefix);
            b.put(&key("a/b"), b"inside", PutMode::Create).unwrap();
            assert_eq!(b.get(&key("a/b")).unwrap(), b"inside");
            assert_eq!(b.list("a/").unwrap().len(), 1);
            // From a spawned task too, as a request handler would.
            let got = tokio::spawn(async move {
                let v = b.get_range(&key("a/b"), 1..4).unwrap();
                drop(b);
                v
            })
            .await
            .unwrap();
            assert_eq!(got, b"nsi");
        });
    }
}

/// A 32 MiB object round trip, ranged reads across it, and ranges past the end.
fn large_object(server: &S3Server) {
    let b = backend(server, &fresh_prefix());
    let data = pattern(32 << 20, 9);
    let k = key("packs/big.pack");
    let t = Instant::now();
    b.put(&k, &data, PutMode::Create).unwrap();
    let put = t.elapsed();
    let t = Instant::now();
    assert!(
        b.get(&k).unwrap() == data,
        "32 MiB object came back different"
    );
    eprintln!("  32 MiB: put {put:?}, get {:?}", t.elapsed());
    let n = data.len() as u64;
    for (s, e) in [
        (0, 1),
        (0, 4096),
        (1 << 20, (1 << 20) + 65_536),
        (n - 1, n),
        (n - 100_000, n),
        (12_345, 12_345 + (8 << 20)),
        (n, n),
    ] {
        let got = b.get_range(&k, s..e).unwrap();
        assert!(got == data[s as usize..e as usize], "range {s}..{e}");
    }
    for (s, e) in [(n - 1, n + 1), (n, n + 1), (n + 10, n + 20), (0, n + 1)] {
        match b.get_range(&k, s..e) {
            Err(BackendError::InvalidRange { size, .. }) => assert_eq!(size, n),
            other => panic!(
                "range {s}..{e}: expected InvalidRange, got {:?}",
                other.map(|v| v.len())
            ),
        }
    }
    assert_eq!(b.list("packs/").unwrap()[0].size, n);
    b.delete(&k).unwrap();
}

/// Requests and bytes are counted by kind.
fn counters(server: &S3Server) {
    let b = backend(server, &fresh_prefix());
    assert_eq!(b.counters(), S3Counters::default());
    b.put(&key("x/y"), &[1; 1000], PutMode::Create).unwrap();
    let after_put = b.counters();
    assert_eq!(after_put.puts, 1);
    assert_eq!(after_put.bytes_up, 1000);
    // The key-conflict check: a HEAD of `x` and a one-key LIST of `x/y/`.
    assert_eq!((after_put.heads, after_put.lists), (1, 1));
    b.get(&key("x/y")).unwrap();
    b.get_range(&key("x/y"), 10..20).unwrap();
    b.list("").unwrap();
    b.delete(&key("x/y")).unwrap();
    let c = b.counters();
    assert_eq!(
        (c.gets, c.lists, c.deletes, c.bytes_down),
        (2, 2, 1, 1010),
        "{c:?}"
    );
    assert_eq!(c.requests(), 1 + 2 + 1 + 2 + 1);
}

/// Keys of the store's flat layout (`packs/<name>`) are put without the key-conflict check's
/// HEAD and LIST; anything deeper is still checked and refused against them. Bodies go
/// unsigned to loopback by default and signed when asked; the server takes both.
fn flat_keys_and_payload_signing(server: &S3Server) {
    for unsigned in [None, Some(false), Some(true)] {
        let mut c = config(server, &fresh_prefix());
        c.unsigned_payload = unsigned;
        assert!(c.payload_unsigned() == unsigned.unwrap_or(true), "loopback");
        let b = S3Backend::open(&c).unwrap_or_else(|e| panic!("open: {e}"));
        let data = pattern(100_000, 3);
        b.put(&key("packs/0001.pack"), &data, PutMode::Create)
            .unwrap();
        b.put_vec(
            &key("catalog/journal/0001.jrnl"),
            data.clone(),
            PutMode::Create,
        )
        .unwrap();
        let c0 = b.counters();
        assert_eq!((c0.puts, c0.heads, c0.lists), (2, 0, 0), "{c0:?}");
        assert_eq!(b.get(&key("packs/0001.pack")).unwrap(), data);
        assert_eq!(b.get(&key("catalog/journal/0001.jrnl")).unwrap(), data);
        // Not flat: checked, and refused against the flat key above it.
        match b.put(&key("packs/0001.pack/x"), b"x", PutMode::Create) {
            Err(BackendError::KeyConflict { existing, .. }) => {
                assert_eq!(existing, "packs/0001.pack");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            b.put(&key("packs/0001.pack"), b"y", PutMode::Create),
            Err(BackendError::AlreadyExists(_))
        ));
    }
}

/// More objects than one ListObjectsV2 page (1000 keys) are all listed, in order.
fn list_pagination(server: &S3Server) {
    let b = backend(server, &fresh_prefix());
    let names: Vec<Key> = (0..1100).map(|i| key(&format!("i/{i:05}"))).collect();
    std::thread::scope(|s| {
        for chunk in names.chunks(275) {
            let b = &b;
            s.spawn(move || {
                for k in chunk {
                    b.put(k, b"", PutMode::Overwrite).unwrap();
                }
            });
        }
    });
    let before = b.counters().lists;
    let listed: Vec<Key> = b.list("i/").unwrap().into_iter().map(|m| m.key).collect();
    assert_eq!(listed, names);
    assert!(
        b.counters().lists - before >= 2,
        "one page cannot hold 1100 keys"
    );
}

/// The server answers 503 SlowDown for 2 s, then slowly for 1 s: puts issued meanwhile wait
/// (retried with backoff) and succeed; nothing is lost or doubled.
fn slowdown_and_slow_answers(server: &S3Server) {
    let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = config(server, &fresh_prefix());
    c.endpoint = Some(proxy.endpoint());
    let b = S3Backend::open(&c).unwrap();
    b.put(&key("before"), b"x", PutMode::Create).unwrap();
    let data = pattern(4 << 20, 3);
    proxy.set(Fault::Unavailable);
    let t = Instant::now();
    let (created, overwritten, read) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let c = b.put(&key("slow/1"), &data, PutMode::Create);
            let o = b.put(&key("slow/2"), &data, PutMode::Overwrite);
            (c, o)
        });
        let r = s.spawn(|| b.get(&key("before")));
        std::thread::sleep(Duration::from_secs(2));
        proxy.set(Fault::Delay(Duration::from_millis(300)));
        std::thread::sleep(Duration::from_secs(1));
        proxy.set(Fault::None);
        let (c, o) = w.join().unwrap();
        (c, o, r.join().unwrap())
    });
    created.unwrap_or_else(|e| panic!("create through 503s: {e}"));
    overwritten.unwrap_or_else(|e| panic!("overwrite through 503s: {e}"));
    assert_eq!(
        read.unwrap_or_else(|e| panic!("get through 503s: {e}")),
        b"x"
    );
    assert!(
        proxy.unavailable_answers() >= 2,
        "{} answers were 503",
        proxy.unavailable_answers()
    );
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(b.get(&key("slow/1")).unwrap() == data);
    assert!(b.get(&key("slow/2")).unwrap() == data);
    let keys: Vec<String> = b
        .list("")
        .unwrap()
        .into_iter()
        .map(|m| m.key.to_string())
        .collect();
    assert_eq!(keys, ["before", "slow/1", "slow/2"]);
}

/// A create-only put that the server applies but answers too late: the client times out, tries
/// again, meets its own object (412) and, finding its bytes there, reports success. Another
/// writer's create of the key still fails.
fn create_answer_times_out(server: &S3Server) {
    let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = config(server, &fresh_prefix());
    c.endpoint = Some(proxy.endpoint());
    c.request_timeout = Duration::from_secs(1);
    let b = S3Backend::open(&c).unwrap();
    let data = pattern(1 << 20, 4);
    proxy.set(Fault::DelayPutAnswers(Duration::from_millis(1500)));
    let result = std::thread::scope(|s| {
        let w = s.spawn(|| b.put(&key("late/1"), &data, PutMode::Create));
        std::thread::sleep(Duration::from_millis(2500));
        proxy.set(Fault::None);
        w.join().unwrap()
    });
    result.unwrap_or_else(|e| panic!("create answered late: {e}"));
    assert!(b.counters().puts >= 2, "{:?}", b.counters());
    assert!(b.get(&key("late/1")).unwrap() == data);
    match b.put(&key("late/1"), &pattern(1 << 20, 5), PutMode::Create) {
        Err(BackendError::AlreadyExists(_)) => {}
        other => panic!("second creator: expected AlreadyExists, got {other:?}"),
    }
}

/// A create-only put that the server applies but whose answer never arrives (the connection
/// drops): the client retries by itself, meets its own object (412), and the put succeeds.
fn create_answer_lost(server: &S3Server) {
    let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = config(server, &fresh_prefix());
    c.endpoint = Some(proxy.endpoint());
    let b = S3Backend::open(&c).unwrap();
    let data = pattern(1 << 20, 6);
    proxy.set(Fault::DropPutAnswers);
    let result = std::thread::scope(|s| {
        let w = s.spawn(|| b.put(&key("lost/1"), &data, PutMode::Create));
        std::thread::sleep(Duration::from_millis(1000));
        proxy.set(Fault::None);
        w.join().unwrap()
    });
    result.unwrap_or_else(|e| panic!("create whose answer was lost: {e}"));
    assert!(b.get(&key("lost/1")).unwrap() == data);
    match b.put(&key("lost/1"), &pattern(1 << 20, 7), PutMode::Create) {
        Err(BackendError::AlreadyExists(_)) => {}
        other => panic!("second creator: expected AlreadyExists, got {other:?}"),
    }
}

/// A full server (versitygw answers 507 Insufficient Storage on ENOSPC) is `NoSpace` at once,
/// not after the retry window; writes work again once it has room.
fn insufficient_storage(server: &S3Server) {
    let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
    let mut c = config(server, &fresh_prefix());
    c.endpoint = Some(proxy.endpoint());
    let b = S3Backend::open(&c).unwrap();
    proxy.set(Fault::InsufficientStorage);
    let t = Instant::now();
    for mode in [PutMode::Create, PutMode::Overwrite] {
        match b.put(&key("full/1"), &[1; 1000], mode) {
            Err(BackendError::NoSpace(k)) => assert_eq!(k, key("full/1")),
            other => panic!("put to a full server: expected NoSpace, got {other:?}"),
        }
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    proxy.set(Fault::None);
    b.put(&key("full/1"), &[1; 1000], PutMode::Create).unwrap();
}

/// An upload whose body stops halfway (the node killed, the network gone) leaves nothing under
/// its key, however the payload is signed: the put carries a checksum of the body, and a server
/// that got fewer bytes refuses it. versitygw 1.8 otherwise stores the shorter body and answers
/// 200, so the node's create of that key after its restart would meet other bytes and fence it.
/// Retried once the network is back, the same create then succeeds with every byte.
fn upload_cut_short(server: &S3Server) {
    for unsigned in [true, false] {
        let proxy = FaultProxy::start(server.port()).unwrap_or_else(|e| panic!("{e}"));
        let prefix = fresh_prefix();
        let mut c = config(server, &prefix);
        c.endpoint = Some(proxy.endpoint());
        c.unsigned_payload = Some(unsigned);
        c.retry_window = Duration::from_secs(2);
        let b = S3Backend::open(&c).unwrap();
        let direct = backend(server, &prefix);
        let data = pattern(1 << 20, 8);
        proxy.set(Fault::CutPutBodies(300_000));
        for (name, mode) in [("cut/1", PutMode::Create), ("cut/2", PutMode::Overwrite)] {
            let put = b.put(&key(name), &data, mode);
            assert!(put.is_err(), "unsigned {unsigned}: a cut upload succeeded");
            match direct.get(&key(name)) {
                Err(BackendError::NotFound(_)) => {}
                Ok(stored) => panic!(
                    "unsigned {unsigned}: {name}: the server stored {} of {} bytes of a cut upload",
                    stored.len(),
                    data.len()
                ),
                Err(e) => panic!("unsigned {unsigned}: {name}: {e}"),
            }
        }
        // The network comes back while a create is being retried: it completes whole.
        let c2 = config(server, &prefix);
        let mut c2 = S3Config {
            endpoint: Some(proxy.endpoint()),
            ..c2
        };
        c2.unsigned_payload = Some(unsigned);
        let b = S3Backend::open(&c2).unwrap();
        let result = std::thread::scope(|s| {
            let w = s.spawn(|| b.put(&key("cut/3"), &data, PutMode::Create));
            std::thread::sleep(Duration::from_millis(1500));
            proxy.set(Fault::None);
            w.join().unwrap()
        });
        result.unwrap_or_else(|e| panic!("unsigned {unsigned}: create after cut uploads: {e}"));
        assert!(direct.get(&key("cut/3")).unwrap() == data);
    }
}

/// The acceptance case: the server goes away mid-upload and comes back 2 s later; the put waits
/// (retrying connection refused) and succeeds, and the object is there afterwards.
fn put_while_server_restarts(server: &mut S3Server) {
    let b = backend(server, &fresh_prefix());
    let data = pattern(4 << 20, 5);
    b.put(&key("before"), b"x", PutMode::Create).unwrap();
    server.stop();
    let t = Instant::now();
    let result = std::thread::scope(|s| {
        let put = s.spawn(|| {
            let r1 = b.put(&key("during/1"), &data, PutMode::Create);
            let r2 = b.put(&key("during/2"), &data, PutMode::Overwrite);
            (r1, r2)
        });
        std::thread::sleep(Duration::from_secs(2));
        server.restart().unwrap_or_else(|e| panic!("restart: {e}"));
        put.join().unwrap()
    });
    let waited = t.elapsed();
    result
        .0
        .unwrap_or_else(|e| panic!("create during the outage: {e}"));
    result
        .1
        .unwrap_or_else(|e| panic!("overwrite during the outage: {e}"));
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    assert!(b.get(&key("during/1")).unwrap() == data);
    assert!(b.get(&key("during/2")).unwrap() == data);
    assert_eq!(b.get(&key("before")).unwrap(), b"x");
}
