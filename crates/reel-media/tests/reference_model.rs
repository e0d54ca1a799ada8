//! Reference-model test: random operation sequences on a
//! `Cartridge<MemoryPartition>` compared step by step with the independent
//! model in `reel_media_testing`.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use reel_media::MemoryPartition;
use reel_media_testing::{
    CartridgeOp, ReferenceCase, ReferenceStats, reference_cases, run_reference_model,
};

proptest! {
    #![proptest_config(Config { cases: 192, ..Config::default() })]

    #[test]
    fn cartridge_matches_reference_model(case in reference_cases(80)) {
        run_reference_model(MemoryPartition::new, &case);
    }
}

/// The random strategy must actually reach the interesting conditions;
/// otherwise the property test above would pass vacuously.
#[test]
fn strategy_reaches_interesting_conditions() {
    let mut runner = TestRunner::deterministic();
    let strategy = reference_cases(80);
    let mut total = ReferenceStats::default();
    for _ in 0..64 {
        let case = strategy.new_tree(&mut runner).expect("generate").current();
        total = total.merge(run_reference_model(MemoryPartition::new, &case));
    }
    assert!(total.early_warnings > 0, "{total:?}");
    assert!(total.end_of_medium > 0, "{total:?}");
    assert!(total.ili_reads > 0, "{total:?}");
    assert!(total.space_stops > 0, "{total:?}");
    assert!(total.formats > 0, "{total:?}");
    assert!(total.worm_refusals > 0, "{total:?}");
}

fn case(worm: bool, capacity: u64, ew: u8, ops: Vec<CartridgeOp>) -> ReferenceCase {
    ReferenceCase {
        worm,
        capacity,
        early_warning_percent: ew,
        ops,
    }
}

#[test]
fn fill_to_end_of_medium_then_overwrite() {
    use CartridgeOp::*;
    let mut ops = vec![];
    for seed in 0..12 {
        ops.push(Write { len: 100_000, seed });
    }
    ops.extend([
        WriteFilemarks(2),
        Locate {
            partition: 0,
            object: 3,
        },
        Write {
            len: 1_000,
            seed: 99,
        },
        SpaceRecords(-10),
        Read { max_len: 50_000 },
        SpaceToEod,
        Write {
            len: 1_000_000,
            seed: 7,
        },
    ]);
    let stats = run_reference_model(MemoryPartition::new, &case(false, 1_000_000, 90, ops));
    assert!(stats.early_warnings >= 1);
    assert!(stats.end_of_medium >= 2);
}

#[test]
fn partitioned_cartridge_switching() {
    use CartridgeOp::*;
    let ops = vec![
        Write { len: 10, seed: 1 },
        Format {
            percents: vec![30, 70],
        },
        Write {
            len: 200_000,
            seed: 2,
        },
        WriteFilemarks(1),
        SetPartition(1),
        Write {
            len: 300_000,
            seed: 3,
        },
        Locate {
            partition: 0,
            object: 5,
        },
        SpaceFilemarks(-1),
        Locate {
            partition: 1,
            object: 0,
        },
        Read { max_len: 1 << 20 },
        Format {
            percents: vec![50, 50, 50],
        },
        Format {
            percents: vec![25, 25, 25, 25],
        },
        SetPartition(3),
        Write {
            len: 70_000,
            seed: 4,
        },
        Rewind,
        Unload,
        Read { max_len: 10 },
        Load,
    ];
    let stats = run_reference_model(MemoryPartition::new, &case(false, 1 << 20, 98, ops));
    assert_eq!(stats.formats, 2);
}

#[test]
fn worm_append_only() {
    use CartridgeOp::*;
    let ops = vec![
        Write { len: 10, seed: 1 },
        WriteFilemarks(1),
        Rewind,
        Write { len: 10, seed: 2 },
        Erase { long: true },
        Format {
            percents: vec![100],
        },
        SpaceToEod,
        Write { len: 10, seed: 3 },
    ];
    let stats = run_reference_model(MemoryPartition::new, &case(true, 1 << 20, 98, ops));
    assert_eq!(stats.worm_refusals, 3);
}
