//! Target side of the login phase (RFC 7143 §6, §11.12, §11.13, §12.1.3, §13).
//!
//! [`TargetLogin`] consumes Login Requests and produces Login Responses. It knows the portal's
//! targets, their ACLs and CHAP credentials; it does not know about existing sessions, so TSIH
//! allocation and session reinstatement (§6.3.5) stay with the caller, which receives everything it
//! needs in [`LoginOutcome`] and can refuse with [`TargetLogin::reject`].
//!
//! The login is a sequence of typed states (§6.3): no request yet; the leading request's text
//! still incomplete (C bit), nobody identified; the security stage with its CHAP progress; the
//! operational stage; and the end — the full-feature phase handed over as a validated
//! [`LoginOutcome`], or a failure after which every request is refused. Each state carries only
//! what is valid in it, and stages are [`Stage`]s: a stage the current state does not allow
//! (a reserved code, going back, skipping authentication the target requires) is refused with
//! a Login Response status (§11.13.5), never reached.
//!
//! Randomness (CHAP identifiers and challenges) comes from the 32-byte seed given to
//! [`TargetLogin::new`], expanded with SHA-256 in counter mode ([`crate::chap::SeedRng`]): the caller
//! must supply fresh random bytes for every connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::chap::{
    ChapAlgorithm, MAX_CHALLENGE, SeedRng, chap_response, constant_time_eq, decode_binary,
    encode_binary, parse_identifier,
};
pub use crate::chap::{ChapCredentials, Secret};
use crate::params::{Answer, Limits, Negotiated, Negotiator, Role};
use crate::pdu::{LoginRequest, LoginResponse, Stage};
use crate::text::{MAX_TEXT_LEN, encode_pairs, initiator_allowed, names_equal, parse_pairs};

/// Login status codes, `class << 8 | detail` (§11.13.5).
pub mod status {
    pub const SUCCESS: u16 = 0x0000;
    pub const TARGET_MOVED_TEMPORARILY: u16 = 0x0101;
    pub const TARGET_MOVED_PERMANENTLY: u16 = 0x0102;
    pub const INITIATOR_ERROR: u16 = 0x0200;
    pub const AUTHENTICATION_FAILURE: u16 = 0x0201;
    pub const AUTHORIZATION_FAILURE: u16 = 0x0202;
    pub const NOT_FOUND: u16 = 0x0203;
    pub const TARGET_REMOVED: u16 = 0x0204;
    pub const UNSUPPORTED_VERSION: u16 = 0x0205;
    pub const TOO_MANY_CONNECTIONS: u16 = 0x0206;
    pub const MISSING_PARAMETER: u16 = 0x0207;
    pub const CANT_INCLUDE_IN_SESSION: u16 = 0x0208;
    pub const SESSION_TYPE_NOT_SUPPORTED: u16 = 0x0209;
    pub const SESSION_DOES_NOT_EXIST: u16 = 0x020a;
    pub const INVALID_DURING_LOGIN: u16 = 0x020b;
    pub const TARGET_ERROR: u16 = 0x0300;
    pub const SERVICE_UNAVAILABLE: u16 = 0x0301;
    pub const OUT_OF_RESOURCES: u16 = 0x0302;

    /// The RFC's name for a status code.
    pub fn name(code: u16) -> &'static str {
        match code {
            SUCCESS => "success",
            TARGET_MOVED_TEMPORARILY => "target moved temporarily",
            TARGET_MOVED_PERMANENTLY => "target moved permanently",
            INITIATOR_ERROR => "initiator error",
            AUTHENTICATION_FAILURE => "authentication failure",
            AUTHORIZATION_FAILURE => "authorization failure",
            NOT_FOUND => "not found",
            TARGET_REMOVED => "target removed",
            UNSUPPORTED_VERSION => "unsupported version",
            TOO_MANY_CONNECTIONS => "too many connections",
            MISSING_PARAMETER => "missing parameter",
            CANT_INCLUDE_IN_SESSION => "can't include in session",
            SESSION_TYPE_NOT_SUPPORTED => "session type not supported",
            SESSION_DOES_NOT_EXIST => "session does not exist",
            INVALID_DURING_LOGIN => "invalid during login",
            TARGET_ERROR => "target error",
            SERVICE_UNAVAILABLE => "service unavailable",
            OUT_OF_RESOURCES => "out of resources",
            c if c >> 8 == 1 => "redirection",
            c if c >> 8 == 2 => "initiator error",
            c if c >> 8 == 3 => "target error",
            _ => "unknown status",
        }
    }
}

