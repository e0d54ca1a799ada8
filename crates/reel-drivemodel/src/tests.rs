//! The physics the issue asks for, each checked against what the spec's own fields imply.

use std::time::Duration;

use proptest::prelude::*;

use crate::*;

const GIB: u64 = 1 << 30;

fn lto5() -> &'static DriveSpec {
    lto(5, true).unwrap()
}

fn job(source: Source, record_size: u64, compressibility: Compressibility, total: u64) -> Workload {
    Workload {
        source,
        record_size,
        compressibility,
        filemark_every: None,
        immed: false,
        queue_depth: 1,
        total_bytes: total,
    }
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * b.abs()
}

#[test]
fn catalog_is_complete_and_sane() {
    for generation in 1..=9 {
        assert!(lto(generation, true).is_some(), "LTO-{generation} FH");
        if generation > 1 {
            assert!(lto(generation, false).is_some(), "LTO-{generation} HH");
        }
    }
    assert!(lto(1, false).is_none());
    assert!(lto(10, true).is_none());
    let mut ids: Vec<&str> = drives().iter().map(|d| d.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), drives().len(), "ids are unique");
    for d in drives() {
        assert!(!d.speed_steps.is_empty(), "{}", d.id);
        assert!(
            d.speed_steps.windows(2).all(|w| w[0] < w[1]),
            "{} steps ascend",
            d.id
        );
        assert!(
            d.top_speed() <= d.native_rate * 1.03,
            "{} top step ≈ native",
            d.id
        );
        assert!(
            d.lowest_speed() >= d.native_rate / 3.5,
            "{} lowest step",
            d.id
        );
        assert!(d.max_host_rate >= d.native_rate, "{}", d.id);
        assert!(d.buffer_bytes > 0 && d.native_capacity > 0 && d.reposition_s > 0.0);
        assert_eq!(drive(d.id).unwrap().id, d.id);
    }
    assert_eq!(drive("sdlt320").unwrap().name, "SDLT 320");
    assert_eq!(lto5().buffer_bytes, 256 << 20);
    assert_eq!(lto(6, true).unwrap().buffer_bytes, 1 << 30);
    assert!(robot("enterprise").unwrap().move_time > robot("autoloader").unwrap().move_time);
    assert_eq!(robots().len(), 3);
}

/// (1) A host faster than the top step keeps the buffer full: the drive streams at the top
/// step, the host gets top step × compression ratio, and the only back-hitch is the final flush.
#[test]
fn fed_above_top_speed_streams_at_top_speed() {
    let spec = lto5();
    for ratio in [1.0, 1.5] {
        let c = if ratio == 1.0 {
            Compressibility::OFF
        } else {
            Compressibility::uniform(ratio)
        };
        let r = simulate(spec, &job(Source::Unlimited, 256 << 10, c, 40 * GIB));
        let expected = spec.top_speed() * ratio;
        assert!(
            close(r.throughput, expected, 0.01),
            "ratio {ratio}: {} vs {expected}",
            r.throughput
        );
        assert!(
            close(r.tape_speed, spec.top_speed(), 0.001),
            "{}",
            r.tape_speed
        );
        assert_eq!(r.back_hitches, 1, "only the final flush stops the tape");
        assert_eq!(r.sync_back_hitches, 1);
        assert!(r.streaming);
    }
}

