//! Conformance table for the tape drive: `tests/conformance/ssc.txt`, one case per line,
//! "CDB in → status/sense/data out", expectations from SSC-4/SPC-4. The line format and the
//! runner are in [`reel_scsi::conformance`].

mod common;

use common::*;
use reel_media::MediaType;
use reel_scsi::Status;
use reel_scsi::conformance::Nexus;

const GB: u64 = 1 << 30;

fn fixture(name: &str) -> Rig {
    match name {
        "empty" => Rig::empty("ibm-td9"),
        "loaded-bot" => Rig::loaded("ibm-td9", MediaType::Lto9, GB),
        "loaded-data" | "unloaded" => {
            let rig = Rig::loaded("ibm-td9", MediaType::Lto9, GB);
            for (i, n) in [(1u8, 3), (4, 2)] {
                for k in 0..n {
                    let r = rig.run(&write6(Transfer::Variable(1000)), &[i + k; 1000]);
                    assert_eq!(r.status, Status::Good);
                }
                if i == 1 {
                    assert_eq!(
                        rig.run(&write_filemarks(1, false), &[]).status,
                        Status::Good
                    );
                }
            }
            assert_eq!(rig.run(&REWIND, &[]).status, Status::Good);
            if name == "unloaded" {
                assert_eq!(rig.run(&UNLOAD, &[]).status, Status::Good);
            }
            rig
        }
        "wp" => {
            let rig = Rig::empty("ibm-td9");
            let mut c = cartridge("WP0001L9", MediaType::Lto9, GB);
            c.set_write_protected(true);
            rig.insert(c).unwrap();
            for n in [rig.nexus.clone(), rig.other.clone()] {
                rig.run_as(&n, &request_sense(18), &[]);
            }
            rig
        }
        // An LTO-7 drive with an LTO-5 cartridge: readable, not writable.
        "ro-gen" => Rig::loaded("ibm-td7", MediaType::Lto5, GB),
        other => panic!("unknown fixture {other}"),
    }
}

#[test]
fn ssc_conformance_table() {
    reel_scsi::conformance::run_table("ssc", include_str!("conformance/ssc.txt"), |name| {
        let rig = fixture(name);
        move |nexus, cdb: &[u8], out: &[u8]| match nexus {
            Nexus::Main => rig.run_as(&rig.nexus, cdb, out),
            Nexus::Other => rig.run_as(&rig.other, cdb, out),
        }
    });
}