/// Command window advertised during login: MaxCmdSN = ExpCmdSN + LOGIN_CMD_WINDOW - 1.
pub const LOGIN_CMD_WINDOW: u32 = 64;
/// Most request/response exchanges one login may take before we give up.
const MAX_EXCHANGES: u32 = 64;
/// Longest iSCSI name (§4.2.7.1: "not more than 223 bytes").
const MAX_NAME_LEN: usize = 223;
/// Data segment limit during login (§13.12: the default 8192 is in force until the FFP).
const LOGIN_MAX_SEGMENT: usize = 8192;

#[derive(Clone, Debug)]
pub struct TargetConfig {
    pub name: String,
    pub alias: Option<String>,
    /// Initiator names allowed to log in (case-insensitive); `None` allows everyone.
    pub allow_initiators: Option<Vec<String>>,
    /// Credentials the initiator must prove (one-way CHAP); `None` = no authentication.
    pub chap: Option<ChapCredentials>,
    /// Credentials the target answers with when the initiator asks for mutual CHAP.
    pub mutual_chap: Option<ChapCredentials>,
    pub portal_group_tag: u16,
}

#[derive(Clone, Debug)]
pub struct PortalConfig {
    pub targets: Vec<TargetConfig>,
    /// Addresses advertised in TargetAddress, e.g. `127.0.0.1:3260` or `[::1]:3260`.
    pub addresses: Vec<String>,
    pub limits: Limits,
    /// Credentials required for discovery sessions (mutual CHAP is not offered on discovery).
    pub discovery_chap: Option<ChapCredentials>,
    /// Targets served elsewhere: a login naming one is redirected there (§11.13.5, status
    /// 0x0101 "target moved temporarily", with TargetAddress). Local targets take precedence.
    pub redirects: RedirectTable,
}

/// Target names served by another portal, and that portal's address (`host:port,tpgt` as in a
/// TargetAddress key, §13.9). Shared and updated at run time (e.g. when a cluster's leases
/// move); the login machine only reads it.
#[derive(Clone, Debug, Default)]
pub struct RedirectTable(Arc<std::sync::RwLock<Vec<(String, String)>>>);

impl RedirectTable {
    /// Replaces the whole table.
    pub fn set(&self, entries: Vec<(String, String)>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entries;
    }

    /// Where `target_name` (compared as iSCSI names are, case-insensitively) is served.
    pub fn lookup(&self, target_name: &str) -> Option<String> {
        let entries = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .iter()
            .find(|(name, _)| names_equal(name, target_name))
            .map(|(_, address)| address.clone())
    }

    /// A copy of the table.
    pub fn entries(&self) -> Vec<(String, String)> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    Discovery,
    Normal { target: usize },
}

#[derive(Clone, Debug)]
pub struct LoginOutcome {
    pub kind: SessionKind,
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    pub isid: [u8; 6],
    /// TSIH of the leading request (0 = new session).
    pub tsih: u16,
    pub cid: u16,
    pub negotiated: Negotiated,
    pub exp_cmd_sn: u32,
    /// Next StatSN to use after the final login response.
    pub stat_sn: u32,
}

#[derive(Clone, Debug)]
pub enum LoginStep {
    /// Send this response and wait for the next Login Request.
    Continue(LoginResponse),
    /// Send this response (a failure status, §11.13.5) then close the connection.
    Fail(LoginResponse),
    /// Send this final response (T=1, NSG=FullFeature) after setting `response.tsih`, then enter the
    /// full-feature phase.
    Complete(LoginResponse, LoginOutcome),
}

/// Progress of the security stage (§6.3.1, §12.1.3).
#[derive(Clone, Debug)]
enum Auth {
    /// No AuthMethod chosen yet.
    Start,
    /// AuthMethod=CHAP chosen; expecting CHAP_A (§12.1.3 step 1).
    ChapAwaitAlgorithm,
    /// Challenge sent; expecting CHAP_N and CHAP_R.
    ChapAwaitResponse {
        alg: ChapAlgorithm,
        id: u8,
        challenge: Vec<u8>,
    },
    /// The initiator is authenticated (or needs no authentication): the stage may be left.
    Done,
}

/// What every request of one login repeats: §11.12.5–§11.12.7, ISID, TSIH and CID must not
/// change during the login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ident {
    isid: [u8; 6],
    tsih: u16,
    cid: u16,
}

