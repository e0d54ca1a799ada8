//! Operational parameters and their negotiation (RFC 7143 §6.2, §13).
//!
//! [`Negotiator`] is the key-by-key engine shared by the target and initiator login machines: it
//! answers keys the peer offers ([`Negotiator::respond`]), takes the peer's answers to keys we offered
//! ([`Negotiator::accept_answer`]), and lists the keys we offer ourselves ([`Negotiator::offers`]).

use std::collections::{BTreeMap, BTreeSet};

/// Smallest and largest legal data segment / burst lengths (§13.12–§13.14: 512 to 2^24-1).
pub const MIN_SEGMENT: u32 = 512;
pub const MAX_SEGMENT: u32 = (1 << 24) - 1;

/// Operational parameters in force for a session/connection (RFC 7143 §13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    pub header_digest: bool,
    pub data_digest: bool,
    /// What WE (this side) declared we can receive (§13.12).
    pub max_recv_data_segment_length: u32,
    /// What the PEER declared it can receive: we must not send more data per PDU.
    pub max_xmit_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
    pub default_time2wait: u16,
    pub default_time2retain: u16,
    pub max_connections: u16,
    pub error_recovery_level: u8,
}

impl Negotiated {
    /// The defaults of RFC 7143 §13 (what is in force for keys never negotiated).
    pub fn defaults() -> Self {
        Negotiated {
            header_digest: false,
            data_digest: false,
            max_recv_data_segment_length: 8192,
            max_xmit_data_segment_length: 8192,
            max_burst_length: 262_144,
            first_burst_length: 65_536,
            immediate_data: true,
            initial_r2t: true,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            default_time2wait: 2,
            default_time2retain: 20,
            max_connections: 1,
            error_recovery_level: 0,
        }
    }

    /// Frame limits for receiving PDUs under these parameters.
    pub fn recv_frame_limits(&self) -> crate::pdu::FrameLimits {
        crate::pdu::FrameLimits {
            header_digest: self.header_digest,
            data_digest: self.data_digest,
            max_data_segment: self.max_recv_data_segment_length,
        }
    }

    /// Frame limits for sending PDUs under these parameters.
    pub fn xmit_frame_limits(&self) -> crate::pdu::FrameLimits {
        crate::pdu::FrameLimits {
            header_digest: self.header_digest,
            data_digest: self.data_digest,
            max_data_segment: self.max_xmit_data_segment_length,
        }
    }
}

impl Default for Negotiated {
    fn default() -> Self {
        Self::defaults()
    }
}

/// Which digest this side accepts (§13.1: HeaderDigest/DataDigest are lists of CRC32C and None).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestPreference {
    /// Only None.
    None,
    /// Only CRC32C (a target with this setting offers it if the initiator doesn't).
    Crc32c,
    /// Either; offers "CRC32C,None".
    PreferCrc32c,
    /// Either; offers "None,CRC32C".
    PreferNone,
}

impl DigestPreference {
    fn accepts(self, crc: bool) -> bool {
        match self {
            DigestPreference::None => !crc,
            DigestPreference::Crc32c => crc,
            _ => true,
        }
    }
    fn offer(self) -> &'static str {
        match self {
            DigestPreference::None => "None",
            DigestPreference::Crc32c => "CRC32C",
            DigestPreference::PreferCrc32c => "CRC32C,None",
            DigestPreference::PreferNone => "None,CRC32C",
        }
    }
}

/// What this side offers/accepts (target: our limits; initiator: what it asks for).
/// Values outside the legal ranges are clamped when used.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub header_digest: DigestPreference,
    pub data_digest: DigestPreference,
    pub default_time2wait: u16,
    pub default_time2retain: u16,
}

