//! `reel-bench`: the tape throughput benchmark (reel next to tgt); a thin wrapper around
//! [`reel_bench::run`], which will also back `reel bench`.

use clap::Parser;

#[derive(clap::Parser)]
#[command(
    name = "reel-bench",
    about = "Tape throughput over iSCSI: reel's library next to tgt's SSC emulation, driven by reel's initiator (see BENCHMARKING.md)"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    args: reel_bench::BenchArgs,
}

#[derive(clap::Subcommand)]
enum Command {
    /// The soak test: many sessions, changer moves and API calls against one `reel serve`,
    /// SIGKILLed and restarted every few minutes, checked after every restart (see
    /// bench/soak/README.md).
    Soak(reel_bench::soak::SoakArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Soak(args)) => reel_bench::soak::run(args).and_then(|s| {
            if s.passed {
                Ok(())
            } else {
                Err(anyhow::anyhow!("the soak failed (see the report above)"))
            }
        }),
        None => reel_bench::run(cli.args),
    };
    if let Err(e) = result {
        eprintln!("reel-bench: error: {e:#}");
        std::process::exit(1);
    }
}
