//! reel's initiator as the tests use it: the login settings every test shares, a session with
//! the power-on unit attentions cleared, and commands that must answer GOOD.

use std::net::SocketAddr;

use bytes::Bytes;
use reel_iscsi::initiator::ScsiResult;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi_net::{Client, ClientError, ClientOptions};
use reel_scsi::initiator::spc::TEST_UNIT_READY;
use reel_scsi::{Sense, parse_sense};

/// Login settings for `initiator_name` to `target` (`None`: a discovery session): a new
/// session without CHAP whose ISID qualifier is `isid` (see
/// [`InitiatorLoginConfig::new_session`]).
pub fn login_config(initiator_name: &str, target: Option<&str>, isid: u16) -> InitiatorLoginConfig {
    InitiatorLoginConfig::new_session(initiator_name, target, isid)
}

/// Logs in with `config` and the default client options.
pub async fn connect(
    portal: SocketAddr,
    config: InitiatorLoginConfig,
) -> Result<Client, ClientError> {
    Client::connect(portal, config, ClientOptions::default()).await
}

/// Sends TEST UNIT READY once to each of `luns`: every new I_T nexus gets a power-on unit
/// attention from each logical unit first (SAM-5 §5.14), which this consumes.
pub async fn ready(client: &Client, luns: impl IntoIterator<Item = u64>) {
    for lun in luns {
        client
            .execute(lun, &TEST_UNIT_READY, Bytes::new(), 0)
            .await
            .expect("TEST UNIT READY is answered");
    }
}

/// Runs a command that must answer GOOD; returns its Data-In.
pub async fn good(
    client: &Client,
    lun: u64,
    cdb: &[u8],
    data_out: Bytes,
    data_in_len: u32,
) -> Bytes {
    let r = client
        .execute(lun, cdb, data_out, data_in_len)
        .await
        .expect("the command is answered");
    assert_eq!(
        r.status,
        0,
        "{} ({cdb:02x?}) on LUN {lun}: {}",
        reel_scsi::initiator::describe::command_name(cdb),
        r.sense
            .as_deref()
            .map_or_else(String::new, reel_scsi::initiator::describe::describe_sense)
    );
    r.data
}

/// The sense data of a command that must have ended in CHECK CONDITION, parsed.
pub fn check_condition(result: &ScsiResult) -> Sense {
    assert_eq!(
        result.status, 2,
        "CHECK CONDITION expected, got status {:#04x}",
        result.status
    );
    let sense = result
        .sense
        .as_deref()
        .expect("CHECK CONDITION carries sense data");
    parse_sense(sense).unwrap_or_else(|e| panic!("sense data {sense:02x?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isids_are_of_the_random_type_and_distinct() {
        let a = login_config("iqn.2026-11.org.reel.test:kit", Some("iqn.t"), 1);
        let b = login_config("iqn.2026-11.org.reel.test:kit", None, 0x0102);
        assert_eq!(a.isid, [0x80, 0, 0, 0, 0, 1]);
        assert_eq!(b.isid, [0x80, 0, 0, 0, 1, 2]);
        assert_eq!(a.isid[0] >> 6, 0b10, "random qualifier type");
        assert_eq!(
            (a.target_name.as_deref(), b.target_name),
            (Some("iqn.t"), None)
        );
        assert_eq!((a.tsih, a.cmd_sn), (0, 1));
    }
}
