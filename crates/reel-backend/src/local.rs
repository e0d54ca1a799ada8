//! A back end over a local directory: object `k` is the file `root/k`.
//!
//! Put protocol (see `docs/design/backend.md` for each step's failure case): write the data to a
//! fresh file in `root/.tmp/`, fsync it, move it into place (`rename` to overwrite, `hard_link`
//! to create, which fails atomically if the target exists), then fsync the target's directory.
//! Leftovers in `.tmp/` are half-written puts from a crash and are deleted on open. One process
//! per root: opening a root cleans `.tmp/`, which would break another process's puts.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Backend, BackendError, Key, ObjectMeta, PutMode, Result, check_range, lock};

/// Directory under the root for temporary files; never a key since keys have no `.` segments.
const TMP_DIR: &str = ".tmp";

/// Puts at least this large (packs) bypass the page cache (`O_DIRECT`): the kernel's copy into
/// freshly allocated page-cache pages cost more than a quarter of the store's CPU per unique
/// gigabyte on the benchmark machine (docs/design/efficiency.md), and a pack is written once,
/// fsynced, and read back only in parts, later.
pub(crate) const DIRECT_MIN: usize = 1 << 20;
/// `O_DIRECT` wants buffer addresses, lengths and file offsets aligned to the logical block
/// size; 4 KiB covers 512-byte and 4 KiB devices.
const DIRECT_ALIGN: usize = 4096;
/// The aligned bounce buffer data goes through (one user-space copy, at memcpy speed).
const DIRECT_BUFFER: usize = 4 << 20;

/// Writes the concatenation of `parts` to a new file at `path` with `O_DIRECT`, and syncs it
/// if `sync` (a cache of remote bytes need not be durable). Returns `Ok(false)`, having created
/// nothing, where the file system refuses `O_DIRECT` (`EINVAL` at open): the caller then writes
/// through the page cache.
pub(crate) fn write_direct(path: &Path, parts: &[&[u8]], sync: bool) -> io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let _ = fs::remove_file(path);
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    with_bounce(|buffer| fill_direct(&mut f, buffer, parts, sync))?;
    Ok(true)
}

/// Reads of at least this many bytes bypass the page cache (`O_DIRECT`). On the benchmark
/// machine a buffered read of pack data cost ~1.1 CPU-s per GB from disk and ~0.55 from a warm
/// page cache (the kernel's copy into user space), a direct one ~0.13 in 256 KiB reads
/// (`dd`, 2 GiB, docs/design/efficiency.md §28). The store keeps its own cache of decoded
/// blobs, so the page cache's copy of a pack only ever served a second read of the same bytes.
pub(crate) const DIRECT_READ_MIN: usize = 128 << 10;

/// Reads `len` bytes of `file` at `offset` into a new buffer: with `O_DIRECT` when `len` is at
/// least [`DIRECT_READ_MIN`] and the file system allows it, else through the page cache. The
/// file must be this caller's own open file: its status flags are changed.
pub(crate) fn read_exact_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    if len >= DIRECT_READ_MIN && set_direct(file, true) {
        let res = read_direct(file, offset, len);
        match res {
            // A device whose alignment is coarser than ours: the page cache then.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                set_direct(file, false);
            }
            res => return res,
        }
    }
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Turns `O_DIRECT` on or off for `file`; false where the file system refuses it.
fn set_direct(file: &File, on: bool) -> bool {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let Ok(bits) = fcntl(file, FcntlArg::F_GETFL) else {
        return false;
    };
    let mut flags = OFlag::from_bits_truncate(bits);
    flags.set(OFlag::O_DIRECT, on);
    fcntl(file, FcntlArg::F_SETFL(flags)).is_ok()
}

/// The direct read behind [`read_exact_at`]: the aligned span around the range, in pieces of at
/// most [`DIRECT_BUFFER`] through this thread's aligned buffer, copied out as it arrives.
fn read_direct(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let end = offset
        .checked_add(len as u64)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut out = Vec::with_capacity(len);
    let mut at = offset - offset % DIRECT_ALIGN as u64;
    with_bounce(|buffer| {
        while (out.len() as u64) < len as u64 {
            let want = (end - at).next_multiple_of(DIRECT_ALIGN as u64);
            let piece = &mut buffer[..want.min(DIRECT_BUFFER as u64) as usize];
            let got = read_some_at(file, piece, at)?;
            if got == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            // Only the part of the piece inside [offset, end) is kept.
            let skip = offset.saturating_sub(at) as usize;
            let keep_end = (end - at).min(got as u64) as usize;
            if keep_end > skip {
                out.extend_from_slice(&piece[skip..keep_end]);
            }
            if got % DIRECT_ALIGN != 0 && (out.len() as u64) < len as u64 {
                // A direct read stops off the alignment only at the file's end: it ends
                // inside the range. A short aligned read is progress; the next read goes on.
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            at += got as u64;
        }
        Ok(())
    })?;
    Ok(out)
}

/// One `pread`, retried on `EINTR`.
fn read_some_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, at) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            res => return res,
        }
    }
}

