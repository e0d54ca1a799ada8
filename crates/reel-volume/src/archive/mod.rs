//! The archive tier: a vaulted cartridge moved out of the chunk store into an archive location
//! (any [`Backend`]: a directory, another bucket or prefix) as a self-contained, verifiable
//! image, and brought back before it can be imported (docs/design/archive.md).
//!
//! A cartridge's archive state is the store record `archive/<barcode>` (absent: `available`),
//! committed with the catalog, so it moves with the cartridge's data in the same durable
//! commits. The transitions and what a crash at any point leaves:
//!
//! | step | durable state after a crash here | data |
//! |---|---|---|
//! | archive 1: record `archiving` | `archiving` → [`Archive::recover`] makes it `available` | store |
//! | archive 2: pieces, manifest (create-only), read back and checked | same (recovery notes the partial image for [`Archive::purge_images`]) | store (+ a partial image, garbage) |
//! | archive 3: record `archived`, *then* delete the partitions' streams, sync | `archived` (recover deletes streams left over) | image (+ store until deleted) |
//! | restore 1: record `restoring` | `restoring`: not importable; restore again | image |
//! | restore 2: partitions truncated and rewritten from the image, synced | `restoring` | image (+ part of the store) |
//! | restore 3: the manifest's cartridge info, state record deleted, sync | `available` | store + image |
//! | restore 4: image objects deleted | `available` | store |
//!
//! Because the state record is written before the streams are deleted and deleted only after
//! the rewritten streams are synced, no durable prefix of the catalog's commits (a concurrent
//! tape sync may make any of them durable early) has a cartridge that is `available` without
//! its data in the store, or `archived` without a verified image.

pub mod image;

use std::collections::BTreeMap;
use std::sync::Arc;

use reel_backend::{Backend, BackendError, Key, PutMode};
use reel_chunkstore::StoreError;
use reel_media::{ObjectKind, PartitionStore};

use self::image::{
    Entry, ImageError, Manifest, PartitionImage, PieceBuilder, PieceHeader, PieceRef,
    cartridge_prefix, decode_piece, digest, manifest_key, piece_key,
};
use crate::{CartridgeError, Cartridges, ChunkPartition};

const STATE_PREFIX: &[u8] = b"archive/";
/// `archive-purge/<barcode>/<generation:016x>`: an image no state names any more (its cartridge
/// was deleted or restored, or its archive was undone), to be deleted from the archive
/// location by [`Archive::purge_images`]. Written in the same commit that stops naming the
/// image, removed once its objects are gone, so a crash or an unreachable location in between
/// leaves the note and never a forgotten image.
const PURGE_PREFIX: &str = "archive-purge/";
const STATE_VERSION: u8 = 1;
/// Default piece size: about one pack object, so one piece is in memory at a time.
pub const DEFAULT_PIECE_SIZE: usize = 32 << 20;
/// A restore syncs its partition after this many bytes, bounding what a crash loses.
const RESTORE_SYNC_BYTES: u64 = 256 << 20;

fn state_key(barcode: &str) -> Vec<u8> {
    [STATE_PREFIX, barcode.as_bytes()].concat()
}

fn purge_key(barcode: &str, generation: u64) -> Vec<u8> {
    format!("{PURGE_PREFIX}{barcode}/{generation:016x}").into_bytes()
}

/// The record changes that stop naming image `generation` of `barcode`: its state goes and a
/// purge note comes. They go in one commit with whatever else stops naming the image (the
/// cartridge's identity when it is deleted), so no durable state names a purged image.
pub(crate) fn image_dropped(barcode: &str, generation: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    vec![
        (state_key(barcode), None),
        (purge_key(barcode, generation), Some(Vec::new())),
    ]
}

/// The objects of one generation of an image start with this (see `image::piece_key`).
fn generation_prefix(barcode: &str, generation: u64) -> String {
    format!("{}{generation:016x}.", cartridge_prefix(barcode))
}

