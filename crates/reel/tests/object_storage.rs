//! `[store] backend = "s3"` end to end, against a real S3 server (versitygw) on loopback:
//! cartridges written through iSCSI survive the loss of the node (its whole data directory)
//! and read back byte for byte on a node rebuilt from the bucket alone.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cartridges::{DRIVE, FIRST_SLOT, Workload, sessions};
use common::free_portal;
use reel_s3test::{Fault, FaultProxy, Kind, S3Server};
use reel_scsi::initiator::smc::move_medium;
use reel_scsi::initiator::ssc::{REWIND, Transfer, UNLOAD, read6, write_filemarks, write6};
use reel_testkit::serve::{ServeCommand, reel_binary};

const LIB: &str = "iqn.2026-11.org.reel:library";
const RECORD: usize = 128 << 10;
const RECORDS: u64 = 12;
const WORKLOAD: Workload = Workload {
    record_len: RECORD,
    records: RECORDS,
    record,
};

/// Record `r` of cartridge `c`: every other record is shared by all cartridges (dedup).
fn record(c: u64, r: u64) -> Vec<u8> {
    let key = if r.is_multiple_of(2) {
        1_000 + r
    } else {
        c * 100 + r
    };
    let mut x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..RECORD)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Half the bytes from a small alphabet: compressible, as backups mostly are.
            if x & 1 == 0 {
                b"reel"[(x >> 8) as usize % 4]
            } else {
                (x >> 16) as u8
            }
        })
        .collect()
}

fn write_config(path: &Path, s3: &S3Server, durability: &str) {
    let text = format!(
        "[store]\nbackend = \"s3\"\ndurability = \"{durability}\"\n\n[store.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"node-a\"\nregion = \"{}\"\n\n[store.cache]\nsize = \"512M\"\n",
        s3.endpoint(),
        s3.bucket(),
        s3.region()
    );
    std::fs::write(path, text).unwrap();
}

fn serve(data: &Path, config: Option<&Path>, s3: &S3Server) -> common::Server {
    serve_command(data, config, s3).start()
}

/// `reel serve` on `config` and `data` that is expected to stop by itself (a refusal at start):
/// its exit status and output.
fn serve_to_the_end(data: &Path, config: &Path, s3: &S3Server) -> std::process::Output {
    Command::new(reel_binary())
        .args(["serve", "--listen"])
        .arg(free_portal().to_string())
        .args(["--http", "off", "--config"])
        .arg(config)
        .arg("--data")
        .arg(data)
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .output()
        .unwrap()
}

fn serve_command(data: &Path, config: Option<&Path>, s3: &S3Server) -> ServeCommand {
    let mut command = ServeCommand::new(data)
        .args(&["--cartridges", "10"])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key());
    if let Some(config) = config {
        command = command.args(&[std::ffi::OsStr::new("--config"), config.as_os_str()]);
    }
    command
}

