//! The targets a benchmark measures and how the command line names them: [`TargetKind`], the
//! flags shared by the tape and iSCSI benchmarks ([`TargetFlags`]: the programs to start, or
//! an already running target's address, name and PID), and the `reel.toml` a launched
//! `reel serve` gets ([`ReelToml`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::procs::{self, Tgtd};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Reel,
    Tgt,
    /// Plain files or tape devices written with write(2) (the tape benchmark only).
    File,
}

impl TargetKind {
    pub const ALL: [TargetKind; 3] = [TargetKind::Reel, TargetKind::Tgt, TargetKind::File];

    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Reel => "reel",
            TargetKind::Tgt => "tgt",
            TargetKind::File => "file",
        }
    }

    /// One name of `--targets`, if it is one of `known`.
    pub fn parse(text: &str, known: &[TargetKind]) -> anyhow::Result<TargetKind> {
        let kind = match text.trim().to_ascii_lowercase().as_str() {
            "reel" => Some(TargetKind::Reel),
            "tgt" | "tgtd" => Some(TargetKind::Tgt),
            "file" | "device" => Some(TargetKind::File),
            _ => None,
        };
        match kind.filter(|k| known.contains(k)) {
            Some(kind) => Ok(kind),
            None => bail!(
                "unknown target {text:?} (known: {})",
                known
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The `--targets` list without repeats, in the order given.
    pub fn parse_list(list: &[String], known: &[TargetKind]) -> anyhow::Result<Vec<TargetKind>> {
        let mut kinds = Vec::new();
        for t in list {
            let kind = TargetKind::parse(t, known)?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            bail!("--targets: no targets");
        }
        Ok(kinds)
    }
}

/// A target that is already running (`--reel-addr`, `--tgt-addr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct External {
    pub addr: SocketAddr,
    /// `None`: the first name SendTargets lists.
    pub iqn: Option<String>,
    /// Its process (its CPU is reported only when given).
    pub pid: Option<u32>,
}

/// The programs the tape and iSCSI benchmarks start, or the running targets they use instead.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetFlags {
    /// The `reel` binary to start (default: `reel` next to this program).
    #[arg(long, value_name = "PATH")]
    pub reel_bin: Option<PathBuf>,
    /// tgt's daemon and admin tool.
    #[arg(long, default_value = "tgtd", value_name = "PATH")]
    pub tgtd: String,
    #[arg(long, default_value = "tgtadm", value_name = "PATH")]
    pub tgtadm: String,
    /// Use a reel target that is already running at ADDR instead of starting one.
    #[arg(long, value_name = "ADDR")]
    pub reel_addr: Option<String>,
    /// Target name at --reel-addr (default: the first one SendTargets lists).
    #[arg(long, value_name = "IQN", requires = "reel_addr")]
    pub reel_iqn: Option<String>,
    /// PID of that reel process (its CPU is reported only when given).
    #[arg(long, value_name = "PID", requires = "reel_addr")]
    pub reel_pid: Option<u32>,
    /// Use a tgt target that is already running at ADDR instead of starting tgtd.
    #[arg(long, value_name = "ADDR")]
    pub tgt_addr: Option<String>,
    #[arg(long, value_name = "IQN", requires = "tgt_addr")]
    pub tgt_iqn: Option<String>,
    #[arg(long, value_name = "PID", requires = "tgt_addr")]
    pub tgt_pid: Option<u32>,
}

/// `ADDR:PORT` of a `--KIND-addr` flag.
pub fn parse_addr(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| anyhow!("--{flag} {text:?} is not an address:port (e.g. 127.0.0.1:3260)"))?;
    if addr.port() == 0 {
        bail!("--{flag} {text:?}: port 0 cannot be connected to");
    }
    Ok(addr)
}

impl TargetFlags {
    /// The running target `--KIND-addr` names (`None`: start one).
    pub fn external(&self, kind: TargetKind) -> anyhow::Result<Option<External>> {
        let (addr, iqn, pid, flag) = match kind {
            TargetKind::Reel => (&self.reel_addr, &self.reel_iqn, self.reel_pid, "reel-addr"),
            TargetKind::Tgt => (&self.tgt_addr, &self.tgt_iqn, self.tgt_pid, "tgt-addr"),
            TargetKind::File => return Ok(None),
        };
        addr.as_deref()
            .map(|a| {
                Ok(External {
                    addr: parse_addr(flag, a)?,
                    iqn: iqn.clone(),
                    pid,
                })
            })
            .transpose()
    }

    /// Refuses `--reel-addr` / `--tgt-addr` for a target that is not measured.
    pub fn check_used(&self, kinds: &[TargetKind]) -> anyhow::Result<()> {
        for (flag, given, kind) in [
            ("reel-addr", self.reel_addr.is_some(), TargetKind::Reel),
            ("tgt-addr", self.tgt_addr.is_some(), TargetKind::Tgt),
        ] {
            if given && !kinds.contains(&kind) {
                bail!("--{flag} given but {} is not in --targets", kind.name());
            }
        }
        Ok(())
    }

    /// Checks what starting `kind` needs (the binaries, tgtd's socket directory).
    pub fn preflight_launch(&self, kind: TargetKind) -> anyhow::Result<()> {
        match kind {
            TargetKind::Reel => procs::reel_binary(self.reel_bin.as_deref()).map(drop),
            TargetKind::Tgt => Tgtd::preflight(&self.tgtd, &self.tgtadm),
            TargetKind::File => Ok(()),
        }
    }
}

