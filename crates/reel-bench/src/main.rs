//! `reel-bench`: the tape throughput benchmark (reel next to tgt); a thin wrapper around
//! [`reel_bench::run`], which will also back `reel bench`.

use clap::Parser;

#[derive(clap::Parser)]
#[command(
    name = "reel-bench",
    about = "Tape throughput over iSCSI: reel's library next to tgt's SSC emulation, driven by reel's initiator (see BENCHMARKING.md)"
)]
struct Cli {
    #[command(flatten)]
    args: reel_bench::BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = reel_bench::run(cli.args) {
        eprintln!("reel-bench: error: {e:#}");
        std::process::exit(1);
    }
}
