//! Cartridge create, delete, import, export and move through the REST API, many at once and
//! while initiators write, against a real `reel serve` with two libraries. Afterwards every
//! written cartridge reads back exactly what was written to it, no cartridge is in two places
//! or in a library without existing, and no two cartridges share a number (and so a stream).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::api::Api;
use common::tape::Tape;
use common::{Server, free_portal};
use reel_scsi::initiator::ssc::{REWIND, Transfer, read6, write_filemarks, write6};
use reel_scsi::parse_sense;
use serde_json::{Value, json};

const LIB_A: &str = "iqn.2026-11.org.reel:race-a";
const LIB_B: &str = "iqn.2026-11.org.reel:race-b";

/// What the race test asks of the libraries and the vault.
trait Places {
    fn occupied(&self) -> Vec<(String, String, u64, String)>;
    fn addresses(&self, lib: &str, kind: &str) -> Vec<u64>;
    fn vault_barcodes(&self, prefix: &str) -> Vec<String>;
}

impl Places for Api {
    /// Every (library, kind, address, barcode) of a full element.
    fn occupied(&self) -> Vec<(String, String, u64, String)> {
        let mut out = Vec::new();
        for lib in [LIB_A, LIB_B] {
            let detail = self.ok("GET", &format!("/api/v1/libraries/{lib}"), None);
            for e in detail["elements"].as_array().unwrap() {
                if let Some(b) = e["barcode"].as_str() {
                    out.push((
                        lib.to_string(),
                        e["kind"].as_str().unwrap().to_string(),
                        e["address"].as_u64().unwrap(),
                        b.to_string(),
                    ));
                }
            }
        }
        out
    }

    fn addresses(&self, lib: &str, kind: &str) -> Vec<u64> {
        let detail = self.ok("GET", &format!("/api/v1/libraries/{lib}"), None);
        detail["elements"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["address"].as_u64().unwrap())
            .collect()
    }

    fn vault_barcodes(&self, prefix: &str) -> Vec<String> {
        self.ok("GET", "/api/v1/cartridges?location=vault", None)
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["barcode"].as_str())
            .filter(|b| b.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }
}

/// Record `i` of cartridge `barcode`: a header naming both, then bytes derived from them.
fn record(barcode: &str, i: u32) -> Vec<u8> {
    let mut r = format!("{barcode} record {i:06} ").into_bytes();
    let mut state = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ barcode.len() as u64 | 1;
    for b in barcode.bytes() {
        state = state.wrapping_mul(31).wrapping_add(u64::from(b));
    }
    while r.len() < 32 * 1024 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        r.push((state >> 32) as u8);
    }
    r
}

fn config() -> String {
    let mut toml = String::from("[iscsi]\nlisten = [\"PORTAL\"]\n");
    for name in [LIB_A, LIB_B] {
        toml.push_str(&format!(
            "[[iscsi.target]]\nname = \"{name}\"\nkind = \"library\"\nchanger = \"ibm-3584\"\n\
             drive = \"ibm-td9\"\ndrives = 2\nslots = 24\nimport_export = 4\n"
        ));
    }
    toml
}

