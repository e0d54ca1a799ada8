//! The catalog's file, with a fence.
//!
//! redb makes a pending non-durable commit durable when the database is closed. That is wrong
//! for us when the store stops after a failure: those commits may name chunks whose packs were
//! never stored. Fencing makes every later write and sync fail, which redb latches as an I/O
//! error and then leaves the file as it was — at the last durable commit, exactly as a power cut
//! would.

use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

#[derive(Debug)]
pub struct FencedFile {
    file: FileBackend,
    fenced: Arc<AtomicBool>,
}

impl FencedFile {
    pub fn new(file: FileBackend, fenced: Arc<AtomicBool>) -> FencedFile {
        FencedFile { file, fenced }
    }

    fn check(&self) -> io::Result<()> {
        if self.fenced.load(Ordering::Acquire) {
            Err(io::Error::other(
                "catalog fenced: the store stopped; non-durable commits are discarded",
            ))
        } else {
            Ok(())
        }
    }
}

impl StorageBackend for FencedFile {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check()?;
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.check()?;
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check()?;
        self.file.write(offset, data)
    }
    fn close(&self) -> io::Result<()> {
        self.file.close()
    }
    fn try_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, redb::BackendError> {
        self.file.try_lock_range(s, e)
    }
    fn try_lock_shared_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.file.try_lock_shared_range(s, e)
    }
    fn lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.lock_range(s, e)
    }
    fn lock_shared_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.lock_shared_range(s, e)
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<(), redb::BackendError> {
        self.file.unlock_range(s, e)
    }
    fn query_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> Result<bool, redb::BackendError> {
        self.file.query_lock_range(s, e)
    }
}
