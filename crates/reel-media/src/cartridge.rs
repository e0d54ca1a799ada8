//! The tape cartridge model: SSC sequential-access semantics over
//! [`PartitionStore`]s.
//!
//! # Capacity accounting
//! A partition's used space is the sum of its record lengths (host bytes,
//! before compression, [`PartitionStore::data_bytes`]); filemarks occupy no
//! space. A write that would take used space past the partition capacity
//! fails with [`MediaError::EndOfMedium`] (VOLUME OVERFLOW); a successful write
//! that leaves used space at or beyond `capacity * early_warning_percent /
//! 100` reports [`WriteOutcome::early_warning`] (SSC-4 §4.2.5 early warning).

use crate::error::{LayoutError, MediaError};
use crate::info::{CartridgeInfo, Counters};
use crate::mam::{AttributeFormat, DeviceAttributeValues, Mam, MamAttribute};
use crate::media_type::{Barcode, MediaType};
use crate::position::{Position, ReadOutcome, SpaceOutcome, WriteOutcome};
use crate::store::{ObjectKind, PartitionStore, RecordBuf, Unsynced};
use crate::time::UnixTime;

/// Largest record (logical block) accepted: 8 MiB, the LTO maximum block
/// length reported by READ BLOCK LIMITS (SSC-4 §7.8).
pub const MAX_RECORD_LEN: u32 = 8 * 1024 * 1024;

/// What a drive may add to a record when it encrypts it (key-associated data, nonce,
/// authentication tag): an encrypted record's sealed form is at most
/// `MAX_RECORD_LEN + MAX_SEALING_OVERHEAD` bytes.
pub const MAX_SEALING_OVERHEAD: u32 = 4096;

/// Most filemarks one [`Cartridge::write_filemarks`] may write: the 24-bit
/// count field of WRITE FILEMARKS(6) (SSC-4 §7.11).
pub const MAX_FILEMARKS_PER_WRITE: u32 = 0x00FF_FFFF;

type Res<T, S> = Result<T, MediaError<<S as PartitionStore>::Error>>;

/// A tape cartridge: persistent state ([`CartridgeInfo`]), one
/// [`PartitionStore`] per partition, and the volatile load/position state.
#[derive(Debug)]
pub struct Cartridge<S: PartitionStore> {
    info: CartridgeInfo,
    partitions: Vec<S>,
    loaded: bool,
    partition: u8,
    object: u64,
    now: UnixTime,
}

fn inconsistent<E>(what: &'static str) -> MediaError<E> {
    MediaError::Inconsistent(what)
}

/// `a - b` for non-negative magnitudes, with the sign of the request.
fn signed_residue(forward: bool, remaining: u64) -> i64 {
    let r = i64::try_from(remaining).unwrap_or(i64::MAX);
    if forward {
        r
    } else {
        // remaining ≤ 2^63 (it is at most |i64::MIN|), so -r saturates correctly.
        if remaining > i64::MAX as u64 {
            i64::MIN
        } else {
            -r
        }
    }
}

