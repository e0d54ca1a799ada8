//! Initiator side of the login phase (RFC 7143 §6, §11.12, §11.13, §12.1.3, §13).
//!
//! The flow: security stage with `AuthMethod=CHAP` (when credentials are configured) or `None`,
//! the CHAP exchange (optionally mutual), then the operational stage where we offer our keys and
//! ask to enter the full-feature phase. As on the target side ([`crate::login`]), each state
//! holds only what is valid in it: CHAP progress in the security stage, whether our offers went
//! out in the operational stage, and the negotiated parameters handed over at the end as an
//! [`InitiatorLoginOutcome`]. Randomness (our mutual-CHAP identifier and challenge) comes
//! from the 32-byte seed (see [`crate::chap::SeedRng`]).

use bytes::{Bytes, BytesMut};

use crate::chap::{
    ChapAlgorithm, ChapCredentials, MAX_CHALLENGE, SeedRng, chap_response, constant_time_eq,
    decode_binary, encode_binary, parse_identifier,
};
use crate::login::{Progress, status};
use crate::params::{Answer, Limits, Negotiated, Negotiator, Role};
use crate::pdu::{LoginRequest, LoginResponse, Stage};
use crate::text::{MAX_TEXT_LEN, encode_pairs, parse_pairs};

/// Most responses one login may take before we give up.
const MAX_EXCHANGES: u32 = 64;

#[derive(Clone, Debug)]
pub struct InitiatorLoginConfig {
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    /// `None` = discovery session.
    pub target_name: Option<String>,
    pub isid: [u8; 6],
    /// 0 for a new session.
    pub tsih: u16,
    pub cid: u16,
    /// Our CHAP name and secret (one-way CHAP).
    pub chap: Option<ChapCredentials>,
    /// The target's expected CHAP name and secret: setting this asks for mutual CHAP.
    pub mutual_chap: Option<ChapCredentials>,
    pub limits: Limits,
    /// CmdSN of the session's first command (login requests carry it without advancing it).
    pub cmd_sn: u32,
}

