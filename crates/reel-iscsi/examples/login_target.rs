//! Throwaway blocking (thread per connection) target for interop checks of the target login machine and SendTargets
//! against real initiators (libiscsi's `iscsi-ls`, open-iscsi). Serves a bounded number of
//! connections, answers login, Text (SendTargets), NOP-Out and Logout; SCSI commands
//! get CHECK CONDITION / ILLEGAL REQUEST (no SCSI here).
//!
//! ```text
//! cargo run -p reel-iscsi --example login_target -- 127.0.0.1:3271 [CONNECTIONS]
//! ```
//! Targets: `iqn.2024-01.dev.reel:open` (no auth) and `iqn.2024-01.dev.reel:secure` (CHAP
//! alice/alicesecret12, mutual tgtuser/tgtsecret1234).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reel_iscsi::chap::ChapCredentials;
use reel_iscsi::login::{LoginStep, PortalConfig, SessionKind, TargetConfig, TargetLogin};
use reel_iscsi::params::{DigestPreference, Limits};
use reel_iscsi::pdu::{
    FrameLimits, Framer, LogoutResponse, NopIn, Pdu, RESERVED_TAG, ScsiResponse,
};
use reel_iscsi::text::{TextResponder, parse_pairs};

fn read_pdu(stream: &mut TcpStream, buf: &mut BytesMut, limits: FrameLimits) -> Option<Pdu> {
    let framer = Framer::new(limits);
    loop {
        match framer.decode(buf) {
            Ok(Some(frame)) => match Pdu::parse(frame) {
                Ok(p) => return Some(p),
                Err(e) => {
                    println!("parse error: {e}");
                    return None;
                }
            },
            Ok(None) => {}
            Err(e) => {
                println!("framing error: {e}");
                return None;
            }
        }
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn show(data: &[u8]) -> Vec<String> {
    parse_pairs(data)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

fn serve(mut stream: TcpStream, portal: Arc<PortalConfig>, seed: [u8; 32]) {
    stream.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let mut buf = BytesMut::new();
    let login_limits = FrameLimits::default();
    let mut login = TargetLogin::new(portal.clone(), seed, 1);
    let outcome = loop {
        let Some(Pdu::LoginRequest(req)) = read_pdu(&mut stream, &mut buf, login_limits) else {
            println!("connection closed during login");
            return;
        };
        println!(
            "<- login csg={} nsg={} T={} C={} {:?}",
            req.csg,
            req.nsg,
            req.transit,
            req.continue_,
            show(&req.data)
        );
        let (resp, done) = match login.on_request(req) {
            LoginStep::Continue(r) => (r, None),
            LoginStep::Fail(r) => {
                println!("-> FAIL {:02x}{:02x}", r.status_class, r.status_detail);
                let _ = stream.write_all(&Pdu::LoginResponse(r).to_bytes(&login_limits));
                return;
            }
            LoginStep::Complete(mut r, o) => {
                r.tsih = 1;
                (r, Some(o))
            }
        };
        println!(
            "-> login csg={} nsg={} T={} {:?}",
            resp.csg,
            resp.nsg,
            resp.transit,
            show(&resp.data)
        );
        stream
            .write_all(&Pdu::LoginResponse(resp).to_bytes(&login_limits))
            .unwrap();
        if let Some(o) = done {
            break o;
        }
    };
    println!("LOGIN COMPLETE: {outcome:?}");
    let n = outcome.negotiated.clone();
    let recv = n.recv_frame_limits();
    let send = n.xmit_frame_limits();
    let (target, discovery) = match outcome.kind {
        SessionKind::Discovery => (None, true),
        SessionKind::Normal { target } => (Some(target), false),
    };
    let mut text = TextResponder::new(portal, target, discovery)
        .with_initiator_name(outcome.initiator_name.clone());
    let mut stat_sn = outcome.stat_sn;
    let mut exp_cmd_sn = outcome.exp_cmd_sn;
    while let Some(pdu) = read_pdu(&mut stream, &mut buf, recv) {
        let reply = match pdu {
            Pdu::TextRequest(req) => {
                if !req.immediate {
                    exp_cmd_sn = exp_cmd_sn.wrapping_add(1);
                }
                println!("<- text {:?}", show(&req.data));
                match text.on_request(&req, n.max_xmit_data_segment_length) {
                    Ok(mut r) => {
                        println!("-> text F={} {:?}", r.final_, show(&r.data));
                        r.stat_sn = stat_sn;
                        r.exp_cmd_sn = exp_cmd_sn;
                        r.max_cmd_sn = exp_cmd_sn.wrapping_add(63);
                        Pdu::TextResponse(r)
                    }
                    Err(e) => {
                        println!("text error {e}");
                        return;
                    }
                }
            }
            Pdu::NopOut(req) => {
                if !req.immediate {
                    exp_cmd_sn = exp_cmd_sn.wrapping_add(1);
                }
                if req.itt == RESERVED_TAG {
                    continue;
                }
                Pdu::NopIn(NopIn {
                    lun: req.lun,
                    itt: req.itt,
                    ttt: RESERVED_TAG,
                    stat_sn,
                    exp_cmd_sn,
                    max_cmd_sn: exp_cmd_sn.wrapping_add(63),
                    data: req.data,
                })
            }
            Pdu::ScsiCommand(req) => {
                if !req.immediate {
                    exp_cmd_sn = exp_cmd_sn.wrapping_add(1);
                }
                println!("<- SCSI opcode {:#04x}", req.cdb[0]);
                // Fixed-format sense: ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
                let mut sense = vec![0u8; 20];
                sense[1] = 18;
                sense[2] = 0x70;
                sense[4] = 0x05;
                sense[9] = 10;
                sense[14] = 0x20;
                Pdu::ScsiResponse(ScsiResponse {
                    bidi_overflow: false,
                    bidi_underflow: false,
                    overflow: false,
                    underflow: req.expected_data_length > 0,
                    response: 0,
                    status: 0x02,
                    itt: req.itt,
                    snack_tag: 0,
                    stat_sn,
                    exp_cmd_sn,
                    max_cmd_sn: exp_cmd_sn.wrapping_add(63),
                    exp_data_sn: 0,
                    bidi_residual: 0,
                    residual: req.expected_data_length,
                    data: Bytes::from(sense),
                })
            }
            Pdu::LogoutRequest(req) => {
                if !req.immediate {
                    exp_cmd_sn = exp_cmd_sn.wrapping_add(1);
                }
                println!("<- logout");
                let r = Pdu::LogoutResponse(LogoutResponse {
                    response: 0,
                    itt: req.itt,
                    stat_sn,
                    exp_cmd_sn,
                    max_cmd_sn: exp_cmd_sn.wrapping_add(63),
                    time2wait: 0,
                    time2retain: 0,
                });
                let _ = stream.write_all(&r.to_bytes(&send));
                return;
            }
            other => {
                println!("unhandled {other:?}");
                return;
            }
        };
        stat_sn = stat_sn.wrapping_add(1);
        if stream.write_all(&reply.to_bytes(&send)).is_err() {
            return;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:3271".into());
    let connections: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(4);
    let portal = Arc::new(PortalConfig {
        targets: vec![
            TargetConfig {
                name: "iqn.2024-01.dev.reel:open".into(),
                alias: Some("open tape".into()),
                allow_initiators: None,
                chap: None,
                mutual_chap: None,
                portal_group_tag: 1,
            },
            TargetConfig {
                name: "iqn.2024-01.dev.reel:secure".into(),
                alias: None,
                allow_initiators: None,
                chap: Some(ChapCredentials::new("alice", "alicesecret12")),
                mutual_chap: Some(ChapCredentials::new("tgtuser", "tgtsecret1234")),
                portal_group_tag: 1,
            },
        ],
        addresses: vec![addr.clone()],
        limits: Limits {
            header_digest: DigestPreference::PreferNone,
            data_digest: DigestPreference::PreferNone,
            ..Limits::target_default()
        },
        discovery_chap: None,
    });
    let listener = TcpListener::bind(&addr).expect("bind");
    println!("listening on {addr}");
    for (i, stream) in listener.incoming().take(connections).enumerate() {
        let Ok(stream) = stream else { continue };
        let mut seed = [0u8; 32];
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        seed[..16].copy_from_slice(&nanos.to_le_bytes());
        seed[16] = i as u8;
        println!("=== connection {i}");
        let portal = portal.clone();
        std::thread::spawn(move || serve(stream, portal, seed));
    }
    std::thread::sleep(Duration::from_secs(2));
}
