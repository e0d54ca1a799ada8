//! Three stores (A exports, B and C adopt) on three directories and one vault: adopt, read in
//! place, release, collect; unshare; races; damage; a crash at each step.

use std::path::Path;
use std::sync::Arc;

use reel_backend::{Backend, LocalBackend, MemoryBackend};
use reel_chunkstore::{ChunkStore, ForeignStores, StoreConfig};
use reel_media::{Barcode, CartridgeInfo, MediaType, ReadOutcome, UnixTime};

use super::*;

const BARCODE: &str = "SHR001L9";

struct Node {
    carts: Cartridges,
    vault: SharedVault,
}

/// Every node's resolver: the store name is the directory's name.
struct Stores(Vec<(String, Arc<dyn Backend>)>);

impl ForeignStores for Stores {
    fn open(&self, source: &str) -> Result<Arc<dyn Backend>, String> {
        let store = source_store(source);
        self.0
            .iter()
            .find(|(name, _)| name == store)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| format!("no store {store}"))
    }
}

fn objects(root: &Path, name: &str) -> Arc<dyn Backend> {
    Arc::new(LocalBackend::open(&root.join(name).join("objects")).unwrap())
}

fn node(root: &Path, name: &str, vault: &Arc<dyn Backend>) -> Node {
    let config = StoreConfig {
        journal: true,
        ..StoreConfig::default()
    };
    let store = ChunkStore::open(
        &root.join(name).join("catalog"),
        objects(root, name),
        config,
    )
    .unwrap();
    store.set_foreign_stores(Arc::new(Stores(
        ["a", "b", "c"]
            .iter()
            .map(|n| (n.to_string(), objects(root, n)))
            .collect(),
    )));
    let carts = Cartridges::new(store);
    Node {
        // Small parts: every share here is several parts (extent rows of small records).
        vault: SharedVault::new(carts.clone(), vault.clone(), name, &format!("node-{name}"))
            .with_part_bytes(8 << 10),
        carts,
    }
}

fn record(i: u64) -> Vec<u8> {
    let mut x = i * 2_654_435_761 + 1;
    (0..4000 + (i as usize * 977) % 30_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[derive(Debug, PartialEq)]
enum Obj {
    Record(Vec<u8>),
    Filemark,
}

fn layout() -> Vec<Obj> {
    let mut out = Vec::new();
    for i in 0..60u64 {
        out.push(Obj::Record(record(i % 45)));
        if i % 9 == 8 {
            out.push(Obj::Filemark);
        }
    }
    out
}

fn create_and_write(carts: &Cartridges, barcode: &str) {
    let info = CartridgeInfo::new(
        Barcode::new(barcode).unwrap(),
        MediaType::Lto9,
        UnixTime(1_700_000_000),
    );
    carts.create(&info).unwrap();
    let mut c = carts.mount(barcode).unwrap();
    c.load(UnixTime(1_700_000_001)).unwrap();
    for o in layout() {
        match o {
            Obj::Record(d) => c.write_record(&d).unwrap(),
            Obj::Filemark => c.write_filemarks(1).unwrap(),
        };
    }
    c.sync().unwrap();
    carts.save(&c).unwrap();
    carts.store().sync().unwrap();
}

fn read_all(carts: &Cartridges, barcode: &str) -> Vec<Obj> {
    let mut c = carts.mount(barcode).unwrap();
    c.load(UnixTime(1_700_000_002)).unwrap();
    c.rewind().unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        match c.read(1 << 20, &mut buf).unwrap() {
            ReadOutcome::Record { .. } => out.push(Obj::Record(buf.clone())),
            ReadOutcome::Filemark => out.push(Obj::Filemark),
            ReadOutcome::EndOfData => break,
            ReadOutcome::Encrypted { .. } => unreachable!("these tests write no encrypted records"),
        }
    }
    out
}

fn pack_bytes(carts: &Cartridges) -> u64 {
    carts
        .store()
        .backend()
        .list("packs/")
        .unwrap()
        .iter()
        .map(|o| o.size)
        .sum()
}

fn setup() -> (tempfile::TempDir, Arc<dyn Backend>, Node, Node, Node) {
    let dir = tempfile::tempdir().unwrap();
    let vault: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let a = node(dir.path(), "a", &vault);
    let b = node(dir.path(), "b", &vault);
    let c = node(dir.path(), "c", &vault);
    create_and_write(&a.carts, BARCODE);
    (dir, vault, a, b, c)
}

#[test]
fn an_adopted_cartridge_is_read_in_place_then_released_and_collected() {
    let (_dir, vault, a, b, c) = setup();
    let a_packs = pack_bytes(&a.carts);
    let header = a.vault.share(BARCODE, 1_800_000_000).unwrap();
    assert_eq!(header.from_store, "a");
    assert!(matches!(
        a.carts.archive_state(BARCODE).unwrap(),
        Some(ArchiveState::Shared { .. })
    ));
    let listed = b.vault.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].taken.is_none());
    // A cannot adopt its own share; a shared cartridge cannot be shared again or erased.
    assert!(matches!(
        a.vault.adopt(BARCODE, 1),
        Err(ShareError::State { .. })
    ));
    assert!(matches!(
        a.vault.share(BARCODE, 2),
        Err(ShareError::State { .. })
    ));
    assert!(a.carts.delete(BARCODE).is_err());

    let (_, info) = b.vault.adopt(BARCODE, 1_800_000_010).unwrap();
    assert_eq!(info.barcode().as_str(), BARCODE);
    assert_eq!(b.carts.archive_state(BARCODE).unwrap(), None);
    assert_eq!(read_all(&b.carts, BARCODE), layout());
    assert_eq!(pack_bytes(&b.carts), 0, "nothing was copied into B");
    assert_eq!(
        b.vault.adopted().unwrap().get(BARCODE).map(String::as_str),
        Some("a")
    );
    // Only one adopter.
    assert!(matches!(
        c.vault.adopt(BARCODE, 3),
        Err(ShareError::State { .. })
    ));
    assert!(matches!(
        a.vault.unshare(BARCODE, 4),
        Err(ShareError::State { .. })
    ));
    assert_eq!(
        vault.list("").unwrap().len(),
        bundle_parts(&header) + 2,
        "the bundle's parts, the share, the taken mark"
    );

    // A's reclaim leaves what B reads alone.
    a.carts.store().reclaim(1.0, &mut |_, _| {}).unwrap();
    assert_eq!(read_all(&b.carts, BARCODE), layout());
    // Nothing to release or collect yet.
    assert!(b.vault.release(5).unwrap().is_empty());
    assert!(a.vault.collect().unwrap().is_empty());

    // B appends after the adopted data: into its own packs.
    {
        let mut cart = b.carts.mount(BARCODE).unwrap();
        cart.load(UnixTime(1_800_000_020)).unwrap();
        cart.space_to_eod().unwrap();
        cart.write_record(&record(99)).unwrap();
        cart.sync().unwrap();
        b.carts.save(&cart).unwrap();
    }
    let mut longer = layout();
    longer.push(Obj::Record(record(99)));
    assert_eq!(read_all(&b.carts, BARCODE), longer);
    assert!(pack_bytes(&b.carts) > 0);

    // B lets go: delete, reclaim, release; then A collects and frees.
    b.carts.delete(BARCODE).unwrap();
    b.carts.store().reclaim(0.5, &mut |_, _| {}).unwrap();
    assert_eq!(b.vault.release(6).unwrap(), vec![BARCODE.to_string()]);
    assert!(b.vault.adopted().unwrap().is_empty());
    assert_eq!(a.vault.collect().unwrap(), vec![BARCODE.to_string()]);
    assert!(matches!(
        a.carts.info(BARCODE),
        Err(CartridgeError::NotFound(_))
    ));
    assert!(vault.list("").unwrap().is_empty());
    assert!(a_packs > 0);
    a.carts.store().reclaim(0.5, &mut |_, _| {}).unwrap();
    assert_eq!(pack_bytes(&a.carts), 0, "A's packs went with the cartridge");
}

