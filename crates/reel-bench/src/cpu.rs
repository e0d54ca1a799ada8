//! Process CPU time from `/proc/PID/stat`: `utime + stime` (fields 14 and 15, man proc(5)),
//! every thread of the process including threads that have exited, in clock ticks.

use std::fs;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, anyhow, bail};

/// Whose CPU time to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proc {
    /// This process (the initiator).
    This,
    Pid(u32),
}

impl Proc {
    fn stat_path(self) -> String {
        match self {
            Proc::This => "/proc/self/stat".into(),
            Proc::Pid(pid) => format!("/proc/{pid}/stat"),
        }
    }
}

/// `utime + stime` in clock ticks from the text of a `/proc/PID/stat` file.
///
/// The command name (field 2) is in parentheses and may itself hold spaces and `)`, so the
/// fields are counted from the last `)`: after it come state (field 3), ppid (4), … utime (14)
/// and stime (15).
pub fn parse_stat_ticks(stat: &str) -> anyhow::Result<u64> {
    let close = stat
        .rfind(')')
        .ok_or_else(|| anyhow!("no ')' after the command name"))?;
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    // fields[0] is field 3 (state), so field n is fields[n - 3].
    let field = |n: usize| -> anyhow::Result<u64> {
        let text = fields
            .get(n - 3)
            .ok_or_else(|| anyhow!("only {} fields after the command name", fields.len()))?;
        text.parse::<u64>()
            .map_err(|_| anyhow!("field {n} is {text:?}, not a number"))
    };
    // State is one letter (R, S, D, Z, T, t, X, I, …): a cheap check that the fields line up.
    if fields
        .first()
        .is_none_or(|s| s.len() != 1 || !s.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        bail!("field 3 (state) is not one letter");
    }
    Ok(field(14)? + field(15)?)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, the value on every mainstream Linux, if
/// `getconf` is missing).
pub fn ticks_per_second() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

/// CPU seconds (user + system) the process has used so far.
pub fn cpu_seconds(proc: Proc) -> anyhow::Result<f64> {
    let path = proc.stat_path();
    let text = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let ticks = parse_stat_ticks(&text).with_context(|| format!("parsing {path}"))?;
    Ok(ticks as f64 / ticks_per_second() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line from a tokio process, with fields 14/15 (utime/stime) = 1234/567.
    const LINE: &str = "4242 (reel) S 1 4242 4242 0 -1 4194560 1500 0 0 0 1234 567 0 0 20 0 4 0 \
                        100 500000000 3000 18446744073709551615 1 1 0 0 0 0 0 4096 17664 0 0 0 17 \
                        1 0 0 0 0 0";

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
        let before = cpu_seconds(Proc::This).unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(cpu_seconds(Proc::This).unwrap() >= before);
        assert!(cpu_seconds(Proc::Pid(u32::MAX)).is_err());
    }
}
