//! The iSCSI target server: portals, logins, sessions, and the bridge from
//! [`TargetConnection`] to the SCSI logical units.
//!
//! One tokio task per connection owns its protocol state; a writer task owns
//! the socket's write half so a large Data-In never blocks reading Data-Out.
//! SCSI work goes to one OS thread per logical unit ([`crate::executor`]),
//! which keeps each LU's commands in arrival order and lets them block on
//! storage without stalling the runtime.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use parking_lot::Mutex;
use reel_iscsi::login::{LoginOutcome, LoginStep, PortalConfig, SessionKind, TargetLogin};
use reel_iscsi::pdu::{Frame, FrameError, FrameLimits, Framer, Pdu};
use reel_iscsi::session::{
    CloseReason, ConnectionConfig, DataOutLimit, Event, ScsiOutcome, TargetConnection, TmfFunction,
    tmf_response,
};
use reel_iscsi::text::TextResponder;
use reel_scsi::{ItNexus, LunTable, TaskManagement};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use crate::executor::{Executor, Job};
use crate::stats::{InitiatorCounters, InitiatorStats, StatsRegistry};
use crate::wire::{self, random_seed};

/// Everything the server needs; built by the composition root from configuration.
pub struct TargetServerConfig {
    pub listen: Vec<SocketAddr>,
    pub portal: PortalConfig,
    /// Logical units of each target, in the order of `portal.targets`.
    pub luns: Vec<Arc<LunTable>>,
    /// Tasks in flight per session (the CmdSN window).
    pub queue_depth: u32,
    /// Idle time after which the target pings the initiator (NOP-In); a ping
    /// unanswered for another interval drops the connection.
    pub nop_interval: Duration,
    /// How long a login may take before the connection is dropped.
    pub login_timeout: Duration,
    /// Most sessions (normal and discovery) at once; a login beyond it is refused with
    /// "out of resources" (RFC 7143 §11.13.5, 0302h). With `queue_depth` and the LUs' Data-Out
    /// limits it bounds what initiators can make the server hold.
    pub max_sessions: usize,
}

/// Data-Out one connection admits at once beyond the oldest command (see
/// [`ConnectionConfig::data_out_budget`]): a tape drive's commands run one at a time, so data
/// solicited far ahead of them only waits in memory.
pub const DATA_OUT_BUDGET: u64 = 32 << 20;

/// Data-In one connection may have queued for its initiator before it starts no more commands
/// (`wire::Backlog`): an initiator that sends READs and does not read its socket makes the
/// target hold at most this plus what the commands already running return. Far above what a
/// reading initiator leaves queued (the kernel's socket buffer takes the first megabytes).
pub const DATA_IN_BUDGET: u64 = 32 << 20;

/// [`TargetServerConfig::max_sessions`] when the configuration does not say.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// Key of a session for reinstatement (§6.3.5: same initiator name and ISID, same target).
type SessionKey = (String, [u8; 6], Option<usize>);

struct SessionEntry {
    tsih: u16,
    /// Tells the old connection to end; it answers on the oneshot once its tasks drained.
    stop: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

/// A logged-in session as seen by the management surface.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub initiator: String,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub target: Option<String>,
    pub peer: SocketAddr,
}

struct Shared {
    portal: Arc<PortalConfig>,
    luns: Vec<Arc<LunTable>>,
    queue_depth: u32,
    nop_interval: Duration,
    login_timeout: Duration,
    max_sessions: usize,
    sessions: Mutex<HashMap<SessionKey, SessionEntry>>,
    info: Mutex<HashMap<u16, SessionInfo>>,
    next_tsih: AtomicU16,
    executor: Executor,
    stats: StatsRegistry,
    /// Data-In queued for initiators and not yet written, over every connection.
    data_in_queued: Arc<AtomicU64>,
}

