//! What initiators can make a real `reel serve` hold is bounded by the server: a command
//! whose Data-Out exceeds what its device takes is answered CHECK CONDITION without its data
//! being solicited or kept, a fixed-block READ beyond the drive's transfer limit is refused,
//! and `[iscsi] max_sessions` caps sessions with a clear login status. Driven by reel's own
//! initiator; the server's memory is read from /proc/<pid>/status.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_iscsi::initiator_login::{InitiatorLoginConfig, LoginError};
use reel_iscsi::login::status;
use reel_iscsi::params::Limits;
use reel_iscsi_net::{Client, ClientError, ClientOptions};

const DISK: &str = "iqn.2026-11.org.reel.test:disk";
const LIBRARY: &str = "iqn.2026-11.org.reel.test:library";

/// `reel serve` as a child process, with its PID for /proc (killed on drop).
struct Serve {
    child: Child,
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
        let portal = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(["serve", "--listen", &portal.to_string(), "--data"])
            .arg(dir.path().join("data"))
            .args(["--http", "127.0.0.1:0", "--cartridges", "0", "--config"])
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "reel serve did not start");
            match lines.next() {
                Some(Ok(line)) if line.starts_with("Ctrl-C") => break,
                Some(Ok(_)) => {}
                _ => panic!("reel serve exited before serving"),
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            portal,
            _dir: dir,
        }
    }

    /// A field of /proc/<pid>/status in KiB (VmRSS now, VmHWM the peak so far).
    fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server is running");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn login(target: Option<&str>, isid: u8) -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        initiator_name: "iqn.2026-11.org.reel.test:limits".into(),
        initiator_alias: None,
        target_name: target.map(str::to_string),
        isid: [0x80, 0, 0, 0, 0, isid],
        tsih: 0,
        cid: 0,
        chap: None,
        mutual_chap: None,
        limits: Limits::initiator_default(),
        cmd_sn: 1,
    }
}

async fn connect(portal: SocketAddr, target: &str, isid: u8, luns: u64) -> Client {
    let client = Client::connect(portal, login(Some(target), isid), ClientOptions::default())
        .await
        .unwrap();
    // Each LUN reports its power-on unit attention once (SAM-5 §5.14).
    for lun in 0..luns {
        let _ = client
            .execute(lun, &[0, 0, 0, 0, 0, 0], Bytes::new(), 0)
            .await
            .unwrap();
    }
    client
}

/// Sense key, ASC, ASCQ and the CDB byte a field pointer names (SKSV and C/D set) of
/// fixed-format sense (SPC-4 §4.5.2.4.2).
fn sense_of(sense: &[u8]) -> (u8, u8, u8, Option<u16>) {
    let pointer = (sense.len() >= 18 && sense[15] & 0xc0 == 0xc0)
        .then(|| u16::from_be_bytes([sense[16], sense[17]]));
    (sense[2] & 0x0f, sense[12], sense[13], pointer)
}

const ILLEGAL_REQUEST: u8 = 0x05;
const INVALID_FIELD_IN_CDB: u8 = 0x24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_transfers_get_check_condition_and_memory_stays_bounded() {
    let server = Serve::start(8);
    let disk = connect(server.portal, DISK, 1, 1).await;
    let tape = connect(server.portal, LIBRARY, 2, 2).await;
    let peak_before = server.memory_kib("VmHWM");

    // Four WRITE(16)s of 256 MiB each to the null disk, whose Block Limits allow 64 MiB,
    // all in flight at once: refused before their data is solicited.
    const BIG: usize = 256 << 20;
    let data = Bytes::from(vec![0x5au8; BIG]);
    let mut cdb = [0u8; 16];
    cdb[0] = 0x8a;
    cdb[10..14].copy_from_slice(&((BIG / 512) as u32).to_be_bytes());
    let writes: Vec<_> = (0..4)
        .map(|_| {
            let (disk, data) = (disk.clone(), data.clone());
            tokio::spawn(async move { disk.execute(0, &cdb, data, 0).await })
        })
        .collect();
    for write in writes {
        let r = write.await.unwrap().unwrap();
        assert_eq!(r.status, 2, "CHECK CONDITION");
        let sense = sense_of(r.sense.as_deref().unwrap());
        // SBC-3 §6.5.3: beyond MAXIMUM TRANSFER LENGTH, INVALID FIELD IN CDB at the
        // TRANSFER LENGTH field (byte 10 of a 16-byte CDB, C/D set).
        assert_eq!(sense, (ILLEGAL_REQUEST, INVALID_FIELD_IN_CDB, 0, Some(10)));
    }
    drop(data);

    // A 32 MiB variable-block WRITE(6) to a tape drive (largest record 8 MiB, limit 16 MiB).
    let record = Bytes::from(vec![1u8; 32 << 20]);
    let len = (32u32 << 20).to_be_bytes();
    let r = tape
        .execute(1, &[0x0a, 0, len[1], len[2], len[3], 0], record, 0)
        .await
        .unwrap();
    assert_eq!(r.status, 2);
    let sense = sense_of(r.sense.as_deref().unwrap());
    assert_eq!(sense, (ILLEGAL_REQUEST, INVALID_FIELD_IN_CDB, 0, Some(2)));

    // Fixed mode with 512 KiB blocks, then a READ(6) of 2^24 - 1 blocks (8 TiB): refused
    // before the drive collects anything (SSC-4 READ(6), TRANSFER LENGTH at byte 2).
    let block = (512u32 << 10).to_be_bytes();
    let mode = Bytes::from(vec![
        0, 0, 0x10, 8, 0, 0, 0, 0, 0, block[1], block[2], block[3],
    ]);
    let r = tape
        .execute(1, &[0x15, 0x10, 0, 0, 12, 0], mode, 0)
        .await
        .unwrap();
    assert_eq!(r.status, 0, "MODE SELECT: {:02x?}", r.sense);
    let r = tape
        .execute(
            1,
            &[0x08, 0x01, 0xff, 0xff, 0xff, 0],
            Bytes::new(),
            u32::MAX,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 2);
    let sense = sense_of(r.sense.as_deref().unwrap());
    assert_eq!(sense, (ILLEGAL_REQUEST, INVALID_FIELD_IN_CDB, 0, Some(2)));

    // Both sessions go on.
    let mut cdb = [0u8; 10];
    cdb[0] = 0x2a;
    cdb[8] = 128;
    let r = disk
        .execute(0, &cdb, Bytes::from(vec![2u8; 65536]), 0)
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    tape.nop().await.unwrap();

    // The server held none of the 1 GiB refused: its peak grew by less than one refused
    // command (a generous bound; buffering any one of them would break it).
    let peak_after = server.memory_kib("VmHWM");
    let rss = server.memory_kib("VmRSS");
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
