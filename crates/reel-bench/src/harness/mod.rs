//! What every benchmark shares: the target processes ([`procs`]: `reel serve` and `tgtd` as
//! children, started on free loopback ports and stopped in an orderly way), the command-line
//! flags naming the targets and the `reel.toml` a launched reel gets ([`targets`]), CPU time and
//! the machine's description (through `reel-sysinfo`, [`machine`]), sizes ([`size`]),
//! statistics ([`stats`]), tables ([`table`]), SVG charts ([`chart`]), writing RESULTS.md /
//! results.json ([`output`]) and the async runtime with Ctrl-C handling ([`runtime`]).
//! Each benchmark module (tape, iscsi, store, library, soak) keeps only what it measures.

pub mod chart;
pub mod machine;
pub mod output;
pub mod procs;
pub mod runtime;
pub mod size;
pub mod stats;
pub mod table;
pub mod targets;

pub use machine::Machine;
pub use output::{ReportFlags, now_unix, write_charts, write_json, write_text};
pub use runtime::{INTERRUPTED, interrupted, on_interrupt, runtime};
pub use size::{parse_size, size_label};
pub use stats::median;
pub use targets::{External, ReelToml, TargetFlags, TargetKind};
