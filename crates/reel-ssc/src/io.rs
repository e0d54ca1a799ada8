//! The data path and positioning: READ(6), WRITE(6), WRITE FILEMARKS(6), SPACE(6/16),
//! LOCATE(10/16), READ POSITION, REWIND, ERASE, LOAD UNLOAD.
//!
//! Residues follow SSC-4: INFORMATION = requested − done, in bytes for variable-block
//! transfers and in blocks (or filemarks) otherwise, two's complement when negative (an
//! overlength record, spacing backward).

use reel_media::{
    Cartridge, MAX_RECORD_LEN, MediaError, ObjectKind, PartitionStore, ReadOutcome, SpaceOutcome,
};
use reel_scsi::{Asc, Bytes, Cdb, DeviceContext, Response, Sense, SenseKey};

use crate::drive::{Activity, MAX_TRANSFER_LENGTH, Reply, TapeDrive, now};
use crate::encryption::{DecryptionMode, Encryption, ReadRefusal, read_refused};
use crate::errors::{self, Op};

/// NO SENSE with ILI and the residue (SSC-4 READ(6): incorrect length).
fn incorrect_length(residue: i64) -> Sense {
    Sense::new(SenseKey::NO_SENSE, Asc::NO_ADDITIONAL_SENSE)
        .with_ili()
        .with_residue(residue)
}

/// A failed transfer: the sense and the data transferred before the failure.
struct Checked {
    sense: Sense,
    data: Vec<Bytes>,
}

impl<S: PartitionStore + Send> TapeDrive<S> {
    /// READ(6) (SSC-4 READ(6)): FIXED = 0 reads one record of at most TRANSFER LENGTH
    /// bytes; FIXED = 1 reads TRANSFER LENGTH blocks of the mode block length.
    pub(crate) fn read(&mut self, ctx: &DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let fixed = cdb.bit(1, 0);
        let sili = cdb.bit(1, 1);
        if fixed && sili {
            // SSC-4 READ(6): SILI = 1 with FIXED = 1 is an invalid combination.
            return Err(Sense::invalid_field_in_cdb(1, Some(1)));
        }
        let block = self.block_length;
        if fixed && block == 0 {
            return Err(Sense::invalid_field_in_cdb(1, Some(0)));
        }
        let length = cdb.be(2, 3) as u32;
        if fixed && u64::from(length) * u64::from(block) > u64::from(MAX_TRANSFER_LENGTH) {
            // The blocks are collected into one buffer: more than the drive's transfer limit
            // is refused before the tape moves, like an oversized WRITE.
            return Err(Sense::invalid_field_in_cdb(2, None));
        }
        self.ready_cartridge()?;
        if length == 0 {
            // SSC-4: a transfer length of zero is not an error and transfers nothing.
            return Ok(Response::good_empty());
        }
        self.activity = Activity::Reading;
        self.stats.read_commands += 1;
        let result = if fixed {
            self.read_fixed(length, block)
        } else {
            self.read_variable(length, sili)
        };
        let (sense, data) = match result {
            Ok(data) => (None, data),
            Err(Checked { sense, data }) => (Some(sense), data),
        };
        // The records go to the host in the store's own buffers where it has them.
        let n: u64 = data.iter().map(|b| b.len() as u64).sum();
        self.stats.bytes_read += n;
        self.log.bytes_to_host += n;
        match sense {
            None => Ok(Response::good_parts(data)),
            Some(sense) => Ok(ctx.check_condition(&sense).with_data_parts(data)),
        }
    }

