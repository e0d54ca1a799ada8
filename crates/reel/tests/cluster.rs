//! Two nodes on one bucket (`[cluster]`), against a real S3 server (versitygw) on loopback:
//! node A serves the library and holds its lease; node B refuses it while the lease lives; as a
//! standby B redirects logins to A (RFC 7143 §11.13.5), takes the store over once A is killed
//! and its lease expires, and serves what A wrote; a clean stop hands the store back at once.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cartridges::{DRIVE, FIRST_SLOT, Workload, noise, sessions};
use common::free_portal;
use common::tape::Tape;
use reel_iscsi::initiator_login::LoginError;
use reel_iscsi_net::{Client, ClientError, ClientOptions};
use reel_s3test::{Kind, S3Server};
use reel_scsi::initiator::smc::move_medium;
use reel_testkit::serve::{ServeCommand, reel_binary};

const LIB: &str = "iqn.2026-11.org.reel:cluster";
const RECORD: usize = 64 << 10;
const RECORDS: u64 = 6;
const LEASE_SECONDS: u64 = 3;

fn record(c: u64, r: u64) -> Vec<u8> {
    noise(c * 1_000 + r, RECORD)
}

const WORKLOAD: Workload = Workload {
    record_len: RECORD,
    records: RECORDS,
    record,
};

/// Writes cartridge `c` in sessions of its own (a writer thread's, in the kill test).
fn write_cartridge(portal: SocketAddr, c: u64) {
    let (changer, drive) = sessions(portal, LIB);
    WORKLOAD.write(&changer, &drive, c);
}

fn read_cartridge(portal: SocketAddr, c: u64) {
    let (changer, drive) = sessions(portal, LIB);
    WORKLOAD.read(&changer, &drive, c);
}

/// One node's configuration: the same store and library on every node, its own portal.
fn write_config(path: &Path, s3: &S3Server, node: &str, portal: SocketAddr, standby: bool) {
    let text = format!(
        "[store]\nbackend = \"s3\"\ndurability = \"bucket\"\n\n\
         [store.s3]\nendpoint = \"{}\"\nbucket = \"{}\"\nprefix = \"site-a\"\nregion = \"{}\"\n\n\
         [store.cache]\nsize = \"256M\"\n\n\
         [cluster]\nnode = \"{node}\"\nportal = \"{portal}\"\nstandby = {standby}\nlease_seconds = {LEASE_SECONDS}\n\n\
         [iscsi]\nlisten = [\"{portal}\"]\n\n\
         [[iscsi.target]]\nname = \"{LIB}\"\nkind = \"library\"\ndrives = 1\nslots = 8\nimport_export = 1\n",
        s3.endpoint(),
        s3.bucket(),
        s3.region()
    );
    std::fs::write(path, text).unwrap();
}

fn command(data: &Path, config: &Path, portal: SocketAddr, s3: &S3Server) -> ServeCommand {
    ServeCommand::new(data)
        .portal(portal)
        .args(&[
            std::ffi::OsStr::new("--cartridges"),
            std::ffi::OsStr::new("4"),
            std::ffi::OsStr::new("--config"),
            config.as_os_str(),
        ])
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
}

/// Logs in at `portal` without following redirections: where the node sends us.
fn login_once(portal: SocketAddr) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = reel_testkit::login_config("iqn.2026-11.org.reel.test:probe", Some(LIB), 0x1ff);
    match runtime.block_on(Client::connect_once(
        portal,
        config,
        ClientOptions::default(),
    )) {
        Ok(client) => {
            let _ = runtime.block_on(client.logout());
            Ok(())
        }
        Err(ClientError::Login(LoginError::Redirected { address, permanent })) => {
            assert!(!permanent, "a lease move is temporary");
            Err(address)
        }
        Err(e) => Err(format!("error: {e}")),
    }
}

