//! The targets of one cell: a fresh `reel serve` library or a fresh tgtd with SSC drives and
//! an SMC changer, each in its own directory under the work directory (so both store their
//! data on the same filesystem, and nothing dedups against an earlier cell); or a target that
//! is already running. Afterwards: what each kept on disk.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::api::{ReelApi, ReelFigures};
use crate::harness::TargetKind;
use crate::harness::procs;
use crate::harness::procs::{ReelServe, Tgtd};
use crate::harness::targets::{ReelToml, preflight_external};
use crate::session::SESSION_LIMITS;
use crate::tape::args::{Plan, Source, TargetPlan};
use crate::tape::report::Storage;

pub const REEL_IQN: &str = "iqn.2026-11.org.reel.bench:tape-library";
pub const TGT_IQN: &str = "iqn.2026-11.org.reel.bench:tgt-tape-library";

/// A target ready for a cell.
pub struct Running {
    pub kind: TargetKind,
    pub addr: SocketAddr,
    /// `None`: the first name SendTargets lists.
    pub iqn: Option<String>,
    pub pid: Option<u32>,
    pub launched: bool,
    pub software: String,
    /// "changer", "preloaded", or "file" / "device" for the `file` target.
    pub media: String,
    /// reel's REST API (a launched reel, or `--reel-url`): its own counters.
    pub api: Option<ReelApi>,
    /// `file` target: the paths written, one per drive.
    pub paths: Vec<PathBuf>,
    guard: Guard,
    /// The cell's directory (launched targets), removed by [`Running::finish`] and on errors
    /// unless `keep`.
    dir: Option<PathBuf>,
    keep: bool,
}

enum Guard {
    None,
    Reel {
        serve: ReelServe,
        data: PathBuf,
    },
    /// Files the `file` target created in the cell's directory (removed with it).
    Files,
    Tgt {
        tgtd: Tgtd,
        tapes: Vec<PathBuf>,
    },
}

/// The work directory's lock file, held for a whole run: two runs in one work directory would
/// clear each other's cell directories under running targets (which then fail writes).
pub const WORK_LOCK: &str = ".reel-bench.lock";

/// Everything that can be checked before a target starts. Returns the work directory's lock,
/// to be held until the run ends.
pub fn preflight(plan: &Plan) -> anyhow::Result<fs::File> {
    for t in &plan.targets {
        match (&t.source, t.kind) {
            (Source::Launch, TargetKind::Reel) => plan.target.preflight_launch(t.kind)?,
            (Source::Launch, TargetKind::Tgt) => {
                plan.target.preflight_launch(t.kind)?;
                if procs::which(&plan.tgtimg).is_none() {
                    bail!(
                        "{} not found (install Debian's tgt package or pass --tgtimg)",
                        plan.tgtimg
                    );
                }
            }
            (Source::Launch, TargetKind::File) => {}
            (Source::Paths(paths), _) => {
                for p in paths {
                    // A tape device must exist; a plain file is created (its directory must).
                    let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
                    if !p.exists() && dir.is_some_and(|d| !d.is_dir()) {
                        bail!("--device {}: its directory does not exist", p.display());
                    }
                }
            }
            (Source::External(external), kind) => preflight_external(kind, external)?,
        }
    }
    plan.report.check()?;
    fs::create_dir_all(&plan.work_dir)
        .with_context(|| format!("creating the work directory {}", plan.work_dir.display()))?;
    let lock_path = plan.work_dir.join(WORK_LOCK);
    let lock = fs::File::create(&lock_path)
        .with_context(|| format!("creating {}", lock_path.display()))?;
    // Waits briefly: a process another thread is starting can hold the lock a moment
    // (`lock_file::lock_exclusive` says why); a run that really holds it holds it for minutes.
    let locked =
        reel_backend::lock_file::lock_exclusive(&lock, reel_backend::lock_file::LOCK_PATIENCE)
            .with_context(|| format!("locking {}", lock_path.display()))?;
    if !locked {
        bail!(
            "another benchmark run is using the work directory {} (it holds {}); wait for it \
             to end or pass another --work-dir",
            plan.work_dir.display(),
            lock_path.display()
        );
    }
    // tgt stores every byte: the largest cell must fit (reel's share is far smaller).
    if plan
        .targets
        .iter()
        .any(|t| t.kind == TargetKind::Tgt && t.source == Source::Launch)
    {
        let need = plan.max_cell_bytes() + plan.max_cell_bytes() / 20 + (256 << 20);
        if let Some(free) = free_bytes(&plan.work_dir)
            && free < need
        {
            bail!(
                "{} has {:.1} GB free; tgt's tape images for the largest cell need about {:.1} GB (use --work-dir elsewhere or a smaller --size/--flat)",
                plan.work_dir.display(),
                free as f64 / 1e9,
                need as f64 / 1e9
            );
        }
    }
    Ok(lock)
}

