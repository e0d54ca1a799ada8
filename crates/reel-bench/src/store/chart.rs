//! The store benchmark's chart: ingest and read MB/s against the record size, one line per
//! stream count (solid: ingest, dashed: read back and verified).

use super::Report;
use crate::harness::chart::{LineChart, Series};
use crate::harness::size_label;

/// Shades for the stream counts (the store is one target: reel's colour family).
const SHADES: [&str; 4] = ["#1f6fb4", "#0b3d66", "#5aa0d8", "#3d5a80"];

/// (file name, chart): `throughput-dedup.svg` or `throughput-incompressible.svg` after the
/// workload, so both of `bench/store/run.sh`'s runs keep theirs.
pub fn charts(report: &Report) -> Vec<(String, LineChart)> {
    let w = &report.workload;
    let (slug, what) = if w.incompressible {
        ("incompressible", "incompressible data".to_string())
    } else {
        (
            "dedup",
            format!("randomness {}, R={}", w.randomness, w.redundancy),
        )
    };
    let mut sizes: Vec<usize> = report.rows.iter().map(|r| r.record_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut streams: Vec<usize> = report.rows.iter().map(|r| r.streams).collect();
    streams.sort_unstable();
    streams.dedup();
    let mut series = Vec::new();
    for (read, word) in [(false, "ingest"), (true, "read")] {
        for (n, &count) in streams.iter().enumerate() {
            let points = sizes
                .iter()
                .enumerate()
                .filter_map(|(i, &size)| {
                    let row = report
                        .rows
                        .iter()
                        .find(|r| r.record_size == size && r.streams == count)?;
                    let mb = if read {
                        row.read_mb_per_s
                    } else {
                        row.ingest_mb_per_s
                    };
                    Some((i as f64, mb))
                })
                .collect();
            series.push(Series {
                name: format!("{word}, {count} stream(s)"),
                color: SHADES[n % SHADES.len()].into(),
                dashed: read,
                points,
                markers: true,
            });
        }
    }
    let chart = LineChart {
        title: format!(
            "Chunk store ingest and read-back vs record size ({what}, {} per run)",
            size_label(w.total_bytes)
        ),
        x_label: "record size".into(),
        y_label: "MB/s (10^6 bytes/s), all streams".into(),
        x_ticks: sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as f64, size_label(s as u64)))
            .collect(),
        series,
        rules: Vec::new(),
        bars: false,
    };
    vec![(format!("throughput-{slug}.svg"), chart)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_results_chart() {
        for (file, slug) in [
            ("results-dedup.json", "dedup"),
            ("results-incompressible.json", "incompressible"),
        ] {
            let path = format!("{}/../../bench/store/{file}", env!("CARGO_MANIFEST_DIR"));
            let report: Report =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let charts = charts(&report);
            let (name, chart) = &charts[0];
            assert_eq!(name, &format!("throughput-{slug}.svg"));
            // ingest and read for 1 and 2 streams, over 64K, 256K and 1M records.
            assert_eq!(chart.series.len(), 4);
            assert!(chart.series.iter().all(|s| s.points.len() == 3));
            assert!(chart.render().contains("read, 2 stream(s)"));
        }
    }
}
