//! One blocking iSCSI session to one LUN of a target, through reel's own initiator, for the
//! tests that write and read tapes without being async themselves.

use std::net::SocketAddr;

use bytes::Bytes;
use reel_iscsi_net::Client;
use reel_scsi::initiator::describe::{command_name, describe_sense};
use reel_scsi::initiator::spc::TEST_UNIT_READY;

/// A session on its own single-threaded runtime, bound to one drive's LUN.
pub struct Tape {
    runtime: tokio::runtime::Runtime,
    client: Client,
    pub lun: u64,
}

impl Tape {
    /// Logs in to `target` as `iqn.2026-11.org.reel.test:tape<isid>`; the ISID's qualifier is
    /// 0x100 + `isid`, apart from the async tests' sessions.
    pub fn connect(portal: SocketAddr, target: &str, lun: u64, isid: u8) -> Tape {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let config = crate::login_config(
            &format!("iqn.2026-11.org.reel.test:tape{isid}"),
            Some(target),
            0x100 | u16::from(isid),
        );
        let client = runtime
            .block_on(crate::connect(portal, config))
            .expect("the login succeeds");
        Tape {
            runtime,
            client,
            lun,
        }
    }

    /// (status, Data-In, sense) of one command.
    pub fn run(&self, cdb: &[u8], data: Vec<u8>, data_in: u32) -> (u8, Vec<u8>, Vec<u8>) {
        let r = self
            .runtime
            .block_on(
                self.client
                    .execute(self.lun, cdb, Bytes::from(data), data_in),
            )
            .expect("the command is answered");
        (
            r.status,
            r.data.to_vec(),
            r.sense.map(|s| s.to_vec()).unwrap_or_default(),
        )
    }

    /// Runs a command that must answer GOOD.
    pub fn good(&self, cdb: &[u8], data: Vec<u8>) {
        let (status, _, sense) = self.run(cdb, data, 0);
        assert_eq!(
            status,
            0,
            "{} ({cdb:02x?}): {}",
            command_name(cdb),
            describe_sense(&sense)
        );
    }

    /// TEST UNIT READY until the unit attentions (power on, medium changed) are reported.
    pub fn ready(&self) {
        for _ in 0..5 {
            if self.run(&TEST_UNIT_READY, Vec::new(), 0).0 == 0 {
                return;
            }
        }
        panic!("LUN {} never became ready", self.lun);
    }
}
