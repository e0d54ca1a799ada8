//! The per-drive workload: load → clear unit attentions → variable block mode → rewind →
//! write records with several WRITE(6) in flight → WRITE FILEMARKS (IMMED=0) → rewind → read
//! back with several READ(6) in flight, verifying every byte → check the filemark → rewind →
//! unload.
//!
//! The data comes from `reel-datagen`, generated on a thread of its own per drive and phase
//! (the read phase regenerates the same stream to compare against).
//!
//! Commands in flight: [`Client::execute`] queues a command on the session when its future is
//! first polled, and the session numbers commands (CmdSN) in queueing order. Each command's
//! future is therefore polled once right after it is created, in record order, and then kept
//! in a FIFO; the targets execute tape commands in CmdSN order, so records land on tape in
//! order even with `queue_depth` of them outstanding.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use reel_iscsi::initiator::ScsiResult;
use reel_iscsi_net::{Client, ClientError};
use tokio::sync::mpsc;

use crate::session::Drive;
use crate::tape::args::Workload;
use reel_scsi::initiator::ssc::{self, Transfer};
use reel_scsi::initiator::{describe, smc, spc};

/// One step of a drive's tape layout.
#[derive(Clone, Debug)]
pub enum Op {
    Record {
        index: u64,
        offset: u64,
        data: Bytes,
    },
    /// An intermediate filemark (`--filemark-every`), after `offset` bytes of records.
    Filemark { offset: u64, immed: bool },
}

/// Whether a filemark follows the record that ends at `end` (records are `len` bytes), given
/// one every `every` bytes: when the record crosses or reaches a multiple of `every`, and
/// more records follow.
pub fn filemark_after(start: u64, end: u64, every: Option<u64>, total: u64) -> bool {
    match every {
        Some(k) if end < total => end / k > start / k,
        _ => false,
    }
}

/// Drive `drive`'s stream, cut into records: byte for byte what `reel_datagen::Generator`
/// produces for the same settings, built from the unique blocks (`reel_datagen::unique_block`
/// at the ids of `SlotMap`), each generated once and kept while it is likely to repeat. A
/// record inside one block is a slice of the cached block (no copy), so the initiator's side
/// costs little CPU — on a small machine that CPU would be taken from the target.
pub struct RecordStream {
    cfg: reel_datagen::GenConfig,
    map: reel_datagen::SlotMap,
    block_size: u64,
    pos: u64,
    cache: std::collections::HashMap<u64, Bytes>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl RecordStream {
    pub fn new(cfg: reel_datagen::GenConfig) -> anyhow::Result<RecordStream> {
        cfg.validate()
            .map_err(|e| anyhow!("generator settings: {e}"))?;
        // Scattered order repeats a block only within its window: keep a window's worth of
        // unique blocks (R per slot), at most 64 MiB.
        let per_window = match cfg.order {
            reel_datagen::Order::Scattered { window_blocks } => {
                window_blocks / cfg.redundancy.max(1) as usize
            }
            reel_datagen::Order::InOrder => usize::MAX,
        };
        let capacity = per_window
            .saturating_mul(2)
            .min((64 << 20) / cfg.block_size)
            .max(2);
        Ok(RecordStream {
            map: reel_datagen::SlotMap::new(&cfg),
            block_size: cfg.block_size as u64,
            cfg,
            pos: 0,
            cache: std::collections::HashMap::new(),
            order: VecDeque::new(),
            capacity,
        })
    }

    fn block(&mut self, slot: u64) -> Bytes {
        let id = self.map.id(slot);
        if let Some(b) = self.cache.get(&id) {
            return b.clone();
        }
        let mut buf = vec![0u8; self.cfg.block_size];
        reel_datagen::unique_block(&self.cfg, id, &mut buf);
        let block = Bytes::from(buf);
        if self.order.len() >= self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.cache.remove(&old);
        }
        self.cache.insert(id, block.clone());
        self.order.push_back(id);
        block
    }

