//! The library benchmark's chart: median, 95th percentile and worst latency of each request,
//! as grouped bars (the streaming phase's requests after the idle library's).

use super::{Latency, Report};
use crate::harness::chart::{LineChart, Series};

/// (file name, chart).
pub fn charts(report: &Report) -> Vec<(String, LineChart)> {
    let mut requests: Vec<(String, &Latency)> = report
        .requests
        .iter()
        .map(|l| (l.short.clone(), l))
        .collect();
    if let Some(s) = &report.streaming {
        // The gaps between live events are about 1 s by design: not a latency to compare.
        for l in s.requests.iter().filter(|l| l.short != "live events") {
            requests.push((format!("{} (256 streaming)", l.short), l));
        }
    }
    let series = [
        ("median", "#1f6fb4"),
        ("95th percentile", "#5aa0d8"),
        ("max", "#0b3d66"),
    ]
    .into_iter()
    .enumerate()
    .map(|(k, (name, color))| Series {
        name: name.into(),
        color: color.into(),
        dashed: false,
        points: requests
            .iter()
            .enumerate()
            .map(|(i, (_, l))| (i as f64, [l.median_ms, l.p95_ms, l.max_ms][k]))
            .collect(),
        markers: false,
    })
    .collect();
    let chart = LineChart {
        title: format!(
            "Library of {} full slots, 256 drives: request latency",
            report.slots
        ),
        x_label: "request (30 runs each; the streaming ones while 256 drives write)".into(),
        y_label: "milliseconds".into(),
        x_ticks: requests
            .iter()
            .enumerate()
            .map(|(i, (label, _))| (i as f64, label.clone()))
            .collect(),
        series,
        rules: Vec::new(),
        bars: true,
    };
    vec![("latency.svg".into(), chart)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(short: &str, median_ms: f64) -> Latency {
        Latency {
            what: short.into(),
            short: short.into(),
            median_ms,
            p95_ms: median_ms * 2.0,
            max_ms: median_ms * 3.0,
            count: 1,
        }
    }

    #[test]
    fn bars_for_every_request() {
        let report = Report {
            tool: String::new(),
            slots: 10_000,
            copied: false,
            create_s: 1.0,
            start_s: 1.0,
            requests: vec![latency("element status", 6.0), latency("move medium", 7.0)],
            metrics_scrapes: 50,
            metrics_s: 0.1,
            metrics_bytes: 1,
            metrics_cpu_s: 0.001,
            streaming: None,
        };
        let (file, chart) = charts(&report).remove(0);
        assert_eq!(file, "latency.svg");
        assert_eq!(chart.series.len(), 3);
        assert_eq!(chart.series[2].points, [(0.0, 18.0), (1.0, 21.0)]);
        let svg = chart.render();
        assert_eq!(
            svg.matches("<rect").count(),
            1 + 6,
            "the background and six bars"
        );
        assert!(!svg.contains("<polyline"));
    }
}
