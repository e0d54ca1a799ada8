//! Every library preset starts and its changer reports the preset's elements over iSCSI
//! (READ ELEMENT STATUS through reel's own initiator); the API shows the same library.

use std::time::Instant;

use bytes::Bytes;
use reel_iscsi_net::Client;
use reel_scsi::initiator::smc::{ElementType, parse_element_status, read_element_status};
use reel_testkit::serve::ServeCommand;
use reel_testkit::{Server, free_portal, login_config};

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
    reel_testkit::connect(portal, login_config(initiator, Some(target), 2)).await
}

/// The elements of one type, with volume tags, and how long the answer took.
async fn element_status(
    client: &Client,
    kind: ElementType,
) -> (
    Vec<reel_scsi::initiator::smc::ElementStatus>,
    std::time::Duration,
) {
    let alloc: u32 = 0xFF_FFFF;
    let cdb = read_element_status(kind, alloc);
    // The first command may report the power-on unit attention.
    let _ = client.execute(0, &cdb, Bytes::new(), alloc).await.unwrap();
    let started = Instant::now();
    let response = client.execute(0, &cdb, Bytes::new(), alloc).await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.status, 0, "sense {:02x?}", response.sense);
    (parse_element_status(&response.data).unwrap(), took)
}

/// READ ELEMENT STATUS of one element type with volume tags: (elements reported, full ones).
async fn element_count(client: &Client, kind: ElementType) -> (usize, usize, std::time::Duration) {
    let (elements, took) = element_status(client, kind).await;
    let full = elements.iter().filter(|e| e.full).count();
    (elements.len(), full, took)
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
        let (d, _, _) = element_count(&client, ElementType::DATA_TRANSFER).await;
        let (s, full, took) = element_count(&client, ElementType::STORAGE).await;
        let (m, _, _) = element_count(&client, ElementType::IMPORT_EXPORT).await;
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
    let server = ServeCommand::configured()
        .portal(portal)
        .args(&["--http", "off", "--config"])
        .args(&[&config])
        .start();
    let banner = &server.banner;
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
        let (d, _, _) = element_count(&client, ElementType::DATA_TRANSFER).await;
        let (s, full, _) = element_count(&client, ElementType::STORAGE).await;
        let (m, _, _) = element_count(&client, ElementType::IMPORT_EXPORT).await;
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
    server.stop();
}

/// Volume tags of the full storage elements (READ ELEMENT STATUS, VolTag).
async fn volume_tags(client: &Client) -> Vec<String> {
    let (elements, _) = element_status(client, ElementType::STORAGE).await;
    elements
        .into_iter()
        .filter(|e| e.full)
        .map(|e| e.barcode.unwrap_or_default())
        .collect()
}