/// A running target server.
pub struct TargetServer {
    shared: Arc<Shared>,
    local_addrs: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl TargetServer {
    /// Binds every portal and starts accepting.
    /// When `config.portal.addresses` is empty, the bound addresses are advertised in
    /// SendTargets answers.
    pub async fn start(config: TargetServerConfig) -> std::io::Result<TargetServer> {
        let mut listeners = Vec::new();
        for addr in &config.listen {
            listeners.push(TcpListener::bind(addr).await?);
        }
        let mut portal = config.portal;
        if portal.addresses.is_empty() {
            for listener in &listeners {
                portal.addresses.push(listener.local_addr()?.to_string());
            }
        }
        let shared = Arc::new(Shared {
            portal: Arc::new(portal),
            luns: config.luns,
            queue_depth: config.queue_depth.max(1),
            nop_interval: config.nop_interval,
            login_timeout: config.login_timeout,
            max_sessions: config.max_sessions.max(1),
            sessions: Mutex::new(HashMap::new()),
            info: Mutex::new(HashMap::new()),
            next_tsih: AtomicU16::new(1),
            executor: Executor::new(),
            stats: StatsRegistry::default(),
            data_in_queued: Arc::default(),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut local_addrs = Vec::new();
        let mut tasks = Vec::new();
        for listener in listeners {
            local_addrs.push(listener.local_addr()?);
            let shared = shared.clone();
            let shutdown_rx = shutdown_rx.clone();
            tasks.push(tokio::spawn(accept_loop(listener, shared, shutdown_rx)));
        }
        Ok(TargetServer {
            shared,
            local_addrs,
            shutdown,
            tasks: Mutex::new(tasks),
        })
    }

    /// The addresses actually bound (port 0 in the config picks a free port).
    /// Data-In queued for initiators and not yet written to their sockets, over every
    /// connection (each holds at most about [`DATA_IN_BUDGET`] plus its running commands').
    pub fn queued_data_in_bytes(&self) -> u64 {
        self.shared.data_in_queued.load(Ordering::Relaxed)
    }

    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.shared.info.lock().values().cloned().collect()
    }

    /// I/O counters of every initiator that logged in to a target since the server started.
    pub fn initiator_stats(&self) -> Vec<InitiatorStats> {
        self.shared.stats.snapshot()
    }

    /// Stops accepting, lets every connection finish the commands it is running,
    /// and waits (at most `grace`) for them to close.
    pub async fn shutdown(&self, grace: Duration) {
        let _ = self.shutdown.send(true);
        // Awaiting the accept loops (not only aborting them) guarantees their
        // listeners are closed when this returns, so the portal can be bound again.
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
        let deadline = tokio::time::Instant::now() + grace;
        while !self.shared.info.lock().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let shared = shared.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_connection(stream, peer, shared, shutdown).await {
                            debug!(%peer, error = %e, "connection ended");
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("login timed out")]
    LoginTimeout,
    #[error("{0}")]
    Protocol(String),
    #[error("peer closed the connection")]
    Closed,
}

/// Reads one frame for the connection (see [`wire::read_frame`]).
async fn read_frame(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    framer: &Framer,
) -> Result<Result<Frame, FrameError>, ConnError> {
    wire::read_frame(stream, buf, framer)
        .await
        .map_err(|e| match e {
            wire::ReadError::Io(e) => ConnError::Io(e),
            wire::ReadError::Closed => ConnError::Closed,
        })
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), ConnError> {
    let (mut reader, mut writer) = stream.into_split();
    let mut buf = BytesMut::with_capacity(64 * 1024);

    // Login phase (§6): default limits, one request/response at a time.
    let initial_stat_sn = u32::from_be_bytes(random_seed()[..4].try_into().expect("4 bytes"));
    let mut login = TargetLogin::new(shared.portal.clone(), random_seed(), initial_stat_sn);
    let login_framer = Framer::new(FrameLimits::default());
    let login_limits = FrameLimits::default();
    let deadline = tokio::time::Instant::now() + shared.login_timeout;
    let (response, outcome) = loop {
        let frame =
            tokio::time::timeout_at(deadline, read_frame(&mut reader, &mut buf, &login_framer))
                .await
                .map_err(|_| ConnError::LoginTimeout)??;
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => return Err(ConnError::Protocol(format!("during login: {e}"))),
        };
        let request = match Pdu::parse(frame) {
            Ok(Pdu::LoginRequest(request)) => request,
            Ok(other) => {
                return Err(ConnError::Protocol(format!(
                    "opcode {:#04x} before login completed",
                    other.opcode()
                )));
            }
            Err(e) => return Err(ConnError::Protocol(format!("during login: {e}"))),
        };
        match login.on_request(request) {
            LoginStep::Continue(response) => {
                writer
                    .write_all(&Pdu::LoginResponse(response).to_bytes(&login_limits))
                    .await?;
            }
            LoginStep::Fail(response) => {
                info!(%peer, class = response.status_class, detail = response.status_detail, "login refused");
                writer
                    .write_all(&Pdu::LoginResponse(response).to_bytes(&login_limits))
                    .await?;
                let _ = writer.shutdown().await;
                return Ok(());
            }
            LoginStep::Complete(response, outcome) => break (response, outcome),
        }
    };

    let target_index = match outcome.kind {
        SessionKind::Discovery => None,
        SessionKind::Normal { target } => Some(target),
    };
    let key: SessionKey = (outcome.initiator_name.clone(), outcome.isid, target_index);
    let mut response = response;
    if outcome.tsih != 0 {
        // We negotiate MaxConnections=1, so a non-zero TSIH can only name a session that
        // is gone (e.g. we restarted): "session does not exist" (§11.13.5, 0x020A).
        response.status_class = 0x02;
        response.status_detail = 0x0a;
        response.transit = false;
        response.nsg = response.csg;
        writer
            .write_all(&Pdu::LoginResponse(response).to_bytes(&login_limits))
            .await?;
        return Ok(());
    }
    // Session reinstatement (§6.3.5): the old session with this key ends first, with its
    // tasks drained, so the two never act on the same LU at once.
    let old = shared.sessions.lock().remove(&key);
    let replaced = old.as_ref().map(|old| old.tsih);
    if let Some(old) = old {
        info!(initiator = %outcome.initiator_name, tsih = old.tsih, "reinstating session");
        let (done_tx, done_rx) = oneshot::channel();
        if old.stop.send(done_tx).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(30), done_rx).await;
        }
    }
    let target_name = target_index.map(|i| shared.portal.targets[i].name.clone());
    // Count and claim under one lock, so concurrent logins cannot pass the cap together. A
    // session being reinstated does not count: this login replaces it.
    let admitted = {
        let mut info = shared.info.lock();
        let live = info.len() - replaced.map_or(0, |t| usize::from(info.contains_key(&t)));
        if live >= shared.max_sessions {
            None
        } else {
            let tsih = loop {
                let t = shared.next_tsih.fetch_add(1, Ordering::Relaxed);
                if t != 0 && !info.contains_key(&t) {
                    break t;
                }
            };
            info.insert(
                tsih,
                SessionInfo {
                    initiator: outcome.initiator_name.clone(),
                    isid: outcome.isid,
                    tsih,
                    target: target_name.clone(),
                    peer,
                },
            );
            Some(tsih)
        }
    };
    let Some(tsih) = admitted else {
        warn!(%peer, initiator = %outcome.initiator_name, max = shared.max_sessions,
            "login refused: the session limit is reached ([iscsi] max_sessions)");
        let code = reel_iscsi::login::status::OUT_OF_RESOURCES;
        response.status_class = (code >> 8) as u8;
        response.status_detail = code as u8;
        response.transit = false;
        response.nsg = response.csg;
        response.data = Default::default();
        writer
            .write_all(&Pdu::LoginResponse(response).to_bytes(&login_limits))
            .await?;
        let _ = writer.shutdown().await;
        return Ok(());
    };
    response.tsih = tsih;
    let (stop_tx, stop_rx) = mpsc::unbounded_channel();
    shared.sessions.lock().insert(
        key.clone(),
        SessionEntry {
            tsih,
            stop: stop_tx,
        },
    );
    info!(%peer, initiator = %outcome.initiator_name, target = ?target_name, tsih, "session started");
    writer
        .write_all(&Pdu::LoginResponse(response).to_bytes(&login_limits))
        .await?;