impl Ident {
    fn of(request: &LoginRequest) -> Self {
        Ident {
            isid: request.isid,
            tsih: request.tsih,
            cid: request.cid,
        }
    }
}

/// Who logs in to what, read from the leading request (§13.4–§13.6, §13.21).
#[derive(Clone, Debug)]
struct Peer {
    kind: SessionKind,
    initiator_name: String,
    initiator_alias: Option<String>,
}

/// Where one side of a login stands (§6.3), target and initiator alike. Each state holds only
/// what is valid in it: nothing before the first PDU and after the end, the negotiation `N` (its
/// stage and that stage's progress) in between.
#[derive(Debug)]
pub(crate) enum Progress<N> {
    /// Nothing exchanged yet.
    Idle,
    /// Login PDUs are being exchanged.
    Negotiating(N),
    /// The login is over: the full-feature phase was handed over with the negotiated parameters
    /// ([`LoginOutcome`], [`crate::initiator_login::InitiatorLoginOutcome`]), or the login
    /// failed. Every further login PDU is refused.
    Ended,
}

/// The target's negotiation: CHAP progress only in the security stage, our operational
/// declarations only in the operational stage.
#[derive(Debug)]
struct Negotiation {
    ident: Ident,
    /// The text of a request split with the C bit (§11.12.2), collected until complete.
    text: BytesMut,
    phase: Phase,
}

/// The stage the target negotiates in, and that stage's progress.
#[derive(Debug)]
enum Phase {
    /// The leading request's text came with the C bit and is not complete: nobody is identified
    /// yet. `stage` is the CSG the initiator started in, Security or Operational.
    Leading { stage: Stage },
    /// The initiator is identified and negotiates in a stage (boxed: the leading state is small).
    Identified(Box<Identified>),
}

/// The stages a login negotiates in once the initiator is known (§11.12.3: never the
/// full-feature phase, which only a final response enters).
#[derive(Debug)]
enum Identified {
    Security(SecurityStage),
    Operational(OperationalStage),
}

/// Security negotiation: AuthMethod and the CHAP exchange (§6.3.1, §12.1.3).
#[derive(Debug)]
struct SecurityStage {
    peer: Peer,
    neg: Negotiator,
    auth: Auth,
}

/// Operational negotiation (§6.3.2).
#[derive(Debug)]
struct OperationalStage {
    peer: Peer,
    neg: Negotiator,
    /// Our declarations and offers went out with the stage's first response.
    declared: bool,
}

impl Phase {
    /// The current stage (CSG) of the login.
    fn stage(&self) -> Stage {
        match self {
            Phase::Leading { stage } => *stage,
            Phase::Identified(identified) => match **identified {
                Identified::Security(_) => Stage::Security,
                Identified::Operational(_) => Stage::Operational,
            },
        }
    }

    fn peer(&self) -> Option<&Peer> {
        match self {
            Phase::Leading { .. } => None,
            Phase::Identified(identified) => match &**identified {
                Identified::Security(s) => Some(&s.peer),
                Identified::Operational(o) => Some(&o.peer),
            },
        }
    }
}

/// The security keys of one request, handled by [`TargetLogin::authenticate`].
#[derive(Default)]
struct SecurityKeys<'a> {
    auth_method: Option<&'a str>,
    chap: BTreeMap<&'a str, &'a str>,
}

/// The target-side login state machine for one connection.
pub struct TargetLogin {
    portal: Arc<PortalConfig>,
    rng: SeedRng,
    stat_sn: u32,
    exchanges: u32,
    state: Progress<Negotiation>,
    /// Set with a 0x0101 refusal: the address the redirect response names.
    redirect: Option<String>,
}

impl std::fmt::Debug for TargetLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (stage, peer) = match &self.state {
            Progress::Negotiating(n) => (Some(n.phase.stage()), n.phase.peer()),
            Progress::Idle | Progress::Ended => (None, None),
        };
        f.debug_struct("TargetLogin")
            .field("stage", &stage)
            .field("kind", &peer.map(|p| p.kind))
            .field("initiator_name", &peer.map(|p| &p.initiator_name))
            .field("finished", &matches!(self.state, Progress::Ended))
            .finish_non_exhaustive()
    }
}

type Status = u16;