/// Free bytes in the filesystem holding `dir` (`df`; `None` if it cannot say).
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = Command::new("df")
        .args(["-P", "-B1"])
        .arg(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()
}

/// Allocated bytes of a file or of everything under a directory.
pub fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    let own = meta.blocks() * 512;
    if !meta.is_dir() {
        return own;
    }
    let children = fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| disk_usage(&e.path()))
                .sum()
        })
        .unwrap_or(0);
    own + children
}

/// Starts (or adopts) `t` for a cell of `drives` drives of `size` bytes each.
pub fn start(
    plan: &Plan,
    t: &TargetPlan,
    cell_name: &str,
    drives: u32,
    size: u64,
) -> anyhow::Result<Running> {
    match &t.source {
        Source::External(external) => Ok(Running {
            kind: t.kind,
            addr: external.addr,
            iqn: external.iqn.clone(),
            pid: external.pid,
            launched: false,
            software: format!("already running at {}", external.addr),
            media: "changer".into(),
            api: match (t.kind, &plan.reel_url) {
                (TargetKind::Reel, Some(url)) => Some(crate::api::with_token(
                    url,
                    plan.reel_token.as_deref().unwrap_or_default(),
                )?),
                _ => None,
            },
            paths: Vec::new(),
            guard: Guard::None,
            dir: None,
            keep: plan.keep,
        }),
        Source::Paths(paths) if !paths.is_empty() => Ok(Running {
            kind: t.kind,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            iqn: None,
            pid: None,
            launched: false,
            software: "write(2)/read(2) on the paths given".into(),
            media: if paths
                .iter()
                .all(|p| crate::tape::filemode::is_tape_device(p))
            {
                "device".into()
            } else {
                "file".into()
            },
            api: None,
            paths: paths[..drives as usize].to_vec(),
            guard: Guard::None,
            dir: None,
            keep: plan.keep,
        }),
        Source::Launch | Source::Paths(_) => {
            let dir = plan.work_dir.join(format!("{cell_name}-{}", t.kind.name()));
            if dir.exists() {
                fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
            }
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let started = match t.kind {
                TargetKind::Reel => start_reel(plan, &dir, drives),
                TargetKind::Tgt => start_tgt(plan, &dir, drives, size),
                TargetKind::File => Ok(Running {
                    kind: TargetKind::File,
                    addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                    iqn: None,
                    pid: None,
                    launched: true,
                    software: "write(2)/read(2) on files in the work directory".into(),
                    media: "file".into(),
                    api: None,
                    paths: (1..=drives)
                        .map(|i| dir.join(format!("drive{i}.tape")))
                        .collect(),
                    guard: Guard::Files,
                    dir: None,
                    keep: plan.keep,
                }),
            };
            match started {
                Ok(mut running) => {
                    running.dir = Some(dir);
                    running.keep = plan.keep;
                    Ok(running)
                }
                Err(e) => {
                    if !plan.keep {
                        let _ = fs::remove_dir_all(&dir);
                    }
                    Err(e)
                }
            }
        }
    }
}

