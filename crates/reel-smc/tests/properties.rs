//! Property tests: any command sequence gets proper responses and conserves cartridges; random
//! MOVE/EXCHANGE sequences agree with an independent model of where each barcode is.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use reel_scsi::initiator::smc::{exchange_medium, move_medium};
use reel_scsi::{Asc, Status};
use reel_smc::{BayError, ChangerModel, ElementType};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes as command sequences (reel_smc::fuzzing::fuzz_changer checks sense
    /// parsing, conservation and drive/inventory agreement).
    #[test]
    fn any_commands_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        reel_smc::fuzzing::fuzz_changer(&data);
    }

    /// Changer opcodes with random fields: sense always parses, cartridges are conserved.
    #[test]
    fn changer_cdbs_with_random_fields(
        model in 0usize..6,
        commands in proptest::collection::vec(
            (prop::sample::select(
                vec![0x07u8, 0x1B, 0x1E, 0x2B, 0x37, 0xA5, 0xA6, 0xB5, 0xB6, 0xB8],
             ),
             proptest::collection::vec(any::<u8>(), 11),
             proptest::collection::vec(any::<u8>(), 0..48)),
            1..40),
    ) {
        let mut data = vec![model as u8, 0];
        for (opcode, fields, out) in commands {
            let mut cdb = vec![opcode];
            cdb.extend_from_slice(&fields);
            // Keep CONTROL clear of NACA/LINK so the command reaches the changer.
            let len = match opcode >> 5 { 0 => 6, 1 => 10, _ => 12 };
            cdb.truncate(len);
            cdb[len - 1] = 0;
            let mut chunk = vec![0u8, len as u8];
            chunk.extend_from_slice(&cdb);
            chunk.extend_from_slice(&out);
            data.push(chunk.len() as u8);
            data.extend_from_slice(&chunk);
        }
        reel_smc::fuzzing::fuzz_changer(&data);
    }

    /// The reference model: random moves and exchanges by element address, compared with a
    /// map from address to barcode after every command.
    #[test]
    fn moves_and_exchanges_match_a_reference_model(
        model in 0usize..6,
        steps in proptest::collection::vec(
            (any::<bool>(), any::<u16>(), any::<u16>(), any::<u16>(), 0u8..8),
            1..60,
        ),
    ) {
        let model = &ChangerModel::all()[model];
        let barcodes = ["R00001L9", "R00002L9", "R00003L9", "R00004L9", "R00005L9"];
        let rig = rig(model.name, None, &barcodes);
        let addresses: Vec<u16> = rig.with(|c| c.elements().iter().map(|e| e.address).collect());
        let kind_of = |a: u16| rig.with(|c| c.element_at(a).unwrap().kind);
        // The independent model: address → barcode.
        let mut reference: BTreeMap<u16, String> = BTreeMap::new();
        for (i, b) in barcodes.iter().enumerate() {
            reference.insert(model.bases.storage + i as u16, b.to_string());
        }
        for (exchange, s, f, t, fault) in steps {
            let pick = |v: u16| addresses[usize::from(v) % addresses.len()];
            let (src, first, second) = (pick(s), pick(f), pick(t));
            // Now and then a drive refuses.
            let faulty = usize::from(fault) % 8;
            for (i, bay) in rig.bays.iter().enumerate() {
                let refuse = (i == faulty).then_some(BayError::RemovalPrevented);
                bay.refuse_unload(refuse.clone());
                bay.refuse_load(refuse);
            }
            let faulty_drive = |a: u16| {
                kind_of(a) == ElementType::DataTransfer
                    && usize::from(a - model.bases.drives) == faulty
            };
            if exchange && model.exchange {
                let r = rig.run(&rig.a, &exchange_medium(0, src, first, second), &[]);
                let ok = src != first
                    && first != second
                    && reference.contains_key(&src)
                    && reference.contains_key(&first)
                    && kind_of(second) != ElementType::Transport
                    && (second == src || !reference.contains_key(&second))
                    && ![src, first, second].iter().any(|&a| faulty_drive(a));
                prop_assert_eq!(
                    r.status == Status::Good, ok,
                    "exchange {} {} {}: {:?}", src, first, second, sense_of(&r)
                );
                if ok {
                    let a = reference.remove(&src).unwrap();
                    let b = reference.remove(&first).unwrap();
                    reference.insert(second, b);
                    reference.insert(first, a);
                }
            } else {
                let r = rig.run(&rig.a, &move_medium(0, src, first), &[]);
                let ok = reference.contains_key(&src)
                    && (src == first
                        || (kind_of(first) != ElementType::Transport
                            && !reference.contains_key(&first)
                            && !faulty_drive(src)
                            && !faulty_drive(first)));
                prop_assert_eq!(
                    r.status == Status::Good, ok, "move {} {}: {:?}", src, first, sense_of(&r)
                );
                if let Some(sense) = sense_of(&r) {
                    prop_assert!(sense.asc != Asc::INTERNAL_TARGET_FAILURE);
                }
                if ok && src != first {
                    let a = reference.remove(&src).unwrap();
                    reference.insert(first, a);
                }
            }
            // Compare everything: the inventory, the drives and READ ELEMENT STATUS.
            let actual: BTreeMap<u16, String> = rig.with(|c| {
                c.elements().into_iter().filter_map(|e| Some((e.address, e.barcode?))).collect()
            });
            prop_assert_eq!(&actual, &reference);
            for (i, bay) in rig.bays.iter().enumerate() {
                let expected = reference.get(&(model.bases.drives + i as u16)).cloned();
                prop_assert_eq!(bay.loaded(), expected);
            }
        }
        let data = rig.good(&read_element_status(0, true, 0, 0xFFFF, false, 0xFFFFFF));
        let (_, _, _, descriptors) = parse_status(&data, false);
        let reported: BTreeMap<u16, String> = descriptors
            .iter()
            .filter(|d| d.full())
            .map(|d| (d.address, d.tag().unwrap()))
            .collect();
        prop_assert_eq!(reported, reference);
        // Everything saved is what is in memory.
        let saved = rig.saved.lock().unwrap().last().cloned();
        if let Some(saved) = saved {
            prop_assert_eq!(saved, rig.with(|c| c.inventory().clone()));
        }
    }
}