impl InitiatorLoginConfig {
    /// A new session (TSIH 0, CID 0) of `initiator_name` to `target` (`None`: discovery)
    /// without CHAP and with the initiator's default limits. The ISID is of the random type
    /// (RFC 7143 §11.12.5, type 10b) with `qualifier` in its last two bytes: sessions of one
    /// initiator to one target need distinct ISIDs, or the second reinstates the first
    /// (RFC 7143 §6.3.5).
    pub fn new_session(initiator_name: &str, target: Option<&str>, qualifier: u16) -> Self {
        let [hi, lo] = qualifier.to_be_bytes();
        Self {
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
}

#[derive(Clone, Debug)]
pub enum InitiatorStep {
    Send(LoginRequest),
    Done(InitiatorLoginOutcome),
}

#[derive(Clone, Debug)]
pub struct InitiatorLoginOutcome {
    pub tsih: u16,
    pub negotiated: Negotiated,
    pub target_alias: Option<String>,
    pub exp_stat_sn: u32,
    pub cmd_sn: u32,
    pub max_cmd_sn: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoginError {
    /// The target refused the login (§11.13.5).
    #[error("login refused: {message} (status class {class:#04x}, detail {detail:#04x})")]
    Status {
        class: u8,
        detail: u8,
        message: &'static str,
    },
    #[error("login protocol error: {0}")]
    Protocol(String),
    #[error("authentication: {0}")]
    Authentication(String),
    #[error("negotiation failed: {0}")]
    Negotiation(String),
    /// The target did not prove knowledge of the mutual CHAP secret.
    #[error("the target failed mutual CHAP authentication")]
    MutualAuthFailed,
    /// The target is served at another address (§11.13.5, status class 1): log in there.
    #[error("target moved {} to {address}", if *permanent { "permanently" } else { "temporarily" })]
    Redirected {
        /// `host:port` or `host:port,tpgt` (§13.9), as the target sent it.
        address: String,
        permanent: bool,
    },
}

impl LoginError {
    /// The status code (`class << 8 | detail`) when the target refused the login.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            LoginError::Status { class, detail, .. } => Some((*class as u16) << 8 | *detail as u16),
            LoginError::Redirected { permanent, .. } => Some(if *permanent {
                status::TARGET_MOVED_PERMANENTLY
            } else {
                status::TARGET_MOVED_TEMPORARILY
            }),
            _ => None,
        }
    }
}

/// Progress of the security stage (§6.3.1, §12.1.3).
#[derive(Clone, Debug)]
enum Auth {
    /// AuthMethod offered, awaiting the target's choice.
    MethodOffered,
    /// CHAP_A sent, awaiting CHAP_A/CHAP_I/CHAP_C.
    AlgorithmsOffered,
    /// CHAP_N/CHAP_R sent; for mutual CHAP also our identifier and challenge.
    ResponseSent {
        mutual: Option<(ChapAlgorithm, u8, Vec<u8>)>,
    },
    /// Authenticated (or no authentication): we may leave the stage.
    Done,
}

/// The initiator's negotiation, from the first request to the last response.
#[derive(Debug)]
struct Negotiation {
    phase: Phase,
    neg: Negotiator,
    /// The text of a response split with the C bit (§11.13.2), collected until complete.
    text: BytesMut,
    exp_stat_sn: u32,
    /// The stage our last request asked to move to (T bit), if it asked; re-sent when
    /// acknowledging a partial response.
    asked: Option<Stage>,
    target_alias: Option<String>,
    exchanges: u32,
}

#[derive(Debug)]
enum Phase {
    /// Security negotiation: AuthMethod and the CHAP exchange.
    Security { auth: Auth },
    /// Operational negotiation. `offered`: our declarations and offers went out.
    Operational { offered: bool },
}

impl Phase {
    fn stage(&self) -> Stage {
        match self {
            Phase::Security { .. } => Stage::Security,
            Phase::Operational { .. } => Stage::Operational,
        }
    }
}

/// The initiator-side login state machine for one connection.
pub struct InitiatorLogin {
    config: InitiatorLoginConfig,
    rng: SeedRng,
    algorithms: Vec<ChapAlgorithm>,
    itt: u32,
    state: Progress<Negotiation>,
}

impl std::fmt::Debug for InitiatorLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = match &self.state {
            Progress::Negotiating(n) => Some(&n.phase),
            Progress::Idle | Progress::Ended => None,
        };
        f.debug_struct("InitiatorLogin")
            .field("config", &self.config)
            .field("phase", &phase)
            .finish_non_exhaustive()
    }
}

impl InitiatorLogin {
    pub fn new(config: InitiatorLoginConfig, seed: [u8; 32]) -> Self {
        InitiatorLogin {
            config,
            rng: SeedRng::new(seed),
            algorithms: vec![ChapAlgorithm::Md5],
            itt: 0,
            state: Progress::Idle,
        }
    }

    /// CHAP algorithms to offer, in order of preference (default: MD5 only, which every target
    /// supports; note Linux tgt reads CHAP_A=7 as SHA-1, so offer SHA-256 only to targets that use
    /// 7 for SHA-256, like open-iscsi-compatible ones and reel).
    pub fn with_chap_algorithms(mut self, algorithms: Vec<ChapAlgorithm>) -> Self {
        if !algorithms.is_empty() {
            self.algorithms = algorithms;
        }
        self
    }

    /// The Initiator Task Tag used by all login requests (default 0).
    pub fn with_itt(mut self, itt: u32) -> Self {
        self.itt = itt;
        self
    }

    /// The first Login Request (§6.3: security stage, declaring who we are and what we want).
    pub fn start(&mut self) -> LoginRequest {
        let c = &self.config;
        let mut out: Vec<(String, String)> =
            vec![("InitiatorName".into(), c.initiator_name.clone())];
        if let Some(alias) = &c.initiator_alias {
            out.push(("InitiatorAlias".into(), alias.clone()));
        }
        match &c.target_name {
            Some(t) => {
                out.push(("SessionType".into(), "Normal".into()));
                out.push(("TargetName".into(), t.clone()));
            }
            None => out.push(("SessionType".into(), "Discovery".into())),
        }
        let chap = c.chap.is_some() || c.mutual_chap.is_some();
        out.push((
            "AuthMethod".into(),
            if chap { "CHAP" } else { "None" }.into(),
        ));
        let discovery = c.target_name.is_none();
        let mut negotiation = Negotiation {
            phase: Phase::Security {
                auth: Auth::MethodOffered,
            },
            neg: Negotiator::new(Role::Initiator, c.limits.clone(), discovery),
            text: BytesMut::new(),
            exp_stat_sn: 0,
            asked: None,
            target_alias: None,
            exchanges: 0,
        };
        // Without CHAP we ask to move on right away; with CHAP the target could not grant it.
        let request = self.request(&mut negotiation, (!chap).then_some(Stage::Operational), out);
        self.state = Progress::Negotiating(negotiation);
        request
    }