    let nexus = ItNexus {
        initiator_port: format!("{},i,0x{}", outcome.initiator_name, hex(&outcome.isid)).into(),
        target_port: target_index
            .map(|i| shared.portal.targets[i].portal_group_tag)
            .unwrap_or(1),
    };
    let (result, reinstated_by) = full_feature(
        reader,
        writer,
        buf,
        &shared,
        outcome,
        target_index,
        &nexus,
        stop_rx,
        shutdown,
    )
    .await;

    // The I_T nexus is gone (an I_T nexus loss, SAM-5): SPC-2 reservations held by it end.
    if let Some(index) = target_index {
        shared.luns[index].nexus_lost(&nexus);
    }
    {
        let mut sessions = shared.sessions.lock();
        if sessions.get(&key).is_some_and(|e| e.tsih == tsih) {
            sessions.remove(&key);
        }
    }
    shared.info.lock().remove(&tsih);
    info!(%peer, tsih, "session ended");
    if let Some(waiter) = reinstated_by {
        let _ = waiter.send(());
    }
    result
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn tmf_to_scsi(function: TmfFunction) -> Option<TaskManagement> {
    Some(match function {
        TmfFunction::AbortTaskSet => TaskManagement::AbortTaskSet,
        TmfFunction::ClearTaskSet => TaskManagement::ClearTaskSet,
        TmfFunction::LogicalUnitReset => TaskManagement::LogicalUnitReset,
        TmfFunction::TargetWarmReset => TaskManagement::TargetWarmReset,
        TmfFunction::TargetColdReset => TaskManagement::TargetColdReset,
        TmfFunction::ClearAca => TaskManagement::ClearAca,
        TmfFunction::AbortTask | TmfFunction::TaskReassign => return None,
    })
}

#[allow(clippy::too_many_arguments)]
async fn full_feature(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    writer: tokio::net::tcp::OwnedWriteHalf,
    mut buf: BytesMut,
    shared: &Arc<Shared>,
    outcome: LoginOutcome,
    target_index: Option<usize>,
    nexus: &ItNexus,
    mut stop_rx: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    mut shutdown: watch::Receiver<bool>,
) -> (Result<(), ConnError>, Option<oneshot::Sender<()>>) {
    let discovery = target_index.is_none();
    let text = TextResponder::new(shared.portal.clone(), target_index, discovery)
        .with_initiator_name(outcome.initiator_name.clone());
    let mut conn = TargetConnection::new(
        outcome.negotiated.clone(),
        ConnectionConfig {
            queue_depth: shared.queue_depth,
            discovery,
            // Each LU says how much Data-Out one command may carry; a discovery session has
            // no LUs and takes none.
            data_out_limit: match target_index {
                Some(i) => {
                    let luns = shared.luns[i].clone();
                    DataOutLimit::new(move |lun| luns.max_data_out(*lun))
                }
                None => DataOutLimit::fixed(0),
            },
            data_out_budget: DATA_OUT_BUDGET,
        },
        Some(text),
        outcome.exp_cmd_sn,
        outcome.stat_sn,
    );
    let framer = Framer::new(conn.receive_limits());
    // A Data-Out being read straight into its command's buffer (see `wire::read_placing`).
    let mut placing: Option<wire::Placing> = None;
    let send_limits = conn.send_limits();

    let backlog = Arc::new(wire::Backlog::counted_in(shared.data_in_queued.clone()));
    let (out_tx, writer_task) = wire::spawn_writer(writer, send_limits, backlog.clone());
    let mut data_in = DataInBudget {
        backlog: backlog.clone(),
        running: HashMap::new(),
        running_bytes: 0,
    };

    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u32, ScsiOutcome)>();
    let luns = target_index.map(|i| shared.luns[i].clone());
    let target_name = target_index.map(|i| shared.portal.targets[i].name.as_str());
    let counters = shared
        .stats
        .for_initiator(&outcome.initiator_name, target_name);
    // Commands handed to an LU: when, which LUN, bytes written (for the counters).
    let mut started: HashMap<u32, (Instant, u64, u64)> = HashMap::new();
    let mut idle = tokio::time::interval(shared.nop_interval);
    idle.tick().await;
    let mut heard_from_peer = true;
    let mut stop_waiter: Option<oneshot::Sender<()>> = None;
    let mut shutting_down = false;
    let mut result = Ok(());

