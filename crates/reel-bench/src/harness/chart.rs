//! Line charts as plain SVG (no dependencies), for every benchmark's report: series of points
//! on a linear y axis, a categorical or linear x axis, dashed lines and reference rules, a
//! legend on the right. Each target has its colour (and shades of it for several lines).

use std::fmt::Write as _;

use super::TargetKind;

pub const REEL_COLOR: &str = "#1f6fb4";
pub const TGT_COLOR: &str = "#e0701b";

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub color: String,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
    /// Draw a marker at every point (sparse series).
    pub markers: bool,
}

/// A horizontal reference line.
#[derive(Clone, Debug)]
pub struct Rule {
    pub y: f64,
    pub color: String,
    pub label: String,
}

#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Fixed x ticks (categorical axes); automatic when empty.
    pub x_ticks: Vec<(f64, String)>,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
    /// Draw each series as bars, grouped at each (categorical) x tick, instead of lines.
    pub bars: bool,
}

const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 64.0;

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `target` intervals over `span`.
pub fn nice_step(span: f64, target: usize) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn number(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        // Ticks are sums of steps such as 0.1: print what they mean, not the float's noise
        // (0.6000000000000001), up to 6 decimals without trailing zeros.
        let text = format!("{v:.6}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl LineChart {
    pub fn render(&self) -> String {
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in points {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        for r in &self.rules {
            y_max = y_max.max(r.y);
        }
        for (x, _) in &self.x_ticks {
            x_min = x_min.min(*x);
            x_max = x_max.max(*x);
        }
        if !x_min.is_finite() {
            (x_min, x_max) = (0.0, 1.0);
        }
        if x_max <= x_min {
            x_max = x_min + 1.0;
        }
        let y_step = nice_step(if y_max > 0.0 { y_max } else { 1.0 }, 6);
        let y_top = ((y_max / y_step).ceil().max(1.0)) * y_step;
        let categorical = !self.x_ticks.is_empty();
        // Categorical axes get half a step of room on both sides.
        let (x_lo, x_hi) = if categorical {
            let pad = (x_max - x_min) / (self.x_ticks.len().max(2) - 1) as f64 / 2.0;
            (x_min - pad, x_max + pad)
        } else {
            (x_min.min(0.0), x_max)
        };
        let plot_w = W - LEFT - RIGHT;
        let plot_h = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w;
        let sy = |y: f64| TOP + plot_h - y / y_top * plot_h;

        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="26" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            LEFT + plot_w / 2.0,
            escape(&self.title)
        );
        // Grid and y ticks.
        let mut y = 0.0;
        while y <= y_top + y_step / 2.0 {
            let py = sy(y);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#dddddd"/>"##,
                LEFT + plot_w
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                py + 4.0,
                number(y)
            );
            y += y_step;
        }
        // X ticks.
        let ticks: Vec<(f64, String)> = if categorical {
            self.x_ticks.clone()
        } else {
            let step = nice_step(x_hi - x_lo, 8);
            let mut t = (x_lo / step).ceil() * step;
            let mut v = Vec::new();
            while t <= x_hi + step * 1e-9 {
                v.push((t, number(t)));
                t += step;
            }
            v
        };
        for (x, label) in &ticks {
            let px = sx(*x);
            let _ = writeln!(
                out,
                r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#333333"/>"##,
                TOP + plot_h,
                TOP + plot_h + 5.0
            );
            let _ = writeln!(
                out,
                r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                TOP + plot_h + 19.0,
                escape(label)
            );
        }
        // Axes and their labels.
        let _ = writeln!(
            out,
            r##"<path d="M{LEFT},{TOP} V{:.1} H{:.1}" fill="none" stroke="#333333"/>"##,
            TOP + plot_h,
            LEFT + plot_w
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            H - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            out,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        // Reference lines.
        for r in &self.rules {
            let py = sy(r.y);
            let _ = writeln!(
                out,
                r#"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="{}" stroke-width="1" stroke-dasharray="2,3"/>"#,
                LEFT + plot_w,
                r.color
            );
        }
        // Series.
        if self.bars {
            // Each group fills 80 % of the space of one category.
            let slot = plot_w / (x_hi - x_lo) * 0.8;
            let width = slot / self.series.len().max(1) as f64;
            for (n, s) in self.series.iter().enumerate() {
                for &(x, y) in &s.points {
                    let left = sx(x) - slot / 2.0 + n as f64 * width;
                    let _ = writeln!(
                        out,
                        r#"<rect x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                        sy(y),
                        width * 0.9,
                        (sy(0.0) - sy(y)).max(0.0),
                        s.color
                    );
                }
            }
        }
        for s in self.series.iter().filter(|_| !self.bars) {
            if s.points.is_empty() {
                continue;
            }
            let path: Vec<String> = s
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                .collect();
            let dash = if s.dashed {
                r#" stroke-dasharray="7,4""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                path.join(" "),
                s.color
            );
            if s.markers {
                for &(x, y) in &s.points {
                    let _ = writeln!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"/>"#,
                        sx(x),
                        sy(y),
                        s.color
                    );
                }
            }
        }
        // Legend.
        let lx = LEFT + plot_w + 16.0;
        let mut ly = TOP + 8.0;
        for s in &self.series {
            let dash = if s.dashed {
                r#" stroke-dasharray="7,4""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/>"#,
                lx + 26.0,
                s.color
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 32.0,
                ly + 4.0,
                escape(&s.name)
            );
            ly += 20.0;
        }
        for r in &self.rules {
            let _ = writeln!(
                out,
                r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-dasharray="2,3"/>"#,
                lx + 26.0,
                r.color
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 32.0,
                ly + 4.0,
                escape(&r.label)
            );
            ly += 20.0;
        }
        out.push_str("</svg>\n");
        out
    }
}

