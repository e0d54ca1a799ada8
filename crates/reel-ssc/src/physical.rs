//! Emulation of a physical drive's timing (off by default): when a drive emulates one, every
//! command that moves tape returns status when `reel-drivemodel`'s model of that drive says the
//! physical drive would have — WRITE when the record fits in the buffer, a filemark without
//! IMMED after the flush and the stop, REWIND/LOCATE/SPACE/LOAD/UNLOAD after the tape moved —
//! so backup software can be rehearsed at real hardware speed, back-hitches included.
//!
//! The model is pure (time is an input); this module owns the clock and the sleeps. The data
//! itself is stored as always, at once; only the status waits. A command arriving while an
//! IMMED operation is still running (REWIND with IMMED = 1) starts when it ends.

use std::time::{Duration, Instant};

use reel_drivemodel::{DriveSpec, DriveStats, PhysicalDrive};
use reel_scsi::{Bytes, Cdb, Response};

/// The most of a record compressed to estimate its compressibility (the drive's SLDC sees the
/// whole record; a sample is enough for its size, and keeps the cost per record bounded).
const COMPRESSION_SAMPLE: usize = 32 << 10;

/// One drive's physical model and its clock.
pub struct Physical {
    model: PhysicalDrive,
    epoch: Instant,
    /// An IMMED operation runs until then (model time).
    busy_until: Duration,
    /// Records and filemarks written since BOT, to turn block positions into tape positions.
    objects_written: u64,
}

impl Physical {
    pub fn new(spec: &'static DriveSpec) -> Self {
        Self {
            model: PhysicalDrive::new(spec),
            epoch: Instant::now(),
            busy_until: Duration::ZERO,
            objects_written: 0,
        }
    }

    pub fn spec(&self) -> &'static DriveSpec {
        self.model.spec()
    }

    /// The model's state now.
    pub fn stats(&self) -> DriveStats {
        self.model.stats(self.now())
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// When a command that arrives now may start (after a running IMMED operation).
    pub(crate) fn arrival(&self) -> Duration {
        self.now().max(self.busy_until)
    }

    /// A cartridge was inserted by the changer: the drive threads it while the robot's move
    /// completes; the drive's next tape command waits for the load to end.
    pub(crate) fn inserted(&mut self) {
        self.objects_written = 0;
        self.busy_until = self.model.load(self.arrival());
    }

    /// The model's reaction to a command that ended with `response`; returns when status may
    /// go back. `position_after` is the logical object number after the command (for moves).
    pub(crate) fn pace(
        &mut self,
        arrived: Duration,
        command: PacedCommand<'_>,
        response: &Response,
        compression: bool,
    ) {
        let model = &mut self.model;
        model.set_compression(compression);
        let done = match command {
            PacedCommand::Write { data, block_length } => {
                // One compressibility estimate per command, whatever the block count: the
                // initiator's block length must not decide how much work the drive does.
                let ratio = compressed_ratio(data, compression);
                let mut done = arrived;
                for (len, blocks) in record_runs(data.len() as u64, block_length) {
                    let compressed = ((len as f64 * ratio).ceil() as u64).max(1);
                    done = model.write(done, len, compressed);
                    self.objects_written += blocks;
                }
                done
            }
            PacedCommand::Read => {
                let data = &response.data_in;
                if data.is_empty() {
                    return;
                }
                let len = data.len() as u64;
                // Only the sample is looked at: no need to join the record's parts.
                let sample = data.head(COMPRESSION_SAMPLE);
                let compressed =
                    ((len as f64 * compressed_ratio(&sample, compression)).ceil() as u64).max(1);
                model.read(arrived, len, compressed)
            }
            PacedCommand::WriteFilemarks { count, immed } => {
                self.objects_written += u64::from(count);
                if count == 0 && !immed {
                    model.flush(arrived)
                } else {
                    model.write_filemarks(arrived, count, immed)
                }
            }
            PacedCommand::Rewind { immed } => {
                let done = model.rewind(arrived);
                if immed {
                    self.busy_until = done;
                    return;
                }
                done
            }
            PacedCommand::Move { object } => {
                // Tape position from the average length on tape of the objects written so far
                // (the model keeps bytes, the SSC layer objects).
                let per_object = model
                    .stats(arrived)
                    .native_bytes_on_tape
                    .checked_div(self.objects_written)
                    .unwrap_or(0);
                model.locate(arrived, object.saturating_mul(per_object))
            }
            PacedCommand::Load => {
                self.objects_written = 0;
                model.load(arrived)
            }
            PacedCommand::Unload => model.unload(arrived),
        };
        self.wait_until(done);
    }

    fn wait_until(&self, done: Duration) {
        let now = self.now();
        if done > now {
            std::thread::sleep(done - now);
        }
    }
}

/// What a tape command means to the physical model.
pub(crate) enum PacedCommand<'a> {
    Write {
        data: &'a Bytes,
        block_length: u32,
    },
    Read,
    WriteFilemarks {
        count: u32,
        immed: bool,
    },
    Rewind {
        immed: bool,
    },
    /// LOCATE or SPACE, to this logical object.
    Move {
        object: u64,
    },
    Load,
    Unload,
}

