//! Conformance tables for device personalities: one case per line, "CDB in → status/sense/
//! data out", run against a fresh fixture per case. The SSC and SMC crates keep their tables
//! in `tests/conformance/*.txt`; this module is the one runner both use.
//!
//! Line format (fields separated by `|`, `#` starts a comment):
//! `<setup> | <CDB hex> | <data-out hex, zeros:N or -> | GOOD/CHECK/CONFLICT |
//!  <KEY/ASC/ASCQ hex [flags] or -> | <data-in: hex prefix (xx = any byte), len=N, or ->`
//! Setup: a fixture name, then optional `+CDB[/DATA]` commands run first (result ignored;
//! `+b:` runs one from the other I_T nexus). Sense flags: `fm`, `eom`, `ili` (the three bits
//! must match exactly: unlisted = clear), `info=N` (signed decimal INFORMATION), `field=B` /
//! `field=B.b` (CDB field pointer), `pfield=B` / `pfield=B.b` (parameter list field pointer),
//! `deferred`. Lines whose comment starts with `BUG:` are expectations the code does not meet
//! yet: they must fail, and the table fails when one passes.
//!
//! Test support: malformed tables panic with the line at fault.

use crate::{KeySpecific, Response, Status, parse_sense};

/// The I_T nexus a command runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nexus {
    /// The nexus the case's command uses.
    Main,
    /// A second initiator (`+b:` setup steps).
    Other,
}

/// Hex digits (spaces and `_` ignored) to bytes.
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .collect();
    assert!(s.len().is_multiple_of(2), "odd hex {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|_| panic!("hex {s}")))
        .collect()
}

/// A data-out field: hex, `zeros:N`, or `-` for none.
pub fn data_out(s: &str) -> Vec<u8> {
    match s {
        "-" => Vec::new(),
        _ if s.starts_with("zeros:") => vec![0; s[6..].parse().unwrap()],
        _ => hex(s),
    }
}

fn parse_step(s: &str) -> (Vec<u8>, Vec<u8>) {
    match s.split_once('/') {
        Some((c, d)) => (hex(c), data_out(d)),
        None => (hex(s), Vec::new()),
    }
}

/// One line describing a response (for failure reports).
pub fn show(r: &Response) -> String {
    let mut out = format!("{:?}", r.status);
    if let Some(s) = r.sense.as_ref().and_then(|s| parse_sense(s).ok()) {
        out += &format!(
            " sense {:02X}/{:02X}/{:02X}{}{}{}{} info={:?} ks={:?}",
            s.key.0,
            s.asc.0 >> 8,
            s.asc.0 & 0xFF,
            if s.filemark { " fm" } else { "" },
            if s.eom { " eom" } else { "" },
            if s.ili { " ili" } else { "" },
            if s.deferred { " deferred" } else { "" },
            s.information.map(|v| v as u32 as i32),
            s.key_specific,
        );
    }
    let d = &r.data_in;
    let head: String = d.iter().take(24).map(|b| format!("{b:02x}")).collect();
    out + &format!(
        " data len={} {head}{}",
        d.len(),
        if d.len() > 24 { "…" } else { "" }
    )
}

