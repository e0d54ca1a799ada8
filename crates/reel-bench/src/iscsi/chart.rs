//! The iSCSI benchmark's charts: MB/s against the transfer size, one chart per direction, one
//! line per target, queue depth and session count (the medians of the repetitions).

use super::args::Direction;
use super::report::{CellReport, Report};
use crate::harness::chart::{LineChart, Series, palette};
use crate::harness::size_label;

/// (file name, chart) of every direction the report measured.
pub fn charts(report: &Report) -> Vec<(String, LineChart)> {
    [Direction::Write, Direction::Read]
        .into_iter()
        .filter_map(|d| {
            by_size(&report.cells, d).map(|c| (format!("throughput-{}.svg", d.name()), c))
        })
        .collect()
}

/// MB/s against the transfer size for `direction`; `None` when it was not measured.
pub fn by_size(cells: &[CellReport], direction: Direction) -> Option<LineChart> {
    let cells: Vec<&CellReport> = cells
        .iter()
        .filter(|c| c.cell.direction == direction)
        .collect();
    let mut sizes: Vec<u32> = cells.iter().map(|c| c.cell.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut lines: Vec<(u32, u32)> = Vec::new();
    for c in &cells {
        if !lines.contains(&(c.cell.queue_depth, c.cell.sessions)) {
            lines.push((c.cell.queue_depth, c.cell.sessions));
        }
    }
    let mut kinds = Vec::new();
    for c in &cells {
        for r in &c.results {
            if !kinds.contains(&r.target) {
                kinds.push(r.target);
            }
        }
    }
    let mut series = Vec::new();
    for kind in kinds {
        let shades = palette(kind);
        for (n, &(qd, sessions)) in lines.iter().enumerate() {
            let points: Vec<(f64, f64)> = sizes
                .iter()
                .enumerate()
                .filter_map(|(i, &size)| {
                    let cell = cells.iter().find(|c| {
                        (c.cell.size, c.cell.queue_depth, c.cell.sessions) == (size, qd, sessions)
                    })?;
                    Some((i as f64, cell.result(kind)?.mb_per_s))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            series.push(Series {
                name: format!("{}, QD{qd} x{sessions}", kind.name()),
                color: shades[n % shades.len()].into(),
                dashed: n % 2 == 1,
                points,
                markers: true,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(LineChart {
        title: format!(
            "iSCSI {} throughput vs transfer size (null devices)",
            direction.name()
        ),
        x_label: format!(
            "{} size",
            match direction {
                Direction::Write => "WRITE(10)",
                Direction::Read => "READ(10)",
            }
        ),
        y_label: "MB/s (10^6 bytes/s), all sessions".into(),
        x_ticks: sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as f64, size_label(u64::from(s))))
            .collect(),
        series,
        rules: Vec::new(),
        bars: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_results_chart() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bench/iscsi/results.json"
        );
        let report: Report = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let charts = charts(&report);
        assert_eq!(charts.len(), 2);
        let (file, write) = &charts[0];
        assert_eq!(file, "throughput-write.svg");
        // reel and tgt, each at 2 queue depths x 2 session counts, over 3 sizes.
        assert_eq!(write.series.len(), 8);
        assert!(write.series.iter().all(|s| s.points.len() == 3));
        assert_eq!(write.x_ticks[2].1, "1M");
        assert!(write.render().contains("reel, QD8 x4"));
    }
}
