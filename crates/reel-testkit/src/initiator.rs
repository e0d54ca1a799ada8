//! reel's initiator as the tests use it: the login settings every test shares, a session with
//! the power-on unit attentions cleared, and commands that must answer GOOD.

use std::net::SocketAddr;

use bytes::Bytes;
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi::params::Limits;
use reel_iscsi_net::{Client, ClientError, ClientOptions};
use reel_scsi::initiator::spc::TEST_UNIT_READY;

/// Login settings for `initiator_name` to `target` (`None`: a discovery session): no CHAP,
/// the initiator's default limits, a new session (TSIH 0) whose ISID is of the random type
/// (RFC 7143 §11.12.5, type 10b) with `isid` in its qualifier. Sessions of one initiator
/// need distinct ISIDs, or the second reinstates the first (RFC 7143 §6.3.5).
pub fn login_config(initiator_name: &str, target: Option<&str>, isid: u16) -> InitiatorLoginConfig {
    let [hi, lo] = isid.to_be_bytes();
    InitiatorLoginConfig {
        initiator_name: initiator_name.to_string(),
        initiator_alias: None,
        target_name: target.map(str::to_string),
        isid: [0x80, 0, 0, 0, hi, lo],
        tsih: 0,
        cid: 0,
        chap: None,
        mutual_chap: None,
        limits: Limits::initiator_default(),
        cmd_sn: 1,
    }
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
