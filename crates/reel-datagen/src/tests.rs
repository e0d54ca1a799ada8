//! Stream-level tests (block- and layout-level ones live beside their code).

use super::*;
use proptest::prelude::*;

fn small(seed: u64) -> GenConfig {
    GenConfig {
        seed,
        block_size: 4096,
        redundancy: 4,
        order: Order::Scattered { window_blocks: 64 },
        total_bytes: 1_000_003,
        ..GenConfig::default()
    }
}

fn collect(g: &mut Generator) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 10_007];
    loop {
        let n = g.fill(&mut buf);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn deterministic_per_seed() {
    let a = collect(&mut Generator::new(small(1)).unwrap());
    let b = collect(&mut Generator::new(small(1)).unwrap());
    let c = collect(&mut Generator::new(small(2)).unwrap());
    assert_eq!(a.len(), 1_000_003);
    assert_eq!(a, b);
    assert_eq!(c.len(), a.len());
    let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
    assert!(same < a.len() / 10, "different seeds share {same} bytes");
}

#[test]
fn blocks_regenerate_from_their_id() {
    for order in [Order::InOrder, Order::Scattered { window_blocks: 64 }] {
        let cfg = GenConfig {
            order,
            incompressible_share: 0.3,
            ..small(5)
        };
        let stream = collect(&mut Generator::new(cfg.clone()).unwrap());
        let mut map = SlotMap::new(&cfg);
        let mut block = vec![0u8; cfg.block_size];
        for (slot, piece) in stream.chunks(cfg.block_size).enumerate() {
            unique_block(&cfg, map.id(slot as u64), &mut block);
            assert_eq!(piece, &block[..piece.len()], "slot {slot}");
        }
    }
}

#[test]
fn record_recutting_preserves_the_stream() {
    let cfg = GenConfig {
        block_size: 256 * 1024,
        redundancy: 3,
        total_bytes: 5 * 1024 * 1024 + 12_345,
        ..small(9)
    };
    let reference = collect(&mut Generator::new(cfg.clone()).unwrap());
    for rec in [
        1,
        999,
        64 * 1024,
        256 * 1024,
        1024 * 1024,
        3 * 1024 * 1024 + 1,
    ] {
        let mut g = Generator::new(cfg.clone()).unwrap();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut short = 0;
        while g.next_record(&mut buf, rec) > 0 {
            assert!(buf.len() <= rec);
            short += usize::from(buf.len() < rec);
            out.extend_from_slice(&buf);
        }
        assert!(short <= 1, "only the last record may be short");
        assert_eq!(out.len(), reference.len());
        assert!(out == reference, "record size {rec} changed the stream");
        assert_eq!(g.position(), reference.len() as u64);
    }
    // Also through std::io::Read.
    let mut via_read = Vec::new();
    std::io::Read::read_to_end(&mut Generator::new(cfg).unwrap(), &mut via_read).unwrap();
    assert!(via_read == reference);
}

#[test]
fn shift_inserts_the_right_bytes() {
    let cfg = small(3);
    let base = collect(&mut Generator::new(cfg.clone()).unwrap());
    let shift = ShiftConfig {
        insert_every: 100_000,
        insert_len: 1..=16,
    };
    let mut g = Generator::with_shift(cfg.clone(), shift.clone()).unwrap();
    let exp = g.expected();
    let out = collect(&mut g);
    assert_eq!(exp.inserts, (cfg.total_bytes - 1) / 100_000);
    assert_eq!(exp.inserts, 10);
    assert_eq!(out.len() as u64, cfg.total_bytes + exp.inserted_bytes);
    assert!(exp.inserted_bytes >= 10 && exp.inserted_bytes <= 160);
    // Removing the inserts gives back the base stream, and they sit where promised.
    let mut rebuilt = Vec::new();
    let mut at = 0usize;
    for k in 1..=exp.inserts {
        let off = (k * 100_000) as usize;
        let base_piece = &base[off - 100_000..off];
        assert_eq!(&out[at..at + base_piece.len()], base_piece);
        rebuilt.extend_from_slice(base_piece);
        at += base_piece.len();
        let len = g.shift.as_ref().unwrap().len_of(k) as usize;
        assert!((1..=16).contains(&len));
        at += len;
    }
    rebuilt.extend_from_slice(&out[at..]);
    assert!(rebuilt == base);
    // Deterministic too.
    assert!(collect(&mut Generator::with_shift(cfg.clone(), shift).unwrap()) == out);
    // An exact multiple does not insert at the very end; zero-length inserts are allowed.
    let cfg2 = GenConfig {
        total_bytes: 300_000,
        ..cfg
    };
    let g2 = Generator::with_shift(
        cfg2,
        ShiftConfig {
            insert_every: 100_000,
            insert_len: 0..=0,
        },
    )
    .unwrap();
    assert_eq!(g2.expected().inserts, 2);
    assert_eq!(g2.expected().inserted_bytes, 0);
}

#[test]
fn incompressible_share_is_respected() {
    for share in [0.0, 0.1, 0.5, 1.0] {
        let cfg = GenConfig {
            incompressible_share: share,
            ..small(11)
        };
        let n = 20_000u64;
        let hits = (0..n).filter(|&id| is_incompressible(&cfg, id)).count() as f64;
        assert!(
            (hits / n as f64 - share).abs() < 0.015,
            "share {share}: {hits}"
        );
    }
    // An incompressible block really does not compress; a compressible one does.
    let cfg = GenConfig {
        incompressible_share: 0.5,
        block_size: 128 * 1024,
        ..small(11)
    };
    let mut b = vec![0u8; cfg.block_size];
    let inc = (0..).find(|&id| is_incompressible(&cfg, id)).unwrap();
    let com = (0..).find(|&id| !is_incompressible(&cfg, id)).unwrap();
    unique_block(&cfg, inc, &mut b);
    assert!(zstd::bulk::compress(&b, 1).unwrap().len() >= b.len() - 64);
    unique_block(&cfg, com, &mut b);
    assert!(zstd::bulk::compress(&b, 1).unwrap().len() < b.len() / 3);
}

#[test]
fn zstd_ratio_band() {
    for bs in [64 * 1024, 128 * 1024, 256 * 1024] {
        let cfg = GenConfig {
            block_size: bs,
            seed: 42,
            ..GenConfig::default()
        };
        let mut b = vec![0u8; bs];
        let (mut raw, mut packed) = (0usize, 0usize);
        for id in 0..32 {
            unique_block(&cfg, id, &mut b);
            raw += b.len();
            packed += zstd::bulk::compress(&b, 1).unwrap().len();
        }
        let ratio = raw as f64 / packed as f64;
        println!(
            "zstd -1 ratio at randomness 0.25, {} KiB blocks: {ratio:.3}",
            bs / 1024
        );
        if bs == 256 * 1024 {
            assert!(
                (3.3..4.0).contains(&ratio),
                "ratio {ratio:.3} outside 3.3..4.0"
            );
        }
    }
}

#[test]
fn expected_ratio() {
    let cfg = GenConfig {
        redundancy: 8,
        block_size: 4096,
        order: Order::Scattered { window_blocks: 256 },
        total_bytes: 4096 * 256 * 10,
        ..GenConfig::default()
    };
    let e = Generator::new(cfg.clone()).unwrap().expected();
    assert_eq!(e.unique_blocks, 320);
    assert_eq!(e.dedup_ratio, 8.0);
    let io = Generator::new(GenConfig {
        order: Order::InOrder,
        ..cfg
    })
    .unwrap()
    .expected();
    assert_eq!(io.dedup_ratio, 8.0);
    let empty = Generator::new(GenConfig {
        total_bytes: 0,
        ..GenConfig::default()
    })
    .unwrap();
    assert_eq!(empty.expected().dedup_ratio, 1.0);
}

#[test]
fn invalid_configs_are_rejected() {
    let bad = [
        GenConfig {
            block_size: 511,
            ..GenConfig::default()
        },
        GenConfig {
            block_size: MAX_BLOCK_SIZE + 1,
            ..GenConfig::default()
        },
        GenConfig {
            randomness: 1.5,
            ..GenConfig::default()
        },
        GenConfig {
            randomness: f64::NAN,
            ..GenConfig::default()
        },
        GenConfig {
            redundancy: 0,
            ..GenConfig::default()
        },
        GenConfig {
            order: Order::Scattered { window_blocks: 0 },
            ..GenConfig::default()
        },
        GenConfig {
            incompressible_share: -0.1,
            ..GenConfig::default()
        },
    ];
    for cfg in bad {
        assert!(Generator::new(cfg.clone()).is_err(), "{cfg:?}");
    }
    let shift = |every, len| ShiftConfig {
        insert_every: every,
        insert_len: len,
    };
    assert!(Generator::with_shift(GenConfig::default(), shift(0, 1..=2)).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let empty = 3..=2;
    assert!(Generator::with_shift(GenConfig::default(), shift(10, empty)).is_err());
}

fn arb_config() -> impl Strategy<Value = (GenConfig, Option<ShiftConfig>, usize)> {
    (
        any::<u64>(),
        prop_oneof![Just(512usize), 513usize..20_000, Just(65_536usize)],
        0.0f64..=1.0,
        1u32..12,
        prop_oneof![Just(None), (1usize..300).prop_map(Some)],
        0.0f64..=1.0,
        0u64..400_000,
        prop_oneof![
            Just(None),
            (1u64..50_000, 0usize..20, 0usize..20).prop_map(Some)
        ],
        1usize..70_000,
    )
        .prop_map(|(seed, bs, r, red, win, inc, total, shift, rec)| {
            let cfg = GenConfig {
                seed,
                block_size: bs,
                randomness: r,
                redundancy: red,
                order: win.map_or(Order::InOrder, |w| Order::Scattered { window_blocks: w }),
                incompressible_share: inc,
                total_bytes: total,
            };
            let shift = shift.map(|(every, a, b)| ShiftConfig {
                insert_every: every,
                insert_len: a.min(b)..=a.max(b),
            });
            (cfg, shift, rec)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn never_panics_and_cuts_exactly((cfg, shift, rec) in arb_config()) {
        let mut g = match shift {
            Some(s) => Generator::with_shift(cfg.clone(), s).unwrap(),
            None => Generator::new(cfg.clone()).unwrap(),
        };
        let exp = g.expected();
        prop_assert!(exp.dedup_ratio >= 1.0 - 1e-9);
        prop_assert!(exp.unique_bytes <= cfg.total_bytes);
        let mut buf = Vec::new();
        let mut total = 0u64;
        while g.next_record(&mut buf, rec) > 0 {
            total += buf.len() as u64;
        }
        prop_assert_eq!(total, exp.output_bytes);
        prop_assert_eq!(total, cfg.total_bytes + exp.inserted_bytes);
        prop_assert_eq!(g.fill(&mut [0u8; 16]), 0);
    }
}