/// Where a cartridge is, as far as the archive tier is concerned. `Available` is the absence
/// of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveState {
    /// A job is writing its image; its data is still in the store. Not importable.
    Archiving { generation: u64 },
    /// Its data is only in the archive image `generation`. Not importable.
    Archived {
        generation: u64,
        /// Host bytes of its records.
        data_bytes: u64,
        /// Bytes of the image's objects.
        image_bytes: u64,
        /// Unix seconds.
        archived_at: u64,
    },
    /// A job is bringing image `generation` back into the store. Not importable.
    Restoring { generation: u64, data_bytes: u64 },
    /// Being exported to the shared vault as share `generation` (`shared_vault.rs`). Not
    /// importable.
    Sharing { generation: u64 },
    /// In the shared vault for another store to adopt; its data stays here (pinned) until that
    /// store releases it. Not importable, not erasable.
    Shared { generation: u64, shared_at: u64 },
    /// Being adopted from another store's share `generation`. Not importable.
    Adopting { generation: u64 },
}

impl ArchiveState {
    /// `archiving`, `archived` or `restoring` (the API's names).
    pub fn name(&self) -> &'static str {
        match self {
            ArchiveState::Archiving { .. } => "archiving",
            ArchiveState::Archived { .. } => "archived",
            ArchiveState::Restoring { .. } => "restoring",
            ArchiveState::Sharing { .. } => "sharing",
            ArchiveState::Shared { .. } => "shared",
            ArchiveState::Adopting { .. } => "adopting",
        }
    }

    pub fn generation(&self) -> u64 {
        match *self {
            ArchiveState::Archiving { generation }
            | ArchiveState::Archived { generation, .. }
            | ArchiveState::Restoring { generation, .. }
            | ArchiveState::Sharing { generation }
            | ArchiveState::Shared { generation, .. }
            | ArchiveState::Adopting { generation } => generation,
        }
    }

    /// `version u8 = 1 | tag u8 | generation u64 | data_bytes u64 | image_bytes u64 | at u64`,
    /// little-endian; fields a state does not have are 0.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, generation, data, image, at) = match *self {
            ArchiveState::Archiving { generation } => (1u8, generation, 0, 0, 0),
            ArchiveState::Archived {
                generation,
                data_bytes,
                image_bytes,
                archived_at,
            } => (2, generation, data_bytes, image_bytes, archived_at),
            ArchiveState::Restoring {
                generation,
                data_bytes,
            } => (3, generation, data_bytes, 0, 0),
            ArchiveState::Sharing { generation } => (4, generation, 0, 0, 0),
            ArchiveState::Shared {
                generation,
                shared_at,
            } => (5, generation, 0, 0, shared_at),
            ArchiveState::Adopting { generation } => (6, generation, 0, 0, 0),
        };
        let mut out = vec![STATE_VERSION, tag];
        for v in [generation, data, image, at] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<ArchiveState, String> {
        if bytes.len() != 34 {
            return Err(format!("{} bytes, not 34", bytes.len()));
        }
        if bytes[0] != STATE_VERSION {
            return Err(format!("version {}", bytes[0]));
        }
        let field = |i: usize| {
            let mut a = [0; 8];
            a.copy_from_slice(&bytes[2 + i * 8..10 + i * 8]);
            u64::from_le_bytes(a)
        };
        let generation = field(0);
        Ok(match bytes[1] {
            1 => ArchiveState::Archiving { generation },
            2 => ArchiveState::Archived {
                generation,
                data_bytes: field(1),
                image_bytes: field(2),
                archived_at: field(3),
            },
            3 => ArchiveState::Restoring {
                generation,
                data_bytes: field(1),
            },
            4 => ArchiveState::Sharing { generation },
            5 => ArchiveState::Shared {
                generation,
                shared_at: field(3),
            },
            6 => ArchiveState::Adopting { generation },
            tag => return Err(format!("state tag {tag}")),
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    #[error("no cartridge with barcode {0}")]
    NotFound(String),
    /// The cartridge is not in the state the operation needs.
    #[error("cartridge {barcode} is {state}: {hint}")]
    State {
        barcode: String,
        state: &'static str,
        hint: &'static str,
    },
    #[error("cartridge {0} is mounted in a drive")]
    Mounted(String),
    #[error("barcode {0:?} cannot name an object in the archive location")]
    BadBarcode(String),
    #[error("archive image of {barcode}, object {key}: {source}")]
    Image {
        barcode: String,
        key: String,
        source: ImageError,
    },
    /// The image read back is not what was written, or does not belong where it was found.
    #[error("archive image of {barcode}: {why}")]
    Mismatch { barcode: String, why: String },
    #[error("archive location: {0}")]
    Location(#[from] BackendError),
    #[error("archive state record of {barcode} is damaged: {why}")]
    DamagedState { barcode: String, why: String },
    /// The progress callback asked to stop (tests use it to simulate a crash between steps).
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Cartridge(#[from] CartridgeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a job has done so far, for its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub step: Step,
    /// Host bytes of records copied (archive: into the image, or checked back; restore: into
    /// the store).
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub pieces_done: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Archive: writing the image.
    Writing,
    /// Archive: reading the image back.
    Verifying,
    /// Archive: `archived` recorded, the store's copy being dropped.
    Dropping,
    /// Restore: reading the image into the store.
    Restoring,
    /// Restore: `available` recorded, the image being deleted.
    Cleaning,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Writing => "writing",
            Step::Verifying => "verifying",
            Step::Dropping => "dropping",
            Step::Restoring => "restoring",
            Step::Cleaning => "cleaning",
        }
    }
}

/// A progress report; returning `false` stops the job at once, as a crash would (no clean-up).
pub type ProgressFn<'a> = dyn FnMut(Progress) -> bool + 'a;

/// What [`Archive::recover`] did to one cartridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// An archive was interrupted before its image was committed: available again.
    ArchiveUndone,
    /// Archived, but streams survived the crash: deleted now.
    StreamsDropped,
    /// A restore was interrupted: still `restoring`, restore again.
    RestorePending,
}

impl Cartridges {
    /// The cartridge's archive state; `None` is available (in the store).
    pub fn archive_state(&self, barcode: &str) -> Result<Option<ArchiveState>, ArchiveError> {
        self.store()
            .record(&state_key(barcode))?
            .map(|v| {
                ArchiveState::decode(&v).map_err(|why| ArchiveError::DamagedState {
                    barcode: barcode.to_string(),
                    why,
                })
            })
            .transpose()
    }

    /// Every cartridge with an archive state, by barcode.
    pub fn archive_states(&self) -> Result<BTreeMap<String, ArchiveState>, ArchiveError> {
        let mut out = BTreeMap::new();
        for (k, v) in self.store().records(STATE_PREFIX)? {
            let barcode = String::from_utf8_lossy(&k[STATE_PREFIX.len()..]).into_owned();
            let state = ArchiveState::decode(&v).map_err(|why| ArchiveError::DamagedState {
                barcode: barcode.clone(),
                why,
            })?;
            out.insert(barcode, state);
        }
        Ok(out)
    }

    pub(crate) fn set_archive_state(
        &self,
        barcode: &str,
        state: Option<ArchiveState>,
    ) -> Result<(), StoreError> {
        self.store()
            .put_record(&state_key(barcode), state.map(|s| s.encode()).as_deref())
    }

    /// Archive images no cartridge names any more, waiting to be deleted from the archive
    /// location ([`Archive::purge_images`]): (barcode, generation).
    pub fn images_to_purge(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut out = Vec::new();
        for (k, _) in self.store().records(PURGE_PREFIX.as_bytes())? {
            let name = String::from_utf8_lossy(&k[PURGE_PREFIX.len()..]).into_owned();
            // A note that does not parse names nothing we could delete: it is left alone.
            if let Some((barcode, generation)) = name.rsplit_once('/')
                && let Ok(generation) = u64::from_str_radix(generation, 16)
            {
                out.push((barcode.to_string(), generation));
            }
        }
        Ok(out)
    }
}

/// The archive tier over one store's cartridges and one archive location.
#[derive(Clone)]
pub struct Archive {
    cartridges: Cartridges,
    location: Arc<dyn Backend>,
    piece_size: usize,
}

fn key(s: String) -> Result<Key, ArchiveError> {
    Key::new(s.clone()).map_err(|_| ArchiveError::BadBarcode(s))
}

impl Archive {
    pub fn new(cartridges: Cartridges, location: Arc<dyn Backend>) -> Archive {
        Archive {
            cartridges,
            location,
            piece_size: DEFAULT_PIECE_SIZE,
        }
    }

    /// Pieces of about `bytes` (at least one record each, at most [`image::MAX_PIECE_SIZE`]);
    /// small in tests, to get many.
    pub fn with_piece_size(mut self, bytes: usize) -> Archive {
        self.piece_size = bytes.clamp(1, image::MAX_PIECE_SIZE);
        self
    }

    pub fn location(&self) -> &Arc<dyn Backend> {
        &self.location
    }

    /// Records `archiving` durably: from here the cartridge cannot be imported. The caller
    /// holds the catalog lock and has checked that the cartridge is in the vault (in no
    /// library); the state must be available. Returns the new image's generation.
    pub fn begin_archive(&self, barcode: &str, now: u64) -> Result<u64, ArchiveError> {
        let _catalog = self.cartridges.lock_catalog();
        self.cartridges.info(barcode).map_err(not_found(barcode))?;
        key(cartridge_prefix(barcode).trim_end_matches('/').to_string())?;
        if let Some(state) = self.cartridges.archive_state(barcode)? {
            return Err(ArchiveError::State {
                barcode: barcode.to_string(),
                state: state.name(),
                hint: "only an available cartridge in the vault can be archived",
            });
        }
        // Unique per attempt: pieces of an interrupted attempt never collide with these, and
        // neither does an image still waiting to be purged (its note names its generation).
        let pending = self.cartridges.images_to_purge()?;
        let mut generation = now.max(1);
        while pending
            .iter()
            .any(|(b, g)| b == barcode && *g == generation)
        {
            generation += 1;
        }
        self.cartridges
            .set_archive_state(barcode, Some(ArchiveState::Archiving { generation }))?;
        self.cartridges.store().sync()?;
        Ok(generation)
    }

    /// Writes, verifies and commits the image of a cartridge in state `archiving`, then drops
    /// its data from the store. On an error (not [`ArchiveError::Interrupted`]) the cartridge
    /// goes back to available, or on to archived if the image was committed.
    pub fn run_archive(
        &self,
        barcode: &str,
        now: u64,
        progress: &mut ProgressFn<'_>,
    ) -> Result<ArchiveState, ArchiveError> {
        let result = self.archive_steps(barcode, now, progress);
        if let Err(e) = &result
            && !matches!(e, ArchiveError::Interrupted)
        {
            // Best effort: the same as a restart would do.
            let _ = self.recover_one(barcode);
        }
        result
    }

    fn archive_steps(
        &self,
        barcode: &str,
        now: u64,
        progress: &mut ProgressFn<'_>,
    ) -> Result<ArchiveState, ArchiveError> {
        let generation = match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Archiving { generation }) => generation,
            other => return Err(self.wrong_state(barcode, other, "begin the archive first")),
        };
        let (number, info) = self.cartridges.info(barcode).map_err(not_found(barcode))?;
        // Holding the partitions open keeps any drive from mounting the cartridge meanwhile.
        let mut partitions =
            self.open_partitions(barcode, number, info.partition_capacities().len())?;
        let total: u64 = partitions.iter().map(PartitionStore::data_bytes).sum();
        // Images of earlier attempts or copies that this store noted as garbage go first.
        // Nothing else under the barcode is touched: another node sharing the location may
        // keep an image under the same barcode, and a generation this store never noted is
        // not known to be garbage (the new image's create-only puts refuse to overwrite it).
        for (b, generation) in self.cartridges.images_to_purge()? {
            if b == barcode {
                self.purge_image(barcode, generation)?;
            }
        }
        let mut report = Progress {
            step: Step::Writing,
            bytes_done: 0,
            bytes_total: total,
            pieces_done: 0,
        };
        let mut images = Vec::new();
        let mut buf = Vec::new();
        for (p, partition) in partitions.iter_mut().enumerate() {
            let p = p as u8;
            let mut image = PartitionImage::default();
            let count = partition.object_count();
            let mut n = 0u64;
            let mut index = 0u32;
            while n < count {
                let mut piece = PieceBuilder::new(&PieceHeader {
                    barcode: barcode.to_string(),
                    generation,
                    partition: p,
                    index,
                    first_object: n,
                });
                while n < count && piece.len() < self.piece_size {
                    match partition.object(n)? {
                        ObjectKind::Record { .. } => {
                            partition.read_record(n, &mut buf)?;
                            piece.push_record(&buf);
                            n += 1;
                        }
                        ObjectKind::EncryptedRecord { .. } => {
                            partition.read_record(n, &mut buf)?;
                            piece.push_encrypted_record(&buf);
                            n += 1;
                        }
                        ObjectKind::Filemark => {
                            // A run of filemarks is one entry.
                            let mut run = 0u32;
                            while n < count
                                && run < u32::MAX
                                && partition.object(n)? == ObjectKind::Filemark
                            {
                                run += 1;
                                n += 1;
                            }
                            piece.push_filemarks(run);
                            image.filemarks += u64::from(run);
                        }
                    }
                }
                let (objects, data) = (piece.objects(), piece.data_bytes());
                let bytes = piece.finish();
                self.location.put(
                    &key(piece_key(barcode, generation, p, index))?,
                    &bytes,
                    PutMode::Create,
                )?;
                image.objects += objects;
                image.data_bytes += data;
                image.pieces.push(PieceRef {
                    objects,
                    size: bytes.len() as u64,
                    digest: digest(&bytes),
                });
                index += 1;
                report.bytes_done += data;
                report.pieces_done += 1;
                if !progress(report) {
                    return Err(ArchiveError::Interrupted);
                }
            }
            images.push(image);
        }
        let manifest = Manifest {
            barcode: barcode.to_string(),
            generation,
            created: now,
            info: info.clone(),
            partitions: images,
        };
        let encoded = manifest.encode();
        let manifest_key = key(manifest_key(barcode, generation))?;
        self.location
            .put(&manifest_key, &encoded, PutMode::Create)?;
        if !progress(report) {
            return Err(ArchiveError::Interrupted);
        }

        // Read everything back: the manifest, then every piece against its digest.
        report.step = Step::Verifying;
        report.bytes_done = 0;
        report.pieces_done = 0;
        let back = self.location.get(&manifest_key)?;
        if back != encoded {
            return Err(self.mismatch(barcode, "the manifest reads back different bytes"));
        }
        let read = self.decode_manifest(barcode, generation, &manifest_key, &back)?;
        for (p, image) in read.partitions.iter().enumerate() {
            let mut next = 0u64;
            for (index, r) in image.pieces.iter().enumerate() {
                let piece_key = key(piece_key(barcode, generation, p as u8, index as u32))?;
                let object = self.read_piece(&piece_key, r)?;
                let piece = self.check_piece(
                    barcode,
                    generation,
                    p as u8,
                    index as u32,
                    next,
                    r,
                    &piece_key,
                    &object,
                )?;
                next += piece.objects;
                report.bytes_done += piece
                    .entries
                    .iter()
                    .map(|e| match e {
                        Entry::Record(d) | Entry::EncryptedRecord(d) => d.len() as u64,
                        Entry::Filemarks(_) => 0,
                    })
                    .sum::<u64>();
                report.pieces_done += 1;
                if !progress(report) {
                    return Err(ArchiveError::Interrupted);
                }
            }
        }

        // Commit: `archived` first, then the streams go (see the module's table).
        report.step = Step::Dropping;
        let state = ArchiveState::Archived {
            generation,
            data_bytes: manifest.data_bytes(),
            image_bytes: manifest.image_bytes(),
            archived_at: now,
        };
        {
            let _catalog = self.cartridges.lock_catalog();
            self.cartridges.set_archive_state(barcode, Some(state))?;
            if !progress(report) {
                return Err(ArchiveError::Interrupted);
            }
            self.drop_streams(number)?;
            drop(partitions);
            self.cartridges.store().sync()?;
        }
        Ok(state)
    }

    fn open_partitions(
        &self,
        barcode: &str,
        number: u64,
        count: usize,
    ) -> Result<Vec<ChunkPartition>, ArchiveError> {
        (0..count as u8)
            .map(|p| {
                self.cartridges
                    .open_partition(number, p)
                    .map_err(|e| match e {
                        StoreError::InUse(_) => ArchiveError::Mounted(barcode.to_string()),
                        other => ArchiveError::Store(other),
                    })
            })
            .collect()
    }

    /// Deletes every partition stream of cartridge `number` (its chunks become reclaimable).
    fn drop_streams(&self, number: u64) -> Result<(), StoreError> {
        for p in 0..4u8 {
            self.cartridges
                .store()
                .delete_stream(crate::stream_of(number, p))?;
        }
        Ok(())
    }

    fn read_manifest(&self, barcode: &str, generation: u64) -> Result<Manifest, ArchiveError> {
        let k = key(manifest_key(barcode, generation))?;
        let object = self.location.get(&k)?;
        self.decode_manifest(barcode, generation, &k, &object)
    }

    /// Decodes manifest `k` and checks it is the one of `barcode`'s generation `generation`.
    fn decode_manifest(
        &self,
        barcode: &str,
        generation: u64,
        k: &Key,
        object: &[u8],
    ) -> Result<Manifest, ArchiveError> {
        let manifest = Manifest::decode(object).map_err(|source| ArchiveError::Image {
            barcode: barcode.to_string(),
            key: k.to_string(),
            source,
        })?;
        if manifest.barcode != barcode || manifest.generation != generation {
            return Err(self.mismatch(
                barcode,
                &format!(
                    "the manifest is of {} generation {:x}, not generation {generation:x}",
                    manifest.barcode, manifest.generation
                ),
            ));
        }
        Ok(manifest)
    }

    /// The first `expected.size` bytes of piece `k` (a decoded manifest bounds the size), so an
    /// object larger than the manifest says is never read whole; [`Archive::check_piece`]
    /// checks them against the manifest's digest.
    fn read_piece(&self, k: &Key, expected: &PieceRef) -> Result<Vec<u8>, ArchiveError> {
        Ok(self.location.get_range(k, 0..expected.size)?)
    }

    /// Decodes a piece read back and checks it is the one the manifest names at this place.
    #[allow(clippy::too_many_arguments)]
    fn check_piece<'a>(
        &self,
        barcode: &str,
        generation: u64,
        partition: u8,
        index: u32,
        first_object: u64,
        expected: &PieceRef,
        piece_key: &Key,
        object: &'a [u8],
    ) -> Result<image::Piece<'a>, ArchiveError> {
        let piece = decode_piece(object).map_err(|source| ArchiveError::Image {
            barcode: barcode.to_string(),
            key: piece_key.to_string(),
            source,
        })?;
        if digest(object) != expected.digest {
            return Err(self.mismatch(
                barcode,
                &format!("{piece_key} is not the piece the manifest names"),
            ));
        }
        let want = PieceHeader {
            barcode: barcode.to_string(),
            generation,
            partition,
            index,
            first_object,
        };
        if piece.header != want || piece.objects != expected.objects {
            return Err(self.mismatch(barcode, &format!("{piece_key} belongs elsewhere")));
        }
        Ok(piece)
    }

    fn mismatch(&self, barcode: &str, why: &str) -> ArchiveError {
        ArchiveError::Mismatch {
            barcode: barcode.to_string(),
            why: why.to_string(),
        }
    }

    fn wrong_state(
        &self,
        barcode: &str,
        state: Option<ArchiveState>,
        hint: &'static str,
    ) -> ArchiveError {
        ArchiveError::State {
            barcode: barcode.to_string(),
            state: state.map_or("available", |s| s.name()),
            hint,
        }
    }

    /// Records `restoring` durably for an `archived` cartridge (or one whose restore was
    /// interrupted, to run it again); returns the image's generation.
    pub fn begin_restore(&self, barcode: &str) -> Result<u64, ArchiveError> {
        let _catalog = self.cartridges.lock_catalog();
        self.cartridges.info(barcode).map_err(not_found(barcode))?;
        match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Archived {
                generation,
                data_bytes,
                ..
            }) => {
                self.cartridges.set_archive_state(
                    barcode,
                    Some(ArchiveState::Restoring {
                        generation,
                        data_bytes,
                    }),
                )?;
                self.cartridges.store().sync()?;
                Ok(generation)
            }
            Some(ArchiveState::Restoring { generation, .. }) => Ok(generation),
            other => {
                Err(self.wrong_state(barcode, other, "only an archived cartridge can be restored"))
            }
        }
    }

    /// Reads the image of a cartridge in state `restoring` back into the store (dedup applies),
    /// verifying every piece, then makes it available and deletes the image. Safe to run again
    /// after an interruption: partitions are rewritten from their start.
    pub fn run_restore(
        &self,
        barcode: &str,
        progress: &mut ProgressFn<'_>,
    ) -> Result<(), ArchiveError> {
        let generation = match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Restoring { generation, .. }) => generation,
            other => return Err(self.wrong_state(barcode, other, "begin the restore first")),
        };
        let (number, _) = self.cartridges.info(barcode).map_err(not_found(barcode))?;
        let manifest = self.read_manifest(barcode, generation)?;
        let mut partitions = self.open_partitions(barcode, number, manifest.partitions.len())?;
        let mut report = Progress {
            step: Step::Restoring,
            bytes_done: 0,
            bytes_total: manifest.data_bytes(),
            pieces_done: 0,
        };
        for (p, (image, partition)) in manifest.partitions.iter().zip(&mut partitions).enumerate() {
            let p = p as u8;
            partition.truncate(0)?;
            let mut since_sync = 0u64;
            for (index, r) in image.pieces.iter().enumerate() {
                let piece_key = key(piece_key(barcode, generation, p, index as u32))?;
                let object = self.read_piece(&piece_key, r)?;
                let first = partition.object_count();
                let piece = self.check_piece(
                    barcode,
                    generation,
                    p,
                    index as u32,
                    first,
                    r,
                    &piece_key,
                    &object,
                )?;
                for entry in &piece.entries {
                    match *entry {
                        Entry::Record(data) | Entry::EncryptedRecord(data) => {
                            if matches!(entry, Entry::EncryptedRecord(_)) {
                                partition.append_encrypted_record(data)?;
                            } else {
                                partition.append_record(data)?;
                            }
                            report.bytes_done += data.len() as u64;
                            since_sync += data.len() as u64;
                        }
                        Entry::Filemarks(n) => partition.append_filemarks(n)?,
                    }
                }
                if since_sync >= RESTORE_SYNC_BYTES {
                    partition.sync()?;
                    since_sync = 0;
                }
                report.pieces_done += 1;
                if !progress(report) {
                    return Err(ArchiveError::Interrupted);
                }
            }
            let filemarks = partition.filemarks_before(u64::MAX)?;
            if partition.object_count() != image.objects
                || partition.data_bytes() != image.data_bytes
                || filemarks != image.filemarks
            {
                return Err(self.mismatch(
                    barcode,
                    &format!(
                        "partition {p} restored {} objects ({} bytes, {filemarks} filemarks), the manifest says {} ({} bytes, {} filemarks)",
                        partition.object_count(),
                        partition.data_bytes(),
                        image.objects,
                        image.data_bytes,
                        image.filemarks
                    ),
                ));
            }
            partition.sync()?;
        }
        drop(partitions);
        // The data is durable in the store: now the cartridge's info as archived, and
        // `available`, in one commit.
        {
            let _catalog = self.cartridges.lock_catalog();
            self.cartridges.update_info(number, &manifest.info)?;
            self.cartridges
                .store()
                .put_records(&image_dropped(barcode, generation))?;
            self.cartridges.store().sync()?;
        }
        report.step = Step::Cleaning;
        if !progress(report) {
            return Err(ArchiveError::Interrupted);
        }
        // The image is no longer needed; one a failure leaves here keeps its note and is
        // deleted by the next purge (every server start).
        self.purge_image(barcode, generation)?;
        Ok(())
    }

    /// Deletes from the archive location every image a note names ([`Cartridges::images_to_purge`]),
    /// then the notes. Returns the images deleted and the objects they had. The server runs it
    /// at start and after deleting an archived cartridge; an image it cannot delete now (the
    /// location unreachable) keeps its note for the next run.
    pub fn purge_images(&self) -> Result<Vec<(String, u64, usize)>, ArchiveError> {
        let mut done = Vec::new();
        for (barcode, generation) in self.cartridges.images_to_purge()? {
            let objects = self.purge_image(&barcode, generation)?;
            done.push((barcode, generation, objects));
        }
        Ok(done)
    }

    /// Deletes the objects of image `generation` of `barcode` unless a state names it (then it
    /// is live: only the note goes), then the note. Returns how many objects it deleted.
    fn purge_image(&self, barcode: &str, generation: u64) -> Result<usize, ArchiveError> {
        // No new image takes this generation while the note exists (`begin_archive`), so the
        // check needs the lock only for itself, not for the deletes.
        let live = {
            let _catalog = self.cartridges.lock_catalog();
            self.cartridges
                .archive_state(barcode)?
                .is_some_and(|s| s.generation() == generation)
        };
        let mut deleted = 0;
        if !live {
            for object in self
                .location
                .list(&generation_prefix(barcode, generation))?
            {
                self.location.delete(&object.key)?;
                deleted += 1;
            }
        }
        // Durable with the next sync; a note a crash keeps only repeats this.
        self.cartridges
            .store()
            .put_record(&purge_key(barcode, generation), None)?;
        Ok(deleted)
    }

    /// Brings every interrupted transition to a safe state (see the module's table); run when
    /// the server starts, before any job. Needs no archive location.
    pub fn recover(cartridges: &Cartridges) -> Result<Vec<(String, Recovered)>, ArchiveError> {
        let mut out = Vec::new();
        for barcode in cartridges.archive_states()?.keys() {
            if let Some(r) = recover_cartridge(cartridges, barcode)? {
                out.push((barcode.clone(), r));
            }
        }
        Ok(out)
    }

    /// [`Archive::recover`] for one cartridge: also undoes a [`Archive::begin_archive`] whose
    /// job could not start.
    pub fn recover_one(&self, barcode: &str) -> Result<Option<Recovered>, ArchiveError> {
        recover_cartridge(&self.cartridges, barcode)
    }
}

