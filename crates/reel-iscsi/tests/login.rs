//! Login, negotiation and SendTargets: initiator and target machines pumped against each other
//! through encoded bytes (Pdu::to_bytes → Framer::decode → Pdu::parse).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use reel_iscsi::chap::{
    ChapAlgorithm, ChapCredentials, Secret, chap_response, decode_binary, encode_binary,
};
use reel_iscsi::fuzzing::{fuzz_login, fuzz_pdu};
use reel_iscsi::initiator_login::{
    InitiatorLogin, InitiatorLoginConfig, InitiatorLoginOutcome, InitiatorStep, LoginError,
};
use reel_iscsi::login::{
    LoginOutcome, LoginStep, PortalConfig, SessionKind, TargetConfig, TargetLogin, status,
};
use reel_iscsi::params::{DigestPreference, Limits};
use reel_iscsi::pdu::{
    FrameLimits, Framer, LoginRequest, LoginResponse, Pdu, RESERVED_TAG, TextRequest,
};
use reel_iscsi::text::{TextResponder, encode_pairs, parse_pairs};

const INITIATOR: &str = "iqn.2024-01.org.example:initiator";

fn wire(pdu: Pdu) -> Pdu {
    let limits = FrameLimits::default();
    let bytes = pdu.to_bytes(&limits);
    let mut buf = BytesMut::from(&bytes[..]);
    let frame = Framer::new(limits).decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    Pdu::parse(frame).unwrap()
}

fn wire_req(r: LoginRequest) -> LoginRequest {
    match wire(Pdu::LoginRequest(r)) {
        Pdu::LoginRequest(r) => r,
        other => panic!("{other:?}"),
    }
}

fn wire_resp(r: LoginResponse) -> LoginResponse {
    match wire(Pdu::LoginResponse(r)) {
        Pdu::LoginResponse(r) => r,
        other => panic!("{other:?}"),
    }
}

fn target(name: &str) -> TargetConfig {
    TargetConfig {
        name: name.into(),
        alias: None,
        allow_initiators: None,
        chap: None,
        mutual_chap: None,
        portal_group_tag: 1,
    }
}

fn portal(targets: Vec<TargetConfig>) -> Arc<PortalConfig> {
    Arc::new(PortalConfig {
        targets,
        addresses: vec!["127.0.0.1:3260".into()],
        limits: Limits::target_default(),
        discovery_chap: None,
        redirects: Default::default(),
    })
}

fn config(target_name: Option<&str>) -> InitiatorLoginConfig {
    InitiatorLoginConfig {
        initiator_name: INITIATOR.into(),
        initiator_alias: Some("tester".into()),
        target_name: target_name.map(str::to_string),
        isid: [0x80, 0x12, 0x34, 0x56, 0x78, 0x9a],
        tsih: 0,
        cid: 0,
        chap: None,
        mutual_chap: None,
        limits: Limits::initiator_default(),
        cmd_sn: 1000,
    }
}

struct Run {
    initiator: Result<InitiatorLoginOutcome, LoginError>,
    target: Option<LoginOutcome>,
    responses: Vec<LoginResponse>,
}

fn run_with(portal: Arc<PortalConfig>, mut initiator: InitiatorLogin) -> Run {
    let mut target = TargetLogin::new(portal, [1; 32], 100);
    let mut req = initiator.start();
    let mut responses = Vec::new();
    for _ in 0..50 {
        match target.on_request(wire_req(req)) {
            LoginStep::Continue(resp) => {
                let resp = wire_resp(resp);
                responses.push(resp.clone());
                match initiator.on_response(resp) {
                    Ok(InitiatorStep::Send(r)) => req = r,
                    Ok(InitiatorStep::Done(_)) => panic!("initiator done before the target"),
                    Err(e) => {
                        return Run {
                            initiator: Err(e),
                            target: None,
                            responses,
                        };
                    }
                }
            }
            LoginStep::Fail(resp) => {
                assert_ne!(resp.status_class, 0);
                let resp = wire_resp(resp);
                responses.push(resp.clone());
                let e = initiator.on_response(resp).unwrap_err();
                return Run {
                    initiator: Err(e),
                    target: None,
                    responses,
                };
            }
            LoginStep::Complete(mut resp, outcome) => {
                resp.tsih = 0x1234;
                let resp = wire_resp(resp);
                responses.push(resp.clone());
                let result = match initiator.on_response(resp) {
                    Ok(InitiatorStep::Done(o)) => Ok(o),
                    Ok(InitiatorStep::Send(r)) => {
                        panic!("initiator wants more after completion: {r:?}")
                    }
                    Err(e) => Err(e),
                };
                return Run {
                    initiator: result,
                    target: Some(outcome),
                    responses,
                };
            }
        }
    }
    panic!("login did not finish");
}

fn run(portal: Arc<PortalConfig>, config: InitiatorLoginConfig) -> Run {
    run_with(portal, InitiatorLogin::new(config, [2; 32]))
}

fn status_of(run: &Run) -> u16 {
    match &run.initiator {
        Err(e) => e
            .status_code()
            .unwrap_or_else(|| panic!("not a status error: {e}")),
        Ok(_) => panic!("login succeeded"),
    }
}

#[test]
fn no_auth_normal_session() {
    let mut t = target("iqn.2024-01.org.example:tape");
    t.alias = Some("tape0".into());
    t.portal_group_tag = 7;
    let r = run(
        portal(vec![t]),
        config(Some("iqn.2024-01.org.example:tape")),
    );
    let i = r.initiator.unwrap();
    let t = r.target.unwrap();
    assert_eq!(t.kind, SessionKind::Normal { target: 0 });
    assert_eq!(t.initiator_name, INITIATOR);
    assert_eq!(t.initiator_alias.as_deref(), Some("tester"));
    assert_eq!(t.isid, [0x80, 0x12, 0x34, 0x56, 0x78, 0x9a]);
    assert_eq!(t.tsih, 0);
    assert_eq!(t.exp_cmd_sn, 1000);
    assert_eq!(i.tsih, 0x1234);
    assert_eq!(i.target_alias.as_deref(), Some("tape0"));
    assert_eq!(i.cmd_sn, 1000);
    assert_eq!(i.max_cmd_sn, 1000 + 63);
    // StatSN: one per login response, starting at the initial value.
    let sns: Vec<u32> = r.responses.iter().map(|r| r.stat_sn).collect();
    assert_eq!(sns, (100..100 + sns.len() as u32).collect::<Vec<_>>());
    assert_eq!(t.stat_sn, 100 + sns.len() as u32);
    assert_eq!(i.exp_stat_sn, t.stat_sn);
    // Both sides agree; each side's receive limit is the other's transmit limit.
    let (tn, inn) = (&t.negotiated, &i.negotiated);
    assert_eq!(tn.max_recv_data_segment_length, 262_144);
    assert_eq!(inn.max_xmit_data_segment_length, 262_144);
    assert_eq!(
        inn.max_recv_data_segment_length,
        tn.max_xmit_data_segment_length
    );
    for n in [tn, inn] {
        assert!(!n.header_digest && !n.data_digest);
        assert_eq!(n.max_burst_length, 1 << 20);
        assert_eq!(n.first_burst_length, 262_144);
        assert!(n.immediate_data);
        assert!(n.initial_r2t);
        assert_eq!(n.max_connections, 1);
        assert_eq!(n.error_recovery_level, 0);
    }
    assert_eq!(tn.max_burst_length, inn.max_burst_length);
    // TargetPortalGroupTag is in the first response (§13.9).
    let first = parse_pairs(&r.responses[0].data).unwrap();
    assert!(first.contains(&("TargetPortalGroupTag".into(), "7".into())));
    for resp in &r.responses {
        assert_eq!(resp.version_max, 0);
        assert_eq!(resp.version_active, 0);
        assert_eq!(resp.exp_cmd_sn, 1000);
    }
}

