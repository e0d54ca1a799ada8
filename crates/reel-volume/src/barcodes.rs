//! Which cartridges a library (or a logical partition of one) takes into its free slots:
//! barcode prefixes and inclusive barcode ranges, the way physical libraries assign volume
//! ranges to logical libraries and backup software assigns them to media pools.

/// An empty filter takes every cartridge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BarcodeFilter {
    prefixes: Vec<String>,
    /// Inclusive; both ends have the same length (checked by [`BarcodeFilter::range`]).
    ranges: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BarcodeRangeError {
    #[error("barcode range {first}-{last}: both ends must have the same length")]
    Lengths { first: String, last: String },
    #[error("barcode range {first}-{last}: the first is after the last")]
    Reversed { first: String, last: String },
    #[error("barcode range {0:?}: expected FIRST-LAST, e.g. DLY000L9-DLY499L9")]
    Syntax(String),
}

impl BarcodeFilter {
    pub fn any() -> BarcodeFilter {
        BarcodeFilter::default()
    }

    /// Adds every barcode starting with `prefix` ("" adds nothing: use [`BarcodeFilter::any`]).
    pub fn with_prefix(mut self, prefix: &str) -> BarcodeFilter {
        if !prefix.is_empty() {
            self.prefixes.push(prefix.to_string());
        }
        self
    }

    /// Adds the barcodes from `first` to `last` inclusive (same length; compared as text,
    /// which orders LTO labels such as DLY007L9 by their number).
    pub fn with_range(
        mut self,
        first: &str,
        last: &str,
    ) -> Result<BarcodeFilter, BarcodeRangeError> {
        let (f, l) = (first.to_string(), last.to_string());
        if first.len() != last.len() {
            return Err(BarcodeRangeError::Lengths { first: f, last: l });
        }
        if first > last {
            return Err(BarcodeRangeError::Reversed { first: f, last: l });
        }
        self.ranges.push((f, l));
        Ok(self)
    }

    /// Parses `FIRST-LAST` (barcodes hold no '-': LTO labels are letters and digits).
    pub fn parse_range(text: &str) -> Result<(String, String), BarcodeRangeError> {
        let (first, last) = text
            .split_once('-')
            .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains('-'))
            .ok_or_else(|| BarcodeRangeError::Syntax(text.to_string()))?;
        Ok((first.trim().to_string(), last.trim().to_string()))
    }

    pub fn is_any(&self) -> bool {
        self.prefixes.is_empty() && self.ranges.is_empty()
    }

    pub fn matches(&self, barcode: &str) -> bool {
        self.is_any()
            || self
                .prefixes
                .iter()
                .any(|p| barcode.starts_with(p.as_str()))
            || self.ranges.iter().any(|(first, last)| {
                barcode.len() == first.len()
                    && first.as_str() <= barcode
                    && barcode <= last.as_str()
            })
    }

    /// Whether some barcode could match both filters (overlapping pools are a configuration
    /// error: a cartridge would belong to two libraries).
    pub fn overlaps(&self, other: &BarcodeFilter) -> bool {
        if self.is_any() || other.is_any() {
            return true;
        }
        let prefix_vs_prefix = self.prefixes.iter().any(|a| {
            other
                .prefixes
                .iter()
                .any(|b| a.starts_with(b.as_str()) || b.starts_with(a.as_str()))
        });
        let range_vs_range = self.ranges.iter().any(|(a1, a2)| {
            other
                .ranges
                .iter()
                .any(|(b1, b2)| a1.len() == b1.len() && a1 <= b2 && b1 <= a2)
        });
        // A prefix meets a range when the range's ends, cut to the prefix's length, enclose it.
        let prefix_vs_range = |prefixes: &[String], ranges: &[(String, String)]| {
            prefixes.iter().any(|p| {
                ranges.iter().any(|(first, last)| {
                    p.len() <= first.len() && {
                        let n = p.len();
                        first[..n] <= *p.as_str() && *p.as_str() <= last[..n]
                    }
                })
            })
        };
        prefix_vs_prefix
            || range_vs_range
            || prefix_vs_range(&self.prefixes, &other.ranges)
            || prefix_vs_range(&other.prefixes, &self.ranges)
    }

    /// How the filter reads in messages and the API ("any" when empty).
    pub fn describe(&self) -> String {
        if self.is_any() {
            return "any".into();
        }
        self.prefixes
            .iter()
            .map(|p| format!("{p}*"))
            .chain(self.ranges.iter().map(|(a, b)| format!("{a}-{b}")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefixes_and_ranges_match() {
        let f = BarcodeFilter::any()
            .with_prefix("CLN")
            .with_range("DLY000L9", "DLY499L9")
            .unwrap();
        assert!(f.matches("CLN001L1"));
        assert!(f.matches("DLY000L9") && f.matches("DLY499L9") && f.matches("DLY250L9"));
        assert!(!f.matches("DLY500L9"));
        assert!(!f.matches("DLY25L9"), "another length is outside the range");
        assert!(BarcodeFilter::any().matches("ANY001L9"));
        assert_eq!(f.describe(), "CLN*, DLY000L9-DLY499L9");
    }

    #[test]
    fn bad_ranges_are_refused() {
        assert_eq!(
            BarcodeFilter::any().with_range("A10", "A9").unwrap_err(),
            BarcodeRangeError::Lengths {
                first: "A10".into(),
                last: "A9".into()
            }
        );
        assert!(matches!(
            BarcodeFilter::any().with_range("B000L9", "A000L9"),
            Err(BarcodeRangeError::Reversed { .. })
        ));
        assert_eq!(
            BarcodeFilter::parse_range("DLY000L9-DLY499L9").unwrap(),
            ("DLY000L9".into(), "DLY499L9".into())
        );
        for bad in ["DLY000L9", "-X", "A-B-C", "A-"] {
            assert!(BarcodeFilter::parse_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn overlaps() {
        let range = |a: &str, b: &str| BarcodeFilter::any().with_range(a, b).unwrap();
        let prefix = |p: &str| BarcodeFilter::any().with_prefix(p);
        assert!(range("A000L9", "A499L9").overlaps(&range("A400L9", "A999L9")));
        assert!(!range("A000L9", "A499L9").overlaps(&range("A500L9", "A999L9")));
        assert!(prefix("A4").overlaps(&range("A000L9", "A499L9")));
        assert!(!prefix("A5").overlaps(&range("A000L9", "A499L9")));
        assert!(prefix("AB").overlaps(&prefix("A")));
        assert!(!prefix("AB").overlaps(&prefix("AC")));
        assert!(BarcodeFilter::any().overlaps(&prefix("X")));
    }

    proptest! {
        /// `overlaps` never says "no" when a barcode matches both.
        #[test]
        fn no_overlap_means_no_common_barcode(
            a in "[A-C][0-9]{2}", b in "[A-C][0-9]{2}", c in "[A-C][0-9]{2}", d in "[A-C][0-9]{2}",
            p in "[A-C][0-9]?", barcode in "[A-C][0-9]{2}",
        ) {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            let (c, d) = if c <= d { (c, d) } else { (d, c) };
            let left = BarcodeFilter::any().with_range(&a, &b).unwrap();
            let right = BarcodeFilter::any().with_range(&c, &d).unwrap().with_prefix(&p);
            if left.matches(&barcode) && right.matches(&barcode) {
                prop_assert!(left.overlaps(&right));
            }
        }
    }
}