/// Checks that a running target listens and that its PID (if given) exists.
pub fn preflight_external(kind: TargetKind, target: &External) -> anyhow::Result<()> {
    procs::check_reachable(&format!("the {} target", kind.name()), target.addr)?;
    if let Some(pid) = target.pid {
        reel_sysinfo::cpu_seconds(reel_sysinfo::Proc::Pid(pid))
            .with_context(|| format!("--{}-pid {pid}: no such process", kind.name()))?;
    }
    Ok(())
}

/// iSCSI session limits a launched reel offers (reel's `[iscsi]` section; tgt is set alike).
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    pub max_recv_data_segment_length: u32,
    pub max_burst_length: u32,
    pub first_burst_length: u32,
}

/// The `reel.toml` of a launched `reel serve`: its portal, session limits, console (or none)
/// and targets, each target a `[[iscsi.target]]` table's lines.
#[derive(Clone, Debug)]
pub struct ReelToml {
    /// Which benchmark wrote it (a comment on the first line).
    pub written_by: String,
    pub listen: SocketAddr,
    /// Commands in flight per session reel accepts.
    pub queue_depth: u32,
    pub limits: Option<SessionLimits>,
    /// `[iscsi] max_sessions`; `None` keeps reel's default (64), too few for a benchmark
    /// that opens a session per drive on a big library.
    pub max_sessions: Option<usize>,
    /// The REST API and console; `None` turns them off.
    pub http: Option<SocketAddr>,
    /// The lines of each `[[iscsi.target]]` (`name = "…"`, `kind = "…"`, …).
    pub targets: Vec<String>,
}

impl ReelToml {
    pub fn render(&self) -> String {
        let mut text = format!(
            "# written by {}\n[iscsi]\nlisten = [\"{}\"]\nqueue_depth = {}\n",
            self.written_by, self.listen, self.queue_depth
        );
        if let Some(l) = &self.limits {
            let _ = write!(
                text,
                "max_recv_data_segment_length = {}\nmax_burst_length = {}\nfirst_burst_length = {}\n",
                l.max_recv_data_segment_length, l.max_burst_length, l.first_burst_length
            );
        }
        if let Some(max) = self.max_sessions {
            let _ = writeln!(text, "max_sessions = {max}");
        }
        match self.http {
            Some(http) => {
                let _ = write!(text, "\n[http]\nlisten = \"{http}\"\n");
            }
            None => text.push_str("\n[http]\nenabled = false\n"),
        }
        for target in &self.targets {
            let _ = write!(text, "\n[[iscsi.target]]\n{target}");
            if !target.ends_with('\n') {
                text.push('\n');
            }
        }
        text
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        super::write_text(path, &self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        flags: TargetFlags,
    }

    fn flags(args: &[&str]) -> TargetFlags {
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().flags
    }

    #[test]
    fn targets_parse() {
        let both = [TargetKind::Reel, TargetKind::Tgt];
        let list = |l: &[&str]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            TargetKind::parse_list(&list(&["tgt", "reel", "tgtd"]), &both).unwrap(),
            [TargetKind::Tgt, TargetKind::Reel]
        );
        let e = TargetKind::parse("file", &both).unwrap_err().to_string();
        assert_eq!(e, "unknown target \"file\" (known: reel, tgt)");
        assert!(TargetKind::parse("device", &TargetKind::ALL).is_ok());
        assert!(TargetKind::parse_list(&[], &both).is_err());
    }

    #[test]
    fn external_targets() {
        let f = flags(&["--tgt-addr", "127.0.0.1:3260", "--tgt-pid", "7"]);
        assert_eq!(f.external(TargetKind::Reel).unwrap(), None);
        assert_eq!(
            f.external(TargetKind::Tgt).unwrap(),
            Some(External {
                addr: "127.0.0.1:3260".parse().unwrap(),
                iqn: None,
                pid: Some(7)
            })
        );
        assert!(f.check_used(&[TargetKind::Tgt]).is_ok());
        let e = f.check_used(&[TargetKind::Reel]).unwrap_err().to_string();
        assert!(e.contains("not in --targets"), "{e}");
        let bad = flags(&["--reel-addr", "localhost"]);
        assert!(
            bad.external(TargetKind::Reel)
                .unwrap_err()
                .to_string()
                .contains("not an address:port")
        );
        let zero = flags(&["--reel-addr", "127.0.0.1:0"]);
        assert!(zero.external(TargetKind::Reel).is_err());
        // clap: a PID or a name without the address it belongs to.
        assert!(Cli::try_parse_from(["bench", "--reel-pid", "12"]).is_err());
        assert!(Cli::try_parse_from(["bench", "--tgt-iqn", "iqn.x"]).is_err());
    }

    #[test]
    fn reel_toml_is_what_reel_reads() {
        let toml = ReelToml {
            written_by: "reel bench iscsi".into(),
            listen: "127.0.0.1:3260".parse().unwrap(),
            queue_depth: 64,
            limits: Some(SessionLimits {
                max_recv_data_segment_length: 262144,
                max_burst_length: 1048576,
                first_burst_length: 65536,
            }),
            max_sessions: Some(300),
            http: None,
            targets: vec!["name = \"iqn.x:null\"\nkind = \"null-disk\"\n".into()],
        };
        assert_eq!(
            toml.render(),
            "# written by reel bench iscsi\n[iscsi]\nlisten = [\"127.0.0.1:3260\"]\nqueue_depth = 64\n\
             max_recv_data_segment_length = 262144\nmax_burst_length = 1048576\nfirst_burst_length = 65536\n\
             max_sessions = 300\n\n[http]\nenabled = false\n\n[[iscsi.target]]\nname = \"iqn.x:null\"\nkind = \"null-disk\"\n"
        );
    }
}