impl Limits {
    /// Target defaults: 256 KiB segments, 1 MiB bursts, either digest accepted. The first
    /// burst is a whole segment (not the RFC's 64 KiB), so a WRITE of up to 256 KiB, the usual
    /// tape record, arrives as immediate data in its command PDU: no R2T round trip and no
    /// joining of Data-Out segments (tape initiators have one command in flight per drive, so
    /// the round trip is paid on every record; docs/design/efficiency.md §22).
    pub fn target_default() -> Self {
        Limits {
            max_recv_data_segment_length: 262_144,
            max_burst_length: 1 << 20,
            first_burst_length: 262_144,
            immediate_data: true,
            initial_r2t: true,
            max_outstanding_r2t: 1,
            header_digest: DigestPreference::PreferNone,
            data_digest: DigestPreference::PreferNone,
            default_time2wait: 2,
            default_time2retain: 20,
        }
    }

    /// Initiator defaults: same sizes, no digests offered.
    pub fn initiator_default() -> Self {
        Limits {
            header_digest: DigestPreference::None,
            data_digest: DigestPreference::None,
            ..Self::target_default()
        }
    }

    fn mrdsl(&self) -> u32 {
        self.max_recv_data_segment_length
            .clamp(MIN_SEGMENT, MAX_SEGMENT)
    }
    fn mbl(&self) -> u32 {
        self.max_burst_length.clamp(MIN_SEGMENT, MAX_SEGMENT)
    }
    fn fbl(&self) -> u32 {
        self.first_burst_length
            .clamp(MIN_SEGMENT, MAX_SEGMENT)
            .min(self.mbl())
    }
    fn mor2t(&self) -> u32 {
        self.max_outstanding_r2t.clamp(1, 65_535)
    }
    fn t2w(&self) -> u16 {
        self.default_time2wait.min(3600)
    }
    fn t2r(&self) -> u16 {
        self.default_time2retain.min(3600)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::target_default()
    }
}

/// Parses a numerical value (§6.1: decimal-constant or hex-constant `0x...`), at most 64 bits.
pub fn parse_number(value: &str) -> Option<u64> {
    let v = value.as_bytes();
    if v.is_empty() {
        return None;
    }
    if v.len() > 2 && v[0] == b'0' && (v[1] == b'x' || v[1] == b'X') {
        let digits = &value[2..];
        if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|c| c.is_ascii_hexdigit())
        {
            return None;
        }
        return u64::from_str_radix(digits, 16).ok();
    }
    if v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.parse().ok()
}

fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "Yes" } else { "No" }
}

/// Which side of the negotiation we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Target,
}

/// The answer to a key the peer offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Send `key=value` back.
    Value(String),
    /// Declarative key: nothing to send back (§6.2: "declarations ... no response is required").
    None,
}