/// Compares a response with the expectation fields; returns the mismatches.
pub fn check(r: &Response, status: &str, sense: &str, data: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let want_status = match status {
        "GOOD" => Status::Good,
        "CHECK" => Status::CheckCondition,
        "CONFLICT" => Status::ReservationConflict,
        o => panic!("status {o}"),
    };
    if r.status != want_status {
        errs.push(format!("status {:?}, expected {status}", r.status));
    }
    if sense != "-" {
        match r.sense.as_ref().map(|s| parse_sense(s)) {
            Some(Ok(s)) => {
                let mut words = sense.split_whitespace();
                let kaa: Vec<u8> = words
                    .next()
                    .unwrap()
                    .split('/')
                    .map(|x| u8::from_str_radix(x, 16).unwrap())
                    .collect();
                let got = (s.key.0, (s.asc.0 >> 8) as u8, (s.asc.0 & 0xFF) as u8);
                if got != (kaa[0], kaa[1], kaa[2]) {
                    errs.push(format!(
                        "sense {:02X}/{:02X}/{:02X}, expected {}",
                        got.0, got.1, got.2, sense
                    ));
                }
                let (mut fm, mut eom, mut ili, mut deferred) = (false, false, false, false);
                for w in words {
                    match w {
                        "fm" => fm = true,
                        "eom" => eom = true,
                        "ili" => ili = true,
                        "deferred" => deferred = true,
                        _ if w.starts_with("info=") => {
                            let want: i64 = w[5..].parse().unwrap();
                            let got = s.information.map(|v| v as u32 as i32 as i64);
                            if got != Some(want) {
                                errs.push(format!("INFORMATION {got:?}, expected {want}"));
                            }
                        }
                        _ if w.starts_with("field=") || w.starts_with("pfield=") => {
                            let cd = w.starts_with("field=");
                            let spec = w.split_once('=').unwrap().1;
                            let (byte, bit) = match spec.split_once('.') {
                                Some((b, bit)) => (b.parse().unwrap(), Some(bit.parse().unwrap())),
                                None => (spec.parse().unwrap(), None),
                            };
                            let want = KeySpecific::FieldPointer { cd, byte, bit };
                            if s.key_specific != Some(want) {
                                errs.push(format!(
                                    "key specific {:?}, expected {want:?}",
                                    s.key_specific
                                ));
                            }
                        }
                        o => panic!("sense flag {o}"),
                    }
                }
                if (s.filemark, s.eom, s.ili, s.deferred) != (fm, eom, ili, deferred) {
                    errs.push(format!(
                        "bits fm={} eom={} ili={} deferred={}, expected fm={fm} eom={eom} ili={ili} deferred={deferred}",
                        s.filemark, s.eom, s.ili, s.deferred
                    ));
                }
            }
            Some(Err(e)) => errs.push(format!("sense does not parse: {e:?}")),
            None => errs.push(format!("no sense, expected {sense}")),
        }
    }
    if data != "-" {
        for w in data.split_whitespace() {
            if let Some(n) = w.strip_prefix("len=") {
                let n: usize = n.parse().unwrap();
                if r.data_in.len() != n {
                    errs.push(format!("data length {}, expected {n}", r.data_in.len()));
                }
            } else {
                let w = w.replace('_', "");
                let pairs: Vec<&str> = (0..w.len()).step_by(2).map(|i| &w[i..i + 2]).collect();
                if r.data_in.len() < pairs.len() {
                    errs.push(format!(
                        "data length {} < prefix {}",
                        r.data_in.len(),
                        pairs.len()
                    ));
                }
                for (i, p) in pairs.iter().enumerate() {
                    if *p == "xx" || *p == "XX" {
                        continue;
                    }
                    let want = u8::from_str_radix(p, 16).unwrap();
                    if let Some(&got) = r.data_in.get(i)
                        && got != want
                    {
                        errs.push(format!("data byte {i} = {got:02x}, expected {want:02x}"));
                    }
                }
            }
        }
    }
    errs
}

/// Runs every case of `table`. `fixture(name)` builds a fresh device for a case and returns
/// how to run a command on it. Panics with every failing line (and passing `BUG:` lines).
pub fn run_table<R>(label: &str, table: &str, mut fixture: impl FnMut(&str) -> R)
where
    R: FnMut(Nexus, &[u8], &[u8]) -> Response,
{
    let (mut cases, mut failures, mut bugs) = (0, Vec::new(), 0);
    for (n, raw) in table.lines().enumerate() {
        let (body, comment) = raw.split_once('#').unwrap_or((raw, ""));
        if body.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = body.split('|').map(str::trim).collect();
        assert_eq!(f.len(), 6, "line {}: {} fields: {raw}", n + 1, f.len());
        cases += 1;
        let mut setup = f[0].split_whitespace();
        let mut run = fixture(setup.next().unwrap());
        for step in setup {
            let step = step.strip_prefix('+').expect("step starts with +");
            let (nexus, step) = match step.strip_prefix("b:") {
                Some(rest) => (Nexus::Other, rest),
                None => (Nexus::Main, step),
            };
            let (cdb, out) = parse_step(step);
            run(nexus, &cdb, &out);
        }
        let r = run(Nexus::Main, &hex(f[1]), &data_out(f[2]));
        let errs = check(&r, f[3], f[4], f[5]);
        let bug = comment.trim_start().starts_with("BUG:");
        if bug {
            bugs += 1;
        }
        if !errs.is_empty() {
            failures.push(format!(
                "line {}{}: {}\n    got: {}\n    {}",
                n + 1,
                if bug { " [BUG]" } else { "" },
                raw.trim(),
                show(&r),
                errs.join("; ")
            ));
        } else if bug {
            failures.push(format!(
                "line {} is marked BUG but passes: {}",
                n + 1,
                raw.trim()
            ));
        }
    }
    eprintln!(
        "{label} conformance: {cases} cases, {} failing, {bugs} marked BUG",
        failures.len()
    );
    for f in &failures {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} {label} conformance cases fail",
        failures.len()
    );
}
