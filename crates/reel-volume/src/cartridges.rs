//! The cartridge catalog: identities and cartridge memory, kept as chunk-store records.
//!
//! Record `cartridge/<barcode>` = cartridge number u64 LE | `CartridgeInfo::to_bytes()`.
//! Partition `p` of cartridge number `n` is stream `n * 4 + p` (at most 4 partitions, SSC-5).

use reel_chunkstore::{ChunkStore, Damage, Exclusive, StoreError, StreamId, StreamUsage};
use reel_media::{Cartridge, CartridgeInfo, DecodeError, MediaError, UnixTime};

use std::sync::Arc;

use parking_lot::{ReentrantMutex, ReentrantMutexGuard};

use crate::ChunkPartition;

const CARTRIDGE_PREFIX: &[u8] = b"cartridge/";
const NEXT_NUMBER: &[u8] = b"counter/next-cartridge";
const MAX_PARTITIONS: u64 = 4;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CartridgeError {
    #[error("a cartridge with barcode {0} already exists")]
    Exists(String),
    #[error("no cartridge with barcode {0}")]
    NotFound(String),
    #[error("cartridge {0} is WORM: its data can never be erased or deleted")]
    Worm(String),
    #[error("cartridge {0} is write-protected")]
    WriteProtected(String),
    /// Its partitions are open: it is in a drive.
    #[error("cartridge {0} is mounted in a drive")]
    Mounted(String),
    /// An archive or sharing job has it, or it is shared with another store
    /// (`ArchiveState::name`): it cannot be deleted now.
    #[error("cartridge {barcode} is {state}: it cannot be deleted until {until}")]
    Busy {
        barcode: String,
        state: &'static str,
        until: &'static str,
    },
    #[error("cartridge {barcode}: {why}")]
    ArchiveState { barcode: String, why: String },
    #[error("cartridge record {barcode} is damaged: {source}")]
    Decode {
        barcode: String,
        source: DecodeError,
    },
    #[error(transparent)]
    Media(#[from] MediaError<StoreError>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// All cartridges in one store.
///
/// Clones share one catalog lock: create, delete and erase run under it, so a cartridge number
/// is handed out once and a cartridge is never deleted between the check that it may be and the
/// deletion. Callers whose own check-and-act spans more (e.g. "not in any library, then
/// delete", or "in the vault, then import") hold [`Cartridges::lock_catalog`] around both; the
/// lock is reentrant. Open a store's cartridges once and clone.
#[derive(Clone)]
pub struct Cartridges {
    store: ChunkStore,
    catalog_lock: Arc<ReentrantMutex<()>>,
}

fn key(barcode: &str) -> Vec<u8> {
    [CARTRIDGE_PREFIX, barcode.as_bytes()].concat()
}

pub fn stream_of(number: u64, partition: u8) -> StreamId {
    StreamId(number * MAX_PARTITIONS + u64::from(partition))
}

/// The cartridge number a stream belongs to (the inverse of [`stream_of`]).
pub fn cartridge_of(stream: StreamId) -> u64 {
    stream.0 / MAX_PARTITIONS
}

/// Damage found by a scrub, in tape terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedRecords {
    /// `None` if the stream belongs to no cartridge (e.g. one deleted since).
    pub barcode: Option<String>,
    pub partition: u8,
    /// First and last damaged record (logical object numbers), if the record map names them.
    pub records: Option<(u64, u64)>,
    pub reason: String,
}

impl Cartridges {
    pub fn new(store: ChunkStore) -> Cartridges {
        Cartridges {
            store,
            catalog_lock: Arc::new(ReentrantMutex::new(())),
        }
    }

    pub fn store(&self) -> &ChunkStore {
        &self.store
    }

    /// Holds the catalog lock: no cartridge is created, deleted or erased by another thread
    /// until the guard drops. Lock order: the catalog, then a changer, then a drive.
    pub fn lock_catalog(&self) -> ReentrantMutexGuard<'_, ()> {
        self.catalog_lock.lock()
    }

    /// Creates a blank cartridge; durable when this returns. Returns its number.
    pub fn create(&self, info: &CartridgeInfo) -> Result<u64, CartridgeError> {
        let number = self.add(info)?;
        self.store.sync()?;
        Ok(number)
    }

    /// A new cartridge's number and identity record (not yet durable), under the catalog
    /// lock; `Exists` if the barcode is taken.
    fn add(&self, info: &CartridgeInfo) -> Result<u64, CartridgeError> {
        let _catalog = self.catalog_lock.lock();
        let barcode = info.barcode().as_str().to_string();
        if self.store.record(&key(&barcode))?.is_some() {
            return Err(CartridgeError::Exists(barcode));
        }
        let number = match self.store.record(NEXT_NUMBER)? {
            Some(b) if b.len() == 8 => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
            _ => 1,
        };
        self.store
            .put_record(NEXT_NUMBER, Some(&(number + 1).to_le_bytes()))?;
        self.write(number, info)?;
        Ok(number)
    }

    /// Creates the cartridge an adoption brings in (`shared_vault.rs`), in state `adopting`;
    /// committed with the caller's next sync. The caller holds the catalog lock.
    pub(crate) fn create_adopting(
        &self,
        info: &CartridgeInfo,
        generation: u64,
    ) -> Result<u64, CartridgeError> {
        let _catalog = self.catalog_lock.lock();
        let number = self.add(info)?;
        self.set_archive_state(
            info.barcode().as_str(),
            Some(crate::ArchiveState::Adopting { generation }),
        )?;
        Ok(number)
    }

    /// Forgets a cartridge that moved to another store (its streams and record; WORM too:
    /// its data lives on there). Committed with the caller's next sync.
    pub(crate) fn remove_moved(&self, barcode: &str) -> Result<(), CartridgeError> {
        let _catalog = self.catalog_lock.lock();
        let (number, _) = self.info(barcode)?;
        for p in 0..MAX_PARTITIONS as u8 {
            self.store.delete_stream(stream_of(number, p))?;
        }
        self.store.put_record(&key(barcode), None)?;
        Ok(())
    }

    fn write(&self, number: u64, info: &CartridgeInfo) -> Result<(), CartridgeError> {
        let mut value = number.to_le_bytes().to_vec();
        value.extend_from_slice(&info.to_bytes());
        self.store
            .put_record(&key(info.barcode().as_str()), Some(&value))?;
        Ok(())
    }

    /// Replaces cartridge `number`'s identity record, committed with the next sync (a
    /// restore puts back the info its archive image holds).
    pub(crate) fn update_info(
        &self,
        number: u64,
        info: &CartridgeInfo,
    ) -> Result<(), CartridgeError> {
        self.write(number, info)
    }

    fn decode(barcode: &str, value: &[u8]) -> Result<(u64, CartridgeInfo), CartridgeError> {
        let damaged = |source| CartridgeError::Decode {
            barcode: barcode.to_string(),
            source,
        };
        if value.len() < 8 {
            return Err(damaged(DecodeError::TooShort(value.len())));
        }
        let number = u64::from_le_bytes(value[..8].try_into().unwrap_or([0; 8]));
        let info = CartridgeInfo::from_bytes(&value[8..]).map_err(damaged)?;
        Ok((number, info))
    }

    /// The cartridge's number and identity.
    pub fn info(&self, barcode: &str) -> Result<(u64, CartridgeInfo), CartridgeError> {
        let value = self
            .store
            .record(&key(barcode))?
            .ok_or_else(|| CartridgeError::NotFound(barcode.to_string()))?;
        Self::decode(barcode, &value)
    }

    /// Every cartridge, in barcode order.
    pub fn list(&self) -> Result<Vec<(u64, CartridgeInfo)>, CartridgeError> {
        self.store
            .records(CARTRIDGE_PREFIX)?
            .into_iter()
            .map(|(k, v)| Self::decode(&String::from_utf8_lossy(&k[CARTRIDGE_PREFIX.len()..]), &v))
            .collect()
    }

    /// Opens a cartridge's partitions (a cartridge is mounted in at most one drive).
    pub fn mount(&self, barcode: &str) -> Result<Cartridge<ChunkPartition>, CartridgeError> {
        let (number, info) = self.info(barcode)?;
        let partitions = (0..info.partition_capacities().len() as u8)
            .map(|p| self.open_partition(number, p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cartridge::new(info, partitions)?)
    }

    /// Mounts a cartridge for a catalog operation: `Mounted` when a drive holds it.
    fn mount_exclusive(&self, barcode: &str) -> Result<Cartridge<ChunkPartition>, CartridgeError> {
        self.mount(barcode).map_err(|e| match e {
            CartridgeError::Store(StoreError::InUse(_)) => {
                CartridgeError::Mounted(barcode.to_string())
            }
            other => other,
        })
    }

    /// Opens partition `p` of cartridge `number` (for FORMAT MEDIUM adding partitions).
    pub fn open_partition(&self, number: u64, partition: u8) -> Result<ChunkPartition, StoreError> {
        ChunkPartition::open(self.store.open_stream(stream_of(number, partition))?)
    }

    /// Saves a mounted cartridge's identity, counters and cartridge memory (committed with the
    /// next sync).
    pub fn save(&self, cartridge: &Cartridge<ChunkPartition>) -> Result<(), CartridgeError> {
        let (number, _) = self.info(cartridge.barcode().as_str())?;
        self.write(number, cartridge.info())
    }

    /// Replaces a cartridge's identity (write-protect switch, capacity), durably.
    pub fn update(&self, info: &CartridgeInfo) -> Result<(), CartridgeError> {
        let (number, _) = self.info(info.barcode().as_str())?;
        self.write(number, info)?;
        self.store.sync()?;
        Ok(())
    }

    /// Says which cartridge, partition and records each damaged stream range belongs to.
    pub fn locate_damage(&self, damage: &[Damage]) -> Result<Vec<DamagedRecords>, CartridgeError> {
        let by_number: std::collections::HashMap<u64, String> = self
            .list()?
            .into_iter()
            .map(|(n, info)| (n, info.barcode().as_str().to_string()))
            .collect();
        let mut out = Vec::new();
        for d in damage {
            let number = d.stream.0 / MAX_PARTITIONS;
            let partition = (d.stream.0 % MAX_PARTITIONS) as u8;
            let barcode = by_number.get(&number).cloned();
            // A mounted cartridge's streams are busy; its records are then left unnamed.
            let records = match self.store.open_stream(d.stream) {
                Ok(stream) => ChunkPartition::open(stream)
                    .ok()
                    .and_then(|p| p.records_at(d.offset, d.len)),
                Err(_) => None,
            };
            out.push(DamagedRecords {
                barcode,
                partition,
                records,
                reason: d.reason.clone(),
            });
        }
        Ok(out)
    }

    /// Erases a cartridge, durably: every partition becomes empty; barcode, media, partitioning
    /// and cartridge memory stay (`Cartridge::erase_all`). Refused while it is mounted in a
    /// drive, when it is write-protected, and for WORM media with data. The space comes back
    /// with the next reclaim.
    pub fn erase(&self, barcode: &str, now: UnixTime) -> Result<CartridgeInfo, CartridgeError> {
        let _catalog = self.catalog_lock.lock();
        // Mounting opens its streams, which also keeps a drive from mounting it meanwhile.
        let mut cartridge = self.mount_exclusive(barcode)?;
        cartridge.erase_all(now).map_err(|e| match e {
            MediaError::WriteProtected => CartridgeError::WriteProtected(barcode.to_string()),
            MediaError::WormOverwrite => CartridgeError::Worm(barcode.to_string()),
            other => CartridgeError::Media(other),
        })?;
        self.save(&cartridge)?;
        self.store.sync()?;
        Ok(cartridge.info().clone())
    }

    /// Space the cartridge's partitions use in the store, taken together
    /// (`ChunkStore::usage`).
    pub fn usage(
        &self,
        barcode: &str,
        exclusive: Exclusive,
    ) -> Result<StreamUsage, CartridgeError> {
        let (number, _) = self.info(barcode)?;
        let streams: Vec<StreamId> = (0..MAX_PARTITIONS as u8)
            .map(|p| stream_of(number, p))
            .collect();
        Ok(self.store.usage(&streams, exclusive)?)
    }

    /// Deletes a cartridge and its data (space comes back with the next reclaim). WORM
    /// cartridges are refused, and so is a cartridge mounted in a drive or one an archive or
    /// sharing job has. An archived cartridge's image is noted for deletion in the same commit
    /// (`Archive::purge_images` deletes it from the archive location); returns its generation.
    pub fn delete(&self, barcode: &str) -> Result<Option<u64>, CartridgeError> {
        let _catalog = self.catalog_lock.lock();
        let (number, info) = self.info(barcode)?;
        if info.media_type().is_worm() {
            return Err(CartridgeError::Worm(barcode.to_string()));
        }
        let state = self.archive_state(barcode).map_err(|e| match e {
            crate::ArchiveError::Store(e) => CartridgeError::Store(e),
            other => CartridgeError::ArchiveState {
                barcode: barcode.to_string(),
                why: other.to_string(),
            },
        })?;
        match state {
            None => {}
            Some(crate::ArchiveState::Archived { generation, .. }) => {
                // Its streams went when it was archived (start-up recovery drops any a crash
                // left; an offline tool runs without it, so here too).
                for p in 0..MAX_PARTITIONS as u8 {
                    self.store.delete_stream(stream_of(number, p))?;
                }
                let mut changes = crate::archive::image_dropped(barcode, generation);
                changes.push((key(barcode), None));
                self.store.put_records(&changes)?;
                self.store.sync()?;
                return Ok(Some(generation));
            }
            Some(other) => {
                use crate::ArchiveState::*;
                return Err(CartridgeError::Busy {
                    barcode: barcode.to_string(),
                    state: other.name(),
                    until: match other {
                        Restoring { .. } => "it is restored",
                        Sharing { .. } | Shared { .. } => "it is unshared",
                        Adopting { .. } => "it is adopted",
                        Archiving { .. } | Archived { .. } => "its archive job ends",
                    },
                });
            }
        }
        // Holding every partition's stream open keeps a drive from mounting the cartridge until
        // its record is gone; a drive that holds it now makes this fail with `Mounted`.
        let held = (0..MAX_PARTITIONS as u8)
            .map(|p| self.store.open_stream(stream_of(number, p)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| match e {
                StoreError::InUse(_) => CartridgeError::Mounted(barcode.to_string()),
                other => CartridgeError::Store(other),
            })?;
        for p in 0..MAX_PARTITIONS as u8 {
            self.store.delete_stream(stream_of(number, p))?;
        }
        drop(held);
        self.store.put_record(&key(barcode), None)?;
        self.store.sync()?;
        Ok(None)
    }
}