#[test]
fn an_unadopted_share_is_taken_back() {
    let (_dir, vault, a, b, _c) = setup();
    a.vault.share(BARCODE, 100).unwrap();
    a.vault.unshare(BARCODE, 101).unwrap();
    assert_eq!(a.carts.archive_state(BARCODE).unwrap(), None);
    assert!(a.carts.store().pinned_streams().unwrap().is_empty());
    let left: Vec<String> = vault
        .list("")
        .unwrap()
        .iter()
        .map(|o| o.key.to_string())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(matches!(
        b.vault.adopt(BARCODE, 102),
        Err(ShareError::NotShared(_))
    ));
    assert_eq!(read_all(&a.carts, BARCODE), layout());
    // Shared again later, and adopted.
    a.vault.share(BARCODE, 150).unwrap();
    b.vault.adopt(BARCODE, 103).unwrap();
    assert_eq!(read_all(&b.carts, BARCODE), layout());
}

#[test]
fn of_racing_adopters_exactly_one_wins_and_the_other_keeps_nothing() {
    let (_dir, _vault, a, b, c) = setup();
    a.vault.share(BARCODE, 200).unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let hb = s.spawn(|| b.vault.adopt(BARCODE, 201).map(|_| ()));
        let hc = s.spawn(|| c.vault.adopt(BARCODE, 201).map(|_| ()));
        vec![hb.join().unwrap(), hc.join().unwrap()]
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    let (winner, loser) = if results[0].is_ok() {
        (&b, &c)
    } else {
        (&c, &b)
    };
    assert_eq!(read_all(&winner.carts, BARCODE), layout());
    assert!(matches!(
        loser.carts.info(BARCODE),
        Err(CartridgeError::NotFound(_))
    ));
    assert!(loser.vault.adopted().unwrap().is_empty());
    // The loser's imported rows go with its next reclaim, and it releases nothing.
    loser.carts.store().reclaim(0.5, &mut |_, _| {}).unwrap();
    assert!(loser.carts.store().foreign_sources().is_empty());
    assert!(loser.vault.release(202).unwrap().is_empty());
}

