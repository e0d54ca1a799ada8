//! What Linux says about a process and the machine it runs on, read from `/proc`: a process's
//! CPU time (`utime + stime` of `/proc/PID/stat`), the load average and a description of the
//! machine (cores, CPU model, memory, kernel). Used by the server (its own CPU time for the
//! monitor) and by the benchmarks (the targets' and the initiator's CPU time, the machine in
//! every report), so there is one parser of each file. [`ports`] hands out loopback ports
//! outside the kernel's ephemeral range for servers that tests and benchmarks start.

pub mod ports;

use std::fs;
use std::process::Command;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Why a process's CPU time could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SysinfoError {
    /// The stat file is missing (no such process) or unreadable.
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The stat file's text is not what proc(5) describes.
    #[error("parsing {path}: {why}")]
    Parse { path: String, why: String },
}

/// Whose CPU time to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proc {
    /// This process.
    This,
    Pid(u32),
}

impl Proc {
    fn status_path(self) -> String {
        match self {
            Proc::This => "/proc/self/status".into(),
            Proc::Pid(pid) => format!("/proc/{pid}/status"),
        }
    }

    fn stat_path(self) -> String {
        match self {
            Proc::This => "/proc/self/stat".into(),
            Proc::Pid(pid) => format!("/proc/{pid}/stat"),
        }
    }
}

/// `utime + stime` in clock ticks from the text of a `/proc/PID/stat` file: every thread of
/// the process, including threads that have exited (proc(5), fields 14 and 15).
///
/// The command name (field 2) is in parentheses and may itself hold spaces and `)`, so the
/// fields are counted from the last `)`: after it come state (field 3), ppid (4), … utime (14)
/// and stime (15).
pub fn parse_stat_ticks(stat: &str) -> Result<u64, String> {
    let fields = fields_after_command(stat)?;
    // fields[0] is field 3 (state), so field n is fields[n - 3].
    let field = |n: usize| -> Result<u64, String> {
        let text = fields
            .get(n - 3)
            .ok_or_else(|| format!("only {} fields after the command name", fields.len()))?;
        text.parse::<u64>()
            .map_err(|_| format!("field {n} is {text:?}, not a number"))
    };
    // State is one letter (R, S, D, Z, T, t, X, I, …): a cheap check that the fields line up.
    if fields
        .first()
        .is_none_or(|s| s.len() != 1 || !s.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        return Err("field 3 (state) is not one letter".into());
    }
    Ok(field(14)? + field(15)?)
}

/// The fields of a `/proc/PID/stat` text from field 3 (state) on: the command name (field 2)
/// is in parentheses and may itself hold spaces and `)`, so they start after the last `)`.
fn fields_after_command(stat: &str) -> Result<Vec<&str>, String> {
    let close = stat
        .rfind(')')
        .ok_or_else(|| "no ')' after the command name".to_string())?;
    Ok(stat[close + 1..].split_whitespace().collect())
}

/// A process's state letter (proc(5) field 3: `R`, `S`, `D`, `Z`, …); `None` when the process
/// is gone or its stat file cannot be read.
pub fn process_state(pid: u32) -> Option<char> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = fields_after_command(&text).ok()?;
    fields.first()?.chars().next()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, the value on every mainstream Linux, if
/// `getconf` is missing), so CPU times have a 10 ms resolution.
pub fn ticks_per_second() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

