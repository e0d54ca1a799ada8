//! Compare-and-swap objects: the one coordination primitive reel uses between nodes on one
//! bucket (leases). A write names the version it read and succeeds only if the object is still
//! at that version (S3 `If-Match` on the ETag), or creates it only if absent
//! (`If-None-Match: *`). Nothing here is cached or encrypted: these objects are small, rewritten
//! in place, and must be read from the bucket itself every time.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::{BackendError, Key, Result, lock};

/// An object's version as the back end names it (an S3 ETag): opaque, compared for equality.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version(pub String);

/// Objects rewritten only by compare-and-swap.
///
/// Contract (checked by `conformance::versioned`):
/// - `write_versioned(k, d, None)` creates `k` and fails with [`BackendError::AlreadyExists`]
///   if it exists; exactly one of concurrent creators wins.
/// - `write_versioned(k, d, Some(v))` replaces `k` only if its version is still `v`, else fails
///   with [`BackendError::VersionMismatch`] (also when `k` is gone); exactly one of concurrent
///   writers naming the same `v` wins.
/// - Every successful write returns the new version, which differs from the one it replaced.
pub trait VersionedObjects: Send + Sync + 'static {
    /// The object and its version, `None` if absent.
    fn read_versioned(&self, key: &Key) -> Result<Option<(Vec<u8>, Version)>>;
    fn write_versioned(
        &self,
        key: &Key,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version>;
    /// Keys under `prefix`, sorted.
    fn list_versioned(&self, prefix: &str) -> Result<Vec<Key>>;
}

/// In-memory compare-and-swap objects, for tests of the logic built on them.
#[derive(Default)]
pub struct MemoryVersioned {
    objects: Mutex<BTreeMap<Key, (Vec<u8>, u64)>>,
    next: Mutex<u64>,
}

impl MemoryVersioned {
    pub fn new() -> Self {
        Self::default()
    }
}

impl VersionedObjects for MemoryVersioned {
    fn read_versioned(&self, key: &Key) -> Result<Option<(Vec<u8>, Version)>> {
        Ok(lock(&self.objects)
            .get(key)
            .map(|(data, v)| (data.clone(), Version(v.to_string()))))
    }

    fn write_versioned(
        &self,
        key: &Key,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version> {
        let mut objects = lock(&self.objects);
        let current = objects.get(key).map(|(_, v)| Version(v.to_string()));
        match (expected, current) {
            (None, Some(_)) => return Err(BackendError::AlreadyExists(key.clone())),
            (Some(want), Some(have)) if *want == have => {}
            (Some(_), _) => return Err(BackendError::VersionMismatch(key.clone())),
            (None, None) => {}
        }
        let version = {
            let mut next = lock(&self.next);
            *next += 1;
            *next
        };
        objects.insert(key.clone(), (data.to_vec(), version));
        Ok(Version(version.to_string()))
    }

    fn list_versioned(&self, prefix: &str) -> Result<Vec<Key>> {
        Ok(lock(&self.objects)
            .keys()
            .filter(|k| k.as_str().starts_with(prefix))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_versioned_meets_the_contract() {
        crate::conformance::versioned(&MemoryVersioned::new());
    }
}
