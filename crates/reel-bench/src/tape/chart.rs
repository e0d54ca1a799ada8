//! The tape benchmark's charts: throughput against each swept dimension (record size,
//! compressible share, drives, …), and throughput over time for the flat run.

use crate::harness::chart::{LineChart, Rule, Series, color, palette};
use crate::harness::size_label;
use crate::tape::report::{CellReport, Dim, targets_in, varying};

/// Throughput against one swept dimension: one line per target and combination of the other
/// swept dimensions, peers in the same chart. `None` when `dim` does not vary.
pub fn by_dim(cells: &[CellReport], dim: Dim, write: bool) -> Option<LineChart> {
    let matrix: Vec<&CellReport> = cells.iter().filter(|c| !c.flat).collect();
    let dims = varying(cells);
    if !dims.contains(&dim) {
        return None;
    }
    let others: Vec<Dim> = dims.iter().copied().filter(|d| *d != dim).collect();
    let mut xs: Vec<(f64, String)> = matrix
        .iter()
        .map(|c| (dim.value(c), dim.label(c)))
        .collect();
    xs.sort_by(|a, b| a.0.total_cmp(&b.0));
    xs.dedup_by(|a, b| a.0 == b.0);
    let key = |c: &CellReport| -> Vec<String> { others.iter().map(|d| d.label(c)).collect() };
    let mut keys: Vec<Vec<String>> = Vec::new();
    for c in &matrix {
        let k = key(c);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut series = Vec::new();
    for kind in targets_in(cells) {
        let shades = palette(kind);
        for (n, k) in keys.iter().enumerate() {
            let points: Vec<(f64, f64)> = xs
                .iter()
                .enumerate()
                .filter_map(|(i, (v, _))| {
                    let cell = matrix.iter().find(|c| dim.value(c) == *v && key(c) == *k)?;
                    let run = cell.run(kind)?;
                    let p = if write { &run.write } else { &run.read };
                    Some((i as f64, p.mb_per_s))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            let mut name = kind.name().to_string();
            for (d, value) in others.iter().zip(k) {
                name.push_str(&format!(", {} {value}", d.short()));
            }
            series.push(Series {
                name,
                color: shades[n % shades.len()].into(),
                dashed: n % 2 == 1,
                points,
                markers: true,
            });
        }
    }
    let word = if write { "write" } else { "read" };
    Some(LineChart {
        title: format!(
            "Tape {word} throughput vs {} (all drives together)",
            dim.short()
        ),
        x_label: dim.axis().into(),
        y_label: format!("{word} MB/s (10^6 bytes/s)"),
        x_ticks: xs
            .iter()
            .enumerate()
            .map(|(i, (_, label))| (i as f64, label.clone()))
            .collect(),
        series,
        rules: Vec::new(),
        bars: false,
    })
}

/// The flat run's one-second samples over time, with each target's 80 %-of-median line.
pub fn over_time(cells: &[CellReport], write: bool) -> Option<LineChart> {
    let cell = cells.iter().find(|c| c.flat)?;
    let mut series = Vec::new();
    let mut rules = Vec::new();
    for run in &cell.runs {
        let p = if write { &run.write } else { &run.read };
        series.push(Series {
            name: run.target.name().to_string(),
            color: color(run.target).into(),
            dashed: false,
            points: p
                .samples_mb_per_s
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64, *v))
                .collect(),
            markers: p.samples_mb_per_s.len() <= 40,
        });
        if let Some(f) = &p.flatness {
            rules.push(Rule {
                y: f.median * (1.0 - f.tolerance),
                color: color(run.target).into(),
                label: format!("{} 80 % of median", run.target.name()),
            });
        }
    }
    Some(LineChart {
        title: format!(
            "{} of {} on one drive, {} records: 1 s samples",
            if write { "Write" } else { "Read" },
            size_label(cell.size_per_drive),
            size_label(u64::from(cell.record_size))
        ),
        x_label: format!(
            "seconds since the {} phase started",
            if write { "write" } else { "read" }
        ),
        y_label: "MB/s in that second (10^6 bytes/s)".into(),
        x_ticks: Vec::new(),
        series,
        rules,
        bars: false,
    })
}
