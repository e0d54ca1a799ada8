//! What initiators can make a real `reel serve` hold is bounded by the server: a command
//! whose Data-Out exceeds what its device takes is answered CHECK CONDITION without its data
//! being solicited or kept, a fixed-block READ beyond the drive's transfer limit is refused,
//! and `[iscsi] max_sessions` caps sessions with a clear login status. Driven by reel's own
//! initiator; the server's memory is read from /proc/<pid>/status.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_iscsi::initiator::ScsiResult;
use reel_iscsi::initiator_login::{InitiatorLoginConfig, LoginError};
use reel_iscsi::login::status;
use reel_iscsi_net::{Client, ClientError, ClientOptions};
use reel_scsi::initiator::sbc::{write10, write16};
use reel_scsi::initiator::spc::{block_length_list, mode_select6};
use reel_scsi::initiator::ssc::{Transfer, read6, write6};
use reel_scsi::{Asc, KeySpecific, SenseKey};
use reel_testkit::serve::ServeCommand;
use reel_testkit::{Server, check_condition, login_config, ready};

const DISK: &str = "iqn.2026-11.org.reel.test:disk";
const LIBRARY: &str = "iqn.2026-11.org.reel.test:library";

/// `reel serve` as a child process with a null disk and a library, and its data directory.
struct Serve {
    server: Server,
    portal: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Serve {
    fn start(max_sessions: usize) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("reel.toml");
        std::fs::write(
            &config,
            format!(
                "[iscsi]\nmax_sessions = {max_sessions}\n\
                 [[iscsi.target]]\nname = \"{DISK}\"\nkind = \"null-disk\"\n\
                 [[iscsi.target]]\nname = \"{LIBRARY}\"\nkind = \"library\"\n"
            ),
        )
        .unwrap();
        let server = ServeCommand::new(&dir.path().join("data"))
            .args(&["--cartridges", "0", "--config"])
            .args(&[&config])
            .start();
        Serve {
            portal: server.portal(),
            server,
            _dir: dir,
        }
    }
}

fn login(target: Option<&str>, isid: u8) -> InitiatorLoginConfig {
    login_config("iqn.2026-11.org.reel.test:limits", target, u16::from(isid))
}

async fn connect(portal: SocketAddr, target: &str, isid: u8, luns: u64) -> Client {
    let client = Client::connect(portal, login(Some(target), isid), ClientOptions::default())
        .await
        .unwrap();
    // Each LUN reports its power-on unit attention once (SAM-5 §5.14).
    ready(&client, 0..luns).await;
    client
}