    fn read_variable(&mut self, length: u32, sili: bool) -> Result<Vec<Bytes>, Checked> {
        let mut buf = Vec::new();
        let (cartridge, encryption) = self.cartridge_and_encryption().map_err(no_data)?;
        let outcome = read_one(cartridge, encryption, length, &mut buf);
        match outcome {
            Ok(ReadOutcome::Record { data_len, .. }) => {
                let data = buf;
                // SSC-4 READ(6): with SILI = 1 and FIXED = 0 an underlength record is never
                // reported, an overlength one only when the mode block length is non-zero.
                let suppressed = sili && (data_len < length || self.block_length == 0);
                if data_len == length || suppressed {
                    Ok(data)
                } else {
                    let residue = i64::from(length) - i64::from(data_len);
                    Err(Checked {
                        sense: incorrect_length(residue),
                        data,
                    })
                }
            }
            Ok(ReadOutcome::Filemark) => Err(no_data(errors::filemark(i64::from(length)))),
            Ok(ReadOutcome::EndOfData) => Err(no_data(eod_sense(cartridge, i64::from(length)))),
            Ok(ReadOutcome::Encrypted { .. }) => Err(no_data(errors::internal_failure())),
            Err(ReadFailure::Media(e)) => Err(no_data(errors::media(&e, Op::Read, 0))),
            Err(ReadFailure::Refused(sense)) => Err(no_data(sense.with_residue(i64::from(length)))),
        }
    }

    fn read_fixed(&mut self, count: u32, block: u32) -> Result<Vec<Bytes>, Checked> {
        let mut buf = Vec::new();
        let mut data = Vec::new();
        let mut result = Ok(());
        let (cartridge, encryption) = self.cartridge_and_encryption().map_err(no_data)?;
        for done in 0..count {
            let residue = i64::from(count - done);
            let stop = match read_one(cartridge, encryption, block, &mut buf) {
                Ok(ReadOutcome::Record { data_len, .. }) if data_len == block => {
                    data.append(&mut buf);
                    continue;
                }
                // SSC-4 READ(6): the residue does not count the incorrect-length block; the
                // position is after it.
                Ok(ReadOutcome::Record { .. }) => incorrect_length(residue),
                Ok(ReadOutcome::Filemark) => errors::filemark(residue),
                Ok(ReadOutcome::EndOfData) => eod_sense(cartridge, residue),
                Ok(ReadOutcome::Encrypted { .. }) => errors::internal_failure(),
                Err(ReadFailure::Media(e)) => errors::media(&e, Op::Read, 0).with_residue(residue),
                Err(ReadFailure::Refused(sense)) => sense.with_residue(residue),
            };
            result = Err(stop);
            break;
        }
        match result {
            Ok(()) => Ok(data),
            Err(sense) => Err(Checked { sense, data }),
        }
    }

