//! The REST API against a real `reel serve`: every endpoint with good and bad input, roles,
//! tokens, the documented error codes, and the OpenAPI document against the routes.

mod common;

use std::io::{BufRead, BufReader};

use common::api::{Api, admin_password};
use common::{ANY_PORTAL, Server, free_portal};
use reel_scsi::initiator::{spc, ssc};
use serde_json::{Value, json};

const LIB: &str = "iqn.2026-11.org.reel:library";

fn lib_path(rest: &str) -> String {
    format!("/api/v1/libraries/{LIB}{rest}")
}

fn element<'a>(detail: &'a Value, kind: &str, index: u64) -> &'a Value {
    detail["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind && e["index"] == index)
        .unwrap()
}

#[test]
fn authentication_roles_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let password = admin_password(dir.path());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.path().join("initial-admin-password"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // No token, a bad token, a wrong password, malformed logins.
    api.err(
        "GET",
        "/api/v1/libraries",
        None,
        None,
        401,
        "unauthenticated",
    );
    api.err(
        "GET",
        "/api/v1/libraries",
        Some("0011.nonsense"),
        None,
        401,
        "unauthenticated",
    );
    api.err(
        "POST",
        "/api/v1/login",
        None,
        Some(r#"{"username":"admin","password":"wrong-password"}"#),
        401,
        "unauthenticated",
    );
    api.err(
        "POST",
        "/api/v1/login",
        None,
        Some(r#"{"username":"admin"}"#),
        400,
        "bad_request",
    );
    api.err(
        "POST",
        "/api/v1/login",
        None,
        Some(r#"{"username":1,"password":2}"#),
        400,
        "bad_request",
    );
    api.err(
        "POST",
        "/api/v1/login",
        None,
        Some("not json"),
        400,
        "bad_request",
    );
    let admin = api.login("admin", &password);
    assert_eq!(api.ok("GET", "/api/v1/me", &admin, None)["role"], "admin");

    // Users: create a viewer and an operator; bad input; duplicates.
    api.err(
        "POST",
        "/api/v1/users",
        Some(&admin),
        Some(r#"{"username":"v","password":"short","role":"viewer"}"#),
        400,
        "bad_request",
    );
    api.err(
        "POST",
        "/api/v1/users",
        Some(&admin),
        Some(r#"{"username":"v","password":"long enough","role":"king"}"#),
        400,
        "bad_request",
    );
    api.ok(
        "POST",
        "/api/v1/users",
        &admin,
        Some(json!({"username":"vera","password":"viewer-pass","role":"viewer"})),
    );
    api.ok(
        "POST",
        "/api/v1/users",
        &admin,
        Some(json!({"username":"otto","password":"operator-pass","role":"operator"})),
    );
    api.err(
        "POST",
        "/api/v1/users",
        Some(&admin),
        Some(r#"{"username":"vera","password":"viewer-pass","role":"viewer"}"#),
        409,
        "conflict",
    );
    let users = api.ok("GET", "/api/v1/users", &admin, None);
    assert_eq!(users.as_array().unwrap().len(), 3);

    // A viewer reads but changes nothing; an operator moves but does not create.
    let viewer = api.login("vera", "viewer-pass");
    let operator = api.login("otto", "operator-pass");
    api.ok("GET", "/api/v1/libraries", &viewer, None);
    api.err(
        "POST",
        &lib_path("/move"),
        Some(&viewer),
        Some(r#"{"from":1025,"to":257}"#),
        403,
        "forbidden",
    );
    api.err(
        "POST",
        "/api/v1/cartridges",
        Some(&operator),
        Some(r#"{"prefix":"X","first":1,"count":1,"media":"lto9"}"#),
        403,
        "forbidden",
    );
    api.err(
        "GET",
        "/api/v1/users",
        Some(&viewer),
        None,
        403,
        "forbidden",
    );
    api.err(
        "DELETE",
        "/api/v1/users/admin",
        Some(&operator),
        None,
        403,
        "forbidden",
    );
    api.ok(
        "POST",
        &lib_path("/move"),
        &operator,
        Some(json!({"from": 1025, "to": 1025 + 39})),
    );

    // API tokens: created, used, listed without the secret, revoked.
    let created = api.ok(
        "POST",
        "/api/v1/tokens",
        &viewer,
        Some(json!({"name": "grafana"})),
    );
    let secret = created["token"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();
    api.ok("GET", "/api/v1/libraries", &secret, None);
    let listed = api.ok("GET", "/api/v1/tokens", &viewer, None);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("token").is_none(), "secrets are shown once");
    api.err(
        "DELETE",
        &format!("/api/v1/tokens/{id}"),
        Some(&operator),
        None,
        403,
        "forbidden",
    );
    api.err(
        "DELETE",
        "/api/v1/tokens/ffff",
        Some(&admin),
        None,
        404,
        "not_found",
    );
    api.ok("DELETE", &format!("/api/v1/tokens/{id}"), &viewer, None);
    api.err(
        "GET",
        "/api/v1/libraries",
        Some(&secret),
        None,
        401,
        "unauthenticated",
    );

    // Passwords: only the user or an admin; logout revokes the session.
    api.err(
        "PUT",
        "/api/v1/users/otto/password",
        Some(&viewer),
        Some(r#"{"password":"new-password"}"#),
        403,
        "forbidden",
    );
    api.ok(
        "PUT",
        "/api/v1/users/vera/password",
        &viewer,
        Some(json!({"password": "new-password", "current_password": "viewer-pass"})),
    );
    api.err(
        "POST",
        "/api/v1/login",
        None,
        Some(r#"{"username":"vera","password":"viewer-pass"}"#),
        401,
        "unauthenticated",
    );
    let viewer = api.login("vera", "new-password");
    api.ok("POST", "/api/v1/logout", &viewer, None);
    api.err(
        "GET",
        "/api/v1/me",
        Some(&viewer),
        None,
        401,
        "unauthenticated",
    );

    // The last admin stays; deleting a user revokes its tokens.
    api.err(
        "DELETE",
        "/api/v1/users/admin",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    api.err(
        "DELETE",
        "/api/v1/users/nobody",
        Some(&admin),
        None,
        404,
        "not_found",
    );
    api.ok("DELETE", "/api/v1/users/otto", &admin, None);
    api.err(
        "GET",
        "/api/v1/me",
        Some(&operator),
        None,
        401,
        "unauthenticated",
    );

    // Everything above is in the audit log, newest first.
    let events = api.ok("GET", "/api/v1/events?limit=200", &admin, None);
    let actions: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for wanted in [
        "create viewer user",
        "move",
        "create token",
        "revoke token",
        "set password",
        "delete user",
        "login",
    ] {
        assert!(actions.contains(&wanted), "{wanted} in {actions:?}");
    }
    let seqs: Vec<u64> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "newest first");
    api.err(
        "GET",
        "/api/v1/events?limit=0",
        Some(&admin),
        None,
        400,
        "bad_request",
    );
    api.err(
        "GET",
        "/api/v1/events?limit=10001",
        Some(&admin),
        None,
        400,
        "bad_request",
    );
    api.err(
        "GET",
        "/api/v1/events?limit=x",
        Some(&admin),
        None,
        400,
        "bad_request",
    );

    // Users, hashed passwords and API tokens survive a restart; no new admin password.
    let token = api.ok(
        "POST",
        "/api/v1/tokens",
        &admin,
        Some(json!({"name": "ci"})),
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    server.stop();
    let catalog_dump = std::fs::read_dir(dir.path().join("catalog"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .concat();
    let contains = |needle: &[u8]| catalog_dump.windows(needle.len()).any(|w| w == needle);
    assert!(
        !contains(b"new-password"),
        "no plain password in the catalog"
    );
    assert!(
        !contains(token.split('.').nth(1).unwrap().as_bytes()),
        "no token secret in the catalog"
    );
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    assert_eq!(admin_password(dir.path()), password);
    assert_eq!(
        api.ok("GET", "/api/v1/me", &token, None)["username"],
        "admin"
    );
    api.login("vera", "new-password");
    server.stop();
}

#[test]
fn library_moves_cartridges_import_export_and_vault() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let admin = api.login("admin", &admin_password(dir.path()));

    let libs = api.ok("GET", "/api/v1/libraries", &admin, None);
    assert_eq!(libs[0]["name"], LIB);
    assert_eq!(libs[0]["drives"], 4);
    assert_eq!(libs[0]["slots"], 40);
    assert_eq!(libs[0]["cartridges"], 20);
    api.err(
        "GET",
        "/api/v1/libraries/iqn.2026-11.org.reel:nope",
        Some(&admin),
        None,
        404,
        "not_found",
    );

    let detail = api.ok("GET", &lib_path(""), &admin, None);
    let slot0 = element(&detail, "slot", 0)["address"].as_u64().unwrap();
    let slot1 = element(&detail, "slot", 1)["address"].as_u64().unwrap();
    let slot39 = element(&detail, "slot", 39)["address"].as_u64().unwrap();
    let drive0 = element(&detail, "drive", 0)["address"].as_u64().unwrap();
    let mail0 = element(&detail, "import_export", 0)["address"]
        .as_u64()
        .unwrap();
    assert_eq!(element(&detail, "slot", 0)["barcode"], "REL001L9");
    assert_eq!(detail["drives"][0]["state"], "empty");
    assert_eq!(detail["drives"][0]["serial"].as_str().unwrap().len(), 10);

    // Into a drive: loaded there. Bad moves get the documented errors.
    let after = api.ok(
        "POST",
        &lib_path("/move"),
        &admin,
        Some(json!({"from": slot0, "to": drive0})),
    );
    assert_eq!(after["drives"][0]["state"], "loaded");
    assert_eq!(after["drives"][0]["barcode"], "REL001L9");
    assert_eq!(element(&after, "drive", 0)["source"], slot0);
    // (body, status, code, a word of the message)
    let bad_moves = [
        (
            json!({"from": slot0, "to": slot39}).to_string(),
            409,
            "conflict",
            "source",
        ),
        (
            json!({"from": slot1, "to": drive0}).to_string(),
            409,
            "conflict",
            "destination",
        ),
        (
            json!({"from": slot1, "to": 9999}).to_string(),
            404,
            "not_found",
            "",
        ),
        (r#"{"from":"a","to":1}"#.to_string(), 400, "bad_request", ""),
        (
            r#"{"from":70000,"to":1}"#.to_string(),
            400,
            "bad_request",
            "",
        ),
    ];
    for (body, status, code, word) in bad_moves {
        let msg = api.err(
            "POST",
            &lib_path("/move"),
            Some(&admin),
            Some(&body),
            status,
            code,
        );
        assert!(msg.contains(word), "{body}: {msg}");
    }

    // Cartridges: bulk create into the vault and into the library; bad input; conflicts.
    let created = api.ok(
        "POST",
        "/api/v1/cartridges",
        &admin,
        Some(json!({"prefix":"TST","first":1,"count":10,"media":"lto8"})),
    );
    assert_eq!(created.as_array().unwrap().len(), 10);
    assert_eq!(created[0]["barcode"], "TST001L8");
    assert_eq!(created[0]["location"]["vault"], true);
    let bad_creates = [
        (
            r#"{"prefix":"TST","first":10,"count":2,"media":"lto8"}"#,
            409,
            "conflict",
        ),
        (
            r#"{"prefix":"TST","first":1,"count":0,"media":"lto8"}"#,
            400,
            "bad_request",
        ),
        (
            r#"{"prefix":"C","first":1,"count":10001,"media":"lto8"}"#,
            400,
            "bad_request",
        ),
        (
            r#"{"prefix":"TST","first":1,"count":1,"media":"dds4"}"#,
            400,
            "bad_request",
        ),
        (
            r#"{"prefix":"toolong","first":1,"count":1,"media":"lto9"}"#,
            400,
            "bad_request",
        ),
        (
            r#"{"prefix":"ZZ","first":1,"count":22,"media":"lto9","library":"iqn.2026-11.org.reel:library"}"#,
            409,
            "conflict",
        ),
    ];
    for (body, status, code) in bad_creates {
        api.err(
            "POST",
            "/api/v1/cartridges",
            Some(&admin),
            Some(body),
            status,
            code,
        );
    }
    let placed = api.ok(
        "POST",
        "/api/v1/cartridges",
        &admin,
        Some(json!({"prefix":"NEW","first":1,"count":2,"media":"lto9-worm","library": LIB})),
    );
    assert_eq!(placed[0]["location"]["kind"], "slot");
    assert_eq!(placed[0]["worm"], true);
    assert_eq!(
        api.ok("GET", "/api/v1/cartridges?search=tst", &admin, None)
            .as_array()
            .unwrap()
            .len(),
        10
    );
    assert_eq!(
        api.ok("GET", "/api/v1/cartridges?location=vault", &admin, None)
            .as_array()
            .unwrap()
            .len(),
        10
    );
    assert_eq!(
        api.ok("GET", "/api/v1/cartridges?location=library", &admin, None)
            .as_array()
            .unwrap()
            .len(),
        22
    );
    api.err(
        "GET",
        "/api/v1/cartridges?location=moon",
        Some(&admin),
        None,
        400,
        "bad_request",
    );
    let show = api.ok("GET", "/api/v1/cartridges/REL001L9", &admin, None);
    assert_eq!(show["location"]["kind"], "drive");
    assert_eq!(show["mam"]["serial"], "REL001L9");
    assert_eq!(show["load_count"], 1);
    api.err(
        "GET",
        "/api/v1/cartridges/NOPE01L9",
        Some(&admin),
        None,
        404,
        "not_found",
    );

    // Write protection; deleting loaded, in-library and vaulted cartridges.
    api.err(
        "PATCH",
        "/api/v1/cartridges/REL001L9",
        Some(&admin),
        Some(r#"{"write_protected":true}"#),
        409,
        "conflict",
    );
    let wp = api.ok(
        "PATCH",
        "/api/v1/cartridges/REL002L9",
        &admin,
        Some(json!({"write_protected": true})),
    );
    assert_eq!(wp["write_protected"], true);
    api.err(
        "PATCH",
        "/api/v1/cartridges/REL002L9",
        Some(&admin),
        Some(r#"{"write_protected":"yes"}"#),
        400,
        "bad_request",
    );
    api.err(
        "DELETE",
        "/api/v1/cartridges/REL001L9",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    api.err(
        "DELETE",
        "/api/v1/cartridges/REL002L9",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    api.ok("DELETE", "/api/v1/cartridges/TST010L8", &admin, None);
    api.err(
        "DELETE",
        "/api/v1/cartridges/TST010L8",
        Some(&admin),
        None,
        404,
        "not_found",
    );

    // Import from the vault through a mail slot, move in, move out, export, vault.
    let imported = api.ok(
        "POST",
        &lib_path("/import"),
        &admin,
        Some(json!({"barcode": "TST001L8"})),
    );
    assert_eq!(
        element(&imported, "import_export", 0)["barcode"],
        "TST001L8"
    );
    api.err(
        "POST",
        &lib_path("/import"),
        Some(&admin),
        Some(r#"{"barcode":"TST001L8"}"#),
        409,
        "conflict",
    );
    api.err(
        "POST",
        &lib_path("/import"),
        Some(&admin),
        Some(r#"{"barcode":"NOPE01L9"}"#),
        404,
        "not_found",
    );
    api.err(
        "POST",
        &lib_path("/import"),
        Some(&admin),
        Some(&json!({"barcode":"TST002L8","to": slot39}).to_string()),
        409,
        "conflict",
    );
    api.ok(
        "POST",
        &lib_path("/move"),
        &admin,
        Some(json!({"from": mail0, "to": slot39})),
    );
    api.ok(
        "POST",
        &lib_path("/move"),
        &admin,
        Some(json!({"from": slot1, "to": mail0})),
    );
    api.err(
        "POST",
        "/api/v1/cartridges/REL003L9/vault",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    let vaulted = api.ok("POST", "/api/v1/cartridges/REL002L9/vault", &admin, None);
    assert_eq!(vaulted["location"]["vault"], true);
    api.err(
        "POST",
        "/api/v1/cartridges/REL002L9/vault",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    api.err(
        "POST",
        &lib_path("/export"),
        Some(&admin),
        Some(&json!({"from": mail0}).to_string()),
        409,
        "conflict",
    );
    api.err(
        "POST",
        &lib_path("/export"),
        Some(&admin),
        Some(&json!({"from": slot39}).to_string()),
        409,
        "conflict",
    );
    api.ok("DELETE", "/api/v1/cartridges/REL002L9", &admin, None);

    // Monitor, stats, sessions, metrics.
    // The monitor samples once a second.
    let mut mon = Value::Null;
    for _ in 0..30 {
        mon = api.ok("GET", "/api/v1/monitor", &admin, None);
        if mon["drives"][0]["state"] == "loaded" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(mon["drives"].as_array().unwrap().len(), 4);
    assert_eq!(mon["drives"][0]["state"], "loaded", "{mon}");
    // The Server-Sent Events stream takes its token from the query (EventSource sends no
    // headers) and sends a monitor sample at once.
    let mut stream = ureq::get(format!(
        "{}/api/v1/monitor/stream?token={admin}",
        api.base()
    ))
    .call()
    .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let mut reader = BufReader::new(stream.body_mut().as_reader());
    let mut first = String::new();
    while !first.starts_with("data:") {
        first.clear();
        reader.read_line(&mut first).unwrap();
    }
    let sample: Value = serde_json::from_str(first["data:".len()..].trim()).unwrap();
    assert_eq!(sample["drives"].as_array().unwrap().len(), 4);
    drop(reader);
    api.err(
        "GET",
        "/api/v1/monitor/stream?token=00.bad",
        None,
        None,
        401,
        "unauthenticated",
    );
    api.err(
        "GET",
        &format!("/api/v1/monitor?token={admin}"),
        None,
        None,
        401,
        "unauthenticated",
    );
    let stats = api.ok("GET", "/api/v1/stats", &admin, None);
    assert!(stats["disk_total"].as_u64().unwrap() > 0);
    assert!(
        api.ok("GET", "/api/v1/sessions", &admin, None)
            .as_array()
            .unwrap()
            .is_empty()
    );
    let metrics = api.client.metrics().unwrap();
    assert!(
        metrics.contains(&format!(
            "reel_drive_loads_total{{library=\"{LIB}\",drive=\"0\"}} 1"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("# TYPE reel_store_dedup_ratio gauge"));

    // The inventory the API changed is what the next start sees.
    server.stop();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let admin = api.login("admin", &admin_password(dir.path()));
    let detail = api.ok("GET", &lib_path(""), &admin, None);
    assert_eq!(element(&detail, "slot", 39)["barcode"], "TST001L8");
    assert_eq!(detail["drives"][0]["barcode"], "REL001L9");
    server.stop();
}

/// Every operation in the OpenAPI document is routed (it answers, and without a token it
/// asks for one), and unknown routes give the JSON 404.
#[test]
fn openapi_document_matches_the_routes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let api = Api::of(&server);
    let (status, doc) = api.call("GET", "/api/v1/openapi.json", None, None);
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 18, "{} paths", paths.len());
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let concrete = path
                .replace("{name}", LIB)
                .replace("{barcode}", "REL001L9")
                .replace("{username}", "admin")
                .replace("{id}", "0000");
            let body = matches!(method.as_str(), "post" | "put" | "patch").then_some("{}");
            let (status, v) = api.call(&method.to_uppercase(), &concrete, None, body);
            let public = op.get("security").is_none();
            if public {
                assert_ne!(status, 404, "{method} {path} is routed: {v}");
            } else {
                assert_eq!(status, 401, "{method} {path} needs a token: {v}");
            }
            assert!(
                op["responses"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .any(|k| k.starts_with('2')),
                "{method} {path}"
            );
        }
    }
    assert!(operations >= 25, "{operations} operations");
    api.err("GET", "/api/v1/nothing-here", None, None, 404, "not_found");
    let (status, _) = api.call("DELETE", "/api/v1/libraries", None, None);
    assert_eq!(status, 405);
    // The console is served at / without a token.
    let index = api.send("GET", "/", None, None).text;
    assert!(index.contains("<html"), "the console's index.html");
    server.stop();
}

/// `reel ctl` drives the running server through the API, as tables and as JSON.
#[test]
fn ctl_talks_to_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ANY_PORTAL, &[]);
    let url = server.http.clone().unwrap();
    let password = admin_password(dir.path());
    let ctl = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(["ctl", "--url", &url, "--user", "admin"])
            .args(args)
            .env("REEL_PASSWORD", &password)
            .env_remove("REEL_TOKEN")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, out, err) = ctl(&["status"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("ibm-3584") && out.contains("REL001L9"),
        "{out}"
    );
    let (ok, _, err) = ctl(&["move", LIB, "1025", "257"]);
    assert!(ok, "{err}");
    let (ok, out, _) = ctl(&["--json", "status", LIB]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["drives"][0]["barcode"], "REL001L9");
    // Errors come back with the API's code and message, and a failing exit status.
    let (ok, _, err) = ctl(&["move", LIB, "1025", "257"]);
    assert!(!ok);
    assert!(
        err.contains("conflict") && err.contains("source element empty"),
        "{err}"
    );
    let (ok, out, _) = ctl(&["cartridges", "REL00"]);
    assert!(ok && out.contains("drive 257"), "{out}");
    let (ok, out, err) = ctl(&[
        "create", "--prefix", "CLI", "--count", "3", "--media", "lto8",
    ]);
    assert!(ok && out.contains("created CLI003L8"), "{out}{err}");
    let (ok, _, err) = ctl(&["protect", "CLI001L8", "on"]);
    assert!(ok, "{err}");
    let (ok, out, _) = ctl(&["--json", "show", "CLI001L8"]);
    assert!(ok && out.contains("\"write_protected\": true"), "{out}");
    let (ok, _, err) = ctl(&["delete", "CLI002L8"]);
    assert!(ok, "{err}");
    let (ok, _, err) = ctl(&["delete", "REL001L9"]);
    assert!(!ok && err.contains("loaded in a drive"), "{err}");
    let (ok, out, err) = ctl(&["verify"]);
    assert!(ok && out.contains("verify clean"), "{out}{err}");
    assert!(err.contains("packs"), "a progress line: {err}");
    let (ok, out, err) = ctl(&["show", "CLI001L8"]);
    assert!(ok, "{err}");
    for line in [
        "host bytes",
        "stored",
        "dedup",
        "compression",
        "write-protected",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    let (ok, out, _) = ctl(&["show", "--exclusive", "CLI003L8"]);
    assert!(ok && out.contains("only on this one"), "{out}");
    let (ok, _, err) = ctl(&["erase", "CLI003L8"]);
    assert!(!ok && err.contains("--yes"), "asks first: {err}");
    let (ok, out, err) = ctl(&["erase", "CLI003L8", "--yes"]);
    assert!(ok && out.contains("erased CLI003L8"), "{out}{err}");
    let (ok, _, err) = ctl(&["erase", "CLI001L8", "--yes"]);
    assert!(!ok && err.contains("write-protected"), "{err}");
    let (ok, out, err) = ctl(&["reclaim"]);
    assert!(ok && out.contains("reclaim done"), "{out}{err}");
    assert!(
        err.contains("reclaiming [") && err.contains("packs"),
        "a progress bar: {err}"
    );
    let (ok, _, err) = ctl(&["reclaim", "--rewrite-below", "3"]);
    assert!(!ok && err.contains("rewrite_below"), "{err}");
    let (ok, out, err) = ctl(&["stats"]);
    assert!(ok, "{err}");
    for line in [
        "dedup",
        "compression",
        "disk",
        "free of",
        "DRIVE",
        "INITIATOR",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    let (ok, out, _) = ctl(&["--json", "stats"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["stats"]["disk_total"].as_u64().unwrap() > 0);
    assert_eq!(v["monitor"]["drives"].as_array().unwrap().len(), 4);
    let (ok, out, _) = ctl(&["events"]);
    assert!(ok && out.contains("move"), "{out}");
    // Without credentials: a clear error before any request.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["ctl", "--url", &url, "status"])
        .env_remove("REEL_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no credentials"));
    server.stop();
}

/// Given a certificate, the console and API speak HTTPS only (checked with openssl's
/// certificate and curl, two independent tools).
#[test]
fn https_with_a_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/test-all.sh installs it)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        ANY_PORTAL,
        &[
            "--http",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let url = server.http.clone().unwrap();
    assert!(url.starts_with("https://"), "{url}");
    let curl = |extra: &[&str], target: &str| {
        std::process::Command::new("curl")
            .args([
                "-s",
                "--max-time",
                "10",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .args(extra)
            .arg(target)
            .output()
            .expect("curl (scripts/test-all.sh installs it)")
    };
    let ok = curl(
        &["--cacert", cert.to_str().unwrap()],
        &format!("{url}/api/v1/openapi.json"),
    );
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "200");
    let untrusted = curl(&[], &format!("{url}/api/v1/openapi.json"));
    assert!(
        !untrusted.status.success(),
        "an unknown certificate is refused by default"
    );
    let plain = curl(
        &[],
        &format!("{}/api/v1/openapi.json", url.replacen("https", "http", 1)),
    );
    assert_ne!(
        String::from_utf8_lossy(&plain.stdout),
        "200",
        "no plain HTTP on the TLS port"
    );
    server.stop();
}

// ---------------------------------------------------------------- maintenance, erase, usage

/// An iSCSI session to the default library (reel's own initiator), for writing tapes.
struct Tapes {
    runtime: tokio::runtime::Runtime,
    client: reel_iscsi_net::Client,
}

impl Tapes {
    fn connect(portal: std::net::SocketAddr) -> Tapes {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let config = reel_testkit::login_config("iqn.2026-11.org.reel.test:api", Some(LIB), 2);
        let client = runtime
            .block_on(reel_iscsi_net::Client::connect(
                portal,
                config,
                reel_iscsi_net::ClientOptions::default(),
            ))
            .unwrap();
        Tapes { runtime, client }
    }

    /// (status, sense) of one command.
    fn run(&self, lun: u64, cdb: &[u8], data: Vec<u8>, data_in: u32) -> (u8, Vec<u8>) {
        let r = self
            .runtime
            .block_on(
                self.client
                    .execute(lun, cdb, bytes::Bytes::from(data), data_in),
            )
            .unwrap();
        (r.status, r.sense.map(|s| s.to_vec()).unwrap_or_default())
    }

    fn good(&self, lun: u64, cdb: &[u8], data: Vec<u8>) {
        let (status, sense) = self.run(lun, cdb, data, 0);
        assert_eq!(status, 0, "CDB {cdb:02x?} on LUN {lun}: sense {sense:02x?}");
    }

    /// TEST UNIT READY until the unit attentions (power on, medium changed) are reported.
    fn ready(&self, lun: u64) {
        for _ in 0..5 {
            if self.run(lun, &spc::TEST_UNIT_READY, Vec::new(), 0).0 == 0 {
                return;
            }
        }
        panic!("LUN {lun} never became ready");
    }

    /// Writes the records at the current position, then a filemark (a synchronising point).
    fn write(&self, lun: u64, records: &[Vec<u8>]) {
        self.ready(lun);
        for r in records {
            let cdb = ssc::write6(ssc::Transfer::Variable(r.len() as u32));
            self.good(lun, &cdb, r.clone());
        }
        self.good(lun, &ssc::write_filemarks(1, false), Vec::new());
    }

    /// Rewinds and reads `count` records of `len` bytes.
    fn read(&self, lun: u64, count: usize, len: u32) -> Vec<Vec<u8>> {
        self.ready(lun);
        self.good(lun, &ssc::REWIND, Vec::new());
        let cdb = ssc::read6(ssc::Transfer::Variable(len), false);
        (0..count)
            .map(|_| {
                let r = self
                    .runtime
                    .block_on(self.client.execute(lun, &cdb, bytes::Bytes::new(), len))
                    .unwrap();
                assert_eq!(r.status, 0, "READ on LUN {lun}");
                r.data.to_vec()
            })
            .collect()
    }
}

/// 64 KiB that zstd shrinks (a repeating ramp, different per seed).
fn compressible(seed: usize) -> Vec<u8> {
    (0..65536)
        .map(|j| ((seed * 31 + j * 7) % 251) as u8)
        .collect()
}

/// 64 KiB that does not compress.
fn noise(seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..65536)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Moves a cartridge through the API.
fn move_medium(api: &Api, token: &str, from: u64, to: u64) {
    api.ok(
        "POST",
        &lib_path("/move"),
        token,
        Some(json!({"from": from, "to": to})),
    );
}

/// Follows a maintenance job to its end; returns its last status.
fn wait_for_job(api: &Api, token: &str, path: &str) -> Value {
    for _ in 0..600 {
        let v = api.ok("GET", path, token, None);
        if v["state"] != "running" {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{path} still running after 30 s");
}

/// Per-cartridge usage and ratios, erase (with every refusal), reclaim as a job with progress
/// (freeing the space of a deleted cartridge while the others stay intact), and one
/// maintenance job at a time.
#[test]
fn usage_erase_and_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let server = Server::start(dir.path(), portal, &[]);
    let api = Api::of(&server);
    let admin = api.login("admin", &admin_password(dir.path()));
    for (user, role) in [("vera", "viewer"), ("otto", "operator")] {
        api.ok(
            "POST",
            "/api/v1/users",
            &admin,
            Some(json!({"username": user, "password": format!("{user}-password"), "role": role})),
        );
    }
    let viewer = api.login("vera", "vera-password");
    let operator = api.login("otto", "otto-password");

    // Who may do what, and bad bodies.
    for (method, path) in [
        ("POST", "/api/v1/reclaim"),
        ("POST", "/api/v1/cartridges/REL001L9/erase"),
    ] {
        api.err(method, path, None, None, 401, "unauthenticated");
        api.err(method, path, Some(&viewer), None, 403, "forbidden");
        api.err(method, path, Some(&operator), None, 403, "forbidden");
    }
    let idle = api.ok("GET", "/api/v1/reclaim", &viewer, None);
    assert_eq!(idle["state"], "idle");
    for body in [
        r#"{"rewrite_below": 2}"#,
        r#"{"rewrite_below": -0.1}"#,
        r#"{"rewrite_below": "half"}"#,
        r#"{"rewrite": 0.5}"#,
        "not json",
    ] {
        api.err(
            "POST",
            "/api/v1/reclaim",
            Some(&admin),
            Some(body),
            400,
            "bad_request",
        );
    }
    api.err(
        "POST",
        "/api/v1/cartridges/NOPE01L9/erase",
        Some(&admin),
        None,
        404,
        "not_found",
    );
    api.err(
        "GET",
        "/api/v1/cartridges/REL001L9?exclusive=maybe",
        Some(&admin),
        None,
        400,
        "bad_request",
    );
    let blank = api.ok("GET", "/api/v1/cartridges/REL001L9", &viewer, None);
    assert_eq!(blank["usage"]["logical_bytes"], 0);
    assert_eq!(blank["usage"]["dedup_ratio"], 1.0);
    assert_eq!(blank["usage"]["exact"], true);

    // Three cartridges written over iSCSI: REL001 with 8 records written 4 times each
    // (compressible), REL002 with 16 of its own noise records and 4 it shares with REL003,
    // REL003 with those 4 and 4 of its own.
    let detail = api.ok("GET", &lib_path(""), &admin, None);
    let slot = |i| element(&detail, "slot", i)["address"].as_u64().unwrap();
    let drive = |i| element(&detail, "drive", i)["address"].as_u64().unwrap();
    for i in 0..3 {
        move_medium(&api, &admin, slot(i), drive(i));
    }
    let tapes = Tapes::connect(portal);
    let repeated: Vec<Vec<u8>> = (0..32).map(|i| compressible(i % 8)).collect();
    let shared: Vec<Vec<u8>> = (0..4).map(noise).collect();
    let own2: Vec<Vec<u8>> = (100..116).map(noise).collect();
    let own3: Vec<Vec<u8>> = (200..204).map(noise).collect();
    let third: Vec<Vec<u8>> = [shared.clone(), own3].concat();
    tapes.write(1, &repeated);
    tapes.write(2, &[shared.clone(), own2].concat());
    tapes.write(3, &third);

    let c1 = api.ok("GET", "/api/v1/cartridges/REL001L9", &viewer, None);
    let u = &c1["usage"];
    assert_eq!(u["logical_bytes"], 32 * 65536, "{c1}");
    assert!(u["dedup_ratio"].as_f64().unwrap() > 3.5, "{u}");
    assert!(u["compression_ratio"].as_f64().unwrap() > 1.5, "{u}");
    assert!(u["reduction_ratio"].as_f64().unwrap() > 6.0, "{u}");
    assert!(u["stored_bytes"].as_u64().unwrap() < u["unique_bytes"].as_u64().unwrap());
    assert!(u.get("exclusive_stored_bytes").is_none(), "only when asked");
    let c3 = api.ok(
        "GET",
        "/api/v1/cartridges/REL003L9?exclusive=true",
        &viewer,
        None,
    );
    let u = &c3["usage"];
    assert_eq!(u["logical_bytes"], 8 * 65536);
    assert_eq!(
        u["unique_bytes"],
        8 * 65536,
        "noise records share no chunks"
    );
    assert_eq!(
        u["exclusive_unique_bytes"],
        4 * 65536,
        "half is on REL002 too"
    );
    assert!(u["compression_ratio"].as_f64().unwrap() < 1.01, "{u}");

    // Erase refusals: loaded, write-protected, WORM with data.
    let msg = api.err(
        "POST",
        "/api/v1/cartridges/REL001L9/erase",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    assert!(msg.contains("loaded in a drive"), "{msg}");
    for i in 0..3 {
        move_medium(&api, &admin, drive(i), slot(i));
    }
    api.ok(
        "PATCH",
        "/api/v1/cartridges/REL004L9",
        &admin,
        Some(json!({"write_protected": true})),
    );
    let msg = api.err(
        "POST",
        "/api/v1/cartridges/REL004L9/erase",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    assert!(msg.contains("write-protected"), "{msg}");
    let worm = api.ok(
        "POST",
        "/api/v1/cartridges",
        &admin,
        Some(
            json!({"prefix": "WRM", "first": 1, "count": 1, "media": "lto9-worm", "library": LIB}),
        ),
    );
    let worm_slot = worm[0]["location"]["address"].as_u64().unwrap();
    api.ok("POST", "/api/v1/cartridges/WRM001LZ/erase", &admin, None);
    move_medium(&api, &admin, worm_slot, drive(3));
    tapes.write(4, &[noise(300)]);
    move_medium(&api, &admin, drive(3), worm_slot);
    let msg = api.err(
        "POST",
        "/api/v1/cartridges/WRM001LZ/erase",
        Some(&admin),
        None,
        409,
        "conflict",
    );
    assert!(msg.contains("WORM"), "{msg}");

    // Erase REL001: empty, same identity and place, writable again.
    let erased = api.ok("POST", "/api/v1/cartridges/REL001L9/erase", &admin, None);
    assert_eq!(erased["usage"]["logical_bytes"], 0, "{erased}");
    assert_eq!(erased["usage"]["unique_bytes"], 0);
    assert_eq!(erased["barcode"], "REL001L9");
    assert_eq!(erased["mam"]["serial"], "REL001L9");
    assert_eq!(erased["load_count"], 1);
    assert_eq!(erased["location"]["address"], slot(0));
    assert_eq!(erased["write_protected"], false);

    // Delete REL002 (through a mail slot into the vault), then reclaim.
    let mail = element(&detail, "import_export", 0)["address"]
        .as_u64()
        .unwrap();
    move_medium(&api, &admin, slot(1), mail);
    api.ok(
        "POST",
        &lib_path("/export"),
        &admin,
        Some(json!({"from": mail})),
    );
    api.ok("DELETE", "/api/v1/cartridges/REL002L9", &admin, None);
    let stats_before = api.ok("GET", "/api/v1/stats", &admin, None);
    let started = api.ok("POST", "/api/v1/reclaim", &admin, Some(json!({})));
    assert_eq!(started["state"], "running");
    assert_eq!(started["rewrite_below"], 0.5);
    let done = wait_for_job(&api, &viewer, "/api/v1/reclaim");
    assert_eq!(done["state"], "done", "{done}");
    assert!(done["packs_total"].as_u64().unwrap() > 0, "{done}");
    assert_eq!(done["packs_done"], done["packs_total"]);
    assert!(done["finished"].as_u64() >= done["started"].as_u64());
    let freed = done["bytes_freed"].as_u64().unwrap();
    // REL002's 16 own records and REL001's 8 distinct ones were only there.
    assert!(freed > 16 * 65536, "{done}");
    assert_eq!(
        done["stored_before"].as_u64().unwrap() - done["stored_after"].as_u64().unwrap(),
        freed
    );
    // The stats follow (they are cached for up to 5 s).
    let before = stats_before["stored_bytes"].as_u64().unwrap();
    let mut after = before;
    for _ in 0..150 {
        after = api.ok("GET", "/api/v1/stats", &admin, None)["stored_bytes"]
            .as_u64()
            .unwrap();
        if after < before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(after + 16 * 65536 < before, "{before} -> {after}");

    // What stays is intact: REL003 (half of it shared with the deleted REL002) reads back, the
    // store verifies clean, and the erased REL001 takes new data.
    move_medium(&api, &admin, slot(2), drive(2));
    assert!(tapes.read(3, 8, 65536) == third, "REL003 reads back");
    move_medium(&api, &admin, slot(0), drive(0));
    tapes.write(1, &[noise(400)]);
    let c1 = api.ok("GET", "/api/v1/cartridges/REL001L9", &viewer, None);
    assert_eq!(c1["usage"]["logical_bytes"], 65536);
    api.ok("POST", "/api/v1/verify", &operator, None);
    let verified = wait_for_job(&api, &viewer, "/api/v1/verify");
    assert_eq!(verified["state"], "clean", "{verified}");

    // One maintenance job at a time: a second start while one runs is refused. With the few
    // records above, a verify finished before the reclaim request reached the server 20 times
    // running in a loaded full run; 32 MiB more keep it busy for tens of milliseconds.
    let more: Vec<Vec<u8>> = (0..512).map(|i| noise(10_000 + i)).collect();
    tapes.write(1, &more);
    let mut refused = None;
    for _ in 0..20 {
        api.ok("POST", "/api/v1/verify", &operator, None);
        let (status, v) = api.call("POST", "/api/v1/reclaim", Some(&admin), None);
        if status == 409 {
            refused = Some(v["error"]["message"].as_str().unwrap_or("").to_string());
        }
        wait_for_job(&api, &viewer, "/api/v1/verify");
        wait_for_job(&api, &viewer, "/api/v1/reclaim");
        if refused.is_some() {
            break;
        }
    }
    let refused = refused.expect("a reclaim started while a verify ran was refused");
    assert!(refused.contains("verify is running"), "{refused}");

    // Audit log and metrics.
    let events = api.ok("GET", "/api/v1/events?limit=200", &admin, None);
    let actions: Vec<String> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{} {} {}", e["action"], e["target"], e["result"]))
        .collect();
    for wanted in [
        r#""reclaim" "store" "started""#,
        r#""reclaim" "store" "done""#,
        r#""erase cartridge" "REL001L9" "ok""#,
        r#""erase cartridge" "REL004L9" "conflict"#,
    ] {
        assert!(
            actions.iter().any(|a| a.starts_with(wanted)),
            "{wanted} in {actions:#?}"
        );
    }
    let metrics = api.client.metrics().unwrap();
    assert!(
        metrics.contains("reel_reclaim_progress_ratio 1"),
        "{metrics}"
    );
    drop(tapes);
    server.stop();
}

/// Every endpoint through the one typed client of `reel-api`, in strict mode: each answer must
/// be exactly its reel-api type (no field the type does not keep, none it lacks), and together
/// the calls must cover every endpoint of the table the client is built on, which another
/// test holds equal to the OpenAPI document.
#[test]
fn every_endpoint_answers_in_its_reel_api_type() {
    use reel_api::cartridges::{CreateRequest, ListQuery, ShowQuery, UpdateRequest};
    use reel_api::maintenance::ReclaimRequest;
    use reel_api::monitor::EventsQuery;
    use reel_api::session::{NewPassword, NewUser};
    use reel_api::{Role, endpoints};

    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let server = Server::start(dir.path(), portal, &[]);
    let admin = common::api::admin(&server, dir.path());

    assert_eq!(admin.me().unwrap().role, Role::Admin);
    let libraries = admin.libraries().unwrap();
    assert_eq!(libraries[0].library.name, LIB);
    let detail = admin.library(LIB).unwrap();
    let slot = |i| detail.element("slot", i).unwrap().address;
    let drive0 = detail.element("drive", 0).unwrap().address;
    let mail0 = detail.element("import_export", 0).unwrap().address;
    let loaded = admin.move_medium(LIB, slot(0), drive0).unwrap();
    assert_eq!(loaded.drives[0].barcode.as_deref(), Some("REL001L9"));
    // An iSCSI session with a write, so the monitor and the session list have something.
    let tapes = Tapes::connect(portal);
    tapes.write(1, &[noise(1)]);

    let created = admin
        .create_cartridges(&CreateRequest {
            capacity: Some(64 << 20),
            ..CreateRequest::new("TYP", 1, 2, "lto8")
        })
        .unwrap();
    assert_eq!(created.len(), 2);
    let vaulted = ListQuery {
        search: Some("TYP".into()),
        location: Some("vault".into()),
    };
    assert_eq!(admin.cartridges(&vaulted).unwrap().len(), 2);
    admin.import(LIB, "TYP001L8", Some(mail0)).unwrap();
    admin.export(LIB, mail0).unwrap();
    admin.import(LIB, "TYP001L8", None).unwrap();
    let vault = admin.vault("TYP001L8").unwrap();
    assert!(vault.cartridge.location.vault);
    let protected = admin
        .update_cartridge(
            "TYP002L8",
            &UpdateRequest {
                write_protected: true,
            },
        )
        .unwrap();
    assert!(protected.cartridge.write_protected);
    let erased = admin.erase("TYP001L8").unwrap();
    assert_eq!(erased.cartridge.written, 0);
    admin.delete_cartridge("TYP001L8").unwrap();
    let exclusive = ShowQuery {
        exclusive: Some(true),
    };
    let written = admin.cartridge("REL001L9", &exclusive).unwrap();
    assert!(written.usage.unwrap().exclusive_stored_bytes.is_some());

    let store = admin.stats().unwrap();
    assert!(store.logical_bytes > 0);
    let sample = admin.monitor().unwrap();
    assert_eq!(sample.drives.len(), 4);
    let streamed = admin.monitor_stream().unwrap().next().unwrap().unwrap();
    assert_eq!(streamed.drives.len(), 4);
    assert_eq!(admin.sessions().unwrap().len(), 1);
    let events = admin
        .events(&EventsQuery {
            limit: Some(5),
            before: None,
        })
        .unwrap();
    assert_eq!(events.len(), 5);

    admin.start_verify().unwrap();
    while admin.verify_status().unwrap().progress.is_running() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(admin.verify_status().unwrap().progress.state, "clean");
    let reclaim = admin
        .start_reclaim(Some(&ReclaimRequest {
            rewrite_below: Some(0.5),
        }))
        .unwrap();
    assert_eq!(reclaim.rewrite_below, 0.5);
    while admin.reclaim_status().unwrap().progress.is_running() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The archive tier without an [archive] location (tests/archive.rs runs it with one).
    assert_eq!(admin.archive_status().unwrap().progress.state, "idle");
    let refused = admin.archive("TYP002L8").unwrap_err();
    assert_eq!(refused.status(), Some(409), "{refused}");
    assert!(
        refused.to_string().contains("no archive location"),
        "{refused}"
    );
    assert_eq!(admin.restore("TYP002L8").unwrap_err().status(), Some(409));
    // The shared vault needs a store on a bucket (tests/shared_vault.rs runs it on one).
    for refused in [
        admin.share("TYP002L8").map(|_| ()),
        admin.unshare("TYP002L8").map(|_| ()),
        admin.adopt("TYP002L8").map(|_| ()),
        admin.shared_vault().map(|_| ()),
    ] {
        let e = refused.unwrap_err();
        assert_eq!(e.status(), Some(409), "{e}");
        assert!(e.to_string().contains("no shared vault"), "{e}");
    }

    let user = admin
        .create_user(&NewUser {
            username: "tim".into(),
            password: "typed-password".into(),
            role: Role::Viewer,
        })
        .unwrap();
    assert_eq!(user.role, Role::Viewer);
    assert_eq!(admin.users().unwrap().len(), 2);
    admin
        .set_password(
            "tim",
            &NewPassword {
                password: "other-password".into(),
                current_password: None,
            },
        )
        .unwrap();
    let token = admin.create_token("typed").unwrap();
    assert_eq!(token.info.name, "typed");
    assert!(
        admin
            .tokens()
            .unwrap()
            .iter()
            .any(|t| t.id == token.info.id)
    );
    admin.revoke_token(&token.info.id).unwrap();
    admin.delete_user("tim").unwrap();
    admin.logout().unwrap();
    assert_eq!(admin.me().unwrap_err().status(), Some(401));

    let called = admin.endpoints_called();
    let all: std::collections::BTreeSet<_> = endpoints::ALL.iter().copied().collect();
    let missed: Vec<_> = all.difference(&called).collect();
    assert!(missed.is_empty(), "endpoints no call covered: {missed:?}");
    drop(tapes);
    server.stop();
}