/// (2) Below the slowest step the drive back-hitches at the rate its buffer and reposition time
/// imply: it starts at L = max(T, r·R) (T = restart_fraction × buffer; r·R arrived while it
/// repositioned), drains at (s − r) to empty, stops, repositions for R, and waits for the
/// buffer to reach T again. One cycle lasts P = L / (s − r) + max(R, T / r) and carries r·P
/// native bytes.
#[test]
fn below_lowest_step_back_hitches_at_the_analytic_rate() {
    for spec in [lto5(), lto(3, true).unwrap(), drive("sdlt320").unwrap()] {
        let record = 256u64 << 10;
        let host = 0.5 * spec.lowest_speed();
        let total = 200 * (spec.buffer_bytes / 2);
        let r = simulate(
            spec,
            &job(Source::Rate(host), record, Compressibility::OFF, total),
        );
        let native_rate = host * (record + spec.record_overhead_bytes) as f64 / record as f64;
        let t = spec.restart_fraction * spec.buffer_bytes as f64;
        let s = spec.lowest_speed();
        // Streaming restarts from T, or from what arrived while repositioning if that is more.
        let start_level = t
            .max(native_rate * spec.reposition_s)
            .min(spec.buffer_bytes as f64);
        let period = start_level / (s - native_rate) + spec.reposition_s.max(t / native_rate);
        let native_total = total as f64 * native_rate / host;
        let expected = native_total / (native_rate * period);
        let underruns = (r.back_hitches - r.sync_back_hitches) as f64;
        assert!(
            (underruns - expected).abs() <= 0.03 * expected + 2.0,
            "{}: {underruns} back-hitches, expected {expected:.1}",
            spec.id
        );
        assert!(!r.streaming);
        assert!(close(r.tape_speed, s, 1e-9), "runs at the slowest step");
        let reposition = r.repositioning.as_secs_f64();
        // The final flush's repositioning happens after the job ends.
        assert!(close(
            reposition,
            spec.reposition_s * (r.back_hitches - 1) as f64,
            1e-6
        ));
    }
}

/// (3) A filemark without IMMED costs a flush (the host waits until the buffer is on tape) and
/// a reposition (a back-hitch); with IMMED neither.
#[test]
fn filemark_without_immed_costs_a_flush_and_a_reposition() {
    let spec = lto5();
    // One filemark against a full buffer, at the drive level.
    let fill = |d: &mut PhysicalDrive| {
        let mut now = Duration::ZERO;
        for _ in 0..2000 {
            now = d.write(now, 256 << 10, 256 << 10);
        }
        now
    };
    let mut sync = PhysicalDrive::new(spec);
    let now = fill(&mut sync);
    let before = sync.stats(now);
    assert_eq!(before.motion, Motion::Streaming);
    let done = sync.write_filemarks(now, 1, false);
    let waited = (done - now).as_secs_f64();
    let drain = before.buffer_bytes as f64 / before.tape_speed;
    assert!(
        close(waited, drain + spec.record_overhead_s, 0.01),
        "{waited} vs {drain}"
    );
    let after = sync.stats(done);
    assert_eq!(after.back_hitches, before.back_hitches + 1);
    assert_eq!(after.motion, Motion::Repositioning);
    assert_eq!(after.buffer_bytes, 0);
    let later = sync.stats(done + Duration::from_secs_f64(spec.reposition_s + 0.01));
    assert_eq!(later.motion, Motion::Idle);
    assert!(close(
        later.repositioning.as_secs_f64(),
        spec.reposition_s,
        1e-6
    ));

    let mut immed = PhysicalDrive::new(spec);
    let now = fill(&mut immed);
    let before = immed.stats(now);
    let done = immed.write_filemarks(now, 1, true);
    assert!((done - now).as_secs_f64() <= spec.record_overhead_s + 1e-6);
    let after = immed.stats(done);
    assert_eq!(after.back_hitches, before.back_hitches);
    assert_eq!(after.motion, Motion::Streaming);

    // A whole job: 9 filemarks without IMMED cost 9 back-hitches and about 9 repositionings
    // of tape time; with IMMED none.
    let mut w = job(Source::Unlimited, 256 << 10, Compressibility::OFF, 10 * GIB);
    w.filemark_every = Some(GIB);
    let without = simulate(spec, &w);
    w.immed = true;
    let with = simulate(spec, &w);
    assert_eq!(
        without.sync_back_hitches, 10,
        "9 filemarks and the final flush"
    );
    assert_eq!(with.sync_back_hitches, 1, "only the final flush");
    assert!(without.streaming && with.streaming);
    let lost = (without.elapsed - with.elapsed).as_secs_f64();
    let expected = 9.0 * spec.reposition_s;
    assert!(
        lost >= 0.9 * expected && lost <= 1.3 * expected,
        "{lost} vs {expected}"
    );
}