impl TargetLogin {
    /// `seed`: 32 fresh random bytes from the caller (CHAP identifiers and challenges are derived
    /// from it). `initial_stat_sn`: StatSN of the first Login Response.
    pub fn new(portal: Arc<PortalConfig>, seed: [u8; 32], initial_stat_sn: u32) -> Self {
        TargetLogin {
            portal,
            rng: SeedRng::new(seed),
            stat_sn: initial_stat_sn,
            exchanges: 0,
            state: Progress::Idle,
            redirect: None,
        }
    }

    /// The initiator's name once the leading request has been accepted, while the login lasts.
    pub fn initiator_name(&self) -> Option<&str> {
        match &self.state {
            Progress::Negotiating(n) => n.phase.peer().map(|p| p.initiator_name.as_str()),
            Progress::Idle | Progress::Ended => None,
        }
    }

    /// Handles one Login Request.
    pub fn on_request(&mut self, request: LoginRequest) -> LoginStep {
        // A failure ends the login (§11.13.5: the target closes the connection after it).
        let state = std::mem::replace(&mut self.state, Progress::Ended);
        match self.process(state, &request) {
            Ok((step, next)) => {
                self.state = next;
                step
            }
            Err(code) => {
                let mut response = self.reject(&request, code);
                if code == status::TARGET_MOVED_TEMPORARILY
                    && let Some(address) = self.redirect.take()
                {
                    // §11.13.5: the redirect response carries the new TargetAddress.
                    response.data = encode_pairs(&[("TargetAddress", address)]);
                }
                LoginStep::Fail(response)
            }
        }
    }

    /// A failure Login Response to `request` with `code` (§11.13.5), for the caller's own refusals
    /// (e.g. 0x020a session does not exist, 0x0206 too many connections).
    pub fn reject(&mut self, request: &LoginRequest, code: u16) -> LoginResponse {
        let stat_sn = self.next_stat_sn();
        LoginResponse {
            transit: false,
            continue_: false,
            csg: request.csg & 3,
            nsg: 0,
            version_max: 0,
            version_active: 0,
            isid: request.isid,
            tsih: request.tsih,
            itt: request.itt,
            stat_sn,
            exp_cmd_sn: request.cmd_sn,
            max_cmd_sn: request.cmd_sn.wrapping_add(LOGIN_CMD_WINDOW - 1),
            status_class: (code >> 8) as u8,
            status_detail: code as u8,
            data: Bytes::new(),
        }
    }

    fn next_stat_sn(&mut self) -> u32 {
        let sn = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        sn
    }

    /// The credentials the initiator must prove, and those we answer mutual CHAP with.
    fn credentials(
        &self,
        kind: SessionKind,
    ) -> (Option<&ChapCredentials>, Option<&ChapCredentials>) {
        match kind {
            SessionKind::Normal { target } => match self.portal.targets.get(target) {
                Some(t) => (t.chap.as_ref(), t.mutual_chap.as_ref()),
                None => (None, None),
            },
            SessionKind::Discovery => (self.portal.discovery_chap.as_ref(), None),
        }
    }

    fn auth_required(&self, kind: SessionKind) -> bool {
        self.credentials(kind).0.is_some()
    }

