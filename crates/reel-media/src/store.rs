//! The storage abstraction behind one tape partition, and an in-memory
//! reference implementation.
//!
//! A partition is a sequence of *logical objects* (SSC-4 §3.1: logical
//! blocks and filemarks) numbered from 0, followed by end-of-data (EOD).
//! The cartridge model ([`crate::Cartridge`]) implements all tape semantics
//! on top of this minimal trait; implementations only store and index.

/// The kind of one logical object in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A data record (logical block) of `len` bytes; `len` is never 0.
    Record {
        /// Record length in bytes.
        len: u32,
    },
    /// A record the drive encrypted (SSC-4 §4.2.27, tape data encryption): `len` bytes in the
    /// drive's sealed form. Only the drive, holding the key, turns it back into the host's
    /// record; the store keeps it as written (it neither dedups nor compresses).
    EncryptedRecord {
        /// Length of the sealed form in bytes.
        len: u32,
    },
    /// A filemark.
    Filemark,
}

/// What a partition holds that is not durable yet: the objects appended since the last
/// [`PartitionStore::sync`] and their data bytes (SSC-4 READ POSITION reports them as the
/// object buffer's contents). Unsynchronised objects are always a suffix of the partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Unsynced {
    /// Logical objects (records and filemarks) appended but not yet synced.
    pub objects: u64,
    /// Data bytes of those records (host bytes, before compression).
    pub bytes: u64,
}

/// The sum of two counts (partitions of one cartridge), saturating.
impl std::ops::Add for Unsynced {
    type Output = Unsynced;

