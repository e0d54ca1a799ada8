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
    // Each thread keeps its bounce buffer: a fresh 4 MiB allocation per pack is a fresh
    // mapping, and the kernel zeroed its pages at first touch on every put.
    thread_local! {
        static BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BOUNCE.with_borrow_mut(|backing| {
        if backing.len() < DIRECT_BUFFER + DIRECT_ALIGN {
            *backing = vec![0u8; DIRECT_BUFFER + DIRECT_ALIGN];
        }
        let start = backing.as_ptr().align_offset(DIRECT_ALIGN);
        fill_direct(
            &mut f,
            &mut backing[start..start + DIRECT_BUFFER],
            parts,
            sync,
        )
    })?;
    Ok(true)
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
        let mut buf = vec![0; len];
        // Objects are never modified in place (puts replace the file), so the size holds.
        f.read_exact_at(&mut buf, range.start)
            .map_err(|e| map_io(key, e))?;
        Ok(buf)
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