    /// One request in `state`: the response and the state after it.
    fn process(
        &mut self,
        state: Progress<Negotiation>,
        req: &LoginRequest,
    ) -> Result<(LoginStep, Progress<Negotiation>), Status> {
        let negotiation = match state {
            Progress::Ended => return Err(status::INITIATOR_ERROR),
            Progress::Idle => None,
            Progress::Negotiating(negotiation) => Some(negotiation),
        };
        self.exchanges += 1;
        if self.exchanges > MAX_EXCHANGES {
            return Err(status::INITIATOR_ERROR);
        }
        // §11.12.4: only version 0x00 exists.
        if req.version_min > 0 {
            return Err(status::UNSUPPORTED_VERSION);
        }
        // §11.12.2: "If the C bit is set to 1, the T bit MUST be set to 0".
        if req.transit && req.continue_ {
            return Err(status::INITIATOR_ERROR);
        }
        // §11.12.3: stage 2 is reserved and the FullFeature stage can't be current; a transition
        // only goes forward.
        let Some(csg @ (Stage::Security | Stage::Operational)) = Stage::from_code(req.csg) else {
            return Err(status::INITIATOR_ERROR);
        };
        let nsg = match (req.transit, Stage::from_code(req.nsg)) {
            (false, _) => None,
            (true, Some(nsg)) if nsg > csg => Some(nsg),
            (true, _) => return Err(status::INITIATOR_ERROR),
        };
        let ident = Ident::of(req);
        let mut negotiation = negotiation.unwrap_or_else(|| Negotiation {
            ident,
            text: BytesMut::new(),
            phase: Phase::Leading { stage: csg },
        });
        // §11.12.5–§11.12.7: ISID, TSIH and CID must not change during the login; the stage only
        // advances through a transition the target granted.
        if negotiation.ident != ident || negotiation.phase.stage() != csg {
            return Err(status::INITIATOR_ERROR);
        }

        // §11.12.2 C bit: accumulate until the text is complete, acknowledging each piece.
        if negotiation.text.len() + req.data.len() > MAX_TEXT_LEN {
            return Err(status::INITIATOR_ERROR);
        }
        negotiation.text.extend_from_slice(&req.data);
        if req.continue_ {
            let resp = self.response(req, csg, None, Vec::new());
            return Ok((
                LoginStep::Continue(resp),
                Progress::Negotiating(negotiation),
            ));
        }
        let text = std::mem::take(&mut negotiation.text);
        let pairs = parse_pairs(&text).map_err(|_| status::INITIATOR_ERROR)?;
        if crate::text::duplicate_key(&pairs).is_some() {
            return Err(status::INITIATOR_ERROR);
        }

        let (identified, first) = match negotiation.phase {
            Phase::Leading { stage } => {
                if let Some(address) = self.redirect_for(&pairs) {
                    self.redirect = Some(address);
                    return Err(status::TARGET_MOVED_TEMPORARILY);
                }
                (self.identify(&pairs, stage)?, true)
            }
            Phase::Identified(identified) => (*identified, false),
        };
        let (step, next) = match identified {
            Identified::Security(stage) => self.security_step(req, nsg, &pairs, first, stage)?,
            Identified::Operational(stage) => {
                self.operational_step(req, nsg, &pairs, first, stage)?
            }
        };
        let state = match next {
            Some(identified) => {
                negotiation.phase = Phase::Identified(Box::new(identified));
                Progress::Negotiating(negotiation)
            }
            None => Progress::Ended,
        };
        Ok((step, state))
    }

    /// A complete request in the security stage; `first`: the request that identified the
    /// initiator.
    fn security_step(
        &mut self,
        req: &LoginRequest,
        nsg: Option<Stage>,
        pairs: &[(String, String)],
        first: bool,
        mut stage: SecurityStage,
    ) -> Result<(LoginStep, Option<Identified>), Status> {
        let mut out = Vec::new();
        let keys = self.read_keys(
            pairs,
            Stage::Security,
            &mut stage.peer,
            &mut stage.neg,
            &mut out,
        )?;
        self.authenticate(stage.peer.kind, &mut stage.auth, &keys, &mut out)?;
        if first {
            self.declare_session(stage.peer.kind, &mut out);
        }
        if nsg.is_some() && matches!(stage.auth, Auth::Start) {
            // The initiator never sent AuthMethod: acceptable only without authentication.
            if self.auth_required(stage.peer.kind) {
                return Err(status::AUTHENTICATION_FAILURE);
            }
            stage.auth = Auth::Done;
        }
        // Operational keys may not appear in security-stage PDUs, and we always declare
        // MaxRecvDataSegmentLength: the login goes through the operational stage even when the
        // initiator asked for the full-feature phase (a target may answer with a lower NSG than
        // asked, §6.3). Our declarations go out with the first response of the operational stage
        // — never in a security-stage response, even the one that leaves it: open-iscsi refuses
        // operational keys there ("can't accept MaxRecvDataSegmentLength in security stage"),
        // found by the kernel-initiator VM test.
        let transit = nsg.is_some() && matches!(stage.auth, Auth::Done);
        let resp = self.response(
            req,
            Stage::Security,
            transit.then_some(Stage::Operational),
            out,
        );
        check_size(&resp)?;
        let next = if transit {
            Identified::Operational(OperationalStage {
                peer: stage.peer,
                neg: stage.neg,
                declared: false,
            })
        } else {
            Identified::Security(stage)
        };
        Ok((LoginStep::Continue(resp), Some(next)))
    }

