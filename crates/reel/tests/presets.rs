//! Every library preset starts and its changer reports the preset's elements over iSCSI
//! (READ ELEMENT STATUS through reel's own initiator); the API shows the same library.

mod common;

use std::time::Instant;

use bytes::Bytes;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi::params::Limits;
use reel_iscsi_net::{Client, ClientOptions};

use common::{Server, free_portal};

const IQN: &str = "iqn.2026-11.org.reel:preset";

async fn connect(portal: std::net::SocketAddr) -> Client {
    connect_as(portal, IQN, "iqn.2026-11.org.reel.test:presets")
        .await
        .unwrap()
}

async fn connect_as(
    portal: std::net::SocketAddr,
    target: &str,
    initiator: &str,
) -> Result<Client, reel_iscsi_net::ClientError> {
    let config = InitiatorLoginConfig {
        initiator_name: initiator.into(),
        initiator_alias: None,
        target_name: Some(target.into()),
        isid: [0x80, 0, 0, 0, 0, 2],
        tsih: 0,
        cid: 0,
        chap: None,
        mutual_chap: None,
        limits: Limits::initiator_default(),
        cmd_sn: 1,
    };
    Client::connect(portal, config, ClientOptions::default()).await
}

/// READ ELEMENT STATUS of one element type with volume tags: (elements reported, full ones).
async fn element_count(client: &Client, kind: u8) -> (usize, usize, std::time::Duration) {
    let alloc: u32 = 0xFF_FFFF;
    let a = alloc.to_be_bytes();
    let cdb = [
        0xB8,
        0x10 | kind,
        0,
        0,
        0xFF,
        0xFF,
        0,
        a[1],
        a[2],
        a[3],
        0,
        0,
    ];
    // The first command may report the power-on unit attention.
    let _ = client.execute(0, &cdb, Bytes::new(), alloc).await.unwrap();
    let started = Instant::now();
    let response = client.execute(0, &cdb, Bytes::new(), alloc).await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.status, 0, "sense {:02x?}", response.sense);
    let data = response.data;
    let mut at = 8;
    let (mut count, mut full) = (0, 0);
    while at + 8 <= data.len() {
        let descriptor_len = u16::from_be_bytes([data[at + 2], data[at + 3]]) as usize;
        let page_bytes = u32::from_be_bytes([0, data[at + 5], data[at + 6], data[at + 7]]) as usize;
        let mut d = at + 8;
        while descriptor_len > 0 && d + descriptor_len <= (at + 8 + page_bytes).min(data.len()) {
            count += 1;
            full += usize::from(data[d + 2] & 0x01);
            d += descriptor_len;
        }
        at += 8 + page_bytes;
    }
    (count, full, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_preset_starts_with_its_elements() {
    // (preset, drives, slots, import/export)
    for (preset, drives, slots, mail) in [
        ("autoloader", 1, 8, 0),
        ("midrange", 4, 48, 4),
        ("large", 24, 2000, 10),
        ("vtl-node", 256, 10_000, 32),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("reel.toml");
        std::fs::write(
            &config,
            format!(
                "[[iscsi.target]]\nname = \"{IQN}\"\nkind = \"library\"\npreset = \"{preset}\"\n"
            ),
        )
        .unwrap();
        let portal = free_portal();
        let server = Server::start(
            &dir.path().join("data"),
            portal,
            &["--config", config.to_str().unwrap()],
        );
        let client = connect(portal).await;
        let (d, _, _) = element_count(&client, 4).await;
        let (s, full, took) = element_count(&client, 2).await;
        let (m, _, _) = element_count(&client, 3).await;
        assert_eq!((d, s, m), (drives, slots, mail), "{preset}");
        assert_eq!(
            full,
            slots.min(20),
            "{preset}: the 20 new cartridges are in the slots"
        );
        println!("{preset}: READ ELEMENT STATUS of {s} slots took {took:?}");
        let _ = client.logout().await;
        server.stop();
    }
}

#[test]
fn an_unknown_preset_is_refused_with_the_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!("[[iscsi.target]]\nname = \"{IQN}\"\nkind = \"library\"\npreset = \"huge\"\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .args([
            "serve",
            "--http",
            "off",
            "--listen",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reel.toml") && err.contains("line 4") && err.contains("preset"),
        "{err}"
    );
    assert!(!dir.path().join("data").exists(), "nothing started: {err}");
}