/// CPU seconds (user + system) the process has used so far.
pub fn cpu_seconds(proc: Proc) -> Result<f64, SysinfoError> {
    let path = proc.stat_path();
    let text = fs::read_to_string(&path).map_err(|source| SysinfoError::Read {
        path: path.clone(),
        source,
    })?;
    let ticks = parse_stat_ticks(&text).map_err(|why| SysinfoError::Parse { path, why })?;
    Ok(ticks as f64 / ticks_per_second() as f64)
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`'s first three fields, e.g.
/// `"0.52 0.61 0.70"`); `"unknown"` where the file cannot be read.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A field of the process's `/proc/…/status` in KiB (`VmRSS` now, `VmHWM` the peak so far).
pub fn status_kib(proc: Proc, field: &str) -> Option<u64> {
    let status = fs::read_to_string(proc.status_path()).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A `/proc/meminfo` line's value in bytes (`MemTotal`, `MemAvailable`, …; the file says kB,
/// meaning KiB).
pub fn meminfo_bytes(key: &str) -> Option<u64> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let line = info
        .lines()
        .find(|l| l.split_once(':').is_some_and(|(k, _)| k == key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The machine a measurement ran on, for reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Cores this process may use (`available_parallelism`).
    pub nproc: usize,
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Total memory, e.g. `"7.8 GiB"`.
    pub memory: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
}

impl Machine {
    /// Reads the description of this machine; a field that cannot be read is `"unknown"`.
    pub fn describe() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Machine {
            nproc: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            cpu_model: cpuinfo
                .lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map_or("unknown".into(), |(_, v)| v.trim().to_string()),
            memory: meminfo_bytes("MemTotal").map_or("unknown".into(), |b| {
                format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
            }),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line from a tokio process, with fields 14/15 (utime/stime) = 1234/567.
    const LINE: &str = "4242 (reel) S 1 4242 4242 0 -1 4194560 1500 0 0 0 1234 567 0 0 20 0 4 0 \
                        100 500000000 3000 18446744073709551615 1 1 0 0 0 0 0 4096 17664 0 0 0 17 \
                        1 0 0 0 0 0";

    #[test]
    fn status_fields_are_read_in_kib() {
        let rss = status_kib(Proc::This, "VmRSS").expect("this process has a VmRSS");
        let peak = status_kib(Proc::This, "VmHWM").expect("and a VmHWM");
        assert!(rss > 0 && peak >= rss, "VmRSS {rss} KiB, VmHWM {peak} KiB");
        // A prefix of a field's name is not the field.
        assert_eq!(status_kib(Proc::This, "VmRS"), None);
        assert_eq!(status_kib(Proc::Pid(u32::MAX), "VmRSS"), None);
    }

    #[test]
    fn this_process_is_running_and_a_reaped_child_is_gone() {
        // A running process reads as running (R) or sleeping (S), never gone.
        let me = std::process::id();
        assert!(matches!(process_state(me), Some('R' | 'S')));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(process_state(pid), None);
    }

    #[test]
    fn utime_plus_stime() {
        assert_eq!(parse_stat_ticks(LINE).unwrap(), 1234 + 567);
    }

    #[test]
    fn command_names_with_spaces_and_parentheses() {
        let odd = LINE.replace("(reel)", "(a) b (c) d)");
        assert_eq!(parse_stat_ticks(&odd).unwrap(), 1801);
    }

    #[test]
    fn truncated_or_garbled_lines_are_errors() {
        assert!(parse_stat_ticks("").is_err());
        assert!(parse_stat_ticks("4242 (reel) S 1 2 3").is_err());
        assert!(parse_stat_ticks(&LINE.replace(" 1234 ", " x ")).is_err());
        assert!(parse_stat_ticks(&LINE.replace(") S ", ") ")).is_err());
    }

    #[test]
    fn this_process_uses_some_cpu() {
        // The clock must advance with work (it ticks every 10 ms): spin until it does.
        let before = cpu_seconds(Proc::This).unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_seconds(Proc::This).unwrap() <= before {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            assert!(
                start.elapsed().as_secs() < 10,
                "process CPU time did not advance in 10 s of spinning"
            );
        }
        assert!(matches!(
            cpu_seconds(Proc::Pid(u32::MAX)),
            Err(SysinfoError::Read { .. })
        ));
    }

    #[test]
    fn the_machine_is_described() {
        let m = Machine::describe();
        assert!(m.nproc >= 1);
        assert!(m.memory.ends_with("GiB"), "{}", m.memory);
        assert_eq!(load_average().split_whitespace().count(), 3);
        assert!(meminfo_bytes("MemTotal").is_some_and(|b| b > 0));
        assert!(meminfo_bytes("NoSuchKey").is_none());
    }
}
