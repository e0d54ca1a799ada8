//! Sessions with a target: login settings, the negotiation probe (what the target agreed to),
//! one [`Drive`] handle per session with the commands the workload needs, and the inspection
//! of the target (REPORT LUNS, INQUIRY, READ ELEMENT STATUS) that maps drives to LUNs,
//! changer elements and cartridges before anything is written.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::{Bytes, BytesMut};
use reel_iscsi::initiator::{InitiatorSession, Outcome, ScsiResult, SessionConfig};
use reel_iscsi::initiator_login::{
    InitiatorLogin, InitiatorLoginConfig, InitiatorLoginOutcome, InitiatorStep,
};
use reel_iscsi::params::Limits;
use reel_iscsi::pdu::{FrameLimits, Framer, Pdu};
use reel_iscsi_net::{Client, ClientError, ClientOptions};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::targets::SessionLimits;
use crate::scsi::CommandFailure;
use reel_scsi::initiator::describe;
use reel_scsi::initiator::smc::{self, ElementStatus, ElementType};
use reel_scsi::initiator::spc::{self, StandardInquiry};

pub const INITIATOR: &str = "iqn.2026-11.org.reel.bench:tape-initiator";

/// Limits both targets are configured with and the initiator offers.
pub const MAX_RECV_DATA_SEGMENT: u32 = 256 << 10;
pub const MAX_BURST: u32 = 1 << 20;
pub const FIRST_BURST: u32 = 256 << 10;
/// The same limits as a launched reel's `[iscsi]` settings.
pub const SESSION_LIMITS: SessionLimits = SessionLimits {
    max_recv_data_segment_length: MAX_RECV_DATA_SEGMENT,
    max_burst_length: MAX_BURST,
    first_burst_length: FIRST_BURST,
};

/// ISIDs are never reused within a process, so no login reinstates a session still closing.
static NEXT_ISID: AtomicU16 = AtomicU16::new(1);

/// What the initiator offers: the targets' configured `limits`, immediate data, and
/// InitialR2T=No so that each target's own default decides (the result is Yes if either side
/// says Yes, RFC 7143 §13.10); no digests.
pub fn offered_limits(limits: SessionLimits) -> Limits {
    Limits {
        max_recv_data_segment_length: limits.max_recv_data_segment_length,
        max_burst_length: limits.max_burst_length,
        first_burst_length: limits.first_burst_length,
        immediate_data: true,
        initial_r2t: false,
        ..Limits::initiator_default()
    }
}

/// A benchmark session's login: the test kit's, offering `limits`, with an ISID of the random
/// type (RFC 7143 §11.12.5) unique per session — this process's id in bytes 2–3 keeps
/// concurrent benchmark processes apart, a counter in bytes 4–5 the sessions of this one.
pub fn login_config(
    initiator: &str,
    iqn: Option<&str>,
    limits: SessionLimits,
) -> InitiatorLoginConfig {
    let mut config = InitiatorLoginConfig::new_session(
        initiator,
        iqn,
        NEXT_ISID.fetch_add(1, Ordering::Relaxed),
    );
    config.isid[2..4].copy_from_slice(&(std::process::id() as u16).to_be_bytes());
    config.limits = offered_limits(limits);
    config
}

/// The target names SendTargets lists at `addr`.
pub async fn discover(addr: SocketAddr) -> anyhow::Result<Vec<String>> {
    let client = Client::connect(
        addr,
        login_config(INITIATOR, None, SESSION_LIMITS),
        ClientOptions::default(),
    )
    .await
    .with_context(|| format!("discovery session at {addr}"))?;
    let targets = client.send_targets().await?;
    let _ = client.logout().await;
    Ok(targets.into_iter().map(|(name, _)| name).collect())
}

/// Logs in to `iqn` at `addr`; an unknown name is reported with the names the portal has.
pub async fn connect(addr: SocketAddr, iqn: &str) -> anyhow::Result<Client> {
    match Client::connect(
        addr,
        login_config(INITIATOR, Some(iqn), SESSION_LIMITS),
        ClientOptions::default(),
    )
    .await
    {
        Ok(client) => Ok(client),
        Err(ClientError::Login(e)) if e.status_code().is_some_and(|c| c >> 8 == 2) => {
            let known = discover(addr)
                .await
                .map(|names| names.join(", "))
                .unwrap_or_else(|d| format!("(SendTargets failed too: {d:#})"));
            bail!("login to {iqn} at {addr} refused: {e}; the portal lists: {known}")
        }
        Err(e) => Err(anyhow!(e).context(format!("logging in to {iqn} at {addr}"))),
    }
}

