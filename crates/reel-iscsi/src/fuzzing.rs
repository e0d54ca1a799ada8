//! Entry points for the fuzz targets in `/fuzz` (and the property tests): arbitrary bytes in,
//! no panics out.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::chap::ChapCredentials;
use crate::login::{LoginStep, PortalConfig, TargetConfig, TargetLogin};
use crate::params::{DigestPreference, Limits};
use crate::pdu::{FrameLimits, Framer, LoginRequest, Pdu, RESERVED_TAG, TextRequest};
use crate::text::TextResponder;

/// Frames and parses `data[1..]` as a PDU stream (digest settings and segment limit from
/// `data[0]`), then checks that encoding is a projection (and that a header offered for
/// placing its data elsewhere is one `decode` would wait on): `encode(parse(encode(p)))` equals
/// `encode(p)` for every PDU that parsed.
pub fn fuzz_pdu(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let limits = FrameLimits {
        header_digest: flags & 1 != 0,
        data_digest: flags & 2 != 0,
        max_data_segment: if flags & 4 != 0 { 512 } else { 65_536 },
    };
    let framer = Framer::new(limits);
    let mut buf = BytesMut::from(rest);
    for _ in 0..64 {
        if let Some(header) = framer.peek_header(&buf) {
            // What a reader placing the data segment elsewhere relies on: the header is
            // whole and the segment is not (decode would wait for more).
            assert!(header.len + header.data_len + header.padding > buf.len());
            assert!(header.len <= buf.len());
            assert_eq!(framer.decode(&mut buf.clone()), Ok(None));
        }
        let Ok(Some(frame)) = framer.decode(&mut buf) else {
            return;
        };
        let Ok(pdu) = Pdu::parse(frame) else { continue };
        let first = pdu.to_bytes(&limits);
        let mut again = first.clone();
        let frame = framer
            .decode(&mut again)
            .expect("re-encoded PDU frames")
            .expect("complete PDU");
        assert!(again.is_empty(), "re-encoded PDU has trailing bytes");
        let reparsed = Pdu::parse(frame).expect("re-encoded PDU parses");
        let second = reparsed.to_bytes(&limits);
        assert_eq!(first, second, "PDU encoding is not stable");
    }
}

/// A portal with an open target, a CHAP target (with mutual credentials) and an ACL'd target.
pub fn fuzz_portal() -> Arc<PortalConfig> {
    Arc::new(PortalConfig {
        targets: vec![
            TargetConfig {
                name: "iqn.2024-01.test:open".into(),
                alias: Some("open".into()),
                allow_initiators: None,
                chap: None,
                mutual_chap: None,
                portal_group_tag: 1,
            },
            TargetConfig {
                name: "iqn.2024-01.test:chap".into(),
                alias: None,
                allow_initiators: None,
                chap: Some(ChapCredentials::new("user", "secretsecret1")),
                mutual_chap: Some(ChapCredentials::new("target", "secretsecret2")),
                portal_group_tag: 2,
            },
            TargetConfig {
                name: "iqn.2024-01.test:acl".into(),
                alias: None,
                allow_initiators: Some(vec!["iqn.2024-01.test:init".into()]),
                chap: None,
                mutual_chap: None,
                portal_group_tag: 3,
            },
        ],
        addresses: vec!["127.0.0.1:3260".into(), "[::1]:3260".into()],
        limits: Limits {
            header_digest: DigestPreference::PreferCrc32c,
            ..Limits::target_default()
        },
        discovery_chap: None,
        redirects: {
            let table = crate::login::RedirectTable::default();
            table.set(vec![(
                "iqn.2024-01.test:moved".into(),
                "192.0.2.7:3260,1".into(),
            )]);
            table
        },
    })
}