/// What [`Cartridge::write_object`] appends: a record the caller lends, one it shares (the store
/// may keep it without a copy), or the drive's sealed form of an encrypted record.
#[derive(Clone, Copy)]
enum Payload<'a> {
    Lent(&'a [u8]),
    Shared(&'a bytes::Bytes),
    Sealed(&'a [u8]),
}

impl<S: PartitionStore> Cartridge<S> {
    /// Assemble a cartridge from its persistent state and one store per
    /// partition. The cartridge starts unloaded.
    pub fn new(info: CartridgeInfo, partitions: Vec<S>) -> Res<Self, S> {
        info.validate()?;
        if partitions.len() != info.partition_capacities.len() {
            return Err(LayoutError::StoreCount {
                expected: info.partition_capacities.len(),
                got: partitions.len(),
            }
            .into());
        }
        Ok(Cartridge {
            info,
            partitions,
            loaded: false,
            partition: 0,
            object: 0,
            now: UnixTime::default(),
        })
    }

    /// Take the cartridge apart (e.g. to persist the info and stores).
    pub fn into_parts(self) -> (CartridgeInfo, Vec<S>) {
        (self.info, self.partitions)
    }

    /// Persistent state (encode with [`CartridgeInfo::to_bytes`]).
    pub fn info(&self) -> &CartridgeInfo {
        &self.info
    }
    /// The partition stores.
    pub fn partitions(&self) -> &[S] {
        &self.partitions
    }
    /// Barcode.
    pub fn barcode(&self) -> &Barcode {
        &self.info.barcode
    }
    /// Media type.
    pub fn media_type(&self) -> MediaType {
        self.info.media_type
    }
    /// WORM media.
    pub fn is_worm(&self) -> bool {
        self.info.is_worm()
    }
    /// Write-protect tab.
    pub fn is_write_protected(&self) -> bool {
        self.info.write_protected
    }
    /// Move the write-protect tab (allowed at any time).
    pub fn set_write_protected(&mut self, wp: bool) {
        self.info.write_protected = wp;
    }
    /// Usage counters.
    pub fn counters(&self) -> Counters {
        self.info.counters
    }
    /// Times loaded.
    pub fn load_count(&self) -> u64 {
        self.info.load_count
    }
    /// Whether loaded (ready).
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }
    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }
    /// Cartridge memory.
    pub fn mam(&self) -> &Mam {
        &self.info.mam
    }

    /// Set the time used to stamp writes (the crate has no clock).
    pub fn set_time(&mut self, now: UnixTime) {
        self.now = now;
    }

    fn check_partition(&self, partition: u8) -> Res<usize, S> {
        let p = usize::from(partition);
        if p < self.partitions.len() {
            Ok(p)
        } else {
            Err(MediaError::InvalidPartition {
                partition,
                count: self.partitions.len(),
            })
        }
    }

    /// Capacity of a partition in bytes.
    pub fn partition_capacity(&self, partition: u8) -> Res<u64, S> {
        let p = self.check_partition(partition)?;
        Ok(self.info.partition_capacities[p])
    }

    /// Bytes used in a partition.
    pub fn used_bytes(&self, partition: u8) -> Res<u64, S> {
        let p = self.check_partition(partition)?;
        Ok(self.partitions[p].data_bytes())
    }

    /// Bytes still writable in a partition.
    pub fn remaining_capacity(&self, partition: u8) -> Res<u64, S> {
        let p = self.check_partition(partition)?;
        Ok(self.info.partition_capacities[p].saturating_sub(self.partitions[p].data_bytes()))
    }

    /// Used-byte level at which early warning starts in a partition.
    pub fn early_warning_threshold(&self, partition: u8) -> Res<u64, S> {
        let p = self.check_partition(partition)?;
        Ok(self.ew_threshold(p))
    }

    fn ew_threshold(&self, p: usize) -> u64 {
        let cap = u128::from(self.info.partition_capacities[p]);
        // ≤ cap, so it fits in u64.
        (cap * u128::from(self.info.early_warning_percent) / 100) as u64
    }

    fn cur(&self) -> &S {
        &self.partitions[usize::from(self.partition)]
    }

    fn cur_mut(&mut self) -> &mut S {
        &mut self.partitions[usize::from(self.partition)]
    }

    fn require_loaded(&self) -> Res<(), S> {
        if self.loaded {
            Ok(())
        } else {
            Err(MediaError::NotLoaded)
        }
    }

    fn eod(&self) -> u64 {
        self.cur().object_count()
    }

    fn beyond_ew(&self) -> bool {
        let p = usize::from(self.partition);
        self.object == self.eod() && self.partitions[p].data_bytes() >= self.ew_threshold(p)
    }

    /// Write protection and WORM append-only checks.
    fn check_writable(&self) -> Res<(), S> {
        if self.info.write_protected {
            return Err(MediaError::WriteProtected);
        }
        if self.info.is_worm() && self.object != self.eod() {
            return Err(MediaError::WormOverwrite);
        }
        Ok(())
    }

    /// Writing anywhere but EOD discards everything after the position
    /// (SSC-4 §4.2.4: a write makes the new object the last one).
    fn truncate_here(&mut self) -> Res<(), S> {
        if self.object < self.eod() {
            let n = self.object;
            self.cur_mut().truncate(n).map_err(MediaError::Store)?;
        }
        Ok(())
    }

    fn sync_all(&mut self) -> Res<(), S> {
        for p in &mut self.partitions {
            p.sync().map_err(MediaError::Store)?;
        }
        Ok(())
    }

    /// LOAD (SSC-4 §7.3): make the cartridge ready at BOP of partition 0.
    /// Increments the load count and resets the "this load" counters. Loading
    /// an already loaded cartridge only rewinds.
    pub fn load(&mut self, now: UnixTime) -> Res<(), S> {
        self.now = now;
        if self.loaded {
            return self.rewind();
        }
        self.loaded = true;
        self.partition = 0;
        self.object = 0;
        let c = &mut self.info.counters;
        self.info.load_count = self.info.load_count.saturating_add(1);
        c.bytes_read_load = 0;
        c.bytes_written_load = 0;
        Ok(())
    }

    /// UNLOAD (SSC-4 §7.3): sync all partitions and become not ready. A no-op
    /// when not loaded.
    pub fn unload(&mut self) -> Res<(), S> {
        if !self.loaded {
            return Ok(());
        }
        self.sync_all()?;
        self.loaded = false;
        self.partition = 0;
        self.object = 0;
        Ok(())
    }

    /// Synchronise: make all written data durable (the effect of WRITE
    /// FILEMARKS with IMMED=0 or a zero count, SSC-4 §7.11).
    pub fn sync(&mut self) -> Res<(), S> {
        self.require_loaded()?;
        self.sync_all()
    }

    /// What is written but not durable yet, over all partitions (the object buffer of
    /// READ POSITION, SSC-4 §7.7).
    pub fn unsynced(&self) -> Unsynced {
        self.partitions
            .iter()
            .fold(Unsynced::default(), |sum, p| sum + p.unsynced())
    }

    /// The current logical position (READ POSITION, SSC-4 §7.7).
    pub fn position(&self) -> Res<Position, S> {
        self.require_loaded()?;
        let store = self.cur();
        let object = self.object;
        let file = store.filemarks_before(object).map_err(MediaError::Store)?;
        let block_in_file = if file == 0 {
            object
        } else {
            let fm = store
                .filemark_position(file - 1)
                .map_err(MediaError::Store)?
                .filter(|&fm| fm < object)
                .ok_or_else(|| inconsistent("filemark index"))?;
            object - fm - 1
        };
        Ok(Position {
            partition: self.partition,
            object,
            file,
            block_in_file,
            at_bop: object == 0,
            at_eod: object == store.object_count(),
            beyond_early_warning: self.beyond_ew(),
        })
    }

    /// WRITE one variable-length record at the current position (SSC-4
    /// §6.8). Data after the position is discarded first. An empty `data` is
    /// a no-op (SSC: transfer length 0 is not an error and does not move).
    ///
    /// Errors, checked in this order: [`MediaError::NotLoaded`],
    /// [`MediaError::WriteProtected`], [`MediaError::WormOverwrite`] (WORM
    /// and not at EOD), [`MediaError::RecordTooLarge`],
    /// [`MediaError::EndOfMedium`] (after truncation; nothing is written).
    pub fn write_record(&mut self, data: &[u8]) -> Res<WriteOutcome, S> {
        self.write_object(Payload::Lent(data))
    }

    /// [`Cartridge::write_record`] of bytes the caller shares (a Data-Out buffer): the store
    /// may keep them without a copy.
    pub fn write_record_shared(&mut self, data: bytes::Bytes) -> Res<WriteOutcome, S> {
        self.write_object(Payload::Shared(&data))
    }

    /// WRITE of a record the drive encrypted: `sealed` is the drive's sealed form, kept as it
    /// is and read back as [`ReadOutcome::Encrypted`]. The same rules as
    /// [`Cartridge::write_record`], with room for [`MAX_SEALING_OVERHEAD`]; capacity and the
    /// write counters count the sealed bytes.
    pub fn write_encrypted_record(&mut self, sealed: &[u8]) -> Res<WriteOutcome, S> {
        self.write_object(Payload::Sealed(sealed))
    }

    fn write_object(&mut self, payload: Payload<'_>) -> Res<WriteOutcome, S> {
        let (data, encrypted) = match payload {
            Payload::Lent(data) => (data, false),
            Payload::Shared(bytes) => (&bytes[..], false),
            Payload::Sealed(sealed) => (sealed, true),
        };
        self.require_loaded()?;
        if data.is_empty() {
            return Ok(WriteOutcome {
                early_warning: self.beyond_ew(),
                synced: false,
            });
        }
        self.check_writable()?;
        let max = if encrypted {
            MAX_RECORD_LEN + MAX_SEALING_OVERHEAD
        } else {
            MAX_RECORD_LEN
        };
        let len = u32::try_from(data.len()).ok().filter(|&l| l <= max).ok_or(
            MediaError::RecordTooLarge {
                len: data.len(),
                max,
            },
        )?;
        self.truncate_here()?;
        let p = usize::from(self.partition);
        let cap = self.info.partition_capacities[p];
        let used = self.partitions[p].data_bytes();
        let available = cap.saturating_sub(used);
        if u64::from(len) > available {
            return Err(MediaError::EndOfMedium {
                needed: u64::from(len),
                available,
            });
        }
        let store = &mut self.partitions[p];
        match payload {
            Payload::Lent(data) => store.append_record(data),
            Payload::Shared(bytes) => store.append_record_shared(bytes.clone()),
            Payload::Sealed(sealed) => store.append_encrypted_record(sealed),
        }
        .map_err(MediaError::Store)?;
        self.object += 1;
        let c = &mut self.info.counters;
        c.bytes_written_total = c.bytes_written_total.saturating_add(u64::from(len));
        c.bytes_written_load = c.bytes_written_load.saturating_add(u64::from(len));
        c.records_written = c.records_written.saturating_add(1);
        self.info.last_written = Some(self.now);
        Ok(WriteOutcome {
            early_warning: self.beyond_ew(),
            synced: false,
        })
    }

    /// WRITE FILEMARKS (SSC-4 §7.11). A count of 0 writes nothing and only
    /// synchronises (returns `synced: true`); it is allowed anywhere, even on
    /// write-protected or WORM media. Otherwise the same rules as
    /// [`Cartridge::write_record`] apply; filemarks take no capacity, so they
    /// never hit end of medium.
    pub fn write_filemarks(&mut self, count: u32) -> Res<WriteOutcome, S> {
        self.require_loaded()?;
        if count == 0 {
            self.sync_all()?;
            return Ok(WriteOutcome {
                early_warning: self.beyond_ew(),
                synced: true,
            });
        }
        self.check_writable()?;
        if count > MAX_FILEMARKS_PER_WRITE {
            return Err(MediaError::TooManyFilemarks {
                count,
                max: MAX_FILEMARKS_PER_WRITE,
            });
        }
        self.truncate_here()?;
        self.cur_mut()
            .append_filemarks(count)
            .map_err(MediaError::Store)?;
        self.object += u64::from(count);
        let c = &mut self.info.counters;
        c.filemarks_written = c.filemarks_written.saturating_add(u64::from(count));
        self.info.last_written = Some(self.now);
        Ok(WriteOutcome {
            early_warning: self.beyond_ew(),
            synced: false,
        })
    }

    /// READ one object in variable-block mode (SSC-4 §6.4).
    ///
    /// A record is put in `buf` (replacing its contents, at most
    /// `max_len` bytes) and the position moves past it even when it is
    /// longer than `max_len`; [`ReadOutcome::Record::data_len`] gives the
    /// actual length for the ILI residue. `max_len` 0 is not special here:
    /// SSC's "transfer length 0 is a no-op" is the SCSI layer's business. A
    /// filemark moves the position past it. At EOD nothing moves.
    pub fn read(&mut self, max_len: u32, buf: &mut impl RecordBuf) -> Res<ReadOutcome, S> {
        self.require_loaded()?;
        if self.object >= self.eod() {
            return Ok(ReadOutcome::EndOfData);
        }
        let n = self.object;
        match self.cur().object(n).map_err(MediaError::Store)? {
            ObjectKind::Filemark => {
                self.object += 1;
                let c = &mut self.info.counters;
                c.filemarks_read = c.filemarks_read.saturating_add(1);
                Ok(ReadOutcome::Filemark)
            }
            ObjectKind::Record { len } => {
                let got = buf.fill(self.cur_mut(), n).map_err(MediaError::Store)?;
                if got != len as usize {
                    return Err(inconsistent("record length differs from object table"));
                }
                let transferred = len.min(max_len);
                buf.keep(transferred as usize);
                self.advance_past_record(transferred);
                Ok(ReadOutcome::Record {
                    data_len: len,
                    transferred,
                })
            }
            ObjectKind::EncryptedRecord { len } => {
                let got = buf.fill(self.cur_mut(), n).map_err(MediaError::Store)?;
                if got != len as usize {
                    return Err(inconsistent("record length differs from object table"));
                }
                Ok(ReadOutcome::Encrypted { sealed_len: len })
            }
        }
    }

    /// Completes a READ of the encrypted record at the position ([`ReadOutcome::Encrypted`]):
    /// the position moves past it and `transferred` host bytes are counted as read.
    pub fn finish_encrypted_read(&mut self, transferred: u32) -> Res<(), S> {
        match self.next_object()? {
            Some(ObjectKind::EncryptedRecord { .. }) => {
                self.advance_past_record(transferred);
                Ok(())
            }
            _ => Err(inconsistent("no encrypted record at the position")),
        }
    }

    /// The object at the position, without reading or moving (`None` at end-of-data): what
    /// a drive reports as the next block's encryption status (SSC-4 §8.5.4.3).
    pub fn next_object(&self) -> Res<Option<ObjectKind>, S> {
        self.require_loaded()?;
        if self.object >= self.eod() {
            return Ok(None);
        }
        self.cur()
            .object(self.object)
            .map(Some)
            .map_err(MediaError::Store)
    }

    fn advance_past_record(&mut self, transferred: u32) {
        self.object += 1;
        let c = &mut self.info.counters;
        c.bytes_read_total = c.bytes_read_total.saturating_add(u64::from(transferred));
        c.bytes_read_load = c.bytes_read_load.saturating_add(u64::from(transferred));
        c.records_read = c.records_read.saturating_add(1);
    }

    /// Object number of the first filemark at or after `pos`, if any.
    fn next_filemark(&self, pos: u64) -> Res<Option<u64>, S> {
        let s = self.cur();
        let k = s.filemarks_before(pos).map_err(MediaError::Store)?;
        let fm = s.filemark_position(k).map_err(MediaError::Store)?;
        match fm {
            Some(f) if f < pos || f >= s.object_count() => Err(inconsistent("filemark index")),
            other => Ok(other),
        }
    }

    /// Object number of the last filemark before `pos`, if any.
    fn prev_filemark(&self, pos: u64) -> Res<Option<u64>, S> {
        let s = self.cur();
        let k = s.filemarks_before(pos).map_err(MediaError::Store)?;
        if k == 0 {
            return Ok(None);
        }
        match s.filemark_position(k - 1).map_err(MediaError::Store)? {
            Some(f) if f < pos => Ok(Some(f)),
            _ => Err(inconsistent("filemark index")),
        }
    }

    /// SPACE over `count` records (SSC-4 §7.9, code 000b): forward if
    /// positive, backward if negative, nothing if 0.
    ///
    /// A filemark stops the motion: forward the position ends just past it,
    /// backward just before it (BOP side); forward EOD and backward BOP stop
    /// it too. The outcome carries the residue (see [`SpaceOutcome`]).
    pub fn space_records(&mut self, count: i64) -> Res<SpaceOutcome, S> {
        self.require_loaded()?;
        let n = count.unsigned_abs();
        if count == 0 {
            return Ok(SpaceOutcome::Completed);
        }
        let pos = self.object;
        if count > 0 {
            let fm = self.next_filemark(pos)?;
            let limit = fm.unwrap_or_else(|| self.eod());
            let available = limit
                .checked_sub(pos)
                .ok_or_else(|| inconsistent("object count below position"))?;
            if n <= available {
                self.object = pos + n;
                return Ok(SpaceOutcome::Completed);
            }
            let residue = signed_residue(true, n - available);
            Ok(match fm {
                Some(f) => {
                    self.object = f + 1;
                    SpaceOutcome::Filemark { residue }
                }
                None => {
                    self.object = limit;
                    SpaceOutcome::EndOfData { residue }
                }
            })
        } else {
            let fm = self.prev_filemark(pos)?;
            let floor = fm.map_or(0, |f| f + 1);
            let available = pos - floor;
            if n <= available {
                self.object = pos - n;
                return Ok(SpaceOutcome::Completed);
            }
            let residue = signed_residue(false, n - available);
            Ok(match fm {
                Some(f) => {
                    self.object = f;
                    SpaceOutcome::Filemark { residue }
                }
                None => {
                    self.object = 0;
                    SpaceOutcome::BeginningOfPartition { residue }
                }
            })
        }
    }

    /// SPACE over `count` filemarks (SSC-4 §7.9, code 001b).
    ///
    /// Forward, the position ends just past the last filemark crossed, or at
    /// EOD with a residue if there are too few. Backward, it ends on the BOP
    /// side of the last filemark crossed, or at BOP with a (negative) residue.
    pub fn space_filemarks(&mut self, count: i64) -> Res<SpaceOutcome, S> {
        self.require_loaded()?;
        let n = count.unsigned_abs();
        if count == 0 {
            return Ok(SpaceOutcome::Completed);
        }
        let s = self.cur();
        let before = s.filemarks_before(self.object).map_err(MediaError::Store)?;
        if count > 0 {
            let eod = s.object_count();
            let total = s.filemarks_before(eod).map_err(MediaError::Store)?;
            let available = total
                .checked_sub(before)
                .ok_or_else(|| inconsistent("filemark count"))?;
            if n <= available {
                let fm = s
                    .filemark_position(before + n - 1)
                    .map_err(MediaError::Store)?
                    .filter(|&f| f >= self.object && f < eod)
                    .ok_or_else(|| inconsistent("filemark index"))?;
                self.object = fm + 1;
                Ok(SpaceOutcome::Completed)
            } else {
                self.object = eod;
                Ok(SpaceOutcome::EndOfData {
                    residue: signed_residue(true, n - available),
                })
            }
        } else if n <= before {
            let fm = s
                .filemark_position(before - n)
                .map_err(MediaError::Store)?
                .filter(|&f| f < self.object)
                .ok_or_else(|| inconsistent("filemark index"))?;
            self.object = fm;
            Ok(SpaceOutcome::Completed)
        } else {
            self.object = 0;
            Ok(SpaceOutcome::BeginningOfPartition {
                residue: signed_residue(false, n - before),
            })
        }
    }

    /// SPACE to end-of-data (SSC-4 §7.9, code 011b).
    pub fn space_to_eod(&mut self) -> Res<(), S> {
        self.require_loaded()?;
        self.object = self.eod();
        Ok(())
    }

    /// LOCATE (SSC-4 §7.5) to logical object `object` of `partition`.
    /// Locating to EOD itself succeeds; beyond it the position is left at
    /// EOD of that partition and [`MediaError::EndOfData`] is returned (BLANK
    /// CHECK). An invalid partition changes nothing.
    pub fn locate(&mut self, partition: u8, object: u64) -> Res<(), S> {
        self.require_loaded()?;
        self.check_partition(partition)?;
        self.partition = partition;
        let eod = self.eod();
        if object > eod {
            self.object = eod;
            return Err(MediaError::EndOfData);
        }
        self.object = object;
        Ok(())
    }

    /// Locate to the start of file `file` (just past filemark `file - 1`) in
    /// the current partition; file 0 starts at BOP. If the file does not
    /// exist the position is left at EOD and [`MediaError::EndOfData`] is
    /// returned.
    pub fn locate_file(&mut self, file: u64) -> Res<(), S> {
        self.require_loaded()?;
        if file == 0 {
            self.object = 0;
            return Ok(());
        }
        let eod = self.eod();
        match self
            .cur()
            .filemark_position(file - 1)
            .map_err(MediaError::Store)?
        {
            Some(f) if f < eod => {
                self.object = f + 1;
                Ok(())
            }
            Some(_) => Err(inconsistent("filemark index")),
            None => {
                self.object = eod;
                Err(MediaError::EndOfData)
            }
        }
    }

    /// REWIND (SSC-4 §7.6): sync, then go to BOP of partition 0.
    pub fn rewind(&mut self) -> Res<(), S> {
        self.require_loaded()?;
        self.sync_all()?;
        self.partition = 0;
        self.object = 0;
        Ok(())
    }

    /// Change to BOP of `partition` (LOCATE with the CP bit, SSC-4 §7.5).
    pub fn set_partition(&mut self, partition: u8) -> Res<(), S> {
        self.locate(partition, 0)
    }

    /// ERASE (SSC-4 §7.2) from the current position: everything after it is
    /// discarded and EOD is written here. A long erase is the same on a
    /// virtual tape. Refused when write protected, or on WORM media unless
    /// already at EOD (where it is a no-op).
    pub fn erase(&mut self, long: bool) -> Res<(), S> {
        let _ = long;
        self.require_loaded()?;
        self.check_writable()?;
        if self.object < self.eod() {
            self.truncate_here()?;
            self.info.last_written = Some(self.now);
        }
        self.cur_mut().sync().map_err(MediaError::Store)
    }

    /// FORMAT MEDIUM / partition (SSC-4 §7.2, §8.3.4 medium partition
    /// page): re-partition into `sizes.len()` partitions of the given byte
    /// capacities, erasing all data; position becomes BOP of partition 0.
    ///
    /// Existing stores are reused (emptied) in order; missing ones are made
    /// by `make(index)` before anything is erased, so a failure there
    /// changes nothing. Stores no longer needed are returned, emptied.
    /// Refused when write protected or WORM.
    pub fn format<F>(&mut self, sizes: &[u64], mut make: F) -> Res<Vec<S>, S>
    where
        F: FnMut(u8) -> Result<S, S::Error>,
    {
        self.require_loaded()?;
        if self.info.write_protected {
            return Err(MediaError::WriteProtected);
        }
        if self.info.is_worm() {
            return Err(MediaError::WormOverwrite);
        }
        self.info.validate_layout(sizes)?;
        let mut new = Vec::new();
        for i in self.partitions.len()..sizes.len() {
            // sizes.len() ≤ 4 after validation.
            new.push(make(i as u8).map_err(MediaError::Store)?);
        }
        for p in &mut self.partitions {
            p.truncate(0).map_err(MediaError::Store)?;
            p.sync().map_err(MediaError::Store)?;
        }
        self.partitions.extend(new);
        let removed = self.partitions.split_off(sizes.len());
        self.info.partition_capacities = sizes.to_vec();
        self.info.last_written = Some(self.now);
        self.partition = 0;
        self.object = 0;
        Ok(removed)
    }

    /// Erase the whole cartridge, as an operator does before relabelling it
    /// (not a drive command, so it does not need the cartridge loaded): every
    /// partition loses its records and filemarks and is synced empty; the
    /// barcode, media, partitioning, cartridge memory and counters stay. The
    /// position, if loaded, becomes BOP of partition 0.
    ///
    /// Refused when write protected, and on WORM media holding any object
    /// (an empty WORM cartridge has nothing to erase: a no-op).
    pub fn erase_all(&mut self, now: UnixTime) -> Res<(), S> {
        if self.info.write_protected {
            return Err(MediaError::WriteProtected);
        }
        let holds_objects = self.partitions.iter().any(|p| p.object_count() > 0);
        if self.info.is_worm() && holds_objects {
            return Err(MediaError::WormOverwrite);
        }
        for p in &mut self.partitions {
            p.truncate(0).map_err(MediaError::Store)?;
            p.sync().map_err(MediaError::Store)?;
        }
        if holds_objects {
            self.info.last_written = Some(now);
        }
        self.partition = 0;
        self.object = 0;
        Ok(())
    }

    fn device_values(&self, partition: u8) -> Res<DeviceAttributeValues, S> {
        let c = self.info.counters;
        Ok(DeviceAttributeValues {
            remaining_capacity: self.remaining_capacity(partition)?,
            max_capacity: self.partition_capacity(partition)?,
            load_count: self.info.load_count,
            bytes_written_total: c.bytes_written_total,
            bytes_read_total: c.bytes_read_total,
            bytes_written_load: c.bytes_written_load,
            bytes_read_load: c.bytes_read_load,
            density_code: self.info.media_type.density_code(),
            medium_type: self.info.media_type.mam_medium_type(),
            volume_change_reference: self.volume_change_reference(),
        })
    }

    /// A digest of everything a write, erase or format changes (the write counters, the last
    /// write time, each partition's objects and bytes): equal exactly when the volume is
    /// unchanged, up to a 2^-32 chance, and persistent across loads and restarts because its
    /// inputs are.
    fn volume_change_reference(&self) -> u32 {
        let c = self.info.counters;
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut mix = |v: u64| {
            for b in v.to_le_bytes() {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        mix(c.records_written);
        mix(c.filemarks_written);
        mix(self.info.last_written.map_or(u64::MAX, |t| t.0));
        for p in &self.partitions {
            mix(p.object_count());
            mix(p.data_bytes());
        }
        let folded = (hash ^ (hash >> 32)) as u32;
        folded.min(u32::MAX - 1)
    }

    /// READ ATTRIBUTE of one MAM attribute for `partition` (SPC-4 §6.17).
    pub fn read_attribute(&self, id: u16, partition: u8) -> Res<Option<MamAttribute>, S> {
        Ok(self.info.mam.read(id, &self.device_values(partition)?))
    }

    /// All MAM attributes present for `partition`, ascending by id.
    pub fn attributes(&self, partition: u8) -> Res<Vec<MamAttribute>, S> {
        Ok(self.info.mam.list(&self.device_values(partition)?))
    }

    /// WRITE ATTRIBUTE (SPC-4 §6.36) of a host attribute; an empty value
    /// deletes it. Read-only ids, wrong formats and lengths are refused with
    /// [`MediaError::Mam`].
    pub fn write_attribute(
        &mut self,
        id: u16,
        format: AttributeFormat,
        value: &[u8],
    ) -> Res<(), S> {
        self.info.mam.write(id, format, value)?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "cartridge_tests.rs"]
mod tests;