/// What was negotiated with a target, in the report's words (all zero for the `file`
/// target, which has no session).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NegotiatedReport {
    /// What we may send per PDU (the target's MaxRecvDataSegmentLength).
    pub target_max_recv_data_segment_length: u32,
    pub initiator_max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub header_digest: bool,
    pub data_digest: bool,
    /// The command window the login response opened.
    pub window_after_login: u32,
}

/// One TCP connection speaking raw PDUs through reel's sans-I/O initiator (the same login
/// and session code [`Client`] runs), for the probes that look at what a target negotiates
/// and sends.
pub struct RawConnection {
    stream: TcpStream,
    buf: BytesMut,
    framer: Framer,
    send: FrameLimits,
}

impl RawConnection {
    /// Connects to `addr` and logs in with `config`: the connection, framed from then on with
    /// the session's negotiated limits, and the login's outcome.
    pub async fn log_in(
        addr: SocketAddr,
        config: InitiatorLoginConfig,
        chap_seed: [u8; 32],
    ) -> anyhow::Result<(RawConnection, InitiatorLoginOutcome)> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let mut conn = RawConnection {
            stream,
            buf: BytesMut::with_capacity(64 << 10),
            // Login PDUs: the defaults until the session's limits apply (RFC 7143 §12.12).
            framer: Framer::new(FrameLimits::default()),
            send: FrameLimits::default(),
        };
        let mut login = InitiatorLogin::new(config, chap_seed);
        let mut request = login.start();
        let outcome = loop {
            conn.send(Pdu::LoginRequest(request)).await?;
            let Pdu::LoginResponse(response) = conn.read_pdu().await? else {
                bail!("a PDU other than a login response during login");
            };
            match login
                .on_response(response)
                .map_err(|e| anyhow!("login: {e}"))?
            {
                InitiatorStep::Send(next) => request = next,
                InitiatorStep::Done(outcome) => break outcome,
            }
        };
        Ok((conn, outcome))
    }

    /// Frames PDUs from now on with `session`'s negotiated limits.
    pub fn follow(&mut self, session: &InitiatorSession) {
        self.framer = Framer::new(session.receive_limits());
        self.send = session.send_limits();
    }

    pub async fn read_pdu(&mut self) -> anyhow::Result<Pdu> {
        loop {
            if let Some(frame) = self
                .framer
                .decode(&mut self.buf)
                .map_err(|e| anyhow!("{e}"))?
            {
                return Pdu::parse(frame).map_err(|e| anyhow!("bad PDU from the target: {e}"));
            }
            self.buf.reserve(256 << 10);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                bail!("the target closed the connection");
            }
        }
    }

    pub async fn send(&mut self, pdu: Pdu) -> anyhow::Result<()> {
        let bytes = pdu.to_bytes(&self.send);
        self.stream.write_all(&bytes).await?;
        Ok(())
    }

    /// Runs one task of `session` to completion, showing every PDU received to `seen`.
    pub async fn run(
        &mut self,
        session: &mut InitiatorSession,
        itt: u32,
        mut seen: impl FnMut(&Pdu),
    ) -> anyhow::Result<Outcome> {
        loop {
            while let Some(pdu) = session.poll_transmit() {
                self.send(pdu).await?;
            }
            while let Some(done) = session.poll_completion() {
                if done.itt == itt {
                    return Ok(done.outcome);
                }
            }
            let pdu = self.read_pdu().await?;
            seen(&pdu);
            session.on_pdu(pdu).map_err(|e| anyhow!("{e}"))?;
        }
    }
}

