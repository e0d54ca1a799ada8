//! `reel bench tgt start|stop` (hidden): one tgtd with one preloaded SSC tape drive, set up
//! the way `reel bench tape` sets up its tgt ([`crate::tape`]) but without a changer, left
//! running for the shell scripts of bench/compare/ (their libiscsi client and `reel bench
//! tape` take turns on it), and taken down the orderly way again.

use std::fs;
use std::path::PathBuf;

use anyhow::Context;

use crate::harness::procs::{self, Tgtd};
use crate::harness::targets::SessionLimits;
use crate::session;
use crate::tape::targets::new_tgt_tape;

/// The only target: tgt's target ids start at 1.
const TID: u32 = 1;

/// Start or stop a tgtd for bench/compare/.
#[derive(clap::Args, Debug)]
pub struct TgtArgs {
    #[command(subcommand)]
    pub command: TgtCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TgtCommand {
    /// tgtd on a free loopback port, target IQN with the tape drive at LUN 1 holding a fresh
    /// tape image DIR/tape, loaded and online; prints `tgt_pid=… tgt_port=… tgt_cport=…` for
    /// a shell's `eval` and leaves tgtd running.
    Start(StartArgs),
    /// Takes down a tgtd `start` left running (tgtd ignores SIGTERM while it has targets).
    Stop(StopArgs),
}

#[derive(clap::Args, Debug)]
pub struct StartArgs {
    /// Where the tape image and tgtd.log go.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Bytes of records the tape must hold (tgt's 48-byte record headers are added).
    #[arg(long, value_name = "BYTES")]
    pub size: u64,
    /// The target's MaxBurstLength in bytes; its other limits are `reel bench tape`'s.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_burst: u32,
    #[arg(long)]
    pub iqn: String,
    #[arg(long, default_value = "CMP001L9")]
    pub barcode: String,
    #[arg(long, default_value = "tgtd", value_name = "PATH")]
    pub tgtd: String,
    #[arg(long, default_value = "tgtadm", value_name = "PATH")]
    pub tgtadm: String,
    #[arg(long, default_value = "tgtimg", value_name = "PATH")]
    pub tgtimg: String,
}

#[derive(clap::Args, Debug)]
pub struct StopArgs {
    /// `tgt_pid` of `start`.
    #[arg(long)]
    pub pid: u32,
    /// `tgt_cport` of `start`.
    #[arg(long)]
    pub control_port: u16,
    #[arg(long, default_value = "tgtadm", value_name = "PATH")]
    pub tgtadm: String,
}

pub fn run(args: TgtArgs) -> anyhow::Result<()> {
    match args.command {
        TgtCommand::Start(args) => start(&args),
        TgtCommand::Stop(args) => {
            procs::stop_detached_tgtd(&args.tgtadm, args.pid, args.control_port, &[TID])
        }
    }
}

fn start(args: &StartArgs) -> anyhow::Result<()> {
    Tgtd::preflight(&args.tgtd, &args.tgtadm)?;
    fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let tape = args.dir.join("tape");
    new_tgt_tape(&args.tgtimg, &tape, &args.barcode, args.size)?;
    // Dropped on an error before `detach`: tgtd is taken down again.
    let mut tgtd = Tgtd::start(&args.tgtd, &args.tgtadm, &args.dir.join("tgtd.log"))?;
    tgtd.new_target(TID, &args.iqn)?;
    tgtd.set_session_limits(
        TID,
        SessionLimits {
            max_burst_length: args.max_burst,
            ..session::SESSION_LIMITS
        },
    )?;
    tgtd.new_lun(
        TID,
        1,
        "ssc",
        &tape.to_string_lossy(),
        &["--device-type", "tape"],
    )?;
    tgtd.bind_all(TID)?;
    let port = tgtd.addr().port();
    let (pid, control_port) = tgtd.detach();
    println!("tgt_pid={pid} tgt_port={port} tgt_cport={control_port}");
    Ok(())
}
