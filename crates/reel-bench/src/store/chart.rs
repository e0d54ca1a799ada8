//! The store benchmark's chart: ingest and read MB/s against the record size, one line per
//! stream count (solid: ingest, dashed: read back and verified).

use super::Report;
use crate::harness::chart::{LineChart, Series};
use crate::harness::size_label;

/// Shades for the stream counts (the store is one target: reel's colour family).
const SHADES: [&str; 4] = ["#1f6fb4", "#0b3d66", "#5aa0d8", "#3d5a80"];

/// (file name, chart): `throughput-dedup.svg` or `throughput-incompressible.svg` after the
/// workload, so both of `bench/store/run.sh`'s runs keep theirs; a run with S3 cells writes
/// `throughput-WORKLOAD-s3run.svg` and `s3-WORKLOAD.svg` (local and S3 side by side).
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
    // A run with S3 cells keeps its own file names, beside the standard run's.
    let suffix = if report.s3.is_some() { "-s3run" } else { "" };
    let mut out = vec![(format!("throughput-{slug}{suffix}.svg"), chart)];
    if let Some(s3) = report.s3.as_ref().filter(|s3| !s3.rows.is_empty()) {
        out.push((format!("s3-{slug}.svg"), s3_chart(s3, &what, w.total_bytes)));
    }
    out
}

/// Bars per cell: local ingest, S3 ingest, plain PUT, local read, S3 cold read.
fn s3_chart(s3: &super::s3::S3Report, what: &str, total: u64) -> LineChart {
    type Get = fn(&super::s3::S3Row) -> Option<f64>;
    let bars: [(&str, &str, Get); 5] = [
        ("local ingest", "#1f6fb4", |r| r.local_ingest_mb_per_s),
        ("S3 ingest (in bucket)", "#5aa0d8", |r| {
            Some(r.ingest_mb_per_s)
        }),
        ("plain S3 PUT", "#888888", |r| Some(r.plain_mb_per_s)),
        ("local read", "#0b3d66", |r| r.local_read_mb_per_s),
        ("S3 cold read", "#3d5a80", |r| Some(r.cold_read_mb_per_s)),
    ];
    let series = bars
        .iter()
        .map(|(name, color, get)| Series {
            name: (*name).to_string(),
            color: (*color).to_string(),
            dashed: false,
            points: s3
                .rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| Some((i as f64, get(r)?)))
                .collect(),
            markers: false,
        })
        .collect();
    LineChart {
        title: format!(
            "Chunk store on S3 (versitygw, loopback) vs local ({what}, {} per run)",
            size_label(total)
        ),
        x_label: "record size × streams".into(),
        y_label: "MB/s (10^6 bytes/s), all streams".into(),
        x_ticks: s3
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    i as f64,
                    format!("{} × {}", size_label(r.record_size as u64), r.streams),
                )
            })
            .collect(),
        series,
        rules: Vec::new(),
        bars: true,
    }
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