pub fn color(kind: TargetKind) -> &'static str {
    palette(kind)[0]
}

/// Shades of each target's colour, for several lines of one target in a chart.
pub fn palette(kind: TargetKind) -> &'static [&'static str] {
    match kind {
        TargetKind::Reel => &[
            REEL_COLOR, "#0b3d66", "#5aa0d8", "#123f8c", "#8cc4ec", "#3d5a80",
        ],
        TargetKind::Tgt => &[
            TGT_COLOR, "#9c4a0c", "#f2a65a", "#c0392b", "#f7c89b", "#7a5230",
        ],
        TargetKind::File => &[
            "#2a9d3a", "#146b22", "#73c77f", "#4d7c0f", "#a3d9a5", "#1b4d2b",
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(1000.0, 5), 200.0);
        assert_eq!(nice_step(730.0, 6), 200.0);
        assert_eq!(nice_step(60.0, 8), 10.0);
        assert_eq!(nice_step(7.0, 6), 2.0);
        assert_eq!(nice_step(0.0, 6), 1.0);
    }

    #[test]
    fn tick_labels_drop_float_noise() {
        assert_eq!(number(0.1 + 0.2 + 0.3), "0.6");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.25), "0.25");
    }

    #[test]
    fn renders_lines_axes_and_legend() {
        let chart = LineChart {
            title: "T <1>".into(),
            x_label: "x (s)".into(),
            y_label: "MB/s".into(),
            x_ticks: Vec::new(),
            series: vec![Series {
                name: "reel".into(),
                color: REEL_COLOR.into(),
                dashed: true,
                points: vec![(1.0, 100.0), (2.0, 300.0), (3.0, 250.0)],
                markers: true,
            }],
            rules: vec![Rule {
                y: 200.0,
                color: REEL_COLOR.into(),
                label: "80 %".into(),
            }],
            bars: false,
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("T &lt;1&gt;"));
        assert!(svg.contains("<polyline") && svg.contains("stroke-dasharray=\"7,4\""));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(">MB/s</text>") && svg.contains(">x (s)</text>"));
        assert!(svg.contains(">300</text>"), "y axis reaches the maximum");
        // No data at all still renders a frame.
        let empty = LineChart {
            series: Vec::new(),
            rules: Vec::new(),
            bars: false,
            ..chart
        };
        assert!(empty.render().contains("</svg>"));
    }
}