    /// WRITE(6) (SSC-4 WRITE(6)). The data-out length must equal the CDB's transfer length
    /// (a partial transfer is refused with INVALID FIELD IN CDB rather than written in part).
    pub(crate) fn write(
        &mut self,
        ctx: &mut DeviceContext<'_>,
        cdb: &Cdb<'_>,
        data_out: &Bytes,
    ) -> Reply {
        let fixed = cdb.bit(1, 0);
        let block = self.block_length;
        if fixed && block == 0 {
            return Err(Sense::invalid_field_in_cdb(1, Some(0)));
        }
        let length = cdb.be(2, 3) as u32;
        if !fixed && length > MAX_RECORD_LEN {
            return Err(Sense::invalid_field_in_cdb(2, None));
        }
        let expected = if fixed {
            u64::from(length) * u64::from(block)
        } else {
            u64::from(length)
        };
        if data_out.len() as u64 != expected {
            return Err(Sense::invalid_field_in_cdb(2, None));
        }
        self.ready_cartridge()?;
        if length == 0 {
            return Ok(Response::good_empty());
        }
        let time = now(ctx);
        self.activity = Activity::Writing;
        self.stats.write_commands += 1;
        self.writable_cartridge()?;
        // Where each record lies in the Data-Out buffer: handed on as shared slices of it, so
        // the store need not copy a record it keeps past the call.
        let records: Vec<Bytes> = if fixed {
            (0..data_out.len())
                .step_by(block as usize)
                .map(|start| data_out.slice(start..(start + block as usize).min(data_out.len())))
                .collect()
        } else {
            vec![data_out.clone()]
        };
        // SSC-4 §4.2.27: with ENCRYPTION MODE ENCRYPT every record goes to the medium sealed.
        let sealed: Option<Vec<Vec<u8>>> = if self.encryption.encrypting() {
            Some(
                records
                    .iter()
                    .map(|r| self.encryption.seal(r))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        };
        let cartridge = self.writable_cartridge()?;
        cartridge.set_time(time);
        let count = records.len() as u64;
        let mut early_warning = false;
        let mut written = 0u64;
        let mut failure = None;
        for (i, record) in records.iter().enumerate() {
            let outcome = match &sealed {
                Some(sealed) => cartridge.write_encrypted_record(&sealed[i]),
                None => cartridge.write_record_shared(record.clone()),
            };
            match outcome {
                Ok(outcome) => {
                    early_warning = outcome.early_warning;
                    written += record.len() as u64;
                }
                Err(e) => {
                    // Variable: the whole record was not written; fixed: the blocks from i on.
                    let residue = if fixed {
                        count - i as u64
                    } else {
                        u64::from(length)
                    };
                    let residue = i64::try_from(residue).unwrap_or(i64::MAX);
                    failure = Some(match e {
                        MediaError::EndOfMedium { .. } => errors::volume_overflow(residue),
                        MediaError::WriteProtected | MediaError::WormOverwrite if i == 0 => {
                            errors::media(&e, Op::Write, 0)
                        }
                        other => errors::media(&other, Op::Write, 0).with_residue(residue),
                    });
                    break;
                }
            }
        }
        self.stats.bytes_written += written;
        self.log.bytes_from_host += written;
        if self.buffered_mode == 0 && written > 0 {
            // SSC-4 §8.3.1: with BUFFERED MODE 0 the drive reports GOOD only once the data
            // is on the medium, so each WRITE ends with the sync of a synchronising point.
            // Records written before a failure are synced too; a failed sync fails the WRITE.
            let residue = if fixed { count } else { u64::from(length) };
            let residue = i64::try_from(residue).unwrap_or(i64::MAX);
            self.ready_cartridge()?
                .sync()
                .map_err(|e| errors::media(&e, Op::Write, 0).with_residue(residue))?;
        }
        let pew = self.crossed_programmable_early_warning();
        match failure {
            Some(sense) => Err(sense),
            // SSC-4 §4.2.5: past early warning a write completes and says so.
            None if early_warning => Err(errors::early_warning(0)),
            None if pew => Err(errors::programmable_early_warning()),
            None => Ok(Response::good_empty()),
        }
    }

    /// Whether the write position has just entered the programmable early warning zone
    /// (PEWS MB before early warning, SSC-4 §4.2.5): true once per crossing; leaving the zone
    /// (an overwrite nearer BOP, a new PEWS) arms it again.
    fn crossed_programmable_early_warning(&mut self) -> bool {
        if self.pews_mb == 0 {
            // The common case: no PEW asked for, nothing to compute on the write path.
            self.pew_reported = false;
            return false;
        }
        let pews = u64::from(self.pews_mb) * 1_000_000;
        let Some(c) = self.medium.as_ref() else {
            return false;
        };
        let Ok(position) = c.position() else {
            return false;
        };
        let (Ok(used), Ok(ew)) = (
            c.used_bytes(position.partition),
            c.early_warning_threshold(position.partition),
        ) else {
            return false;
        };
        let in_zone = used >= ew.saturating_sub(pews);
        let report = in_zone && !self.pew_reported;
        self.pew_reported = in_zone;
        report
    }

    /// WRITE FILEMARKS(6) (SSC-4 WRITE FILEMARKS(6)). IMMED = 0 is a synchronising point
    /// (cartridge sync, then the saver); a count of 0 only synchronises (nothing with
    /// IMMED = 1).
    pub(crate) fn write_filemarks(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let immed = cdb.bit(1, 0);
        if cdb.bit(1, 1) {
            // WMSK: setmarks are not supported by LTO.
            return Err(Sense::invalid_field_in_cdb(1, Some(1)));
        }
        let count = cdb.be(2, 3) as u32;
        let time = now(ctx);
        if count == 0 {
            let cartridge = self.ready_cartridge()?;
            if !immed {
                cartridge
                    .write_filemarks(0)
                    .map_err(|e| errors::media(&e, Op::Write, 0))?;
                self.save()?;
            }
            return Ok(Response::good_empty());
        }
        self.activity = Activity::Writing;
        let cartridge = self.writable_cartridge()?;
        cartridge.set_time(time);
        let outcome = cartridge
            .write_filemarks(count)
            .map_err(|e| errors::media(&e, Op::Write, 0).with_residue(i64::from(count)))?;
        if !immed {
            cartridge
                .sync()
                .map_err(|e| errors::media(&e, Op::Write, 0))?;
        }
        self.stats.filemarks_written += u64::from(count);
        if !immed {
            self.save()?;
        }
        if outcome.early_warning {
            return Err(errors::early_warning(0));
        }
        Ok(Response::good_empty())
    }

    /// SPACE(6) and SPACE(16) (SSC-4): blocks (code 000b), filemarks (001b) and end-of-data
    /// (011b). Sequential filemarks (010b) are not supported, as on LTO drives.
    pub(crate) fn space(&mut self, cdb: &Cdb<'_>) -> Reply {
        let code = cdb.byte(1) & 0x0F;
        let count = if cdb.opcode().0 == 0x11 {
            // 24-bit two's complement.
            let raw = cdb.be(2, 3) as u32;
            i64::from(((raw << 8) as i32) >> 8)
        } else {
            if cdb.be16(12) != 0 {
                // SPACE(16) PARAMETER LENGTH: no parameter data is defined for LTO.
                return Err(Sense::invalid_field_in_cdb(12, Some(7)));
            }
            cdb.be64(4) as i64
        };
        if !matches!(code, 0 | 1 | 3) {
            return Err(Sense::invalid_field_in_cdb(1, Some(3)));
        }
        self.ready_cartridge()?;
        self.activity = Activity::Positioning;
        let cartridge = self.ready_cartridge()?;
        let outcome = match code {
            0 => cartridge.space_records(count),
            1 => cartridge.space_filemarks(count),
            _ => cartridge.space_to_eod().map(|()| SpaceOutcome::Completed),
        };
        match outcome.map_err(|e| errors::media(&e, Op::Position, 0))? {
            SpaceOutcome::Completed => Ok(Response::good_empty()),
            SpaceOutcome::Filemark { residue } => Err(errors::filemark(residue)),
            SpaceOutcome::EndOfData { residue } => Err(eod_sense(cartridge, residue)),
            SpaceOutcome::BeginningOfPartition { residue } => {
                Err(errors::beginning_of_partition(residue))
            }
        }
    }

    /// LOCATE(10) (BT, CP, partition) and LOCATE(16) (DEST_TYPE object, file or EOD; CP).
    /// LTO block addresses are logical object identifiers, so BT changes nothing. With
    /// IMMED = 1 a failure is reported as a deferred error.
    pub(crate) fn locate(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let sixteen = cdb.opcode().0 == 0x92;
        let immed = cdb.bit(1, 0);
        let change_partition = cdb.bit(1, 1);
        let (dest_type, partition_byte, partition, id) = if sixteen {
            ((cdb.byte(1) >> 3) & 0x07, 3, cdb.byte(3), cdb.be64(4))
        } else {
            (0, 8, cdb.byte(8), u64::from(cdb.be32(3)))
        };
        if !matches!(dest_type, 0 | 1 | 3) {
            return Err(Sense::invalid_field_in_cdb(1, Some(5)));
        }
        self.ready_cartridge()?;
        self.activity = Activity::Positioning;
        let cartridge = self.ready_cartridge()?;
        let result = locate_in(cartridge, dest_type, change_partition, partition, id)
            .map_err(|e| errors::media(&e, Op::Position, partition_byte));
        deferred_if(ctx, immed, result)
    }

    /// READ POSITION (SSC-4): short form (service actions 00h, 01h), long form (06h) and
    /// extended form (08h). The object buffer is what the cartridge holds but has not made
    /// durable yet (written since the last synchronising point): the short and extended forms
    /// report its logical objects and bytes, and LAST LOGICAL OBJECT LOCATION is the first of
    /// those objects in the current partition (the next to go to the medium), or the current
    /// position when there is none. The long form carries no buffer fields.
    pub(crate) fn read_position(&mut self, cdb: &Cdb<'_>) -> Reply {
        let action = cdb.byte(1) & 0x1F;
        if !matches!(action, 0x00 | 0x01 | 0x06 | 0x08) {
            return Err(Sense::invalid_field_in_cdb(1, Some(4)));
        }
        let cartridge = self.ready_cartridge()?;
        let p = cartridge
            .position()
            .map_err(|e| errors::media(&e, Op::Position, 0))?;
        let buffered = cartridge.unsynced();
        let here = cartridge
            .partitions()
            .get(usize::from(p.partition))
            .map(|s| (s.object_count(), s.unsynced().objects));
        let last = match here {
            Some((count, pending)) if pending > 0 => count - pending,
            _ => p.object,
        };
        let eop = p.beyond_early_warning;
        let flags = u8::from(p.at_bop) << 7 | u8::from(eop) << 6 | u8::from(eop);
        // NUMBER OF LOGICAL OBJECTS IN OBJECT BUFFER is 3 bytes in both forms; BCU says it
        // does not hold the real count.
        let (objects, bcu) = match u32::try_from(buffered.objects) {
            Ok(n) if n <= 0x00FF_FFFF => (n, 0),
            _ => (0x00FF_FFFF, 0x20),
        };
        let data = match action {
            0x00 | 0x01 => {
                let mut d = vec![0u8; 20];
                // PERR: an object identifier does not fit the 4-byte fields.
                let first = u32::try_from(p.object).ok();
                let last = u32::try_from(last).ok();
                let perr = if first.is_some() && last.is_some() {
                    0
                } else {
                    0x02
                };
                // BYCU: the byte count does not fit its 4-byte field.
                let (bytes, bycu) = match u32::try_from(buffered.bytes) {
                    Ok(b) => (b, 0),
                    Err(_) => (u32::MAX, 0x10),
                };
                d[0] = flags | bcu | bycu | perr;
                d[1] = p.partition;
                d[4..8].copy_from_slice(&first.unwrap_or(u32::MAX).to_be_bytes());
                d[8..12].copy_from_slice(&last.unwrap_or(u32::MAX).to_be_bytes());
                d[13..16].copy_from_slice(&objects.to_be_bytes()[1..]);
                d[16..20].copy_from_slice(&bytes.to_be_bytes());
                d
            }
            0x06 => {
                let mut d = vec![0u8; 32];
                // BOP, EOP, MPU = 0, LONU = 0, BPEW.
                d[0] = flags;
                d[4..8].copy_from_slice(&u32::from(p.partition).to_be_bytes());
                d[8..16].copy_from_slice(&p.object.to_be_bytes());
                d[16..24].copy_from_slice(&p.file.to_be_bytes());
                d
            }
            _ => {
                let mut d = vec![0u8; 32];
                d[0] = flags | bcu;
                d[1] = p.partition;
                d[2..4].copy_from_slice(&28u16.to_be_bytes()); // ADDITIONAL LENGTH
                d[5..8].copy_from_slice(&objects.to_be_bytes()[1..]);
                d[8..16].copy_from_slice(&p.object.to_be_bytes());
                d[16..24].copy_from_slice(&last.to_be_bytes());
                d[24..32].copy_from_slice(&buffered.bytes.to_be_bytes());
                d.truncate(usize::from(cdb.be16(7)));
                d
            }
        };
        Ok(Response::good(data))
    }

    /// REWIND (SSC-4): a synchronising point, then BOP of partition 0.
    pub(crate) fn rewind(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let immed = cdb.bit(1, 0);
        self.ready_cartridge()?;
        self.activity = Activity::Rewinding;
        let cartridge = self.ready_cartridge()?;
        let result = cartridge
            .rewind()
            .map_err(|e| errors::media(&e, Op::Write, 0))
            .and_then(|()| self.save());
        deferred_if(ctx, immed, result)
    }

    /// ERASE(6) (SSC-4): everything from the position on is erased and end-of-data is
    /// written here; short and long erase are the same on a virtual tape.
    pub(crate) fn erase(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let immed = cdb.bit(1, 1);
        let long = cdb.bit(1, 0);
        let time = now(ctx);
        self.writable_cartridge()?;
        self.activity = Activity::Erasing;
        let cartridge = self.writable_cartridge()?;
        cartridge.set_time(time);
        let result = cartridge
            .erase(long)
            .map_err(|e| errors::media(&e, Op::Write, 0))
            .and_then(|()| self.save());
        deferred_if(ctx, immed, result)
    }

    /// LOAD UNLOAD (SSC-4): LOAD threads an unloaded cartridge (or rewinds a threaded one);
    /// UNLOAD synchronises and unthreads it, leaving it in the drive for the changer. HOLD
    /// keeps the current state; RETEN is a rewind. LOAD with EOT is invalid.
    pub(crate) fn load_unload(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let immed = cdb.bit(1, 0);
        let b4 = cdb.byte(4);
        let (load, eot, hold) = (b4 & 0x01 != 0, b4 & 0x04 != 0, b4 & 0x08 != 0);
        if load && eot {
            return Err(Sense::invalid_field_in_cdb(4, Some(2)));
        }
        let time = now(ctx);
        let threaded = self.threaded;
        let cartridge = self.present_cartridge()?;
        let result = if hold {
            Ok(())
        } else if load && threaded {
            cartridge
                .rewind()
                .map_err(|e| errors::media(&e, Op::Write, 0))
                .and_then(|()| self.save())
        } else if load {
            match cartridge.load(time) {
                Ok(()) => {
                    self.threaded = true;
                    self.stats.loads += 1;
                    self.activity = Activity::Idle;
                    ctx.raise_unit_attention_others(
                        Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED,
                    );
                    Ok(())
                }
                Err(e) => Err(errors::media(&e, Op::Position, 0)),
            }
        } else if threaded {
            match cartridge.unload() {
                Ok(()) => {
                    self.threaded = false;
                    self.encryption.medium_demounted();
                    self.activity = Activity::Idle;
                    self.save()
                }
                Err(e) => Err(errors::media(&e, Op::Write, 0)),
            }
        } else {
            Ok(())
        };
        deferred_if(ctx, immed, result)
    }
}

/// Why a record was not read: the store failed, or the encryption settings refuse it.
enum ReadFailure<E> {
    Media(MediaError<E>),
    Refused(Sense),
}

/// READ of one object through the drive's decryption (SSC-4 §4.2.27): a plain record as the
/// cartridge returns it, an encrypted one opened with the drive's key. A refusal (no key, wrong
/// key, a plain record in DECRYPT mode) leaves the position before the record, so the
/// application can ask for Next Block Encryption Status, set the key and read it again.
fn read_one<S: PartitionStore>(
    cartridge: &mut Cartridge<S>,
    encryption: &Encryption,
    max_len: u32,
    buf: &mut Vec<Bytes>,
) -> Result<ReadOutcome, ReadFailure<S::Error>> {
    let mode = encryption.decryption_mode();
    if mode == DecryptionMode::Decrypt
        && let Some(ObjectKind::Record { .. }) =
            cartridge.next_object().map_err(ReadFailure::Media)?
    {
        return Err(ReadFailure::Refused(read_refused(
            ReadRefusal::NotEncrypted,
        )));
    }
    match cartridge.read(max_len, buf).map_err(ReadFailure::Media)? {
        ReadOutcome::Encrypted { .. } => {
            if mode == DecryptionMode::Disable {
                return Err(ReadFailure::Refused(read_refused(
                    ReadRefusal::DecryptionDisabled,
                )));
            }
            let sealed = buf.concat();
            let mut plain = encryption
                .open(&sealed)
                .map_err(|e| ReadFailure::Refused(read_refused(ReadRefusal::Open(e))))?;
            let data_len = plain.len() as u32;
            let transferred = data_len.min(max_len);
            cartridge
                .finish_encrypted_read(transferred)
                .map_err(ReadFailure::Media)?;
            plain.truncate(transferred as usize);
            *buf = vec![plain.into()];
            Ok(ReadOutcome::Record {
                data_len,
                transferred,
            })
        }
        other => Ok(other),
    }
}

/// LOCATE on the cartridge: DEST_TYPE 000b logical object, 001b the BOP side of the filemark
/// whose logical file identifier is `id` (as IBM LTO drives do), 011b end-of-data.
fn locate_in<S: PartitionStore>(
    cartridge: &mut Cartridge<S>,
    dest_type: u8,
    change_partition: bool,
    partition: u8,
    id: u64,
) -> Result<(), MediaError<S::Error>> {
    let current = cartridge.position()?.partition;
    let target = if change_partition { partition } else { current };
    let store_eod = |c: &Cartridge<S>| {
        c.partitions()
            .get(usize::from(target))
            .map(PartitionStore::object_count)
            .ok_or(MediaError::InvalidPartition {
                partition: target,
                count: c.partition_count(),
            })
    };
    match dest_type {
        0 => cartridge.locate(target, id),
        1 => {
            let eod = store_eod(cartridge)?;
            let mark = cartridge
                .partitions()
                .get(usize::from(target))
                .map(|s| s.filemark_position(id))
                .transpose()
                .map_err(MediaError::Store)?
                .flatten();
            match mark {
                Some(object) if object < eod => cartridge.locate(target, object),
                _ => {
                    cartridge.locate(target, eod)?;
                    Err(MediaError::EndOfData)
                }
            }
        }
        _ => {
            let eod = store_eod(cartridge)?;
            cartridge.locate(target, eod)
        }
    }
}

/// BLANK CHECK, END-OF-DATA DETECTED; EOM too when end-of-data is past early warning.
fn eod_sense<S: PartitionStore>(cartridge: &Cartridge<S>, residue: i64) -> Sense {
    let sense = errors::end_of_data(residue);
    match cartridge.position() {
        Ok(p) if p.beyond_early_warning => sense.with_eom(),
        _ => sense,
    }
}

fn no_data(sense: Sense) -> Checked {
    Checked {
        sense,
        data: Vec::new(),
    }
}

/// With IMMED = 1 the command has already "returned": a failure becomes a deferred error
/// (SPC-4 §4.5.5) reported on the nexus's next command.
fn deferred_if(ctx: &mut DeviceContext<'_>, immed: bool, result: Result<(), Sense>) -> Reply {
    match result {
        Ok(()) => Ok(Response::good_empty()),
        Err(sense) if immed && sense.key != SenseKey::BLANK_CHECK => {
            ctx.defer(sense);
            Ok(Response::good_empty())
        }
        Err(sense) => Err(sense),
    }
}