    loop {
        // What completions produced is counted in the backlog before any command starts.
        transmit(&mut conn, &out_tx);
        // Run what the connection decided, then send what it produced. Not while the
        // initiator leaves too much Data-In unread: the commands wait in the connection (at
        // most the CmdSN window of them), and the writer's progress wakes the loop.
        while data_in.may_start()
            && let Some(event) = conn.poll_event()
        {
            match event {
                Event::Execute(command) => {
                    let Some(luns) = luns.as_ref() else {
                        conn.complete(
                            command.itt,
                            ScsiOutcome {
                                status: 0x02,
                                ..Default::default()
                            },
                        );
                        continue;
                    };
                    data_in.started(command.itt, command.data_in_len);
                    started.insert(
                        command.itt,
                        (
                            Instant::now(),
                            reel_scsi::decode_lun(command.lun),
                            command.data_out.len() as u64,
                        ),
                    );
                    let job = Job {
                        luns: luns.clone(),
                        nexus: nexus.clone(),
                        command,
                        done: done_tx.clone(),
                    };
                    if let Some((itt, outcome)) = shared.executor.submit(job) {
                        data_in.finished(itt);
                        account(&mut started, &counters, itt, &outcome);
                        conn.complete(itt, outcome);
                        // Its Data-In joins the backlog before the next command may start.
                        transmit(&mut conn, &out_tx);
                    }
                }
                Event::TaskManagement {
                    itt, function, lun, ..
                } => {
                    let response = match (luns.as_ref(), tmf_to_scsi(function)) {
                        (Some(luns), Some(tmf)) => {
                            let lun = reel_scsi::decode_lun(lun);
                            let whole_target = matches!(
                                function,
                                TmfFunction::TargetWarmReset | TmfFunction::TargetColdReset
                            );
                            if !whole_target && luns.get(lun).is_none() {
                                tmf_response::LUN_DOES_NOT_EXIST
                            } else {
                                luns.task_management(
                                    if whole_target { None } else { Some(lun) },
                                    tmf,
                                    nexus,
                                );
                                tmf_response::FUNCTION_COMPLETE
                            }
                        }
                        _ => tmf_response::NOT_SUPPORTED,
                    };
                    conn.tmf_complete(itt, response);
                }
                Event::Close(reason) => {
                    match &reason {
                        CloseReason::Logout => debug!("logout"),
                        other => {
                            warn!(reason = ?other, initiator = %nexus.initiator_port, "closing connection");
                        }
                    }
                    if let CloseReason::ProtocolError(why) = reason {
                        result = Err(ConnError::Protocol(why));
                    }
                }
            }
        }
        transmit(&mut conn, &out_tx);
        if conn.is_closed() || (shutting_down && conn.task_count() == 0) {
            break;
        }

        tokio::select! {
            received = wire::read_placing(&mut reader, &mut buf, &framer, &mut placing, &mut conn), if !shutting_down => {
                match received {
                    Ok(received) => {
                        heard_from_peer = true;
                        match received {
                            wire::Received::Frame(frame) => conn.on_frame(frame),
                            wire::Received::Placed(header) => conn.on_placed_data_out(header),
                        }
                    }
                    Err(e) => {
                        result = match e {
                            wire::ReadError::Closed => Ok(()),
                            wire::ReadError::Io(e) => Err(ConnError::Io(e)),
                        };
                        break;
                    }
                }
            }
            () = backlog.drained(), if !data_in.may_start() => {}
            Some((itt, outcome)) = done_rx.recv() => {
                data_in.finished(itt);
                account(&mut started, &counters, itt, &outcome);
                conn.complete(itt, outcome);
            }
            _ = idle.tick() => {
                if heard_from_peer {
                    heard_from_peer = false;
                } else if !conn.ping() {
                    // The previous ping went unanswered for a whole interval.
                    continue;
                }
            }
            Some(waiter) = stop_rx.recv() => {
                // Reinstated by a new login: stop reading, let running tasks end.
                stop_waiter = Some(waiter);
                shutting_down = true;
            }
            _ = shutdown.changed() => {
                conn.request_logout(0);
                shutting_down = true;
            }
        }
    }

