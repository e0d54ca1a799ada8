//! Throwaway blocking driver for the initiator login machine, for interop checks against real
//! targets (Linux tgt, reel). Logs in, runs SendTargets on discovery sessions, logs out.
//!
//! ```text
//! cargo run -p reel-iscsi --example login_probe -- 127.0.0.1:3270 [TARGET|-] \
//!     [--chap USER SECRET] [--mutual USER SECRET] [--digest] [--sha256]
//! ```
//! `-` (or no target) opens a discovery session.

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
use reel_iscsi::chap::{ChapAlgorithm, ChapCredentials};
use reel_iscsi::initiator_login::{InitiatorLogin, InitiatorLoginConfig, InitiatorStep};
use reel_iscsi::params::{DigestPreference, Limits};
use reel_iscsi::pdu::{FrameLimits, Framer, LogoutRequest, Pdu, RESERVED_TAG, TextRequest};
use reel_iscsi::text::parse_pairs;

fn read_pdu(stream: &mut TcpStream, buf: &mut BytesMut, limits: FrameLimits) -> Pdu {
    let framer = Framer::new(limits);
    loop {
        if let Some(frame) = framer.decode(buf).expect("framing") {
            return Pdu::parse(frame).expect("parse");
        }
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).expect("read");
        assert!(n > 0, "connection closed by the target");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:3260".into());
    let target = args
        .get(1)
        .filter(|t| *t != "-" && !t.starts_with("--"))
        .cloned();
    let mut chap = None;
    let mut mutual = None;
    let mut limits = Limits::initiator_default();
    let mut algorithms = vec![ChapAlgorithm::Md5];
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--chap" => {
                chap = Some(ChapCredentials::new(
                    args[i + 1].clone(),
                    args[i + 2].clone(),
                ));
                i += 2;
            }
            "--mutual" => {
                mutual = Some(ChapCredentials::new(
                    args[i + 1].clone(),
                    args[i + 2].clone(),
                ));
                i += 2;
            }
            "--digest" => {
                limits.header_digest = DigestPreference::PreferCrc32c;
                limits.data_digest = DigestPreference::PreferCrc32c;
            }
            "--sha256" => algorithms = vec![ChapAlgorithm::Sha256, ChapAlgorithm::Md5],
            _ => {}
        }
        i += 1;
    }
    let config = InitiatorLoginConfig {
        initiator_name: "iqn.2024-01.dev.reel:probe".into(),
        initiator_alias: Some("probe".into()),
        target_name: target.clone(),
        isid: [0x80, 0x00, 0x52, 0x45, 0x45, 0x4c],
        tsih: 0,
        cid: 0,
        chap,
        mutual_chap: mutual,
        limits,
        cmd_sn: 1,
    };
    let mut seed = [0u8; 32];
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    seed[..16].copy_from_slice(&nanos.to_le_bytes());
    seed[16..20].copy_from_slice(&std::process::id().to_le_bytes());
    let mut login = InitiatorLogin::new(config, seed).with_chap_algorithms(algorithms);

    let mut stream = TcpStream::connect(&addr).expect("connect");
    let mut buf = BytesMut::new();
    let login_limits = FrameLimits::default();
    let mut req = login.start();
    let outcome = loop {
        println!(
            "-> login csg={} nsg={} T={} {:?}",
            req.csg,
            req.nsg,
            req.transit,
            show(&req.data)
        );
        stream
            .write_all(&Pdu::LoginRequest(req).to_bytes(&login_limits))
            .expect("write");
        let Pdu::LoginResponse(resp) = read_pdu(&mut stream, &mut buf, login_limits) else {
            panic!("expected a login response");
        };
        println!(
            "<- login csg={} nsg={} T={} status={:02x}{:02x} {:?}",
            resp.csg,
            resp.nsg,
            resp.transit,
            resp.status_class,
            resp.status_detail,
            show(&resp.data)
        );
        match login.on_response(resp) {
            Ok(InitiatorStep::Send(r)) => req = r,
            Ok(InitiatorStep::Done(o)) => break o,
            Err(e) => {
                println!("LOGIN FAILED: {e}");
                std::process::exit(1);
            }
        }
    };
    println!("LOGIN OK: {outcome:?}");
    let n = &outcome.negotiated;
    let send = n.xmit_frame_limits();
    let recv = n.recv_frame_limits();
    let mut cmd_sn = outcome.cmd_sn;
    let mut exp_stat_sn = outcome.exp_stat_sn;
    if target.is_none() {
        let text = TextRequest {
            immediate: false,
            final_: true,
            continue_: false,
            lun: [0; 8],
            itt: 1,
            ttt: RESERVED_TAG,
            cmd_sn,
            exp_stat_sn,
            data: Bytes::from_static(b"SendTargets=All\0"),
        };
        cmd_sn = cmd_sn.wrapping_add(1);
        stream
            .write_all(&Pdu::TextRequest(text).to_bytes(&send))
            .expect("write");
        let Pdu::TextResponse(resp) = read_pdu(&mut stream, &mut buf, recv) else {
            panic!("expected a text response");
        };
        exp_stat_sn = resp.stat_sn.wrapping_add(1);
        println!("SendTargets: {:?}", show(&resp.data));
    }
    let logout = LogoutRequest {
        immediate: true,
        reason: 0,
        itt: 2,
        cid: 0,
        cmd_sn,
        exp_stat_sn,
    };
    stream
        .write_all(&Pdu::LogoutRequest(logout).to_bytes(&send))
        .expect("write");
    match read_pdu(&mut stream, &mut buf, recv) {
        Pdu::LogoutResponse(r) => println!("LOGOUT response={}", r.response),
        other => println!("unexpected: {other:?}"),
    }
}

fn show(data: &[u8]) -> Vec<String> {
    parse_pairs(data)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}
