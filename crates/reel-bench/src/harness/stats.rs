//! Statistics over repeated measurements.

/// The median of the finite values (mean of the middle two for an even count); `None` when
/// there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The value at the `p`-th percentile (0 to 100) by the nearest-rank-below rule the library
/// benchmark has always used: sorted sample `len * p / 100` (the largest for 100); `None` when
/// there are no samples.
pub fn percentile(values: &[f64], p: usize) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() * p / 100).min(v.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[1.0, f64::NAN, 3.0]), Some(2.0));
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 50), Some(11.0));
        assert_eq!(percentile(&v, 95), Some(20.0));
        assert_eq!(percentile(&v, 100), Some(20.0));
        assert_eq!(percentile(&[], 50), None);
    }
}