/// Logs in once on reel's sans-I/O initiator (the same code [`Client`] runs) to record what
/// the target agreed to, then logs out.
pub async fn negotiate(addr: SocketAddr, iqn: &str) -> anyhow::Result<NegotiatedReport> {
    let work = async {
        let (mut conn, outcome) = RawConnection::log_in(
            addr,
            login_config(INITIATOR, Some(iqn), SESSION_LIMITS),
            [3u8; 32],
        )
        .await?;
        let n = outcome.negotiated.clone();
        let mut session = InitiatorSession::new(
            n.clone(),
            SessionConfig::default(),
            outcome.cmd_sn,
            outcome.exp_stat_sn,
            outcome.max_cmd_sn,
        );
        let report = NegotiatedReport {
            target_max_recv_data_segment_length: n.max_xmit_data_segment_length,
            initiator_max_recv_data_segment_length: n.max_recv_data_segment_length,
            max_burst_length: n.max_burst_length,
            first_burst_length: n.first_burst_length,
            immediate_data: n.immediate_data,
            initial_r2t: n.initial_r2t,
            max_outstanding_r2t: n.max_outstanding_r2t,
            header_digest: n.header_digest,
            data_digest: n.data_digest,
            window_after_login: session.window(),
        };
        conn.follow(&session);
        let itt = session.logout();
        conn.run(&mut session, itt, |_| {}).await?;
        anyhow::Ok(report)
    };
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .map_err(|_| anyhow!("no answer within 30 s"))?
        .with_context(|| format!("negotiation probe of {iqn} at {addr}"))
}

/// One session used for one drive (and the changer commands that concern it).
#[derive(Clone)]
pub struct Drive {
    /// "reel drive 2", for messages.
    pub name: String,
    pub client: Client,
    pub lun: u64,
    pub changer: Option<ChangerPath>,
    pub timeout: Duration,
}

/// Where a drive's cartridge lives in the changer.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ChangerPath {
    pub lun: u64,
    pub transport: u16,
    pub drive_element: u16,
    pub slot: u16,
}

impl Drive {
    /// Runs a command and returns whatever status it ended with.
    pub async fn raw(
        &self,
        lun: u64,
        cdb: &[u8],
        data_out: Bytes,
        data_in_len: u32,
    ) -> anyhow::Result<ScsiResult> {
        tokio::time::timeout(
            self.timeout,
            self.client.execute(lun, cdb, data_out, data_in_len),
        )
        .await
        .map_err(|_| {
            anyhow!(
                "{} LUN {lun}: {} did not complete within {} s",
                self.name,
                describe::command_name(cdb),
                self.timeout.as_secs()
            )
        })?
        .with_context(|| format!("{} LUN {lun}: {}", self.name, describe::command_name(cdb)))
    }

    /// Runs a command that must end GOOD.
    pub async fn good(
        &self,
        lun: u64,
        cdb: &[u8],
        data_out: Bytes,
        data_in_len: u32,
        context: &str,
    ) -> anyhow::Result<Bytes> {
        let r = self.raw(lun, cdb, data_out, data_in_len).await?;
        if r.status != 0 {
            return Err(self.failure(lun, cdb, &r, context).into());
        }
        Ok(r.data)
    }

    pub fn failure(&self, lun: u64, cdb: &[u8], r: &ScsiResult, context: &str) -> CommandFailure {
        CommandFailure {
            target: self.name.clone(),
            lun,
            context: context.to_string(),
            cdb: cdb.to_vec(),
            status: r.status,
            sense: r.sense.as_ref().map(|s| s.to_vec()),
        }
    }

