//! The target server over real TCP on loopback, driven by reel's initiator client:
//! logins (CHAP, ACL, digests), discovery, data both ways, task management,
//! session reinstatement, restart, and many sessions at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reel_iscsi::chap::ChapCredentials;
use reel_iscsi::initiator_login::{InitiatorLoginConfig, LoginError};
use reel_iscsi::login::status;
use reel_iscsi::login::{PortalConfig, TargetConfig};
use reel_iscsi::params::{DigestPreference, Limits};
use reel_iscsi::session::TmfFunction;
use reel_iscsi_net::{
    Client, ClientError, ClientOptions, DATA_IN_BUDGET, DEFAULT_MAX_SESSIONS, TargetServer,
    TargetServerConfig,
};
use reel_scsi::initiator::describe::is_unit_attention;
use reel_scsi::initiator::sbc::{read10, write10, write12};
use reel_scsi::initiator::spc::{TEST_UNIT_READY, inquiry};
use reel_scsi::{Asc, KeySpecific, LunTable, NullDisk, ScsiDevice, SenseKey};
use reel_testkit::check_condition;

const INITIATOR: &str = "iqn.2026-11.org.reel.test:client";

fn target(name: &str) -> TargetConfig {
    TargetConfig {
        name: format!("iqn.2026-11.org.reel.test:{name}"),
        alias: Some(name.to_string()),
        allow_initiators: None,
        chap: None,
        mutual_chap: None,
        portal_group_tag: 1,
    }
}

async fn start_with(targets: Vec<TargetConfig>, listen: SocketAddr) -> TargetServer {
    start_capped(targets, listen, DEFAULT_MAX_SESSIONS).await
}

async fn start_capped(
    targets: Vec<TargetConfig>,
    listen: SocketAddr,
    max_sessions: usize,
) -> TargetServer {
    let luns = targets
        .iter()
        .map(|_| {
            let mut table = LunTable::new();
            table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 30))));
            Arc::new(table)
        })
        .collect();
    TargetServer::start(TargetServerConfig {
        listen: vec![listen],
        portal: PortalConfig {
            targets,
            addresses: Vec::new(),
            limits: Limits {
                header_digest: DigestPreference::PreferNone,
                ..Limits::target_default()
            },
            discovery_chap: None,
            redirects: Default::default(),
        },
        luns,
        queue_depth: 32,
        nop_interval: Duration::from_secs(5),
        login_timeout: Duration::from_secs(5),
        max_sessions,
    })
    .await
    .expect("server starts")
}