    fn add(self, other: Unsynced) -> Unsynced {
        Unsynced {
            objects: self.objects.saturating_add(other.objects),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

/// Storage for the logical objects of one partition.
///
/// Contract (checked by `testing::check_partition_store` when the
/// `testing` feature is enabled):
/// * objects are numbered `0..object_count()`; `object_count()` is the EOD
///   position;
/// * accessors taking an object number `n >= object_count()` (`object`,
///   `read_record`) must return an error, never panic; `read_record` on a
///   filemark must also return an error;
/// * `truncate(n)` with `n >= object_count()` is a no-op;
/// * `append_filemarks(0)` is a no-op;
/// * `filemarks_before(n)` with `n > object_count()` counts all filemarks;
/// * `unsynced()` counts the objects appended since the last successful `sync` that are still
///   there (a `truncate` takes unsynced objects out), and is zero right after `sync`.
///
/// The trait is object safe (`dyn PartitionStore<Error = E>`).
pub trait PartitionStore {
    /// Storage failure.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Logical objects (records and filemarks) before end-of-data.
    fn object_count(&self) -> u64;
    /// Kind of object `n` (`n < object_count()`).
    fn object(&self, n: u64) -> Result<ObjectKind, Self::Error>;
    /// Read record `n` into `buf`, replacing its contents.
    fn read_record(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), Self::Error>;
    /// [`PartitionStore::read_record`] as shared buffers, replacing the contents of `out`: for
    /// a caller that hands the record on as it is (a Data-In buffer). A store that holds its
    /// records in shared memory may return slices of it instead of a copy; by default the
    /// record is copied once, into one buffer.
    fn read_record_shared(
        &mut self,
        n: u64,
        out: &mut Vec<bytes::Bytes>,
    ) -> Result<(), Self::Error> {
        let mut buf = Vec::new();
        self.read_record(n, &mut buf)?;
        out.clear();
        out.push(buf.into());
        Ok(())
    }
    /// Append a data record (non-empty) at EOD.
    fn append_record(&mut self, data: &[u8]) -> Result<(), Self::Error>;
    /// [`PartitionStore::append_record`] of bytes the caller shares (a Data-Out buffer): a
    /// store that keeps them past the call may take them without a copy.
    fn append_record_shared(&mut self, data: bytes::Bytes) -> Result<(), Self::Error> {
        self.append_record(&data)
    }
    /// Append an encrypted record (non-empty: the drive's sealed form) at EOD; `object` then
    /// reports it as [`ObjectKind::EncryptedRecord`] and `read_record` returns these bytes.
    fn append_encrypted_record(&mut self, data: &[u8]) -> Result<(), Self::Error>;
    /// Append `count` filemarks at EOD.
    fn append_filemarks(&mut self, count: u32) -> Result<(), Self::Error>;
    /// Drop objects `n..` so EOD is at `n`.
    fn truncate(&mut self, n: u64) -> Result<(), Self::Error>;
    /// Filemarks among objects `0..n`.
    fn filemarks_before(&self, n: u64) -> Result<u64, Self::Error>;
    /// Object number of the `k`-th filemark (0-based), if it exists.
    fn filemark_position(&self, k: u64) -> Result<Option<u64>, Self::Error>;
    /// Bytes of data records before EOD (host bytes, before compression).
    fn data_bytes(&self) -> u64;
    /// Make everything appended so far durable (a synchronising point).
    fn sync(&mut self) -> Result<(), Self::Error>;
    /// What is not durable yet: the objects and data bytes after the last `sync`.
    fn unsynced(&self) -> Unsynced;
}

/// Where [`crate::Cartridge::read`] puts a record: a `Vec<u8>` (one copy of it), or a
/// `Vec<Bytes>` (the store's shared buffers where it has them:
/// [`PartitionStore::read_record_shared`]).
pub trait RecordBuf {
    /// Replaces the contents with record `n` of `store`; returns the record's length.
    fn fill<S: PartitionStore + ?Sized>(
        &mut self,
        store: &mut S,
        n: u64,
    ) -> Result<usize, S::Error>;
    /// Keeps the first `len` bytes (no more than there are).
    fn keep(&mut self, len: usize);
}

impl RecordBuf for Vec<u8> {
    fn fill<S: PartitionStore + ?Sized>(
        &mut self,
        store: &mut S,
        n: u64,
    ) -> Result<usize, S::Error> {
        store.read_record(n, self)?;
        Ok(self.len())
    }

    fn keep(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl RecordBuf for Vec<bytes::Bytes> {
    fn fill<S: PartitionStore + ?Sized>(
        &mut self,
        store: &mut S,
        n: u64,
    ) -> Result<usize, S::Error> {
        store.read_record_shared(n, self)?;
        Ok(self.iter().map(bytes::Bytes::len).sum())
    }

    fn keep(&mut self, mut len: usize) {
        let mut parts = 0;
        for part in self.iter_mut() {
            if len == 0 {
                break;
            }
            part.truncate(len);
            len -= part.len();
            parts += 1;
        }
        self.truncate(parts);
    }
}

/// Errors of [`MemoryPartition`]: only contract violations by the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryPartitionError {
    /// Object number at or beyond EOD.
    #[error("object {n} is beyond end-of-data ({count})")]
    OutOfRange {
        /// Requested object.
        n: u64,
        /// Object count (EOD).
        count: u64,
    },
    /// `read_record` on a filemark.
    #[error("object {0} is a filemark, not a record")]
    NotARecord(u64),
    /// Record of length 0 or longer than `u32::MAX`.
    #[error("invalid record length {0}")]
    InvalidRecordLength(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum MemObject {
    Record { data: Vec<u8>, encrypted: bool },
    Filemark,
}

/// In-memory [`PartitionStore`]: a `Vec` of objects plus a sorted index of
/// filemark positions, so filemark queries are `O(log n)`.
///
/// It is the reference implementation other stores are compared with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryPartition {
    objects: Vec<MemObject>,
    /// Object numbers of all filemarks, ascending.
    filemarks: Vec<u64>,
    data_bytes: u64,
    syncs: u64,
    synced_objects: u64,
    /// Data bytes of the first `synced_objects` objects.
    synced_bytes: u64,
}

impl MemoryPartition {
    /// An empty partition.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many times [`PartitionStore::sync`] was called.
    pub fn sync_count(&self) -> u64 {
        self.syncs
    }

    /// Object count at the last `sync` (objects before it are "durable").
    pub fn synced_objects(&self) -> u64 {
        self.synced_objects
    }

    fn count(&self) -> u64 {
        self.objects.len() as u64
    }

    fn append(&mut self, data: &[u8], encrypted: bool) -> Result<(), MemoryPartitionError> {
        if data.is_empty() || u32::try_from(data.len()).is_err() {
            return Err(MemoryPartitionError::InvalidRecordLength(data.len()));
        }
        self.data_bytes += data.len() as u64;
        self.objects.push(MemObject::Record {
            data: data.to_vec(),
            encrypted,
        });
        Ok(())
    }

    fn get(&self, n: u64) -> Result<&MemObject, MemoryPartitionError> {
        usize::try_from(n)
            .ok()
            .and_then(|i| self.objects.get(i))
            .ok_or(MemoryPartitionError::OutOfRange {
                n,
                count: self.count(),
            })
    }
}

impl PartitionStore for MemoryPartition {
    type Error = MemoryPartitionError;

    fn object_count(&self) -> u64 {
        self.count()
    }

    fn object(&self, n: u64) -> Result<ObjectKind, Self::Error> {
        Ok(match self.get(n)? {
            // Lengths are validated to fit u32 on append.
            MemObject::Record {
                data,
                encrypted: false,
            } => ObjectKind::Record {
                len: data.len() as u32,
            },
            MemObject::Record {
                data,
                encrypted: true,
            } => ObjectKind::EncryptedRecord {
                len: data.len() as u32,
            },
            MemObject::Filemark => ObjectKind::Filemark,
        })
    }

    fn read_record(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), Self::Error> {
        match self.get(n)? {
            MemObject::Record { data, .. } => {
                buf.clear();
                buf.extend_from_slice(data);
                Ok(())
            }
            MemObject::Filemark => Err(MemoryPartitionError::NotARecord(n)),
        }
    }

    fn append_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        self.append(data, false)
    }

    fn append_encrypted_record(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        self.append(data, true)
    }

    fn append_filemarks(&mut self, count: u32) -> Result<(), Self::Error> {
        for _ in 0..count {
            self.filemarks.push(self.count());
            self.objects.push(MemObject::Filemark);
        }
        Ok(())
    }

    fn truncate(&mut self, n: u64) -> Result<(), Self::Error> {
        if n >= self.count() {
            return Ok(());
        }
        // n < len <= usize::MAX, so the cast is lossless.
        let removed = self.objects.split_off(n as usize);
        for o in &removed {
            if let MemObject::Record { data, .. } = o {
                self.data_bytes -= data.len() as u64;
            }
        }
        let keep = self.filemarks.partition_point(|&p| p < n);
        self.filemarks.truncate(keep);
        self.synced_objects = self.synced_objects.min(n);
        self.synced_bytes = self.synced_bytes.min(self.data_bytes);
        Ok(())
    }

    fn filemarks_before(&self, n: u64) -> Result<u64, Self::Error> {
        Ok(self.filemarks.partition_point(|&p| p < n) as u64)
    }

    fn filemark_position(&self, k: u64) -> Result<Option<u64>, Self::Error> {
        Ok(usize::try_from(k)
            .ok()
            .and_then(|k| self.filemarks.get(k))
            .copied())
    }

    fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    fn sync(&mut self) -> Result<(), Self::Error> {
        self.syncs += 1;
        self.synced_objects = self.count();
        self.synced_bytes = self.data_bytes;
        Ok(())
    }

    fn unsynced(&self) -> Unsynced {
        Unsynced {
            objects: self.count() - self.synced_objects,
            bytes: self.data_bytes - self.synced_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filemark_index_and_truncate() {
        let mut p = MemoryPartition::new();
        p.append_record(b"abc").unwrap();
        p.append_filemarks(2).unwrap();
        p.append_record(b"de").unwrap();
        p.append_filemarks(1).unwrap();
        p.append_filemarks(0).unwrap();
        assert_eq!(p.object_count(), 5);
        assert_eq!(p.data_bytes(), 5);
        assert_eq!(p.filemarks_before(0).unwrap(), 0);
        assert_eq!(p.filemarks_before(2).unwrap(), 1);
        assert_eq!(p.filemarks_before(5).unwrap(), 3);
        assert_eq!(p.filemarks_before(u64::MAX).unwrap(), 3);
        assert_eq!(p.filemark_position(0).unwrap(), Some(1));
        assert_eq!(p.filemark_position(2).unwrap(), Some(4));
        assert_eq!(p.filemark_position(3).unwrap(), None);
        assert_eq!(p.filemark_position(u64::MAX).unwrap(), None);
        assert_eq!(p.object(3).unwrap(), ObjectKind::Record { len: 2 });
        p.append_encrypted_record(b"sealed").unwrap();
        assert_eq!(p.object(5).unwrap(), ObjectKind::EncryptedRecord { len: 6 });
        let mut sealed = Vec::new();
        p.read_record(5, &mut sealed).unwrap();
        assert_eq!(sealed, b"sealed");
        assert_eq!(p.data_bytes(), 11);
        p.truncate(5).unwrap();

        p.truncate(2).unwrap();
        assert_eq!(p.object_count(), 2);
        assert_eq!(p.data_bytes(), 3);
        assert_eq!(p.filemarks_before(10).unwrap(), 1);
        assert_eq!(p.filemark_position(1).unwrap(), None);
        p.truncate(7).unwrap();
        assert_eq!(p.object_count(), 2);
    }

    #[test]
    fn contract_violations_are_errors_not_panics() {
        let mut p = MemoryPartition::new();
        let mut buf = vec![1, 2, 3];
        assert!(p.object(0).is_err());
        assert!(p.read_record(u64::MAX, &mut buf).is_err());
        assert!(p.append_record(&[]).is_err());
        p.append_filemarks(1).unwrap();
        assert_eq!(
            p.read_record(0, &mut buf),
            Err(MemoryPartitionError::NotARecord(0))
        );
        assert_eq!(buf, [1, 2, 3]);
    }

    #[test]
    fn sync_tracks_durable_prefix() {
        let mut p = MemoryPartition::new();
        p.append_record(b"x").unwrap();
        assert_eq!(p.synced_objects(), 0);
        p.sync().unwrap();
        assert_eq!((p.sync_count(), p.synced_objects()), (1, 1));
        assert_eq!(p.unsynced(), Unsynced::default());
        p.append_filemarks(2).unwrap();
        p.append_record(b"yz").unwrap();
        let three = Unsynced {
            objects: 3,
            bytes: 2,
        };
        assert_eq!(p.unsynced(), three);
        p.truncate(2).unwrap();
        assert_eq!(
            p.unsynced(),
            Unsynced {
                objects: 1,
                bytes: 0
            }
        );
        p.truncate(0).unwrap();
        assert_eq!(p.synced_objects(), 0);
        assert_eq!(p.unsynced(), Unsynced::default());
    }

    #[test]
    fn is_object_safe() {
        let mut p = MemoryPartition::new();
        let d: &mut dyn PartitionStore<Error = MemoryPartitionError> = &mut p;
        d.append_record(b"q").unwrap();
        assert_eq!(d.object_count(), 1);
    }
}
