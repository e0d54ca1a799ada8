//! A tape partition on a chunk-store stream.

use reel_chunkstore::{StoreError, Stream};
use reel_media::{ObjectKind, PartitionStore, Unsynced};

use crate::record_map::{RUNS_PER_PAGE, Run, RunKind, decode_page, encode_page};

/// Flush the stream and record map once the catalog rows waiting for the next flush take this
/// much memory (`Stream::unflushed_catalog_bytes`). A flush only bounds memory: a crash loses
/// everything after the last synchronising point, flushed or not, and reads flush first. Each
/// flush costs the catalog file pages (non-durable commits copy the durable pages they touch,
/// and bodies whose chunks sit in the still-open pack are rewritten placed at a later flush):
/// flushing every 256 MiB written, as before, left a 2 GiB tape of 1 MiB records with a 14.1 MB
/// catalog for 9.5 MB of tables (`docs/design/efficiency.md` §39). 64 MiB of rows is ~10 GiB of
/// tapewrite data at 1 MiB records, ~3.5 GiB of unique data at 64 KiB.
const UNFLUSHED_CATALOG_MAX: usize = 64 << 20;
/// Also flush after this many bytes written: `unflushed_catalog_bytes` counts rows and bodies,
/// and this bounds whatever else a long unsynchronised write keeps per record.
const FLUSH_EVERY: u64 = 64 << 30;

/// One partition of a mounted cartridge.
pub struct ChunkPartition {
    stream: Stream,
    runs: Vec<Run>,
    /// Object numbers of the filemarks, ascending.
    filemarks: Vec<u64>,
    /// Pages whose runs changed since the last flush start here.
    dirty_page: Option<usize>,
    /// Pages present in the sidecar after the last flush.
    stored_pages: usize,
    unflushed: u64,
    /// Objects and data bytes at the last successful sync (or open: what a reopened stream
    /// holds is durable). Everything after them is what READ POSITION reports as buffered.
    /// A sync of another stream of the same store may make flushed bytes durable earlier;
    /// they still count until this partition syncs, so the count never understates.
    synced_objects: u64,
    synced_bytes: u64,
    /// [`UNFLUSHED_CATALOG_MAX`]; smaller in tests.
    flush_at: usize,
}

