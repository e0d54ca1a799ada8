//! The PDU codec (RFC 7143 §11): every PDU family survives encode → frame → parse unchanged,
//! with and without digests, and the framer takes exactly the bytes the encoder wrote.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use reel_iscsi::pdu::*;

fn data() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..70).prop_map(Bytes::from)
}

fn lun() -> impl Strategy<Value = [u8; 8]> {
    any::<[u8; 8]>()
}

/// Three sequence numbers (StatSN, ExpCmdSN, MaxCmdSN or similar).
fn sns() -> impl Strategy<Value = (u32, u32, u32)> {
    any::<(u32, u32, u32)>()
}

fn task_attr() -> impl Strategy<Value = TaskAttr> {
    prop::sample::select(vec![
        TaskAttr::Untagged,
        TaskAttr::Simple,
        TaskAttr::Ordered,
        TaskAttr::HeadOfQueue,
        TaskAttr::Aca,
    ])
}

/// What Login Requests and Responses share: T and C, CSG and NSG (any 2-bit code, the reserved
/// one included: the codec carries it for the login logic to refuse), ISID and TSIH.
fn login_common() -> impl Strategy<Value = ([bool; 2], u8, u8, [u8; 6], u16)> {
    (
        any::<[bool; 2]>(),
        0u8..4,
        0u8..4,
        any::<[u8; 6]>(),
        any::<u16>(),
    )
}

fn requests() -> impl Strategy<Value = Pdu> {
    prop_oneof![
        (any::<bool>(), lun(), sns(), any::<u32>(), data()).prop_map(
            |(immediate, lun, (itt, ttt, cmd_sn), exp_stat_sn, data)| Pdu::NopOut(NopOut {
                immediate,
                lun,
                itt,
                ttt,
                cmd_sn,
                exp_stat_sn,
                data,
            })
        ),
        (
            any::<[bool; 4]>(),
            task_attr(),
            lun(),
            sns(),
            any::<u32>(),
            // The BHS holds 16 CDB bytes; longer CDBs go into an Extended CDB AHS (§11.3.5).
            prop::collection::vec(any::<u8>(), 16..60),
            any::<Option<u32>>(),
            data(),
        )
            .prop_map(
                |([immediate, final_, read, write], attr, lun, sns, edtl, cdb, bidi, data)| {
                    Pdu::ScsiCommand(ScsiCommand {
                        immediate,
                        final_,
                        read,
                        write,
                        attr,
                        lun,
                        itt: sns.0,
                        expected_data_length: edtl,
                        cmd_sn: sns.1,
                        exp_stat_sn: sns.2,
                        cdb: Bytes::from(cdb),
                        bidi_read_length: bidi,
                        data,
                    })
                }
            ),
        (any::<bool>(), 0u8..0x80, lun(), sns(), sns()).prop_map(
            |(immediate, function, lun, a, b)| Pdu::TaskMgmtRequest(TaskMgmtRequest {
                immediate,
                function,
                lun,
                itt: a.0,
                referenced_task_tag: a.1,
                cmd_sn: a.2,
                exp_stat_sn: b.0,
                ref_cmd_sn: b.1,
                exp_data_sn: b.2,
            })
        ),
        (
            login_common(),
            any::<[u8; 2]>(),
            any::<u16>(),
            sns(),
            data()
        )
            .prop_map(
                |(([transit, continue_], csg, nsg, isid, tsih), version, cid, sns, data)| {
                    Pdu::LoginRequest(LoginRequest {
                        transit,
                        continue_,
                        csg,
                        nsg,
                        version_max: version[0],
                        version_min: version[1],
                        isid,
                        tsih,
                        itt: sns.0,
                        cid,
                        cmd_sn: sns.1,
                        exp_stat_sn: sns.2,
                        data,
                    })
                }
            ),
        (any::<[bool; 3]>(), lun(), sns(), any::<u32>(), data()).prop_map(
            |([immediate, final_, continue_], lun, sns, exp_stat_sn, data)| {
                Pdu::TextRequest(TextRequest {
                    immediate,
                    final_,
                    continue_,
                    lun,
                    itt: sns.0,
                    ttt: sns.1,
                    cmd_sn: sns.2,
                    exp_stat_sn,
                    data,
                })
            }
        ),
        (any::<bool>(), lun(), sns(), any::<(u32, u32)>(), data()).prop_map(
            |(final_, lun, sns, (data_sn, buffer_offset), data)| Pdu::DataOut(DataOut {
                final_,
                lun,
                itt: sns.0,
                ttt: sns.1,
                exp_stat_sn: sns.2,
                data_sn,
                buffer_offset,
                data,
            })
        ),
        (any::<bool>(), 0u8..0x80, any::<u16>(), sns()).prop_map(
            |(immediate, reason, cid, sns)| Pdu::LogoutRequest(LogoutRequest {
                immediate,
                reason,
                itt: sns.0,
                cid,
                cmd_sn: sns.1,
                exp_stat_sn: sns.2,
            })
        ),
        (0u8..0x10, lun(), sns(), any::<(u32, u32)>()).prop_map(
            |(kind, lun, sns, (beg_run, run_length))| Pdu::SnackRequest(SnackRequest {
                kind,
                lun,
                itt: sns.0,
                ttt: sns.1,
                exp_stat_sn: sns.2,
                beg_run,
                run_length,
            })
        ),
    ]
}