/// Runs `f` with this thread's [`DIRECT_BUFFER`]-byte buffer aligned to [`DIRECT_ALIGN`]. Each
/// thread keeps its buffer: a fresh 4 MiB allocation per call is a fresh mapping, and the kernel
/// would zero its pages at first touch every time.
fn with_bounce<T>(f: impl FnOnce(&mut [u8]) -> io::Result<T>) -> io::Result<T> {
    thread_local! {
        static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BOUNCE.with_borrow_mut(|backing| {
        if backing.len() < DIRECT_BUFFER + DIRECT_ALIGN {
            *backing = vec![0u8; DIRECT_BUFFER + DIRECT_ALIGN];
        }
        let start = backing.as_ptr().align_offset(DIRECT_ALIGN);
        f(&mut backing[start..start + DIRECT_BUFFER])
    })
}

/// Writes `parts` to `f` (opened with `O_DIRECT`) through the aligned `buffer`.
fn fill_direct(f: &mut File, buffer: &mut [u8], parts: &[&[u8]], sync: bool) -> io::Result<()> {
    let mut filled = 0;
    let mut total = 0u64;
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            let n = rest.len().min(DIRECT_BUFFER - filled);
            buffer[filled..filled + n].copy_from_slice(&rest[..n]);
            filled += n;
            rest = &rest[n..];
            if filled == DIRECT_BUFFER {
                f.write_all(buffer)?;
                total += filled as u64;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        // The last piece is padded to the alignment; the file is cut back to size below.
        let padded = filled.next_multiple_of(DIRECT_ALIGN);
        buffer[filled..padded].fill(0);
        f.write_all(&buffer[..padded])?;
        total += filled as u64;
    }
    f.set_len(total)?;
    if sync {
        f.sync_all()?;
    }
    Ok(())
}

pub struct LocalBackend {
    root: PathBuf,
    tmp: PathBuf,
    /// Serialises the namespace step of put (conflict check, mkdir, rename/link) so that `a`
    /// and `a/b` cannot both pass the conflict check. Data writes and fsyncs run outside it.
    namespace: Mutex<()>,
    seq: AtomicU64,
}

impl LocalBackend {
    /// Opens (creating if needed) a store rooted at `root` and deletes leftover temporary files.
    pub fn open(root: &Path) -> Result<Self> {
        let err = |e| BackendError::io(root.display(), e);
        fs::create_dir_all(root).map_err(err)?;
        let tmp = root.join(TMP_DIR);
        match fs::remove_dir_all(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(err(e)),
            _ => {}
        }
        fs::create_dir(&tmp).map_err(err)?;
        sync_dir(root).map_err(err)?;
        Ok(LocalBackend {
            root: root.to_path_buf(),
            tmp,
            namespace: Mutex::new(()),
            seq: AtomicU64::new(0),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// Writes `data` to a new, fsynced temporary file and returns its path.
    fn write_temp(&self, key: &Key, data: &[u8]) -> Result<PathBuf> {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let path = self.tmp.join(format!("{}-{n}", std::process::id()));
        let write = || -> io::Result<()> {
            if data.len() >= DIRECT_MIN && write_direct(&path, &[data], true)? {
                return Ok(());
            }
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?;
            f.write_all(data)?;
            f.sync_all()
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&path);
            map_io(key, e)
        })?;
        Ok(path)
    }

    /// Finds an existing object that conflicts with `key`. An empty directory tree at `key`
    /// (left by deletes, which do not prune) is not a conflict and is removed.
    fn check_conflict(&self, key: &Key) -> Result<()> {
        let conflict = |existing: String| BackendError::KeyConflict {
            key: key.clone(),
            existing,
        };
        for a in key.ancestors() {
            match fs::metadata(self.path(a)) {
                Ok(m) if !m.is_dir() => return Err(conflict(a.to_string())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(map_io(key, e)),
            }
        }
        let target = self.path(key.as_str());
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => match first_file(&target).map_err(|e| map_io(key, e))? {
                Some(f) => {
                    let rel = f.strip_prefix(&self.root).unwrap_or(&f);
                    Err(conflict(rel.display().to_string()))
                }
                None => fs::remove_dir_all(&target).map_err(|e| map_io(key, e)),
            },
            _ => Ok(()),
        }
    }

    /// Creates the key's parent directories, fsyncing the parent of each one created so the new
    /// entry is durable before the object is linked into it.
    fn make_parents(&self, key: &Key) -> Result<()> {
        for a in key.ancestors() {
            let dir = self.path(a);
            match fs::create_dir(&dir) {
                Ok(()) => sync_dir(dir.parent().unwrap_or(&self.root)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(|e| map_io(key, e))?;
        }
        Ok(())
    }

    fn commit(&self, key: &Key, temp: &Path, mode: PutMode) -> Result<()> {
        let target = self.path(key.as_str());
        {
            let _ns = lock(&self.namespace);
            self.check_conflict(key)?;
            self.make_parents(key)?;
            match mode {
                PutMode::Overwrite => fs::rename(temp, &target).map_err(|e| map_io(key, e))?,
                PutMode::Create => match fs::hard_link(temp, &target) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(BackendError::AlreadyExists(key.clone()));
                    }
                    Err(e) => return Err(map_io(key, e)),
                },
            }
        }
        // Without this the new directory entry may be lost on power loss after we return Ok.
        sync_dir(target.parent().unwrap_or(&self.root)).map_err(|e| map_io(key, e))
    }

    fn open_object(&self, key: &Key) -> Result<(File, u64)> {
        let not_found = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            )
        };
        let f = File::open(self.path(key.as_str())).map_err(|e| {
            if not_found(&e) {
                BackendError::NotFound(key.clone())
            } else {
                map_io(key, e)
            }
        })?;
        let meta = f.metadata().map_err(|e| map_io(key, e))?;
        // A directory at the key's path (from `key/...` objects) is not an object.
        if !meta.is_file() {
            return Err(BackendError::NotFound(key.clone()));
        }
        Ok((f, meta.len()))
    }

    fn walk(&self, dir: &Path, rel: &str, prefix: &str, out: &mut Vec<ObjectMeta>) -> Result<()> {
        let err = |e| BackendError::io(dir.display(), e);
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()), // deleted meanwhile
            Err(e) => return Err(err(e)),
        };
        for entry in entries {
            let entry = entry.map_err(err)?;
            let name = entry.file_name();
            // Skips `.tmp` and anything else that cannot be a key segment.
            let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
                continue;
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let ft = entry.file_type().map_err(err)?;
            if ft.is_dir() {
                let inside = format!("{path}/");
                if inside.starts_with(prefix) || prefix.starts_with(&inside) {
                    self.walk(&entry.path(), &path, prefix, out)?;
                }
            } else if ft.is_file() && path.starts_with(prefix) {
                let Ok(key) = Key::new(path) else { continue };
                match entry.metadata() {
                    Ok(m) => out.push(ObjectMeta { key, size: m.len() }),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(err(e)),
                }
            }
        }
        Ok(())
    }
}

