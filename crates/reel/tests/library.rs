//! The default library end to end over iSCSI (reel's own initiator, no kernel): find
//! the changer and drives, load a cartridge, write and read it back, unload, restart
//! reel, and find the cartridge where it was with its data intact.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use reel_iscsi_net::Client;
use reel_scsi::Asc;
use reel_scsi::SenseKey;
use reel_scsi::initiator::smc::{
    ElementType, move_medium, parse_element_status, read_element_status,
};
use reel_scsi::initiator::spc::TEST_UNIT_READY;
use reel_scsi::initiator::ssc::{REWIND, Transfer, read6, write_filemarks, write6};
use reel_testkit::{Server, check_condition, free_portal, good, login_config, ready};

const IQN: &str = "iqn.2026-11.org.reel:library";
const RECORD: u32 = 65536;

fn start(dir: &std::path::Path, portal: SocketAddr) -> Server {
    Server::start(dir, portal, &[])
}

async fn connect(portal: SocketAddr) -> Client {
    let config = login_config("iqn.2026-11.org.reel.test:library", Some(IQN), 1);
    let client = reel_testkit::connect(portal, config).await.unwrap();
    // Each LUN reports its power-on unit attention once.
    ready(&client, 0..5).await;
    client
}

/// READ ELEMENT STATUS with VOLTAG: (address, barcode) of full elements of `kind`.
async fn elements(client: &Client, kind: ElementType) -> Vec<(u16, String)> {
    let cdb = read_element_status(kind, 0xFFFF);
    let data = good(client, 0, &cdb, Bytes::new(), 0xFFFF).await;
    parse_element_status(&data)
        .unwrap()
        .into_iter()
        .filter(|e| e.full)
        .map(|e| (e.address, e.barcode.unwrap_or_default()))
        .collect()
}

/// The address of the first drive.
async fn first_drive(client: &Client) -> u16 {
    let cdb = read_element_status(ElementType::DATA_TRANSFER, 0xFFFF);
    let data = good(client, 0, &cdb, Bytes::new(), 0xFFFF).await;
    parse_element_status(&data).unwrap()[0].address
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
    let slots = elements(&client, ElementType::STORAGE).await;
    assert_eq!(slots.len(), 20);
    assert_eq!(slots[0].1, "REL001L9");
    assert!(
        elements(&client, ElementType::DATA_TRANSFER)
            .await
            .is_empty()
    );
    let drive_addresses = first_drive(&client).await;

    // MOVE MEDIUM slot 1 → drive 1; the drive (LUN 1) reports the medium change, then is ready.
    let (slot, barcode) = slots[0].clone();
    let load = move_medium(0, slot, drive_addresses);
    good(&client, 0, &load, Bytes::new(), 0).await;
    let tur = client
        .execute(1, &TEST_UNIT_READY, Bytes::new(), 0)
        .await
        .unwrap();
    // The first TUR after the load reports the medium change.
    assert_eq!(
        check_condition(&tur).asc,
        Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
    );
    good(&client, 1, &TEST_UNIT_READY, Bytes::new(), 0).await;
    assert_eq!(
        elements(&client, ElementType::DATA_TRANSFER).await,
        vec![(drive_addresses, barcode.clone())]
    );

    // Ten 64 KiB records, a filemark, rewind, read back.
    let (write, read) = (
        write6(Transfer::Variable(RECORD)),
        read6(Transfer::Variable(RECORD), false),
    );
    for i in 0..10 {
        good(&client, 1, &write, record(i), 0).await;
    }
    good(&client, 1, &write_filemarks(1, false), Bytes::new(), 0).await;
    good(&client, 1, &REWIND, Bytes::new(), 0).await;
    for i in 0..10 {
        let data = good(&client, 1, &read, Bytes::new(), RECORD).await;
        assert!(data == record(i), "record {i} reads back");
    }
    // The filemark: CHECK CONDITION, NO SENSE with FILEMARK set.
    let r = client
        .execute(1, &read, Bytes::new(), RECORD)
        .await
        .unwrap();
    let fm = check_condition(&r);
    assert!(fm.filemark, "FILEMARK bit: {fm:?}");

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
    let unload = move_medium(0, drive_addresses, slot);
    good(&client, 0, &unload, Bytes::new(), 0).await;
    assert!(
        elements(&client, ElementType::DATA_TRANSFER)
            .await
            .is_empty()
    );
    let tur = client
        .execute(1, &TEST_UNIT_READY, Bytes::new(), 0)
        .await
        .unwrap();
    assert_eq!(check_condition(&tur).asc.asc(), 0x3A, "MEDIUM NOT PRESENT");
    // Load it again (at BOT), overwrite it with one record and stop reel without any
    // synchronising command: the clean stop must make that record durable.
    good(&client, 0, &load, Bytes::new(), 0).await;
    ready(&client, [1]).await;
    good(&client, 1, &write, record(99), 0).await;
    drop(client);
    server.stop();

    let server = start(dir.path(), portal);
    let client = connect(portal).await;
    assert_eq!(
        elements(&client, ElementType::DATA_TRANSFER).await,
        vec![(drive_addresses, barcode.clone())],
        "still in the drive"
    );
    good(&client, 1, &REWIND, Bytes::new(), 0).await;
    let data = good(&client, 1, &read, Bytes::new(), RECORD).await;
    assert!(
        data == record(99),
        "the record written before the restart is there"
    );
    let r = client
        .execute(1, &read, Bytes::new(), RECORD)
        .await
        .unwrap();
    assert_eq!(
        check_condition(&r).key,
        SenseKey::BLANK_CHECK,
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
    let slots = elements(&client, ElementType::STORAGE).await;
    let (slot, barcode) = slots[1].clone();
    let drive = first_drive(&client).await;
    good(&client, 0, &move_medium(0, slot, drive), Bytes::new(), 0).await;
    ready(&client, [1]).await;
    let (write, read) = (
        write6(Transfer::Variable(RECORD)),
        read6(Transfer::Variable(RECORD), false),
    );
    // Five records and a filemark without IMMED (a synchronising point: the drive writes its
    // buffer to the medium first), then three more records that nothing synchronises.
    for i in 0..5 {
        good(&client, 1, &write, record(i), 0).await;
    }
    good(&client, 1, &write_filemarks(1, false), Bytes::new(), 0).await;
    for i in 5..8 {
        good(&client, 1, &write, record(i), 0).await;
    }
    drop(client);
    server.kill();

    let server = start(dir.path(), portal);
    let client = connect(portal).await;
    assert_eq!(
        elements(&client, ElementType::DATA_TRANSFER).await,
        vec![(drive, barcode)],
        "the cartridge is still in its drive"
    );
    good(&client, 1, &REWIND, Bytes::new(), 0).await;
    for i in 0..5 {
        let data = good(&client, 1, &read, Bytes::new(), RECORD).await;
        assert!(
            data == record(i),
            "synchronised record {i} survives SIGKILL"
        );
    }
    let r = client
        .execute(1, &read, Bytes::new(), RECORD)
        .await
        .unwrap();
    assert!(check_condition(&r).filemark, "then the filemark");
    // What came after the last synchronising point may be lost, but whatever is there must be
    // exactly those records in order, and then end of data.
    let mut i = 5;
    loop {
        let r = client
            .execute(1, &read, Bytes::new(), RECORD)
            .await
            .unwrap();
        if r.status != 0 {
            assert_eq!(
                check_condition(&r).key,
                SenseKey::BLANK_CHECK,
                "at end of data"
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