#[test]
fn ten_cartridges_survive_the_loss_of_the_node_and_read_back_from_the_bucket_alone() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "bucket");
    let data = dir.path().join("node");

    let server = serve(&data, Some(&config), &s3);
    assert!(
        server.banner.contains("store on s3://reel-test/node-a"),
        "{}",
        server.banner
    );
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..10 {
            WORKLOAD.write(&changer, &drive, c);
        }
    }
    // The node dies and its disk with it.
    server.kill();
    std::fs::remove_dir_all(&data).unwrap();

    // A new node: `reel recover` from the bucket alone, then `reel serve` on what it made,
    // with no configuration file (the directory remembers its bucket).
    let recovered = dir.path().join("recovered");
    let out = Command::new(reel_binary())
        .args(["recover", "--from", "s3://reel-test/node-a", "--endpoint"])
        .arg(s3.endpoint())
        .arg("--data")
        .arg(&recovered)
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reel recover: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("recovered 10 cartridges"), "{stdout}");
    assert!(stdout.contains("REL010L9"), "{stdout}");

    let server = serve(&recovered, None, &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..10 {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
}

#[test]
fn at_durability_local_a_killed_node_uploads_its_queue_after_the_restart() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "local");
    let data = dir.path().join("node");

    let server = serve(&data, Some(&config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..3 {
            WORKLOAD.write(&changer, &drive, c);
        }
    }
    // The bucket's figures are exported (loopback peers may read /metrics).
    let url = format!(
        "{}/metrics",
        server.http.as_deref().expect("the console runs")
    );
    let metrics = ureq::get(&url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    for family in [
        "# TYPE reel_bucket_pending_bytes gauge",
        "# TYPE reel_bucket_oldest_pending_seconds gauge",
        "# TYPE reel_bucket_cartridge_pending_bytes gauge",
        "# TYPE reel_bucket_uploaded_bytes_total counter",
        "# TYPE reel_bucket_catalog_journal_objects gauge",
    ] {
        assert!(metrics.contains(family), "{family} in {metrics}");
    }
    let requests: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("reel_bucket_requests_total "))
        .expect("the request counter")
        .parse()
        .unwrap();
    assert!(requests > 0.0, "requests were made to the bucket");
    server.kill();
    // The cache survived: the restarted node serves everything, and a clean stop uploads what
    // the kill left queued.
    let server = serve(&data, Some(&config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..3 {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
    std::fs::remove_dir_all(&data).unwrap();

    // So the bucket alone has it all.
    let server = serve(&data, Some(&config), &s3);
    {
        let (changer, drive) = sessions(server.portal(), LIB);
        for c in 0..3 {
            WORKLOAD.read(&changer, &drive, c);
        }
    }
    server.stop();
}

/// An https bucket whose certificate a private CA signed: without `ca_file` the server refuses
/// to start at once, naming the certificate; with it, it serves, and the data directory keeps
/// the CA (absolute) for the offline tools, which have no configuration.
#[test]
fn an_https_bucket_needs_its_ca_file_and_the_data_directory_keeps_it() {
    let s3 = S3Server::start_https(Kind::Versitygw).expect("versitygw starts over https");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "bucket");
    let data = dir.path().join("node");
    // "not retried": the five-minute retry window is not waited out for a refused certificate.
    let out = serve_to_the_end(&data, &config, &s3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("TLS refused the server") && stderr.contains("not retried"),
        "{stderr}"
    );

    // Added later, as a relative path from the server's working directory.
    std::fs::write(dir.path().join("ca.pem"), s3.ca_certificate_pem().unwrap()).unwrap();
    let with_ca = std::fs::read_to_string(&config)
        .unwrap()
        .replace("[store.cache]", "ca_file = \"ca.pem\"\n\n[store.cache]");
    std::fs::write(&config, with_ca).unwrap();
    serve_command(&data, Some(Path::new("reel.toml")), &s3)
        .current_dir(dir.path())
        .start()
        .stop();
    let bound = std::fs::read_to_string(data.join("bucket.toml")).unwrap();
    let ca = std::fs::canonicalize(dir.path().join("ca.pem")).unwrap();
    assert!(
        bound.contains(&format!("ca_file = \"{}\"", ca.display())),
        "{bound}"
    );

    // An offline tool elsewhere, with no configuration, reaches the bucket with the kept CA.
    let out = Command::new(reel_binary())
        .current_dir("/")
        .args(["cartridges", "list", "--data"])
        .arg(&data)
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("REL001"), "{stdout}");
}

/// `reel doctor` reaches the bucket and says where its keys came from; refused keys are a
/// failure with the server's reason and where to look.
#[test]
fn doctor_names_where_the_bucket_keys_come_from() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "local");
    let doctor = |secret: &str| {
        let out = Command::new(reel_binary())
            .args(["doctor", "--config"])
            .arg(&config)
            .arg("--data")
            .arg(dir.path().join("node"))
            .env("AWS_ACCESS_KEY_ID", s3.access_key())
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let report = doctor(s3.secret_key());
    let line = report
        .lines()
        .find(|l| l.contains("S3 bucket"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains("credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY accepted"),
        "{report}"
    );
    let report = doctor("not-the-secret");
    let failed = report
        .lines()
        .skip_while(|l| !l.contains("S3 bucket"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        failed.contains("FAIL")
            && failed.contains("refused the credentials")
            && failed.contains("SignatureDoesNotMatch: "),
        "{report}"
    );
    // The server's reason, not its 2 KB error document.
    assert!(!failed.contains("StringToSign"), "{report}");
    assert!(failed.contains("instance_metadata"), "{report}");
}

#[test]
fn a_data_directory_is_never_pointed_at_another_bucket() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "local");
    let data = dir.path().join("node");
    serve(&data, Some(&config), &s3).stop();
    let moved = std::fs::read_to_string(&config)
        .unwrap()
        .replace("node-a", "node-b");
    std::fs::write(&config, moved).unwrap();
    let out = serve_to_the_end(&data, &config, &s3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("caches s3://reel-test/node-a") && stderr.contains("node-b"),
        "{stderr}"
    );
}