/// `new_session` is what every reel initiator without CHAP logs in with: a random-type ISID
/// (RFC 7143 §11.12.5) carrying the qualifier, TSIH 0, and the first CmdSN 1.
#[test]
fn new_session_logs_in_with_its_isid_qualifier() {
    let name = "iqn.2024-01.org.example:tape";
    let r = run(
        portal(vec![target(name)]),
        InitiatorLoginConfig::new_session(INITIATOR, Some(name), 0x0102),
    );
    let t = r.target.unwrap();
    assert_eq!(t.kind, SessionKind::Normal { target: 0 });
    assert_eq!(t.isid, [0x80, 0, 0, 0, 0x01, 0x02]);
    assert_eq!(t.tsih, 0);
    assert_eq!(t.exp_cmd_sn, 1);
    assert_eq!(t.initiator_alias, None);
    assert_eq!(r.initiator.unwrap().cmd_sn, 1);
}

fn chap_target(mutual: bool) -> TargetConfig {
    let mut t = target("iqn.2024-01.org.example:secure");
    t.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    if mutual {
        t.mutual_chap = Some(ChapCredentials::new("target-bob", "bob-secret-4567"));
    }
    t
}

#[test]
fn one_way_chap() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    let r = run(portal(vec![chap_target(false)]), c);
    r.initiator.unwrap();
    assert!(r.target.is_some());
    // The challenge went out as hex of 16 bytes for MD5.
    let challenge = r
        .responses
        .iter()
        .flat_map(|resp| parse_pairs(&resp.data).unwrap())
        .find(|(k, _)| k == "CHAP_C")
        .unwrap()
        .1;
    assert_eq!(decode_binary(&challenge, 1024).unwrap().len(), 16);
}

/// open-iscsi refuses operational keys in any security-stage response, including the one
/// that leaves the stage ("can't accept MaxRecvDataSegmentLength in security stage").
#[test]
fn security_stage_responses_carry_no_operational_keys() {
    for mutual in [false, true] {
        let mut c = config(Some("iqn.2024-01.org.example:secure"));
        c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
        if mutual {
            c.mutual_chap = Some(ChapCredentials::new("target-bob", "bob-secret-4567"));
        }
        let r = run(portal(vec![chap_target(mutual)]), c);
        let outcome = r.initiator.unwrap();
        let mut declared_in_operational = false;
        for resp in &r.responses {
            for (key, _) in parse_pairs(&resp.data).unwrap() {
                if resp.csg == 0 {
                    assert!(
                        key == "AuthMethod"
                            || key.starts_with("CHAP_")
                            || key == "TargetPortalGroupTag"
                            || key == "TargetAlias",
                        "operational key {key} in a security-stage response (mutual: {mutual})"
                    );
                } else if key == "MaxRecvDataSegmentLength" {
                    declared_in_operational = true;
                }
            }
        }
        assert!(
            declared_in_operational,
            "the target declares MaxRecvDataSegmentLength in the operational stage"
        );
        assert_eq!(outcome.negotiated.max_xmit_data_segment_length, 262_144);
    }
}

#[test]
fn one_way_chap_sha256() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    let initiator = InitiatorLogin::new(c, [3; 32])
        .with_chap_algorithms(vec![ChapAlgorithm::Sha256, ChapAlgorithm::Md5]);
    let r = run_with(portal(vec![chap_target(false)]), initiator);
    r.initiator.unwrap();
    let alg = r
        .responses
        .iter()
        .flat_map(|resp| parse_pairs(&resp.data).unwrap())
        .find(|(k, _)| k == "CHAP_A")
        .unwrap()
        .1;
    assert_eq!(alg, "7");
}

#[test]
fn mutual_chap() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    c.mutual_chap = Some(ChapCredentials::new("target-bob", "bob-secret-4567"));
    let r = run(portal(vec![chap_target(true)]), c);
    r.initiator.unwrap();
    assert!(r.target.is_some());
}

#[test]
fn mutual_chap_wrong_target_secret() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    c.mutual_chap = Some(ChapCredentials::new("target-bob", "not-bobs-secret"));
    let r = run(portal(vec![chap_target(true)]), c);
    assert_eq!(r.initiator.unwrap_err(), LoginError::MutualAuthFailed);
}

#[test]
fn mutual_chap_without_target_credentials() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    c.mutual_chap = Some(ChapCredentials::new("target-bob", "bob-secret-4567"));
    let r = run(portal(vec![chap_target(false)]), c);
    assert_eq!(status_of(&r), status::AUTHENTICATION_FAILURE);
}

#[test]
fn wrong_secret_and_wrong_user() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "wrong-secret-000"));
    let r = run(portal(vec![chap_target(false)]), c);
    assert_eq!(status_of(&r), status::AUTHENTICATION_FAILURE);
    let err = r.initiator.unwrap_err();
    assert!(err.to_string().contains("authentication failure"), "{err}");
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("mallory", "alice-secret-123"));
    let r = run(portal(vec![chap_target(false)]), c);
    assert_eq!(status_of(&r), status::AUTHENTICATION_FAILURE);
}

#[test]
fn chap_required_but_not_offered() {
    let r = run(
        portal(vec![chap_target(false)]),
        config(Some("iqn.2024-01.org.example:secure")),
    );
    assert_eq!(status_of(&r), status::AUTHENTICATION_FAILURE);
}

#[test]
fn wrong_target_and_acl() {
    let r = run(
        portal(vec![target("iqn.2024-01.org.example:a")]),
        config(Some("iqn.2024-01.org.example:b")),
    );
    assert_eq!(status_of(&r), status::NOT_FOUND);

    let mut t = target("iqn.2024-01.org.example:a");
    t.allow_initiators = Some(vec!["iqn.2024-01.org.example:someone-else".into()]);
    let r = run(
        portal(vec![t.clone()]),
        config(Some("iqn.2024-01.org.example:a")),
    );
    assert_eq!(status_of(&r), status::AUTHORIZATION_FAILURE);

    // Names compare case-insensitively.
    t.allow_initiators = Some(vec![INITIATOR.to_uppercase()]);
    let r = run(portal(vec![t]), config(Some("IQN.2024-01.org.example:A")));
    r.initiator.unwrap();
}

fn request(csg: u8, transit: bool, nsg: u8, pairs: &[(&str, &str)]) -> LoginRequest {
    LoginRequest {
        transit,
        continue_: false,
        csg,
        nsg: if transit { nsg } else { 0 },
        version_max: 0,
        version_min: 0,
        isid: [0x80, 0, 0, 0, 0, 1],
        tsih: 0,
        itt: 5,
        cid: 1,
        cmd_sn: 7,
        exp_stat_sn: 0,
        data: encode_pairs(pairs),
    }
}

fn expect_fail(step: LoginStep, code: u16) -> LoginResponse {
    match step {
        LoginStep::Fail(resp) => {
            assert_eq!(
                (resp.status_class as u16) << 8 | resp.status_detail as u16,
                code,
                "{resp:?}"
            );
            resp
        }
        other => panic!("expected failure {code:#06x}, got {other:?}"),
    }
}

fn expect_continue(step: LoginStep) -> (LoginResponse, Vec<(String, String)>) {
    match step {
        LoginStep::Continue(resp) => {
            let pairs = parse_pairs(&resp.data).unwrap();
            (resp, pairs)
        }
        other => panic!("expected continue, got {other:?}"),
    }
}

fn value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

const T: &str = "iqn.2024-01.org.example:t";

fn leading(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![("InitiatorName", INITIATOR), ("TargetName", T)];
    v.extend_from_slice(extra);
    v
}