    /// A Login Request in the current stage, asking to move to `nsg` when given (the T bit).
    fn request(
        &self,
        n: &mut Negotiation,
        nsg: Option<Stage>,
        out: Vec<(String, String)>,
    ) -> LoginRequest {
        self.request_data(n, nsg, encode_pairs(&out))
    }

    fn request_data(&self, n: &mut Negotiation, nsg: Option<Stage>, data: Bytes) -> LoginRequest {
        n.asked = nsg;
        LoginRequest {
            transit: nsg.is_some(),
            continue_: false,
            csg: n.phase.stage().bits(),
            nsg: nsg.map_or(0, Stage::bits),
            version_max: 0,
            version_min: 0,
            isid: self.config.isid,
            tsih: self.config.tsih,
            itt: self.itt,
            cid: self.config.cid,
            cmd_sn: self.config.cmd_sn,
            exp_stat_sn: n.exp_stat_sn,
            data,
        }
    }

    /// Handles one Login Response.
    pub fn on_response(&mut self, response: LoginResponse) -> Result<InitiatorStep, LoginError> {
        let mut negotiation = match std::mem::replace(&mut self.state, Progress::Ended) {
            Progress::Negotiating(negotiation) => negotiation,
            other => {
                self.state = other;
                return Err(LoginError::Protocol(
                    "login response when none was expected".into(),
                ));
            }
        };
        // Anything but a further request ends the login.
        let step = self.process(&mut negotiation, response)?;
        if matches!(step, InitiatorStep::Send(_)) {
            self.state = Progress::Negotiating(negotiation);
        }
        Ok(step)
    }