fn recover_cartridge(
    cartridges: &Cartridges,
    barcode: &str,
) -> Result<Option<Recovered>, ArchiveError> {
    let _catalog = cartridges.lock_catalog();
    let done = match cartridges.archive_state(barcode)? {
        // The state record is written before the streams are touched: they are intact.
        Some(ArchiveState::Archiving { generation }) => {
            // Its partial image, if any, is garbage: noted for the purge.
            cartridges
                .store()
                .put_records(&image_dropped(barcode, generation))?;
            Some(Recovered::ArchiveUndone)
        }
        Some(ArchiveState::Archived { .. }) => {
            let (number, _) = cartridges.info(barcode).map_err(not_found(barcode))?;
            let streams = cartridges.store().streams()?;
            let left: Vec<_> = (0..4u8)
                .map(|p| crate::stream_of(number, p))
                .filter(|s| streams.iter().any(|(id, _)| id == s))
                .collect();
            if left.is_empty() {
                None
            } else {
                for s in left {
                    cartridges.store().delete_stream(s)?;
                }
                Some(Recovered::StreamsDropped)
            }
        }
        Some(ArchiveState::Restoring { .. }) => return Ok(Some(Recovered::RestorePending)),
        // The shared vault's states are settled by `SharedVault::recover`.
        Some(
            ArchiveState::Sharing { .. }
            | ArchiveState::Shared { .. }
            | ArchiveState::Adopting { .. },
        )
        | None => None,
    };
    if done.is_some() {
        cartridges.store().sync()?;
    }
    Ok(done)
}

fn not_found(barcode: &str) -> impl FnOnce(CartridgeError) -> ArchiveError + '_ {
    move |e| match e {
        CartridgeError::NotFound(_) => ArchiveError::NotFound(barcode.to_string()),
        other => ArchiveError::Cartridge(other),
    }
}

#[cfg(test)]
mod tests;
