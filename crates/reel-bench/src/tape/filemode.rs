//! The `file` target: the same records written with one write(2) per record to a plain file
//! or to a tape device such as `/dev/nst0`, so the workload can run through a kernel's own
//! initiator and `st` driver (or against a disk, as a reference).
//!
//! On a tape device every write(2) is one variable-length record (after `mt setblk 0`) and
//! every read(2) returns one record; closing the device after writing writes the filemark
//! (st, Documentation/scsi/st.rst), and `mt rewind` rewinds a non-rewinding device. Neither
//! intermediate filemarks nor a queue depth exist on this path: `st` issues one command at a
//! time, which is part of what this mode shows.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::tape::args::Workload;
use crate::tape::pipeline::{Aborted, DrivePhase, RecordStream, Shared};

/// A character device (a tape such as /dev/nst0), as opposed to a plain file.
pub(crate) fn is_tape_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// `mt -f PATH ARGS…` for a tape device (nothing for a plain file).
fn mt(path: &Path, args: &[&str]) -> anyhow::Result<()> {
    if !is_tape_device(path) {
        return Ok(());
    }
    let out = Command::new("mt")
        .arg("-f")
        .arg(path)
        .args(args)
        .output()
        .context("running mt (Debian package mt-st or cpio)")?;
    if !out.status.success() {
        bail!(
            "mt -f {} {}: {}",
            path.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Before writing: a tape device rewound and in variable block mode.
pub fn prepare(path: &Path) -> anyhow::Result<()> {
    mt(path, &["rewind"])?;
    mt(path, &["setblk", "0"])
}

pub fn rewind(path: &Path) -> anyhow::Result<()> {
    mt(path, &["rewind"])
}

/// Writes drive `drive`'s stream to `path`, one write(2) per record, then closes it (a tape
/// device writes its filemark there; a file is synced first).
pub fn write(
    path: &Path,
    workload: &Workload,
    drive: usize,
    shared: &Arc<Shared>,
) -> anyhow::Result<DrivePhase> {
    let device = is_tape_device(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create(!device)
        .truncate(!device)
        .open(path)
        .with_context(|| format!("opening {} for writing", path.display()))?;
    let mut stream = RecordStream::new(workload.generator(drive))?;
    let started = Instant::now();
    let (mut bytes, mut records) = (0u64, 0u64);
    while let Some(record) = stream.next_record(workload.record_size as usize) {
        if shared.abort.load(Ordering::Relaxed) || crate::harness::interrupted() {
            return Err(Aborted.into());
        }
        let n = file.write(&record).with_context(|| {
            format!(
                "{}: write of record {records} ({} bytes at byte {bytes})",
                path.display(),
                record.len()
            )
        })?;
        if n != record.len() {
            bail!(
                "{}: record {records}: wrote {n} of {} bytes (a tape device must take a record whole)",
                path.display(),
                record.len()
            );
        }
        bytes += n as u64;
        records += 1;
        shared.progress[drive].store(bytes, Ordering::Relaxed);
    }
    let data_end = Instant::now();
    if !device {
        file.sync_all()
            .with_context(|| format!("{}: fsync", path.display()))?;
    }
    drop(file);
    Ok(DrivePhase {
        bytes,
        records,
        filemarks: u64::from(device),
        started,
        data_end,
        finished: Instant::now(),
    })
}

/// Reads `path` back record by record and compares every byte with the regenerated stream.
pub fn read(
    path: &Path,
    workload: &Workload,
    drive: usize,
    shared: &Arc<Shared>,
) -> anyhow::Result<DrivePhase> {
    let device = is_tape_device(path);
    let mut file =
        File::open(path).with_context(|| format!("opening {} for reading", path.display()))?;
    let mut stream = RecordStream::new(workload.generator(drive))?;
    let size = workload.record_size as usize;
    // One byte more than a record, so a record longer than expected shows.
    let mut buf = vec![0u8; size + 1];
    let started = Instant::now();
    let (mut bytes, mut records) = (0u64, 0u64);
    while let Some(expected) = stream.next_record(size) {
        if shared.abort.load(Ordering::Relaxed) || crate::harness::interrupted() {
            return Err(Aborted.into());
        }
        let got = if device {
            file.read(&mut buf)
        } else {
            file.read_exact(&mut buf[..expected.len()])
                .map(|()| expected.len())
        }
        .with_context(|| format!("{}: reading record {records}", path.display()))?;
        if got != expected.len() {
            bail!(
                "{}: record {records} at byte {bytes} is {got} bytes, expected {}",
                path.display(),
                expected.len()
            );
        }
        if buf[..got] != expected[..] {
            bail!(
                "{}: record {records} at byte {bytes} differs from what was written",
                path.display()
            );
        }
        bytes += got as u64;
        records += 1;
        shared.progress[drive].store(bytes, Ordering::Relaxed);
    }
    let data_end = Instant::now();
    // After the last record: the filemark on a tape (a read of 0 bytes), the end of a file.
    let after = file
        .read(&mut buf)
        .with_context(|| format!("{}: reading past the last record", path.display()))?;
    if after != 0 {
        bail!(
            "{}: {after} more bytes after the {records} records written",
            path.display()
        );
    }
    Ok(DrivePhase {
        bytes,
        records,
        filemarks: u64::from(device),
        started,
        data_end,
        finished: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(size: u64, record_size: u32) -> Workload {
        Workload {
            size,
            record_size,
            queue_depth: 1,
            filemark_every: None,
            filemark_immed: false,
            same_data: false,
            randomness: 0.25,
            redundancy: 4,
            incompressible_share: 0.0,
            block_size: 64 << 10,
            window_blocks: 64,
            seed: 3,
            source_rate: None,
        }
    }

    #[test]
    fn a_file_round_trips_and_a_changed_byte_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drive1.tape");
        let w = workload(3 << 20, 100_000);
        let shared = Shared::new(1);
        let wrote = write(&path, &w, 0, &shared).unwrap();
        assert_eq!(wrote.bytes, 3 << 20);
        assert_eq!(wrote.records, (3u64 << 20).div_ceil(100_000));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 << 20);
        let read_back = read(&path, &w, 0, &shared).unwrap();
        assert_eq!(read_back.bytes, 3 << 20);

        // The other drive's stream (seed + 1) is different data.
        assert!(read(&path, &w, 1, &shared).is_err());
        let mut data = std::fs::read(&path).unwrap();
        data[2_000_000] ^= 1;
        std::fs::write(&path, &data).unwrap();
        let err = format!("{:#}", read(&path, &w, 0, &shared).unwrap_err());
        assert!(err.contains("record 20 "), "{err}");
        // A longer file: bytes after the last record.
        data[2_000_000] ^= 1;
        data.push(0);
        std::fs::write(&path, &data).unwrap();
        let err = format!("{:#}", read(&path, &w, 0, &shared).unwrap_err());
        assert!(err.contains("more bytes after"), "{err}");
    }

    #[test]
    fn an_abort_stops_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::new(1);
        shared.abort.store(true, Ordering::Relaxed);
        let err = write(&dir.path().join("x"), &workload(1 << 20, 4096), 0, &shared).unwrap_err();
        assert!(err.downcast_ref::<Aborted>().is_some());
    }
}
