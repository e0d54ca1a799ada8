//! An iSCSI initiator client on tokio, for reel's tests and benchmark.
//!
//! [`Client::connect`] logs in; [`Client::execute`] may be called from many tasks
//! at once (that is the queue depth); a background task owns the socket and the
//! [`InitiatorSession`]. It speaks plain RFC 7143, so it drives tgt or LIO too.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reel_iscsi::initiator::{Completion, InitiatorSession, Outcome, ScsiResult, SessionConfig};
use reel_iscsi::initiator_login::{
    InitiatorLogin, InitiatorLoginConfig, InitiatorStep, LoginError,
};
use reel_iscsi::pdu::{FrameLimits, Framer, Pdu, TaskAttr};
use reel_iscsi::session::TmfFunction;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::wire::{self, random_seed};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("login: {0}")]
    Login(#[from] LoginError),
    #[error("bad frame from target: {0}")]
    Frame(String),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("the connection is closed")]
    Closed,
    #[error("the target rejected the request (reason {0:#04x})")]
    Rejected(u8),
    #[error("the target failed the command (iSCSI response {0:#04x})")]
    TargetFailure(u8),
    #[error("timed out")]
    Timeout,
}

enum Request {
    Scsi {
        lun: u64,
        cdb: Vec<u8>,
        data_out: Bytes,
        data_in_len: u32,
        reply: oneshot::Sender<Result<Outcome, ClientError>>,
    },
    Tmf {
        function: TmfFunction,
        lun: u64,
        referenced_itt: u32,
        reply: oneshot::Sender<Result<Outcome, ClientError>>,
    },
    Text {
        data: Bytes,
        reply: oneshot::Sender<Result<Outcome, ClientError>>,
    },
    Nop {
        reply: oneshot::Sender<Result<Outcome, ClientError>>,
    },
    Logout {
        reply: oneshot::Sender<Result<Outcome, ClientError>>,
    },
    /// Drop the TCP connection without logging out (tests of session reinstatement).
    Abort,
}

/// A logged-in session.
#[derive(Clone)]
pub struct Client {
    requests: mpsc::UnboundedSender<Request>,
}

/// Options besides the login settings.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    pub session: SessionConfig,
}

async fn read_pdu(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    framer: &Framer,
) -> Result<Pdu, ClientError> {
    match wire::read_frame(stream, buf, framer).await {
        Ok(Ok(frame)) => Pdu::parse(frame).map_err(|e| ClientError::Frame(e.to_string())),
        Ok(Err(e)) => Err(ClientError::Frame(e.to_string())),
        Err(wire::ReadError::Io(e)) => Err(ClientError::Io(e)),
        Err(wire::ReadError::Closed) => Err(ClientError::Closed),
    }
}

/// Most redirections one connect follows (a loop between two portals must end).
const MAX_REDIRECTS: usize = 4;

/// The socket address in a TargetAddress value, `host:port[,tpgt]` (§13.9).
async fn redirect_address(address: &str) -> Result<SocketAddr, ClientError> {
    let host_port = address.split(',').next().unwrap_or(address);
    tokio::net::lookup_host(host_port)
        .await?
        .next()
        .ok_or_else(|| ClientError::Protocol(format!("redirected to unusable address {address:?}")))
}

impl Client {
    /// Connects and logs in (normal session when `config.target_name` is set, else discovery),
    /// following login redirections (§11.13.5) to where the target is served.
    pub async fn connect(
        addr: SocketAddr,
        config: InitiatorLoginConfig,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let mut addr = addr;
        let mut hops = 0;
        loop {
            match Client::connect_once(addr, config.clone(), options.clone()).await {
                Err(ClientError::Login(LoginError::Redirected { address, .. }))
                    if hops < MAX_REDIRECTS =>
                {
                    hops += 1;
                    tracing::debug!(from = %addr, to = %address, "login redirected");
                    addr = redirect_address(&address).await?;
                }
                other => return other,
            }
        }
    }