#[test]
fn concurrent_catalog_changes_keep_every_cartridge_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let config_path = dir.path().join("reel.toml");
    std::fs::write(
        &config_path,
        config().replace("PORTAL", &portal.to_string()),
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, portal, &["--config", config_path.to_str().unwrap()]);
    let api = Api::admin(&server, &data);

    // The written cartridges: one per drive of each library.
    let mut writers = Vec::new();
    for (lib, prefix) in [(LIB_A, "WRA"), (LIB_B, "WRB")] {
        api.ok(
            "POST",
            "/api/v1/cartridges",
            Some(
                json!({"prefix": prefix, "first": 1, "count": 2, "media": "lto9", "library": lib}),
            ),
        );
        let drives = api.addresses(lib, "drive");
        let occupied = api.occupied();
        for (i, drive) in drives.iter().enumerate() {
            let barcode = format!("{prefix}{:03}L9", i + 1);
            let (_, _, from, _) = occupied.iter().find(|o| o.3 == barcode).unwrap().clone();
            api.ok(
                "POST",
                &format!("/api/v1/libraries/{lib}/move"),
                Some(json!({"from": from, "to": drive})),
            );
            writers.push((lib, i as u64 + 1, barcode));
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let records_per_tape = 300u32;
    let writer_threads: Vec<_> = writers
        .iter()
        .cloned()
        .enumerate()
        .map(|(n, (lib, lun, barcode))| {
            std::thread::spawn(move || {
                let tape = Tape::connect(portal, lib, lun, n as u8 + 1);
                tape.ready();
                for i in 0..records_per_tape {
                    let r = record(&barcode, i);
                    tape.good(&write6(Transfer::Variable(r.len() as u32)), r);
                    if i % 50 == 49 {
                        // WRITE FILEMARKS, IMMED=0: a synchronising point.
                        tape.good(&write_filemarks(1, false), Vec::new());
                    }
                }
                tape.good(&write_filemarks(1, false), Vec::new());
                tape.good(&REWIND, Vec::new());
                let mut read = 0;
                let mut filemarks = 0;
                while read < records_per_tape {
                    let (status, data, sense) =
                        tape.run(&read6(Transfer::Variable(32768), false), Vec::new(), 32768);
                    if status != 0 {
                        // SSC-4 §5.3: a filemark read is CHECK CONDITION with FILEMARK set,
                        // positioned after it. One ends every 50 records.
                        assert!(
                            parse_sense(&sense).is_ok_and(|s| s.filemark) && read % 50 == 0,
                            "{barcode}: READ after record {read}: sense {sense:02x?}"
                        );
                        filemarks += 1;
                        assert!(filemarks <= records_per_tape / 50, "{barcode}: filemarks");
                        continue;
                    }
                    assert_eq!(
                        data,
                        record(&barcode, read),
                        "{barcode}: record {read} is not what was written to it"
                    );
                    read += 1;
                }
                assert_eq!(read, records_per_tape, "{barcode}: records read back");
            })
        })
        .collect();

    // Creators: two threads with the same barcodes (each barcode made once), one its own.
    let mut churn = Vec::new();
    for (t, prefix) in [(0, "CRA"), (1, "CRA"), (2, "CRB")] {
        let api = api.clone();
        let stop = stop.clone();
        churn.push(std::thread::spawn(move || {
            let mut made = 0u32;
            for n in 0..60u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let library = match (n + t) % 3 {
                    0 => json!(LIB_A),
                    1 => json!(LIB_B),
                    _ => Value::Null,
                };
                let (status, v) = api.call(
                    "POST",
                    "/api/v1/cartridges",
                    Some(
                        json!({"prefix": prefix, "first": n, "count": 1, "media": "lto9",
                        "library": library}),
                    ),
                );
                assert!(matches!(status, 201 | 409), "create: {status} {v}");
                made += u32::from(status == 201);
            }
            made
        }));
    }
    // Importers: both race for the same vault cartridges, into the two libraries, and export
    // them again.
    for (lib, t) in [(LIB_A, 3u32), (LIB_B, 4)] {
        let api = api.clone();
        let stop = stop.clone();
        churn.push(std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) && rounds < 200 {
                rounds += 1;
                let Some(barcode) = api.vault_barcodes("CR").into_iter().next() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (status, v) = api.call(
                    "POST",
                    &format!("/api/v1/libraries/{lib}/import"),
                    Some(json!({"barcode": barcode})),
                );
                assert!(matches!(status, 200 | 404 | 409), "import: {status} {v}");
                if status == 200 && rounds % 2 == 0 {
                    let at = api
                        .occupied()
                        .into_iter()
                        .find(|o| o.0 == lib && o.3 == barcode && o.1 == "import_export");
                    if let Some((_, _, address, _)) = at {
                        let (status, v) = api.call(
                            "POST",
                            &format!("/api/v1/libraries/{lib}/export"),
                            Some(json!({"from": address})),
                        );
                        assert!(matches!(status, 200 | 404 | 409), "export: {status} {v}");
                    }
                }
            }
            t
        }));
    }
    // A deleter: deletes vault cartridges (racing the importers), and tries the loaded ones.
    {
        let api = api.clone();
        let stop = stop.clone();
        let loaded: Vec<String> = writers.iter().map(|w| w.2.clone()).collect();
        churn.push(std::thread::spawn(move || {
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                for barcode in api.vault_barcodes("CR").into_iter().take(3) {
                    let (status, v) =
                        api.call("DELETE", &format!("/api/v1/cartridges/{barcode}"), None);
                    assert!(matches!(status, 204 | 404 | 409), "delete: {status} {v}");
                    deleted += u32::from(status == 204);
                }
                for barcode in &loaded {
                    let (status, v) =
                        api.call("DELETE", &format!("/api/v1/cartridges/{barcode}"), None);
                    assert_eq!(status, 409, "deleting loaded {barcode}: {v}");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            deleted
        }));
    }
    // A mover: from import/export elements and slots to free slots, in both libraries.
    {
        let api = api.clone();
        let stop = stop.clone();
        churn.push(std::thread::spawn(move || {
            let mut moves = 0;
            while !stop.load(Ordering::Relaxed) {
                for lib in [LIB_A, LIB_B] {
                    let occupied = api.occupied();
                    let full: BTreeSet<u64> = occupied
                        .iter()
                        .filter(|o| o.0 == lib)
                        .map(|o| o.2)
                        .collect();
                    let from = occupied
                        .iter()
                        .find(|o| o.0 == lib && o.1 != "drive" && o.3.starts_with("CR"));
                    let to = api
                        .addresses(lib, "slot")
                        .into_iter()
                        .rev()
                        .find(|a| !full.contains(a));
                    if let (Some(from), Some(to)) = (from, to) {
                        let (status, v) = api.call(
                            "POST",
                            &format!("/api/v1/libraries/{lib}/move"),
                            Some(json!({"from": from.2, "to": to})),
                        );
                        assert!(matches!(status, 200 | 404 | 409), "move: {status} {v}");
                        moves += u32::from(status == 200);
                    }
                }
            }
            moves
        }));
    }

    for w in writer_threads {
        w.join().expect("a writer failed");
    }
    stop.store(true, Ordering::Relaxed);
    let results: Vec<u32> = churn
        .into_iter()
        .map(|t| t.join().expect("an API client failed"))
        .collect();
    eprintln!(
        "created {:?}, deleted {}, moves {}",
        &results[..3],
        results[5],
        results[6]
    );
    assert!(
        results[..3].iter().sum::<u32>() > 0,
        "some creates succeeded"
    );

    assert_eq!(api.server_errors.load(Ordering::Relaxed), 0, "no 5xx");
    // No cartridge in two places, none in a library without existing.
    let occupied = api.occupied();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for o in &occupied {
        *seen.entry(&o.3).or_default() += 1;
        let (status, v) = api.call("GET", &format!("/api/v1/cartridges/{}", o.3), None);
        assert_eq!(status, 200, "{} is in {} but {v}", o.3, o.0);
    }
    for (barcode, n) in &seen {
        assert_eq!(*n, 1, "{barcode} is in {n} elements: {occupied:?}");
    }
    server.stop();

    // Offline: every cartridge has a number, and so streams, of its own.
    let store = reel_chunkstore::ChunkStore::open(
        &data.join("catalog"),
        Arc::new(reel_backend::LocalBackend::open(&data.join("objects")).unwrap()),
        reel_chunkstore::StoreConfig::default(),
    );
    let carts = reel_volume::Cartridges::new(store.unwrap());
    let list = carts.list().unwrap();
    let numbers: BTreeSet<u64> = list.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers.len(), list.len(), "two cartridges share a number");
}
