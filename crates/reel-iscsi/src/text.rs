//! Text keys (RFC 7143 §6.1) and target-side Text Request handling in the full-feature phase
//! (§11.10, §11.11, Appendix C "SendTargets Operation").

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::login::{PortalConfig, TargetConfig};
use crate::params::{MAX_SEGMENT, MIN_SEGMENT, is_operational_key, parse_number};
use crate::pdu::{RESERVED_TAG, TextRequest, TextResponse, TransferTags};

/// Longest key name (§6.1: "key-name ... maximum length of 63 bytes").
pub const MAX_KEY_LEN: usize = 63;
/// Longest value in general (§6.1: "the maximum length of an individual value ... is 255 bytes").
pub const MAX_VALUE_LEN: usize = 255;
/// Longest value of the keys that allow long values (binary CHAP values, §12.1.3: up to 1024 bytes
/// of challenge, hex- or base64-encoded).
pub const MAX_LONG_VALUE_LEN: usize = 8192;
/// Most text bytes accumulated across PDUs with the C bit (ours, a sanity cap).
pub const MAX_TEXT_LEN: usize = 64 * 1024;

/// Why text data or a Text Request is unacceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TextError {
    #[error("text data does not end with a NUL byte")]
    Unterminated,
    #[error("key=value pair without '='")]
    MissingEquals,
    #[error("empty key name")]
    EmptyKey,
    #[error("key name of {0} bytes exceeds 63")]
    KeyTooLong(usize),
    #[error("invalid character in key name")]
    InvalidKey,
    #[error("value of {key} is {len} bytes, more than {max}")]
    ValueTooLong { key: String, len: usize, max: usize },
    #[error("text is not valid UTF-8")]
    InvalidUtf8,
    #[error("text of {0} bytes exceeds the {MAX_TEXT_LEN}-byte limit")]
    TooLong(usize),
    #[error("protocol error: {0}")]
    Protocol(&'static str),
}

fn max_value_len(key: &str) -> usize {
    match key {
        "CHAP_C" | "CHAP_R" => MAX_LONG_VALUE_LEN,
        _ => MAX_VALUE_LEN,
    }
}

/// §6.1: "key-name: a string of one or more characters consisting of letters, digits, dot (.),
/// minus (-), plus (+), commercial at (@), or underscore (_)".
fn valid_key(key: &str) -> bool {
    key.bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'@' | b'_'))
}

/// The first key that occurs more than once in `pairs` (§6.1: a key is sent at most once in
/// one negotiation; the caller answers an Initiator Error).
/// Linear in the number of pairs: a login may carry 64 KiB of keys before authentication.
pub fn duplicate_key(pairs: &[(String, String)]) -> Option<&str> {
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    pairs
        .iter()
        .map(|(k, _)| k.as_str())
        .find(|k| !seen.insert(*k))
}

/// Parses a list of `key=value\0` pairs (§6.1). Empty strings between NULs (padding some peers
/// send) are skipped; duplicate keys are returned as they come (the caller decides).
pub fn parse_pairs(data: &[u8]) -> Result<Vec<(String, String)>, TextError> {
    if data.len() > MAX_TEXT_LEN {
        return Err(TextError::TooLong(data.len()));
    }
    if data.is_empty() {
        return Ok(Vec::new());
    }
    if data.last() != Some(&0) {
        return Err(TextError::Unterminated);
    }
    let text = std::str::from_utf8(data).map_err(|_| TextError::InvalidUtf8)?;
    let mut pairs = Vec::new();
    for item in text[..text.len() - 1].split('\0') {
        if item.is_empty() {
            continue;
        }
        let (key, value) = item.split_once('=').ok_or(TextError::MissingEquals)?;
        if key.is_empty() {
            return Err(TextError::EmptyKey);
        }
        if key.len() > MAX_KEY_LEN {
            return Err(TextError::KeyTooLong(key.len()));
        }
        if !valid_key(key) {
            return Err(TextError::InvalidKey);
        }
        let max = max_value_len(key);
        if value.len() > max {
            return Err(TextError::ValueTooLong {
                key: key.to_string(),
                len: value.len(),
                max,
            });
        }
        pairs.push((key.to_string(), value.to_string()));
    }
    Ok(pairs)
}

