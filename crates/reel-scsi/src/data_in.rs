//! The Data-In bytes of a response, in one buffer or in several.

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};

/// What a command returns to the initiator: one buffer, or several shared ones in order (a tape
/// record handed on as the slices of the store's buffers it lies in, so it is not copied into
/// one). A transport sends [`DataIn::parts`] as they are. Everything else may read the bytes as
/// one slice through `Deref`, which joins several parts once, with a copy: fine for a test or
/// a parser, not for the data path.
#[derive(Clone, Default)]
pub struct DataIn {
    /// Never an empty part.
    parts: Vec<Bytes>,
    len: usize,
    joined: OnceLock<Bytes>,
}

impl DataIn {
    /// No data.
    pub fn new() -> Self {
        Self::default()
    }

    /// The concatenation of `parts` (empty ones are dropped).
    pub fn from_parts(parts: impl IntoIterator<Item = Bytes>) -> Self {
        let parts: Vec<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let len = parts.iter().map(Bytes::len).sum();
        DataIn {
            parts,
            len,
            joined: OnceLock::new(),
        }
    }

    /// Length in bytes (without joining the parts).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes in order, as the buffers they are in (none empty).
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// [`DataIn::parts`], by value.
    pub fn into_parts(self) -> Vec<Bytes> {
        self.parts
    }

    /// The bytes in one buffer: the part itself if there is one, else joined (see `Deref`).
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            several => self.joined(several).clone(),
        }
    }

    /// Several parts in one buffer, joined the first time it is asked for.
    fn joined(&self, several: &[Bytes]) -> &Bytes {
        self.joined.get_or_init(|| {
            let mut all = BytesMut::with_capacity(self.len);
            for part in several {
                all.extend_from_slice(part);
            }
            all.freeze()
        })
    }

    /// At most the first `n` bytes, without joining the parts (e.g. a sample to look at).
    pub fn head(&self, n: usize) -> std::borrow::Cow<'_, [u8]> {
        let n = n.min(self.len);
        match self.parts.first() {
            Some(first) if first.len() >= n => std::borrow::Cow::Borrowed(&first[..n]),
            _ => {
                // Only the parts the prefix covers are copied, never the whole.
                let mut head = Vec::with_capacity(n);
                for part in &self.parts {
                    let take = part.len().min(n - head.len());
                    head.extend_from_slice(&part[..take]);
                    if head.len() == n {
                        break;
                    }
                }
                std::borrow::Cow::Owned(head)
            }
        }
    }
}

impl Deref for DataIn {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self.parts.as_slice() {
            [] => &[],
            [one] => one,
            several => self.joined(several),
        }
    }
}

impl From<Bytes> for DataIn {
    fn from(bytes: Bytes) -> Self {
        DataIn::from_parts([bytes])
    }
}

impl From<Vec<u8>> for DataIn {
    fn from(bytes: Vec<u8>) -> Self {
        DataIn::from(Bytes::from(bytes))
    }
}

impl From<Vec<Bytes>> for DataIn {
    fn from(parts: Vec<Bytes>) -> Self {
        DataIn::from_parts(parts)
    }
}

/// Equal bytes, however they are split into parts.
impl PartialEq for DataIn {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .parts
                .iter()
                .flat_map(|p| p.iter())
                .eq(other.parts.iter().flat_map(|p| p.iter()))
    }
}

impl Eq for DataIn {}

impl fmt::Debug for DataIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts.as_slice() {
            [] => f.write_str("DataIn(empty)"),
            [one] => fmt::Debug::fmt(one, f),
            several => write!(f, "DataIn({} bytes in {} parts)", self.len, several.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// However the bytes are split, a DataIn reads as their concatenation, compares equal
        /// to any other split of them, and its head is their prefix.
        #[test]
        fn reads_as_the_concatenation_of_its_parts(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6),
            other_cut in any::<prop::sample::Index>(),
            head in 0usize..300,
        ) {
            let all: Vec<u8> = parts.concat();
            let data = DataIn::from_parts(parts.iter().cloned().map(Bytes::from));
            prop_assert_eq!(data.len(), all.len());
            prop_assert_eq!(&data[..], &all[..]);
            prop_assert!(data.parts().iter().all(|p| !p.is_empty()));
            let cut = other_cut.index(all.len() + 1);
            let resplit = DataIn::from_parts([
                Bytes::copy_from_slice(&all[..cut]),
                Bytes::copy_from_slice(&all[cut..]),
            ]);
            prop_assert_eq!(&data, &resplit);
            prop_assert_eq!(&*data.head(head), &all[..head.min(all.len())]);
        }
    }

    #[test]
    fn different_bytes_differ() {
        let a = DataIn::from_parts([Bytes::from_static(b"ab"), Bytes::from_static(b"c")]);
        let b = DataIn::from(Bytes::from_static(b"abd"));
        assert_ne!(a, b);
        assert_ne!(a, DataIn::from(Bytes::from_static(b"ab")));
    }
}