    /// A complete request in the operational stage; `first` as in [`Self::security_step`].
    /// Leaving this stage ends the login: the full-feature phase is the only stage after it.
    fn operational_step(
        &mut self,
        req: &LoginRequest,
        nsg: Option<Stage>,
        pairs: &[(String, String)],
        first: bool,
        mut stage: OperationalStage,
    ) -> Result<(LoginStep, Option<Identified>), Status> {
        let mut out = Vec::new();
        self.read_keys(
            pairs,
            Stage::Operational,
            &mut stage.peer,
            &mut stage.neg,
            &mut out,
        )?;
        if first {
            self.declare_session(stage.peer.kind, &mut out);
        }
        let mut transit = nsg.is_some();
        if !stage.declared {
            stage.declared = true;
            out.extend(stage.neg.declarations());
            let offers = stage.neg.offers();
            if !offers.is_empty() {
                // Our offers need answers before the full-feature phase (§6.2).
                transit = false;
            }
            out.extend(offers);
        } else if transit && stage.neg.awaiting_answers() {
            // The initiator asked to proceed without answering our offers.
            return Err(status::INITIATOR_ERROR);
        }
        let resp = self.response(
            req,
            Stage::Operational,
            transit.then_some(Stage::FullFeature),
            out,
        );
        check_size(&resp)?;
        if !transit {
            return Ok((
                LoginStep::Continue(resp),
                Some(Identified::Operational(stage)),
            ));
        }
        let outcome = LoginOutcome {
            kind: stage.peer.kind,
            initiator_name: stage.peer.initiator_name,
            initiator_alias: stage.peer.initiator_alias,
            isid: req.isid,
            tsih: req.tsih,
            cid: req.cid,
            negotiated: stage.neg.result(),
            exp_cmd_sn: req.cmd_sn,
            stat_sn: self.stat_sn,
        };
        Ok((LoginStep::Complete(resp, outcome), None))
    }

