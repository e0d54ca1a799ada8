//! The shared vault end to end, against a real S3 server (versitygw) on loopback: two stores on
//! one bucket (prefixes `site-a` and `site-b`, each served by its own node). A cartridge
//! written through iSCSI on A is vaulted and shared; B adopts it without copying its data (the
//! bucket barely grows, B has no packs) and reads it back byte for byte through its own
//! library; a second adoption is refused; B deletes it and reclaims, which releases it to A;
//! A's reclaim then deletes the cartridge and frees its packs.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::api::{admin, ctl};
use common::cartridges::{FIRST_SLOT, Workload, noise, sessions};
use common::free_portal;
use reel_api::Client;
use reel_api::cartridges::SharedCartridge;
use reel_api::maintenance::{ReclaimRequest, ReclaimStatus};
use reel_backend::{Backend, S3Backend, S3Config, S3Credentials};
use reel_s3test::{Kind, S3Server};
use reel_testkit::serve::ServeCommand;

const LIB_A: &str = "iqn.2026-11.org.reel:site-a";
const LIB_B: &str = "iqn.2026-11.org.reel:site-b";
const BARCODE: &str = "REL001L9";
const RECORD: usize = 64 << 10;
/// 8 MiB of incompressible, unique records.
const RECORDS: u64 = 128;
const DATA_BYTES: u64 = RECORDS * RECORD as u64;

fn record(c: u64, r: u64) -> Vec<u8> {
    noise(0x5A_0000 + c * 1_000 + r, RECORD)
}

const WORKLOAD: Workload = Workload {
    record_len: RECORD,
    records: RECORDS,
    record,
};

/// One node: its own store (bucket prefix), node name, portal and library target.
fn write_config(path: &Path, s3: &S3Server, site: &str, portal: std::net::SocketAddr, lib: &str) {
    let text = format!(
        "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n\n\
         [store.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"{site}\"\nregion = \"{}\"\n\n\
         [store.cache]\nsize = \"256M\"\n\n\
         [cluster]\nnode = \"node-{site}\"\nportal = \"{portal}\"\n\n\
         [iscsi]\nlisten = [\"{portal}\"]\n\n\
         [[iscsi.target]]\nname = \"{lib}\"\nkind = \"library\"\ndrives = 1\nslots = 8\nimport_export = 1\n",
        s3.endpoint(),
        s3.bucket(),
        s3.region()
    );
    std::fs::write(path, text).unwrap();
}

fn serve(
    data: &Path,
    config: &Path,
    portal: std::net::SocketAddr,
    cartridges: &str,
    s3: &S3Server,
) -> common::Server {
    ServeCommand::new(data)
        .portal(portal)
        .args(&[
            std::ffi::OsStr::new("--cartridges"),
            std::ffi::OsStr::new(cartridges),
            std::ffi::OsStr::new("--config"),
            config.as_os_str(),
        ])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .start()
}

/// The whole bucket, as the S3 API lists it.
fn bucket(s3: &S3Server) -> S3Backend {
    let mut config = S3Config::new(s3.bucket(), "");
    config.endpoint = Some(s3.endpoint());
    config.region = s3.region().to_string();
    config.allow_http = true;
    config.credentials = S3Credentials::Static {
        access_key_id: s3.access_key().to_string(),
        secret_access_key: s3.secret_key().to_string(),
        session_token: None,
    };
    S3Backend::open(&config).unwrap()
}

/// Bytes of the objects whose names start with `prefix` ("" for the whole bucket).
fn bytes_under(bucket: &S3Backend, prefix: &str) -> u64 {
    bucket
        .list("")
        .unwrap()
        .iter()
        .filter(|o| o.key.as_str().starts_with(prefix))
        .map(|o| o.size)
        .sum()
}

/// Bytes per top two name segments, for the report.
fn breakdown(bucket: &S3Backend) -> String {
    let mut by: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for o in bucket.list("").unwrap() {
        let name: Vec<&str> = o.key.as_str().splitn(3, '/').collect();
        let group = name[..name.len().min(2)].join("/");
        let e = by.entry(group).or_default();
        e.0 += 1;
        e.1 += o.size;
    }
    by.iter()
        .map(|(k, (n, b))| format!("  {k}: {n} objects, {b} bytes\n"))
        .collect()
}

fn listed(api: &Client) -> Vec<SharedCartridge> {
    api.shared_vault().unwrap()
}

fn status(r: Result<impl std::fmt::Debug, reel_api::Error>) -> (u16, String) {
    let e = r.unwrap_err();
    (e.status().unwrap_or(0), e.to_string())
}

