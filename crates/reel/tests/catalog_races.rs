//! Cartridge create, delete, import, export and move through the REST API, many at once and
//! while initiators write, against a real `reel serve` with two libraries. Afterwards every
//! written cartridge reads back exactly what was written to it, no cartridge is in two places
//! or in a library without existing, and no two cartridges share a number (and so a stream).

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::api::outcome;
use common::tape::Tape;
use common::{Server, free_portal};
use reel_api::Client;
use reel_api::cartridges::{CreateRequest, ListQuery, ShowQuery};
use reel_scsi::initiator::ssc::{REWIND, Transfer, read6, write_filemarks, write6};
use reel_scsi::parse_sense;

const LIB_A: &str = "iqn.2026-11.org.reel:race-a";
const LIB_B: &str = "iqn.2026-11.org.reel:race-b";

/// What the race test asks of the libraries and the vault.
trait Places {
    fn occupied(&self) -> Vec<(String, String, u16, String)>;
    fn addresses(&self, lib: &str, kind: &str) -> Vec<u16>;
    fn vault_barcodes(&self, prefix: &str) -> Vec<String>;
}

impl Places for Client {
    /// Every (library, kind, address, barcode) of a full element.
    fn occupied(&self) -> Vec<(String, String, u16, String)> {
        let mut out = Vec::new();
        for lib in [LIB_A, LIB_B] {
            for e in self.library(lib).unwrap().elements {
                if let Some(b) = e.barcode {
                    out.push((lib.to_string(), e.kind, e.address, b));
                }
            }
        }
        out
    }

    fn addresses(&self, lib: &str, kind: &str) -> Vec<u16> {
        self.library(lib)
            .unwrap()
            .elements
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.address)
            .collect()
    }

    fn vault_barcodes(&self, prefix: &str) -> Vec<String> {
        let query = ListQuery {
            location: Some("vault".into()),
            ..ListQuery::default()
        };
        self.cartridges(&query)
            .unwrap()
            .into_iter()
            .map(|c| c.barcode)
            .filter(|b| b.starts_with(prefix))
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
    let api = common::api::admin(&server, &data);

    // The written cartridges: one per drive of each library.
    let mut writers = Vec::new();
    for (lib, prefix) in [(LIB_A, "WRA"), (LIB_B, "WRB")] {
        api.create_cartridges(&CreateRequest {
            library: Some(lib.into()),
            ..CreateRequest::new(prefix, 1, 2, "lto9")
        })
        .unwrap();
        let drives = api.addresses(lib, "drive");
        let occupied = api.occupied();
        for (i, drive) in drives.iter().enumerate() {
            let barcode = format!("{prefix}{:03}L9", i + 1);
            let (_, _, from, _) = occupied.iter().find(|o| o.3 == barcode).unwrap().clone();
            api.move_medium(lib, from, *drive).unwrap();
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
                    0 => Some(LIB_A.to_string()),
                    1 => Some(LIB_B.to_string()),
                    _ => None,
                };
                let created = outcome(api.create_cartridges(&CreateRequest {
                    library,
                    ..CreateRequest::new(prefix, n, 1, "lto9")
                }));
                assert!(matches!(created, Ok(_) | Err(409)), "create: {created:?}");
                made += u32::from(created.is_ok());
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
                let imported = outcome(api.import(lib, &barcode, None));
                assert!(
                    matches!(imported, Ok(_) | Err(404 | 409)),
                    "import: {imported:?}"
                );
                if imported.is_ok() && rounds % 2 == 0 {
                    let at = api
                        .occupied()
                        .into_iter()
                        .find(|o| o.0 == lib && o.3 == barcode && o.1 == "import_export");
                    if let Some((_, _, address, _)) = at {
                        let exported = outcome(api.export(lib, address));
                        assert!(
                            matches!(exported, Ok(_) | Err(404 | 409)),
                            "export: {exported:?}"
                        );
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
                    let gone = outcome(api.delete_cartridge(&barcode));
                    assert!(matches!(gone, Ok(()) | Err(404 | 409)), "delete: {gone:?}");
                    deleted += u32::from(gone.is_ok());
                }
                for barcode in &loaded {
                    let refused = outcome(api.delete_cartridge(barcode));
                    assert_eq!(refused, Err(409), "deleting loaded {barcode}");
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
                    let full: BTreeSet<u16> = occupied
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
                        let moved = outcome(api.move_medium(lib, from.2, to));
                        assert!(matches!(moved, Ok(_) | Err(404 | 409)), "move: {moved:?}");
                        moves += u32::from(moved.is_ok());
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

    // Every call above accepted only its 2xx and 4xx answers: no 5xx.
    // No cartridge in two places, none in a library without existing.
    let occupied = api.occupied();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for o in &occupied {
        *seen.entry(&o.3).or_default() += 1;
        let exists = outcome(api.cartridge(&o.3, &ShowQuery::default()));
        assert!(exists.is_ok(), "{} is in {} but {exists:?}", o.3, o.0);
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