#[test]
fn missing_parameters_and_versions() {
    let p = portal(vec![target(T)]);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let resp = expect_fail(
        t.on_request(request(0, true, 1, &[("TargetName", T)])),
        status::MISSING_PARAMETER,
    );
    assert_eq!(resp.itt, 5);
    assert_eq!(resp.isid, [0x80, 0, 0, 0, 0, 1]);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_fail(
        t.on_request(request(0, true, 1, &[("InitiatorName", INITIATOR)])),
        status::MISSING_PARAMETER,
    );
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let mut req = request(0, true, 1, &leading(&[]));
    req.version_min = 1;
    req.version_max = 2;
    expect_fail(t.on_request(req), status::UNSUPPORTED_VERSION);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_fail(
        t.on_request(request(0, true, 1, &leading(&[("SessionType", "Bogus")]))),
        status::SESSION_TYPE_NOT_SUPPORTED,
    );
    // T and C together, a reserved stage, a backwards transition: initiator errors.
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let mut req = request(0, true, 1, &leading(&[]));
    req.continue_ = true;
    expect_fail(t.on_request(req), status::INITIATOR_ERROR);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_fail(
        t.on_request(request(2, false, 0, &leading(&[]))),
        status::INITIATOR_ERROR,
    );
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_fail(
        t.on_request(request(1, true, 1, &leading(&[]))),
        status::INITIATOR_ERROR,
    );
    // Discovery may carry a TargetName (ignored) and needs no TargetName.
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_continue(t.on_request(request(
        0,
        true,
        1,
        &[
            ("InitiatorName", INITIATOR),
            ("SessionType", "Discovery"),
            ("TargetName", "iqn.x:nope"),
        ],
    )));
}

#[test]
fn isid_and_cid_must_not_change() {
    let p = portal(vec![target(T)]);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_continue(t.on_request(request(0, false, 0, &leading(&[]))));
    let mut req = request(0, false, 0, &[]);
    req.cid = 9;
    expect_fail(t.on_request(req), status::INITIATOR_ERROR);
    let mut t = TargetLogin::new(p, [0; 32], 1);
    expect_continue(t.on_request(request(0, false, 0, &leading(&[]))));
    let mut req = request(0, false, 0, &[]);
    req.isid[5] = 2;
    expect_fail(t.on_request(req), status::INITIATOR_ERROR);
}

#[test]
fn skipping_security() {
    // No authentication configured: starting in the operational stage is fine.
    let p = portal(vec![target(T)]);
    let mut t = TargetLogin::new(p, [0; 32], 1);
    match t.on_request(request(
        1,
        true,
        3,
        &leading(&[("MaxRecvDataSegmentLength", "65536")]),
    )) {
        LoginStep::Complete(resp, o) => {
            assert!(resp.transit);
            assert_eq!(resp.csg, 1);
            assert_eq!(resp.nsg, 3);
            assert_eq!(o.negotiated.max_xmit_data_segment_length, 65536);
            let pairs = parse_pairs(&resp.data).unwrap();
            assert_eq!(value(&pairs, "MaxRecvDataSegmentLength"), Some("262144"));
        }
        other => panic!("{other:?}"),
    }
    // CHAP configured: skipping the security stage is an authentication failure.
    let mut ct = chap_target(false);
    ct.name = T.into();
    let mut t = TargetLogin::new(portal(vec![ct.clone()]), [0; 32], 1);
    expect_fail(
        t.on_request(request(1, true, 3, &leading(&[]))),
        status::AUTHENTICATION_FAILURE,
    );
    // ... and so is asking to leave the security stage without AuthMethod.
    let mut t = TargetLogin::new(portal(vec![ct]), [0; 32], 1);
    expect_fail(
        t.on_request(request(0, true, 1, &leading(&[]))),
        status::AUTHENTICATION_FAILURE,
    );
}

#[test]
fn chap_reflection_is_refused() {
    let mut ct = chap_target(true);
    ct.name = T.into();
    let mut t = TargetLogin::new(portal(vec![ct]), [9; 32], 1);
    expect_continue(t.on_request(request(
        0,
        false,
        0,
        &leading(&[("AuthMethod", "CHAP,None")]),
    )));
    let (_, pairs) = expect_continue(t.on_request(request(0, false, 0, &[("CHAP_A", "6,5")])));
    assert_eq!(value(&pairs, "CHAP_A"), Some("5"));
    let id: u8 = value(&pairs, "CHAP_I").unwrap().parse().unwrap();
    let c = value(&pairs, "CHAP_C").unwrap().to_string();
    let challenge = decode_binary(&c, 1024).unwrap();
    let r = chap_response(
        ChapAlgorithm::Md5,
        id,
        &"alice-secret-123".into(),
        &challenge,
    );
    let r = encode_binary(&r);
    let step = t.on_request(request(
        0,
        true,
        1,
        &[
            ("CHAP_N", "alice"),
            ("CHAP_R", &r),
            ("CHAP_I", "1"),
            ("CHAP_C", &c),
        ],
    ));
    expect_fail(step, status::AUTHENTICATION_FAILURE);
}

#[test]
fn chap_base64_response_and_unsupported_algorithm() {
    let mut ct = chap_target(false);
    ct.name = T.into();
    let p = portal(vec![ct]);
    let mut t = TargetLogin::new(p.clone(), [9; 32], 1);
    expect_continue(t.on_request(request(0, false, 0, &leading(&[("AuthMethod", "CHAP")]))));
    let (_, pairs) = expect_continue(t.on_request(request(0, false, 0, &[("CHAP_A", "5")])));
    let id: u8 = value(&pairs, "CHAP_I").unwrap().parse().unwrap();
    let challenge = decode_binary(value(&pairs, "CHAP_C").unwrap(), 1024).unwrap();
    let r = chap_response(
        ChapAlgorithm::Md5,
        id,
        &"alice-secret-123".into(),
        &challenge,
    );
    let r = format!("0b{}", reel_iscsi::chap::encode_base64(&r));
    let (resp, _) =
        expect_continue(t.on_request(request(0, true, 1, &[("CHAP_N", "alice"), ("CHAP_R", &r)])));
    assert!(resp.transit);
    assert_eq!(resp.nsg, 1);

    let mut t = TargetLogin::new(p, [9; 32], 1);
    expect_continue(t.on_request(request(0, false, 0, &leading(&[("AuthMethod", "CHAP")]))));
    expect_fail(
        t.on_request(request(0, false, 0, &[("CHAP_A", "6,8")])),
        status::AUTHENTICATION_FAILURE,
    );
}

fn digest_limits(header: DigestPreference, data: DigestPreference) -> Limits {
    Limits {
        header_digest: header,
        data_digest: data,
        ..Limits::target_default()
    }
}

#[test]
fn digests_negotiated_both_ways() {
    use DigestPreference::*;
    let cases = [
        (PreferCrc32c, PreferCrc32c, Some(true)),
        (PreferNone, PreferCrc32c, Some(true)),
        (PreferCrc32c, PreferNone, Some(false)),
        (None, PreferCrc32c, Some(false)),
        (Crc32c, PreferNone, Some(true)),
        (Crc32c, None, Option::None),
        (None, Crc32c, Option::None),
        (PreferNone, Crc32c, Some(true)),
    ];
    for (target_pref, initiator_pref, expect) in cases {
        let mut p = PortalConfig::clone(&portal(vec![target(T)]));
        p.limits = digest_limits(target_pref, target_pref);
        let mut c = config(Some(T));
        c.limits.header_digest = initiator_pref;
        c.limits.data_digest = initiator_pref;
        let r = run(Arc::new(p), c);
        match expect {
            Some(on) => {
                let i = r
                    .initiator
                    .unwrap_or_else(|e| panic!("{target_pref:?}/{initiator_pref:?}: {e}"));
                let t = r.target.unwrap();
                assert_eq!(
                    i.negotiated.header_digest, on,
                    "{target_pref:?}/{initiator_pref:?}"
                );
                assert_eq!(i.negotiated.data_digest, on);
                assert_eq!(t.negotiated.header_digest, on);
                assert_eq!(t.negotiated.data_digest, on);
            }
            Option::None => assert!(r.initiator.is_err(), "{target_pref:?}/{initiator_pref:?}"),
        }
    }
}

