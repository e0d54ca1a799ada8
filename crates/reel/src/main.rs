//! `reel`: the virtual tape library's binary and composition root.
//!
//! Subcommands live in their own modules; `main` only parses the command line and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod store_bench;

/// reel: a deduplicating virtual tape library.
#[derive(Parser, Debug)]
#[command(name = "reel", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the chunk store end to end on generated tapewrite-style data.
    StoreBench(store_bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::StoreBench(args) => store_bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reel: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