#[test]
fn a_damaged_share_is_refused_and_adds_nothing() {
    let (_dir, vault, a, b, _c) = setup();
    let header = a.vault.share(BARCODE, 300).unwrap();
    let bundle = Key::new(format!(
        "{BARCODE}/{:016x}.p0.000000.bundle",
        header.generation
    ))
    .unwrap();
    let mut bytes = vault.get(&bundle).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    vault.put(&bundle, &bytes, PutMode::Overwrite).unwrap();
    let before = b.carts.store().catalog_fingerprint().unwrap();
    assert!(matches!(
        b.vault.adopt(BARCODE, 301),
        Err(ShareError::Damaged { .. })
    ));
    assert_eq!(b.carts.store().catalog_fingerprint().unwrap(), before);

    let share = Key::new(format!("{BARCODE}/{:016x}.share", header.generation)).unwrap();
    vault.put(&share, b"{not json", PutMode::Overwrite).unwrap();
    assert!(matches!(
        b.vault.adopt(BARCODE, 302),
        Err(ShareError::Damaged { .. })
    ));
    assert!(matches!(b.vault.list(), Err(ShareError::Damaged { .. })));
    assert_eq!(b.carts.store().catalog_fingerprint().unwrap(), before);
}

#[test]
fn a_crash_at_each_step_is_settled_by_recovery() {
    let (_dir, vault, a, b, _c) = setup();
    let (number, _) = a.carts.info(BARCODE).unwrap();

    // Sharing, nothing in the vault yet (a stream already pinned): undone.
    a.carts
        .set_archive_state(BARCODE, Some(ArchiveState::Sharing { generation: 7 }))
        .unwrap();
    a.carts
        .store()
        .export_stream(stream_of(number, 0), b"x", 1 << 20, &mut |_| Ok(()))
        .unwrap();
    assert_eq!(
        a.vault.recover().unwrap(),
        vec![(BARCODE.to_string(), "share undone")]
    );
    assert_eq!(a.carts.archive_state(BARCODE).unwrap(), None);
    assert!(a.carts.store().pinned_streams().unwrap().is_empty());

    // Sharing with its `.share` written: shared.
    let header = a.vault.share(BARCODE, 400).unwrap();
    a.carts
        .set_archive_state(
            BARCODE,
            Some(ArchiveState::Sharing {
                generation: header.generation,
            }),
        )
        .unwrap();
    assert_eq!(
        a.vault.recover().unwrap(),
        vec![(BARCODE.to_string(), "shared")]
    );

    // Adopting without the claim: rolled back. With the claim: adopted.
    let info = a.carts.info(BARCODE).unwrap().1;
    let g = header.generation;
    b.carts.create_adopting(&info, g).unwrap();
    assert_eq!(
        b.vault.recover().unwrap(),
        vec![(BARCODE.to_string(), "adoption undone")]
    );
    assert!(matches!(
        b.carts.info(BARCODE),
        Err(CartridgeError::NotFound(_))
    ));
    b.vault.adopt(BARCODE, 401).unwrap();
    b.carts
        .set_archive_state(BARCODE, Some(ArchiveState::Adopting { generation: g }))
        .unwrap();
    assert_eq!(
        b.vault.recover().unwrap(),
        vec![(BARCODE.to_string(), "adopted")]
    );
    assert_eq!(read_all(&b.carts, BARCODE), layout());
    assert_eq!(vault.list("").unwrap().len(), bundle_parts(&header) + 2);
}

/// Objects a share's bundle takes in the vault.
fn bundle_parts(header: &ShareHeader) -> usize {
    header.partitions.iter().map(|p| p.parts.len()).sum()
}

#[test]
fn a_share_in_many_parts_is_adopted_whole() {
    let (_dir, vault, a, b, _c) = setup();
    // Small records make many extent entries, so several rows and parts; some repeat.
    const MANY: &str = "SHR002L9";
    let info = CartridgeInfo::new(
        Barcode::new(MANY).unwrap(),
        MediaType::Lto9,
        UnixTime(1_700_000_000),
    );
    a.carts.create(&info).unwrap();
    let records: Vec<Vec<u8>> = (0..6000u64)
        .map(|i| record(if i % 10 == 9 { i % 7 } else { 100 + i })[..1000].to_vec())
        .collect();
    {
        let mut c = a.carts.mount(MANY).unwrap();
        c.load(UnixTime(1_700_000_001)).unwrap();
        for r in &records {
            c.write_record(r).unwrap();
        }
        c.sync().unwrap();
        a.carts.save(&c).unwrap();
    }
    let header = a.vault.share(MANY, 500).unwrap();
    let parts = header.partitions[0].parts.len();
    assert!(parts >= 2, "{parts} parts");
    let objects = vault.list(&format!("{MANY}/")).unwrap().len();
    assert_eq!(objects, parts + 1, "the parts and the share");
    b.vault.adopt(MANY, 501).unwrap();
    let expect: Vec<Obj> = records.into_iter().map(Obj::Record).collect();
    assert_eq!(read_all(&b.carts, MANY), expect);
    assert_eq!(pack_bytes(&b.carts), 0);
}
