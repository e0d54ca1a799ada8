//! Object-shaped storage back ends for reel's chunk store.
//!
//! The store reaches durable storage only through [`Backend`]: whole objects, put atomically,
//! read whole or by range, listed by prefix, deleted. This is the lowest common denominator of a
//! local directory and S3-compatible object storage, so a new back end never touches the store.
//!
//! Key rules (see `docs/design/backend.md`): keys are `/`-separated ASCII paths of
//! `[A-Za-z0-9._-]` segments; no segment is empty, `.` or `..`; and no key may be a "directory"
//! prefix of another key (`packs/0001.pack` and `packs/0001.idx`, never `packs/0001` and
//! `packs/0001/idx`), because file-backed S3 servers cannot hold both. Back ends enforce this
//! with [`BackendError::KeyConflict`]. Segments starting with `.` are rejected so that a local
//! back end's bookkeeping (`.tmp/`) can never collide with a key.
//!
//! Implementations: [`LocalBackend`] (a directory, durable), [`MemoryBackend`] (tests),
//! `S3Backend` (S3-compatible object storage, behind the cargo feature `s3`),
//! [`EncryptedBackend`] (seals object bodies with AES-256-GCM before any back end), and the
//! fault injectors in [`fault`] ([`QuotaBackend`], [`FlakyBackend`], [`CrashBackend`]), which wrap
//! any back end. [`conformance`] holds the contract as checks any new back end must pass.

#![forbid(unsafe_code)]

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

mod cache;
mod chain_text;
pub mod conformance;
pub mod crypt;
pub mod fault;
mod key;
mod local;
pub mod lock_file;
mod memory;
#[cfg(feature = "s3")]
mod s3;
mod versioned;

pub use cache::{
    CacheConfig, CacheStats, DEFAULT_READ_MEMORY, DEFAULT_UPLOAD_MEMORY, PendingItem, RemoteCheck,
    WriteBackCache,
};
pub use chain_text::chain_text;
pub use crypt::{EncryptedBackend, KeyId, Resealed, StoreKey, StoreKeyError};
pub use fault::{CrashBackend, FaultRates, FlakyBackend, QuotaBackend};
pub use key::{Key, KeyError, MAX_KEY_LEN};
pub use local::LocalBackend;
pub use memory::MemoryBackend;
#[cfg(feature = "s3")]
pub use s3::{S3Backend, S3Config, S3Counters, S3Credentials, use_ring_for_tls};
pub use versioned::{MemoryVersioned, Version, VersionedObjects};

/// How a put treats an object that already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutMode {
    /// Replace any existing object.
    Overwrite,
    /// Fail with [`BackendError::AlreadyExists`] if the key exists (S3 `If-None-Match: *`).
    Create,
}

/// An object as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: Key,
    pub size: u64,
}

/// Errors from a back end, by meaning: callers branch on `NotFound`, `AlreadyExists` and
/// `NoSpace`; everything else is an I/O failure to report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    #[error("object {0} not found")]
    NotFound(Key),
    #[error("object {0} already exists")]
    AlreadyExists(Key),
    /// A compare-and-swap write found the object changed (or gone) since it was read.
    #[error("object {0} changed since it was read")]
    VersionMismatch(Key),
    /// The medium is full (ENOSPC, EDQUOT, a quota). Nothing was stored.
    #[error("no space left storing {0}")]
    NoSpace(Key),
    #[error("range {start}..{end} is outside object {key} of {size} bytes")]
    InvalidRange {
        key: Key,
        start: u64,
        end: u64,
        size: u64,
    },
    /// The key and an existing object would be a file and a directory at once (`a` and `a/b`).
    /// Nothing was stored.
    #[error(
        "object {key} conflicts with existing object {existing}: one is a directory prefix of the other"
    )]
    KeyConflict { key: Key, existing: String },
    /// The object was sealed with another key ([`crypt`]): nothing was decrypted.
    #[error(
        "object {key} was encrypted with key {found}, this node has key {ours}: configure the key the store was written with"
    )]
    WrongKey {
        key: Key,
        found: String,
        ours: String,
    },
    /// The stored bytes fail their check: an encrypted object that does not authenticate
    /// (damaged, or sealed under another key), truncated, or not in the expected format.
    /// Nothing of it is returned.
    #[error("object {key} is damaged or was encrypted with another key: {detail}")]
    Damaged { key: Key, detail: String },
    #[error("I/O error on {key}: {source}")]
    Io {
        key: String,
        #[source]
        source: std::io::Error,
    },
}