fn responses() -> impl Strategy<Value = Pdu> {
    prop_oneof![
        (lun(), any::<(u32, u32)>(), sns(), data()).prop_map(|(lun, (itt, ttt), sns, data)| {
            Pdu::NopIn(NopIn {
                lun,
                itt,
                ttt,
                stat_sn: sns.0,
                exp_cmd_sn: sns.1,
                max_cmd_sn: sns.2,
                data,
            })
        }),
        (
            any::<[bool; 4]>(),
            any::<[u8; 2]>(),
            sns(),
            sns(),
            sns(),
            data()
        )
            .prop_map(|([bo, bu, o, u], [response, status], a, b, c, data)| {
                Pdu::ScsiResponse(ScsiResponse {
                    bidi_overflow: bo,
                    bidi_underflow: bu,
                    overflow: o,
                    underflow: u,
                    response,
                    status,
                    itt: a.0,
                    snack_tag: a.1,
                    stat_sn: a.2,
                    exp_cmd_sn: b.0,
                    max_cmd_sn: b.1,
                    exp_data_sn: b.2,
                    bidi_residual: c.0,
                    residual: c.1,
                    data,
                })
            }),
        (any::<u8>(), any::<u32>(), sns()).prop_map(|(response, itt, sns)| {
            Pdu::TaskMgmtResponse(TaskMgmtResponse {
                response,
                itt,
                stat_sn: sns.0,
                exp_cmd_sn: sns.1,
                max_cmd_sn: sns.2,
            })
        }),
        (
            login_common(),
            any::<[u8; 4]>(),
            any::<u32>(),
            sns(),
            data()
        )
            .prop_map(
                |(([transit, continue_], csg, nsg, isid, tsih), bytes, itt, sns, data)| {
                    Pdu::LoginResponse(LoginResponse {
                        transit,
                        continue_,
                        csg,
                        nsg,
                        version_max: bytes[0],
                        version_active: bytes[1],
                        isid,
                        tsih,
                        itt,
                        stat_sn: sns.0,
                        exp_cmd_sn: sns.1,
                        max_cmd_sn: sns.2,
                        status_class: bytes[2],
                        status_detail: bytes[3],
                        data,
                    })
                }
            ),
        (
            any::<[bool; 2]>(),
            lun(),
            any::<(u32, u32)>(),
            sns(),
            data()
        )
            .prop_map(|([final_, continue_], lun, (itt, ttt), sns, data)| {
                Pdu::TextResponse(TextResponse {
                    final_,
                    continue_,
                    lun,
                    itt,
                    ttt,
                    stat_sn: sns.0,
                    exp_cmd_sn: sns.1,
                    max_cmd_sn: sns.2,
                    data,
                })
            }),
        (
            any::<[bool; 5]>(),
            any::<u8>(),
            lun(),
            sns(),
            sns(),
            sns(),
            data()
        )
            .prop_map(
                |(
                    [final_, acknowledge, overflow, underflow, has_status],
                    status,
                    lun,
                    a,
                    b,
                    c,
                    data,
                )| {
                    Pdu::DataIn(DataIn {
                        final_,
                        acknowledge,
                        overflow,
                        underflow,
                        has_status,
                        // The status byte is reserved without the S bit (§11.7.4).
                        status: if has_status { status } else { 0 },
                        lun,
                        itt: a.0,
                        ttt: a.1,
                        stat_sn: a.2,
                        exp_cmd_sn: b.0,
                        max_cmd_sn: b.1,
                        data_sn: b.2,
                        buffer_offset: c.0,
                        residual: c.1,
                        data,
                    })
                }
            ),
        (any::<u8>(), any::<u32>(), sns(), any::<(u16, u16)>()).prop_map(
            |(response, itt, sns, (time2wait, time2retain))| {
                Pdu::LogoutResponse(LogoutResponse {
                    response,
                    itt,
                    stat_sn: sns.0,
                    exp_cmd_sn: sns.1,
                    max_cmd_sn: sns.2,
                    time2wait,
                    time2retain,
                })
            }
        ),
        (lun(), sns(), sns(), sns()).prop_map(|(lun, a, b, c)| Pdu::R2t(R2t {
            lun,
            itt: a.0,
            ttt: a.1,
            stat_sn: a.2,
            exp_cmd_sn: b.0,
            max_cmd_sn: b.1,
            r2t_sn: b.2,
            buffer_offset: c.0,
            desired_length: c.1,
        })),
        (lun(), sns(), any::<[u8; 2]>(), any::<[u16; 3]>(), data()).prop_map(
            |(lun, sns, [event, vcode], parameters, data)| {
                Pdu::AsyncMessage(AsyncMessage {
                    lun,
                    stat_sn: sns.0,
                    exp_cmd_sn: sns.1,
                    max_cmd_sn: sns.2,
                    event,
                    vcode,
                    parameters,
                    data,
                })
            }
        ),
        (any::<u8>(), sns(), any::<u32>(), data()).prop_map(|(reason, sns, data_sn, data)| {
            Pdu::Reject(Reject {
                reason,
                stat_sn: sns.0,
                exp_cmd_sn: sns.1,
                max_cmd_sn: sns.2,
                data_sn,
                data,
            })
        }),
    ]
}