fn start_reel(plan: &Plan, dir: &Path, drives: u32) -> anyhow::Result<Running> {
    let bin = procs::reel_binary(plan.target.reel_bin.as_deref())?;
    let data = dir.join("data");
    procs::run_tool(
        Command::new(&bin)
            .args(["cartridges", "create", "--prefix", "RB", "--count"])
            .arg(drives.to_string())
            .arg("--data")
            .arg(&data),
        "reel cartridges create",
    )?;
    let addr = procs::free_loopback()?;
    let http = procs::free_loopback()?;
    let config = dir.join("reel.toml");
    ReelToml {
        written_by: "reel bench tape".into(),
        listen: addr,
        queue_depth: 64,
        limits: Some(SESSION_LIMITS),
        // A session per drive and one for the changer, over reel's default when many drives.
        max_sessions: Some((drives as usize + 8).max(64)),
        http: Some(http),
        targets: vec![format!(
            "name = \"{REEL_IQN}\"\nkind = \"library\"\ndrives = {drives}\nslots = {}\n{}",
            drives.max(8),
            plan.emulate.map_or(String::new(), |spec| format!(
                "[iscsi.target.emulation]\ndrive = \"{}\"\n",
                spec.id
            ))
        )],
    }
    .write(&config)?;
    let serve = ReelServe::start(&bin, &config, &data, &dir.join("reel.log"), addr, &[])?;
    let password = ReelServe::initial_admin_password(&data, Duration::from_secs(20))?;
    let api = crate::api::login(&format!("http://{http}"), "admin", &password)?;
    Ok(Running {
        kind: TargetKind::Reel,
        addr,
        iqn: Some(REEL_IQN.into()),
        pid: Some(serve.pid()),
        launched: true,
        software: serve.software(),
        media: "changer".into(),
        api: Some(api),
        paths: Vec::new(),
        guard: Guard::Reel { serve, data },
        dir: None,
        keep: false,
    })
}

/// A fresh tape image at `path` for `size` bytes of records, made by `tgtimg`.
pub(crate) fn new_tgt_tape(
    tgtimg: &str,
    path: &Path,
    barcode: &str,
    size: u64,
) -> anyhow::Result<()> {
    // Room for the data, tgt's 48-byte block headers and some slack (tgtimg's MB are MiB).
    let size_mb = (size + size / 16) / (1 << 20) + 64;
    procs::run_tool(
        Command::new(procs::which(tgtimg).unwrap_or_else(|| tgtimg.into()))
            .args(["--op", "new", "--device-type", "tape", "--type", "data"])
            .args(["--barcode", barcode])
            .args(["--size", &size_mb.to_string()])
            .arg("--file")
            .arg(path),
        "tgtimg",
    )
    .map(drop)
}

/// tgt: drives at LUNs 1..=D with a tape image each (`tgtimg`), and — unless
/// `--tgt-no-changer` — an SMC changer at LUN D+1 whose storage slots hold those images (by
/// barcode, in its `media_home`) while the drives start empty (offline), as in tgt's own
/// README.vtl. Drive elements are 1..=D (element i is LUN i), the transport D+1, slots D+2….
fn start_tgt(plan: &Plan, dir: &Path, drives: u32, size: u64) -> anyhow::Result<Running> {
    let tapes = dir.join("tapes");
    fs::create_dir_all(&tapes)?;
    let barcodes: Vec<String> = (1..=drives).map(|i| format!("TB{i:04}L9")).collect();
    let mut paths = Vec::new();
    for barcode in &barcodes {
        let path = tapes.join(barcode);
        new_tgt_tape(&plan.tgtimg, &path, barcode, size)?;
        paths.push(path);
    }
    let mut tgtd = Tgtd::start(
        &plan.target.tgtd,
        &plan.target.tgtadm,
        &dir.join("tgtd.log"),
    )?;
    let tid = 1;
    tgtd.new_target(tid, TGT_IQN)?;
    tgtd.set_session_limits(tid, SESSION_LIMITS)?;
    let lu = |lun: u32, extra: &[&str]| -> anyhow::Result<()> {
        let lun = lun.to_string();
        let mut args = vec!["--mode", "logicalunit", "--lun", lun.as_str()];
        args.extend_from_slice(extra);
        tgtd.target_admin(tid, &args).map(drop)
    };
    for (i, path) in paths.iter().enumerate() {
        let path = path.to_string_lossy();
        let lun = i as u32 + 1;
        tgtd.new_lun(tid, lun, "ssc", &path, &["--device-type", "tape"])?;
        if plan.tgt_changer {
            lu(lun, &["--op", "update", "--params", "online=0"])?;
        }
    }
    if plan.tgt_changer {
        let changer = drives + 1;
        let smc = dir.join("smc");
        fs::write(&smc, [0u8; 1024])?;
        let smc = smc.to_string_lossy();
        let home = tapes.to_string_lossy();
        tgtd.new_lun(tid, changer, "smc", &smc, &["--device-type", "changer"])?;
        let mut params = vec![
            format!("media_home={home}"),
            format!("element_type=4,start_address=1,quantity={drives}"),
        ];
        for i in 1..=drives {
            params.push(format!("element_type=4,address={i},tid={tid},lun={i}"));
        }
        params.push(format!("element_type=1,start_address={changer},quantity=1"));
        params.push(format!(
            "element_type=2,start_address={},quantity={drives}",
            changer + 1
        ));
        for (i, barcode) in barcodes.iter().enumerate() {
            params.push(format!(
                "element_type=2,address={},barcode={barcode},sides=1",
                changer + 1 + i as u32
            ));
        }
        for p in &params {
            lu(changer, &["--op", "update", "--params", p])?;
        }
    }
    tgtd.bind_all(tid)?;
    Ok(Running {
        kind: TargetKind::Tgt,
        addr: tgtd.addr(),
        iqn: Some(TGT_IQN.into()),
        pid: Some(tgtd.pid()),
        launched: true,
        software: tgtd.software(),
        media: if plan.tgt_changer {
            "changer"
        } else {
            "preloaded"
        }
        .into(),
        api: None,
        paths: Vec::new(),
        guard: Guard::Tgt { tgtd, tapes: paths },
        dir: None,
        keep: false,
    })
}