/// (4) LTO keeps a record raw when compression would expand it: incompressible data with
/// compression on costs no more than compression off.
#[test]
fn incompressible_data_on_lto_costs_no_more_than_compression_off() {
    for spec in [lto5(), lto(2, false).unwrap(), lto(9, false).unwrap()] {
        let off = simulate(
            spec,
            &job(Source::Unlimited, 256 << 10, Compressibility::OFF, 8 * GIB),
        );
        let on = simulate(
            spec,
            &job(
                Source::Unlimited,
                256 << 10,
                Compressibility::INCOMPRESSIBLE,
                8 * GIB,
            ),
        );
        assert_eq!(on.native_bytes, off.native_bytes, "{}", spec.id);
        assert!(close(on.throughput, off.throughput, 1e-9), "{}", spec.id);
        // And the per-record overhead is all it costs over the host bytes.
        let records = (8 * GIB).div_ceil(256 << 10);
        assert_eq!(
            on.native_bytes,
            8 * GIB + records * spec.record_overhead_bytes
        );
    }
}

#[test]
fn expanding_format_pays_for_incompressible_data() {
    let spec = drive("sdlt320").unwrap();
    let off = simulate(
        spec,
        &job(Source::Unlimited, 256 << 10, Compressibility::OFF, 2 * GIB),
    );
    let on = simulate(
        spec,
        &job(
            Source::Unlimited,
            256 << 10,
            Compressibility::INCOMPRESSIBLE,
            2 * GIB,
        ),
    );
    let CompressionBehaviour::Expanding { expansion } = spec.compression else {
        panic!("SDLT expands")
    };
    assert!(on.native_bytes > off.native_bytes);
    assert!(close(
        on.native_bytes as f64 / off.native_bytes as f64,
        expansion,
        0.001
    ));
    assert!(close(off.throughput / on.throughput, expansion, 0.01));
    assert!(on.capacity_used > off.capacity_used);
}

/// A host between two steps: the drive picks the step above it, dithers down to the step below
/// when the buffer runs low, and never stops.
#[test]
fn speed_matching_picks_the_step_above_a_host_between_two_steps() {
    let spec = lto5();
    let (lo, hi) = (spec.speed_steps[3], spec.speed_steps[4]);
    let host = (lo + hi) / 2.0;
    let record = 256u64 << 10;
    let mut d = PhysicalDrive::new(spec);
    d.set_compression(false);
    let mut t = 0.0;
    let mut now = Duration::ZERO;
    while d.stats(now).motion != Motion::Streaming {
        t += record as f64 / host;
        now = d.write(Duration::from_secs_f64(t), record, record);
    }
    let native = host * (record + spec.record_overhead_bytes) as f64 / record as f64;
    assert_eq!(spec.step_for(native), hi);
    assert_eq!(
        d.stats(now).tape_speed,
        hi,
        "starts on the step above the host"
    );

    let r = simulate(
        spec,
        &job(Source::Rate(host), record, Compressibility::OFF, 40 * GIB),
    );
    assert!(r.streaming, "{} back-hitches", r.back_hitches);
    assert!(r.tape_speed > lo && r.tape_speed < hi, "{}", r.tape_speed);
    assert!(
        close(r.tape_speed, native, 0.02),
        "{} vs {native}",
        r.tape_speed
    );
    assert!(close(r.throughput, host, 0.01));
}

#[test]
fn capacity_used_is_native_bytes_over_capacity() {
    let spec = lto5();
    let total = 150_000_000_000u64;
    let off = simulate(
        spec,
        &job(Source::Unlimited, 1 << 20, Compressibility::OFF, total),
    );
    assert!(
        close(off.capacity_used, 0.1, 0.001),
        "{}",
        off.capacity_used
    );
    let two = simulate(
        spec,
        &job(
            Source::Unlimited,
            1 << 20,
            Compressibility::uniform(2.0),
            total,
        ),
    );
    assert!(
        close(two.capacity_used, 0.05, 0.001),
        "{}",
        two.capacity_used
    );
    let half = simulate(
        spec,
        &job(
            Source::Unlimited,
            1 << 20,
            Compressibility {
                compressible_share: 0.5,
                ratio: 2.0,
            },
            total,
        ),
    );
    assert!(
        close(half.capacity_used, 0.075, 0.001),
        "{}",
        half.capacity_used
    );
}

#[test]
fn simulation_is_deterministic() {
    let spec = lto(8, false).unwrap();
    for source in [
        Source::Unlimited,
        Source::Rate(150e6),
        Source::Agents {
            count: 3,
            buffer_bytes: 64 << 20,
            refill_rate: 40e6,
        },
    ] {
        let mut w = job(
            source,
            512 << 10,
            Compressibility {
                compressible_share: 0.3,
                ratio: 2.5,
            },
            6 * GIB,
        );
        w.filemark_every = Some(700 << 20);
        w.queue_depth = 3;
        assert_eq!(simulate(spec, &w), simulate(spec, &w));
    }
}

