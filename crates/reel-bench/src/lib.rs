//! `reel bench`: reel's benchmarks in one crate, each a subcommand —
//!
//! - [`tape`]: tape throughput end to end, reel's library next to Debian tgt's SSC emulation
//!   (and plain files or a tape device), both driven over iSCSI by reel's own initiator;
//! - [`iscsi`]: the iSCSI data path alone, reel's target next to tgt on null devices;
//! - [`store`]: the chunk store end to end on generated tapewrite-style data, in process;
//! - [`library`]: the management surface of a big library (element status, moves, the API's
//!   listings, /metrics) and the console while 256 drives stream;
//! - [`soak`]: not a speed measurement: many sessions, moves and API calls against one
//!   `reel serve` that is SIGKILLed and restarted, checked after every restart;
//! - [`tgt`] (hidden): a tgtd with one tape drive, started and stopped for bench/compare/.
//!
//! What they share lives in [`harness`] (processes, CPU and machine, sizes, statistics,
//! tables, charts, writing RESULTS.md / results.json, the runtime and Ctrl-C); the iSCSI
//! initiator's sessions and SCSI commands in `session` and `scsi`; reel's REST API in [`api`].
//! See BENCHMARKING.md.

pub mod api;
pub mod harness;
pub mod iscsi;
pub mod library;
pub mod model;
mod scsi;
mod session;
pub mod soak;
pub mod store;
pub mod tape;
pub mod tgt;

pub use reel_scsi::initiator::describe::describe_sense;
pub use scsi::CommandFailure;

/// `reel bench …`: one benchmark (each boxed: the arguments are large and parsed once).
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Tape throughput through iSCSI against reel and tgt side by side (tapewrite-style data;
    /// bench/tape/).
    Tape(Box<tape::TapeArgs>),
    /// The iSCSI data path alone: reel's target next to tgt on null devices (bench/iscsi/).
    Iscsi(Box<iscsi::IscsiArgs>),
    /// The chunk store end to end on generated tapewrite-style data (bench/store/).
    Store(Box<store::StoreArgs>),
    /// How the catalog grows over a long write, streamed (100 GiB and more; bench/store/).
    Growth(Box<store::growth::GrowthArgs>),
    /// Management-surface latency of a big library, and the console while 256 drives stream
    /// (bench/library/).
    Library(Box<library::LibraryArgs>),
    /// The soak test: many sessions, changer moves and API calls against one `reel serve`,
    /// SIGKILLed and restarted every few minutes, checked after every restart (bench/soak/).
    Soak(Box<soak::SoakArgs>),
    /// Starts or stops a tgtd with one tape drive for bench/compare/'s scripts.
    #[command(hide = true)]
    Tgt(tgt::TgtArgs),
}

/// Runs one benchmark: measures, prints its tables and writes what was asked for.
pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Tape(args) => tape::run(*args),
        BenchCommand::Iscsi(args) => iscsi::run(*args),
        BenchCommand::Store(args) => store::run(*args),
        BenchCommand::Growth(args) => store::growth::run(*args),
        BenchCommand::Library(args) => library::run(*args),
        BenchCommand::Tgt(args) => tgt::run(args),
        BenchCommand::Soak(args) => soak::run(*args).and_then(|s| {
            if s.passed {
                Ok(())
            } else {
                Err(anyhow::anyhow!("the soak failed (see the report above)"))
            }
        }),
    }
}