impl ChunkPartition {
    /// Opens a partition on `stream`, loading its record map.
    pub fn open(stream: Stream) -> Result<ChunkPartition, StoreError> {
        let pages = stream.sidecar_range(0..u64::MAX)?;
        let mut runs = Vec::new();
        for (i, (key, bytes)) in pages.iter().enumerate() {
            if *key != i as u64 {
                return Err(StoreError::Corrupt(format!(
                    "record map page {i} is missing"
                )));
            }
            decode_page(bytes, &mut runs)?;
        }
        let end = runs.last().map_or(0, |r| r.offset + r.bytes());
        if end != stream.len() {
            return Err(StoreError::Corrupt(format!(
                "record map covers {end} bytes but the partition holds {}",
                stream.len()
            )));
        }
        let filemarks = runs
            .iter()
            .filter(|r| r.kind == RunKind::Filemarks)
            .flat_map(|r| r.first..r.end())
            .collect();
        let synced_objects = runs.last().map_or(0, Run::end);
        Ok(ChunkPartition {
            stream,
            runs,
            filemarks,
            dirty_page: None,
            stored_pages: pages.len(),
            unflushed: 0,
            synced_objects,
            synced_bytes: end,
            flush_at: UNFLUSHED_CATALOG_MAX,
        })
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The records holding stream bytes `offset..offset + len`: (first, last) object numbers.
    /// Filemarks hold no bytes, so they are never named.
    pub fn records_at(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let object_at = |at: u64| {
            let i = self.runs.partition_point(|r| r.offset + r.bytes() <= at);
            let run = self.runs.get(i)?;
            let rec = run.kind.record_len()?;
            Some(run.first + (at - run.offset) / u64::from(rec))
        };
        let first = object_at(offset)?;
        let last = object_at(offset + len.max(1) - 1)?;
        Some((first, last))
    }

    fn run_of(&self, n: u64) -> Result<&Run, StoreError> {
        let i = self.runs.partition_point(|r| r.end() <= n);
        self.runs.get(i).ok_or_else(|| {
            StoreError::Invalid(format!(
                "object {n} is past end-of-data ({})",
                self.object_count()
            ))
        })
    }

    /// Reads record `n` into `out` (emptied first, and again on error) with `read`.
    fn read_staged<B>(
        &mut self,
        n: u64,
        out: &mut B,
        clear: fn(&mut B),
        read: impl FnOnce(&Stream, u64, usize, &mut B) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let (offset, len) = self.record_at(n)?;
        clear(out);
        // The stream's reads commit unflushed appends before reading: the record map must be
        // staged to go with them, or a crash after the next durable commit leaves bytes no
        // run describes and the partition no longer opens.
        self.stage_map();
        let r = read(&self.stream, offset, len, out);
        if r.is_err() {
            clear(out);
        }
        r
    }

    /// Where record `n` lies in the stream: its offset and length.
    fn record_at(&self, n: u64) -> Result<(u64, usize), StoreError> {
        let run = self.run_of(n)?;
        let Some(len) = run.kind.record_len() else {
            return Err(StoreError::Invalid(format!(
                "object {n} is a filemark, not a record"
            )));
        };
        Ok((run.offset + (n - run.first) * u64::from(len), len as usize))
    }

    fn push(&mut self, kind: RunKind, count: u64) {
        match self.runs.last_mut() {
            Some(last) if last.kind == kind => last.count += count,
            _ => {
                let (first, offset) = self
                    .runs
                    .last()
                    .map_or((0, 0), |r| (r.end(), r.offset + r.bytes()));
                self.runs.push(Run {
                    first,
                    offset,
                    count,
                    kind,
                });
            }
        }
        self.mark_dirty(self.runs.len() - 1);
    }

    fn mark_dirty(&mut self, run_index: usize) {
        let page = run_index / RUNS_PER_PAGE;
        self.dirty_page = Some(self.dirty_page.map_or(page, |p| p.min(page)));
    }

    /// Stages the changed pages (and removal of pages no longer needed) in the sidecar.
    fn stage_map(&mut self) {
        let Some(from) = self.dirty_page.take() else {
            return;
        };
        let pages = self.runs.len().div_ceil(RUNS_PER_PAGE);
        for p in from..pages {
            let runs =
                &self.runs[p * RUNS_PER_PAGE..((p + 1) * RUNS_PER_PAGE).min(self.runs.len())];
            self.stream.set_sidecar(p as u64, Some(encode_page(runs)));
        }
        for p in pages..self.stored_pages {
            self.stream.set_sidecar(p as u64, None);
        }
        self.stored_pages = pages;
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.stage_map();
        self.stream.flush()?;
        self.unflushed = 0;
        Ok(())
    }

    /// `shared`, when given, holds the same bytes as `data` (the store may keep them uncopied).
    fn append(
        &mut self,
        data: &[u8],
        kind: fn(u32) -> RunKind,
        shared: Option<&bytes::Bytes>,
    ) -> Result<(), StoreError> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| StoreError::Invalid(format!("record of {} bytes", data.len())))?;
        match shared {
            Some(bytes) => self.stream.append_record_shared(bytes.clone())?,
            None => self.stream.append_record(data)?,
        }
        self.push(kind(len), 1);
        self.unflushed += u64::from(len);
        if self.unflushed >= FLUSH_EVERY || self.stream.unflushed_catalog_bytes() >= self.flush_at {
            self.flush()?;
        }
        Ok(())
    }
}

impl PartitionStore for ChunkPartition {
    type Error = StoreError;

    fn object_count(&self) -> u64 {
        self.runs.last().map_or(0, Run::end)
    }

    fn object(&self, n: u64) -> Result<ObjectKind, StoreError> {
        Ok(match self.run_of(n)?.kind {
            RunKind::Records(len) => ObjectKind::Record { len },
            RunKind::EncryptedRecords(len) => ObjectKind::EncryptedRecord { len },
            RunKind::Filemarks => ObjectKind::Filemark,
        })
    }

    fn read_record(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        self.read_staged(n, buf, Vec::clear, |stream, offset, len, buf| {
            stream.read_at_append(offset, len, buf)
        })
    }

    fn read_record_shared(
        &mut self,
        n: u64,
        out: &mut Vec<bytes::Bytes>,
    ) -> Result<(), StoreError> {
        self.read_staged(n, out, Vec::clear, |stream, offset, len, out| {
            stream.read_shared(offset, len, out)
        })
    }

    fn append_record(&mut self, data: &[u8]) -> Result<(), StoreError> {
        self.append(data, RunKind::Records, None)
    }

    fn append_record_shared(&mut self, data: bytes::Bytes) -> Result<(), StoreError> {
        self.append(&data, RunKind::Records, Some(&data))
    }

    fn append_encrypted_record(&mut self, data: &[u8]) -> Result<(), StoreError> {
        self.append(data, RunKind::EncryptedRecords, None)
    }

    fn append_filemarks(&mut self, count: u32) -> Result<(), StoreError> {
        if count == 0 {
            return Ok(());
        }
        let first = self.object_count();
        self.push(RunKind::Filemarks, u64::from(count));
        self.filemarks.extend(first..first + u64::from(count));
        Ok(())
    }