/// Asserts the target's answer to each key.
fn assert_answers(pairs: &[(String, String)], expected: &[(&str, &str)]) {
    for (key, answer) in expected {
        assert_eq!(value(pairs, key), Some(*answer), "{key}");
    }
}

/// Logs in with the given operational keys (security skipped) and returns the answers.
fn negotiate(
    limits: Limits,
    discovery: bool,
    keys: &[(&str, &str)],
) -> Result<(Vec<(String, String)>, LoginOutcome), u16> {
    let mut p = PortalConfig::clone(&portal(vec![target(T)]));
    p.limits = limits;
    let mut t = TargetLogin::new(Arc::new(p), [0; 32], 1);
    let mut pairs: Vec<(&str, &str)> = vec![("InitiatorName", INITIATOR)];
    if discovery {
        pairs.push(("SessionType", "Discovery"));
    } else {
        pairs.push(("TargetName", T));
    }
    pairs.extend_from_slice(keys);
    match t.on_request(request(1, true, 3, &pairs)) {
        LoginStep::Complete(resp, o) => Ok((parse_pairs(&resp.data).unwrap(), o)),
        LoginStep::Continue(resp) => panic!("unexpected continue {resp:?}"),
        LoginStep::Fail(resp) => Err((resp.status_class as u16) << 8 | resp.status_detail as u16),
    }
}

#[test]
fn numeric_rules() {
    let (pairs, o) = negotiate(
        Limits::target_default(),
        false,
        &[
            ("MaxBurstLength", "100"),
            ("FirstBurstLength", "2000000"),
            ("DefaultTime2Wait", "3601"),
            ("DefaultTime2Retain", "3600"),
            ("MaxOutstandingR2T", "16"),
            ("MaxConnections", "4"),
            ("ErrorRecoveryLevel", "2"),
        ],
    )
    .unwrap();
    // Below the minimum of 512 → Reject; the default stays.
    assert_eq!(value(&pairs, "MaxBurstLength"), Some("Reject"));
    assert_eq!(o.negotiated.max_burst_length, 262_144);
    // FirstBurstLength ≤ MaxBurstLength (the default 256 KiB here) and our own limit.
    assert_answers(
        &pairs,
        &[
            ("FirstBurstLength", "262144"),
            // DefaultTime2Wait above 3600 → Reject.
            ("DefaultTime2Wait", "Reject"),
            ("DefaultTime2Retain", "20"),
            ("MaxOutstandingR2T", "1"),
            ("MaxConnections", "1"),
            ("ErrorRecoveryLevel", "0"),
        ],
    );

    let (pairs, o) = negotiate(
        Limits::target_default(),
        false,
        &[
            ("MaxBurstLength", "8192"),
            ("FirstBurstLength", "16384"),
            ("DefaultTime2Wait", "10"),
        ],
    )
    .unwrap();
    assert_answers(
        &pairs,
        &[
            ("MaxBurstLength", "8192"),
            ("FirstBurstLength", "8192"),
            // DefaultTime2Wait uses the maximum.
            ("DefaultTime2Wait", "10"),
        ],
    );
    assert_eq!(o.negotiated.max_burst_length, 8192);
    assert_eq!(o.negotiated.first_burst_length, 8192);
    assert_eq!(o.negotiated.default_time2wait, 10);
}

#[test]
fn boolean_rules() {
    let limits = Limits {
        immediate_data: true,
        initial_r2t: false,
        ..Limits::target_default()
    };
    let (pairs, o) = negotiate(
        limits.clone(),
        false,
        &[
            ("ImmediateData", "No"),
            ("InitialR2T", "No"),
            ("DataPDUInOrder", "No"),
            ("DataSequenceInOrder", "Yes"),
        ],
    )
    .unwrap();
    assert_answers(
        &pairs,
        &[
            ("ImmediateData", "No"),   // AND
            ("InitialR2T", "No"),      // OR of No, No
            ("DataPDUInOrder", "Yes"), // OR with our Yes
            ("DataSequenceInOrder", "Yes"),
        ],
    );
    assert!(!o.negotiated.immediate_data);
    assert!(!o.negotiated.initial_r2t);
    let (pairs, o) = negotiate(
        Limits::target_default(),
        false,
        &[("ImmediateData", "Yes"), ("InitialR2T", "No")],
    )
    .unwrap();
    assert_eq!(value(&pairs, "ImmediateData"), Some("Yes"));
    assert_eq!(value(&pairs, "InitialR2T"), Some("Yes"));
    assert!(o.negotiated.initial_r2t);
}

#[test]
fn not_understood_reject_irrelevant() {
    let (pairs, _) = negotiate(
        Limits::target_default(),
        false,
        &[
            ("X-com.example.Feature", "1"),
            ("SomethingNew", "Yes"),
            ("MaxConnections", "lots"),
            ("HeaderDigest", "MD5"),
            ("ImmediateData", "Maybe"),
            ("IFMarker", "No"),
            ("OFMarkInt", "2048~4096"),
        ],
    )
    .unwrap();
    assert_answers(
        &pairs,
        &[
            ("X-com.example.Feature", "NotUnderstood"),
            ("SomethingNew", "NotUnderstood"),
            ("MaxConnections", "Reject"),
            ("HeaderDigest", "Reject"),
            ("ImmediateData", "Reject"),
            ("IFMarker", "No"),
            ("OFMarkInt", "Reject"),
        ],
    );
    let (pairs, _) = negotiate(
        Limits::target_default(),
        true,
        &[
            ("MaxBurstLength", "8192"),
            ("ImmediateData", "Yes"),
            ("DefaultTime2Wait", "0"),
        ],
    )
    .unwrap();
    assert_answers(
        &pairs,
        &[
            ("MaxBurstLength", "Irrelevant"),
            ("ImmediateData", "Irrelevant"),
            ("DefaultTime2Wait", "2"),
        ],
    );
    // No TargetPortalGroupTag for discovery sessions.
    assert_eq!(value(&pairs, "TargetPortalGroupTag"), None);
}

#[test]
fn duplicate_and_forbidden_keys() {
    assert_eq!(
        negotiate(
            Limits::target_default(),
            false,
            &[("MaxBurstLength", "8192"), ("MaxBurstLength", "8192")]
        )
        .unwrap_err(),
        status::INITIATOR_ERROR
    );
    assert_eq!(
        negotiate(Limits::target_default(), false, &[("TargetAlias", "me")]).unwrap_err(),
        status::INITIATOR_ERROR
    );
    assert_eq!(
        negotiate(Limits::target_default(), false, &[("SendTargets", "All")]).unwrap_err(),
        status::INITIATOR_ERROR
    );
    assert_eq!(
        negotiate(Limits::target_default(), false, &[("AuthMethod", "None")]).unwrap_err(),
        status::INITIATOR_ERROR
    );
    // Offered again in a later PDU.
    let p = portal(vec![target(T)]);
    let mut t = TargetLogin::new(p, [0; 32], 1);
    expect_continue(t.on_request(request(
        1,
        false,
        0,
        &leading(&[("MaxBurstLength", "8192")]),
    )));
    expect_fail(
        t.on_request(request(1, true, 3, &[("MaxBurstLength", "4096")])),
        status::INITIATOR_ERROR,
    );
}

