//! The default library end to end over iSCSI (reel's own initiator, no kernel): find
//! the changer and drives, load a cartridge, write and read it back, unload, restart
//! reel, and find the cartridge where it was with its data intact.

use std::net::SocketAddr;

use bytes::Bytes;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi::params::Limits;
use reel_iscsi_net::{Client, ClientOptions};

mod common;

const IQN: &str = "iqn.2026-11.org.reel:library";

use common::{Server, free_portal};

fn start(dir: &std::path::Path, portal: SocketAddr) -> Server {
    Server::start(dir, portal, &[])
}

async fn connect(portal: SocketAddr) -> Client {
    let config = InitiatorLoginConfig {
        initiator_name: "iqn.2026-11.org.reel.test:library".into(),
        initiator_alias: None,
        target_name: Some(IQN.into()),
        isid: [0x80, 0, 0, 0, 0, 1],
        tsih: 0,
        cid: 0,
        chap: None,
        mutual_chap: None,
        limits: Limits::initiator_default(),
        cmd_sn: 1,
    };
    let client = Client::connect(portal, config, ClientOptions::default())
        .await
        .unwrap();
    // Each LUN reports its power-on unit attention once.
    for lun in 0..5 {
        let _ = client
            .execute(lun, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
            .await
            .unwrap();
    }
    client
}

/// Runs a command and insists on GOOD status.
async fn good(client: &Client, lun: u64, cdb: &[u8], data_out: Bytes, data_in_len: u32) -> Bytes {
    let r = client
        .execute(lun, cdb, data_out, data_in_len)
        .await
        .unwrap();
    assert_eq!(
        r.status, 0,
        "CDB {cdb:02x?} on LUN {lun}: sense {:02x?}",
        r.sense
    );
    r.data
}

/// READ ELEMENT STATUS with VOLTAG: (address, barcode) of full elements of `kind`.
async fn elements(client: &Client, kind: u8) -> Vec<(u16, String)> {
    let cdb = [0xB8, 0x10 | kind, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0];
    let data = good(client, 0, &cdb, Bytes::new(), 0xFFFF).await;
    let mut out = Vec::new();
    let mut at = 8;
    while at + 8 <= data.len() {
        let descriptor_len = u16::from_be_bytes([data[at + 2], data[at + 3]]) as usize;
        let page_bytes = u32::from_be_bytes([0, data[at + 5], data[at + 6], data[at + 7]]) as usize;
        let mut d = at + 8;
        while d + descriptor_len <= (at + 8 + page_bytes).min(data.len()) && descriptor_len > 0 {
            let address = u16::from_be_bytes([data[d], data[d + 1]]);
            let full = data[d + 2] & 0x01 != 0;
            if full {
                let tag = String::from_utf8_lossy(&data[d + 12..d + 44])
                    .trim()
                    .to_string();
                out.push((address, tag));
            }
            d += descriptor_len;
        }
        at += 8 + page_bytes;
    }
    out
}

fn write6(len: u32) -> [u8; 6] {
    let b = len.to_be_bytes();
    [0x0A, 0, b[1], b[2], b[3], 0]
}

fn read6(len: u32) -> [u8; 6] {
    let b = len.to_be_bytes();
    [0x08, 0, b[1], b[2], b[3], 0]
}

fn record(i: usize) -> Bytes {
    Bytes::from(
        (0..65536)
            .map(|j| ((i * 31 + j * 7) % 251) as u8)
            .collect::<Vec<u8>>(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_write_read_unload_and_it_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let server = start(dir.path(), portal);
    let client = connect(portal).await;

    // The changer: 40 slots with 20 cartridges, 4 empty drives.
    let slots = elements(&client, 2).await;
    assert_eq!(slots.len(), 20);
    assert_eq!(slots[0].1, "REL001L9");
    assert!(elements(&client, 4).await.is_empty());
    let drive_addresses = {
        let cdb = [0xB8, 0x04, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0];
        let data = good(&client, 0, &cdb, Bytes::new(), 0xFFFF).await;
        u16::from_be_bytes([data[16], data[17]])
    };

    // MOVE MEDIUM slot 1 → drive 1; the drive (LUN 1) reports the medium change, then is ready.
    let (slot, barcode) = slots[0].clone();
    let s = slot.to_be_bytes();
    let d = drive_addresses.to_be_bytes();
    good(
        &client,
        0,
        &[0xA5, 0, 0, 0, s[0], s[1], d[0], d[1], 0, 0, 0, 0],
        Bytes::new(),
        0,
    )
    .await;
    let tur = client
        .execute(1, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
        .await
        .unwrap();
    assert_eq!(
        tur.status, 2,
        "first TUR after the load reports a unit attention"
    );
    assert_eq!(tur.sense.unwrap()[12], 0x28);
    good(&client, 1, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0).await;
    assert_eq!(
        elements(&client, 4).await,
        vec![(drive_addresses, barcode.clone())]
    );

    // Ten 64 KiB records, a filemark, rewind, read back.
    for i in 0..10 {
        good(&client, 1, &write6(65536), record(i), 0).await;
    }
    good(&client, 1, &[0x10, 0, 0, 0, 1, 0], Bytes::new(), 0).await;
    good(&client, 1, &[0x01, 0, 0, 0, 0, 0], Bytes::new(), 0).await;
    for i in 0..10 {
        let data = good(&client, 1, &read6(65536), Bytes::new(), 65536).await;
        assert!(data == record(i), "record {i} reads back");
    }
    // The filemark: CHECK CONDITION, NO SENSE with FILEMARK set.
    let r = client
        .execute(1, &read6(65536), Bytes::new(), 65536)
        .await
        .unwrap();
    assert_eq!(r.status, 2);
    let sense = r.sense.unwrap();
    assert_ne!(sense[2] & 0x80, 0, "FILEMARK bit: {sense:02x?}");

    // The console's view of the drive (published by the drive after each command): the
    // cartridge and the bytes moved, without asking the drive.
    let api = common::api::admin(&server, dir.path());
    let view = api.library(IQN).unwrap();
    let drive = &view.drives[0];
    assert_eq!(drive.barcode.as_ref(), Some(&barcode), "{drive:?}");
    assert_eq!(drive.state, "loaded", "{drive:?}");
    assert_eq!(drive.stats.bytes_written, 10 * 65536, "{drive:?}");
    assert_eq!(drive.stats.bytes_read, 10 * 65536, "{drive:?}");
    assert_eq!(drive.stats.loads, 1, "{drive:?}");

    // Back to its slot.
    good(
        &client,
        0,
        &[0xA5, 0, 0, 0, d[0], d[1], s[0], s[1], 0, 0, 0, 0],
        Bytes::new(),
        0,
    )
    .await;
    assert!(elements(&client, 4).await.is_empty());
    let tur = client
        .execute(1, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
        .await
        .unwrap();
    assert_eq!(
        (tur.status, tur.sense.map(|s| s[12])),
        (2, Some(0x3A)),
        "MEDIUM NOT PRESENT"
    );
    // Load it again (at BOT), overwrite it with one record and stop reel without any
    // synchronising command: the clean stop must make that record durable.
    good(
        &client,
        0,
        &[0xA5, 0, 0, 0, s[0], s[1], d[0], d[1], 0, 0, 0, 0],
        Bytes::new(),
        0,
    )
    .await;
    let _ = client
        .execute(1, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
        .await
        .unwrap();
    good(&client, 1, &write6(65536), record(99), 0).await;
    drop(client);
    server.stop();

    let server = start(dir.path(), portal);
    let client = connect(portal).await;
    assert_eq!(
        elements(&client, 4).await,
        vec![(drive_addresses, barcode.clone())],
        "still in the drive"
    );
    good(&client, 1, &[0x01, 0, 0, 0, 0, 0], Bytes::new(), 0).await;
    let data = good(&client, 1, &read6(65536), Bytes::new(), 65536).await;
    assert!(
        data == record(99),
        "the record written before the restart is there"
    );
    let r = client
        .execute(1, &read6(65536), Bytes::new(), 65536)
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.sense.map(|s| s[2] & 0x0f)),
        (2, Some(0x08)),
        "then BLANK CHECK at end of data"
    );
    drop(client);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_keeps_everything_up_to_the_last_synchronising_point() {
    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let server = start(dir.path(), portal);
    let client = connect(portal).await;
    let slots = elements(&client, 2).await;
    let (slot, barcode) = slots[1].clone();
    let drive = {
        let cdb = [0xB8, 0x04, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0];
        let data = good(&client, 0, &cdb, Bytes::new(), 0xFFFF).await;
        u16::from_be_bytes([data[16], data[17]])
    };
    let (s, d) = (slot.to_be_bytes(), drive.to_be_bytes());
    good(
        &client,
        0,
        &[0xA5, 0, 0, 0, s[0], s[1], d[0], d[1], 0, 0, 0, 0],
        Bytes::new(),
        0,
    )
    .await;
    let _ = client
        .execute(1, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
        .await
        .unwrap();
    // Five records and a filemark without IMMED (a synchronising point: the drive writes its
    // buffer to the medium first), then three more records that nothing synchronises.
    for i in 0..5 {
        good(&client, 1, &write6(65536), record(i), 0).await;
    }
    good(&client, 1, &[0x10, 0, 0, 0, 1, 0], Bytes::new(), 0).await;
    for i in 5..8 {
        good(&client, 1, &write6(65536), record(i), 0).await;
    }
    drop(client);
    server.kill();

    let server = start(dir.path(), portal);
    let client = connect(portal).await;
    assert_eq!(
        elements(&client, 4).await,
        vec![(drive, barcode)],
        "the cartridge is still in its drive"
    );
    good(&client, 1, &[0x01, 0, 0, 0, 0, 0], Bytes::new(), 0).await;
    for i in 0..5 {
        let data = good(&client, 1, &read6(65536), Bytes::new(), 65536).await;
        assert!(
            data == record(i),
            "synchronised record {i} survives SIGKILL"
        );
    }
    let r = client
        .execute(1, &read6(65536), Bytes::new(), 65536)
        .await
        .unwrap();
    assert_ne!(
        r.sense.as_ref().map_or(0, |s| s[2] & 0x80),
        0,
        "then the filemark"
    );
    // What came after the last synchronising point may be lost, but whatever is there must be
    // exactly those records in order, and then end of data.
    let mut i = 5;
    loop {
        let r = client
            .execute(1, &read6(65536), Bytes::new(), 65536)
            .await
            .unwrap();
        if r.status != 0 {
            assert_eq!(
                r.sense.map(|s| s[2] & 0x0f),
                Some(0x08),
                "BLANK CHECK at end of data"
            );
            break;
        }
        assert!(
            r.data == record(i),
            "unsynchronised record {i} is either lost or intact"
        );
        i += 1;
    }
    drop(client);
    server.stop();
}