async fn start(targets: Vec<TargetConfig>) -> (TargetServer, SocketAddr) {
    let server = start_with(targets, "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.local_addrs()[0];
    (server, addr)
}

fn login(target: Option<&str>, isid: u8) -> InitiatorLoginConfig {
    let target = target.map(|t| format!("iqn.2026-11.org.reel.test:{t}"));
    reel_testkit::login_config(INITIATOR, target.as_deref(), u16::from(isid))
}

fn status_of(result: Result<Client, ClientError>) -> u16 {
    match result {
        Err(ClientError::Login(LoginError::Status { class, detail, .. })) => {
            (class as u16) << 8 | detail as u16
        }
        Err(other) => panic!("expected a login status, got {other}"),
        Ok(_) => panic!("login unexpectedly succeeded"),
    }
}

/// Clears the power-on unit attention every new I_T nexus gets first (SAM-5 §5.14).
async fn clear_unit_attention(client: &Client) {
    let r = client
        .execute(0, &TEST_UNIT_READY, Bytes::new(), 0)
        .await
        .unwrap();
    if r.status == 2 {
        assert!(
            is_unit_attention(r.sense.as_deref()),
            "UNIT ATTENTION expected first"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inquiry_read_and_write_through_tcp() {
    let (server, addr) = start(vec![target("open")]).await;
    let client = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    let inquiry = client
        .execute(0, &inquiry(96), Bytes::new(), 96)
        .await
        .unwrap();
    assert_eq!(inquiry.status, 0);
    assert_eq!(&inquiry.data[8..12], b"REEL");
    clear_unit_attention(&client).await;
    let data = Bytes::from(vec![0xa5u8; 1 << 20]);
    let w = client.execute(0, &write10(0, 2048), data, 0).await.unwrap();
    assert_eq!(w.status, 0);
    let r = client
        .execute(0, &read10(0, 2048), Bytes::new(), 1 << 20)
        .await
        .unwrap();
    assert_eq!((r.status, r.data.len(), r.residual), (0, 1 << 20, 0));
    assert!(r.data.iter().all(|b| *b == 0), "a null disk reads zeros");
    // A bad LBA: CHECK CONDITION, ILLEGAL REQUEST, LBA OUT OF RANGE (21h).
    let r = client
        .execute(0, &read10(u32::MAX, 1), Bytes::new(), 512)
        .await
        .unwrap();
    let sense = check_condition(&r);
    assert_eq!(
        (sense.key, sense.asc),
        (
            SenseKey::ILLEGAL_REQUEST,
            Asc::LOGICAL_BLOCK_ADDRESS_OUT_OF_RANGE
        )
    );
    assert_eq!(client.logout().await.unwrap(), 0);
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_only_targets_the_initiator_may_use() {
    let mut acl = target("acl");
    acl.allow_initiators = Some(vec!["iqn.2026-11.org.reel.test:someone-else".into()]);
    let (server, addr) = start(vec![target("open"), acl, target("other")]).await;
    let client = Client::connect(addr, login(None, 1), ClientOptions::default())
        .await
        .unwrap();
    let targets = client.send_targets().await.unwrap();
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "iqn.2026-11.org.reel.test:open",
            "iqn.2026-11.org.reel.test:other"
        ]
    );
    assert_eq!(
        targets[0].1,
        vec![format!("{addr},1")],
        "the bound portal with its group tag"
    );
    // SCSI commands are not allowed in a discovery session.
    assert!(
        client
            .execute(0, &inquiry(36), Bytes::new(), 36)
            .await
            .is_err()
    );
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chap_acl_and_unknown_targets_get_the_right_login_status() {
    let mut chap = target("chap");
    chap.chap = Some(ChapCredentials::new("reel-user", "reel-secret-12"));
    let mut mutual = target("mutual");
    mutual.chap = Some(ChapCredentials::new("reel-user", "reel-secret-12"));
    mutual.mutual_chap = Some(ChapCredentials::new("reel-target", "target-secret-1"));
    let mut acl = target("acl");
    acl.allow_initiators = Some(vec!["iqn.2026-11.org.reel.test:someone-else".into()]);
    let (server, addr) = start(vec![chap, mutual, acl]).await;
    let options = ClientOptions::default;

    // No credentials where CHAP is required: authentication failure (0x0201).
    assert_eq!(
        status_of(Client::connect(addr, login(Some("chap"), 1), options()).await),
        0x0201
    );
    let mut wrong = login(Some("chap"), 1);
    wrong.chap = Some(ChapCredentials::new("reel-user", "not-the-secret"));
    assert_eq!(
        status_of(Client::connect(addr, wrong, options()).await),
        0x0201
    );
    let mut right = login(Some("chap"), 1);
    right.chap = Some(ChapCredentials::new("reel-user", "reel-secret-12"));
    let client = Client::connect(addr, right, options()).await.unwrap();
    client.nop().await.unwrap();

    let mut mutual_ok = login(Some("mutual"), 2);
    mutual_ok.chap = Some(ChapCredentials::new("reel-user", "reel-secret-12"));
    mutual_ok.mutual_chap = Some(ChapCredentials::new("reel-target", "target-secret-1"));
    Client::connect(addr, mutual_ok, options())
        .await
        .unwrap()
        .nop()
        .await
        .unwrap();
    let mut mutual_bad = login(Some("mutual"), 3);
    mutual_bad.chap = Some(ChapCredentials::new("reel-user", "reel-secret-12"));
    mutual_bad.mutual_chap = Some(ChapCredentials::new("reel-target", "wrong-secret-99"));
    match Client::connect(addr, mutual_bad, options()).await {
        Err(ClientError::Login(LoginError::MutualAuthFailed)) => {}
        Err(other) => panic!("expected the initiator to refuse the target, got {other}"),
        Ok(_) => panic!("a target with the wrong mutual secret was accepted"),
    }

    assert_eq!(
        status_of(Client::connect(addr, login(Some("acl"), 4), options()).await),
        0x0202
    );
    assert_eq!(
        status_of(Client::connect(addr, login(Some("nonexistent"), 5), options()).await),
        0x0203
    );
    // A TSIH we never issued (e.g. from before a restart): session does not exist (0x020A).
    let mut stale = login(Some("acl"), 6);
    stale.initiator_name = "iqn.2026-11.org.reel.test:someone-else".into();
    stale.tsih = 0x7777;
    assert_eq!(
        status_of(Client::connect(addr, stale, options()).await),
        0x020a
    );
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_both_ways() {
    let (server, addr) = start(vec![target("open")]).await;
    let mut config = login(Some("open"), 1);
    config.limits.header_digest = DigestPreference::Crc32c;
    config.limits.data_digest = DigestPreference::Crc32c;
    let client = Client::connect(addr, config, ClientOptions::default())
        .await
        .unwrap();
    clear_unit_attention(&client).await;
    let w = client
        .execute(0, &write10(0, 600), Bytes::from(vec![7u8; 600 * 512]), 0)
        .await
        .unwrap();
    assert_eq!(w.status, 0);
    let r = client
        .execute(0, &read10(0, 600), Bytes::new(), 600 * 512)
        .await
        .unwrap();
    assert_eq!((r.status, r.data.len()), (0, 600 * 512));
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_login_with_the_same_isid_reinstates_the_session() {
    let (server, addr) = start(vec![target("open")]).await;
    let first = Client::connect(addr, login(Some("open"), 9), ClientOptions::default())
        .await
        .unwrap();
    first.nop().await.unwrap();
    assert_eq!(server.sessions().len(), 1);
    // Same initiator name and ISID, TSIH 0: what open-iscsi does after a network failure.
    let second = Client::connect(addr, login(Some("open"), 9), ClientOptions::default())
        .await
        .unwrap();
    second.nop().await.unwrap();
    assert!(first.nop().await.is_err(), "the old connection is closed");
    let sessions = server.sessions();
    assert_eq!(sessions.len(), 1);
    // A different ISID is a second, independent session.
    let third = Client::connect(addr, login(Some("open"), 10), ClientOptions::default())
        .await
        .unwrap();
    third.nop().await.unwrap();
    second.nop().await.unwrap();
    assert_eq!(server.sessions().len(), 2);
    server.shutdown(Duration::from_secs(5)).await;
}

/// `max_sessions` sessions log in; one more is refused with "out of resources" (RFC 7143
/// §11.13.5) until a session ends; reinstating a session at the cap replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_beyond_max_sessions_is_refused_out_of_resources() {
    let server = start_capped(vec![target("open")], "127.0.0.1:0".parse().unwrap(), 2).await;
    let addr = server.local_addrs()[0];
    let first = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    let second = Client::connect(addr, login(None, 2), ClientOptions::default())
        .await
        .unwrap();
    let third = Client::connect(addr, login(Some("open"), 3), ClientOptions::default()).await;
    assert_eq!(status_of(third), status::OUT_OF_RESOURCES);
    assert_eq!(server.sessions().len(), 2);
    first.nop().await.unwrap();
    second.nop().await.unwrap();
    // Reinstatement (same ISID) replaces a session: allowed at the cap.
    let again = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    again.nop().await.unwrap();
    // A session ends: room for one more.
    assert_eq!(second.logout().await.unwrap(), 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.sessions().len() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let third = Client::connect(addr, login(Some("open"), 3), ClientOptions::default())
        .await
        .unwrap();
    third.nop().await.unwrap();
    server.shutdown(Duration::from_secs(5)).await;
}

/// A write longer than the LU takes (the null disk's 64 MiB Block Limits) is answered
/// CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN CDB at the TRANSFER LENGTH, without
/// its data being solicited; the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_beyond_the_lu_limit_is_refused_and_the_session_goes_on() {
    let (server, addr) = start(vec![target("open")]).await;
    let client = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    clear_unit_attention(&client).await;
    let blocks: u32 = (65 << 20) / 512;
    let r = client
        .execute(0, &write12(0, blocks), Bytes::from(vec![0u8; 65 << 20]), 0)
        .await
        .unwrap();
    let sense = check_condition(&r);
    assert_eq!(
        (sense.key, sense.asc),
        (SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB)
    );
    assert_eq!(
        sense.key_specific,
        Some(KeySpecific::FieldPointer {
            cd: true,
            byte: 6,
            bit: None
        }),
        "field pointer: CDB byte 6"
    );
    let r = client
        .execute(0, &write10(0, 128), Bytes::from(vec![1u8; 65536]), 0)
        .await
        .unwrap();
    assert_eq!(r.status, 0);
    assert_eq!(client.logout().await.unwrap(), 0);
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_management_over_the_wire() {
    let (server, addr) = start(vec![target("open")]).await;
    let client = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    clear_unit_attention(&client).await;
    assert_eq!(
        client
            .task_management(TmfFunction::LogicalUnitReset, 0, u32::MAX)
            .await
            .unwrap(),
        0
    );
    // After a LUN reset the nexus sees a unit attention (29h: reset occurred).
    let r = client
        .execute(0, &TEST_UNIT_READY, Bytes::new(), 0)
        .await
        .unwrap();
    let sense = check_condition(&r);
    assert_eq!(
        (sense.key, sense.asc.asc()),
        (SenseKey::UNIT_ATTENTION, 0x29)
    );
    // A LUN that does not exist.
    assert_eq!(
        client
            .task_management(TmfFunction::LogicalUnitReset, 5, u32::MAX)
            .await
            .unwrap(),
        2
    );
    // ABORT TASK for a task that is long gone: function complete or task does not exist.
    let code = client
        .task_management(TmfFunction::AbortTask, 0, 0x1234)
        .await
        .unwrap();
    assert!(code == 0 || code == 1, "{code}");
    server.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiator_logs_in_again_after_the_target_restarts() {
    let (server, addr) = start(vec![target("open")]).await;
    let client = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    client.nop().await.unwrap();
    server.shutdown(Duration::from_secs(5)).await;
    assert!(
        client.nop().await.is_err(),
        "the session ended with the server"
    );
    let server = start_with(vec![target("open")], addr).await;
    let client = Client::connect(addr, login(Some("open"), 1), ClientOptions::default())
        .await
        .unwrap();
    client.nop().await.unwrap();
    server.shutdown(Duration::from_secs(5)).await;
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// 64 sessions with queue depth 8 each, mixed reads and writes against null disks,
/// for REEL_SOAK_SECS seconds (default 10): no errors, and memory does not grow
/// between the first and the second half of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_sessions_at_queue_depth_eight() {
    let seconds: u64 = std::env::var("REEL_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let (server, addr) = start(vec![target("open")]).await;
    let mut clients = Vec::new();
    for i in 0..64u8 {
        let client = Client::connect(addr, login(Some("open"), i), ClientOptions::default())
            .await
            .unwrap();
        clear_unit_attention(&client).await;
        clients.push(client);
    }
    assert_eq!(server.sessions().len(), 64);
    let start = Instant::now();
    let half = Duration::from_secs(seconds) / 2;
    let mid_rss = Arc::new(std::sync::Mutex::new(0u64));
    let mut workers = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        for slot in 0..8u32 {
            let client = client.clone();
            let mid_rss = mid_rss.clone();
            workers.push(tokio::spawn(async move {
                let mut n = 0u64;
                let payload = Bytes::from(vec![i as u8; 64 * 1024]);
                while start.elapsed() < half * 2 {
                    let lba = (slot * 128) + (n as u32 % 1024) * 1024;
                    let r = if n.is_multiple_of(2) {
                        client
                            .execute(0, &write10(lba, 128), payload.clone(), 0)
                            .await
                    } else {
                        client
                            .execute(0, &read10(lba, 128), Bytes::new(), 64 * 1024)
                            .await
                    }
                    .expect("command completes");
                    assert_eq!(r.status, 0, "session {i} slot {slot}: {:?}", r.sense);
                    n += 1;
                    if i == 0 && slot == 0 && start.elapsed() >= half {
                        let mut mid = mid_rss.lock().unwrap();
                        if *mid == 0 {
                            *mid = rss_kib();
                        }
                    }
                }
                n
            }));
        }
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await.unwrap();
    }
    let end_rss = rss_kib();
    let mid = *mid_rss.lock().unwrap();
    eprintln!(
        "{total} commands in {seconds} s; RSS {mid} KiB at half time, {end_rss} KiB at the end"
    );
    assert!(total > 64 * 8, "every slot ran commands");
    assert!(
        end_rss < mid + 64 * 1024,
        "memory grew from {mid} KiB to {end_rss} KiB"
    );
    for client in &clients {
        assert_eq!(client.logout().await.unwrap(), 0);
    }
    server.shutdown(Duration::from_secs(5)).await;
}

/// A TCP relay to `to` for one connection whose target-to-initiator direction stops while the
/// returned flag is true: an initiator that sends commands and does not read its socket.
async fn stalling_relay(to: SocketAddr) -> (SocketAddr, tokio::sync::watch::Sender<bool>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stall, mut stalled) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = tokio::net::TcpStream::connect(to).await.unwrap();
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        });
        let mut buf = vec![0u8; 64 << 10];
        loop {
            while *stalled.borrow() {
                if stalled.changed().await.is_err() {
                    return;
                }
            }
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    (addr, stall)
}

/// An initiator that keeps a full window of large READs in flight and stops reading its
/// socket: the target stops starting its commands once their Data-In would pass
/// `DATA_IN_BUDGET` (it had queued every command's data, the whole window, without limit);
/// when the initiator reads again, every command completes with its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initiator_that_does_not_read_cannot_make_the_target_queue_without_limit() {
    const READ_BYTES: u32 = 8 << 20;
    const BLOCKS: u16 = (READ_BYTES / 512) as u16;
    const READS: u32 = 32; // the server's queue depth: 256 MiB of Data-In if all ran
    let (server, addr) = start(vec![target("open")]).await;
    let (relay, stall) = stalling_relay(addr).await;
    let client = Arc::new(
        Client::connect(relay, login(Some("open"), 1), ClientOptions::default())
            .await
            .unwrap(),
    );
    clear_unit_attention(&client).await;
    stall.send(true).unwrap();
    let reads: Vec<_> = (0..READS)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .execute(
                        0,
                        &read10(i * u32::from(BLOCKS), BLOCKS),
                        Bytes::new(),
                        READ_BYTES,
                    )
                    .await
            })
        })
        .collect();
    let mut peak = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(server.queued_data_in_bytes());
    }
    eprintln!("peak Data-In queued while the initiator did not read: {peak} bytes");
    assert!(
        peak >= u64::from(READ_BYTES),
        "the target queued Data-In: {peak}"
    );
    assert!(
        peak <= DATA_IN_BUDGET + u64::from(READ_BYTES),
        "{peak} bytes queued for an initiator that does not read (budget {DATA_IN_BUDGET})"
    );
    stall.send(false).unwrap();
    for read in reads {
        let r = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("every READ completes once the initiator reads")
            .unwrap()
            .unwrap();
        assert_eq!((r.status, r.data.len()), (0, READ_BYTES as usize));
    }
    assert_eq!(client.logout().await.unwrap(), 0);
    assert_eq!(server.queued_data_in_bytes(), 0);
    server.shutdown(Duration::from_secs(5)).await;
}
