//! A tape worker: one session, one drive. It loads a cartridge through the changer, reads it
//! back against the model when it has not been checked since the last restart, then mixes
//! appends (several WRITE(6) in flight), filemarks with and without IMMED, LOCATE and reads
//! of earlier records, READ POSITION and REWIND, and unloads through the changer again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use reel_iscsi::initiator::ScsiResult;
use reel_scsi::{SenseKey, parse_sense};

use super::library::{Library, Move};
use super::model::{self, CartModel, Matcher, Obj, Read, Rng};
use super::{Epoch, Soak};
use crate::session::Drive;
use crate::tape::pipeline::{Exec, submit};
use reel_scsi::initiator::ssc::{self, Transfer};
use reel_scsi::initiator::{describe, smc};

/// Largest record the soak writes (and the allocation of its reads).
pub const MAX_RECORD: u32 = 256 << 10;
const SIZES: [u32; 6] = [512, 4096, 16 << 10, 64 << 10, 128 << 10, MAX_RECORD];

/// What a READ ended with.
enum ReadEnd {
    Object(Read),
    EndOfData,
}

fn classify(drive: &Drive, cdb: &[u8], r: ScsiResult, context: &str) -> anyhow::Result<ReadEnd> {
    if r.status == 0 {
        return Ok(ReadEnd::Object(Read::Record(r.data)));
    }
    let sense = r.sense.as_deref().and_then(|s| parse_sense(s).ok());
    match sense {
        Some(s) if r.status == 2 && s.filemark => Ok(ReadEnd::Object(Read::Filemark)),
        Some(s) if r.status == 2 && s.key == SenseKey::BLANK_CHECK => Ok(ReadEnd::EndOfData),
        _ => Err(drive.failure(drive.lun, cdb, &r, context).into()),
    }
}

/// [`pipeline`]'s command for the next object: a variable-length READ(6) of up to
/// `MAX_RECORD` bytes (SILI, so a shorter record is no error).
fn read_next(_: usize) -> (Vec<u8>, Bytes, u32) {
    (
        ssc::read6(Transfer::Variable(MAX_RECORD), true).to_vec(),
        Bytes::new(),
        MAX_RECORD,
    )
}

/// Runs `n` commands with up to `depth` in flight, in order; `make(i)` builds command `i`,
/// `done(i, result)` sees each answer in order and returns false to stop issuing more.
async fn pipeline(
    drive: &Drive,
    n: usize,
    depth: usize,
    mut make: impl FnMut(usize) -> (Vec<u8>, Bytes, u32),
    mut done: impl FnMut(usize, &[u8], ScsiResult) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let mut inflight: VecDeque<(usize, Vec<u8>, Exec)> = VecDeque::new();
    let mut next = 0;
    let mut go_on = true;
    loop {
        while go_on && next < n && inflight.len() < depth {
            let (cdb, out, len) = make(next);
            let exec = submit(&drive.client, drive.lun, &cdb, out, len);
            inflight.push_back((next, cdb, exec));
            next += 1;
        }
        let Some((i, cdb, exec)) = inflight.pop_front() else {
            return Ok(());
        };
        let r = tokio::time::timeout(drive.timeout, exec)
            .await
            .map_err(|_| anyhow!("{}: {} timed out", drive.name, describe::command_name(&cdb)))?
            .with_context(|| format!("{}: {}", drive.name, describe::command_name(&cdb)))?;
        match done(i, &cdb, r) {
            Ok(more) => go_on &= more,
            Err(e) => {
                // Let what is in flight finish so the session stays usable.
                for (_, _, exec) in inflight.drain(..) {
                    let _ = tokio::time::timeout(Duration::from_secs(30), exec).await;
                }
                return Err(e);
            }
        }
    }
}

