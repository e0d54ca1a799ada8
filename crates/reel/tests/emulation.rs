//! `[iscsi.target.emulation]` end to end over iSCSI: MOVE MEDIUM takes the modelled robot's
//! time, and a writer slower than the modelled drive's lowest speed makes it back-hitch, which
//! the API and `/metrics` report. The bounds checked are the model's own lower bounds (a move
//! cannot be faster than the robot, a drive that must wait for its load cannot answer
//! earlier); throughput against the model's prediction is measured by `bench/emulation/run.sh`,
//! not asserted here.

mod common;

use std::time::{Duration, Instant};

use common::cartridges::{DRIVE, FIRST_SLOT, noise, sessions};
use common::free_portal;
use reel_scsi::initiator::smc::move_medium;
use reel_scsi::initiator::ssc::{Transfer, write_filemarks, write6};
use reel_testkit::serve::ServeCommand;

const LIB: &str = "iqn.2026-11.org.reel:emulated";
/// A small buffer and a single speed keep the starved cycle short: DLT8000, 8 MiB, 6 MB/s.
const PHYSICAL: &str = "dlt8000";
const ROBOT: &str = "autoloader";

fn metric(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l.contains(&format!("library=\"{LIB}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} for {LIB} in {metrics}"))
}

#[test]
fn an_emulated_library_moves_at_robot_speed_and_a_starved_drive_back_hitches() {
    let spec = reel_drivemodel::drive(PHYSICAL).unwrap();
    let robot = reel_drivemodel::robot(ROBOT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let portal = free_portal();
    let config = dir.path().join("reel.toml");
    std::fs::write(
        &config,
        format!(
            "[iscsi]\nlisten = [\"{portal}\"]\n\n[[iscsi.target]]\nname = \"{LIB}\"\nkind = \"library\"\ndrives = 1\nslots = 8\n\n[iscsi.target.emulation]\ndrive = \"{PHYSICAL}\"\nrobot = \"{ROBOT}\"\n"
        ),
    )
    .unwrap();
    let server = ServeCommand::new(&dir.path().join("data"))
        .args(&[std::ffi::OsStr::new("--config"), config.as_os_str()])
        .args(&["--cartridges", "4"])
        .start();
    let (changer, drive) = sessions(server.portal(), LIB);

    let moved = Instant::now();
    changer.good(&move_medium(0, FIRST_SLOT, DRIVE), Vec::new());
    let move_took = moved.elapsed();
    assert!(
        move_took >= robot.move_time,
        "MOVE MEDIUM took {move_took:?}, the {ROBOT} robot needs {:?}",
        robot.move_time
    );
    drive.ready();

    // The first WRITE waits for the load, then a writer at half the drive's only speed.
    let rate = spec.top_speed() / 2.0;
    let record_len = 256 << 10;
    let total = 3 * spec.buffer_bytes;
    let started = Instant::now();
    let mut written = 0u64;
    let mut r = 0;
    while written < total {
        let record = noise(r, record_len);
        drive.good(&write6(Transfer::Variable(record_len as u32)), record);
        if r == 0 {
            // The drive threads the cartridge from the moment the robot put it in.
            let first = moved.elapsed();
            assert!(
                first >= Duration::from_secs_f64(spec.load_s * 0.9),
                "the first WRITE answered after {first:?}, before the {} s load ended",
                spec.load_s
            );
        }
        written += record_len as u64;
        r += 1;
        // Pace the writer: the next record is ready at written / rate after the first.
        let due =
            Duration::from_secs_f64(written as f64 / rate) + Duration::from_secs_f64(spec.load_s);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    drive.good(&write_filemarks(1, false), Vec::new());

    let url = server.http.as_deref().expect("the console runs");
    let metrics = ureq::get(&format!("{url}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    // Starved at half speed with this buffer, the drive stops at least once before the
    // filemark, and the filemark without IMMED stops it once more.
    let back_hitches = metric(&metrics, "reel_drive_back_hitches_total");
    assert!(back_hitches >= 2.0, "back-hitches {back_hitches}");
    let repositioning = metric(&metrics, "reel_drive_repositioning_seconds_total");
    // Each starved stop repositioned before writing again; the filemark's stop repositions
    // before the next write (none yet).
    assert!(
        repositioning >= (back_hitches - 1.0) * spec.reposition_s * 0.99,
        "{back_hitches} back-hitches but {repositioning} s repositioning"
    );
    // The model's curves for the console's drive card: SVG for a known model, 404 otherwise.
    let chart = ureq::get(&format!("{url}/model/{PHYSICAL}/record-size.svg"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        chart.contains("<svg") && chart.contains("record size"),
        "{chart}"
    );
    match ureq::get(&format!("{url}/model/no-such-drive/record-size.svg")).call() {
        Err(ureq::Error::StatusCode(404)) => {}
        other => panic!("an unknown drive model: {other:?}"),
    }
    server.stop();
}