impl Running {
    /// The last lines of the target's log (launched targets), for error messages.
    pub fn log_tail(&self) -> Option<String> {
        let log = match &self.guard {
            Guard::Reel { serve, .. } => serve.log(),
            Guard::Tgt { tgtd, .. } => tgtd.log(),
            Guard::None | Guard::Files => return None,
        };
        Some(procs::tail(log))
    }

    /// Reads reel's counters through its API (while it still runs), stops a launched target
    /// in an orderly way, reports what it stored — for reel also the ratios computed from its
    /// pack files, with `logical_bytes` (what this run wrote) as the logical side — and
    /// removes its directory (unless `keep`).
    pub fn finish(mut self, logical_bytes: u64) -> anyhow::Result<Option<Storage>> {
        let api = match &self.api {
            Some(api) => Some(api.store().context("reading reel's /api/v1/stats")?),
            None => None,
        };
        let guard = std::mem::replace(&mut self.guard, Guard::None);
        let storage = match guard {
            Guard::None => api.map(|api| Storage {
                dedup: Some(api.dedup_ratio),
                compression: Some(api.compression_ratio),
                reduction: Some(api.reduction_ratio),
                api: Some(api),
                ..Storage::default()
            }),
            Guard::Reel { serve, data, .. } => {
                serve.stop(Duration::from_secs(120))?;
                let disk = crate::api::scan_packs(&data, logical_bytes)?;
                Some(Storage {
                    disk_bytes: disk_usage(&data),
                    dedup: api.as_ref().map(|a| a.dedup_ratio),
                    compression: api.as_ref().map(|a| a.compression_ratio),
                    reduction: api.as_ref().map(|a| a.reduction_ratio),
                    api,
                    packs: Some(disk),
                })
            }
            Guard::Files => Some(Storage {
                disk_bytes: self.paths.iter().map(|p| disk_usage(p)).sum(),
                ..Storage::default()
            }),
            Guard::Tgt { tgtd, tapes } => {
                tgtd.stop()?;
                Some(Storage {
                    disk_bytes: tapes.iter().map(|p| disk_usage(p)).sum(),
                    ..Storage::default()
                })
            }
        };
        if let Some(dir) = self.dir.take()
            && !self.keep
        {
            fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        Ok(storage)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // An error path: stop the process (the guards' own Drop), then remove the directory.
        self.guard = Guard::None;
        if let Some(dir) = self.dir.take()
            && !self.keep
        {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_files_below_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/a"), vec![1u8; 100_000]).unwrap();
        fs::write(dir.path().join("b"), vec![1u8; 10_000]).unwrap();
        let used = disk_usage(dir.path());
        assert!(used >= 110_000, "{used}");
        assert!(disk_usage(&dir.path().join("missing")) == 0);
    }
}