    fn process(
        &mut self,
        n: &mut Negotiation,
        resp: LoginResponse,
    ) -> Result<InitiatorStep, LoginError> {
        let proto = |m: &str| Err(LoginError::Protocol(m.to_string()));
        if resp.status_class == 1 {
            // §11.13.5: a redirection names the new address in TargetAddress.
            let address = parse_pairs(&resp.data).ok().and_then(|pairs| {
                pairs
                    .into_iter()
                    .find(|(k, _)| k == "TargetAddress")
                    .map(|(_, v)| v)
            });
            if let Some(address) = address.filter(|a| !a.is_empty()) {
                return Err(LoginError::Redirected {
                    address,
                    permanent: resp.status_detail == 2,
                });
            }
        }
        if resp.status_class != 0 {
            let code = (resp.status_class as u16) << 8 | resp.status_detail as u16;
            return Err(LoginError::Status {
                class: resp.status_class,
                detail: resp.status_detail,
                message: status::name(code),
            });
        }
        n.exchanges += 1;
        if n.exchanges > MAX_EXCHANGES {
            return proto("login takes too many exchanges");
        }
        if resp.itt != self.itt || resp.isid != self.config.isid {
            return proto("login response for another task or session");
        }
        if resp.version_active != 0 {
            return proto("unsupported version");
        }
        if Stage::from_code(resp.csg) != Some(n.phase.stage()) {
            return proto("login response in the wrong stage");
        }
        if resp.transit && resp.continue_ {
            return proto("login response with both T and C set");
        }
        n.exp_stat_sn = resp.stat_sn.wrapping_add(1);
        if n.text.len() + resp.data.len() > MAX_TEXT_LEN {
            return proto("login response text too long");
        }
        n.text.extend_from_slice(&resp.data);
        if resp.continue_ {
            // §11.13.7 C bit: acknowledge with an empty request and wait for the rest.
            let asked = n.asked;
            return Ok(InitiatorStep::Send(self.request_data(
                n,
                asked,
                Bytes::new(),
            )));
        }
        let text = std::mem::take(&mut n.text);
        let pairs = parse_pairs(&text).map_err(|e| LoginError::Protocol(e.to_string()))?;

        let mut out: Vec<(String, String)> = Vec::new();
        let mut chap: Vec<(&str, &str)> = Vec::new();
        let mut method: Option<&str> = None;
        for (key, value) in &pairs {
            match key.as_str() {
                "AuthMethod" => method = Some(value),
                "CHAP_A" | "CHAP_I" | "CHAP_C" | "CHAP_N" | "CHAP_R" => chap.push((key, value)),
                "TargetAlias" => n.target_alias = Some(value.clone()),
                "TargetPortalGroupTag" | "TargetAddress" => {}
                _ => match n.neg.accept_answer(key, value) {
                    Ok(true) => {}
                    Err(e) => return Err(LoginError::Negotiation(e.to_string())),
                    Ok(false) => {
                        if matches!(value.as_str(), "NotUnderstood" | "Irrelevant" | "Reject") {
                            continue;
                        }
                        match n.neg.respond(key, value) {
                            Ok(Some(Answer::Value(v))) => out.push((key.clone(), v)),
                            Ok(Some(Answer::None)) => {}
                            Ok(None) => out.push((key.clone(), "NotUnderstood".into())),
                            Err(e) => return Err(LoginError::Negotiation(e.to_string())),
                        }
                    }
                },
            }
        }
        match &mut n.phase {
            Phase::Security { auth } => self.authenticate(auth, method, &chap, &mut out)?,
            Phase::Operational { .. } => {
                if method.is_some() || !chap.is_empty() {
                    return proto("security keys in the operational stage");
                }
            }
        }

        if resp.transit {
            if let Phase::Security { auth } = &n.phase
                && !matches!(auth, Auth::Done)
            {
                // Never let a target skip authentication we asked for (mutual CHAP included).
                return Err(if self.config.mutual_chap.is_some() {
                    LoginError::MutualAuthFailed
                } else {
                    LoginError::Authentication(
                        "target left the security stage before CHAP completed".into(),
                    )
                });
            }
            // §11.13.6 T bit: the target may only transit when we asked, and no further than we
            // asked.
            let granted = Stage::from_code(resp.nsg)
                .filter(|&nsg| nsg > n.phase.stage() && n.asked.is_some_and(|asked| nsg <= asked));
            match granted {
                None => return proto("invalid stage transition in login response"),
                Some(Stage::FullFeature) => {
                    if !out.is_empty() {
                        return proto("target ended the login while offering keys");
                    }
                    return Ok(InitiatorStep::Done(InitiatorLoginOutcome {
                        tsih: resp.tsih,
                        negotiated: n.neg.result(),
                        target_alias: n.target_alias.clone(),
                        exp_stat_sn: n.exp_stat_sn,
                        cmd_sn: self.config.cmd_sn,
                        max_cmd_sn: resp.max_cmd_sn,
                    }));
                }
                // From the security stage the only other stage is the operational one.
                Some(_) => n.phase = Phase::Operational { offered: false },
            }
        }

        let nsg = match &mut n.phase {
            Phase::Security { auth } => {
                let done = matches!(auth, Auth::Done);
                let sending_response = matches!(auth, Auth::ResponseSent { .. }) && !out.is_empty();
                // Ask to move on once authenticated, or together with our CHAP response.
                (done || sending_response).then_some(Stage::Operational)
            }
            Phase::Operational { offered } => {
                if !*offered {
                    *offered = true;
                    out.extend(n.neg.declarations());
                    out.extend(n.neg.offers());
                }
                Some(Stage::FullFeature)
            }
        };
        Ok(InitiatorStep::Send(self.request(n, nsg, out)))
    }