    /// The next record of up to `len` bytes (only the last one is short); `None` at the end.
    pub fn next_record(&mut self, len: usize) -> Option<Bytes> {
        let total = self.cfg.total_bytes;
        if self.pos >= total || len == 0 {
            return None;
        }
        let n = (len as u64).min(total - self.pos) as usize;
        let off = (self.pos % self.block_size) as usize;
        let slot = self.pos / self.block_size;
        let record = if off + n <= self.cfg.block_size {
            self.block(slot).slice(off..off + n)
        } else {
            let mut out = Vec::with_capacity(n);
            while out.len() < n {
                let at = self.pos + out.len() as u64;
                let off = (at % self.block_size) as usize;
                let take = (self.cfg.block_size - off).min(n - out.len());
                let block = self.block(at / self.block_size);
                out.extend_from_slice(&block[off..off + take]);
            }
            Bytes::from(out)
        };
        self.pos += n as u64;
        Some(record)
    }
}

/// Generates drive `drive`'s ops on a thread of its own; the channel closes at the end (or
/// the thread stops when the receiver is dropped). The writer's ops come at most at the
/// workload's source rate; the reader's (`Direction::Read`, regenerated to compare) at once.
pub fn spawn_source(
    workload: &Workload,
    drive: usize,
    direction: Direction,
) -> anyhow::Result<mpsc::Receiver<Op>> {
    let mut stream = RecordStream::new(workload.generator(drive))?;
    let record_size = workload.record_size as usize;
    let every = workload.filemark_every;
    let immed = workload.filemark_immed;
    let total = workload.size;
    let rate = workload
        .source_rate
        .filter(|_| direction == Direction::Write);
    let (tx, rx) = mpsc::channel(workload.queue_depth as usize * 2 + 4);
    std::thread::Builder::new()
        .name(format!("datagen-{drive}"))
        .spawn(move || {
            let mut offset = 0u64;
            let mut index = 0u64;
            let started = Instant::now();
            while let Some(data) = stream.next_record(record_size) {
                let end = offset + data.len() as u64;
                // A rate-limited source has a record's last byte ready at end / rate.
                if let Some(rate) = rate {
                    let due = started + Duration::from_secs_f64(end as f64 / rate);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
                let op = Op::Record {
                    index,
                    offset,
                    data,
                };
                if tx.blocking_send(op).is_err() {
                    return;
                }
                if filemark_after(offset, end, every, total)
                    && tx
                        .blocking_send(Op::Filemark { offset: end, immed })
                        .is_err()
                {
                    return;
                }
                offset = end;
                index += 1;
            }
        })
        .context("starting a generator thread")?;
    Ok(rx)
}

pub(crate) type Exec = Pin<Box<dyn Future<Output = Result<ScsiResult, ClientError>> + Send>>;

/// Creates the command's future and polls it once, which queues it on the session (see the
/// module documentation): the order of `submit` calls is the CmdSN order.
pub(crate) fn submit(
    client: &Client,
    lun: u64,
    cdb: &[u8],
    data_out: Bytes,
    data_in_len: u32,
) -> Exec {
    let client = client.clone();
    let cdb = cdb.to_vec();
    let mut fut: Exec =
        Box::pin(async move { client.execute(lun, &cdb, data_out, data_in_len).await });
    match fut
        .as_mut()
        .poll(&mut TaskContext::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => Box::pin(std::future::ready(result)),
        Poll::Pending => fut,
    }
}

/// Counters shared by the drives of a run and the per-second sampler.
pub struct Shared {
    /// Set when a drive fails or the run is interrupted: the others stop issuing commands.
    pub abort: AtomicBool,
    /// Bytes acknowledged per drive in the current phase.
    pub progress: Vec<AtomicU64>,
}

impl Shared {
    pub fn new(drives: usize) -> Arc<Shared> {
        Arc::new(Shared {
            abort: AtomicBool::new(false),
            progress: (0..drives).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    pub fn total(&self) -> u64 {
        self.progress
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .sum()
    }

    pub fn reset(&self) {
        for p in &self.progress {
            p.store(0, Ordering::Relaxed);
        }
    }
}

/// Returned by a drive that stopped because another one failed.
#[derive(Debug)]
pub struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped because another drive failed or the run was interrupted")
    }
}

impl std::error::Error for Aborted {}

/// What one drive did in a data phase.
#[derive(Clone, Debug)]
pub struct DrivePhase {
    pub bytes: u64,
    pub records: u64,
    pub filemarks: u64,
    pub started: Instant,
    /// The last data command (WRITE/READ of a record) completed.
    pub data_end: Instant,
    /// The phase's last command (the final WRITE FILEMARKS for writes) completed.
    pub finished: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Write,
    Read,
}

struct InFlight {
    exec: Exec,
    op: Op,
    cdb: [u8; 6],
}

fn op_context(op: &Op) -> String {
    match op {
        Op::Record {
            index,
            offset,
            data,
        } => {
            format!("record {index}, {} bytes at byte {offset}", data.len())
        }
        Op::Filemark { offset, .. } => format!("filemark after byte {offset}"),
    }
}

/// Checks one completed command; the bytes it moved.
fn check(drive: &Drive, dir: Direction, slot: &InFlight, r: ScsiResult) -> anyhow::Result<u64> {
    let context = op_context(&slot.op);
    match (&slot.op, dir) {
        (Op::Record { data, .. }, Direction::Write) => {
            if r.status != 0 {
                return Err(drive.failure(drive.lun, &slot.cdb, &r, &context).into());
            }
            Ok(data.len() as u64)
        }
        (Op::Filemark { .. }, Direction::Write) => {
            if r.status != 0 {
                return Err(drive.failure(drive.lun, &slot.cdb, &r, &context).into());
            }
            Ok(0)
        }
        (Op::Record { data, offset, .. }, Direction::Read) => {
            if r.status != 0 {
                return Err(drive.failure(drive.lun, &slot.cdb, &r, &context).into());
            }
            if r.data.len() != data.len() || r.residual != 0 {
                bail!(
                    "{} LUN {}: READ(6) ({context}) returned {} bytes (residual {}), expected {}",
                    drive.name,
                    drive.lun,
                    r.data.len(),
                    r.residual,
                    data.len()
                );
            }
            if r.data != *data {
                let at = r
                    .data
                    .iter()
                    .zip(data.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                bail!(
                    "{} LUN {}: READ(6) ({context}) returned different data: first difference at byte {} of the record (tape byte {}): read {:#04x}, written {:#04x}",
                    drive.name,
                    drive.lun,
                    at,
                    offset + at as u64,
                    r.data[at],
                    data[at]
                );
            }
            Ok(data.len() as u64)
        }
        (Op::Filemark { .. }, Direction::Read) => {
            expect_filemark(drive, &slot.cdb, &r, &context)?;
            Ok(0)
        }
    }
}

/// A READ that must stop at a filemark: CHECK CONDITION with the FILEMARK bit.
fn expect_filemark(drive: &Drive, cdb: &[u8], r: &ScsiResult, context: &str) -> anyhow::Result<()> {
    let failure = drive.failure(drive.lun, cdb, r, context);
    let filemark = r.status == 0x02 && failure.parsed_sense().is_some_and(|s| s.filemark);
    if !filemark {
        bail!("expected a filemark: {failure}");
    }
    Ok(())
}

/// Runs one data phase on one drive: `depth` commands in flight, in op order.
async fn pipeline(
    drive: &Drive,
    dir: Direction,
    mut source: mpsc::Receiver<Op>,
    depth: usize,
    record_size: u32,
    shared: &Shared,
    index: usize,
) -> anyhow::Result<DrivePhase> {
    let started = Instant::now();
    let mut data_end = started;
    let (mut bytes, mut records, mut filemarks) = (0u64, 0u64, 0u64);
    let mut inflight: VecDeque<InFlight> = VecDeque::with_capacity(depth);
    let mut open = true;
    let result: anyhow::Result<()> = async {
        loop {
            while open && inflight.len() < depth {
                if shared.abort.load(Ordering::Relaxed) || crate::harness::interrupted() {
                    return Err(Aborted.into());
                }
                let Some(op) = source.recv().await else {
                    open = false;
                    break;
                };
                let (cdb, data_out, data_in) = match (&op, dir) {
                    (Op::Record { data, .. }, Direction::Write) => (
                        ssc::write6(Transfer::Variable(data.len() as u32)),
                        data.clone(),
                        0,
                    ),
                    (Op::Record { data, .. }, Direction::Read) => (
                        ssc::read6(Transfer::Variable(data.len() as u32), false),
                        Bytes::new(),
                        data.len() as u32,
                    ),
                    (Op::Filemark { immed, .. }, Direction::Write) => {
                        (ssc::write_filemarks(1, *immed), Bytes::new(), 0)
                    }
                    (Op::Filemark { .. }, Direction::Read) => (
                        ssc::read6(Transfer::Variable(record_size), false),
                        Bytes::new(),
                        record_size,
                    ),
                };
                let exec = submit(&drive.client, drive.lun, &cdb, data_out, data_in);
                inflight.push_back(InFlight { exec, op, cdb });
            }
            let Some(mut slot) = inflight.pop_front() else {
                return Ok(());
            };
            let r = tokio::time::timeout(drive.timeout, &mut slot.exec)
                .await
                .map_err(|_| {
                    anyhow!(
                        "{} LUN {}: {} ({}) did not complete within {} s",
                        drive.name,
                        drive.lun,
                        describe::command_name(&slot.cdb),
                        op_context(&slot.op),
                        drive.timeout.as_secs()
                    )
                })?
                .with_context(|| {
                    format!(
                        "{} LUN {}: {} ({})",
                        drive.name,
                        drive.lun,
                        describe::command_name(&slot.cdb),
                        op_context(&slot.op)
                    )
                })?;
            let moved = check(drive, dir, &slot, r)?;
            match slot.op {
                Op::Record { .. } => {
                    records += 1;
                    bytes += moved;
                    data_end = Instant::now();
                    shared.progress[index].fetch_add(moved, Ordering::Relaxed);
                }
                Op::Filemark { .. } => filemarks += 1,
            }
        }
    }
    .await;
    if let Err(e) = result {
        shared.abort.store(true, Ordering::Relaxed);
        // Let what is still in flight finish (bounded) so the session is quiet for logout.
        for slot in inflight.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(30), slot.exec).await;
        }
        return Err(e);
    }
    Ok(DrivePhase {
        bytes,
        records,
        filemarks,
        started,
        data_end,
        finished: Instant::now(),
    })
}

/// Loads the drive's cartridge (MOVE MEDIUM when there is a changer), waits until it is
/// ready, checks the record size against READ BLOCK LIMITS, selects variable block mode and
/// rewinds.
pub async fn load_and_prepare(drive: &Drive, record_size: u32) -> anyhow::Result<()> {
    let lun = drive.lun;
    if let Some(c) = drive.changer {
        drive
            .good(
                c.lun,
                &smc::move_medium(c.transport, c.slot, c.drive_element),
                Bytes::new(),
                0,
                &format!(
                    "load: slot {:#06x} to drive element {:#06x}",
                    c.slot, c.drive_element
                ),
            )
            .await?;
    }
    let loaded = match drive.changer {
        Some(c) => format!(
            "after loading drive element {:#06x} (is it LUN {lun}?)",
            c.drive_element
        ),
        None => "waiting for the preloaded cartridge".to_string(),
    };
    drive
        .wait_ready(lun, Duration::from_secs(60), &loaded)
        .await?;
    let limits = drive
        .good(
            lun,
            &ssc::READ_BLOCK_LIMITS,
            Bytes::new(),
            6,
            "checking the record size",
        )
        .await?;
    let ssc::BlockLimits { max, min, .. } = ssc::parse_block_limits(&limits)?;
    let min = u32::from(min);
    if record_size > max || record_size < min {
        bail!(
            "{} LUN {lun}: record size {record_size} is outside the drive's block limits ({min} to {max} bytes)",
            drive.name
        );
    }
    let sense = drive
        .good(
            lun,
            &spc::mode_sense6(spc::ALL_PAGES, 255),
            Bytes::new(),
            255,
            "reading the block descriptor",
        )
        .await?;
    let select = spc::parse_mode_sense6(&sense)?.select_block_length(0);
    drive
        .good(
            lun,
            &spc::mode_select6(select.len() as u8),
            Bytes::copy_from_slice(&select),
            0,
            "selecting variable block mode",
        )
        .await?;
    let sense = drive
        .good(
            lun,
            &spc::mode_sense6(spc::ALL_PAGES, 255),
            Bytes::new(),
            255,
            "checking variable block mode",
        )
        .await?;
    if let Some(len) = spc::parse_mode_sense6(&sense)?
        .block_length()
        .filter(|l| *l != 0)
    {
        bail!(
            "{} LUN {lun}: still in fixed block mode ({len}-byte blocks) after MODE SELECT",
            drive.name
        );
    }
    drive
        .good(lun, &ssc::REWIND, Bytes::new(), 0, "rewind before writing")
        .await?;
    Ok(())
}

/// Writes the drive's stream, then one filemark with IMMED=0 (the synchronising point).
pub async fn write(
    drive: &Drive,
    workload: &Workload,
    index: usize,
    shared: &Shared,
) -> anyhow::Result<DrivePhase> {
    let source = spawn_source(workload, index, Direction::Write)?;
    let mut phase = pipeline(
        drive,
        Direction::Write,
        source,
        workload.queue_depth as usize,
        workload.record_size,
        shared,
        index,
    )
    .await?;
    drive
        .good(
            drive.lun,
            &ssc::write_filemarks(1, false),
            Bytes::new(),
            0,
            "final filemark (IMMED=0)",
        )
        .await?;
    phase.filemarks += 1;
    phase.finished = Instant::now();
    Ok(phase)
}

pub async fn rewind(drive: &Drive, context: &str) -> anyhow::Result<()> {
    drive
        .good(drive.lun, &ssc::REWIND, Bytes::new(), 0, context)
        .await
        .map(drop)
}

/// Reads the drive's stream back and compares every record with the regenerated one.
pub async fn read(
    drive: &Drive,
    workload: &Workload,
    index: usize,
    shared: &Shared,
) -> anyhow::Result<DrivePhase> {
    let source = spawn_source(workload, index, Direction::Read)?;
    pipeline(
        drive,
        Direction::Read,
        source,
        workload.queue_depth as usize,
        workload.record_size,
        shared,
        index,
    )
    .await
}

/// After the read: the final filemark must be next; then rewind and unload (LOAD UNLOAD,
/// and MOVE MEDIUM back to the slot when there is a changer).
pub async fn finish(drive: &Drive, record_size: u32) -> anyhow::Result<()> {
    let cdb = ssc::read6(Transfer::Variable(record_size), false);
    let r = drive
        .raw(drive.lun, &cdb, Bytes::new(), record_size)
        .await?;
    expect_filemark(drive, &cdb, &r, "reading past the last record")?;
    rewind(drive, "rewind after reading").await?;
    if let Some(c) = drive.changer {
        drive
            .good(drive.lun, &ssc::UNLOAD, Bytes::new(), 0, "unload")
            .await?;
        drive
            .good(
                c.lun,
                &smc::move_medium(c.transport, c.drive_element, c.slot),
                Bytes::new(),
                0,
                &format!(
                    "unload: drive element {:#06x} to slot {:#06x}",
                    c.drive_element, c.slot
                ),
            )
            .await?;
    }
    Ok(())
}

/// After a failure: rewind, unload and put the cartridge back where it came from, ignoring
/// errors (each command gets a few seconds), so an external library is left as it was found.
pub async fn unload_best_effort(drive: &Drive) {
    let quick = Drive {
        timeout: Duration::from_secs(20),
        ..drive.clone()
    };
    let Some(c) = quick.changer else {
        return;
    };
    let _ = quick.raw(quick.lun, &ssc::REWIND, Bytes::new(), 0).await;
    let _ = quick.raw(quick.lun, &ssc::UNLOAD, Bytes::new(), 0).await;
    let _ = quick
        .raw(
            c.lun,
            &smc::move_medium(c.transport, c.drive_element, c.slot),
            Bytes::new(),
            0,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filemark_positions() {
        // Every 1000 bytes with 300-byte records: after records ending at 1200, 2100, 3000.
        let total = 3300;
        let ends: Vec<u64> = (0..11u64)
            .map(|i| ((i + 1) * 300).min(total))
            .filter(|&end| filemark_after(end.saturating_sub(300), end, Some(1000), total))
            .collect();
        assert_eq!(ends, [1200, 2100, 3000]);
        // Never after the last record (the final filemark is written anyway), never without K.
        assert!(!filemark_after(3000, 3300, Some(100), 3300));
        assert!(!filemark_after(0, 300, None, 3300));
    }

    fn workload(size: u64, record_size: u32, every: Option<u64>) -> Workload {
        Workload {
            size,
            record_size,
            queue_depth: 2,
            filemark_every: every,
            filemark_immed: false,
            same_data: false,
            randomness: 0.25,
            redundancy: 8,
            incompressible_share: 0.0,
            block_size: 4096,
            window_blocks: 64,
            seed: 5,
            source_rate: None,
        }
    }

    fn collect(w: &Workload, drive: usize) -> Vec<Op> {
        let mut rx = spawn_source(w, drive, Direction::Write).unwrap();
        let mut out = Vec::new();
        while let Some(op) = rx.blocking_recv() {
            out.push(op);
        }
        out
    }

    #[test]
    fn record_streams_are_the_generators_stream() {
        for (total, block, record) in [
            (3 << 20, 64 << 10, 64 << 10),
            (3 << 20, 64 << 10, 16 << 10),
            (3 << 20, 64 << 10, 256 << 10),
            ((3 << 20) + 777, 64 << 10, 100_000),
            (1 << 20, 4096, 1),
        ] {
            let cfg = reel_datagen::GenConfig {
                seed: 9,
                block_size: block,
                randomness: 0.25,
                redundancy: 8,
                order: reel_datagen::Order::Scattered { window_blocks: 16 },
                incompressible_share: 0.0,
                total_bytes: total,
            };
            let mut generator = reel_datagen::Generator::new(cfg.clone()).unwrap();
            let mut expected = vec![0u8; total as usize];
            assert_eq!(generator.fill(&mut expected), total as usize);
            let mut stream = RecordStream::new(cfg).unwrap();
            let mut got = Vec::new();
            let mut records = 0;
            while let Some(r) = stream.next_record(record) {
                assert!(r.len() == record || got.len() + r.len() == total as usize);
                got.extend_from_slice(&r);
                records += 1;
            }
            assert_eq!(records, (total as usize).div_ceil(record));
            assert!(
                got == expected,
                "total {total}, block {block}, record {record}"
            );
        }
    }

    #[test]
    fn sources_cut_records_place_filemarks_and_repeat_exactly() {
        let w = workload(10_000, 3000, Some(4000));
        let ops = collect(&w, 0);
        let shape: Vec<String> = ops
            .iter()
            .map(|op| match op {
                Op::Record { data, offset, .. } => format!("r{offset}+{}", data.len()),
                Op::Filemark { offset, .. } => format!("fm{offset}"),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "r0+3000",
                "r3000+3000",
                "fm6000",
                "r6000+3000",
                "fm9000",
                "r9000+1000"
            ]
        );
        // The read phase regenerates the same bytes; another drive gets another stream.
        let again = collect(&w, 0);
        let bytes = |ops: &[Op]| -> Vec<u8> {
            ops.iter()
                .filter_map(|op| match op {
                    Op::Record { data, .. } => Some(data.to_vec()),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        assert_eq!(bytes(&ops), bytes(&again));
        assert_eq!(bytes(&ops).len(), 10_000);
        assert_ne!(bytes(&ops), bytes(&collect(&w, 1)));
    }
}