/// MOVE MEDIUM for `mv` (reserved by the caller), retried after unit attentions (the API's
/// imports and exports raise them on every nexus). Counted; any other error is a failure.
pub async fn move_medium(
    soak: &Soak,
    lib: &Library,
    session: &Drive,
    mv: &Move,
    keep: bool,
) -> anyhow::Result<()> {
    let cdb = smc::move_medium(lib.transport, mv.from, mv.to);
    lib.begin(mv);
    for _ in 0..16 {
        // A transport error leaves the move in doubt (the caller sees the kill).
        let r = session.raw(lib.changer_lun, &cdb, Bytes::new(), 0).await?;
        if r.status == 0 {
            lib.finish(mv, true, keep);
            soak.stats.moves.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if r.status == 2 && describe::is_unit_attention(r.sense.as_deref()) {
            soak.stats.unit_attentions.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        lib.finish(mv, false, false);
        return Err(session
            .failure(
                lib.changer_lun,
                &cdb,
                &r,
                &format!(
                    "{} from {:#06x} to {:#06x} (the model had both free for it)",
                    mv.barcode, mv.from, mv.to
                ),
            )
            .into());
    }
    lib.finish(mv, false, false);
    bail!(
        "{}: MOVE MEDIUM keeps reporting unit attentions",
        session.name
    )
}

/// One tape worker for one epoch; errors after the kill began are the kill's.
pub async fn worker(soak: Arc<Soak>, epoch: Arc<Epoch>, lib: Arc<Library>, d: usize) {
    let name = format!("library {} drive {d}", lib.index);
    let result = run(&soak, &epoch, &lib, d, &name).await;
    soak.worker_ended(&epoch, &name, result);
}

async fn run(
    soak: &Soak,
    epoch: &Epoch,
    lib: &Library,
    d: usize,
    name: &str,
) -> anyhow::Result<()> {
    let (lun, element) = lib.tape_drives[d];
    let client = crate::session::connect(epoch.addr, &lib.iqn).await?;
    let drive = Drive {
        name: name.to_string(),
        client,
        lun,
        changer: None,
        timeout: epoch.timeout,
    };
    drive.clear_attentions(lun).await?;
    drive.clear_attentions(lib.changer_lun).await?;
    let mut rng = Rng::new(soak.seed ^ (epoch.n as u64) << 32 ^ (lib.index * 64 + d) as u64);
    loop {
        if epoch.over() {
            return Ok(());
        }
        let held = lib.lock().at.get(&element).cloned().flatten();
        let barcode = match held {
            Some(b) => {
                lib.lock().busy.insert(b.clone());
                b
            }
            None => {
                let unverified = |b: &str| soak.needs_verify(b, epoch.n);
                let Some(mv) = lib.plan_load(&mut rng, element, &unverified, epoch.verify_only)
                else {
                    if epoch.verify_only && soak.all_verified(epoch.n) {
                        return Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                move_medium(soak, lib, &drive, &mv, true).await?;
                soak.stats.loads.fetch_add(1, Ordering::Relaxed);
                mv.barcode
            }
        };
        session(soak, epoch, &drive, &barcode, &mut rng).await?;
        // Unload: MOVE MEDIUM from the drive to a free slot (a synchronising point).
        let mv = loop {
            if let Some(mv) = lib.plan_unload(&mut rng, element) {
                break mv;
            }
            if epoch.killing.load(Ordering::SeqCst) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        move_medium(soak, lib, &drive, &mv, false).await?;
        soak.stats.unloads.fetch_add(1, Ordering::Relaxed);
        if soak.is_exact(&barcode, epoch.n) {
            soak.with_cart(&barcode, CartModel::synced);
        }
    }
}

/// What happens between load and unload.
async fn session(
    soak: &Soak,
    epoch: &Epoch,
    drive: &Drive,
    barcode: &str,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    if soak.with_cart(barcode, |m| m.quarantined) {
        return Ok(());
    }
    // Ready, block limits, variable block mode, rewind.
    crate::tape::pipeline::load_and_prepare(drive, MAX_RECORD).await?;
    soak.stats.rewinds.fetch_add(1, Ordering::Relaxed);
    // Position (logical object): 0 after the rewind; a read-back leaves it at end of data.
    let mut pos = 0;
    if soak.is_exact(barcode, epoch.n) {
        soak.with_cart(barcode, CartModel::synced);
    } else {
        if !verify(soak, epoch, drive, barcode).await? {
            return Ok(());
        }
        pos = soak.with_cart(barcode, |m| m.current().len());
    }
    if epoch.verify_only {
        return Ok(());
    }
    let steps = 4 + rng.below(16);
    for _ in 0..steps {
        if epoch.over() {
            break;
        }
        let len = soak.with_cart(barcode, |m| m.current().len());
        let r = rng.below(100);
        if r < 45 {
            let full = soak.with_cart(barcode, |m| model::record_bytes(m.current()))
                >= soak.cartridge_bytes;
            if full {
                // Start over from the beginning: the next write truncates (SSC-4 §4.2.9).
                rewind(soak, drive, barcode, true).await?;
                pos = 0;
            } else if pos != len {
                locate(soak, drive, pos, len).await?;
                pos = len;
            }
            let n = 1 + rng.below(16) as usize;
            pos = append(soak, drive, barcode, pos, n, rng).await?;
        } else if r < 63 {
            if pos != len {
                locate(soak, drive, pos, len).await?;
                pos = len;
            }
            let sync = r >= 55;
            soak.with_cart(barcode, |m| m.write_at(pos, Obj::Filemark));
            pos += 1;
            drive
                .good(
                    drive.lun,
                    &ssc::write_filemarks(1, !sync),
                    Bytes::new(),
                    0,
                    "filemark",
                )
                .await?;
            soak.stats.filemarks.fetch_add(1, Ordering::Relaxed);
            if sync {
                soak.stats.sync_filemarks.fetch_add(1, Ordering::Relaxed);
                soak.with_cart(barcode, CartModel::synced);
            }
        } else if r < 80 && len > 0 {
            let at = rng.below(len as u64) as usize;
            let n = (1 + rng.below(16) as usize).min(len - at);
            locate(soak, drive, pos, at).await?;
            read_back(soak, drive, barcode, at, n).await?;
            pos = at + n;
        } else if r < 90 {
            rewind(soak, drive, barcode, true).await?;
            pos = 0;
        } else {
            let form = ssc::PositionForm::Short;
            let data = drive
                .good(
                    drive.lun,
                    &ssc::read_position(form),
                    Bytes::new(),
                    20,
                    "READ POSITION",
                )
                .await?;
            soak.stats.read_positions.fetch_add(1, Ordering::Relaxed);
            let at = ssc::parse_read_position(form, &data)
                .with_context(|| format!("{}: READ POSITION", drive.name))?
                .object as usize;
            if at != pos {
                bail!(
                    "{} ({barcode}): READ POSITION says object {at}, the model {pos}",
                    drive.name
                );
            }
        }
    }
    Ok(())
}

async fn rewind(soak: &Soak, drive: &Drive, barcode: &str, exact: bool) -> anyhow::Result<()> {
    drive
        .good(drive.lun, &ssc::REWIND, Bytes::new(), 0, "rewind")
        .await?;
    soak.stats.rewinds.fetch_add(1, Ordering::Relaxed);
    if exact {
        soak.with_cart(barcode, CartModel::synced);
    }
    Ok(())
}

async fn locate(soak: &Soak, drive: &Drive, from: usize, to: usize) -> anyhow::Result<()> {
    drive
        .good(
            drive.lun,
            &ssc::locate10(to as u32, None),
            Bytes::new(),
            0,
            &format!("from object {from} to object {to}"),
        )
        .await?;
    soak.stats.locates.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Writes `n` records at `pos` with up to the queue depth in flight; the new position.
async fn append(
    soak: &Soak,
    drive: &Drive,
    barcode: &str,
    pos: usize,
    n: usize,
    rng: &mut Rng,
) -> anyhow::Result<usize> {
    let mut records = Vec::with_capacity(n);
    for i in 0..n {
        let len = *rng.pick(&SIZES).expect("sizes");
        let seq = soak.seq.fetch_add(1, Ordering::Relaxed);
        records.push((seq, len));
        // In the model before it is sent: an unanswered write may still be kept.
        soak.with_cart(barcode, |m| m.write_at(pos + i, Obj::Record { seq, len }));
    }
    let depth = soak.queue_depth;
    pipeline(
        drive,
        n,
        depth,
        |i| {
            let (seq, len) = records[i];
            (
                ssc::write6(Transfer::Variable(len)).to_vec(),
                Bytes::from(model::record(barcode, seq, len)),
                0,
            )
        },
        |i, cdb, r| {
            if r.status != 0 {
                return Err(drive
                    .failure(
                        drive.lun,
                        cdb,
                        &r,
                        &format!("{barcode} record at object {}", pos + i),
                    )
                    .into());
            }
            soak.stats.records_written.fetch_add(1, Ordering::Relaxed);
            soak.stats
                .bytes_written
                .fetch_add(u64::from(records[i].1), Ordering::Relaxed);
            Ok(true)
        },
    )
    .await?;
    Ok(pos + n)
}

/// Reads `n` objects from `at` (already positioned) and compares them with the model,
/// which is exact in this epoch.
async fn read_back(
    soak: &Soak,
    drive: &Drive,
    barcode: &str,
    at: usize,
    n: usize,
) -> anyhow::Result<()> {
    let expected: Vec<Obj> = soak.with_cart(barcode, |m| m.current()[at..at + n].to_vec());
    pipeline(drive, n, soak.queue_depth, read_next, |i, cdb, r| {
        let context = format!("{barcode} object {}", at + i);
        match classify(drive, cdb, r, &context)? {
            ReadEnd::EndOfData => bail!(
                "{} ({context}): end of data, the model has {} objects",
                drive.name,
                at + n
            ),
            ReadEnd::Object(got) => {
                model::check(barcode, &expected[i], &got).map_err(|m| {
                    anyhow!("{} ({context}) read back after LOCATE: {m}", drive.name)
                })?;
                if let Read::Record(d) = got {
                    soak.stats.records_read.fetch_add(1, Ordering::Relaxed);
                    soak.stats
                        .bytes_verified
                        .fetch_add(d.len() as u64, Ordering::Relaxed);
                }
                Ok(true)
            }
        }
    })
    .await
}

/// Reads the whole cartridge (from the beginning, where `load_and_prepare` left it) and
/// checks it against every content the model allows; true if it matched. A mismatch is a
/// failure and the cartridge is set aside.
async fn verify(soak: &Soak, epoch: &Epoch, drive: &Drive, barcode: &str) -> anyhow::Result<bool> {
    let model = soak.with_cart(barcode, |m| m.clone());
    let mut matcher = Matcher::new(&model);
    let mut end = false;
    let wanted = matcher.wanted() + 1;
    pipeline(drive, wanted, soak.queue_depth, read_next, |i, cdb, r| {
        if end {
            return Ok(false);
        }
        match classify(drive, cdb, r, &format!("{barcode} object {i}"))? {
            ReadEnd::EndOfData => {
                end = true;
                Ok(false)
            }
            ReadEnd::Object(got) => {
                if matches!(got, Read::Record(_)) {
                    soak.stats.records_read.fetch_add(1, Ordering::Relaxed);
                }
                Ok(matcher.push(&got))
            }
        }
    })
    .await?;
    if !end && matcher.failure.is_none() {
        // More objects than any line has: the matcher names it.
        matcher.push(&Read::Filemark);
    }
    soak.stats.verifications.fetch_add(1, Ordering::Relaxed);
    match matcher.finish() {
        Ok((line, n)) => {
            soak.stats
                .bytes_verified
                .fetch_add(matcher.bytes, Ordering::Relaxed);
            soak.stats
                .synced_bytes_verified
                .fetch_add(matcher.synced_bytes, Ordering::Relaxed);
            soak.with_cart(barcode, |m| m.settle(line, n));
            soak.mark_verified(barcode, epoch.n);
            Ok(true)
        }
        Err(why) => {
            soak.fail(format!(
                "{} after restart {}: cartridge {barcode} {why}",
                drive.name,
                epoch.n - 1
            ));
            soak.stats.mismatches.fetch_add(1, Ordering::Relaxed);
            soak.with_cart(barcode, |m| m.quarantined = true);
            soak.mark_verified(barcode, epoch.n);
            Ok(false)
        }
    }
}