impl Backend for LocalBackend {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        let temp = self.write_temp(key, data)?;
        let res = self.commit(key, &temp, mode);
        // After a successful rename the temp name is gone; otherwise it is garbage now.
        if res.is_err() || mode == PutMode::Create {
            let _ = fs::remove_file(&temp);
        }
        res
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        let (mut f, size) = self.open_object(key)?;
        let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        f.read_to_end(&mut buf).map_err(|e| map_io(key, e))?;
        Ok(buf)
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        let (f, size) = self.open_object(key)?;
        check_range(key, &range, size)?;
        let len = usize::try_from(range.end - range.start)
            .map_err(|_| map_io(key, io::Error::from(io::ErrorKind::OutOfMemory)))?;
        // Objects are never modified in place (puts replace the file), so the size holds.
        read_exact_at(&f, range.start, len).map_err(|e| map_io(key, e))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        self.walk(&self.root, "", prefix, &mut out)?;
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &Key) -> Result<()> {
        let target = self.path(key.as_str());
        match fs::remove_file(&target) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::NotADirectory
                        | io::ErrorKind::IsADirectory
                ) =>
            {
                return Ok(());
            }
            Err(e) => return Err(map_io(key, e)),
        }
        // Empty parent directories are left in place: put treats them as free, and pruning
        // them would race with a concurrent put creating its parents.
        sync_dir(target.parent().unwrap_or(&self.root)).map_err(|e| map_io(key, e))
    }

    fn describe(&self) -> String {
        format!("local:{}", self.root.display())
    }
}