fn limits() -> impl Strategy<Value = FrameLimits> {
    any::<(bool, bool)>().prop_map(|(header_digest, data_digest)| FrameLimits {
        header_digest,
        data_digest,
        max_data_segment: 8192,
    })
}

/// Encodes, frames and parses `pdu`; the framer must take exactly the encoded bytes.
fn round_trip(pdu: &Pdu, limits: FrameLimits) -> Result<Pdu, TestCaseError> {
    let encoded = pdu.encode(&limits);
    let mut wire = pdu.to_bytes(&limits);
    prop_assert_eq!(wire.len(), encoded.len());
    prop_assert_eq!(wire.len() % 4, 0, "PDUs end on a 4-byte boundary (§11.1)");
    let framer = Framer::new(limits);
    prop_assert_eq!(framer.frame_len(&wire), Some(wire.len()));
    let frame = framer.decode(&mut wire).unwrap().expect("a complete PDU");
    prop_assert!(wire.is_empty());
    prop_assert_eq!(frame.opcode(), pdu.opcode());
    Ok(Pdu::parse(frame).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn every_request_family_round_trips(pdu in requests(), limits in limits()) {
        prop_assert_eq!(round_trip(&pdu, limits)?, pdu);
    }

    #[test]
    fn every_response_family_round_trips(pdu in responses(), limits in limits()) {
        prop_assert_eq!(round_trip(&pdu, limits)?, pdu);
    }

    /// A PDU delivered one byte at a time frames only once it is complete.
    #[test]
    fn partial_pdus_wait_for_more(pdu in requests(), limits in limits()) {
        let wire = pdu.to_bytes(&limits);
        let framer = Framer::new(limits);
        let mut buf = BytesMut::new();
        for (i, byte) in wire.iter().enumerate() {
            buf.extend_from_slice(&[*byte]);
            let got = framer.decode(&mut buf).unwrap();
            prop_assert_eq!(got.is_some(), i + 1 == wire.len());
        }
    }

    /// A header can be cut for reading the data segment elsewhere exactly when it is complete,
    /// its data segment is not, and there is no data digest to check; it is the header the
    /// whole PDU frames with, and the segment and padding are what follows it on the wire.
    #[test]
    fn a_header_is_offered_for_placing_only_while_its_data_is_incomplete(
        pdu in requests(),
        limits in limits(),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire = pdu.to_bytes(&limits);
        let framer = Framer::new(limits);
        let whole = framer.decode(&mut wire.clone()).unwrap().expect("a complete PDU");
        let prefix = &wire[..cut.index(wire.len() + 1)];
        let header_len = 48 + whole.ahs.len() + if limits.header_digest { 4 } else { 0 };
        let offered = framer.peek_header(prefix);
        let expected = !limits.data_digest
            && !whole.data.is_empty()
            && prefix.len() >= header_len
            && prefix.len() < wire.len();
        prop_assert_eq!(offered.is_some(), expected);
        if let Some(header) = offered {
            prop_assert_eq!(header.bhs, whole.bhs);
            prop_assert_eq!(&header.ahs, &whole.ahs);
            prop_assert_eq!(header.len, header_len);
            prop_assert_eq!(header.data_len, whole.data.len());
            prop_assert_eq!(header.len + header.data_len + header.padding, wire.len());
            prop_assert_eq!(&wire[header.len..header.len + header.data_len], &whole.data[..]);
        }
    }
}

/// A header whose digest is wrong is never offered for placing: `decode` must judge it.
#[test]
fn a_header_with_a_bad_digest_is_not_offered_for_placing() {
    let limits = FrameLimits {
        header_digest: true,
        data_digest: false,
        max_data_segment: 8192,
    };
    let pdu = Pdu::DataOut(DataOut {
        final_: true,
        lun: [0; 8],
        itt: 1,
        ttt: 2,
        exp_stat_sn: 3,
        data_sn: 0,
        buffer_offset: 0,
        data: Bytes::from(vec![9u8; 4096]),
    });
    let wire = pdu.to_bytes(&limits);
    let framer = Framer::new(limits);
    assert!(framer.peek_header(&wire[..100]).is_some());
    let mut bad = wire.to_vec();
    bad[48] ^= 1;
    assert!(framer.peek_header(&bad[..100]).is_none());
    assert_eq!(
        framer.decode(&mut BytesMut::from(&bad[..100])),
        Err(FrameError::HeaderDigest)
    );
}

/// Fields the BHS does not hold for a family are written as zero and come back as the defaults
/// (§11.2.1: reserved fields are zero): a Reject and an Asynchronous Message always carry the
/// reserved ITT, a Data-In without status no status byte.
#[test]
fn reserved_fields_are_written_as_zero() {
    let reject = Pdu::Reject(Reject {
        reason: RejectReason::ProtocolError as u8,
        stat_sn: 1,
        exp_cmd_sn: 2,
        max_cmd_sn: 3,
        data_sn: 0,
        data: Bytes::new(),
    });
    let header = reject.header();
    assert_eq!(&header[16..20], &RESERVED_TAG.to_be_bytes());
    assert_eq!(header[1], 0x80);
    let data_in = Pdu::DataIn(DataIn {
        final_: false,
        acknowledge: false,
        overflow: false,
        underflow: false,
        has_status: false,
        status: 0x02,
        lun: [0; 8],
        itt: 1,
        ttt: RESERVED_TAG,
        stat_sn: 0,
        exp_cmd_sn: 0,
        max_cmd_sn: 0,
        data_sn: 0,
        buffer_offset: 0,
        residual: 0,
        data: Bytes::from_static(b"abc"),
    });
    let header = data_in.header();
    assert_eq!(header[3], 0, "status byte without the S bit");
    assert_eq!(&header[5..8], &[0, 0, 3], "DataSegmentLength");
}

/// An unknown opcode frames (so the target can quote it in a Reject) but does not parse.
#[test]
fn unknown_opcode_frames_but_does_not_parse() {
    let mut wire = BytesMut::from(&[0x1cu8; BHS_LEN][..]);
    wire[4..8].fill(0);
    let frame = Framer::default().decode(&mut wire).unwrap().unwrap();
    assert_eq!(frame.opcode(), 0x1c);
    assert_eq!(Pdu::parse(frame), Err(ParseError::UnknownOpcode(0x1c)));
}

/// A header declaring a data segment over the limit is refused from its 48 bytes alone
/// (§13.12 MaxRecvDataSegmentLength; 8192 during login): the framer neither waits for the data
/// nor reserves room for it, so a peer's length field cannot make us allocate.
#[test]
fn an_oversized_data_segment_is_refused_before_its_data_arrives() {
    for (limits, length) in [
        (FrameLimits::default(), 8193u32),
        (
            FrameLimits {
                header_digest: false,
                data_digest: false,
                max_data_segment: 65536,
            },
            0x00ff_ffff,
        ),
    ] {
        let mut bhs = [0u8; BHS_LEN];
        bhs[0] = opcode::DATA_OUT;
        bhs[5..8].copy_from_slice(&length.to_be_bytes()[1..]);
        let mut wire = BytesMut::with_capacity(BHS_LEN);
        wire.extend_from_slice(&bhs);
        let framer = Framer::new(limits);
        match framer.decode(&mut wire) {
            Err(FrameError::DataSegmentTooLong {
                length: got, max, ..
            }) => {
                assert_eq!((got, max), (length, limits.max_data_segment));
            }
            other => panic!("{other:?}"),
        }
        assert!(wire.capacity() < 4096, "reserved {} bytes", wire.capacity());
    }
    // At the limit the framer waits for the data, reserving only what the PDU takes.
    let mut wire = BytesMut::new();
    let mut bhs = [0u8; BHS_LEN];
    bhs[0] = opcode::DATA_OUT;
    bhs[5..8].copy_from_slice(&8192u32.to_be_bytes()[1..]);
    wire.extend_from_slice(&bhs);
    assert_eq!(Framer::default().decode(&mut wire), Ok(None));
}

/// Byte positions written out from RFC 7143 by hand, not from `bhs.rs`: the round trips above
/// pass even if encode and decode agree on a wrong offset; these two PDUs (the ones every
/// tape write and read carries) pin the wire layout.
#[test]
fn scsi_command_and_data_in_match_the_rfc_layout() {
    // SCSI Command (§11.3).
    let command = Pdu::ScsiCommand(ScsiCommand {
        immediate: true,
        final_: true,
        read: false,
        write: true,
        attr: TaskAttr::Simple,
        lun: [0, 3, 0, 0, 0, 0, 0, 0],
        itt: 0x1122_3344,
        expected_data_length: 0x0004_0000,
        cmd_sn: 0x5566_7788,
        exp_stat_sn: 0x99aa_bbcc,
        cdb: Bytes::from_static(&[0x0a, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        bidi_read_length: None,
        data: Bytes::from_static(b"tape"),
    });
    let mut expected = [0u8; 48];
    expected[0] = 0x40 | 0x01; // I bit, opcode
    expected[1] = 0x80 | 0x20 | 0x01; // F, W, ATTR = simple
    expected[5..8].copy_from_slice(&[0, 0, 4]); // DataSegmentLength
    expected[8..16].copy_from_slice(&[0, 3, 0, 0, 0, 0, 0, 0]);
    expected[16..20].copy_from_slice(&[0x11, 0x22, 0x33, 0x44]);
    expected[20..24].copy_from_slice(&[0x00, 0x04, 0x00, 0x00]);
    expected[24..28].copy_from_slice(&[0x55, 0x66, 0x77, 0x88]);
    expected[28..32].copy_from_slice(&[0x99, 0xaa, 0xbb, 0xcc]);
    expected[32..38].copy_from_slice(&[0x0a, 1, 0, 4, 0, 0]); // the CDB (16 bytes in the BHS)
    assert_eq!(&command.header()[..], &expected[..]);
    assert_eq!(
        round_trip(&command, FrameLimits::default()).unwrap(),
        command
    );

    // SCSI Data-In (§11.7).
    let data_in = Pdu::DataIn(DataIn {
        final_: true,
        acknowledge: false,
        overflow: false,
        underflow: true,
        has_status: true,
        status: 0x02,
        lun: [0; 8],
        itt: 0x0102_0304,
        ttt: 0xffff_ffff,
        stat_sn: 0x0a0b_0c0d,
        exp_cmd_sn: 0x1a1b_1c1d,
        max_cmd_sn: 0x2a2b_2c2d,
        data_sn: 0x3a3b_3c3d,
        buffer_offset: 0x4a4b_4c4d,
        residual: 0x5a5b_5c5d,
        data: Bytes::from_static(b"ab"),
    });
    let mut expected = [0u8; 48];
    expected[0] = 0x25;
    expected[1] = 0x80 | 0x02 | 0x01; // F, U, S
    expected[3] = 0x02; // status, valid with S
    expected[5..8].copy_from_slice(&[0, 0, 2]);
    expected[16..20].copy_from_slice(&[0x01, 0x02, 0x03, 0x04]);
    expected[20..24].copy_from_slice(&[0xff; 4]);
    expected[24..28].copy_from_slice(&[0x0a, 0x0b, 0x0c, 0x0d]);
    expected[28..32].copy_from_slice(&[0x1a, 0x1b, 0x1c, 0x1d]);
    expected[32..36].copy_from_slice(&[0x2a, 0x2b, 0x2c, 0x2d]);
    expected[36..40].copy_from_slice(&[0x3a, 0x3b, 0x3c, 0x3d]);
    expected[40..44].copy_from_slice(&[0x4a, 0x4b, 0x4c, 0x4d]);
    expected[44..48].copy_from_slice(&[0x5a, 0x5b, 0x5c, 0x5d]);
    assert_eq!(&data_in.header()[..], &expected[..]);
    assert_eq!(
        round_trip(&data_in, FrameLimits::default()).unwrap(),
        data_in
    );
}