/// Runs `reel serve` expecting it to refuse: its exit status and standard error.
fn refused(data: &Path, config: &Path, portal: SocketAddr, s3: &S3Server) -> String {
    let mut child = Command::new(reel_binary())
        .args([
            "serve",
            "--listen",
            &portal.to_string(),
            "--http",
            "127.0.0.1:0",
        ])
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "a second node served a live store");
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "the second node neither served nor refused"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_standby_redirects_then_takes_over_a_killed_node_and_serves_what_it_wrote() {
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let (portal_a, portal_b) = (free_portal(), free_portal());
    let (config_a, config_b, standby_b) = (
        dir.path().join("a.toml"),
        dir.path().join("b.toml"),
        dir.path().join("b-standby.toml"),
    );
    write_config(&config_a, &s3, "a", portal_a, false);
    write_config(&config_b, &s3, "b", portal_b, false);
    write_config(&standby_b, &s3, "b", portal_b, true);
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));

    let a = command(&data_a, &config_a, portal_a, &s3).start();
    assert!(
        a.banner.contains("cluster: node a holds the lease"),
        "{}",
        a.banner
    );
    write_cartridge(portal_a, 0);
    write_cartridge(portal_a, 1);

    // B refuses the live store, naming its holder, and touches nothing.
    let why = refused(&data_b, &config_b, portal_b, &s3);
    assert!(why.contains("served by node a"), "{why}");
    assert!(!data_b.join("catalog").exists());

    // B as a standby: its portal redirects logins for the library to A's portal.
    let standby = std::thread::spawn({
        let cmd = command(&data_b, &standby_b, portal_b, &s3);
        move || cmd.start()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let redirected_to = loop {
        match login_once(portal_b) {
            Err(address) if !address.starts_with("error") => break address,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "no redirect from the standby: {other:?}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(redirected_to, format!("{portal_a},1"));
    // An initiator that follows redirections reads A's cartridge through B's portal address.
    read_cartridge(portal_b, 0);

    // A dies; B takes over once A's lease has gone unrenewed for its time to live.
    let killed = Instant::now();
    a.kill();
    let b = standby.join().expect("the standby takes over");
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_secs(LEASE_SECONDS) && took < Duration::from_secs(40),
        "took over after {took:?}"
    );
    assert!(
        b.banner.contains("cluster: node b holds the lease"),
        "{}",
        b.banner
    );
    assert_eq!(login_once(portal_b), Ok(()));
    read_cartridge(portal_b, 0);
    read_cartridge(portal_b, 1);
    write_cartridge(portal_b, 2);

    // A comes back: refused while B holds the store, redirected to B meanwhile.
    let why = refused(&data_a, &config_a, portal_a, &s3);
    assert!(why.contains("served by node b"), "{why}");

    // B stops cleanly and releases the lease: A takes it at once, sets its superseded copy
    // aside, rebuilds from the bucket and serves everything, including what B wrote.
    b.stop();
    let started = Instant::now();
    let a = command(&data_a, &config_a, portal_a, &s3).start();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(a.banner.contains("superseded"), "{}", a.banner);
    for c in 0..3 {
        read_cartridge(portal_a, c);
    }
    a.stop();
}

/// SIGKILL the serving node at random points (while an initiator writes, while its uploads and
/// lease renewals run), again and again, alternating two nodes: after each kill the standby
/// takes over and every cartridge acknowledged at a synchronising point (durability bucket)
/// reads back byte for byte; the cartridge being written when the node died is left alone.
#[test]
fn kills_of_the_serving_node_at_random_points_lose_nothing_acknowledged() {
    const KILLS: u64 = 6;
    let s3 = S3Server::start(Kind::Versitygw).expect("versitygw starts");
    let dir = tempfile::tempdir().unwrap();
    let portals = [free_portal(), free_portal()];
    let configs = [dir.path().join("a.toml"), dir.path().join("b.toml")];
    for (i, name) in ["a", "b"].iter().enumerate() {
        write_config(&configs[i], &s3, name, portals[i], true);
    }
    let datas = [dir.path().join("a"), dir.path().join("b")];
    let mut seed = 0x5EED_u64 ^ std::process::id() as u64;
    let mut next_random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };

    let mut serving = command(&datas[0], &configs[0], portals[0], &s3).start();
    let mut who = 0;
    let mut acknowledged = Vec::new();
    // Cartridges 0..4 are written in turn (4 blank ones); one is in flight at each kill.
    for kill in 0..KILLS {
        let other = 1 - who;
        let standby = std::thread::spawn({
            let cmd = command(&datas[other], &configs[other], portals[other], &s3);
            move || cmd.start()
        });
        let done = kill % 4;
        write_cartridge(portals[who], done);
        if !acknowledged.contains(&done) {
            acknowledged.push(done);
        }
        // Another cartridge being written when the node dies, at a random point.
        let in_flight = (kill + 1) % 4;
        let portal = portals[who];
        let writer = std::thread::spawn(move || write_cartridge(portal, in_flight));
        std::thread::sleep(Duration::from_millis(next_random() % 2_000));
        serving.kill();
        let _ = writer.join();
        acknowledged.retain(|&c| c != in_flight);
        serving = standby.join().expect("the standby takes over");
        who = other;
        // A drive may still hold the interrupted cartridge: put it back before the drive is
        // needed (the read-back below loads cartridges into it).
        let changer = Tape::connect(portals[who], LIB, 0, 1);
        changer.ready();
        // (CHECK CONDITION when the drive is empty: the move is only a tidy-up.)
        let _ = changer.run(
            &move_medium(0, DRIVE, FIRST_SLOT + in_flight as u16),
            Vec::new(),
            0,
        );
        for &c in &acknowledged {
            read_cartridge(portals[who], c);
        }
        eprintln!("kill {kill}: node {who} took over; cartridges {acknowledged:?} read back");
    }
    serving.stop();
}