    // Tasks still running on an LU finish there; their results are discarded.
    let mut running = conn.connection_lost().len();
    while running > 0 {
        match tokio::time::timeout(Duration::from_secs(60), done_rx.recv()).await {
            Ok(Some(_)) => running -= 1,
            _ => break,
        }
    }
    drop(out_tx);
    let _ = writer_task.await;
    // The reinstating login is told only after the caller has ended this session (its
    // nexus, its registry entry), so the new session never sees the old one's leftovers.
    (result, stop_waiter)
}

/// Hands the connection's outgoing PDUs to its writer.
fn transmit(conn: &mut TargetConnection, out: &wire::Outbox) {
    while let Some(pdu) = conn.poll_transmit() {
        if !out.send(pdu) {
            conn.connection_lost();
        }
    }
}

/// What one connection's Data-In may take: what waits to be written and what the commands
/// running may still return, at most [`DATA_IN_BUDGET`] before another command starts. So
/// it holds at most the budget and one command's Data-In (a command larger than the budget
/// runs once the rest is written, alone); commands the null disk or absent LUNs answer
/// inline count in the backlog as soon as they ran.
struct DataInBudget {
    backlog: Arc<wire::Backlog>,
    /// Running commands' Expected Data Transfer Lengths for Data-In, by ITT.
    running: HashMap<u32, u64>,
    running_bytes: u64,
}