    fn authenticate(
        &mut self,
        auth: &mut Auth,
        method: Option<&str>,
        chap: &[(&str, &str)],
        out: &mut Vec<(String, String)>,
    ) -> Result<(), LoginError> {
        let auth_err = |m: &str| Err(LoginError::Authentication(m.to_string()));
        let want_chap = self.config.chap.is_some() || self.config.mutual_chap.is_some();
        let get = |k: &str| chap.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        match auth.clone() {
            Auth::MethodOffered => {
                match method {
                    Some("CHAP") if want_chap => {
                        if !chap.is_empty() {
                            return auth_err("unexpected CHAP keys");
                        }
                        let list: Vec<String> = self
                            .algorithms
                            .iter()
                            .map(|a| a.code().to_string())
                            .collect();
                        out.push(("CHAP_A".into(), list.join(",")));
                        *auth = Auth::AlgorithmsOffered;
                    }
                    Some("None") if !want_chap => *auth = Auth::Done,
                    // Targets may omit the answer when we offered only None.
                    None if !want_chap => *auth = Auth::Done,
                    None => {}
                    Some(other) => {
                        return auth_err(&format!("target chose AuthMethod={other}"));
                    }
                }
            }
            Auth::AlgorithmsOffered => {
                if method.is_some() {
                    return auth_err("AuthMethod renegotiated");
                }
                let (Some(a), Some(i), Some(c)) = (get("CHAP_A"), get("CHAP_I"), get("CHAP_C"))
                else {
                    return auth_err("target did not send CHAP_A, CHAP_I and CHAP_C");
                };
                let alg = ChapAlgorithm::from_code(a)
                    .filter(|alg| self.algorithms.contains(alg))
                    .ok_or_else(|| {
                        LoginError::Authentication(format!("target chose CHAP_A={a}"))
                    })?;
                let id =
                    parse_identifier(i).map_err(|e| LoginError::Authentication(e.to_string()))?;
                let challenge = decode_binary(c, MAX_CHALLENGE)
                    .map_err(|e| LoginError::Authentication(e.to_string()))?;
                let Some(creds) = self.config.chap.clone() else {
                    return auth_err("target requires CHAP but no credentials are configured");
                };
                out.push(("CHAP_N".into(), creds.user.clone()));
                out.push((
                    "CHAP_R".into(),
                    encode_binary(&chap_response(alg, id, &creds.secret, &challenge)),
                ));
                let mutual = if self.config.mutual_chap.is_some() {
                    let my_id = self.rng.byte();
                    let mut my_challenge = self.rng.bytes(alg.challenge_len());
                    // §12.1.3: never reuse the responder's challenge for the other direction.
                    while my_challenge == challenge {
                        my_challenge = self.rng.bytes(alg.challenge_len());
                    }
                    out.push(("CHAP_I".into(), my_id.to_string()));
                    out.push(("CHAP_C".into(), encode_binary(&my_challenge)));
                    Some((alg, my_id, my_challenge))
                } else {
                    None
                };
                *auth = Auth::ResponseSent { mutual };
            }
            Auth::ResponseSent { mutual } => {
                if method.is_some()
                    || get("CHAP_A").is_some()
                    || get("CHAP_C").is_some()
                    || get("CHAP_I").is_some()
                {
                    return auth_err("unexpected CHAP keys after our response");
                }
                match (mutual, get("CHAP_N"), get("CHAP_R")) {
                    (None, None, None) => *auth = Auth::Done,
                    (None, _, _) => return auth_err("unexpected CHAP response from the target"),
                    (Some((alg, id, challenge)), Some(name), Some(response)) => {
                        let Some(expected) = self.config.mutual_chap.clone() else {
                            return Err(LoginError::MutualAuthFailed);
                        };
                        let want = chap_response(alg, id, &expected.secret, &challenge);
                        let got = decode_binary(response, MAX_CHALLENGE)
                            .map_err(|_| LoginError::MutualAuthFailed)?;
                        let ok = constant_time_eq(name.as_bytes(), expected.user.as_bytes())
                            & constant_time_eq(&got, &want);
                        if !ok {
                            return Err(LoginError::MutualAuthFailed);
                        }
                        *auth = Auth::Done;
                    }
                    (Some(_), _, _) => return Err(LoginError::MutualAuthFailed),
                }
            }
            Auth::Done => {
                if method.is_some() || !chap.is_empty() {
                    return auth_err("security keys after authentication completed");
                }
            }
        }
        Ok(())
    }
}