/// A negotiation failure that ends the login.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiationError {
    /// §6.2: "a key ... MUST NOT be offered more than once" (login status 0x0200).
    #[error("key {0} negotiated more than once")]
    Duplicate(String),
    /// The key may not be sent by this side or in this phase (login status 0x0200).
    #[error("key {0} not allowed here")]
    NotAllowed(String),
    /// A required value was refused by the peer.
    #[error("peer refused required value for {0}")]
    Refused(String),
    /// The peer's answer to our offer is not a legal outcome.
    #[error("invalid answer for {0}")]
    BadAnswer(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyType {
    Digest,
    BoolAnd(bool),
    BoolOr(bool),
    NumMin { min: u64, max: u64 },
    NumMax { min: u64, max: u64 },
    Declarative,
    Fixed,
}

/// Operational keys of §13 (and obsolete/extension keys we answer politely).
const KEYS: &[(&str, KeyType)] = &[
    ("HeaderDigest", KeyType::Digest),
    ("DataDigest", KeyType::Digest),
    (
        "MaxConnections",
        KeyType::NumMin {
            min: 1,
            max: 65_535,
        },
    ),
    ("InitialR2T", KeyType::BoolOr(true)),
    ("ImmediateData", KeyType::BoolAnd(true)),
    ("MaxRecvDataSegmentLength", KeyType::Declarative),
    (
        "MaxBurstLength",
        KeyType::NumMin {
            min: MIN_SEGMENT as u64,
            max: MAX_SEGMENT as u64,
        },
    ),
    (
        "FirstBurstLength",
        KeyType::NumMin {
            min: MIN_SEGMENT as u64,
            max: MAX_SEGMENT as u64,
        },
    ),
    ("DefaultTime2Wait", KeyType::NumMax { min: 0, max: 3600 }),
    ("DefaultTime2Retain", KeyType::NumMin { min: 0, max: 3600 }),
    (
        "MaxOutstandingR2T",
        KeyType::NumMin {
            min: 1,
            max: 65_535,
        },
    ),
    ("DataPDUInOrder", KeyType::BoolOr(true)),
    ("DataSequenceInOrder", KeyType::BoolOr(true)),
    ("ErrorRecoveryLevel", KeyType::NumMin { min: 0, max: 2 }),
    // RFC 7143 §13.25 obsoleted markers (RFC 3720 Appendix A.3): IFMarker/OFMarker answered No
    // (the permitted alternative to Reject that RFC 3720 initiators expect), *MarkInt Reject.
    ("IFMarker", KeyType::Fixed),
    ("OFMarker", KeyType::Fixed),
    ("IFMarkInt", KeyType::Fixed),
    ("OFMarkInt", KeyType::Fixed),
    // RFC 7143 §13.23 TaskReporting, §13.24 iSCSIProtocolLevel, RFC 7145 RDMAExtensions.
    ("TaskReporting", KeyType::Fixed),
    ("iSCSIProtocolLevel", KeyType::NumMin { min: 0, max: 31 }),
    ("RDMAExtensions", KeyType::Fixed),
];

/// Keys that are "Irrelevant when SessionType=Discovery" (§13.10, §13.11, §13.13–§13.15, §13.17–§13.19).
const DATA_PATH_KEYS: &[&str] = &[
    "InitialR2T",
    "ImmediateData",
    "MaxBurstLength",
    "FirstBurstLength",
    "MaxOutstandingR2T",
    "DataPDUInOrder",
    "DataSequenceInOrder",
];

/// Whether `key` is an operational key this engine handles.
pub fn is_operational_key(key: &str) -> bool {
    KEYS.iter().any(|(k, _)| *k == key)
}

fn key_type(key: &str) -> Option<(&'static str, KeyType)> {
    KEYS.iter().find(|(k, _)| *k == key).copied()
}

/// Key-by-key negotiation state for one login (§6.2).
#[derive(Clone, Debug)]
pub struct Negotiator {
    role: Role,
    limits: Limits,
    discovery: bool,
    values: Negotiated,
    /// Keys whose negotiation has started (offered by either side).
    seen: BTreeSet<&'static str>,
    /// Keys we offered and whose answers we await, with the value offered.
    offered: BTreeMap<&'static str, String>,
    /// Whether we have declared our MaxRecvDataSegmentLength.
    declared: bool,
}

impl Negotiator {
    pub fn new(role: Role, limits: Limits, discovery: bool) -> Self {
        let mut values = Negotiated::defaults();
        // MaxConnections and ErrorRecoveryLevel: we only do 1 and 0 (the defaults).
        values.max_recv_data_segment_length = 8192;
        Negotiator {
            role,
            limits,
            discovery,
            values,
            seen: BTreeSet::new(),
            offered: BTreeMap::new(),
            declared: false,
        }
    }

    pub fn set_discovery(&mut self, discovery: bool) {
        self.discovery = discovery;
    }

    /// Whether keys we offered still await an answer.
    pub fn awaiting_answers(&self) -> bool {
        !self.offered.is_empty()
    }

    /// Whether the peer (or we) started negotiating `key`.
    pub fn seen(&self, key: &str) -> bool {
        self.seen.contains(key)
    }

    /// Answers a key offered (or declared) by the peer. `Ok(None)` means the key is not an
    /// operational key (the caller handles it, e.g. NotUnderstood).
    pub fn respond(&mut self, key: &str, value: &str) -> Result<Option<Answer>, NegotiationError> {
        let Some((name, kind)) = key_type(key) else {
            return Ok(None);
        };
        if self.offered.contains_key(name) {
            // Both sides offered the same key at once: treat theirs as the answer (§6.2 forbids a
            // responder from offering a key it was offered; be tolerant of the race).
            self.accept_answer(key, value)?;
            return Ok(Some(Answer::None));
        }
        if name != "MaxRecvDataSegmentLength" && !self.seen.insert(name) {
            return Err(NegotiationError::Duplicate(name.to_string()));
        }
        if self.discovery && DATA_PATH_KEYS.contains(&name) {
            return Ok(Some(Answer::Value("Irrelevant".into())));
        }
        let reject = || Ok(Some(Answer::Value("Reject".into())));
        let v = &mut self.values;
        let l = &self.limits;
        let answer = match (name, kind) {
            ("HeaderDigest" | "DataDigest", _) => {
                let pref = if name == "HeaderDigest" {
                    l.header_digest
                } else {
                    l.data_digest
                };
                // §6.2.1: the responder picks the first value in the offerer's list that it supports.
                let pick = value.split(',').find_map(|item| match item {
                    "CRC32C" if pref.accepts(true) => Some(true),
                    "None" if pref.accepts(false) => Some(false),
                    _ => None,
                });
                match pick {
                    Some(crc) => {
                        if name == "HeaderDigest" {
                            v.header_digest = crc;
                        } else {
                            v.data_digest = crc;
                        }
                        if crc { "CRC32C" } else { "None" }.to_string()
                    }
                    // Nothing acceptable: a side that insists on CRC32C ends the login; otherwise
                    // answer Reject and let the offerer decide (§6.2.1 list negotiation).
                    None if pref == DigestPreference::Crc32c => {
                        return Err(NegotiationError::Refused(name.to_string()));
                    }
                    None => return reject(),
                }
            }
            ("MaxRecvDataSegmentLength", _) => {
                // Declarative (§13.12): the peer's receive limit is our transmit limit.
                match parse_number(value) {
                    Some(n) if (MIN_SEGMENT as u64..=MAX_SEGMENT as u64).contains(&n) => {
                        v.max_xmit_data_segment_length = n as u32;
                        return Ok(Some(Answer::None));
                    }
                    _ => return reject(),
                }
            }
            (_, KeyType::BoolAnd(_) | KeyType::BoolOr(_)) => {
                let Some(offer) = parse_bool(value) else {
                    return reject();
                };
                let ours = match name {
                    "ImmediateData" => l.immediate_data,
                    "InitialR2T" => l.initial_r2t,
                    _ => true, // DataPDUInOrder, DataSequenceInOrder: we want in-order data.
                };
                let result = if matches!(kind, KeyType::BoolAnd(_)) {
                    offer && ours
                } else {
                    offer || ours
                };
                match name {
                    "ImmediateData" => v.immediate_data = result,
                    "InitialR2T" => v.initial_r2t = result,
                    "DataPDUInOrder" => v.data_pdu_in_order = result,
                    _ => v.data_sequence_in_order = result,
                }
                yes_no(result).to_string()
            }
            (_, KeyType::NumMin { min, max } | KeyType::NumMax { min, max }) => {
                let Some(offer) = parse_number(value) else {
                    return reject();
                };
                if offer < min || offer > max {
                    return reject();
                }
                let ours: u64 = match name {
                    "MaxConnections" => 1,
                    "MaxBurstLength" => l.mbl() as u64,
                    // §13.14: FirstBurstLength MUST NOT exceed MaxBurstLength.
                    "FirstBurstLength" => l.fbl().min(v.max_burst_length.max(MIN_SEGMENT)) as u64,
                    "DefaultTime2Wait" => l.t2w() as u64,
                    "DefaultTime2Retain" => l.t2r() as u64,
                    "MaxOutstandingR2T" => l.mor2t() as u64,
                    "ErrorRecoveryLevel" => 0,
                    "iSCSIProtocolLevel" => 1,
                    _ => offer,
                };
                let result = if matches!(kind, KeyType::NumMax { .. }) {
                    offer.max(ours)
                } else {
                    offer.min(ours)
                };
                self.store_number(name, result);
                result.to_string()
            }
            ("IFMarker" | "OFMarker", _) => "No".to_string(),
            ("RDMAExtensions", _) => "No".to_string(),
            ("TaskReporting", _) => "RFC3720".to_string(),
            _ => "Reject".to_string(),
        };
        Ok(Some(Answer::Value(answer)))
    }

    fn store_number(&mut self, name: &str, n: u64) {
        let v = &mut self.values;
        match name {
            "MaxConnections" => v.max_connections = n as u16,
            "MaxBurstLength" => {
                v.max_burst_length = n as u32;
                v.first_burst_length = v.first_burst_length.min(v.max_burst_length);
            }
            "FirstBurstLength" => v.first_burst_length = n as u32,
            "DefaultTime2Wait" => v.default_time2wait = n as u16,
            "DefaultTime2Retain" => v.default_time2retain = n as u16,
            "MaxOutstandingR2T" => v.max_outstanding_r2t = n as u32,
            "ErrorRecoveryLevel" => v.error_recovery_level = n as u8,
            _ => {}
        }
    }

    /// Takes the peer's answer to a key we offered. Returns `Ok(false)` when we never offered `key`
    /// (the caller should then treat it as an offer from the peer).
    pub fn accept_answer(&mut self, key: &str, value: &str) -> Result<bool, NegotiationError> {
        let Some((name, kind)) = key_type(key) else {
            return Ok(false);
        };
        let Some(offer) = self.offered.remove(name) else {
            return Ok(false);
        };
        let bad = || Err(NegotiationError::BadAnswer(name.to_string()));
        match value {
            "Reject" | "NotUnderstood" | "Irrelevant" => {
                // The key keeps its default (§6.2). A required digest was refused.
                if (name == "HeaderDigest" && self.limits.header_digest == DigestPreference::Crc32c)
                    || (name == "DataDigest" && self.limits.data_digest == DigestPreference::Crc32c)
                {
                    return Err(NegotiationError::Refused(name.to_string()));
                }
                return Ok(true);
            }
            _ => {}
        }
        match kind {
            KeyType::Digest => {
                if !offer.split(',').any(|o| o == value) {
                    return bad();
                }
                let crc = value == "CRC32C";
                if name == "HeaderDigest" {
                    self.values.header_digest = crc;
                } else {
                    self.values.data_digest = crc;
                }
            }
            KeyType::BoolAnd(_) | KeyType::BoolOr(_) => {
                let (Some(ans), Some(ours)) = (parse_bool(value), parse_bool(&offer)) else {
                    return bad();
                };
                // AND: the answer can only lower Yes to No; OR: only raise No to Yes.
                let legal = if matches!(kind, KeyType::BoolAnd(_)) {
                    !ans || ours
                } else {
                    ans || !ours
                };
                if !legal {
                    return bad();
                }
                match name {
                    "ImmediateData" => self.values.immediate_data = ans,
                    "InitialR2T" => self.values.initial_r2t = ans,
                    "DataPDUInOrder" => self.values.data_pdu_in_order = ans,
                    _ => self.values.data_sequence_in_order = ans,
                }
            }
            KeyType::NumMin { min, max } | KeyType::NumMax { min, max } => {
                let (Some(ans), Some(ours)) = (parse_number(value), parse_number(&offer)) else {
                    return bad();
                };
                let is_min = matches!(kind, KeyType::NumMin { .. });
                if ans < min || ans > max || (is_min && ans > ours) || (!is_min && ans < ours) {
                    return bad();
                }
                self.store_number(name, ans);
            }
            KeyType::Declarative | KeyType::Fixed => {}
        }
        Ok(true)
    }

    /// Declares our MaxRecvDataSegmentLength (§13.12) if not yet done.
    pub fn declarations(&mut self) -> Vec<(String, String)> {
        if self.declared {
            return Vec::new();
        }
        self.declared = true;
        self.values.max_recv_data_segment_length = self.limits.mrdsl();
        vec![(
            "MaxRecvDataSegmentLength".into(),
            self.limits.mrdsl().to_string(),
        )]
    }

    /// Keys we offer that the peer has not negotiated yet. The initiator offers every key it cares
    /// about; the target offers only keys whose default would violate its limits (so a default-only
    /// initiator still ends up with a legal result) — §6.2, "the target may offer keys".
    pub fn offers(&mut self) -> Vec<(String, String)> {
        let l = self.limits.clone();
        let initiator = self.role == Role::Initiator;
        let d = Negotiated::defaults();
        let mut out: Vec<(&'static str, String)> = Vec::new();
        let digest_offer = |pref: DigestPreference| -> Option<String> {
            match (initiator, pref) {
                (true, p) => Some(p.offer().to_string()),
                (false, DigestPreference::Crc32c) => Some("CRC32C".into()),
                _ => None,
            }
        };
        if let Some(o) = digest_offer(l.header_digest) {
            out.push(("HeaderDigest", o));
        }
        if let Some(o) = digest_offer(l.data_digest) {
            out.push(("DataDigest", o));
        }
        if initiator {
            out.push(("DefaultTime2Wait", l.t2w().to_string()));
            out.push(("DefaultTime2Retain", l.t2r().to_string()));
            out.push(("ErrorRecoveryLevel", "0".into()));
            if !self.discovery {
                out.push(("InitialR2T", yes_no(l.initial_r2t).into()));
                out.push(("ImmediateData", yes_no(l.immediate_data).into()));
                out.push(("MaxBurstLength", l.mbl().to_string()));
                out.push(("FirstBurstLength", l.fbl().to_string()));
                out.push(("MaxConnections", "1".into()));
                out.push(("MaxOutstandingR2T", l.mor2t().to_string()));
                out.push(("DataPDUInOrder", "Yes".into()));
                out.push(("DataSequenceInOrder", "Yes".into()));
            }
        } else if !self.discovery {
            // Target: only where the default would exceed what we can do.
            if !l.immediate_data {
                out.push(("ImmediateData", "No".into()));
            }
            if l.mbl() < d.max_burst_length {
                out.push(("MaxBurstLength", l.mbl().to_string()));
            }
            if l.fbl() < d.first_burst_length {
                out.push(("FirstBurstLength", l.fbl().to_string()));
            }
        }
        let mut result = Vec::new();
        for (k, v) in out {
            if self.seen.insert(k) {
                self.offered.insert(k, v.clone());
                result.push((k.to_string(), v));
            }
        }
        result
    }

    /// The parameters agreed so far (defaults for keys never negotiated).
    pub fn result(&self) -> Negotiated {
        let mut v = self.values.clone();
        v.first_burst_length = v.first_burst_length.min(v.max_burst_length);
        if self.declared {
            v.max_recv_data_segment_length = self.limits.mrdsl();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(n: &mut Negotiator, k: &str, v: &str) -> String {
        match n.respond(k, v).unwrap().unwrap() {
            Answer::Value(s) => s,
            Answer::None => String::new(),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("8192"), Some(8192));
        assert_eq!(parse_number("0x2000"), Some(8192));
        assert_eq!(parse_number("0x"), None);
        assert_eq!(parse_number("-1"), None);
        assert_eq!(parse_number("1 "), None);
        assert_eq!(parse_number("99999999999999999999999"), None);
    }

    #[test]
    fn numeric_rules() {
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), false);
        assert_eq!(answer(&mut n, "MaxBurstLength", "16776192"), "1048576");
        assert_eq!(answer(&mut n, "FirstBurstLength", "1048576"), "262144");
        assert_eq!(answer(&mut n, "DefaultTime2Wait", "0"), "2");
        assert_eq!(answer(&mut n, "DefaultTime2Retain", "0"), "0");
        assert_eq!(answer(&mut n, "MaxConnections", "8"), "1");
        assert_eq!(answer(&mut n, "ErrorRecoveryLevel", "2"), "0");
        assert_eq!(answer(&mut n, "MaxOutstandingR2T", "0"), "Reject");
        assert!(matches!(
            n.respond("MaxBurstLength", "512"),
            Err(NegotiationError::Duplicate(_))
        ));
        let r = n.result();
        assert_eq!(r.max_burst_length, 1 << 20);
        assert_eq!(r.first_burst_length, 262144);
        assert_eq!(r.default_time2wait, 2);
        assert_eq!(r.default_time2retain, 0);
        assert_eq!(r.max_outstanding_r2t, 1);
    }

    #[test]
    fn first_burst_never_exceeds_max_burst() {
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), false);
        assert_eq!(answer(&mut n, "MaxBurstLength", "4096"), "4096");
        assert_eq!(answer(&mut n, "FirstBurstLength", "65536"), "4096");
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), false);
        assert_eq!(answer(&mut n, "FirstBurstLength", "65536"), "65536");
        assert_eq!(answer(&mut n, "MaxBurstLength", "4096"), "4096");
        assert_eq!(n.result().first_burst_length, 4096);
    }

    #[test]
    fn boolean_rules() {
        let limits = Limits {
            immediate_data: false,
            initial_r2t: false,
            ..Limits::target_default()
        };
        let mut n = Negotiator::new(Role::Target, limits, false);
        assert_eq!(answer(&mut n, "ImmediateData", "Yes"), "No");
        assert_eq!(answer(&mut n, "InitialR2T", "No"), "No");
        assert_eq!(answer(&mut n, "DataPDUInOrder", "No"), "Yes");
        assert_eq!(answer(&mut n, "DataSequenceInOrder", "maybe"), "Reject");
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), false);
        assert_eq!(answer(&mut n, "ImmediateData", "No"), "No");
        assert_eq!(answer(&mut n, "InitialR2T", "No"), "Yes");
    }

    #[test]
    fn digests() {
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), false);
        assert_eq!(answer(&mut n, "HeaderDigest", "CRC32C,None"), "CRC32C");
        assert_eq!(answer(&mut n, "DataDigest", "None,CRC32C"), "None");
        let limits = Limits {
            header_digest: DigestPreference::None,
            ..Limits::target_default()
        };
        let mut n = Negotiator::new(Role::Target, limits, false);
        assert_eq!(answer(&mut n, "HeaderDigest", "CRC32C"), "Reject");
        assert_eq!(answer(&mut n, "DataDigest", "MD5,CRC32C"), "CRC32C");
    }

    #[test]
    fn discovery_irrelevant() {
        let mut n = Negotiator::new(Role::Target, Limits::target_default(), true);
        assert_eq!(answer(&mut n, "MaxBurstLength", "4096"), "Irrelevant");
        assert_eq!(answer(&mut n, "HeaderDigest", "None"), "None");
        assert_eq!(answer(&mut n, "MaxRecvDataSegmentLength", "4096"), "");
        assert_eq!(n.result().max_xmit_data_segment_length, 4096);
    }

    #[test]
    fn target_offers_and_answers() {
        let limits = Limits {
            immediate_data: false,
            max_burst_length: 8192,
            first_burst_length: 4096,
            header_digest: DigestPreference::Crc32c,
            ..Limits::target_default()
        };
        let mut n = Negotiator::new(Role::Target, limits, false);
        let offers = n.offers();
        let keys: Vec<_> = offers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "HeaderDigest",
                "ImmediateData",
                "MaxBurstLength",
                "FirstBurstLength"
            ]
        );
        assert!(n.awaiting_answers());
        assert!(n.accept_answer("ImmediateData", "No").unwrap());
        assert!(n.accept_answer("MaxBurstLength", "9000").is_err());
        assert!(n.accept_answer("FirstBurstLength", "2048").unwrap());
        assert!(matches!(
            n.accept_answer("HeaderDigest", "Reject"),
            Err(NegotiationError::Refused(_))
        ));
    }
}
