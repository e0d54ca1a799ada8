//! Byte counts on the command line and in reports: binary units throughout (`64K` is 65,536
//! bytes), so a record size reads the same in a flag, a table and a chart.

use anyhow::anyhow;

/// A byte count such as `65536`, `64K`, `2G`, `1MiB` or `1MB` (binary units, as
/// `reel-datagen` reads them); zero is refused. `what` names the flag in the error.
pub fn parse_size(what: &str, text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| {
            t.strip_suffix('B')
                .filter(|r| r.ends_with(|c: char| c.is_ascii_alphabetic()))
        })
        .unwrap_or(t);
    reel_datagen::parse_size(t).map_err(|e| anyhow!("{what} {text:?}: {e}"))
}

/// `64K`, `256K`, `1M`, `2G`, or plain bytes when no binary unit divides the count.
pub fn size_label(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_reject() {
        assert_eq!(parse_size("s", "256K").unwrap(), 256 << 10);
        assert_eq!(parse_size("s", "2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("s", "1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("s", "1MB").unwrap(), 1 << 20);
        assert_eq!(parse_size("s", "4096").unwrap(), 4096);
        assert!(parse_size("s", "0").is_err());
        assert!(parse_size("s", "12Q").is_err());
        assert!(parse_size("s", "K").is_err());
        assert!(parse_size("s", "-1K").is_err());
        assert!(parse_size("s", "99999999999T").is_err());
        let e = parse_size("--size", "lots").unwrap_err().to_string();
        assert!(e.starts_with("--size \"lots\""), "{e}");
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(64 << 10), "64K");
        assert_eq!(size_label(1 << 20), "1M");
        assert_eq!(size_label(2 << 30), "2G");
        assert_eq!(size_label(3 << 40), "3T");
        assert_eq!(size_label(1000), "1000");
        assert_eq!(size_label(1536), "1536");
    }
}