#[test]
fn target_offers_keys_the_initiator_left_out() {
    let limits = Limits {
        immediate_data: false,
        max_burst_length: 65536,
        first_burst_length: 16384,
        ..Limits::target_default()
    };
    let mut p = PortalConfig::clone(&portal(vec![target(T)]));
    p.limits = limits;
    let p = Arc::new(p);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    // The initiator asks to jump straight to the full-feature phase: the target leaves the
    // security stage for the operational one instead (no operational keys in security PDUs).
    let (resp, pairs) =
        expect_continue(t.on_request(request(0, true, 3, &leading(&[("AuthMethod", "None")]))));
    assert!(
        resp.transit && resp.nsg == 1,
        "target goes through the operational stage"
    );
    assert_eq!(value(&pairs, "MaxRecvDataSegmentLength"), None);
    let (resp, pairs) = expect_continue(t.on_request(request(1, true, 3, &[])));
    assert!(!resp.transit, "target must wait for answers to its offers");
    assert_answers(
        &pairs,
        &[
            ("ImmediateData", "No"),
            ("MaxBurstLength", "65536"),
            ("FirstBurstLength", "16384"),
            ("MaxRecvDataSegmentLength", "262144"),
        ],
    );
    match t.on_request(request(
        1,
        true,
        3,
        &[
            ("ImmediateData", "No"),
            ("MaxBurstLength", "65536"),
            ("FirstBurstLength", "8192"),
        ],
    )) {
        LoginStep::Complete(_, o) => {
            assert!(!o.negotiated.immediate_data);
            assert_eq!(o.negotiated.max_burst_length, 65536);
            assert_eq!(o.negotiated.first_burst_length, 8192);
        }
        other => panic!("{other:?}"),
    }
    // Not answering the offers is an initiator error.
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    expect_continue(t.on_request(request(0, true, 3, &leading(&[("AuthMethod", "None")]))));
    expect_continue(t.on_request(request(1, true, 3, &[])));
    expect_fail(
        t.on_request(request(1, true, 3, &[])),
        status::INITIATOR_ERROR,
    );
    // Our own initiator answers offers it did not expect.
    let mut c = config(Some(T));
    c.limits.immediate_data = true;
    let r = run(p, c);
    let i = r.initiator.unwrap();
    assert!(!i.negotiated.immediate_data);
    assert_eq!(i.negotiated.max_burst_length, 65536);
    assert_eq!(r.target.unwrap().negotiated, {
        let mut n = i.negotiated.clone();
        std::mem::swap(
            &mut n.max_recv_data_segment_length,
            &mut n.max_xmit_data_segment_length,
        );
        n
    });
}

#[test]
fn multi_pdu_login_text() {
    let p = portal(vec![target(T)]);
    let mut t = TargetLogin::new(p, [0; 32], 1);
    let long = "x".repeat(200);
    let mut keys: Vec<(&str, &str)> = leading(&[("AuthMethod", "None")]);
    keys.push(("X-long", &long));
    let full = encode_pairs(&keys);
    let (a, b) = full.split_at(37);
    let mut first = request(0, false, 0, &[]);
    first.continue_ = true;
    first.data = Bytes::copy_from_slice(a);
    let (resp, pairs) = expect_continue(t.on_request(wire_req(first)));
    assert!(pairs.is_empty());
    assert!(!resp.transit);
    let mut second = request(0, true, 1, &[]);
    second.data = Bytes::copy_from_slice(b);
    let (resp, pairs) = expect_continue(t.on_request(wire_req(second)));
    assert!(resp.transit);
    assert_eq!(value(&pairs, "AuthMethod"), Some("None"));
    assert_eq!(value(&pairs, "X-long"), Some("NotUnderstood"));
    // Too much text in total is refused.
    let mut t = TargetLogin::new(portal(vec![target(T)]), [0; 32], 1);
    let mut step = None;
    for _ in 0..20 {
        let mut r = request(0, false, 0, &[]);
        r.continue_ = true;
        r.data = Bytes::from(vec![b'a'; 8192]);
        match t.on_request(r) {
            LoginStep::Continue(_) => {}
            other => {
                step = Some(other);
                break;
            }
        }
    }
    expect_fail(step.unwrap(), status::INITIATOR_ERROR);
}

fn text_request(itt: u32, ttt: u32, data: &[u8]) -> TextRequest {
    TextRequest {
        immediate: false,
        final_: true,
        continue_: false,
        lun: [0; 8],
        itt,
        ttt,
        cmd_sn: 1,
        exp_stat_sn: 1,
        data: Bytes::copy_from_slice(data),
    }
}

/// Runs one SendTargets exchange, following continuations, and returns the reassembled answer.
fn send_targets(
    responder: &mut TextResponder,
    value: &str,
    max_xmit: u32,
) -> (Vec<(String, String)>, usize) {
    let mut req = text_request(
        42,
        RESERVED_TAG,
        format!("SendTargets={value}\0").as_bytes(),
    );
    let mut text = Vec::new();
    let mut pdus = 0;
    loop {
        let resp = responder.on_request(&req, max_xmit).unwrap();
        let resp = match wire(Pdu::TextResponse(resp)) {
            Pdu::TextResponse(r) => r,
            other => panic!("{other:?}"),
        };
        pdus += 1;
        assert!(resp.data.len() <= max_xmit as usize);
        assert_eq!(resp.itt, 42);
        text.extend_from_slice(&resp.data);
        if resp.final_ {
            assert!(!resp.continue_);
            assert_eq!(resp.ttt, RESERVED_TAG);
            break;
        }
        assert!(resp.continue_);
        assert_ne!(resp.ttt, RESERVED_TAG);
        req = text_request(42, resp.ttt, b"");
        req.final_ = true;
    }
    (parse_pairs(&text).unwrap(), pdus)
}

#[test]
fn discovery_and_send_targets() {
    let mut targets: Vec<TargetConfig> = (0..30)
        .map(|i| target(&format!("iqn.2024-01.org.example:tape{i:02}")))
        .collect();
    targets[3].allow_initiators = Some(vec![INITIATOR.into()]);
    targets[4].allow_initiators = Some(vec!["iqn.2024-01.org.example:other".into()]);
    targets[5].portal_group_tag = 9;
    let mut p = PortalConfig::clone(&portal(targets));
    p.addresses = vec!["127.0.0.1:3260".into(), "[::1]:3260".into()];
    let p = Arc::new(p);

    // Discovery login through both machines.
    let r = run(p.clone(), config(None));
    r.initiator.unwrap();
    assert_eq!(r.target.as_ref().unwrap().kind, SessionKind::Discovery);

    let mut responder = TextResponder::new(p.clone(), None, true).with_initiator_name(INITIATOR);
    let (pairs, pdus) = send_targets(&mut responder, "All", 512);
    assert!(pdus > 1, "answer should need continuation");
    let names: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "TargetName")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(names.len(), 29);
    assert!(names.contains(&"iqn.2024-01.org.example:tape03"));
    assert!(!names.contains(&"iqn.2024-01.org.example:tape04"));
    // Records: TargetName then its addresses with the portal group tag.
    let at = pairs
        .iter()
        .position(|(_, v)| v == "iqn.2024-01.org.example:tape05")
        .unwrap();
    assert_eq!(
        pairs[at + 1],
        ("TargetAddress".into(), "127.0.0.1:3260,9".into())
    );
    assert_eq!(
        pairs[at + 2],
        ("TargetAddress".into(), "[::1]:3260,9".into())
    );
    assert!(
        pairs
            .iter()
            .all(|(k, _)| k == "TargetName" || k == "TargetAddress")
    );

    // One round trip when it fits.
    let (pairs, pdus) = send_targets(&mut responder, "iqn.2024-01.org.example:tape07", 8192);
    assert_eq!(pdus, 1);
    assert_eq!(pairs.len(), 3);
    let (pairs, _) = send_targets(&mut responder, "iqn.2024-01.org.example:tape04", 8192);
    assert!(pairs.is_empty());

    // Without knowing the initiator, ACL'd targets stay hidden.
    let mut anonymous = TextResponder::new(p.clone(), None, true);
    let (pairs, _) = send_targets(&mut anonymous, "All", 65536);
    assert_eq!(pairs.iter().filter(|(k, _)| k == "TargetName").count(), 28);

    // Normal session: only the current target; All is not supported there.
    let mut normal = TextResponder::new(p.clone(), Some(7), false).with_initiator_name(INITIATOR);
    let (pairs, _) = send_targets(&mut normal, "", 8192);
    assert_eq!(
        pairs[0],
        ("TargetName".into(), "iqn.2024-01.org.example:tape07".into())
    );
    assert_eq!(pairs.len(), 3);
    let (pairs, _) = send_targets(&mut normal, "All", 8192);
    assert_eq!(pairs, vec![("SendTargets".into(), "Reject".into())]);
    let (pairs, _) = send_targets(&mut normal, "iqn.2024-01.org.example:tape08", 8192);
    assert!(pairs.is_empty());
}