impl DataInBudget {
    fn may_start(&self) -> bool {
        self.backlog.bytes() + self.running_bytes <= DATA_IN_BUDGET
    }

    fn started(&mut self, itt: u32, data_in_len: u32) {
        let len = u64::from(data_in_len);
        if let Some(old) = self.running.insert(itt, len) {
            self.running_bytes -= old;
        }
        self.running_bytes += len;
    }

    /// Its Data-In is in the backlog now (queued with the response).
    fn finished(&mut self, itt: u32) {
        if let Some(len) = self.running.remove(&itt) {
            self.running_bytes -= len;
        }
    }
}

/// Adds a finished command to the initiator's counters.
fn account(
    started: &mut HashMap<u32, (Instant, u64, u64)>,
    counters: &InitiatorCounters,
    itt: u32,
    outcome: &ScsiOutcome,
) {
    if let Some((at, lun, written)) = started.remove(&itt) {
        counters.record(
            lun,
            written,
            outcome.data_in.iter().map(|b| b.len() as u64).sum(),
            outcome.status,
            outcome.sense.as_deref().unwrap_or(&[]),
            at.elapsed(),
        );
    }
}

/// Data of a finished SCSI command, for completions sent from executor threads.
pub(crate) fn outcome_from(response: reel_scsi::Response) -> ScsiOutcome {
    ScsiOutcome {
        status: response.status as u8,
        sense: response.sense,
        data_in: response.data_in.into_parts(),
    }
}
