//! Validated object keys.

use std::borrow::Borrow;
use std::fmt;

/// Longest key in bytes; S3 allows 1024, but a local path must also fit comfortably in PATH_MAX.
pub const MAX_KEY_LEN: usize = 512;

/// A validated object key: `/`-separated segments of `[A-Za-z0-9._-]`, each non-empty and not
/// starting with `.` (so no `.`, `..` or hidden names, which the local back end reserves for its
/// temporary files), no leading or trailing `/`, at most [`MAX_KEY_LEN`] bytes.
///
/// Keys order bytewise, which is the order [`crate::Backend::list`] returns.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

/// Why a string is not a valid [`Key`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("key is empty")]
    Empty,
    #[error("key is {len} bytes, longer than the {MAX_KEY_LEN}-byte limit")]
    TooLong { len: usize },
    #[error("key {key:?} starts or ends with '/'")]
    EdgeSlash { key: String },
    #[error("key {key:?} has an empty segment")]
    EmptySegment { key: String },
    #[error("key {key:?} has segment {segment:?} starting with '.'")]
    DotSegment { key: String, segment: String },
    #[error(
        "key {key:?} has invalid character {ch:?} (allowed: A-Z a-z 0-9 . _ - and / between segments)"
    )]
    InvalidChar { key: String, ch: char },
}

impl Key {
    pub fn new(key: impl Into<String>) -> Result<Key, KeyError> {
        let key = key.into();
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if key.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong { len: key.len() });
        }
        if key.starts_with('/') || key.ends_with('/') {
            return Err(KeyError::EdgeSlash { key });
        }
        if let Some(ch) = key
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
        {
            return Err(KeyError::InvalidChar { key, ch });
        }
        for segment in key.split('/') {
            if segment.is_empty() {
                return Err(KeyError::EmptySegment { key });
            }
            if segment.starts_with('.') {
                let segment = segment.to_string();
                return Err(KeyError::DotSegment { key, segment });
            }
        }
        Ok(Key(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True if `other` lies "inside" `self` as a directory: `a` is a directory prefix of `a/b`
    /// and `a/b/c`, but not of `a`, `ab` or `a.b`. Two such keys must never coexist.
    pub fn is_dir_prefix_of(&self, other: &Key) -> bool {
        other.0.len() > self.0.len()
            && other.0.starts_with(&self.0)
            && other.0.as_bytes()[self.0.len()] == b'/'
    }

    /// The directory prefixes of this key, shortest first: `a/b/c` yields `a`, `a/b`.
    pub fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i])
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", self.0)
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

// Sound because Eq/Ord/Hash are derived from the inner String; lets maps keyed by `Key` be
// queried and range-scanned with `&str`.
impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Key {
    type Error = KeyError;
    fn try_from(s: &str) -> Result<Key, KeyError> {
        Key::new(s)
    }
}

impl TryFrom<String> for Key {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Key, KeyError> {
        Key::new(s)
    }
}

impl std::str::FromStr for Key {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Key, KeyError> {
        Key::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        for ok in ["a", "packs/0001.pack", "a-b_c.D9/x", "x..y", "a/b.", "_/-"] {
            assert_eq!(
                Key::new(ok).map(|k| k.to_string()),
                Ok(ok.to_string()),
                "{ok}"
            );
        }
        let bad = |s: &str| Key::new(s).unwrap_err();
        assert_eq!(bad(""), KeyError::Empty);
        assert!(matches!(
            bad(&"a".repeat(513)),
            KeyError::TooLong { len: 513 }
        ));
        assert!(Key::new("a".repeat(512)).is_ok());
        assert!(matches!(bad("/a"), KeyError::EdgeSlash { .. }));
        assert!(matches!(bad("a/"), KeyError::EdgeSlash { .. }));
        assert!(matches!(bad("a//b"), KeyError::EmptySegment { .. }));
        assert!(matches!(bad("a/./b"), KeyError::DotSegment { .. }));
        assert!(matches!(bad(".."), KeyError::DotSegment { .. }));
        assert!(matches!(bad(".tmp/x"), KeyError::DotSegment { .. }));
        assert!(matches!(bad("a b"), KeyError::InvalidChar { ch: ' ', .. }));
        assert!(matches!(bad("a\\b"), KeyError::InvalidChar { .. }));
        assert!(matches!(bad("é"), KeyError::InvalidChar { ch: 'é', .. }));
    }

    #[test]
    fn dir_prefix_and_ancestors() {
        let k = |s: &str| Key::new(s).unwrap();
        assert!(k("a").is_dir_prefix_of(&k("a/b")));
        assert!(k("a").is_dir_prefix_of(&k("a/b/c")));
        assert!(k("a/b").is_dir_prefix_of(&k("a/b/c")));
        assert!(!k("a").is_dir_prefix_of(&k("a")));
        assert!(!k("a").is_dir_prefix_of(&k("ab/c")));
        assert!(!k("a/b").is_dir_prefix_of(&k("a")));
        assert_eq!(k("a/b/c").ancestors().collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(k("a").ancestors().count(), 0);
    }

    /// Independent statement of the rules, to check `Key::new` against.
    fn is_valid(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= MAX_KEY_LEN
            && s.split('/').all(|seg| {
                !seg.is_empty()
                    && !seg.starts_with('.')
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            })
    }

    proptest! {
        #[test]
        fn valid_keys_accepted(segs in prop::collection::vec("[A-Za-z0-9_-][A-Za-z0-9._-]{0,12}", 1..6)) {
            let s = segs.join("/");
            let key = Key::new(s.clone()).unwrap();
            prop_assert_eq!(key.as_str(), s.as_str());
            prop_assert_eq!(key.to_string(), s.clone());
            prop_assert_eq!(s.parse::<Key>().unwrap(), key);
        }

        #[test]
        fn arbitrary_strings_never_panic(s in "\\PC{0,40}") {
            prop_assert_eq!(Key::new(s.clone()).is_ok(), is_valid(&s));
        }

        #[test]
        fn edge_heavy_strings_agree(s in "[a./_ -]{0,12}") {
            prop_assert_eq!(Key::new(s.clone()).is_ok(), is_valid(&s));
        }
    }
}