    /// TEST UNIT READY until GOOD: unit attentions are consumed, NOT READY is waited out
    /// (up to `limit`), anything else fails.
    pub async fn wait_ready(&self, lun: u64, limit: Duration, context: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let r = self
                .raw(lun, &spc::TEST_UNIT_READY, Bytes::new(), 0)
                .await?;
            if r.status == 0 {
                return Ok(());
            }
            let sense = r.sense.as_deref();
            let retry = r.status == 0x02 && describe::is_unit_attention(sense);
            let wait = (r.status == 0x02 && describe::is_not_ready(sense)) || r.status == 0x08;
            if !(retry || wait) || Instant::now() > deadline {
                return Err(self.failure(lun, &spc::TEST_UNIT_READY, &r, context).into());
            }
            if wait {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Consumes the power-on unit attentions of `lun` (a drive without a cartridge stays NOT
    /// READY, which is fine here).
    pub async fn clear_attentions(&self, lun: u64) -> anyhow::Result<()> {
        for _ in 0..8 {
            let r = self
                .raw(lun, &spc::TEST_UNIT_READY, Bytes::new(), 0)
                .await?;
            if !(r.status == 0x02 && describe::is_unit_attention(r.sense.as_deref())) {
                return Ok(());
            }
        }
        bail!("{} LUN {lun} keeps reporting unit attentions", self.name)
    }
}

/// A logical unit the target reports.
#[derive(Clone, Debug)]
pub struct LunInfo {
    pub lun: u64,
    pub inquiry: StandardInquiry,
}

/// What the target has: its LUNs, drives, and the changer's elements.
#[derive(Clone, Debug)]
pub struct Layout {
    pub luns: Vec<LunInfo>,
    /// Tape LUNs in LUN order.
    pub tape_luns: Vec<u64>,
    pub changer_lun: Option<u64>,
    pub transport: Option<u16>,
    /// Drive elements in address order.
    pub drive_elements: Vec<ElementStatus>,
    /// Storage elements in address order.
    pub slots: Vec<ElementStatus>,
}

/// How drive `i` of a run is reached.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DrivePlan {
    pub lun: u64,
    pub changer: Option<ChangerPath>,
    pub barcode: Option<String>,
    pub drive_product: String,
}

async fn element_status(
    probe: &Drive,
    lun: u64,
    element_type: ElementType,
) -> anyhow::Result<Vec<ElementStatus>> {
    let alloc = 0xFFFF;
    let data = probe
        .good(
            lun,
            &smc::read_element_status(element_type, alloc),
            Bytes::new(),
            alloc,
            "inspecting the changer",
        )
        .await?;
    let mut elements: Vec<ElementStatus> = smc::parse_element_status(&data)?
        .into_iter()
        .filter(|e| e.element_type == element_type)
        .collect();
    elements.sort_by_key(|e| e.address);
    Ok(elements)
}

/// Reads the target's LUNs and, if it has a changer, its elements.
pub async fn inspect(probe: &Drive) -> anyhow::Result<Layout> {
    let alloc = 4096;
    let data = probe
        .good(
            0,
            &spc::report_luns(alloc),
            Bytes::new(),
            alloc,
            "listing LUNs",
        )
        .await?;
    let mut luns = Vec::new();
    for lun in spc::parse_report_luns(&data)? {
        probe.clear_attentions(lun).await?;
        let data = probe
            .good(
                lun,
                &spc::inquiry(96),
                Bytes::new(),
                96,
                "identifying the LUN",
            )
            .await?;
        luns.push(LunInfo {
            lun,
            inquiry: spc::parse_inquiry(&data)?,
        });
    }
    luns.sort_by_key(|l| l.lun);
    let tape_luns = luns
        .iter()
        .filter(|l| l.inquiry.device_type == 0x01)
        .map(|l| l.lun)
        .collect();
    let changer_lun = luns
        .iter()
        .find(|l| l.inquiry.device_type == 0x08)
        .map(|l| l.lun);
    let mut layout = Layout {
        luns,
        tape_luns,
        changer_lun,
        transport: None,
        drive_elements: Vec::new(),
        slots: Vec::new(),
    };
    if let Some(lun) = changer_lun {
        layout.transport = element_status(probe, lun, ElementType::TRANSPORT)
            .await?
            .first()
            .map(|e| e.address);
        layout.drive_elements = element_status(probe, lun, ElementType::DATA_TRANSFER).await?;
        layout.slots = element_status(probe, lun, ElementType::STORAGE).await?;
    }
    Ok(layout)
}

/// Maps `drives` drives to the target's LUNs, drive elements and cartridges, or says why the
/// target cannot run them. Drive `i` is the `i`-th tape LUN and, with a changer, the `i`-th
/// drive element and the `i`-th full storage slot (the load checks that the LUN then has
/// the medium).
pub fn plan_drives(layout: &Layout, drives: u32, what: &str) -> anyhow::Result<Vec<DrivePlan>> {
    let n = drives as usize;
    if layout.tape_luns.len() < n {
        bail!(
            "{what} has {} tape drive(s) (LUNs {:?}); --drives asks for {drives}",
            layout.tape_luns.len(),
            layout.tape_luns
        );
    }
    let product = |lun: u64| {
        layout
            .luns
            .iter()
            .find(|l| l.lun == lun)
            .map(|l| {
                format!(
                    "{} {} {}",
                    l.inquiry.vendor, l.inquiry.product, l.inquiry.revision
                )
            })
            .unwrap_or_default()
    };
    let Some(changer_lun) = layout.changer_lun else {
        return Ok(layout.tape_luns[..n]
            .iter()
            .map(|&lun| DrivePlan {
                lun,
                changer: None,
                barcode: None,
                drive_product: product(lun),
            })
            .collect());
    };
    if layout.drive_elements.len() < n {
        bail!(
            "{what}'s changer has {} drive element(s); --drives asks for {drives}",
            layout.drive_elements.len()
        );
    }
    if let Some(busy) = layout.drive_elements[..n].iter().find(|e| e.full) {
        bail!(
            "{what}: drive element {:#06x} already holds a cartridge ({}); unload it first",
            busy.address,
            busy.barcode.as_deref().unwrap_or("no barcode")
        );
    }
    let full: Vec<&ElementStatus> = layout.slots.iter().filter(|e| e.full).collect();
    if full.len() < n {
        bail!(
            "{what}'s changer has {} cartridge(s) in its storage slots; --drives asks for {drives}",
            full.len()
        );
    }
    Ok((0..n)
        .map(|i| DrivePlan {
            lun: layout.tape_luns[i],
            changer: Some(ChangerPath {
                lun: changer_lun,
                transport: layout.transport.unwrap_or(0),
                drive_element: layout.drive_elements[i].address,
                slot: full[i].address,
            }),
            barcode: full[i].barcode.clone(),
            drive_product: product(layout.tape_luns[i]),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(element_type: u8, address: u16, full: bool) -> ElementStatus {
        ElementStatus {
            element_type: ElementType(element_type),
            address,
            full,
            barcode: full.then(|| format!("B{address}")),
            source: None,
        }
    }

    fn layout(drives: usize, cartridges: usize, changer: bool) -> Layout {
        let mut luns = Vec::new();
        let inquiry = |t: u8| StandardInquiry {
            device_type: t,
            removable: t == 8,
            vendor: "V".into(),
            product: "P".into(),
            revision: "1".into(),
        };
        if changer {
            luns.push(LunInfo {
                lun: 0,
                inquiry: inquiry(8),
            });
        }
        for i in 0..drives {
            luns.push(LunInfo {
                lun: i as u64 + 1,
                inquiry: inquiry(1),
            });
        }
        Layout {
            tape_luns: (1..=drives as u64).collect(),
            changer_lun: changer.then_some(0),
            transport: changer.then_some(1),
            drive_elements: if changer {
                (0..drives)
                    .map(|i| element(4, 0x100 + i as u16, false))
                    .collect()
            } else {
                Vec::new()
            },
            slots: if changer {
                (0..8)
                    .map(|i| element(2, 0x400 + i as u16, i < cartridges))
                    .collect()
            } else {
                Vec::new()
            },
            luns,
        }
    }

    #[test]
    fn drives_map_to_luns_elements_and_cartridges() {
        let plans = plan_drives(&layout(4, 6, true), 2, "reel").unwrap();
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[1].lun, 2);
        let c = plans[1].changer.unwrap();
        assert_eq!(
            (c.lun, c.transport, c.drive_element, c.slot),
            (0, 1, 0x101, 0x401)
        );
        assert_eq!(plans[1].barcode.as_deref(), Some("B1025"));
        assert_eq!(plans[0].drive_product, "V P 1");
        let plain = plan_drives(&layout(2, 0, false), 2, "tgt").unwrap();
        assert!(plain.iter().all(|p| p.changer.is_none()));
    }

    #[test]
    fn too_many_drives_or_too_few_cartridges_are_refused() {
        let e = plan_drives(&layout(1, 4, true), 2, "reel")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reel has 1 tape drive(s)") && e.contains("--drives asks for 2"),
            "{e}"
        );
        let e = plan_drives(&layout(4, 1, true), 2, "reel")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 cartridge(s)"), "{e}");
        let mut busy = layout(2, 4, true);
        busy.drive_elements[1].full = true;
        let e = plan_drives(&busy, 2, "tgt").unwrap_err().to_string();
        assert!(e.contains("already holds a cartridge"), "{e}");
    }
}
