//! `reel`: the virtual tape library's binary and composition root.
//!
//! Subcommands live in their own modules; `main` only parses the command line and dispatches.

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};

mod admin;
mod archive_location;
mod cluster;
mod config;
mod data_dir;
mod disk_usage;
mod doctor;
mod http;
mod notify;
mod remote;
mod serve;
mod store_key;

/// reel: a deduplicating virtual tape library.
#[derive(Parser, Debug)]
#[command(name = "reel", version, about, propagate_version = true)]
struct Cli {
    /// Log lines as text (default; without timestamps when journald captures them) or as one
    /// JSON object per line. Also REEL_LOG_FORMAT; REEL_LOG sets the level (info).
    #[arg(
        long,
        global = true,
        value_enum,
        env = "REEL_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the library on its data directory (a new one gets 20 blank LTO-9 cartridges).
    Serve(serve::ServeArgs),
    /// Create, list and delete cartridges.
    #[command(subcommand)]
    Cartridges(admin::CartridgeCommand),
    /// Re-read and re-hash all stored data; report damage by cartridge and record.
    Verify(data_dir::DataDirArg),
    /// Free the space of deleted, erased and overwritten data.
    Reclaim(data_dir::DataDirArg),
    /// Space used, dedup and compression ratios.
    Stats(data_dir::DataDirArg),
    /// Give the catalog file's spare pages back to the disk, whatever its size (a stop does
    /// that for catalogs up to 4 GiB; run this with the server stopped).
    Compact(data_dir::DataDirArg),
    /// Rebuild a node from its bucket alone into a new data directory (then `reel serve` it).
    Recover(admin::RecoverArgs),
    /// The store encryption key: `reel key generate FILE`.
    #[command(subcommand)]
    Key(store_key::KeyCommand),
    /// Control a running reel through its REST API (status, moves, import/export, sessions).
    Ctl(remote::CtlArgs),
    /// Benchmarks: tape throughput, the iSCSI data path, the chunk store, a big library's
    /// management surface, and the soak test (see BENCHMARKING.md).
    #[command(subcommand)]
    Bench(reel_bench::BenchCommand),
    /// The physical tape drive model: the catalog of drives, one workload simulated, sweeps
    /// with charts, and a backup-window planner (docs/design/drive-model.md).
    Model(reel_bench::model::ModelArgs),
    /// Check what a new installation gets wrong (ports, the data directory, limits, clock,
    /// TLS files, the bucket, exposure) and say how to fix each.
    Doctor(doctor::DoctorArgs),
    /// Write the man pages (reel.1 and one per subcommand) into a directory (for packages).
    Man {
        /// Where to write them (created if missing).
        dir: std::path::PathBuf,
    },
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("REEL_LOG").unwrap_or_else(|_| "info".into())
    };
    match cli.log_format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_writer(std::io::stderr)
            .with_env_filter(filter())
            .init(),
        // systemd sets JOURNAL_STREAM when stderr goes to the journal, which stamps each line
        // itself.
        LogFormat::Text if std::env::var_os("JOURNAL_STREAM").is_some() => {
            tracing_subscriber::fmt()
                .without_time()
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .with_env_filter(filter())
                .init();
        }
        LogFormat::Text => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_env_filter(filter())
            .init(),
    }
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Cartridges(cmd) => admin::cartridges(cmd),
        Command::Verify(data) => admin::verify(data),
        Command::Reclaim(data) => admin::reclaim(data),
        Command::Stats(data) => admin::stats(data),
        Command::Compact(data) => admin::compact(data),
        Command::Recover(args) => admin::recover(args),
        Command::Key(cmd) => store_key::run(cmd),
        Command::Ctl(args) => remote::run(args),
        Command::Bench(command) => reel_bench::run(command),
        Command::Model(args) => reel_bench::model::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Man { dir } => man_pages(&dir),
        Command::Completions { shell } => completions(shell),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reel: error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes joined by ": ", like `{:#}`, but without a cause whose text the
/// messages before it already quote ([`reel_backend::chain_text`]).
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    reel_backend::chain_text(e.chain())
}

/// The man pages, generated from the same definition as `--help`: reel.1, reel-serve.1, …
fn man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))
}

/// A completion script on stdout; a closed pipe (`| head`) ends it quietly.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "reel", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the completion script"),
    }
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn error_text_leaves_out_a_cause_its_message_already_quotes() {
        let backend = reel_backend::BackendError::io("packs/1", std::io::Error::other("disk gone"));
        let e = anyhow::Error::new(backend).context("opening the store");
        assert_eq!(
            format!("{e:#}"),
            "opening the store: I/O error on packs/1: disk gone: disk gone"
        );
        assert_eq!(
            error_text(&e),
            "opening the store: I/O error on packs/1: disk gone"
        );
        let unrelated = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&unrelated), "outer: inner");
    }
}