#[test]
fn agents_slower_than_the_tape_back_hitch_and_faster_ones_stream() {
    let spec = lto5();
    let slow = Source::Agents {
        count: 2,
        buffer_bytes: 32 << 20,
        refill_rate: 10e6,
    };
    let r = simulate(spec, &job(slow, 256 << 10, Compressibility::OFF, 4 * GIB));
    assert!(!r.streaming);
    assert!(r.throughput < 20e6 * 1.01);
    let fast = Source::Agents {
        count: 8,
        buffer_bytes: 32 << 20,
        refill_rate: 40e6,
    };
    let r = simulate(spec, &job(fast, 256 << 10, Compressibility::OFF, 16 * GIB));
    assert!(r.streaming, "{} back-hitches", r.back_hitches);
    assert!(
        close(r.throughput, spec.top_speed(), 0.02),
        "{}",
        r.throughput
    );
}

#[test]
fn reads_stream_for_a_fast_host_and_back_hitch_for_a_slow_one() {
    let spec = lto5();
    let record = 256u64 << 10;
    let read_job = |host: Option<f64>| {
        let mut d = PhysicalDrive::new(spec);
        d.set_compression(false);
        let mut now = Duration::ZERO;
        let mut t = 0.0;
        for _ in 0..(8 * GIB / record) {
            if let Some(h) = host {
                t += record as f64 / h;
                now = now.max(Duration::from_secs_f64(t));
            }
            now = d.read(now, record, record);
        }
        (now, d.stats(now))
    };
    let (took, fast) = read_job(None);
    assert!(fast.back_hitches <= 1, "{}", fast.back_hitches);
    assert!(close(
        (8 * GIB) as f64 / took.as_secs_f64(),
        spec.top_speed(),
        0.02
    ));
    let (_, slow) = read_job(Some(0.4 * spec.lowest_speed()));
    assert!(slow.back_hitches > 10, "{}", slow.back_hitches);
    assert_eq!(slow.host_bytes, 8 * GIB);
}

#[test]
fn positioning_times_follow_the_spec() {
    let spec = lto5();
    let mut d = PhysicalDrive::new(spec);
    let t0 = Duration::from_secs(100);
    let loaded = d.load(t0);
    assert!(close((loaded - t0).as_secs_f64(), spec.load_s, 1e-9));
    let end = spec.native_capacity;
    let located = d.locate(loaded, end);
    assert!(close(
        (located - loaded).as_secs_f64(),
        spec.locate_full_s(),
        1e-9
    ));
    assert_eq!(d.stats(located).motion, Motion::Idle);
    let rewound = d.rewind(located);
    assert!(close(
        (rewound - located).as_secs_f64(),
        spec.rewind_full_s(),
        1e-9
    ));
    let unloaded = d.unload(rewound);
    assert!(close(
        (unloaded - rewound).as_secs_f64(),
        spec.unload_s,
        1e-9
    ));
    // Half way: the average from the load point.
    let mut d = PhysicalDrive::new(spec);
    let half = d.locate(Duration::ZERO, end / 2);
    assert!(close(half.as_secs_f64(), spec.locate_avg_s, 1e-6));
    assert!(
        spec.locate_rate() > spec.native_rate,
        "high-speed search beats streaming"
    );
}