#[test]
fn text_responder_edge_cases() {
    let p = portal(vec![target(T)]);
    let mut r = TextResponder::new(p, None, true).with_initiator_name(INITIATOR);
    // Unknown keys, login-only keys, FFP MaxRecvDataSegmentLength.
    let resp = r
        .on_request(
            &text_request(
                1,
                RESERVED_TAG,
                b"X-foo=1\0MaxBurstLength=512\0MaxRecvDataSegmentLength=4096\0",
            ),
            8192,
        )
        .unwrap();
    let pairs = parse_pairs(&resp.data).unwrap();
    assert_eq!(value(&pairs, "X-foo"), Some("NotUnderstood"));
    assert_eq!(value(&pairs, "MaxBurstLength"), Some("Reject"));
    assert_eq!(value(&pairs, "MaxRecvDataSegmentLength"), None);
    assert_eq!(r.take_max_xmit_update(), Some(4096));
    assert_eq!(r.take_max_xmit_update(), None);
    // Malformed text and unknown transfer tags are protocol errors.
    assert!(
        r.on_request(&text_request(1, RESERVED_TAG, b"garbage"), 8192)
            .is_err()
    );
    assert!(r.on_request(&text_request(1, 77, b""), 8192).is_err());
    let mut both = text_request(1, RESERVED_TAG, b"");
    both.continue_ = true;
    assert!(r.on_request(&both, 8192).is_err());
    // A multi-PDU request (C=1) is accumulated.
    let mut part = text_request(3, RESERVED_TAG, b"SendTar");
    part.final_ = false;
    part.continue_ = true;
    let ack = r.on_request(&part, 8192).unwrap();
    assert!(!ack.final_ && ack.data.is_empty());
    assert_ne!(ack.ttt, RESERVED_TAG);
    let rest = text_request(3, ack.ttt, b"gets=All\0");
    let resp = r.on_request(&rest, 8192).unwrap();
    assert!(resp.final_);
    assert_eq!(
        value(&parse_pairs(&resp.data).unwrap(), "TargetName"),
        Some(T)
    );
    // A duplicate key is a protocol error.
    assert!(
        r.on_request(
            &text_request(4, RESERVED_TAG, b"SendTargets=All\0SendTargets=All\0"),
            8192
        )
        .is_err()
    );
}

#[test]
fn secrets_absent_from_debug_output() {
    let mut c = config(Some("iqn.2024-01.org.example:secure"));
    c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    c.mutual_chap = Some(ChapCredentials::new("target-bob", "bob-secret-4567"));
    let p = portal(vec![chap_target(true)]);
    let mut dump = format!("{p:?}{c:?}");
    let mut initiator = InitiatorLogin::new(c.clone(), [2; 32]);
    let mut target = TargetLogin::new(p.clone(), [1; 32], 1);
    dump += &format!("{initiator:?}{target:?}");
    let mut req = initiator.start();
    loop {
        dump += &format!("{req:?}");
        let step = target.on_request(req);
        dump += &format!("{step:?}");
        let resp = match step {
            LoginStep::Continue(r) => r,
            LoginStep::Complete(r, o) => {
                dump += &format!("{o:?}");
                let done = initiator.on_response(r).unwrap();
                dump += &format!("{done:?}");
                break;
            }
            LoginStep::Fail(r) => panic!("{r:?}"),
        };
        match initiator.on_response(resp).unwrap() {
            InitiatorStep::Send(r) => req = r,
            InitiatorStep::Done(_) => unreachable!(),
        }
    }
    // Failures too.
    let mut bad = c;
    bad.chap = Some(ChapCredentials::new("alice", "wrong-secret-000"));
    dump += &format!("{:?}", run(p.clone(), bad.clone()).initiator);
    bad.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
    bad.mutual_chap = Some(ChapCredentials::new("target-bob", "wrong-bob-secret"));
    let e = run(p, bad).initiator.unwrap_err();
    dump += &format!("{e:?}{e}");
    for secret in [
        "alice-secret-123",
        "bob-secret-4567",
        "wrong-secret-000",
        "wrong-bob-secret",
    ] {
        assert!(!dump.contains(secret), "{secret} leaked");
        assert!(!dump.contains(&hex_of(secret)), "{secret} leaked as hex");
    }
    assert!(dump.contains("<secret>"));
}

