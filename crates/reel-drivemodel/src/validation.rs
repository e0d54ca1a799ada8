//! The model's predictions next to published measurements of real drives. The table in
//! `docs/design/drive-model.md` is [`markdown_table`]'s output; a test keeps them identical.
//! No parameter was fitted to these measurements.

use crate::spec::{DriveSpec, drive};
use crate::workload::{Compressibility, Source, Workload, simulate};

/// One measurement and the model's prediction of it.
#[derive(Clone, Debug)]
pub struct Prediction {
    /// Catalog id of the drive model used.
    pub drive: &'static str,
    /// What was measured, and how the model was run.
    pub what: &'static str,
    /// Where the measurement comes from (short; the doc's reference list has the details).
    pub source: &'static str,
    /// Unit of `measured` and `predicted`.
    pub unit: &'static str,
    /// The published value.
    pub measured: f64,
    /// The model's value.
    pub predicted: f64,
}

impl Prediction {
    /// (predicted − measured) / measured, in percent.
    pub fn error_percent(&self) -> f64 {
        (self.predicted - self.measured) / self.measured * 100.0
    }
}

fn spec(id: &str) -> &'static DriveSpec {
    drive(id).expect("catalog drive")
}

fn job(record_size: u64, compressibility: Compressibility, total_bytes: u64) -> Workload {
    Workload {
        source: Source::Unlimited,
        record_size,
        compressibility,
        filemark_every: None,
        immed: false,
        queue_depth: 1,
        total_bytes,
    }
}

fn throughput_mb(id: &str, w: &Workload) -> f64 {
    simulate(spec(id), w).throughput / 1e6
}

/// The compressible share (at 2:1, 256 KiB records) below which the drive writes more native
/// bytes than it receives, in percent.
pub fn expansion_share(id: &str) -> f64 {
    let s = spec(id);
    let expands = |share: f64| {
        let w = job(
            256 << 10,
            Compressibility {
                compressible_share: share,
                ratio: 2.0,
            },
            1 << 30,
        );
        let r = simulate(s, &w);
        r.native_bytes > w.total_bytes
    };
    if !expands(0.0) {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..30 {
        let mid = (lo + hi) / 2.0;
        if expands(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi * 100.0
}

/// Every prediction, in the doc's order.
pub fn predictions() -> Vec<Prediction> {
    const GIB: u64 = 1 << 30;
    let native_256k = throughput_mb("lto2-hh", &job(256 << 10, Compressibility::OFF, 4 * GIB));
    let native_64k = throughput_mb("lto2-hh", &job(64 << 10, Compressibility::OFF, 4 * GIB));
    let native_128k = throughput_mb("lto2-hh", &job(128 << 10, Compressibility::OFF, 4 * GIB));
    let btape = {
        let w = Workload {
            source: Source::Unlimited,
            record_size: 64512,
            compressibility: Compressibility::uniform(50.0),
            filemark_every: None,
            immed: false,
            queue_depth: 1,
            total_bytes: 1_073_741_824,
        };
        simulate(spec("lto5-fh"), &w).throughput / 1e6
    };
    vec![
        Prediction {
            drive: "lto2-hh",
            what: "Tandberg 420LTO, compression off, best block size (256 KiB), unlimited source",
            source: "[S1] openBench Labs 2006",
            unit: "MB/s",
            measured: 21.3,
            predicted: native_256k,
        },
        Prediction {
            drive: "lto2-hh",
            what: "Quantum CL400H, compression off (\"20 % lower\" than 21.3)",
            source: "[S1] openBench Labs 2006",
            unit: "MB/s",
            measured: 21.3 / 1.2,
            predicted: native_256k,
        },
        Prediction {
            drive: "lto2-hh",
            what: "gain of 128 KiB over 64 KiB blocks (\"4 % to 5 %\")",
            source: "[S1] openBench Labs 2006",
            unit: "%",
            measured: 4.5,
            predicted: (native_128k / native_64k - 1.0) * 100.0,
        },
        Prediction {
            drive: "lto2-hh",
            what: "Outlook folders at about 1.5:1, 128 KiB blocks",
            source: "[S1] openBench Labs 2006",
            unit: "MB/s",
            measured: 35.0,
            predicted: throughput_mb(
                "lto2-hh",
                &job(128 << 10, Compressibility::uniform(1.5), 4 * GIB),
            ),
        },
        Prediction {
            drive: "lto2-hh",
            what: "host rate that keeps the drive streaming on 4:1 data",
            source: "[S1] openBench Labs 2006",
            unit: "MB/s",
            measured: 88.0,
            predicted: throughput_mb(
                "lto2-hh",
                &job(128 << 10, Compressibility::uniform(4.0), 4 * GIB),
            ),
        },
        Prediction {
            drive: "sdlt320",
            what: "compressible share (2:1) below which data expands on tape",
            source: "[S1] openBench Labs 2006",
            unit: "%",
            measured: 30.0,
            predicted: expansion_share("sdlt320"),
        },
        Prediction {
            drive: "lto2-hh",
            what: "compressible share (2:1) below which data expands on tape",
            source: "[S1] openBench Labs 2006",
            unit: "%",
            measured: 10.0,
            predicted: expansion_share("lto2-hh"),
        },
        Prediction {
            drive: "lto5-fh",
            what: "Bacula btape, zero data, 64512-byte blocks, 1.07 GB file + filemark",
            source: "[S2] btape on HP LTO-5",
            unit: "MB/s",
            measured: 214.7,
            predicted: btape,
        },
        Prediction {
            drive: "lto5-hh",
            what: "uncompressed data, home user, \"around 140-150 MB/s\" (256 KiB assumed)",
            source: "[S3] longview.be",
            unit: "MB/s",
            measured: 145.0,
            predicted: throughput_mb("lto5-hh", &job(256 << 10, Compressibility::OFF, 4 * GIB)),
        },
    ]
}

/// The predictions as the markdown table the design doc carries.
pub fn markdown_table(rows: &[Prediction]) -> String {
    let mut out = String::from(
        "| # | Drive model | Measurement | Source | Measured | Model | Error |\n|---|---|---|---|---:|---:|---:|\n",
    );
    for (i, p) in rows.iter().enumerate() {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {:.1} {} | {:.1} {} | {:+.0} % |\n",
            i + 1,
            p.drive,
            p.what,
            p.source,
            p.measured,
            p.unit,
            p.predicted,
            p.unit,
            p.error_percent()
        ));
    }
    out
}