/// Feeds arbitrary login/text key data through [`TargetLogin`] and, if the login completes, the
/// rest through a [`TextResponder`].
///
/// Layout: `data[0]` selects a canned leading request (bit 0: prepend one; bits 1-2: which target
/// or discovery). Then records of `[flags, version_min, len_hi, len_lo, text...]`: flags bit 7 = T,
/// bit 6 = C, bits 2-3 = CSG, bits 0-1 = NSG, bit 4 = change the ISID, bit 5 = change the CID.
pub fn fuzz_login(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let portal = fuzz_portal();
    let mut login = TargetLogin::new(portal.clone(), [7; 32], 1);
    let isid = [0x80, 0, 0, 0, 0, 1];
    let mut outcome = None;
    if mode & 1 != 0 {
        let target = match (mode >> 1) & 3 {
            0 => "SessionType=Discovery\0".to_string(),
            n => format!("TargetName={}\0", portal.targets[n as usize - 1].name),
        };
        let text = format!("InitiatorName=iqn.2024-01.test:init\0{target}");
        let req = LoginRequest {
            transit: false,
            continue_: false,
            csg: 0,
            nsg: 0,
            version_max: 0,
            version_min: 0,
            isid,
            tsih: 0,
            itt: 1,
            cid: 0,
            cmd_sn: 1,
            exp_stat_sn: 0,
            data: Bytes::from(text),
        };
        match login.on_request(req) {
            LoginStep::Continue(_) => {}
            LoginStep::Fail(_) => return,
            LoginStep::Complete(_, o) => outcome = Some(o),
        }
    }
    while outcome.is_none() {
        let Some((record, next)) = next_record(rest) else {
            return;
        };
        rest = next;
        let (flags, version_min, text) = record;
        let mut req_isid = isid;
        if flags & 0x10 != 0 {
            req_isid[5] ^= 1;
        }
        let req = LoginRequest {
            transit: flags & 0x80 != 0,
            continue_: flags & 0x40 != 0,
            csg: (flags >> 2) & 3,
            nsg: flags & 3,
            version_max: 0,
            version_min,
            isid: req_isid,
            tsih: 0,
            itt: 1,
            cid: u16::from(flags & 0x20 != 0),
            cmd_sn: 1,
            exp_stat_sn: 0,
            data: Bytes::copy_from_slice(text),
        };
        match login.on_request(req) {
            LoginStep::Continue(resp) => assert!(resp.data.len() <= 8192),
            LoginStep::Fail(resp) => {
                assert_ne!(resp.status_class, 0);
                return;
            }
            LoginStep::Complete(resp, o) => {
                assert!(resp.transit && resp.nsg == 3);
                let n = &o.negotiated;
                assert!(n.first_burst_length <= n.max_burst_length);
                assert!((512..1 << 24).contains(&n.max_xmit_data_segment_length));
                assert_eq!(n.max_connections, 1);
                assert_eq!(n.error_recovery_level, 0);
                outcome = Some(o);
            }
        }
    }
    let Some(outcome) = outcome else { return };
    let (target, discovery) = match outcome.kind {
        crate::login::SessionKind::Discovery => (None, true),
        crate::login::SessionKind::Normal { target } => (Some(target), false),
    };
    let mut responder = TextResponder::new(portal, target, discovery)
        .with_initiator_name(outcome.initiator_name.clone());
    let mut last_ttt = RESERVED_TAG;
    while let Some(((flags, max, text), next)) = next_record(rest) {
        rest = next;
        let req = TextRequest {
            immediate: false,
            final_: flags & 0x80 != 0,
            continue_: flags & 0x40 != 0,
            lun: [0; 8],
            itt: u32::from(flags & 3),
            ttt: if flags & 0x20 != 0 {
                last_ttt
            } else {
                RESERVED_TAG
            },
            cmd_sn: 1,
            exp_stat_sn: 0,
            data: Bytes::copy_from_slice(text),
        };
        let max_xmit = 512 + u32::from(max) * 64;
        if let Ok(resp) = responder.on_request(&req, max_xmit) {
            assert!(resp.data.len() <= max_xmit as usize);
            assert!(!(resp.final_ && resp.continue_));
            last_ttt = resp.ttt;
        }
    }
}

type Record<'a> = (u8, u8, &'a [u8]);

fn next_record(data: &[u8]) -> Option<(Record<'_>, &[u8])> {
    if data.len() < 4 {
        return None;
    }
    let len = (u16::from_be_bytes([data[2], data[3]]) as usize).min(data.len() - 4);
    Some(((data[0], data[1], &data[4..4 + len]), &data[4 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoke() {
        fuzz_pdu(&[]);
        fuzz_pdu(&[0; 100]);
        fuzz_login(&[]);
        fuzz_login(&[1, 0x87, 0, 0, 0]);
        let mut d = vec![1u8];
        let text = b"AuthMethod=None\0";
        d.extend_from_slice(&[0x81, 0, 0, text.len() as u8]);
        d.extend_from_slice(text);
        d.extend_from_slice(&[0x87, 0, 0, 0]);
        d.extend_from_slice(&[0x80, 0, 0, 16]);
        d.extend_from_slice(b"SendTargets=All\0");
        fuzz_login(&d);
    }
}