/// Maps an I/O error on `key`, recognising a full medium (ENOSPC = 28, EDQUOT = 122 on Linux).
pub(crate) fn map_io(key: &Key, e: io::Error) -> BackendError {
    let full = matches!(e.raw_os_error(), Some(28 | 122))
        || matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        );
    if full {
        BackendError::NoSpace(key.clone())
    } else {
        BackendError::io(key, e)
    }
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Any regular file (or other non-directory) under `dir`, depth first.
fn first_file(dir: &Path) -> io::Result<Option<PathBuf>> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            return Ok(Some(entry.path()));
        }
        if let Some(f) = first_file(&entry.path())? {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn key(s: &str) -> Key {
        Key::new(s).unwrap()
    }

    /// Large puts go around the page cache and give back exactly the bytes put, at sizes
    /// around the buffer and the alignment, on ext4 and on tmpfs (which accepts `O_DIRECT`
    /// since Linux 6.6). The page-cache fallback for a file system that refuses `O_DIRECT` is
    /// the small-put path every other test here runs; no file system on the test machines
    /// refuses it, so the switch itself is not exercised.
    /// The write-back cache writes a header and the object as two parts: parts of any size
    /// are laid end to end, across the bounce buffer's boundary.
    #[test]
    fn direct_writes_lay_parts_end_to_end() {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        let disk = tempfile::tempdir_in(&target).unwrap();
        let head = vec![7u8; 61];
        let body: Vec<u8> = (0..2 * DIRECT_BUFFER + 13).map(|j| (j / 7) as u8).collect();
        let tail = vec![9u8; DIRECT_BUFFER - 5];
        let path = disk.path().join("entry");
        assert!(write_direct(&path, &[&head, &body, &[], &tail], true).unwrap());
        let expected = [head, body, tail].concat();
        assert!(fs::read(&path).unwrap() == expected);
    }

    fn is_direct(file: &File) -> bool {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        OFlag::from_bits_truncate(fcntl(file, FcntlArg::F_GETFL).unwrap()).contains(OFlag::O_DIRECT)
    }

    /// A file on the checkout's disk (which takes `O_DIRECT`) of a little over two bounce
    /// buffers, with an unaligned length, for the range-read tests.
    fn direct_read_fixture() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        let dir = tempfile::tempdir_in(&target).unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..2 * DIRECT_BUFFER + 3 * DIRECT_ALIGN + 123)
            .map(|j| (j * 131 + j / 4093) as u8)
            .collect();
        fs::write(&path, &data).unwrap();
        (dir, path, data)
    }

    #[test]
    fn range_reads_are_direct_and_exact_at_every_edge() {
        let (_dir, path, data) = direct_read_fixture();
        let n = data.len();
        let f = File::open(&path).unwrap();
        assert!(set_direct(&f, true), "O_DIRECT on disk");
        let ranges = [
            (0, DIRECT_READ_MIN),
            (1, DIRECT_READ_MIN),
            (DIRECT_ALIGN - 1, DIRECT_READ_MIN + 2),
            (5, DIRECT_READ_MIN - 1),
            (DIRECT_BUFFER - 3, DIRECT_READ_MIN),
            (7, DIRECT_BUFFER),
            (DIRECT_ALIGN, 2 * DIRECT_BUFFER),
            (0, n),
            (n - DIRECT_READ_MIN, DIRECT_READ_MIN),
            (n - DIRECT_READ_MIN - 77, DIRECT_READ_MIN + 77),
        ];
        for (offset, len) in ranges {
            let f = File::open(&path).unwrap();
            let got = read_exact_at(&f, offset as u64, len).unwrap();
            assert!(got == data[offset..offset + len], "{len} bytes at {offset}");
            // Read directly (no fallback to the page cache) exactly from the threshold on.
            assert_eq!(
                is_direct(&f),
                len >= DIRECT_READ_MIN,
                "{len} bytes at {offset}"
            );
        }
        for (offset, len) in [
            (n - DIRECT_READ_MIN + 1, DIRECT_READ_MIN),
            (n + 5, DIRECT_READ_MIN),
        ] {
            let f = File::open(&path).unwrap();
            let err = read_exact_at(&f, offset as u64, len).unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::UnexpectedEof,
                "{len} at {offset}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn range_reads_match_the_file(offset in 0usize..2 * DIRECT_BUFFER, len in 1usize..DIRECT_BUFFER + 9000) {
            thread_local! {
                static FIXTURE: (tempfile::TempDir, PathBuf, Vec<u8>) = direct_read_fixture();
            }
            FIXTURE.with(|(_, path, data)| {
                let f = File::open(path).unwrap();
                let res = read_exact_at(&f, offset as u64, len);
                match data.get(offset..offset + len) {
                    Some(want) => proptest::prop_assert!(res.unwrap() == want),
                    None => proptest::prop_assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof),
                }
                Ok(())
            })?;
        }
    }

    #[test]
    fn large_puts_read_back_exactly_with_and_without_direct_io() {
        // The build directory is on the checkout's disk; /dev/shm is tmpfs.
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        let disk = tempfile::tempdir_in(&target).unwrap();
        let shm = tempfile::tempdir_in("/dev/shm").expect("/dev/shm (tmpfs)");
        let probe = vec![1u8; DIRECT_MIN];
        assert!(
            write_direct(&disk.path().join("probe"), &[&probe], true).unwrap(),
            "O_DIRECT on disk"
        );
        let sizes = [
            DIRECT_MIN,
            DIRECT_MIN + 1,
            DIRECT_BUFFER - 1,
            DIRECT_BUFFER,
            2 * DIRECT_BUFFER + DIRECT_ALIGN + 7,
        ];
        for root in [disk.path(), shm.path()] {
            let b = LocalBackend::open(root).unwrap();
            for (i, &n) in sizes.iter().enumerate() {
                let data: Vec<u8> = (0..n).map(|j| (j * 31 + i * 7 + j / 4099) as u8).collect();
                let k = key(&format!("packs/{i}.pack"));
                b.put(&k, &data, PutMode::Create).unwrap();
                assert!(
                    b.get(&k).unwrap() == data,
                    "{} bytes in {}",
                    n,
                    root.display()
                );
                assert_eq!(
                    b.get_range(&k, n as u64 - 5..n as u64).unwrap(),
                    &data[n - 5..]
                );
                assert!(matches!(
                    b.put(&k, &data, PutMode::Create),
                    Err(BackendError::AlreadyExists(_))
                ));
            }
            assert!(fs::read_dir(root.join(TMP_DIR)).unwrap().next().is_none());
        }
    }

    #[test]
    fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        let n = AtomicUsize::new(0);
        crate::conformance::run_all(&|| {
            let root = dir
                .path()
                .join(n.fetch_add(1, Ordering::Relaxed).to_string());
            Box::new(LocalBackend::open(&root).unwrap())
        });
    }

    #[test]
    fn leftover_temp_files_are_cleaned_on_open_and_never_listed() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::open(dir.path()).unwrap();
        b.put(&key("a/b"), b"x", PutMode::Create).unwrap();
        // A put that "crashed" after writing its temp file.
        let stray = dir.path().join(".tmp/999-0");
        fs::write(&stray, b"half").unwrap();
        fs::write(dir.path().join("a/.hidden"), b"junk").unwrap();
        assert_eq!(b.list("").unwrap().len(), 1);
        drop(b);
        let b = LocalBackend::open(dir.path()).unwrap();
        assert!(!stray.exists());
        assert_eq!(fs::read_dir(dir.path().join(".tmp")).unwrap().count(), 0);
        let keys: Vec<_> = b.list("").unwrap().into_iter().map(|m| m.key).collect();
        assert_eq!(keys, [key("a/b")]);
    }

    #[test]
    fn no_temp_files_left_after_puts() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::open(dir.path()).unwrap();
        b.put(&key("x"), b"1", PutMode::Create).unwrap();
        b.put(&key("x"), b"2", PutMode::Overwrite).unwrap();
        assert!(b.put(&key("x"), b"3", PutMode::Create).is_err());
        assert!(b.put(&key("x/y"), b"3", PutMode::Create).is_err());
        assert_eq!(fs::read_dir(dir.path().join(".tmp")).unwrap().count(), 0);
        assert_eq!(fs::read(dir.path().join("x")).unwrap(), b"2");
    }

    #[test]
    fn empty_directories_left_by_delete_do_not_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::open(dir.path()).unwrap();
        b.put(&key("a/b/c"), b"1", PutMode::Create).unwrap();
        b.delete(&key("a/b/c")).unwrap();
        assert!(matches!(b.get(&key("a/b")), Err(BackendError::NotFound(_))));
        b.delete(&key("a/b")).unwrap(); // a directory is not an object: nothing to delete
        b.put(&key("a"), b"2", PutMode::Create).unwrap();
        assert_eq!(b.get(&key("a")).unwrap(), b"2");
    }

    #[test]
    fn full_medium_maps_to_no_space() {
        let k = key("k");
        for code in [28, 122] {
            let e = map_io(&k, io::Error::from_raw_os_error(code));
            assert!(matches!(e, BackendError::NoSpace(_)), "{code}: {e}");
        }
        let e = map_io(&k, io::Error::from_raw_os_error(5)); // EIO
        assert!(matches!(e, BackendError::Io { .. }));
    }
}
