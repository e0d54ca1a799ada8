//! Wall-clock time as passed in by the caller (this crate never reads a clock).

/// Seconds since the Unix epoch (UTC). Supplied by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct UnixTime(pub u64);

/// A UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilDateTime {
    /// Year (may exceed 9999 for absurd inputs).
    pub year: u64,
    /// Month 1..=12.
    pub month: u8,
    /// Day 1..=31.
    pub day: u8,
    /// Hour 0..=23.
    pub hour: u8,
    /// Minute 0..=59.
    pub minute: u8,
}

impl UnixTime {
    /// Convert to a proleptic-Gregorian UTC date and time.
    pub fn to_civil(self) -> CivilDateTime {
        let days = self.0 / 86_400;
        let secs = self.0 % 86_400;
        // Shift the epoch to 0000-03-01 so leap days fall at the end of a
        // year; then split into 400-year eras of 146_097 days.
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z % 146_097; // day of era, 0..=146_096
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, March-based
        let mp = (5 * doy + 2) / 153; // March = 0
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = yoe + era * 400 + u64::from(month <= 2);
        CivilDateTime {
            year,
            month,
            day,
            hour: (secs / 3_600) as u8,
            minute: (secs % 3_600 / 60) as u8,
        }
    }

    /// `YYYYMMDD`, the format of MAM attribute 0x0406 MEDIUM MANUFACTURE DATE
    /// (SPC-4). Years beyond 9999 are clamped to 9999.
    pub fn to_yyyymmdd(self) -> [u8; 8] {
        let c = self.to_civil();
        let s = format!("{:04}{:02}{:02}", c.year.min(9999), c.month, c.day);
        let mut out = [b'0'; 8];
        out.copy_from_slice(&s.as_bytes()[..8]);
        out
    }

    /// `YYYYMMDDHHMM`, the format of MAM attribute 0x0804 DATE AND TIME LAST
    /// WRITTEN (SPC-4). Years beyond 9999 are clamped to 9999.
    pub fn to_yyyymmddhhmm(self) -> [u8; 12] {
        let c = self.to_civil();
        let s = format!(
            "{:04}{:02}{:02}{:02}{:02}",
            c.year.min(9999),
            c.month,
            c.day,
            c.hour,
            c.minute
        );
        let mut out = [b'0'; 12];
        out.copy_from_slice(&s.as_bytes()[..12]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(&UnixTime(0).to_yyyymmdd(), b"19700101");
        // 2000-02-29 12:34 UTC (leap day in a century divisible by 400).
        assert_eq!(&UnixTime(951_827_640).to_yyyymmddhhmm(), b"200002291234");
        // 2024-12-31 23:59 UTC.
        assert_eq!(&UnixTime(1_735_689_540).to_yyyymmddhhmm(), b"202412312359");
        // 2100-03-01 (2100 is not a leap year).
        assert_eq!(&UnixTime(4_107_542_400).to_yyyymmdd(), b"21000301");
    }

    #[test]
    fn extreme_input_does_not_panic() {
        let c = UnixTime(u64::MAX).to_civil();
        assert!((1..=12).contains(&c.month) && (1..=31).contains(&c.day));
        assert_eq!(&UnixTime(u64::MAX).to_yyyymmdd()[..4], b"9999");
    }
}
