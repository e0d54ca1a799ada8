//! Bytes a directory tree takes on disk, counted the way `du` counts them (allocated blocks of
//! every file and directory, symbolic links not followed), so that the reduction reel reports
//! "on disk" is the one a user sees with `du -s DATA`.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Allocated bytes of `dir` and everything under it. Entries that vanish while the tree is
/// walked (a pack replaced by reclaim, a temporary file renamed) are skipped.
pub fn bytes_on_disk(dir: &Path) -> io::Result<u64> {
    let meta = std::fs::symlink_metadata(dir)?;
    let mut total = allocated(&meta);
    if !meta.is_dir() {
        return Ok(total);
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            total += allocated(&meta);
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(total)
}

/// `st_blocks` is in 512-byte units whatever the file system's block size (stat(2)).
fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.blocks() * 512
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same figure as coreutils' `du --block-size=1 -s`.
    #[test]
    fn counts_like_du() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/small"), b"x").unwrap();
        std::fs::write(dir.path().join("a/b/big"), vec![7u8; 300_000]).unwrap();
        // A sparse file: its length is not what it takes.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(50_000_000).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();

        let ours = bytes_on_disk(dir.path()).unwrap();
        let du = std::process::Command::new("du")
            .args(["--block-size=1", "-s"])
            .arg(dir.path())
            .output()
            .expect("coreutils du");
        let du: u64 = String::from_utf8_lossy(&du.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(ours, du);
        assert!((300_000..50_000_000).contains(&ours), "{ours}");
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(bytes_on_disk(&dir.path().join("nope")).is_err());
    }
}