/// The CDB byte the field pointer of an ILLEGAL REQUEST, INVALID FIELD IN CDB names
/// (SPC-4 §4.5.2.4.2, C/D set).
fn invalid_field_at(r: &ScsiResult) -> u16 {
    let sense = check_condition(r);
    assert_eq!(
        (sense.key, sense.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB)
    );
    match sense.key_specific {
        Some(KeySpecific::FieldPointer { cd: true, byte, .. }) => byte,
        other => panic!("no CDB field pointer: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_transfers_get_check_condition_and_memory_stays_bounded() {
    let server = Serve::start(8);
    let disk = connect(server.portal, DISK, 1, 1).await;
    let tape = connect(server.portal, LIBRARY, 2, 2).await;
    let peak_before = server.server.memory_kib("VmHWM");

    // Four WRITE(16)s of 256 MiB each to the null disk, whose Block Limits allow 64 MiB,
    // all in flight at once: refused before their data is solicited.
    const BIG: usize = 256 << 20;
    let data = Bytes::from(vec![0x5au8; BIG]);
    let cdb = write16(0, (BIG / 512) as u32);
    let writes: Vec<_> = (0..4)
        .map(|_| {
            let (disk, data) = (disk.clone(), data.clone());
            tokio::spawn(async move { disk.execute(0, &cdb, data, 0).await })
        })
        .collect();
    for write in writes {
        let r = write.await.unwrap().unwrap();
        // SBC-3 §6.5.3: beyond MAXIMUM TRANSFER LENGTH, INVALID FIELD IN CDB at the
        // TRANSFER LENGTH field (byte 10 of a 16-byte CDB, C/D set).
        assert_eq!(invalid_field_at(&r), 10);
    }
    drop(data);

    // A 32 MiB variable-block WRITE(6) to a tape drive (largest record 8 MiB, limit 16 MiB).
    let record = Bytes::from(vec![1u8; 32 << 20]);
    let r = tape
        .execute(1, &write6(Transfer::Variable(32 << 20)), record, 0)
        .await
        .unwrap();
    assert_eq!(invalid_field_at(&r), 2);

    // Fixed mode with 512 KiB blocks, then a READ(6) of 2^24 - 1 blocks (8 TiB): refused
    // before the drive collects anything (SSC-4 READ(6), TRANSFER LENGTH at byte 2).
    let mode = block_length_list(0x10, 0, 512 << 10);
    let r = tape
        .execute(1, &mode_select6(12), Bytes::copy_from_slice(&mode), 0)
        .await
        .unwrap();
    assert_eq!(r.status, 0, "MODE SELECT: {:02x?}", r.sense);
    let read = read6(Transfer::Fixed(0xFF_FFFF), false);
    let r = tape
        .execute(1, &read, Bytes::new(), u32::MAX)
        .await
        .unwrap();
    assert_eq!(invalid_field_at(&r), 2);

    // Both sessions go on.
    let r = disk
        .execute(0, &write10(0, 128), Bytes::from(vec![2u8; 65536]), 0)
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    tape.nop().await.unwrap();

    // The server held none of the 1 GiB refused: its peak grew by less than one refused
    // command (a generous bound; buffering any one of them would break it).
    let peak_after = server.server.memory_kib("VmHWM");
    let rss = server.server.memory_kib("VmRSS");
    eprintln!("server VmHWM {peak_before} KiB before, {peak_after} KiB after; VmRSS {rss} KiB");
    assert!(
        peak_after < peak_before + 128 * 1024,
        "the server's peak memory grew from {peak_before} KiB to {peak_after} KiB"
    );
    assert_eq!(disk.logout().await.unwrap(), 0);
    assert_eq!(tape.logout().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_login_beyond_max_sessions_is_refused_out_of_resources() {
    let server = Serve::start(2);
    let first = connect(server.portal, DISK, 1, 0).await;
    // A discovery session counts too.
    let discovery = Client::connect(server.portal, login(None, 2), ClientOptions::default())
        .await
        .unwrap();
    let refused = Client::connect(
        server.portal,
        login(Some(LIBRARY), 3),
        ClientOptions::default(),
    )
    .await;
    match refused {
        Err(ClientError::Login(LoginError::Status {
            class,
            detail,
            message,
        })) => {
            // RFC 7143 §11.13.5: class 3 (target error), 02h "out of resources".
            assert_eq!(
                u16::from(class) << 8 | u16::from(detail),
                status::OUT_OF_RESOURCES
            );
            assert_eq!(message, "out of resources");
        }
        Err(other) => panic!("expected a login status, got {other}"),
        Ok(_) => panic!("a third session was admitted with max_sessions = 2"),
    }
    first.nop().await.unwrap();
    discovery.nop().await.unwrap();
    // Once a session ends there is room again.
    assert_eq!(discovery.logout().await.unwrap(), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let third = loop {
        match Client::connect(
            server.portal,
            login(Some(LIBRARY), 3),
            ClientOptions::default(),
        )
        .await
        {
            Ok(client) => break client,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no room after a logout: {e}"),
        }
    };
    third.nop().await.unwrap();
    assert_eq!(third.logout().await.unwrap(), 0);
    assert_eq!(first.logout().await.unwrap(), 0);
}