fn reclaim(api: &Client) -> ReclaimStatus {
    api.start_reclaim(Some(&ReclaimRequest {
        rewrite_below: Some(0.5),
    }))
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = api.reclaim_status().unwrap();
        if !s.progress.is_running() {
            assert_eq!(s.progress.state, "done", "{s:?}");
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the reclaim takes too long: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// Slot 0 → mail slot → vault; returns (slot 0, mail slot 0).
fn to_vault(api: &Client, lib: &str) -> (u16, u16) {
    let detail = api.library(lib).unwrap();
    let slot0 = detail.element("slot", 0).unwrap().address;
    let mail0 = detail.element("import_export", 0).unwrap().address;
    api.move_medium(lib, slot0, mail0).unwrap();
    api.export(lib, mail0).unwrap();
    (slot0, mail0)
}

#[test]
fn a_shared_cartridge_is_adopted_without_copying_read_back_released_and_freed() {
    let began = Instant::now();
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let (portal_a, portal_b) = (free_portal(), free_portal());
    let (config_a, config_b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
    write_config(&config_a, &s3, "site-a", portal_a, LIB_A);
    write_config(&config_b, &s3, "site-b", portal_b, LIB_B);
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = serve(&data_a, &config_a, portal_a, "4", &s3);
    let b = serve(&data_b, &config_b, portal_b, "0", &s3);
    let (api_a, api_b) = (admin(&a, &data_a), admin(&b, &data_b));
    let bucket = bucket(&s3);

    // A writes REL001L9 (cartridge 0, in the first slot) and vaults it.
    assert_eq!(
        api_a
            .library(LIB_A)
            .unwrap()
            .element("slot", 0)
            .unwrap()
            .address,
        FIRST_SLOT
    );
    {
        let (changer, drive) = sessions(portal_a, LIB_A);
        WORKLOAD.write(&changer, &drive, 0);
    }
    to_vault(&api_a, LIB_A);
    assert_eq!(
        api_a
            .cartridge(BARCODE, &Default::default())
            .unwrap()
            .cartridge
            .written,
        DATA_BYTES
    );
    let packs_a_before = bytes_under(&bucket, "site-a/packs/");
    assert!(
        packs_a_before >= DATA_BYTES,
        "A's packs hold the cartridge: {packs_a_before} bytes"
    );
    let before = bytes_under(&bucket, "");

    // A shares it: listed as waiting from A's store, no longer importable into A's library.
    assert!(listed(&api_b).is_empty());
    let (ok, out, err) = ctl(&a, &data_a, &["share", BARCODE]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("REL001L9 is in the shared vault"), "{out}");
    let waiting = listed(&api_b);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let w = &waiting[0];
    assert_eq!(
        (w.barcode.as_str(), w.state.as_str(), w.from_store.as_str()),
        (BARCODE, "waiting", "site-a"),
        "{w:?}"
    );
    assert_eq!(w.from_node, "node-site-a");
    assert_eq!(w.data_bytes, DATA_BYTES);
    assert_eq!(w.adopted_by_store, None);
    assert_eq!(
        api_a
            .cartridge(BARCODE, &Default::default())
            .unwrap()
            .cartridge
            .archive_state,
        "shared"
    );
    let (code, message) = status(api_a.import(LIB_A, BARCODE, None));
    assert_eq!(code, 409, "{message}");
    assert!(message.contains("shared vault"), "{message}");

    // B adopts it into its vault.
    let (ok, out, err) = ctl(&b, &data_b, &["adopt", BARCODE]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("REL001L9 adopted"), "{out}");
    let (ok, out, err) = ctl(&b, &data_b, &["shared-vault"]);
    assert!(ok, "{out}{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with(BARCODE))
        .unwrap_or_else(|| panic!("{BARCODE} in {out}"));
    assert!(
        row.contains("adopted") && row.contains("site-a") && row.contains("node-site-b"),
        "{out}"
    );
    let adopted = listed(&api_a);
    assert_eq!(adopted.len(), 1);
    assert_eq!(adopted[0].state, "adopted");
    assert_eq!(adopted[0].adopted_by_store.as_deref(), Some("site-b"));
    assert_eq!(adopted[0].adopted_by_node.as_deref(), Some("node-site-b"));
    let on_b = api_b.cartridge(BARCODE, &Default::default()).unwrap();
    assert_eq!(on_b.cartridge.archive_state, "available");
    assert!(on_b.cartridge.location.vault);
    assert_eq!(on_b.cartridge.written, DATA_BYTES);

    // Nothing was copied: the bucket grew by bundles, markers and catalog journals only.
    let after = bytes_under(&bucket, "");
    let growth = after.saturating_sub(before);
    let packs_b = bytes_under(&bucket, "site-b/packs/");
    eprintln!(
        "cartridge data {DATA_BYTES} bytes; bucket {before} -> {after} bytes after share + adopt \
         (+{growth}, {:.2}% of the data); site-b/packs {packs_b} bytes\n{}",
        growth as f64 * 100.0 / DATA_BYTES as f64,
        breakdown(&bucket)
    );
    assert!(
        growth < DATA_BYTES / 10,
        "the bucket grew by {growth} bytes for {DATA_BYTES} bytes of data: copied?"
    );
    assert!(packs_b < 64 << 10, "B's packs: {packs_b} bytes");
    assert_eq!(
        bytes_under(&bucket, "site-a/packs/"),
        packs_a_before,
        "A's packs are as they were"
    );
    let foreign = metric(&api_b.metrics().unwrap(), "reel_foreign_pack_bytes");
    assert!(foreign >= DATA_BYTES as f64, "B reads A's packs: {foreign}");
    assert_eq!(
        metric(&api_b.metrics().unwrap(), "reel_adopted_cartridges"),
        1.0
    );

    // A second adoption is refused, on A and on B.
    let (code, message) = status(api_a.adopt(BARCODE));
    assert_eq!(code, 409, "{message}");
    let (code, message) = status(api_b.adopt(BARCODE));
    assert_eq!(code, 409, "{message}");

    // B reads it back, byte for byte, through its own library (slot 0 is its first slot).
    api_b.import(LIB_B, BARCODE, None).unwrap();
    let detail = api_b.library(LIB_B).unwrap();
    let (slot0_b, mail0_b) = (
        detail.element("slot", 0).unwrap().address,
        detail.element("import_export", 0).unwrap().address,
    );
    assert_eq!(slot0_b, FIRST_SLOT);
    api_b.move_medium(LIB_B, mail0_b, slot0_b).unwrap();
    {
        let (changer, drive) = sessions(portal_b, LIB_B);
        WORKLOAD.read(&changer, &drive, 0);
    }
    let packs_b = bytes_under(&bucket, "site-b/packs/");
    assert!(
        packs_b < 64 << 10,
        "B's packs after reading: {packs_b} bytes"
    );

    // B lets go: the cartridge back to its vault, deleted, reclaimed: released to A.
    to_vault(&api_b, LIB_B);
    api_b.delete_cartridge(BARCODE).unwrap();
    assert_eq!(status(api_b.cartridge(BARCODE, &Default::default())).0, 404);
    let reclaimed_b = reclaim(&api_b);
    eprintln!("reclaim on B: {reclaimed_b:?}");
    let released = listed(&api_a);
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0].state, "released", "{released:?}");
    assert_eq!(
        metric(&api_b.metrics().unwrap(), "reel_adopted_cartridges"),
        0.0
    );
    // A still holds it until its own reclaim.
    assert_eq!(
        api_a
            .cartridge(BARCODE, &Default::default())
            .unwrap()
            .cartridge
            .archive_state,
        "shared"
    );

    // A's reclaim deletes the cartridge, then frees its packs; the vault objects go too.
    let reclaimed_a = reclaim(&api_a);
    eprintln!("reclaim on A: {reclaimed_a:?}");
    assert_eq!(status(api_a.cartridge(BARCODE, &Default::default())).0, 404);
    assert!(listed(&api_a).is_empty());
    // Pack deletions may reach the bucket a moment after the job.
    let deadline = Instant::now() + Duration::from_secs(15);
    let packs_a_after = loop {
        let now = bytes_under(&bucket, "site-a/packs/");
        if packs_a_before.saturating_sub(now) >= DATA_BYTES || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let freed = packs_a_before.saturating_sub(packs_a_after);
    eprintln!(
        "site-a/packs {packs_a_before} -> {packs_a_after} bytes (freed {freed}, data \
         {DATA_BYTES}); reclaim reported {} bytes freed\n{}",
        reclaimed_a.bytes_freed,
        breakdown(&bucket)
    );
    assert!(
        freed >= DATA_BYTES,
        "A's packs dropped by {freed} bytes only"
    );
    assert!(bytes_under(&bucket, "reel-cluster/vault/") == 0);

    a.stop();
    b.stop();
    drop(s3);
    eprintln!("shared vault test took {:?}", began.elapsed());
}