    /// Connects and logs in at `addr` only.
    pub async fn connect_once(
        addr: SocketAddr,
        config: InitiatorLoginConfig,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Connect { addr, source })?;
        stream.set_nodelay(true)?;
        let (mut reader, mut writer) = stream.into_split();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let login_limits = FrameLimits::default();
        let framer = Framer::new(login_limits);
        let mut login = InitiatorLogin::new(config, random_seed());
        let mut request = login.start();
        let outcome = loop {
            writer
                .write_all(&Pdu::LoginRequest(request).to_bytes(&login_limits))
                .await?;
            let pdu = tokio::time::timeout(
                Duration::from_secs(30),
                read_pdu(&mut reader, &mut buf, &framer),
            )
            .await
            .map_err(|_| ClientError::Timeout)??;
            let Pdu::LoginResponse(response) = pdu else {
                return Err(ClientError::Protocol(format!(
                    "opcode {:#04x} during login",
                    pdu.opcode()
                )));
            };
            match login.on_response(response)? {
                InitiatorStep::Send(next) => request = next,
                InitiatorStep::Done(outcome) => break outcome,
            }
        };
        let session = InitiatorSession::new(
            outcome.negotiated.clone(),
            options.session,
            outcome.cmd_sn,
            outcome.exp_stat_sn,
            outcome.max_cmd_sn,
        );
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(session, reader, writer, buf, rx));
        Ok(Client { requests: tx })
    }

    async fn call(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<Outcome, ClientError>>) -> Request,
    ) -> Result<Outcome, ClientError> {
        let (reply, wait) = oneshot::channel();
        self.requests
            .send(make(reply))
            .map_err(|_| ClientError::Closed)?;
        let outcome = wait.await.map_err(|_| ClientError::Closed)??;
        match outcome {
            Outcome::Rejected(reason) => Err(ClientError::Rejected(reason)),
            Outcome::TargetFailure(code) => Err(ClientError::TargetFailure(code)),
            other => Ok(other),
        }
    }

    /// Runs one SCSI command: writes `data_out` (if any), reads up to `data_in_len` bytes.
    pub async fn execute(
        &self,
        lun: u64,
        cdb: &[u8],
        data_out: Bytes,
        data_in_len: u32,
    ) -> Result<ScsiResult, ClientError> {
        let cdb = cdb.to_vec();
        match self
            .call(|reply| Request::Scsi {
                lun,
                cdb,
                data_out,
                data_in_len,
                reply,
            })
            .await?
        {
            Outcome::Scsi(result) => Ok(result),
            other => Err(ClientError::Protocol(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub async fn task_management(
        &self,
        function: TmfFunction,
        lun: u64,
        referenced_itt: u32,
    ) -> Result<u8, ClientError> {
        match self
            .call(|reply| Request::Tmf {
                function,
                lun,
                referenced_itt,
                reply,
            })
            .await?
        {
            Outcome::TaskManagement(code) => Ok(code),
            other => Err(ClientError::Protocol(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// Text request; returns the joined response data.
    pub async fn text(&self, data: Bytes) -> Result<Bytes, ClientError> {
        match self.call(|reply| Request::Text { data, reply }).await? {
            Outcome::Text(data) => Ok(data),
            other => Err(ClientError::Protocol(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// `SendTargets=All` (discovery sessions): (target name, addresses) pairs.
    pub async fn send_targets(&self) -> Result<Vec<(String, Vec<String>)>, ClientError> {
        let data = self.text(Bytes::from_static(b"SendTargets=All\0")).await?;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in data.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            let text = String::from_utf8_lossy(pair);
            if let Some(name) = text.strip_prefix("TargetName=") {
                out.push((name.to_string(), Vec::new()));
            } else if let Some(address) = text.strip_prefix("TargetAddress=")
                && let Some(last) = out.last_mut()
            {
                last.1.push(address.to_string());
            }
        }
        Ok(out)
    }

    pub async fn nop(&self) -> Result<(), ClientError> {
        self.call(|reply| Request::Nop { reply }).await.map(|_| ())
    }

    /// Logs out (close the session) and waits for the answer.
    pub async fn logout(&self) -> Result<u8, ClientError> {
        match self.call(|reply| Request::Logout { reply }).await? {
            Outcome::Logout(code) => Ok(code),
            other => Err(ClientError::Protocol(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// Drops the TCP connection without a logout, as a network failure would.
    pub fn abort_connection(&self) {
        let _ = self.requests.send(Request::Abort);
    }
}

type Reply = oneshot::Sender<Result<Outcome, ClientError>>;

async fn drive(
    mut session: InitiatorSession,
    mut reader: tokio::net::tcp::OwnedReadHalf,
    writer: tokio::net::tcp::OwnedWriteHalf,
    mut buf: BytesMut,
    mut requests: mpsc::UnboundedReceiver<Request>,
) {
    let framer = Framer::new(session.receive_limits());
    let send_limits = session.send_limits();
    let (out_tx, writer_task) = wire::spawn_writer(writer, send_limits, Default::default());
    let mut waiting: HashMap<u32, Reply> = HashMap::new();
    let mut failure: Option<String> = None;
    let mut requests_open = true;
    loop {
        while let Some(pdu) = session.poll_transmit() {
            if !out_tx.send(pdu) {
                failure = Some("writer stopped".into());
            }
        }
        while let Some(Completion { itt, outcome }) = session.poll_completion() {
            if let Some(reply) = waiting.remove(&itt) {
                let _ = reply.send(Ok(outcome));
            }
        }
        if failure.is_some() || (!requests_open && waiting.is_empty()) {
            break;
        }
        tokio::select! {
            pdu = read_pdu(&mut reader, &mut buf, &framer) => match pdu {
                Ok(pdu) => {
                    if let Err(e) = session.on_pdu(pdu) {
                        failure = Some(e.to_string());
                    }
                }
                Err(e) => failure = Some(e.to_string()),
            },
            request = requests.recv(), if requests_open => match request {
                Some(Request::Scsi { lun, cdb, data_out, data_in_len, reply }) => {
                    let itt = session.scsi(lun, &cdb, data_out, data_in_len, TaskAttr::Simple);
                    waiting.insert(itt, reply);
                }
                Some(Request::Tmf { function, lun, referenced_itt, reply }) => {
                    let itt = session.task_management(function, lun, referenced_itt);
                    waiting.insert(itt, reply);
                }
                Some(Request::Text { data, reply }) => {
                    let itt = session.text(data);
                    waiting.insert(itt, reply);
                }
                Some(Request::Nop { reply }) => {
                    let itt = session.nop(Bytes::new());
                    waiting.insert(itt, reply);
                }
                Some(Request::Logout { reply }) => {
                    let itt = session.logout();
                    waiting.insert(itt, reply);
                }
                Some(Request::Abort) => failure = Some("aborted by the client".into()),
                None => requests_open = false,
            },
        }
    }
    let why = failure.unwrap_or_else(|| "closed".into());
    session.connection_lost();
    for (_, reply) in waiting.drain() {
        let _ = reply.send(Err(ClientError::Protocol(format!(
            "connection lost: {why}"
        ))));
    }
    drop(out_tx);
    writer_task.abort();
}
