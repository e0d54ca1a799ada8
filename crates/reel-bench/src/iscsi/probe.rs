//! One short session per target before the measurements, on reel's sans-I/O initiator
//! (the same login and session code [`reel_iscsi_net::Client`] runs), to record what was
//! negotiated and what the target actually does with it: how it splits a 1 MiB READ into
//! Data-In PDUs and how many R2Ts a 1 MiB WRITE takes.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use reel_iscsi::initiator::{InitiatorSession, Outcome, SessionConfig};
use reel_iscsi::initiator_login::InitiatorLoginConfig;
use reel_iscsi::params::Negotiated;
use reel_iscsi::pdu::{Pdu, TaskAttr};
use serde::{Deserialize, Serialize};

use super::args::blocks;
use super::targets::SESSION_LIMITS;
use crate::session::RawConnection;
use reel_scsi::initiator::sbc::{read10, write10};

pub const INITIATOR: &str = "iqn.2026-11.org.reel.bench:initiator";

/// A session's login settings for `iqn`.
pub fn login_config(iqn: &str) -> InitiatorLoginConfig {
    crate::session::login_config(INITIATOR, Some(iqn), SESSION_LIMITS)
}

/// Negotiated parameters in the report's words.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NegotiatedReport {
    /// What the target may send us per PDU (our MaxRecvDataSegmentLength).
    pub initiator_max_recv_data_segment_length: u32,
    /// What we may send per PDU (the target's MaxRecvDataSegmentLength).
    pub target_max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub header_digest: bool,
    pub data_digest: bool,
    pub error_recovery_level: u8,
}

impl From<&Negotiated> for NegotiatedReport {
    fn from(n: &Negotiated) -> Self {
        NegotiatedReport {
            initiator_max_recv_data_segment_length: n.max_recv_data_segment_length,
            target_max_recv_data_segment_length: n.max_xmit_data_segment_length,
            max_burst_length: n.max_burst_length,
            first_burst_length: n.first_burst_length,
            immediate_data: n.immediate_data,
            initial_r2t: n.initial_r2t,
            max_outstanding_r2t: n.max_outstanding_r2t,
            header_digest: n.header_digest,
            data_digest: n.data_digest,
            error_recovery_level: n.error_recovery_level,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeReport {
    pub iqn: String,
    pub target_alias: Option<String>,
    pub negotiated: NegotiatedReport,
    /// The command window (MaxCmdSN - CmdSN + 1) the login response opened, and the one
    /// after the first commands completed (some targets open it wide only then).
    pub window_after_login: u32,
    pub window_after_commands: u32,
    /// Data-In PDUs for one 1 MiB READ(10), and the largest data segment among them.
    pub data_in_pdus_per_1m_read: u32,
    pub largest_data_in: u32,
    /// Whether the target sent status in the last Data-In (phase collapse) instead of a
    /// separate SCSI Response.
    pub read_status_in_data_in: bool,
    /// R2Ts for one 1 MiB WRITE(10) and the bytes they asked for.
    pub r2ts_per_1m_write: u32,
    pub r2t_bytes_per_1m_write: u32,
}

fn good(outcome: Outcome, what: &str) -> anyhow::Result<()> {
    match outcome {
        Outcome::Scsi(r) if r.status == 0 => Ok(()),
        other => bail!("{what} failed: {other:?}"),
    }
}

async fn probe_inner(addr: SocketAddr, iqn: &str, lun: u64) -> anyhow::Result<ProbeReport> {
    let (mut conn, outcome) = RawConnection::log_in(addr, login_config(iqn), [7u8; 32]).await?;
    let negotiated = outcome.negotiated.clone();
    let target_alias = outcome.target_alias.clone();
    let mut session = InitiatorSession::new(
        negotiated.clone(),
        SessionConfig {
            discard_data_in: true,
        },
        outcome.cmd_sn,
        outcome.exp_stat_sn,
        outcome.max_cmd_sn,
    );
    let window_after_login = session.window();
    conn.follow(&session);

    // TEST UNIT READY until the power-on unit attention is out of the way.
    let mut ready = false;
    for _ in 0..5 {
        let itt = session.scsi(lun, &[0; 6], Bytes::new(), 0, TaskAttr::Simple);
        if let Outcome::Scsi(r) = conn.run(&mut session, itt, |_| {}).await?
            && r.status == 0
        {
            ready = true;
            break;
        }
    }
    if !ready {
        bail!("LUN {lun} does not become ready (TEST UNIT READY keeps failing)");
    }

    let size = 1u32 << 20;
    let (mut data_ins, mut largest, mut collapsed) = (0u32, 0u32, false);
    let itt = session.scsi(
        lun,
        &read10(0, blocks(size)),
        Bytes::new(),
        size,
        TaskAttr::Simple,
    );
    let outcome = conn
        .run(&mut session, itt, |pdu| {
            if let Pdu::DataIn(d) = pdu {
                data_ins += 1;
                largest = largest.max(d.data.len() as u32);
                collapsed |= d.has_status;
            }
        })
        .await?;
    good(outcome, "READ(10) of 1 MiB")?;

    let (mut r2ts, mut r2t_bytes) = (0u32, 0u32);
    let data = Bytes::from(vec![0x5a; size as usize]);
    let itt = session.scsi(lun, &write10(0, blocks(size)), data, 0, TaskAttr::Simple);
    let outcome = conn
        .run(&mut session, itt, |pdu| {
            if let Pdu::R2t(r) = pdu {
                r2ts += 1;
                r2t_bytes += r.desired_length;
            }
        })
        .await?;
    good(outcome, "WRITE(10) of 1 MiB")?;
    let window_after_commands = session.window();

    let itt = session.logout();
    let _ = conn.run(&mut session, itt, |_| {}).await;
    Ok(ProbeReport {
        iqn: iqn.to_string(),
        target_alias,
        negotiated: NegotiatedReport::from(&negotiated),
        window_after_login,
        window_after_commands,
        data_in_pdus_per_1m_read: data_ins,
        largest_data_in: largest,
        read_status_in_data_in: collapsed,
        r2ts_per_1m_write: r2ts,
        r2t_bytes_per_1m_write: r2t_bytes,
    })
}

/// Logs in, reads and writes 1 MiB once, logs out.
pub async fn probe(addr: SocketAddr, iqn: &str, lun: u64) -> anyhow::Result<ProbeReport> {
    tokio::time::timeout(Duration::from_secs(30), probe_inner(addr, iqn, lun))
        .await
        .map_err(|_| anyhow!("no answer within 30 s"))?
        .with_context(|| format!("probing {iqn} at {addr}"))
}
