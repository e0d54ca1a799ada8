//! `reel doctor`: what a new installation gets wrong, each with how to fix it.
//!
//! Every check reads the same configuration `reel serve` would (`--config`, `--data`) and only
//! looks: it binds and releases the portals' ports, stats the data directory, reads the limits,
//! opens (never changes) the bucket. A FAIL is something `reel serve` would stop on or that
//! loses data; a WARN is something that works but should not stay so.

use std::path::{Path, PathBuf};

use crate::config::{self, BackendKind, Config};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// The configuration `reel serve` runs with (the service's: /etc/reel/reel.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The data directory, overriding the configuration's store.data_dir.
    #[arg(long = "data", value_name = "DIR")]
    pub data: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One finding: what was checked, how it stands, and what to do about it.
#[derive(Debug)]
pub struct Finding {
    pub check: String,
    pub level: Level,
    pub detail: String,
    pub fix: Option<String>,
}

impl Finding {
    fn new(level: Level, check: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding {
            check: check.into(),
            level,
            detail: detail.into(),
            fix: None,
        }
    }
    fn ok(check: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding::new(Level::Ok, check, detail)
    }
    fn warn(
        check: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            fix: Some(fix.into()),
            ..Finding::new(Level::Warn, check, detail)
        }
    }
    fn fail(
        check: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            fix: Some(fix.into()),
            ..Finding::new(Level::Fail, check, detail)
        }
    }
}

/// Below this much free space in the data directory's file system: a warning.
const LOW_FREE_BYTES: u64 = 10 << 30;
/// The open-files limit reel wants (a session, a drive's stream and the packs each hold some).
const WANT_OPEN_FILES: u64 = 4096;

pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let findings = examine(&args);
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    for f in &findings {
        let tag = match f.level {
            Level::Ok => "ok  ",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        println!("{tag}  {:width$}  {}", f.check, f.detail);
        if let Some(fix) = &f.fix {
            println!("{:>w$}fix: {fix}", "", w = width + 8);
        }
    }
    let fails = findings.iter().filter(|f| f.level == Level::Fail).count();
    let warns = findings.iter().filter(|f| f.level == Level::Warn).count();
    println!(
        "{} checks: {fails} to fix, {warns} to look at",
        findings.len()
    );
    if fails > 0 {
        anyhow::bail!("{fails} check(s) failed");
    }
    Ok(())
}

/// All checks, in the order a reader fixes them.
pub fn examine(args: &DoctorArgs) -> Vec<Finding> {
    let mut out = Vec::new();
    let config = match &args.config {
        Some(path) => match config::load(path) {
            Ok(c) => {
                out.push(Finding::ok(
                    "configuration",
                    format!("{} is valid", path.display()),
                ));
                c
            }
            Err(e) => {
                out.push(Finding::fail(
                    "configuration",
                    format!("{}: {}", path.display(), crate::error_text(&e)),
                    "correct the file (its keys: the README and docs/design)",
                ));
                return out;
            }
        },
        None => {
            out.push(Finding::ok(
                "configuration",
                "none given: the embedded default",
            ));
            Config::default()
        }
    };
    let data = args
        .data
        .clone()
        .or_else(|| config.store.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from("reel-data"));
    out.push(check_data_dir(&data));
    out.push(check_free_space(&data));
    for listen in &config.iscsi.listen {
        out.push(check_port("iSCSI portal", listen));
    }
    if config.http.enabled {
        out.push(check_port("web console", &config.http.listen));
    }
    out.extend(check_tls(&config));
    for warning in config::exposure_warnings(&config) {
        out.push(Finding::warn(
            "exposure",
            warning,
            "set CHAP (targets) and TLS (console), or listen on 127.0.0.1 only",
        ));
    }
    out.push(check_open_files(
        std::fs::read_to_string("/proc/self/limits").ok().as_deref(),
    ));
    out.push(check_clock(
        std::time::SystemTime::now(),
        Path::new("/run/systemd/timesync/synchronized").exists(),
    ));
    // Validated with the configuration; the store's default when not set.
    let catalog_cache = config
        .store
        .catalog_cache_bytes()
        .ok()
        .flatten()
        .unwrap_or(reel_chunkstore::StoreConfig::default().catalog_cache_bytes);
    out.push(check_catalog_cache(
        catalog_cache as u64,
        reel_sysinfo::meminfo_bytes("MemTotal"),
    ));
    if config.store.backend == BackendKind::S3 {
        out.push(check_bucket(&config));
    }
    out
}