    fn truncate(&mut self, n: u64) -> Result<(), StoreError> {
        if n >= self.object_count() {
            return Ok(());
        }
        let i = self.runs.partition_point(|r| r.end() <= n);
        let run = self.runs[i];
        let keep = n - run.first;
        let bytes = run.offset + Run { count: keep, ..run }.bytes();
        if keep == 0 {
            self.runs.truncate(i);
        } else {
            self.runs[i].count = keep;
            self.runs.truncate(i + 1);
        }
        self.filemarks
            .truncate(self.filemarks.partition_point(|&f| f < n));
        self.mark_dirty(self.runs.len().saturating_sub(1).min(i));
        self.stage_map();
        // The stream commits the staged map with the truncation, atomically.
        self.stream.truncate(bytes)?;
        self.unflushed = 0;
        self.synced_objects = self.synced_objects.min(n);
        self.synced_bytes = self.synced_bytes.min(bytes);
        Ok(())
    }

    fn filemarks_before(&self, n: u64) -> Result<u64, StoreError> {
        Ok(self.filemarks.partition_point(|&f| f < n) as u64)
    }

    fn filemark_position(&self, k: u64) -> Result<Option<u64>, StoreError> {
        Ok(usize::try_from(k)
            .ok()
            .and_then(|k| self.filemarks.get(k))
            .copied())
    }

    fn data_bytes(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.offset + r.bytes())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        // The stream's sync flushes (after sealing its pack, so every span body is placed at
        // once): no flush of its own first.
        self.stage_map();
        self.stream.sync()?;
        self.unflushed = 0;
        self.synced_objects = self.object_count();
        self.synced_bytes = self.data_bytes();
        Ok(())
    }

    fn unsynced(&self) -> Unsynced {
        Unsynced {
            objects: self.object_count() - self.synced_objects,
            bytes: self.data_bytes() - self.synced_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reel_backend::LocalBackend;
    use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
    use reel_media::PartitionStore;

    use super::*;

    /// 64 KiB record `seed`: an entirely random block of the project's data generator, so no
    /// two seeds share a chunk.
    fn unique_record(seed: u64) -> Vec<u8> {
        let cfg = reel_datagen::GenConfig {
            block_size: 64 << 10,
            randomness: 1.0,
            ..Default::default()
        };
        let mut record = vec![0; cfg.block_size];
        reel_datagen::unique_block(&cfg, seed, &mut record);
        record
    }

    /// A long write with no synchronising point flushes once its rows waiting for the catalog
    /// reach the bound, not after every so many bytes: memory stays bounded, and a write whose
    /// rows stay under it is written to the catalog only at its sync.
    #[test]
    fn an_unsynchronised_write_flushes_when_its_rows_reach_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(LocalBackend::open(&dir.path().join("objects")).unwrap());
        let store =
            ChunkStore::open(&dir.path().join("catalog"), backend, StoreConfig::default()).unwrap();
        let mut p = ChunkPartition::open(store.open_stream(StreamId(1)).unwrap()).unwrap();
        p.flush_at = 8 << 10;
        let mut flushes = 0;
        let mut before = 0;
        for seed in 0..96 {
            p.append_record(&unique_record(seed)).unwrap();
            // Counted once hashed: wait, so the count does not depend on the hash threads'
            // speed. The partition decided on what was applied when it took the record, so
            // this one record's rows (~1.3 KB) may be over the bound.
            p.stream().finish_hashing().unwrap();
            let now = p.stream().unflushed_catalog_bytes();
            assert!(
                now < p.flush_at + (2 << 10),
                "{now} bytes of rows waiting after record {seed}"
            );
            if now < before {
                flushes += 1;
            }
            before = now;
        }
        // 96 unique 64 KiB records: ~3,000 chunks, ~110 KB of rows (records still being
        // hashed count once they are applied).
        assert!(flushes >= 3, "{flushes} flushes");

        // Under the default bound, the same write waits for its sync.
        let mut q = ChunkPartition::open(store.open_stream(StreamId(2)).unwrap()).unwrap();
        for seed in 100..148 {
            q.append_record(&unique_record(seed)).unwrap();
        }
        q.stream().finish_hashing().unwrap();
        let waiting = q.stream().unflushed_catalog_bytes();
        assert!(waiting > 8 << 10, "{waiting}");
        q.sync().unwrap();
        assert_eq!(q.stream().unflushed_catalog_bytes(), 0);
        let mut record = Vec::new();
        q.read_record(47, &mut record).unwrap();
        assert_eq!(record, unique_record(147));
    }
}
