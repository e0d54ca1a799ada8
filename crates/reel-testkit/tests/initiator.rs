//! The kit's initiator side against a real target server (reel-iscsi-net over loopback, a
//! null disk behind it): the test login settings log in, the power-on unit attention is
//! consumed, and both the async helpers and the blocking [`Tape`] session move data.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reel_iscsi::login::{PortalConfig, TargetConfig};
use reel_iscsi::params::Limits;
use reel_iscsi_net::{DEFAULT_MAX_SESSIONS, TargetServer, TargetServerConfig};
use reel_scsi::initiator::describe::is_unit_attention;
use reel_scsi::initiator::sbc::{read10, write10};
use reel_scsi::initiator::spc::{TEST_UNIT_READY, inquiry, parse_inquiry};
use reel_scsi::{LunTable, NullDisk, ScsiDevice};
use reel_testkit::{Tape, connect, good, login_config, ready};

const TARGET: &str = "iqn.2026-11.org.reel.test:kit";

async fn start() -> TargetServer {
    let mut table = LunTable::new();
    table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 20))));
    TargetServer::start(TargetServerConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        portal: PortalConfig {
            targets: vec![TargetConfig {
                name: TARGET.into(),
                alias: None,
                allow_initiators: None,
                chap: None,
                mutual_chap: None,
                portal_group_tag: 1,
            }],
            addresses: Vec::new(),
            limits: Limits::target_default(),
            discovery_chap: None,
            redirects: Default::default(),
        },
        luns: vec![Arc::new(table)],
        queue_depth: 32,
        nop_interval: Duration::from_secs(5),
        login_timeout: Duration::from_secs(5),
        max_sessions: DEFAULT_MAX_SESSIONS,
    })
    .await
    .expect("the server starts")
}

#[test]
fn async_helpers_and_the_blocking_tape_session() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(start());
    let portal = server.local_addrs()[0];

    runtime.block_on(async {
        let config = login_config("iqn.2026-11.org.reel.test:kit-async", Some(TARGET), 1);
        let client = connect(portal, config).await.unwrap();
        // A new nexus sees the power-on unit attention first; `ready` consumes it.
        let first = client
            .execute(0, &TEST_UNIT_READY, Bytes::new(), 0)
            .await
            .unwrap();
        assert!(is_unit_attention(first.sense.as_deref()));
        ready(&client, [0]).await;
        let data = good(&client, 0, &inquiry(96), Bytes::new(), 96).await;
        assert_eq!(parse_inquiry(&data).unwrap().vendor, "REEL");
        good(&client, 0, &write10(8, 2), Bytes::from(vec![7u8; 1024]), 0).await;
        let data = good(&client, 0, &read10(8, 2), Bytes::new(), 1024).await;
        assert_eq!(data.len(), 1024);
        let _ = client.logout().await;
    });

    // The blocking session, from a thread outside the runtime.
    let tape = Tape::connect(portal, TARGET, 0, 3);
    tape.ready();
    tape.good(&write10(0, 1), vec![1u8; 512]);
    let (status, data, sense) = tape.run(&read10(0, 1), Vec::new(), 512);
    assert_eq!((status, data.len(), sense.len()), (0, 512, 0));
    let (status, _, sense) = tape.run(&read10(u32::MAX, 1), Vec::new(), 512);
    assert_eq!(status, 2, "a read past the end is CHECK CONDITION");
    assert!(!sense.is_empty());
    drop(tape);
    runtime.block_on(server.shutdown(Duration::from_secs(5)));
}
