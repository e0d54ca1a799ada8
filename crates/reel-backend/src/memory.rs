//! An in-memory back end for tests and benchmarks. Not durable, by design.

use std::collections::BTreeMap;
use std::ops::Bound::{Included, Unbounded};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::{Backend, BackendError, Key, ObjectMeta, PutMode, Result, check_range, lock};

/// Objects in a sorted map behind one lock. Values are `Arc`ed so reads copy outside the lock.
#[derive(Default)]
pub struct MemoryBackend {
    objects: Mutex<BTreeMap<Key, Arc<Vec<u8>>>>,
}

impl MemoryBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sum of all object sizes.
    pub fn total_bytes(&self) -> u64 {
        lock(&self.objects).values().map(|v| v.len() as u64).sum()
    }

    pub fn object_count(&self) -> usize {
        lock(&self.objects).len()
    }

    fn fetch(&self, key: &Key) -> Result<Arc<Vec<u8>>> {
        lock(&self.objects)
            .get(key)
            .cloned()
            .ok_or_else(|| BackendError::NotFound(key.clone()))
    }
}

/// An existing key that is a directory prefix of `key`, or has `key` as one.
fn conflict(map: &BTreeMap<Key, Arc<Vec<u8>>>, key: &Key) -> Option<String> {
    if let Some(a) = key.ancestors().find(|a| map.contains_key(*a)) {
        return Some(a.to_string());
    }
    let inside = format!("{key}/");
    map.range::<str, _>((Included(inside.as_str()), Unbounded))
        .next()
        .filter(|(k, _)| k.as_str().starts_with(&inside))
        .map(|(k, _)| k.to_string())
}

impl Backend for MemoryBackend {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        let data = Arc::new(data.to_vec());
        let mut map = lock(&self.objects);
        if let Some(existing) = conflict(&map, key) {
            return Err(BackendError::KeyConflict {
                key: key.clone(),
                existing,
            });
        }
        if mode == PutMode::Create && map.contains_key(key) {
            return Err(BackendError::AlreadyExists(key.clone()));
        }
        map.insert(key.clone(), data);
        Ok(())
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        Ok(self.fetch(key)?.to_vec())
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        let data = self.fetch(key)?;
        check_range(key, &range, data.len() as u64)?;
        Ok(data[range.start as usize..range.end as usize].to_vec())
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let map = lock(&self.objects);
        Ok(map
            .range::<str, _>((Included(prefix), Unbounded))
            .take_while(|(k, _)| k.as_str().starts_with(prefix))
            .map(|(k, v)| ObjectMeta {
                key: k.clone(),
                size: v.len() as u64,
            })
            .collect())
    }

    fn delete(&self, key: &Key) -> Result<()> {
        lock(&self.objects).remove(key);
        Ok(())
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance() {
        crate::conformance::run_all(&|| Box::new(MemoryBackend::new()));
    }

    #[test]
    fn counters() {
        let m = MemoryBackend::new();
        m.put(&Key::new("a").unwrap(), b"abc", PutMode::Create)
            .unwrap();
        m.put(&Key::new("b/c").unwrap(), b"de", PutMode::Create)
            .unwrap();
        m.put(&Key::new("a").unwrap(), b"x", PutMode::Overwrite)
            .unwrap();
        assert_eq!((m.total_bytes(), m.object_count()), (3, 2));
    }
}