fn hex_of(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn after_failure_everything_fails() {
    let mut t = TargetLogin::new(portal(vec![target(T)]), [0; 32], 1);
    expect_fail(
        t.on_request(request(0, true, 1, &[])),
        status::MISSING_PARAMETER,
    );
    expect_fail(
        t.on_request(request(0, true, 1, &leading(&[]))),
        status::INITIATOR_ERROR,
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pairs_round_trip(pairs in proptest::collection::vec(("[A-Za-z0-9._@+-]{1,63}", "[^\\x00]{0,60}"), 0..20)) {
        let pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(_, v)| v.len() <= 255)
            .map(|(k, v)| (k, v.replace('\0', "")))
            .collect();
        let encoded = encode_pairs(&pairs);
        prop_assert_eq!(parse_pairs(&encoded).unwrap(), pairs);
    }

    #[test]
    fn value_decoders_never_panic(v in "\\PC{0,40}", raw in proptest::collection::vec(any::<u8>(), 0..40)) {
        let _ = decode_binary(&v, 1024);
        let _ = reel_iscsi::chap::parse_identifier(&v);
        let _ = reel_iscsi::params::parse_number(&v);
        let _ = parse_pairs(&raw);
        for prefix in ["0x", "0b", "0X", "0B"] {
            let _ = decode_binary(&format!("{prefix}{v}"), 16);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_target(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_login(&data);
        let mut t = TargetLogin::new(portal(vec![target(T)]), [0; 32], 1);
        let mut req = request(0, false, 0, &[]);
        req.data = Bytes::from(data.clone());
        let _ = t.on_request(req);
        fuzz_pdu(&data);
    }

    #[test]
    fn arbitrary_keys_never_panic_the_target(
        keys in proptest::collection::vec((
            prop_oneof![
                Just("HeaderDigest".to_string()), Just("MaxBurstLength".to_string()),
                Just("FirstBurstLength".to_string()), Just("AuthMethod".to_string()),
                Just("CHAP_A".to_string()), Just("CHAP_R".to_string()), Just("CHAP_N".to_string()),
                Just("CHAP_I".to_string()), Just("CHAP_C".to_string()), Just("ImmediateData".to_string()),
                Just("MaxRecvDataSegmentLength".to_string()), Just("SessionType".to_string()),
                "[A-Za-z]{1,10}",
            ],
            prop_oneof![Just("0x00".to_string()), Just("5".to_string()), Just("CHAP,None".to_string()),
                        Just("Yes".to_string()), "\\PC{0,20}"],
            any::<u8>(),
        ), 0..12),
    ) {
        let mut ct = chap_target(true);
        ct.name = T.into();
        let mut t = TargetLogin::new(portal(vec![ct, target("iqn.x:y")]), [0; 32], 1);
        let first = t.on_request(request(0, false, 0, &leading(&[])));
        prop_assert!(matches!(first, LoginStep::Continue(_)));
        for (k, v, flags) in keys {
            let mut req = request((flags >> 2) & 1, flags & 0x80 != 0, flags & 3, &[(k.as_str(), v.as_str())]);
            req.continue_ = flags & 0x40 != 0 && !req.transit;
            match t.on_request(req) {
                LoginStep::Continue(_) => {}
                LoginStep::Fail(resp) => { prop_assert_ne!(resp.status_class, 0); break; }
                LoginStep::Complete(resp, _) => { prop_assert!(resp.transit); break; }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary Login Responses (flags, stages, status, key=value text) never panic the initiator.
    #[test]
    fn arbitrary_responses_never_panic_the_initiator(
        steps in proptest::collection::vec((
            any::<u8>(),
            any::<u16>(),
            proptest::collection::vec((
                prop_oneof![
                    Just("AuthMethod".to_string()), Just("CHAP_A".to_string()), Just("CHAP_I".to_string()),
                    Just("CHAP_C".to_string()), Just("CHAP_N".to_string()), Just("CHAP_R".to_string()),
                    Just("HeaderDigest".to_string()), Just("MaxBurstLength".to_string()),
                    Just("MaxRecvDataSegmentLength".to_string()), Just("ImmediateData".to_string()),
                    "[A-Za-z_]{1,12}",
                ],
                prop_oneof![Just("CHAP".to_string()), Just("5".to_string()), Just("0x0102".to_string()),
                            Just("None".to_string()), Just("Reject".to_string()), "\\PC{0,16}"],
            ), 0..6),
        ), 1..8),
        chap in any::<bool>(),
        mutual in any::<bool>(),
    ) {
        let mut c = config(if mutual { Some(T) } else { None });
        if chap {
            c.chap = Some(ChapCredentials::new("alice", "alice-secret-123"));
        }
        if mutual {
            c.mutual_chap = Some(ChapCredentials::new("bob", "bob-secret-4567"));
        }
        let mut i = InitiatorLogin::new(c, [5; 32]);
        let first = i.start();
        let mut stage = first.csg;
        for (flags, status, pairs) in steps {
            let resp = LoginResponse {
                transit: flags & 0x80 != 0,
                continue_: flags & 0x40 != 0,
                csg: if flags & 0x20 != 0 { (flags >> 2) & 3 } else { stage },
                nsg: flags & 3,
                version_max: 0,
                version_active: 0,
                isid: first.isid,
                tsih: 1,
                itt: first.itt,
                stat_sn: 1,
                exp_cmd_sn: 1,
                max_cmd_sn: 1,
                status_class: if flags & 0x10 != 0 { (status >> 8) as u8 } else { 0 },
                status_detail: status as u8,
                data: encode_pairs(&pairs),
            };
            match i.on_response(resp) {
                Ok(InitiatorStep::Send(r)) => stage = r.csg,
                // A random target can never prove the mutual secret.
                Ok(InitiatorStep::Done(_)) => {
                    prop_assert!(!mutual);
                    break;
                }
                Err(_) => break,
            }
        }
    }
}

/// A target whose initiator must prove CHAP, under the name [`T`].
fn chap_portal() -> Arc<PortalConfig> {
    let mut ct = chap_target(false);
    ct.name = T.into();
    portal(vec![ct])
}

/// The stage a Login Request claims must be the one the target's state is in (RFC 7143 §6.3,
/// §11.12.3): a stage it did not grant, a reserved stage or the full-feature phase as the
/// current stage is an initiator error (§11.13.5, status 0x0200), which ends the login.
#[test]
fn requests_must_claim_the_stage_the_target_granted() {
    let p = portal(vec![target(T)]);
    // Still in the security stage (no transit asked): claiming the operational stage.
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let (resp, _) = expect_continue(t.on_request(request(0, false, 0, &leading(&[]))));
    assert_eq!((resp.transit, resp.csg), (false, 0));
    expect_fail(
        t.on_request(request(1, true, 3, &[])),
        status::INITIATOR_ERROR,
    );
    expect_fail(
        t.on_request(request(0, true, 1, &[])),
        status::INITIATOR_ERROR,
    );

    // In the operational stage after the target granted it: claiming the security stage again.
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let (resp, _) =
        expect_continue(t.on_request(request(0, true, 1, &leading(&[("AuthMethod", "None")]))));
    assert_eq!((resp.transit, resp.csg, resp.nsg), (true, 0, 1));
    expect_fail(
        t.on_request(request(0, true, 1, &[])),
        status::INITIATOR_ERROR,
    );

    // The full-feature phase can never be the current stage; 2 is reserved as CSG and NSG.
    for (csg, nsg) in [(3, 3), (2, 3), (0, 2), (1, 2)] {
        let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
        let resp = expect_fail(
            t.on_request(request(csg, true, nsg, &leading(&[]))),
            status::INITIATOR_ERROR,
        );
        assert!(!resp.transit);
        assert_eq!(resp.csg, csg & 3);
    }
}

/// A request with the C bit is acknowledged in its own stage with no keys and no transition
/// (§11.12.2); its continuation must stay in that stage.
#[test]
fn a_split_leading_request_keeps_its_stage() {
    let p = portal(vec![target(T)]);
    let text = encode_pairs(&leading(&[("AuthMethod", "None")]));
    let (head, tail) = text.split_at(10);
    let mut t = TargetLogin::new(p.clone(), [0; 32], 1);
    let mut first = request(1, false, 0, &[]);
    first.continue_ = true;
    first.data = Bytes::copy_from_slice(head);
    let (resp, pairs) = expect_continue(t.on_request(first.clone()));
    assert_eq!((resp.transit, resp.csg), (false, 1));
    assert!(pairs.is_empty());
    // The rest claims the security stage: refused.
    let mut rest = request(0, true, 1, &[]);
    rest.data = Bytes::copy_from_slice(tail);
    expect_fail(t.on_request(rest), status::INITIATOR_ERROR);

    // The same split in the security stage goes on normally.
    let mut t = TargetLogin::new(p, [0; 32], 1);
    first.csg = 0;
    expect_continue(t.on_request(first));
    let mut rest = request(0, true, 1, &[]);
    rest.data = Bytes::copy_from_slice(tail);
    let (resp, pairs) = expect_continue(t.on_request(rest));
    assert_eq!((resp.transit, resp.csg, resp.nsg), (true, 0, 1));
    assert_eq!(value(&pairs, "AuthMethod"), Some("None"));
}

/// The security stage is left only once CHAP is complete: until then a request asking to
/// transit is answered without the T bit and the login stays in the security stage (§6.3,
/// §12.1.3); a request from the security stage straight to the full-feature phase is answered
/// with the operational stage, where the target declares its keys (§6.3: a target may answer
/// with a lower NSG).
#[test]
fn security_is_left_only_after_chap_and_only_for_the_operational_stage() {
    let mut t = TargetLogin::new(chap_portal(), [0; 32], 1);
    let (resp, pairs) = expect_continue(t.on_request(request(
        0,
        true,
        1,
        &leading(&[("AuthMethod", "CHAP,None")]),
    )));
    assert_eq!(value(&pairs, "AuthMethod"), Some("CHAP"));
    assert!(!resp.transit, "CHAP has not started");
    let (resp, pairs) = expect_continue(t.on_request(request(0, true, 3, &[("CHAP_A", "5")])));
    assert!(!resp.transit, "CHAP is not complete");
    let id: u8 = value(&pairs, "CHAP_I").unwrap().parse().unwrap();
    let challenge = decode_binary(value(&pairs, "CHAP_C").unwrap(), 1024).unwrap();
    // The operational stage was not granted.
    let early = request(1, true, 3, &[("MaxBurstLength", "65536")]);
    let mut t2 = TargetLogin::new(chap_portal(), [0; 32], 1);
    expect_continue(t2.on_request(request(0, false, 0, &leading(&[("AuthMethod", "CHAP")]))));
    expect_continue(t2.on_request(request(0, false, 0, &[("CHAP_A", "5")])));
    expect_fail(t2.on_request(early), status::INITIATOR_ERROR);

    let secret = Secret::new("alice-secret-123");
    let answer = encode_binary(&chap_response(ChapAlgorithm::Md5, id, &secret, &challenge));
    let (resp, pairs) = expect_continue(t.on_request(request(
        0,
        true,
        3,
        &[("CHAP_N", "alice"), ("CHAP_R", &answer)],
    )));
    assert_eq!((resp.transit, resp.csg, resp.nsg), (true, 0, 1));
    assert_eq!(value(&pairs, "MaxRecvDataSegmentLength"), None);
    // Security keys are refused in the operational stage.
    let mut t3 = TargetLogin::new(portal(vec![target(T)]), [0; 32], 1);
    expect_continue(t3.on_request(request(1, false, 0, &leading(&[]))));
    expect_fail(
        t3.on_request(request(1, false, 0, &[("AuthMethod", "None")])),
        status::INITIATOR_ERROR,
    );
    // The authenticated login goes on in the operational stage, where the target declares its
    // keys, and completes there.
    match t.on_request(request(1, true, 3, &[])) {
        LoginStep::Complete(resp, outcome) => {
            assert_eq!((resp.transit, resp.csg, resp.nsg), (true, 1, 3));
            let pairs = parse_pairs(&resp.data).unwrap();
            assert!(value(&pairs, "MaxRecvDataSegmentLength").is_some());
            assert_eq!(outcome.initiator_name, INITIATOR);
        }
        other => panic!("{other:?}"),
    }
    // The login is over: any further request is refused.
    expect_fail(
        t.on_request(request(1, true, 3, &[])),
        status::INITIATOR_ERROR,
    );
}

/// A Login Response may only move to the stage the initiator asked for, from the stage the
/// initiator is in (§11.13.6); the initiator ends the login otherwise.
#[test]
fn responses_must_follow_the_initiator_stage() {
    let response = |request: &LoginRequest, transit: bool, csg: u8, nsg: u8| LoginResponse {
        transit,
        continue_: false,
        csg,
        nsg,
        version_max: 0,
        version_active: 0,
        isid: request.isid,
        tsih: 1,
        itt: request.itt,
        stat_sn: 1,
        exp_cmd_sn: 1,
        max_cmd_sn: 1,
        status_class: 0,
        status_detail: 0,
        data: encode_pairs(&[("AuthMethod", "None")]),
    };
    let protocol_error = |result: Result<InitiatorStep, LoginError>| {
        assert!(matches!(result, Err(LoginError::Protocol(_))), "{result:?}");
    };
    // Before start: no response is expected, and the login can still start.
    let mut i = InitiatorLogin::new(config(Some(T)), [0; 32]);
    let early = i.start();
    let mut fresh = InitiatorLogin::new(config(Some(T)), [0; 32]);
    protocol_error(fresh.on_response(response(&early, true, 0, 1)));
    assert_eq!(fresh.start(), early);

    // The initiator asked for the operational stage: not further, not back, not reserved.
    for (csg, nsg) in [(0, 3), (0, 0), (0, 2), (1, 3)] {
        let mut i = InitiatorLogin::new(config(Some(T)), [0; 32]);
        let req = i.start();
        assert_eq!((req.transit, req.csg, req.nsg), (true, 0, 1));
        protocol_error(i.on_response(response(&req, true, csg, nsg)));
        // The login is over after the error.
        protocol_error(i.on_response(response(&req, true, 0, 1)));
    }

    // Granted: the next request is in the operational stage and asks for the full-feature phase.
    let req = match i.on_response(response(&early, true, 0, 1)) {
        Ok(InitiatorStep::Send(req)) => req,
        other => panic!("{other:?}"),
    };
    assert_eq!((req.transit, req.csg, req.nsg), (true, 1, 3));
    // A response still in the security stage is refused.
    protocol_error(i.on_response(response(&req, true, 0, 1)));
}

/// The initiator bounds the text of a response split with the C bit (§11.13.2) as the target
/// bounds a split request: a target sending continuation after continuation cannot make it
/// buffer more than the text limit.
#[test]
fn the_initiator_bounds_the_text_of_a_split_response() {
    let mut i = InitiatorLogin::new(config(Some(T)), [0; 32]);
    let first = i.start();
    let piece = LoginResponse {
        transit: false,
        continue_: true,
        csg: 0,
        nsg: 0,
        version_max: 0,
        version_active: 0,
        isid: first.isid,
        tsih: 0,
        itt: first.itt,
        stat_sn: 1,
        exp_cmd_sn: 1,
        max_cmd_sn: 1,
        status_class: 0,
        status_detail: 0,
        data: Bytes::from(vec![b'a'; 8192]),
    };
    for n in 1..=20 {
        match i.on_response(piece.clone()) {
            Ok(InitiatorStep::Send(ack)) => assert!(ack.data.is_empty() && !ack.continue_),
            Err(LoginError::Protocol(why)) => {
                assert!(why.contains("too long"), "{why}");
                assert!(n > 1, "the first piece fits");
                return;
            }
            other => panic!("{other:?}"),
        }
    }
    panic!("20 pieces of 8192 bytes were all buffered");
}

#[test]
fn a_target_served_elsewhere_is_redirected_with_its_address() {
    let local = target("iqn.2024-01.org.example:here");
    let portal = portal(vec![local]);
    portal.redirects.set(vec![(
        "iqn.2024-01.org.example:THERE".into(),
        "192.0.2.9:3261,1".into(),
    )]);
    // Names compare case-insensitively (§4.2.7.2 normalisation: lower case).
    let run = run(
        portal.clone(),
        config(Some("iqn.2024-01.org.example:there")),
    );
    assert_eq!(status_of(&run), 0x0101);
    let response = run.responses.last().unwrap();
    assert_eq!((response.status_class, response.status_detail), (1, 1));
    match run.initiator {
        Err(LoginError::Redirected { address, permanent }) => {
            assert_eq!(address, "192.0.2.9:3261,1");
            assert!(!permanent);
        }
        other => panic!("expected a redirection, got {other:?}"),
    }
    // A local target is served here even when the table also names it; an unknown one is
    // "not found", and discovery is never redirected.
    portal.redirects.set(vec![(
        "iqn.2024-01.org.example:here".into(),
        "192.0.2.9:3261,1".into(),
    )]);
    assert!(
        self::run(portal.clone(), config(Some("iqn.2024-01.org.example:here")))
            .initiator
            .is_ok()
    );
    let unknown = self::run(
        portal.clone(),
        config(Some("iqn.2024-01.org.example:nowhere")),
    );
    assert_eq!(status_of(&unknown), 0x0203);
    assert!(self::run(portal, config(None)).initiator.is_ok());
}

#[test]
fn discovery_lists_targets_served_elsewhere_at_this_portal() {
    let mut p = PortalConfig::clone(&portal(vec![target("iqn.2024-01.org.example:here")]));
    p.addresses = vec!["192.0.2.2:3260".into()];
    p.redirects.set(vec![
        (
            "iqn.2024-01.org.example:there".into(),
            "192.0.2.9:3261,7".into(),
        ),
        // A local target is listed once, as a local one.
        (
            "iqn.2024-01.org.example:here".into(),
            "192.0.2.9:3261,1".into(),
        ),
    ]);
    let p = Arc::new(p);
    let mut responder = TextResponder::new(p.clone(), None, true).with_initiator_name(INITIATOR);
    let (pairs, _) = send_targets(&mut responder, "All", 8192);
    let expected: Vec<(String, String)> = [
        ("TargetName", "iqn.2024-01.org.example:here"),
        ("TargetAddress", "192.0.2.2:3260,1"),
        ("TargetName", "iqn.2024-01.org.example:there"),
        ("TargetAddress", "192.0.2.2:3260,7"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(pairs, expected);
    let (one, _) = send_targets(&mut responder, "iqn.2024-01.org.example:there", 8192);
    assert_eq!(one, expected[2..].to_vec());
}