/// Encodes `key=value\0` pairs (§6.1).
pub fn encode_pairs(pairs: &[(impl AsRef<str>, impl AsRef<str>)]) -> Bytes {
    let mut out = BytesMut::new();
    for (k, v) in pairs {
        out.extend_from_slice(k.as_ref().as_bytes());
        out.extend_from_slice(b"=");
        out.extend_from_slice(v.as_ref().as_bytes());
        out.extend_from_slice(b"\0");
    }
    out.freeze()
}

/// Whether an iSCSI name matches (names are case-insensitive after stringprep normalisation,
/// RFC 7143 §4.2.7.2; we compare ASCII case-insensitively).
pub(crate) fn names_equal(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Whether `initiator` may see/log in to `target` (no ACL = everyone).
pub(crate) fn initiator_allowed(target: &TargetConfig, initiator: Option<&str>) -> bool {
    match (&target.allow_initiators, initiator) {
        (None, _) => true,
        (Some(list), Some(name)) => list.iter().any(|allowed| names_equal(allowed, name)),
        (Some(_), None) => false,
    }
}

/// Keys that may only appear during login ("LO"/"IO" use, §13): refused in the full-feature phase.
const LOGIN_ONLY_KEYS: &[&str] = &[
    "AuthMethod",
    "CHAP_A",
    "CHAP_I",
    "CHAP_C",
    "CHAP_N",
    "CHAP_R",
    "InitiatorName",
    "TargetName",
    "SessionType",
    "TargetPortalGroupTag",
];

struct PendingResponse {
    itt: u32,
    ttt: u32,
    rest: Bytes,
}

struct PendingRequest {
    itt: u32,
    ttt: u32,
    text: BytesMut,
}

/// Target-side Text Request handling in the full-feature phase (§11.10, §11.11).
///
/// Answers `SendTargets` (Appendix C): in a discovery session `All` lists every target the initiator
/// may access and `<name>` that target; in a normal session the empty value (or the current target's
/// name) lists the current target and `All` is answered `Reject` ("MUST NOT be supported on an
/// operational session"). Each record is `TargetName` followed by `TargetAddress=<addr>,<tpgt>` per
/// portal address (no other keys are permitted in a SendTargets response). Targets with an ACL are
/// listed only to initiators on it; without [`TextResponder::with_initiator_name`] they are hidden.
///
/// Long answers are split over several Text Responses (§11.11.1 F bit, §11.11.2 C bit, §11.11.4 TTT): F=0, C=1 and
/// a target transfer tag; the initiator continues with an empty Text Request carrying that tag.
/// Initiator requests with C=1 are accumulated (acknowledged with empty F=0 responses) up to
/// [`MAX_TEXT_LEN`].
pub struct TextResponder {
    portal: Arc<PortalConfig>,
    session_target: Option<usize>,
    discovery: bool,
    initiator_name: Option<String>,
    pending_response: Option<PendingResponse>,
    pending_request: Option<PendingRequest>,
    ttts: TransferTags,
    max_xmit_update: Option<u32>,
}

impl TextResponder {
    pub fn new(portal: Arc<PortalConfig>, session_target: Option<usize>, discovery: bool) -> Self {
        TextResponder {
            portal,
            session_target,
            discovery,
            initiator_name: None,
            pending_response: None,
            pending_request: None,
            ttts: TransferTags::default(),
            max_xmit_update: None,
        }
    }

    /// The logged-in initiator's name, so SendTargets can list targets whose ACL admits it.
    pub fn with_initiator_name(mut self, name: impl Into<String>) -> Self {
        self.initiator_name = Some(name.into());
        self
    }

    /// A MaxRecvDataSegmentLength the initiator re-declared in the full-feature phase (§13.12: the key
    /// may be sent at any time), to apply to subsequent PDUs we send. Taken once.
    pub fn take_max_xmit_update(&mut self) -> Option<u32> {
        self.max_xmit_update.take()
    }

    /// Returns the Text Response to send (the caller fills StatSN/ExpCmdSN/MaxCmdSN) or a protocol
    /// error, in which case the caller sends a Reject (§11.17).
    pub fn on_request(
        &mut self,
        req: &TextRequest,
        max_xmit: u32,
    ) -> Result<TextResponse, TextError> {
        let max_xmit = (max_xmit as usize).clamp(MIN_SEGMENT as usize, MAX_SEGMENT as usize);
        if req.final_ && req.continue_ {
            // §11.10.2: "If the C bit is set to 1, the F bit MUST be set to 0."
            return Err(TextError::Protocol("Text Request with both F and C set"));
        }
        // Continuation of a long response of ours (§11.11.4: the initiator answers F=0 responses
        // with an empty request carrying our target transfer tag).
        if req.ttt != RESERVED_TAG {
            if let Some(p) = self.pending_response.take() {
                if p.itt == req.itt && p.ttt == req.ttt {
                    if !req.data.is_empty() {
                        return Err(TextError::Protocol(
                            "data in a Text Request continuing a response",
                        ));
                    }
                    return Ok(self.chunk(req.itt, p.rest, max_xmit));
                }
                return Err(TextError::Protocol(
                    "Text Request with an unknown target transfer tag",
                ));
            }
            match &self.pending_request {
                Some(p) if p.itt == req.itt && p.ttt == req.ttt => {}
                _ => {
                    return Err(TextError::Protocol(
                        "Text Request with an unknown target transfer tag",
                    ));
                }
            }
        } else {
            // §11.10.4: a request with the reserved TTT starts a new negotiation and resets any
            // pending one — except that some initiators continue their own C=1 request this way.
            self.pending_response = None;
            if self
                .pending_request
                .as_ref()
                .is_some_and(|p| p.itt != req.itt)
            {
                self.pending_request = None;
            }
        }
        let mut text = match self.pending_request.take() {
            Some(p) => p.text,
            None => BytesMut::new(),
        };
        if text.len() + req.data.len() > MAX_TEXT_LEN {
            return Err(TextError::TooLong(text.len() + req.data.len()));
        }
        text.extend_from_slice(&req.data);
        if req.continue_ {
            // More text follows: acknowledge with an empty response (§11.10.2 C bit, §11.11.4).
            let ttt = self.ttts.allocate();
            self.pending_request = Some(PendingRequest {
                itt: req.itt,
                ttt,
                text,
            });
            return Ok(self.response(req.itt, false, false, ttt, Bytes::new()));
        }
        let pairs = parse_pairs(&text)?;
        let answer = self.answer(&pairs)?;
        Ok(self.chunk(req.itt, answer, max_xmit))
    }

    fn response(
        &self,
        itt: u32,
        final_: bool,
        continue_: bool,
        ttt: u32,
        data: Bytes,
    ) -> TextResponse {
        TextResponse {
            final_,
            continue_,
            lun: [0; 8],
            itt,
            ttt,
            stat_sn: 0,
            exp_cmd_sn: 0,
            max_cmd_sn: 0,
            data,
        }
    }

    /// The next piece of `text` that fits in `max_xmit`, with F/C/TTT set accordingly.
    fn chunk(&mut self, itt: u32, mut text: Bytes, max_xmit: usize) -> TextResponse {
        if text.len() <= max_xmit {
            return self.response(itt, true, false, RESERVED_TAG, text);
        }
        let head = text.split_to(max_xmit);
        let ttt = self.ttts.allocate();
        self.pending_response = Some(PendingResponse {
            itt,
            ttt,
            rest: text,
        });
        self.response(itt, false, true, ttt, head)
    }

    fn answer(&mut self, pairs: &[(String, String)]) -> Result<Bytes, TextError> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in pairs {
            if seen.contains(&key.as_str()) {
                return Err(TextError::Protocol("key repeated in a Text Request"));
            }
            seen.push(key);
            match key.as_str() {
                "SendTargets" => self.send_targets(value, &mut out),
                "MaxRecvDataSegmentLength" => match parse_number(value) {
                    Some(n) if (MIN_SEGMENT as u64..=MAX_SEGMENT as u64).contains(&n) => {
                        self.max_xmit_update = Some(n as u32);
                    }
                    _ => out.push((key.clone(), "Reject".into())),
                },
                "TargetAlias" | "TargetAddress" => {
                    return Err(TextError::Protocol("target-only key sent by the initiator"));
                }
                k if LOGIN_ONLY_KEYS.contains(&k) || is_operational_key(k) => {
                    // Leading-only / login-only keys cannot be renegotiated in the full-feature phase.
                    out.push((key.clone(), "Reject".into()));
                }
                _ => out.push((key.clone(), "NotUnderstood".into())),
            }
        }
        Ok(encode_pairs(&out))
    }

    fn send_targets(&self, value: &str, out: &mut Vec<(String, String)>) {
        let portal = self.portal.clone();
        let initiator = self.initiator_name.as_deref();
        let record = |t: &TargetConfig, out: &mut Vec<(String, String)>| {
            out.push(("TargetName".into(), t.name.clone()));
            for addr in &portal.addresses {
                out.push((
                    "TargetAddress".into(),
                    format!("{addr},{}", t.portal_group_tag),
                ));
            }
        };
        // Targets served elsewhere (the redirect table) are listed at *this* portal's addresses:
        // a login here is redirected to wherever the target is served at that moment, so the
        // address an initiator discovered keeps working when the target moves. Their ACLs are
        // enforced by the portal that serves them, at login.
        let elsewhere = |name: &str| {
            (!portal.targets.iter().any(|t| names_equal(&t.name, name)))
                .then(|| portal.redirects.lookup(name))
                .flatten()
        };
        let record_elsewhere = |name: &str, address: &str, out: &mut Vec<(String, String)>| {
            let tpgt = address.rsplit_once(',').map_or("1", |(_, tag)| tag);
            out.push(("TargetName".into(), name.to_string()));
            for addr in &portal.addresses {
                out.push(("TargetAddress".into(), format!("{addr},{tpgt}")));
            }
        };
        if self.discovery {
            match value {
                "All" => {
                    for t in portal
                        .targets
                        .iter()
                        .filter(|t| initiator_allowed(t, initiator))
                    {
                        record(t, out);
                    }
                    for (name, _) in portal.redirects.entries() {
                        if let Some(address) = elsewhere(&name) {
                            record_elsewhere(&name, &address, out);
                        }
                    }
                }
                "" => {}
                name => {
                    if let Some(t) = portal
                        .targets
                        .iter()
                        .find(|t| names_equal(&t.name, name) && initiator_allowed(t, initiator))
                    {
                        record(t, out);
                    } else if let Some(address) = elsewhere(name) {
                        record_elsewhere(name, &address, out);
                    }
                }
            }
        } else {
            let current = self.session_target.and_then(|i| portal.targets.get(i));
            match (value, current) {
                ("All", _) => out.push(("SendTargets".into(), "Reject".into())),
                ("", Some(t)) => record(t, out),
                (name, Some(t)) if names_equal(&t.name, name) => record(t, out),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn duplicate_key_check_is_linear() {
        // 200 000 distinct keys (more than a login can carry) and then a repeat: a quadratic
        // scan needs ~2*10^10 comparisons (minutes), a linear one milliseconds.
        let mut pairs: Vec<(String, String)> = (0..200_000)
            .map(|i| (format!("X-k{i}"), String::new()))
            .collect();
        let started = std::time::Instant::now();
        assert_eq!(duplicate_key(&pairs), None);
        pairs.push(("X-k123".into(), "v".into()));
        assert_eq!(duplicate_key(&pairs), Some("X-k123"));
        assert_eq!(duplicate_key(&[]), None);
        // A generous bound that only a quadratic scan breaks.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    use super::*;

    #[test]
    fn parse_basic() {
        let p = parse_pairs(b"A=1\0B=\0C=x=y\0").unwrap();
        assert_eq!(
            p,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "".into()),
                ("C".into(), "x=y".into())
            ]
        );
        assert_eq!(parse_pairs(b"").unwrap(), vec![]);
        assert_eq!(parse_pairs(b"A=1\0\0\0").unwrap().len(), 1);
        assert_eq!(parse_pairs(b"A=1"), Err(TextError::Unterminated));
        assert_eq!(parse_pairs(b"A\0"), Err(TextError::MissingEquals));
        assert_eq!(parse_pairs(b"=1\0"), Err(TextError::EmptyKey));
        assert_eq!(parse_pairs(b"A B=1\0"), Err(TextError::InvalidKey));
        assert_eq!(parse_pairs(b"A=\xff\0"), Err(TextError::InvalidUtf8));
        let long_key = format!("{}=1\0", "K".repeat(64));
        assert_eq!(
            parse_pairs(long_key.as_bytes()),
            Err(TextError::KeyTooLong(64))
        );
        let long_val = format!("K={}\0", "v".repeat(256));
        assert!(matches!(
            parse_pairs(long_val.as_bytes()),
            Err(TextError::ValueTooLong { .. })
        ));
        let chap = format!("CHAP_C=0x{}\0", "ab".repeat(1024));
        assert_eq!(parse_pairs(chap.as_bytes()).unwrap().len(), 1);
    }

    #[test]
    fn encode_basic() {
        assert_eq!(&encode_pairs(&[("A", "1"), ("B", "")])[..], b"A=1\0B=\0");
        let empty: [(&str, &str); 0] = [];
        assert!(encode_pairs(&empty).is_empty());
    }
}
