//! SVG charts of the drive model: throughput against record size and against compressible
//! share (the console's drive page and the bench report), and a sweep's charts.

use reel_drivemodel::{Compressibility, DriveSpec, Source, Workload, simulate};

use super::{SweepRow, Vary};
use crate::harness::chart::{LineChart, REEL_COLOR, Rule, Series, TGT_COLOR};
use crate::harness::size_label;

const THIRD_COLOR: &str = "#2e8b57";

fn points_total(spec: &DriveSpec) -> u64 {
    (4 * spec.buffer_bytes).max(1 << 30)
}

fn chart(title: String, x_label: &str, y_label: &str, x_ticks: Vec<(f64, String)>) -> LineChart {
    LineChart {
        title,
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        x_ticks,
        series: Vec::new(),
        rules: Vec::new(),
        bars: false,
    }
}

fn series(name: &str, color: &str, dashed: bool, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        color: color.to_string(),
        dashed,
        points,
        markers: true,
    }
}

/// Two SVG documents for one drive model: throughput against record size (compression off and
/// 2:1, unlimited source, and a source at half the slowest step), and throughput against the
/// compressible share (2:1, unlimited source).
pub fn curve_charts(spec: &'static DriveSpec) -> (String, String) {
    let (by_size, by_share) = curve_line_charts(spec);
    (by_size.render(), by_share.render())
}

/// The charts of [`curve_charts`], not yet rendered (a benchmark report writes them with its
/// own).
pub fn curve_line_charts(spec: &'static DriveSpec) -> (LineChart, LineChart) {
    let total = points_total(spec);
    let sizes: Vec<u64> = (12..=22).map(|p| 1u64 << p).collect();
    let run = |source: Source, record_size: u64, compressibility: Compressibility| {
        let w = Workload {
            source,
            record_size,
            compressibility,
            filemark_every: None,
            immed: false,
            queue_depth: 2,
            total_bytes: total,
        };
        simulate(spec, &w).throughput / 1e6
    };
    let slow = Source::Rate(spec.lowest_speed() / 2.0);
    let mut by_size = chart(
        format!("{}: throughput against record size", spec.name),
        "record size",
        "host MB/s",
        sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as f64, size_label(s)))
            .collect(),
    );
    for (name, color, dashed, source, c) in [
        (
            "compression off",
            REEL_COLOR,
            false,
            Source::Unlimited,
            Compressibility::OFF,
        ),
        (
            "2:1 data",
            TGT_COLOR,
            false,
            Source::Unlimited,
            Compressibility::uniform(2.0),
        ),
        (
            "source at ½ slowest step",
            THIRD_COLOR,
            true,
            slow,
            Compressibility::OFF,
        ),
    ] {
        let points = sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as f64, run(source, s, c)))
            .collect();
        by_size.series.push(series(name, color, dashed, points));
    }
    by_size.rules.push(Rule {
        y: spec.native_rate / 1e6,
        color: "#888888".to_string(),
        label: "native rate".to_string(),
    });

    let mut by_share = chart(
        format!("{}: throughput against compressible share (2:1)", spec.name),
        "compressible share",
        "host MB/s",
        Vec::new(),
    );
    let points = (0..=10)
        .map(|i| {
            let share = f64::from(i) / 10.0;
            let c = Compressibility {
                compressible_share: share,
                ratio: 2.0,
            };
            (share, run(Source::Unlimited, 256 << 10, c))
        })
        .collect();
    by_share.series.push(series(
        "256K records, unlimited source",
        REEL_COLOR,
        false,
        points,
    ));
    by_share.rules.push(Rule {
        y: spec.native_rate / 1e6,
        color: "#888888".to_string(),
        label: "native rate".to_string(),
    });
    (by_size, by_share)
}

/// A sweep's two charts: host throughput, and back-hitches, against the varied parameter.
pub fn sweep_charts(spec: &DriveSpec, vary: Vary, rows: &[SweepRow]) -> (String, String) {
    let x_label = match vary {
        Vary::RecordSize => "record size",
        Vary::Compressible => "compressible share",
        Vary::FilemarkInterval => "filemark every",
    };
    let ticks: Vec<(f64, String)> = if vary == Vary::Compressible {
        Vec::new()
    } else {
        rows.iter().map(|r| (r.x, r.label.clone())).collect()
    };
    let mut throughput = chart(
        format!("{}: throughput", spec.name),
        x_label,
        "host MB/s",
        ticks.clone(),
    );
    throughput.series.push(series(
        "throughput",
        REEL_COLOR,
        false,
        rows.iter()
            .map(|r| (r.x, r.report.throughput / 1e6))
            .collect(),
    ));
    throughput.series.push(series(
        "tape speed",
        TGT_COLOR,
        true,
        rows.iter()
            .map(|r| (r.x, r.report.tape_speed / 1e6))
            .collect(),
    ));
    let mut hitches = chart(
        format!("{}: back-hitches", spec.name),
        x_label,
        "back-hitches",
        ticks,
    );
    hitches.series.push(series(
        "back-hitches",
        TGT_COLOR,
        false,
        rows.iter()
            .map(|r| (r.x, r.report.back_hitches as f64))
            .collect(),
    ));
    (throughput.render(), hitches.render())
}
