//! Conformance table for the medium changer: `tests/conformance/smc.txt`, one case per line,
//! "CDB in → status/sense/data out", expectations from SMC-3/SPC-4. The line format and the
//! runner are in [`reel_scsi::conformance`].

mod common;

use common::*;
use reel_scsi::conformance::Nexus;

const TAPES: [&str; 3] = ["A00001L9", "A00002L9", "A00003L9"];

fn fixture(name: &str) -> Rig {
    match name {
        // STK L700: MT 0, I/E 10-29, DT 500-503, ST 1000-1099; three cartridges in ST 1000-1002.
        "l700" => rig("stk-l700", None, &TAPES),
        // HP 1x8 G2 autoloader: MT 0, DT 100h, ST 1-8, no I/E, no EXCHANGE, no volume tags.
        "hp1x8" => rig("hp-1x8-g2", None, &TAPES),
        other => panic!("unknown fixture {other}"),
    }
}

#[test]
fn smc_conformance_table() {
    reel_scsi::conformance::run_table("smc", include_str!("conformance/smc.txt"), |name| {
        let rig = fixture(name);
        move |nexus, cdb: &[u8], out: &[u8]| match nexus {
            Nexus::Main => rig.run(&rig.a, cdb, out),
            Nexus::Other => rig.run(&rig.b, cdb, out),
        }
    });
}