    /// Reads the keys of one complete request: login keys are checked against the peer, security
    /// keys are returned for [`Self::authenticate`] (refused outside the security stage),
    /// operational keys go to the negotiator and their answers to `out`.
    fn read_keys<'a>(
        &self,
        pairs: &'a [(String, String)],
        stage: Stage,
        peer: &mut Peer,
        neg: &mut Negotiator,
        out: &mut Vec<(String, String)>,
    ) -> Result<SecurityKeys<'a>, Status> {
        let mut security = SecurityKeys::default();
        for (key, value) in pairs {
            match key.as_str() {
                "InitiatorName" => {
                    if !names_equal(value, &peer.initiator_name) {
                        return Err(status::INITIATOR_ERROR);
                    }
                }
                "SessionType" => {
                    let discovery = value == "Discovery";
                    if discovery != (peer.kind == SessionKind::Discovery) {
                        return Err(status::INITIATOR_ERROR);
                    }
                }
                "TargetName" => {
                    if let SessionKind::Normal { target } = peer.kind
                        && self
                            .portal
                            .targets
                            .get(target)
                            .is_none_or(|t| !names_equal(value, &t.name))
                    {
                        return Err(status::INITIATOR_ERROR);
                    }
                }
                "InitiatorAlias" => peer.initiator_alias = Some(value.clone()),
                "AuthMethod" | "CHAP_A" | "CHAP_I" | "CHAP_C" | "CHAP_N" | "CHAP_R"
                    if stage != Stage::Security =>
                {
                    return Err(status::INITIATOR_ERROR);
                }
                "AuthMethod" => security.auth_method = Some(value),
                "CHAP_A" | "CHAP_I" | "CHAP_C" | "CHAP_N" | "CHAP_R" => {
                    security.chap.insert(key, value);
                }
                // Keys only a target sends (§13.7, §13.8, §13.9), and SendTargets, which belongs to
                // the full-feature phase (Appendix C).
                "TargetAlias" | "TargetAddress" | "TargetPortalGroupTag" | "SendTargets" => {
                    return Err(status::INITIATOR_ERROR);
                }
                _ => match neg.accept_answer(key, value) {
                    Ok(true) => {}
                    Err(_) => return Err(status::INITIATOR_ERROR),
                    Ok(false) => match neg.respond(key, value) {
                        Ok(Some(Answer::Value(v))) => out.push((key.clone(), v)),
                        Ok(Some(Answer::None)) => {}
                        // §6.2: "NotUnderstood" for keys we don't know (including X- keys).
                        Ok(None) => out.push((key.clone(), "NotUnderstood".into())),
                        Err(_) => return Err(status::INITIATOR_ERROR),
                    },
                },
            }
        }
        Ok(security)
    }

    /// Session-wide declarations in the first successful response (§13.9: TargetPortalGroupTag
    /// "MUST be returned in the first Login Response" of a normal session).
    fn declare_session(&self, kind: SessionKind, out: &mut Vec<(String, String)>) {
        if let SessionKind::Normal { target } = kind {
            let t = &self.portal.targets[target];
            out.push((
                "TargetPortalGroupTag".into(),
                t.portal_group_tag.to_string(),
            ));
            if let Some(alias) = &t.alias {
                out.push(("TargetAlias".into(), alias.clone()));
            }
        }
    }

    /// Where a normal session's target lives when it is not one of ours but the redirect table
    /// names it.
    fn redirect_for(&self, pairs: &[(String, String)]) -> Option<String> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        if !matches!(get("SessionType"), None | Some("Normal")) {
            return None;
        }
        let target_name = get("TargetName")?;
        if self
            .portal
            .targets
            .iter()
            .any(|t| names_equal(&t.name, target_name))
        {
            return None;
        }
        self.portal.redirects.lookup(target_name)
    }

    /// Reads the leading request's declarations: who is logging in to what (§13.4–§13.6, §13.21),
    /// and enters the stage the initiator started in.
    fn identify(&self, pairs: &[(String, String)], stage: Stage) -> Result<Identified, Status> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let name = get("InitiatorName")
            .filter(|n| !n.is_empty())
            .ok_or(status::MISSING_PARAMETER)?;
        if name.len() > MAX_NAME_LEN {
            return Err(status::INITIATOR_ERROR);
        }
        let kind = match get("SessionType") {
            None | Some("Normal") => {
                let target_name = get("TargetName")
                    .filter(|n| !n.is_empty())
                    .ok_or(status::MISSING_PARAMETER)?;
                let index = self
                    .portal
                    .targets
                    .iter()
                    .position(|t| names_equal(&t.name, target_name))
                    .ok_or(status::NOT_FOUND)?;
                if !initiator_allowed(&self.portal.targets[index], Some(name)) {
                    return Err(status::AUTHORIZATION_FAILURE);
                }
                SessionKind::Normal { target: index }
            }
            Some("Discovery") => SessionKind::Discovery,
            Some(_) => return Err(status::SESSION_TYPE_NOT_SUPPORTED),
        };
        let peer = Peer {
            kind,
            initiator_name: name.to_string(),
            initiator_alias: None,
        };
        let neg = Negotiator::new(
            Role::Target,
            self.portal.limits.clone(),
            kind == SessionKind::Discovery,
        );
        if stage == Stage::Security {
            return Ok(Identified::Security(SecurityStage {
                peer,
                neg,
                auth: Auth::Start,
            }));
        }
        // The initiator skipped the security stage (§6.3: allowed only if the target agrees).
        if self.auth_required(kind) {
            return Err(status::AUTHENTICATION_FAILURE);
        }
        Ok(Identified::Operational(OperationalStage {
            peer,
            neg,
            declared: false,
        }))
    }

    /// The security stage: AuthMethod selection and the CHAP exchange (§12.1.3).
    fn authenticate(
        &mut self,
        kind: SessionKind,
        auth: &mut Auth,
        keys: &SecurityKeys<'_>,
        out: &mut Vec<(String, String)>,
    ) -> Result<(), Status> {
        let chap = &keys.chap;
        let (creds, mutual) = self.credentials(kind);
        let creds = creds.cloned();
        let mutual = mutual.cloned();
        if let Some(methods) = keys.auth_method {
            if !matches!(auth, Auth::Start) {
                // AuthMethod may not be renegotiated.
                return Err(status::INITIATOR_ERROR);
            }
            let offered = |m: &str| methods.split(',').any(|x| x == m);
            if creds.is_some() {
                if !offered("CHAP") {
                    return Err(status::AUTHENTICATION_FAILURE);
                }
                out.push(("AuthMethod".into(), "CHAP".into()));
                *auth = Auth::ChapAwaitAlgorithm;
            } else if offered("None") {
                out.push(("AuthMethod".into(), "None".into()));
                *auth = Auth::Done;
            } else {
                // We have nothing to authenticate with.
                return Err(status::AUTHENTICATION_FAILURE);
            }
        }
        match auth.clone() {
            Auth::Start | Auth::Done => {
                if !chap.is_empty() {
                    return Err(status::INITIATOR_ERROR);
                }
            }
            Auth::ChapAwaitAlgorithm => {
                let Some(list) = chap.get("CHAP_A") else {
                    return if chap.is_empty() {
                        Ok(())
                    } else {
                        Err(status::INITIATOR_ERROR)
                    };
                };
                if chap.len() > 1 {
                    return Err(status::INITIATOR_ERROR);
                }
                // Pick the first algorithm we support in the initiator's order (§6.2.1 list rule).
                let alg = list
                    .split(',')
                    .find_map(ChapAlgorithm::from_code)
                    .ok_or(status::AUTHENTICATION_FAILURE)?;
                let id = self.rng.byte();
                let challenge = self.rng.bytes(alg.challenge_len());
                out.push(("CHAP_A".into(), alg.code().to_string()));
                out.push(("CHAP_I".into(), id.to_string()));
                out.push(("CHAP_C".into(), encode_binary(&challenge)));
                *auth = Auth::ChapAwaitResponse { alg, id, challenge };
            }
            Auth::ChapAwaitResponse { alg, id, challenge } => {
                if chap.contains_key("CHAP_A") {
                    return Err(status::INITIATOR_ERROR);
                }
                let (Some(name), Some(response)) = (chap.get("CHAP_N"), chap.get("CHAP_R")) else {
                    return if chap.is_empty() {
                        Ok(())
                    } else {
                        Err(status::AUTHENTICATION_FAILURE)
                    };
                };
                let creds = creds.ok_or(status::TARGET_ERROR)?;
                let expected = chap_response(alg, id, &creds.secret, &challenge);
                let got = decode_binary(response, MAX_CHALLENGE)
                    .map_err(|_| status::AUTHENTICATION_FAILURE)?;
                let name_ok = constant_time_eq(name.as_bytes(), creds.user.as_bytes());
                let response_ok = constant_time_eq(&got, &expected);
                if !(name_ok & response_ok) {
                    return Err(status::AUTHENTICATION_FAILURE);
                }
                match (chap.get("CHAP_I"), chap.get("CHAP_C")) {
                    (None, None) => {}
                    (Some(their_id), Some(their_challenge)) => {
                        // Mutual CHAP: the initiator authenticates us (§12.1.3 step 5).
                        let mutual = mutual.ok_or(status::AUTHENTICATION_FAILURE)?;
                        let their_id =
                            parse_identifier(their_id).map_err(|_| status::INITIATOR_ERROR)?;
                        let their_challenge = decode_binary(their_challenge, MAX_CHALLENGE)
                            .map_err(|_| status::INITIATOR_ERROR)?;
                        // §12.1.3: "Originators MUST NOT reuse the CHAP challenge sent by the
                        // Responder for the other direction ... Responders MUST check for this
                        // condition and close the iSCSI TCP connection if it occurs."
                        if their_challenge == challenge {
                            return Err(status::AUTHENTICATION_FAILURE);
                        }
                        let r = chap_response(alg, their_id, &mutual.secret, &their_challenge);
                        out.push(("CHAP_N".into(), mutual.user.clone()));
                        out.push(("CHAP_R".into(), encode_binary(&r)));
                    }
                    _ => return Err(status::INITIATOR_ERROR),
                }
                *auth = Auth::Done;
            }
        }
        Ok(())
    }

    /// A successful Login Response in stage `csg`, moving to `nsg` when given (the T bit).
    fn response(
        &mut self,
        req: &LoginRequest,
        csg: Stage,
        nsg: Option<Stage>,
        out: Vec<(String, String)>,
    ) -> LoginResponse {
        let stat_sn = self.next_stat_sn();
        LoginResponse {
            transit: nsg.is_some(),
            continue_: false,
            csg: csg.bits(),
            nsg: nsg.map_or(0, Stage::bits),
            version_max: 0,
            version_active: 0,
            isid: req.isid,
            tsih: req.tsih,
            itt: req.itt,
            stat_sn,
            exp_cmd_sn: req.cmd_sn,
            max_cmd_sn: req.cmd_sn.wrapping_add(LOGIN_CMD_WINDOW - 1),
            status_class: 0,
            status_detail: 0,
            data: encode_pairs(&out),
        }
    }
}

/// A login response's data must fit the segment limit in force during login (§13.12).
fn check_size(response: &LoginResponse) -> Result<(), Status> {
    if response.data.len() > LOGIN_MAX_SEGMENT {
        return Err(status::TARGET_ERROR);
    }
    Ok(())
}