fn check_data_dir(dir: &Path) -> Finding {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let check = "data directory";
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Finding::ok(
                check,
                format!(
                    "{} does not exist yet: reel serve creates it (0700)",
                    dir.display()
                ),
            );
        }
        Err(e) => {
            return Finding::fail(
                check,
                format!("{}: {e}", dir.display()),
                format!(
                    "check the path and that this user may enter {}",
                    dir.display()
                ),
            );
        }
    };
    if !meta.is_dir() {
        return Finding::fail(
            check,
            format!("{} is not a directory", dir.display()),
            "point store.data_dir (or --data) at a directory",
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if nix::unistd::geteuid().as_raw() != meta.uid() {
        return Finding::fail(
            check,
            format!(
                "{} belongs to uid {}, not to this user",
                dir.display(),
                meta.uid()
            ),
            format!(
                "run as its owner (the service runs as user reel), or `chown -R reel:reel {}`",
                dir.display()
            ),
        );
    }
    if mode & 0o077 != 0 {
        return Finding::fail(
            check,
            format!(
                "{} has mode {mode:03o}: other users could read the backups",
                dir.display()
            ),
            format!("chmod 700 {}", dir.display()),
        );
    }
    Finding::ok(
        check,
        format!("{}: owned by this user, mode {mode:03o}", dir.display()),
    )
}

fn check_free_space(dir: &Path) -> Finding {
    let check = "free space";
    // The nearest existing ancestor: a new data directory is created inside it.
    let mut at = dir.to_path_buf();
    while !at.exists() {
        if !at.pop() {
            at = PathBuf::from(".");
            break;
        }
    }
    let free = nix::sys::statvfs::statvfs(&at)
        .map(|fs| fs.blocks_available() * fs.fragment_size())
        .map_err(|e| anyhow::anyhow!("{e}"));
    match free {
        Ok(free) if free < LOW_FREE_BYTES => Finding::warn(
            check,
            format!("{} free where {} lives", human(free), dir.display()),
            "give the data directory more room: a full disk stops writes (MEDIUM ERROR to the \
             initiator) until space is freed (`reel reclaim`) or added",
        ),
        Ok(free) => Finding::ok(check, format!("{} free", human(free))),
        Err(e) => Finding::warn(
            check,
            format!("cannot read the free space of {}: {e:#}", at.display()),
            "check the file system",
        ),
    }
}

fn check_port(what: &str, listen: &str) -> Finding {
    let check = format!("{what} {listen}");
    let addr: std::net::SocketAddr = match listen.parse() {
        Ok(a) => a,
        Err(_) => {
            return Finding::fail(check, "not an address:port", "write it as 127.0.0.1:3260");
        }
    };
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Finding::ok(check, "free"),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Finding::warn(
            check,
            "in use",
            format!(
                "if reel is running (systemctl status reel) this is it; otherwise another \
                 program holds the port (ss -ltnp 'sport = :{}'): stop it or pick another port",
                addr.port()
            ),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Finding::fail(
            check,
            "no interface of this machine has that address",
            "use an address of this machine (ip -br addr) or 0.0.0.0",
        ),
        Err(e) => Finding::fail(
            check,
            e.to_string(),
            "check the address and the permissions",
        ),
    }
}

fn check_tls(config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for (what, path) in [
        ("TLS certificate", &config.http.tls_cert),
        ("TLS key", &config.http.tls_key),
    ] {
        let Some(path) = path else { continue };
        out.push(match std::fs::read(path) {
            Ok(bytes) if String::from_utf8_lossy(&bytes).contains("-----BEGIN") => {
                Finding::ok(what, format!("{} is readable PEM", path.display()))
            }
            Ok(_) => Finding::fail(
                what,
                format!("{} is not PEM", path.display()),
                "give a PEM file (-----BEGIN ...-----)",
            ),
            Err(e) => Finding::fail(
                what,
                format!("{}: {e}", path.display()),
                "make it readable by the user reel runs as (the service: reel)",
            ),
        });
    }
    out
}

/// The "Max open files" soft limit of /proc/self/limits.
fn check_open_files(limits: Option<&str>) -> Finding {
    let check = "open-files limit";
    let soft = limits.and_then(|text| {
        text.lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .map(|v| {
                if v == "unlimited" {
                    u64::MAX
                } else {
                    v.parse().unwrap_or(0)
                }
            })
    });
    match soft {
        Some(n) if n >= WANT_OPEN_FILES => Finding::ok(check, n.to_string()),
        Some(n) => Finding::warn(
            check,
            format!("{n} (reel wants at least {WANT_OPEN_FILES})"),
            "raise it: LimitNOFILE=65536 in the unit (the package's has it), or `ulimit -n 65536`",
        ),
        None => Finding::warn(check, "unknown", "check `ulimit -n`"),
    }
}

/// The catalog cache against the machine's memory: redb fills it as the catalog grows, so a
/// cache near the RAM size ends with the kernel killing reel, not with a slower catalog.
fn check_catalog_cache(cache: u64, mem_total: Option<u64>) -> Finding {
    let check = "catalog cache";
    let mib = |b: u64| b >> 20;
    match mem_total {
        Some(total) if cache > total / 2 => Finding::warn(
            check,
            format!(
                "up to {} MiB, more than half of this machine's {} MiB of RAM",
                mib(cache),
                mib(total)
            ),
            "lower [store] catalog_cache: the chunk index needs about 45 MB per GB of unique data, and the rest of reel and the kernel's page cache need memory too (docs/guide/sizing.md)",
        ),
        Some(total) => Finding::ok(
            check,
            format!("up to {} MiB of {} MiB of RAM", mib(cache), mib(total)),
        ),
        None => Finding::ok(
            check,
            format!("up to {} MiB (the machine's RAM is unknown)", mib(cache)),
        ),
    }
}

fn check_clock(now: std::time::SystemTime, synchronized: bool) -> Finding {
    let check = "clock";
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // 2024-01-01 .. 2100-01-01: outside it the clock is simply wrong.
    if !(1_704_067_200..4_102_444_800).contains(&secs) {
        return Finding::fail(
            check,
            format!("{secs} s since 1970: not a plausible date"),
            "set the clock (timedatectl set-ntp true): cartridge memory and leases carry times",
        );
    }
    if synchronized {
        Finding::ok(check, "plausible, synchronised by systemd-timesyncd")
    } else {
        Finding::warn(
            check,
            "plausible; synchronisation not confirmed",
            "run NTP (timedatectl set-ntp true, or chrony): leases of several nodes on one \
             bucket and the audit log rely on it",
        )
    }
}

/// Where keys come from, in the order the S3 back end looks (`reel_backend::S3Credentials`).
const CREDENTIALS_HINT: &str = "check endpoint, bucket and region, and the credentials of the \
    user reel runs as: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws/credentials \
    (AWS_PROFILE), the platform's role (web identity, EKS Pod Identity, ECS), or on EC2 the \
    instance profile with [store.s3] instance_metadata = \"http://169.254.169.254\"";

fn check_bucket(config: &Config) -> Finding {
    let check = "S3 bucket";
    let Some(s3) = &config.store.s3 else {
        return Finding::fail(
            check,
            "backend = \"s3\" without [store.s3]",
            "add [store.s3]",
        );
    };
    let name = format!("s3://{}/{}", s3.bucket, s3.prefix);
    let backend = match crate::data_dir::open_bucket(s3, &s3.prefix, None) {
        Ok(b) => b,
        Err(e) => {
            return Finding::fail(
                check,
                format!("{name}: {}", crate::error_text(&e)),
                CREDENTIALS_HINT,
            );
        }
    };
    // A listing of a prefix nothing uses: it proves the endpoint answers and the credentials
    // are accepted, and costs one request whatever the bucket holds.
    match reel_backend::Backend::list(&backend, "reel-doctor-probe/") {
        Ok(_) => Finding::ok(
            check,
            format!(
                "{name}: reachable, credentials from {} accepted",
                backend.credentials_source()
            ),
        ),
        Err(e) => Finding::fail(check, format!("{name}: {e}"), CREDENTIALS_HINT),
    }
}

fn human(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    format!("{:.1} GiB", bytes as f64 / GIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_read_from_proc_limits() {
        let low = "Limit                     Soft Limit           Hard Limit           Units\n\
                   Max open files            1024                 524288               files\n";
        assert_eq!(check_open_files(Some(low)).level, Level::Warn);
        let high = low.replace("1024 ", "65536");
        assert_eq!(check_open_files(Some(&high)).level, Level::Ok);
        assert_eq!(check_open_files(None).level, Level::Warn);
    }

    #[test]
    fn a_catalog_cache_over_half_the_ram_warns() {
        let gib = 1u64 << 30;
        let ok = check_catalog_cache(gib / 2, Some(8 * gib));
        assert_eq!(ok.level, Level::Ok);
        assert!(ok.detail.contains("512 MiB of 8192 MiB"), "{}", ok.detail);
        assert_eq!(check_catalog_cache(4 * gib, Some(8 * gib)).level, Level::Ok);
        let warn = check_catalog_cache(5 * gib, Some(8 * gib));
        assert_eq!(warn.level, Level::Warn);
        let fix = warn.fix.unwrap_or_default();
        assert!(fix.contains("[store] catalog_cache"), "{fix}");
        assert_eq!(check_catalog_cache(gib, None).level, Level::Ok);
    }

    #[test]
    fn an_implausible_clock_fails_and_an_unsynchronised_one_warns() {
        let epoch = std::time::UNIX_EPOCH;
        assert_eq!(check_clock(epoch, true).level, Level::Fail);
        let now = epoch + std::time::Duration::from_secs(1_795_000_000);
        assert_eq!(check_clock(now, false).level, Level::Warn);
        assert_eq!(check_clock(now, true).level, Level::Ok);
    }

    #[test]
    fn a_readable_private_data_directory_passes_and_others_fail() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert_eq!(
            check_data_dir(&data).level,
            Level::Ok,
            "missing: serve creates it"
        );
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(check_data_dir(&data).level, Level::Ok);
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = check_data_dir(&data);
        assert_eq!(f.level, Level::Fail);
        assert!(f.fix.unwrap().contains("chmod 700"));
    }

    #[test]
    fn a_port_in_use_warns_and_a_foreign_address_fails() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        assert_eq!(check_port("iSCSI portal", &addr).level, Level::Warn);
        drop(held);
        assert_eq!(check_port("iSCSI portal", &addr).level, Level::Ok);
        assert_eq!(
            check_port("iSCSI portal", "192.0.2.1:3260").level,
            Level::Fail
        );
        assert_eq!(check_port("iSCSI portal", "nonsense").level, Level::Fail);
    }

    #[test]
    fn a_config_that_does_not_parse_stops_the_checks_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reel.toml");
        std::fs::write(&path, "[iscsi]\nlisten = 3260\n").unwrap();
        let findings = examine(&DoctorArgs {
            config: Some(path),
            data: Some(dir.path().join("data")),
        });
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].level, Level::Fail);
    }
}