#[test]
fn an_unavailable_or_restarted_bucket_pauses_synchronising_points_and_they_resume() {
    let mut s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let proxy = FaultProxy::start(s3.port()).expect("the fault proxy starts");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reel.toml");
    write_config(&config, &s3, "bucket");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&s3.endpoint(), &proxy.endpoint());
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("node");
    let server = serve(&data, Some(&config), &s3);
    let (changer, drive) = sessions(server.portal(), LIB);
    changer.good(&move_medium(0, FIRST_SLOT, DRIVE), Vec::new());
    drive.ready();
    let write = write6(Transfer::Variable(RECORD as u32));

    // 503 Slow Down for 3 s: the filemark (durability `bucket`) waits, then answers GOOD.
    for r in 0..RECORDS / 2 {
        drive.good(&write, record(0, r));
    }
    proxy.set(Fault::Unavailable);
    let began = Instant::now();
    let waited = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            proxy.set(Fault::None);
        });
        drive.good(&write_filemarks(1, false), Vec::new());
        began.elapsed()
    });
    assert!(
        proxy.unavailable_answers() > 0,
        "the bucket was asked while unavailable"
    );
    assert!(
        waited >= Duration::from_millis(2500),
        "the synchronising point returned after {waited:?}, before the bucket had the data"
    );

    // The S3 server itself restarts mid-upload: the next filemark waits for it.
    for r in RECORDS / 2..RECORDS {
        drive.good(&write, record(0, r));
    }
    s3.stop();
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        s3.restart().expect("versitygw restarts");
        s3
    });
    drive.good(&write_filemarks(1, false), Vec::new());
    let s3 = restarter.join().unwrap();
    drive.good(&UNLOAD, Vec::new());
    changer.good(&move_medium(0, DRIVE, FIRST_SLOT), Vec::new());
    drop((changer, drive));
    server.kill();

    // Everything acknowledged is in the bucket: a node rebuilt from it reads it all back.
    std::fs::remove_dir_all(&data).unwrap();
    let server = serve(&data, Some(&config), &s3);
    let (changer, drive) = sessions(server.portal(), LIB);
    changer.good(&move_medium(0, FIRST_SLOT, DRIVE), Vec::new());
    drive.ready();
    drive.good(&REWIND, Vec::new());
    for r in 0..RECORDS {
        if r == RECORDS / 2 {
            let (status, _, _) = drive.run(
                &read6(Transfer::Variable(RECORD as u32), false),
                Vec::new(),
                RECORD as u32,
            );
            assert_eq!(status, 2, "the first filemark");
        }
        let (status, data, sense) = drive.run(
            &read6(Transfer::Variable(RECORD as u32), false),
            Vec::new(),
            RECORD as u32,
        );
        assert_eq!(status, 0, "record {r}: sense {sense:02x?}");
        assert!(data == record(0, r), "record {r} reads back wrong");
    }
    drop((changer, drive));
    server.stop();
}