/// The large preset split into two logical libraries: each is a target of its own with its
/// own elements, takes its own pool's cartridges, and admits only its own initiators; the
/// physical library is not a target. The data directory comes from the configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_libraries_with_their_own_pools_and_initiators() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data-from-config");
    for prefix in ["FIN", "ENG"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
            .args([
                "cartridges",
                "create",
                "--prefix",
                prefix,
                "--count",
                "3",
                "--data",
            ])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let config = dir.path().join("reel.toml");
    let text = format!(
        r#"
[store]
data_dir = "{}"

[[pool]]
name = "finance"
barcodes = ["FIN000L9-FIN099L9"]

[[pool]]
name = "eng"
prefixes = ["ENG"]

[[iscsi.target]]
name = "iqn.2026-11.org.reel:large"
kind = "library"
preset = "large"

  [[iscsi.target.partition]]
  name = "iqn.2026-11.org.reel:large-finance"
  drives = 8
  slots = 500
  import_export = 4
  pool = "finance"
  allow_initiators = ["iqn.2026-11.org.reel.test:finance"]

  [[iscsi.target.partition]]
  name = "iqn.2026-11.org.reel:large-eng"
  drives = 16
  slots = 1500
  import_export = 6
  pool = "eng"
  allow_initiators = ["iqn.2026-11.org.reel.test:eng"]
"#,
        data.display()
    );
    std::fs::write(&config, text).unwrap();
    let portal = free_portal();
    // No --data: the configuration's store.data_dir is used.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .args([
            "serve",
            "--http",
            "off",
            "--listen",
            &portal.to_string(),
            "--config",
        ])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            banner.push_str(&line);
            banner.push('\n');
            if line.starts_with("Ctrl-C") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
    }
    assert!(banner.contains("data-from-config"), "{banner}");
    assert!(
        banner.contains(
            "large-finance — tape library (logical partition of iqn.2026-11.org.reel:large)"
        ),
        "{banner}"
    );

    for (target, initiator, drives, slots, mail, prefix) in [
        (
            "iqn.2026-11.org.reel:large-finance",
            "iqn.2026-11.org.reel.test:finance",
            8,
            500,
            4,
            "FIN",
        ),
        (
            "iqn.2026-11.org.reel:large-eng",
            "iqn.2026-11.org.reel.test:eng",
            16,
            1500,
            6,
            "ENG",
        ),
    ] {
        let client = connect_as(portal, target, initiator).await.unwrap();
        let (d, _, _) = element_count(&client, 4).await;
        let (s, full, _) = element_count(&client, 2).await;
        let (m, _, _) = element_count(&client, 3).await;
        assert_eq!((d, s, m, full), (drives, slots, mail, 3), "{target}");
        // The three full slots hold this pool's cartridges (volume tags at descriptor
        // offset 12 of the storage page).
        let tags = volume_tags(&client).await;
        assert_eq!(tags.len(), 3, "{tags:?}");
        assert!(
            tags.iter().all(|t| t.starts_with(prefix)),
            "{target}: {tags:?}"
        );
        let _ = client.logout().await;
        // The other partition's initiator is refused.
        let other = if prefix == "FIN" {
            "iqn.2026-11.org.reel.test:eng"
        } else {
            "iqn.2026-11.org.reel.test:finance"
        };
        assert!(
            connect_as(portal, target, other).await.is_err(),
            "{target} admitted {other}"
        );
    }
    // The physical library is not a target of its own.
    assert!(
        connect_as(
            portal,
            "iqn.2026-11.org.reel:large",
            "iqn.2026-11.org.reel.test:finance"
        )
        .await
        .is_err()
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

/// Volume tags of the full storage elements (READ ELEMENT STATUS, VolTag).
async fn volume_tags(client: &Client) -> Vec<String> {
    let alloc: u32 = 0xFF_FFFF;
    let a = alloc.to_be_bytes();
    let cdb = [0xB8, 0x12, 0, 0, 0xFF, 0xFF, 0, a[1], a[2], a[3], 0, 0];
    let response = client.execute(0, &cdb, Bytes::new(), alloc).await.unwrap();
    assert_eq!(response.status, 0);
    let data = response.data;
    let descriptor_len = u16::from_be_bytes([data[10], data[11]]) as usize;
    let mut tags = Vec::new();
    let mut d = 16;
    while d + descriptor_len <= data.len() {
        if data[d + 2] & 0x01 != 0 {
            let tag = String::from_utf8_lossy(&data[d + 12..d + 44])
                .trim()
                .to_string();
            tags.push(tag);
        }
        d += descriptor_len;
    }
    tags
}