impl PacedCommand<'_> {
    /// The command `cdb` as the model sees it, when it moves tape.
    pub(crate) fn of<'a>(
        cdb: &Cdb<'_>,
        data_out: &'a Bytes,
        block_length: u32,
    ) -> Option<PacedCommand<'a>> {
        let immed = cdb.byte(1) & 0x01 != 0;
        Some(match cdb.opcode().0 {
            0x0A => PacedCommand::Write {
                data: data_out,
                block_length,
            },
            0x08 => PacedCommand::Read,
            // SSC-4 §6.10: the filemark count is bytes 2..=4.
            0x10 => PacedCommand::WriteFilemarks {
                count: u32::from_be_bytes([0, cdb.byte(2), cdb.byte(3), cdb.byte(4)]),
                immed,
            },
            0x01 => PacedCommand::Rewind { immed },
            // SSC-4 §7.3: LOAD (bit 0 of byte 4) or UNLOAD.
            0x1B if cdb.byte(4) & 0x01 != 0 => PacedCommand::Load,
            0x1B => PacedCommand::Unload,
            // The object is filled in by the caller from the position after the command.
            0x11 | 0x91 | 0x2B | 0x92 => PacedCommand::Move { object: 0 },
            _ => return None,
        })
    }
}

/// The most model writes one WRITE command makes: a fixed-block WRITE of many small blocks
/// is modelled as this many equal records (the per-record overhead of the rest is not
/// modelled), so a 1-byte block length cannot make one command cost millions of steps.
const MAX_RECORDS_PER_COMMAND: u64 = 1024;

/// The records of a WRITE of `total` bytes as (record length, blocks it stands for): one in
/// variable-block mode, `total / block_length` in fixed, grouped to at most
/// [`MAX_RECORDS_PER_COMMAND`].
fn record_runs(total: u64, block_length: u32) -> impl Iterator<Item = (u64, u64)> {
    let block = match block_length {
        0 => total.max(1),
        n => u64::from(n),
    };
    let blocks = total.div_ceil(block).max(1);
    let per_record = blocks.div_ceil(MAX_RECORDS_PER_COMMAND);
    let records = blocks.div_ceil(per_record);
    (0..records).map(move |r| {
        let first = r * per_record;
        let count = per_record.min(blocks - first);
        let len = (count * block)
            .min(total - (first * block).min(total))
            .max(1);
        (len, count)
    })
}

/// Compressed length over length of a transfer as the drive's compression would see it,
/// estimated from a sample with zstd at its fastest level (LTO's SLDC is an LZ77 coder of
/// similar strength); 1 when compression is off.
fn compressed_ratio(data: &[u8], compression: bool) -> f64 {
    if !compression || data.is_empty() {
        return 1.0;
    }
    let sample = &data[..data.len().min(COMPRESSION_SAMPLE)];
    match zstd::bulk::compress(sample, 1) {
        Ok(packed) => packed.len() as f64 / sample.len() as f64,
        Err(_) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift bytes: what no compressor shrinks.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn compressibility_is_estimated_from_the_record() {
        let zeros = vec![0u8; 256 << 10];
        assert!(compressed_ratio(&zeros, true) < 0.02);
        assert_eq!(compressed_ratio(&zeros, false), 1.0);
        assert!(compressed_ratio(&noise(7, 256 << 10), true) >= 1.0);
    }

    #[test]
    fn fixed_block_writes_are_one_record_per_block_up_to_a_bound() {
        assert_eq!(record_runs(4096, 1024).collect::<Vec<_>>(), [(1024, 1); 4]);
        assert_eq!(record_runs(4096, 0).collect::<Vec<_>>(), [(4096, 1)]);
        // 16 MiB of 1-byte blocks: 1024 model records, every block and byte counted once.
        let runs: Vec<_> = record_runs(16 << 20, 1).collect();
        assert_eq!(runs.len() as u64, MAX_RECORDS_PER_COMMAND);
        assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 16 << 20);
        assert_eq!(runs.iter().map(|r| r.0).sum::<u64>(), 16 << 20);
        // A short last block.
        assert_eq!(
            record_runs(2500, 1000).collect::<Vec<_>>(),
            [(1000, 1), (1000, 1), (500, 1)]
        );
    }

    #[test]
    fn a_write_to_a_full_buffer_waits_for_the_tape() {
        let spec = reel_drivemodel::lto(5, true).unwrap();
        let mut physical = Physical::new(spec);
        let arrived = physical.arrival();
        let started = Instant::now();
        // A buffer and a half of incompressible records: the last ones wait for the tape.
        let noise = Bytes::from(noise(1, 256 << 10));
        let buffer = spec.buffer_bytes;
        let records = (buffer * 3 / 2) / (256 << 10);
        for _ in 0..records {
            let arrived = arrived.max(physical.arrival());
            physical.pace(
                arrived,
                PacedCommand::Write {
                    data: &noise,
                    block_length: 0,
                },
                &Response::good_empty(),
                true,
            );
        }
        let waited = started.elapsed().as_secs_f64();
        // At least the half buffer beyond the buffer must have gone to tape at the top speed.
        let floor = (buffer as f64 / 2.0) / spec.top_speed() * 0.9;
        assert!(
            waited >= floor,
            "waited {waited} s, at least {floor} s expected"
        );
        assert!(physical.stats().host_bytes >= records * (256 << 10));
    }
}