#[test]
fn planner_recommends_and_explains() {
    let spec = lto(8, false).unwrap();
    let request = PlanRequest {
        data_bytes: 40_000_000_000_000,
        drives: 2,
        drive: spec,
        source_rate: Some(300e6),
        compressibility: Compressibility {
            compressible_share: 0.6,
            ratio: 2.0,
        },
        filemark_every: Some(4 << 30),
        record_sizes: vec![256 << 10, 1 << 20],
        robot: robot("midrange"),
    };
    let p = plan(&request);
    // 150 MB/s per drive at 1.43:1 is 105 MB/s native: just below the 112 MB/s slowest step.
    assert!(!p.streaming);
    assert!(
        p.reasons
            .iter()
            .any(|r| r.contains("below its slowest step")),
        "{:#?}",
        p.reasons
    );
    assert_eq!(p.candidates.len(), 4);
    assert!(p.cartridges >= 3, "{}", p.cartridges);
    assert!(p.elapsed.as_secs_f64() > 40e12 / 300e6);
    let fast = plan(&PlanRequest {
        source_rate: Some(600e6),
        ..request.clone()
    });
    assert!(fast.streaming, "{:#?}", fast.reasons);
    assert!(fast.elapsed < p.elapsed);
    let unlimited = plan(&PlanRequest {
        source_rate: None,
        filemark_every: None,
        ..request
    });
    assert!(unlimited.streaming);
    assert!(!unlimited.immed);
    let expected = 2.0 * spec.top_speed() / (0.6 / 2.0 + 0.4);
    assert!(
        close(unlimited.throughput, expected, 0.03),
        "{} vs {expected}",
        unlimited.throughput
    );
}

/// The design doc's table of predictions is this code's output; run with `--nocapture` to see
/// it after changing the model, and paste it into docs/design/drive-model.md.
#[test]
fn design_doc_carries_the_current_predictions() {
    let table = validation::markdown_table(&validation::predictions());
    println!("{table}");
    let doc_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/design/drive-model.md"
    );
    let doc = std::fs::read_to_string(doc_path).expect("docs/design/drive-model.md");
    assert!(
        doc.contains(&table),
        "the doc's prediction table is stale; it should read:\n{table}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    Write(u64, u8),
    Filemarks(u32, bool),
    Read(u64),
    Flush,
    Rewind,
    Locate(u64),
    Load,
    Unload,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..(4 << 20), 1u8..=4).prop_map(|(l, r)| Op::Write(l, r)),
        1 => (0u32..3, any::<bool>()).prop_map(|(c, i)| Op::Filemarks(c, i)),
        2 => (1u64..(2 << 20)).prop_map(Op::Read),
        1 => Just(Op::Flush),
        1 => Just(Op::Rewind),
        1 => (0u64..2_000_000_000_000).prop_map(Op::Locate),
        1 => Just(Op::Load),
        1 => Just(Op::Unload),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn completion_times_are_monotonic_and_stats_consistent(
        drive_index in 0usize..drives().len(),
        ops in proptest::collection::vec((op(), 0u64..3_000_000_000), 1..60),
    ) {
        let spec = &drives()[drive_index];
        let mut d = PhysicalDrive::new(spec);
        let mut now = Duration::ZERO;
        let mut last_done = Duration::ZERO;
        let mut host = 0u64;
        let mut last = d.stats(now);
        for (op, gap_ns) in ops {
            now += Duration::from_nanos(gap_ns);
            let done = match op {
                Op::Write(len, r) => { host += len; d.write(now, len, len / u64::from(r)) }
                Op::Filemarks(c, i) => d.write_filemarks(now, c, i),
                Op::Read(len) => { host += len; d.read(now, len, len) }
                Op::Flush => d.flush(now),
                Op::Rewind => d.rewind(now),
                Op::Locate(p) => d.locate(now, p),
                Op::Load => d.load(now),
                Op::Unload => d.unload(now),
            };
            prop_assert!(done >= now, "completion {done:?} precedes now {now:?}");
            prop_assert!(done >= last_done, "completion went backwards");
            last_done = done;
            let s = d.stats(done);
            prop_assert_eq!(s.host_bytes, host);
            prop_assert!(s.back_hitches >= last.back_hitches);
            prop_assert!(s.repositioning >= last.repositioning);
            prop_assert!(s.native_bytes_on_tape + 1 >= last.native_bytes_on_tape);
            prop_assert_eq!(s.tape_speed > 0.0, s.motion == Motion::Streaming);
            if s.motion == Motion::Streaming {
                prop_assert!(spec.speed_steps.contains(&s.tape_speed));
            }
            prop_assert!(s.repositioning.as_secs_f64() <= spec.reposition_s * s.back_hitches as f64 + 1e-6);
            prop_assert!(d.sync_back_hitches() <= s.back_hitches);
            last = s;
            // Stats do not change the drive.
            prop_assert_eq!(d.stats(done).back_hitches, s.back_hitches);
        }
    }
}