impl BackendError {
    /// An [`BackendError::Io`] error about `what` (a key, a path or a back end description).
    pub fn io(what: impl std::fmt::Display, source: std::io::Error) -> Self {
        BackendError::Io {
            key: what.to_string(),
            source,
        }
    }
}

pub type Result<T, E = BackendError> = std::result::Result<T, E>;

/// Durable object storage.
///
/// Contract every implementation meets (checked by [`conformance`]):
/// - `put` is atomic: a reader sees the old object (or none) or the whole new one, never a part;
///   when `put` returns `Ok`, the object is durable (survives power loss).
/// - `put` with [`PutMode::Create`] has exactly one winner among concurrent writers.
/// - `get_range` returns exactly `range` or fails with `InvalidRange` if it ends past the object.
/// - `list` returns every object whose key starts with `prefix`, sorted by key.
/// - `delete` of a missing object is `Ok` (idempotent), and durable when it returns.
pub trait Backend: Send + Sync + 'static {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()>;
    /// [`Backend::put`] of bytes the caller no longer needs: a back end that must own its
    /// request body (S3) takes them without copying. Same contract as `put`.
    fn put_vec(&self, key: &Key, data: Vec<u8>, mode: PutMode) -> Result<()> {
        self.put(key, &data, mode)
    }
    /// [`Backend::put`] of bytes the caller keeps a handle on (the write-back cache's copy of
    /// a pack, which it reuses once the upload is done): a back end that must own its request
    /// body (S3) holds the handle instead of copying. Same contract as `put`.
    fn put_shared(&self, key: &Key, data: Arc<Vec<u8>>, mode: PutMode) -> Result<()> {
        self.put(key, &data, mode)
    }
    fn get(&self, key: &Key) -> Result<Vec<u8>>;
    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>>;
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>>;
    fn delete(&self, key: &Key) -> Result<()>;
    /// A short human description for logs and errors ("local:/var/lib/reel").
    fn describe(&self) -> String;
    /// Waits until every put and delete that returned before this call has reached the back
    /// end's final home (for a write-back cache: the bucket), in the order they were made.
    /// Back ends that store synchronously have nothing to wait for. A store calls this at a
    /// synchronising point when durability `bucket` is configured.
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    /// Whether reading `range` of `key` needs no request to a remote service: true for local
    /// storage (the default), false for an object store; a cache answers for what it holds
    /// (a range past the object's end counts up to the end). Work that must never wait on the
    /// network (space accounting for the console) asks first and estimates otherwise.
    fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
        let _ = (key, range);
        true
    }
}

// Shared handles are back ends too, so wrappers can take `Arc<dyn Backend>` or `Box<dyn Backend>`.
macro_rules! forward_backend {
    ($($handle:ident),*) => {$(
        impl<B: Backend + ?Sized> Backend for $handle<B> {
            fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
                (**self).put(key, data, mode)
            }
            fn put_vec(&self, key: &Key, data: Vec<u8>, mode: PutMode) -> Result<()> {
                (**self).put_vec(key, data, mode)
            }
            fn put_shared(&self, key: &Key, data: Arc<Vec<u8>>, mode: PutMode) -> Result<()> {
                (**self).put_shared(key, data, mode)
            }
            fn get(&self, key: &Key) -> Result<Vec<u8>> {
                (**self).get(key)
            }
            fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
                (**self).get_range(key, range)
            }
            fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
                (**self).list(prefix)
            }
            fn delete(&self, key: &Key) -> Result<()> {
                (**self).delete(key)
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn flush(&self) -> Result<()> {
                (**self).flush()
            }
            fn is_local(&self, key: &Key, range: Range<u64>) -> bool {
                (**self).is_local(key, range)
            }
        }
    )*};
}
forward_backend!(Arc, Box);

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent
/// before anything that can panic, so a panic elsewhere must not wedge the back end.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Checks `range` against an object of `size` bytes.
pub(crate) fn check_range(key: &Key, range: &Range<u64>, size: u64) -> Result<()> {
    if range.start > range.end || range.end > size {
        return Err(BackendError::InvalidRange {
            key: key.clone(),
            start: range.start,
            end: range.end,
            size,
        });
    }
    Ok(())
}
