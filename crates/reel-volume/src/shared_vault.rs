//! The shared vault: a cartridge exported from one store's vault is adopted by another store
//! on the same bucket without copying its data (docs/design/object-storage.md, "Shared vault").
//!
//! The vault is a [`Backend`] both stores reach (reel: `<cluster prefix>vault/` in the bucket).
//! Objects, per cartridge and share generation `g` (all create-only):
//!
//! ```text
//! <barcode>/<g:016x>.p<k>.<n:06>.bundle   part n of partition k's exported stream
//!                                  (`ChunkStore::export_stream`; parts of about 64 MiB)
//! <barcode>/<g:016x>.share         the share: JSON header (who, when, cartridge info, bundle hashes)
//! <barcode>/<g:016x>.taken         who adopted it (JSON); written once: exactly one adopter wins
//! <barcode>/<g:016x>.released      the adopter no longer reads anything of the exporter's
//! ```
//!
//! Exporter (store A), with the cartridge's availability ([`ArchiveState`]):
//!
//! | step | A's state after a crash here | what recovery does |
//! |---|---|---|
//! | share 1: `sharing g` | streams may be pinned | no `.share`: unpin, available again |
//! | share 2: bundles, then `.share` (the commit point) | `sharing g` | `.share` present: `shared g` |
//! | share 3: `shared g` | shared: not importable, not erasable, pinned | — |
//! | collect: `.released` seen | `shared g` | unpin, delete the cartridge, then the objects |
//! | unshare: `.taken` by A itself | `shared g` | unshare again: unpin, available |
//!
//! Adopter (store B):
//!
//! | step | B's state after a crash here | what recovery does |
//! |---|---|---|
//! | adopt 1: `adopting g`, streams imported, cartridge record | `adopting g` | `.taken` ours: available; else roll back |
//! | adopt 2: `.taken` (create-only) | `adopting g` | same |
//! | adopt 3: available + `adopted/<barcode>` record | available | — |
//! | release: no pack of the share's source left (after a reclaim) | | `.released`, record deleted |
//!
//! Dedup is per store: an adopted cartridge's chunks stay in A's packs; what B writes after
//! them is deduplicated against B's own store (and against the adopted chunks B indexes).

use std::collections::BTreeMap;
use std::sync::Arc;

use reel_backend::{Backend, BackendError, Key, PutMode};
use reel_chunkstore::StoreError;
use reel_media::CartridgeInfo;
use serde::{Deserialize, Serialize};

use crate::archive::ArchiveState;
use crate::{CartridgeError, Cartridges, stream_of};

const ADOPTED_PREFIX: &[u8] = b"adopted/";
const SHARE_FORMAT: u32 = 1;
/// Partitions per cartridge (SSC-5: at most 4).
const PARTITIONS: u8 = 4;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    #[error("no cartridge with barcode {0}")]
    NotFound(String),
    #[error("no cartridge {0} is waiting in the shared vault")]
    NotShared(String),
    /// The cartridge is not in the state the operation needs.
    #[error("cartridge {barcode} is {state}: {hint}")]
    State {
        barcode: String,
        state: String,
        hint: String,
    },
    #[error("cartridge {0} is mounted in a drive")]
    Mounted(String),
    #[error("a cartridge with barcode {0} already exists in this store")]
    Exists(String),
    #[error("barcode {0:?} cannot name an object in the shared vault")]
    BadBarcode(String),
    /// An object in the vault that does not decode or does not match what names it.
    #[error("shared vault object {key}: {why}")]
    Damaged { key: String, why: String },
    #[error("shared vault: {0}")]
    Vault(#[from] BackendError),
    #[error(transparent)]
    Cartridge(#[from] CartridgeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Archive(#[from] crate::ArchiveError),
}

/// The `.share` object (JSON, readable with any S3 tool).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ShareHeader {
    pub format: u32,
    pub barcode: String,
    pub generation: u64,
    /// The exporting store, as every node's foreign-store resolver names it.
    pub from_store: String,
    /// The exporting node, for people.
    pub from_node: String,
    /// Unix seconds.
    pub shared_at: u64,
    /// `CartridgeInfo::to_bytes`, hex.
    pub info: String,
    /// Host bytes of the cartridge's records (all partitions).
    pub data_bytes: u64,
    pub partitions: Vec<SharedPartition>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SharedPartition {
    pub partition: u8,
    /// The bundle's parts, in order.
    pub parts: Vec<BundlePart>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BundlePart {
    pub bytes: u64,
    /// BLAKE3 of the part's object, hex: binds the parts to this header.
    pub blake3: String,
}

/// Parts of about this many bytes: each is built, stored and imported whole.
pub const PART_BYTES: usize = 64 << 20;

/// A `.taken` or `.released` object.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub store: String,
    pub node: String,
    pub at: u64,
}

/// One share in the vault, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareEntry {
    pub header: ShareHeader,
    pub taken: Option<Marker>,
    pub released: Option<Marker>,
}

/// What B keeps of an adoption until it no longer needs the exporter's data.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Adopted {
    /// The chunk store's source name ([`source_name`]: names the sharing store too).
    source: String,
    generation: u64,
}

fn adopted_key(barcode: &str) -> Vec<u8> {
    [ADOPTED_PREFIX, barcode.as_bytes()].concat()
}

/// The chunk store's source name for share `generation` of `barcode` from `store`: one per
/// share, so its foreign packs going away means exactly this share is released. reel's
/// resolver reads the store before the `#`.
pub fn source_name(store: &str, barcode: &str, generation: u64) -> String {
    format!("{store}#{barcode}/{generation:016x}")
}

/// The store a [`source_name`] names.
pub fn source_store(source: &str) -> &str {
    source.split_once('#').map_or(source, |(store, _)| store)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Shares and adoptions of one store's cartridges through one vault.
#[derive(Clone)]
pub struct SharedVault {
    cartridges: Cartridges,
    vault: Arc<dyn Backend>,
    store: String,
    node: String,
    part_bytes: usize,
}

impl SharedVault {
    /// `store` is this store's name as every node's resolver knows it (reel: its bucket
    /// prefix); `node` names this node for people.
    pub fn new(cartridges: Cartridges, vault: Arc<dyn Backend>, store: &str, node: &str) -> Self {
        SharedVault {
            cartridges,
            vault,
            store: store.to_string(),
            node: node.to_string(),
            part_bytes: PART_BYTES,
        }
    }

    /// Bundle parts of about `bytes` (small in tests, to get many).
    pub fn with_part_bytes(mut self, bytes: usize) -> SharedVault {
        self.part_bytes = bytes.max(1);
        self
    }

    fn part_key(
        &self,
        barcode: &str,
        generation: u64,
        partition: u8,
        n: usize,
    ) -> Result<Key, ShareError> {
        self.object(barcode, generation, &format!("p{partition}.{n:06}.bundle"))
    }

    fn object(&self, barcode: &str, generation: u64, suffix: &str) -> Result<Key, ShareError> {
        let name = format!("{barcode}/{generation:016x}.{suffix}");
        Key::new(name).map_err(|_| ShareError::BadBarcode(barcode.to_string()))
    }

    fn read_json<T: for<'de> Deserialize<'de>>(&self, key: &Key) -> Result<Option<T>, ShareError> {
        match self.vault.get(key) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| ShareError::Damaged {
                        key: key.to_string(),
                        why: e.to_string(),
                    })
            }
            Err(BackendError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn marker(&self, at: u64) -> Vec<u8> {
        serde_json::to_vec_pretty(&Marker {
            store: self.store.clone(),
            node: self.node.clone(),
            at,
        })
        .expect("a marker encodes")
    }

    /// Writes a `.taken` naming this store; `Ok(None)` if we won (or had already), else the
    /// marker of the store that did.
    fn claim(
        &self,
        barcode: &str,
        generation: u64,
        now: u64,
    ) -> Result<Option<Marker>, ShareError> {
        let key = self.object(barcode, generation, "taken")?;
        match self.vault.put(&key, &self.marker(now), PutMode::Create) {
            Ok(()) => Ok(None),
            Err(BackendError::AlreadyExists(_)) => {
                let marker: Marker = self.read_json(&key)?.ok_or_else(|| ShareError::Damaged {
                    key: key.to_string(),
                    why: "exists, then could not be read".into(),
                })?;
                Ok((marker.store != self.store).then_some(marker))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Generations of `barcode` in the vault with a `.share`, oldest first.
    fn generations(&self, barcode: &str) -> Result<Vec<u64>, ShareError> {
        let prefix = format!("{barcode}/");
        let mut out: Vec<u64> = self
            .vault
            .list(&prefix)?
            .iter()
            .filter_map(|o| {
                let rest = o.key.as_str().strip_prefix(&prefix)?;
                let hex = rest.strip_suffix(".share")?;
                (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
            })
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    fn entry(&self, barcode: &str, generation: u64) -> Result<Option<ShareEntry>, ShareError> {
        let key = self.object(barcode, generation, "share")?;
        let Some(header) = self.read_json::<ShareHeader>(&key)? else {
            return Ok(None);
        };
        if header.format != SHARE_FORMAT
            || header.barcode != barcode
            || header.generation != generation
        {
            return Err(ShareError::Damaged {
                key: key.to_string(),
                why: format!(
                    "format {} for {} generation {} (expected format {SHARE_FORMAT})",
                    header.format, header.barcode, header.generation
                ),
            });
        }
        Ok(Some(ShareEntry {
            header,
            taken: self.read_json(&self.object(barcode, generation, "taken")?)?,
            released: self.read_json(&self.object(barcode, generation, "released")?)?,
        }))
    }

    /// Every share in the vault, by barcode then generation.
    pub fn list(&self) -> Result<Vec<ShareEntry>, ShareError> {
        let mut out = Vec::new();
        let mut barcodes: Vec<String> = self
            .vault
            .list("")?
            .into_iter()
            .filter(|o| o.key.as_str().ends_with(".share"))
            .filter_map(|o| o.key.as_str().split_once('/').map(|(b, _)| b.to_string()))
            .collect();
        barcodes.sort_unstable();
        barcodes.dedup();
        for barcode in barcodes {
            for generation in self.generations(&barcode)? {
                if let Some(e) = self.entry(&barcode, generation)? {
                    out.push(e);
                }
            }
        }
        Ok(out)
    }

    /// Shares a cartridge of this store's vault: its partitions are pinned and exported, and
    /// it stays here, `shared`, until another store adopts and releases it (or [`Self::unshare`]).
    /// The caller has checked that no library holds it. [`Self::begin_share`] then
    /// [`Self::run_share`].
    pub fn share(&self, barcode: &str, now: u64) -> Result<ShareHeader, ShareError> {
        let generation = self.begin_share(barcode, now)?;
        self.run_share(barcode, generation, now)
    }

    /// Records `sharing` durably (from here the cartridge cannot be imported or erased) and
    /// returns the share's generation. The caller holds the catalog lock around its own check
    /// that the cartridge is in the vault and this call.
    pub fn begin_share(&self, barcode: &str, now: u64) -> Result<u64, ShareError> {
        let cartridges = &self.cartridges;
        let _catalog = cartridges.lock_catalog();
        cartridges.info(barcode).map_err(not_found(barcode))?;
        self.object(barcode, 0, "share")?;
        if let Some(state) = cartridges.archive_state(barcode)? {
            return Err(ShareError::State {
                barcode: barcode.into(),
                state: state.name().into(),
                hint: "only an available cartridge in the vault can be shared".into(),
            });
        }
        let generation = self
            .generations(barcode)?
            .last()
            .map_or(now, |last| now.max(last + 1))
            .max(1);
        cartridges.set_archive_state(barcode, Some(ArchiveState::Sharing { generation }))?;
        cartridges.store().sync()?;
        Ok(generation)
    }

    /// Exports a cartridge in state `sharing` (without the catalog lock: uploading what the
    /// store has not yet put into the bucket may take a while) and commits the share. On an
    /// error the cartridge goes back to available, or on to shared if the share was committed.
    pub fn run_share(
        &self,
        barcode: &str,
        generation: u64,
        now: u64,
    ) -> Result<ShareHeader, ShareError> {
        match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Sharing { generation: g }) if g == generation => {}
            other => return Err(wrong_state(barcode, other, "begin the share first")),
        }
        let (number, info) = self.cartridges.info(barcode).map_err(not_found(barcode))?;
        match self.share_steps(barcode, number, &info, generation, now) {
            Ok(header) => Ok(header),
            Err(e) => {
                // Nothing names the share yet unless its `.share` landed: recovery decides.
                let _ = self.recover_one(barcode);
                Err(e)
            }
        }
    }

    fn share_steps(
        &self,
        barcode: &str,
        number: u64,
        info: &CartridgeInfo,
        generation: u64,
        now: u64,
    ) -> Result<ShareHeader, ShareError> {
        let store = self.cartridges.store();
        let streams = store.streams()?;
        let label = format!("shared {barcode} generation {generation}");
        let mut partitions = Vec::new();
        let mut data_bytes = 0;
        for p in 0..PARTITIONS {
            let stream = stream_of(number, p);
            let Some((_, len)) = streams.iter().find(|(id, _)| *id == stream) else {
                continue;
            };
            data_bytes += len;
            let mut parts = Vec::new();
            store
                .export_stream(stream, label.as_bytes(), self.part_bytes, &mut |bytes| {
                    let key = self
                        .part_key(barcode, generation, p, parts.len())
                        .map_err(|e| StoreError::Invalid(e.to_string()))?;
                    self.vault
                        .put(&key, &bytes, PutMode::Create)
                        .map_err(StoreError::Backend)?;
                    parts.push(BundlePart {
                        bytes: bytes.len() as u64,
                        blake3: blake3::hash(&bytes).to_hex().to_string(),
                    });
                    Ok(())
                })
                .map_err(|e| match e {
                    StoreError::InUse(_) => ShareError::Mounted(barcode.to_string()),
                    // Data adopted from another store, or too large for one bundle.
                    StoreError::Invalid(why) => ShareError::State {
                        barcode: barcode.into(),
                        state: "not shareable".into(),
                        hint: why,
                    },
                    other => other.into(),
                })?;
            partitions.push(SharedPartition {
                partition: p,
                parts,
            });
        }
        let header = ShareHeader {
            format: SHARE_FORMAT,
            barcode: barcode.to_string(),
            generation,
            from_store: self.store.clone(),
            from_node: self.node.clone(),
            shared_at: now,
            info: hex(&info.to_bytes()),
            data_bytes,
            partitions,
        };
        let bytes = serde_json::to_vec_pretty(&header).expect("a share header encodes");
        self.vault.put(
            &self.object(barcode, generation, "share")?,
            &bytes,
            PutMode::Create,
        )?;
        self.cartridges.set_archive_state(
            barcode,
            Some(ArchiveState::Shared {
                generation,
                shared_at: now,
            }),
        )?;
        self.cartridges.store().sync()?;
        Ok(header)
    }

    /// Takes a shared cartridge back before another store adopted it: available here again.
    pub fn unshare(&self, barcode: &str, now: u64) -> Result<(), ShareError> {
        let _catalog = self.cartridges.lock_catalog();
        let generation = match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Shared { generation, .. }) => generation,
            other => {
                return Err(wrong_state(
                    barcode,
                    other,
                    "only a shared cartridge can be unshared",
                ));
            }
        };
        if let Some(other) = self.claim(barcode, generation, now)? {
            return Err(ShareError::State {
                barcode: barcode.into(),
                state: "shared".into(),
                hint: format!(
                    "it was adopted by node {} (store {}); it leaves this store once that \
                     store releases it",
                    other.node, other.store
                ),
            });
        }
        self.unpin(barcode)?;
        self.cartridges.set_archive_state(barcode, None)?;
        self.cartridges.store().sync()?;
        self.delete_objects(barcode, generation)?;
        Ok(())
    }

    fn unpin(&self, barcode: &str) -> Result<(), ShareError> {
        let (number, _) = self.cartridges.info(barcode).map_err(not_found(barcode))?;
        for p in 0..PARTITIONS {
            self.cartridges.store().unpin_stream(stream_of(number, p))?;
        }
        Ok(())
    }

    fn delete_objects(&self, barcode: &str, generation: u64) -> Result<(), ShareError> {
        let prefix = format!("{barcode}/{generation:016x}.");
        for o in self.vault.list(&format!("{barcode}/"))? {
            if o.key.as_str().starts_with(&prefix) {
                self.vault.delete(&o.key)?;
            }
        }
        Ok(())
    }

    /// Adopts the newest share of `barcode` from another store: this store gets the cartridge,
    /// in its vault (in no library), reading its data in place. Exactly one store wins a race.
    pub fn adopt(&self, barcode: &str, now: u64) -> Result<(u64, CartridgeInfo), ShareError> {
        let cartridges = &self.cartridges;
        let _catalog = cartridges.lock_catalog();
        let entry = self
            .generations(barcode)?
            .into_iter()
            .rev()
            .find_map(|g| self.entry(barcode, g).transpose())
            .transpose()?
            .ok_or_else(|| ShareError::NotShared(barcode.to_string()))?;
        let header = entry.header;
        let generation = header.generation;
        if let Some(taken) = entry.taken {
            return Err(ShareError::State {
                barcode: barcode.into(),
                state: "adopted".into(),
                hint: format!("node {} (store {}) adopted it", taken.node, taken.store),
            });
        }
        if header.from_store == self.store {
            return Err(ShareError::State {
                barcode: barcode.into(),
                state: "shared by this store".into(),
                hint: "unshare it to have it back here".into(),
            });
        }
        match cartridges.info(barcode) {
            Ok(_) => return Err(ShareError::Exists(barcode.to_string())),
            Err(CartridgeError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let share_key = self.object(barcode, generation, "share")?;
        let damaged = |why: String| ShareError::Damaged {
            key: share_key.to_string(),
            why,
        };
        let info_bytes = unhex(&header.info).ok_or_else(|| damaged("info is not hex".into()))?;
        let info = CartridgeInfo::from_bytes(&info_bytes)
            .map_err(|e| damaged(format!("cartridge info: {e}")))?;
        if info.barcode().as_str() != barcode {
            return Err(damaged(format!(
                "the info names {}",
                info.barcode().as_str()
            )));
        }
        // Every part is read and checked before anything is written (and checked again as it
        // is imported): a damaged share adds nothing here.
        for p in &header.partitions {
            if p.partition >= PARTITIONS {
                return Err(damaged(format!("partition {}", p.partition)));
            }
            for n in 0..p.parts.len() {
                self.read_part(barcode, generation, p, n)?;
            }
        }

        // 1: the cartridge, `adopting` (not importable), its streams read in place.
        let source = source_name(&header.from_store, barcode, generation);
        let number = cartridges.create_adopting(&info, generation)?;
        let imported = (|| -> Result<(), ShareError> {
            for p in &header.partitions {
                let mut parts = (0..p.parts.len()).map(|n| {
                    self.read_part(barcode, generation, p, n)
                        .map_err(|e| StoreError::Invalid(e.to_string()))
                });
                cartridges.store().import_stream(
                    &source,
                    &mut parts,
                    stream_of(number, p.partition),
                )?;
            }
            let adopted = Adopted {
                source: source.clone(),
                generation,
            };
            cartridges.store().put_record(
                &adopted_key(barcode),
                Some(&serde_json::to_vec(&adopted).expect("encodes")),
            )?;
            cartridges.store().sync()?;
            Ok(())
        })();
        if let Err(e) = imported {
            let _ = self.roll_back_adoption(barcode);
            return Err(e);
        }
        // 2: the claim.
        match self.claim(barcode, generation, now) {
            Ok(None) => {}
            Ok(Some(other)) => {
                self.roll_back_adoption(barcode)?;
                return Err(ShareError::State {
                    barcode: barcode.into(),
                    state: "adopted".into(),
                    hint: format!(
                        "node {} (store {}) adopted it first",
                        other.node, other.store
                    ),
                });
            }
            Err(e) => {
                let _ = self.roll_back_adoption(barcode);
                return Err(e);
            }
        }
        // 3: available here.
        cartridges.set_archive_state(barcode, None)?;
        cartridges.store().sync()?;
        Ok((number, info))
    }

    /// Part `n` of a shared partition, checked against the hash its share names.
    fn read_part(
        &self,
        barcode: &str,
        generation: u64,
        partition: &SharedPartition,
        n: usize,
    ) -> Result<Vec<u8>, ShareError> {
        let key = self.part_key(barcode, generation, partition.partition, n)?;
        let bytes = self.vault.get(&key)?;
        let want = &partition.parts[n];
        if bytes.len() as u64 != want.bytes || blake3::hash(&bytes).to_hex().as_str() != want.blake3
        {
            return Err(ShareError::Damaged {
                key: key.to_string(),
                why: "does not match the size and hash its share names".into(),
            });
        }
        Ok(bytes)
    }

    fn roll_back_adoption(&self, barcode: &str) -> Result<(), ShareError> {
        let cartridges = &self.cartridges;
        cartridges.remove_moved(barcode)?;
        cartridges.store().put_record(&adopted_key(barcode), None)?;
        cartridges.set_archive_state(barcode, None)?;
        cartridges.store().sync()?;
        Ok(())
    }

    /// Adopter side: tells the exporters of adopted cartridges whose data this store no longer
    /// reads (their source has no foreign pack left: run after a reclaim) that they may drop
    /// it. Returns the barcodes released.
    pub fn release(&self, now: u64) -> Result<Vec<String>, ShareError> {
        let store = self.cartridges.store();
        let sources = store.foreign_sources();
        let mut out = Vec::new();
        for (k, v) in store.records(ADOPTED_PREFIX)? {
            let barcode = String::from_utf8_lossy(&k[ADOPTED_PREFIX.len()..]).into_owned();
            if matches!(
                self.cartridges.archive_state(&barcode)?,
                Some(ArchiveState::Adopting { .. })
            ) {
                continue;
            }
            let adopted: Adopted = serde_json::from_slice(&v).map_err(|e| ShareError::Damaged {
                key: format!("record adopted/{barcode}"),
                why: e.to_string(),
            })?;
            if sources.contains(&adopted.source) {
                continue;
            }
            let key = self.object(&barcode, adopted.generation, "released")?;
            match self.vault.put(&key, &self.marker(now), PutMode::Create) {
                Ok(()) | Err(BackendError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            store.put_record(&k, None)?;
            out.push(barcode);
        }
        if !out.is_empty() {
            store.sync()?;
        }
        Ok(out)
    }

    /// Exporter side: cartridges whose adopter released them leave this store (streams
    /// unpinned and deleted, the cartridge forgotten; a reclaim then frees their packs), and
    /// their vault objects are deleted. Returns the barcodes that left.
    pub fn collect(&self) -> Result<Vec<String>, ShareError> {
        let mut out = Vec::new();
        for (barcode, state) in self.cartridges.archive_states()? {
            let ArchiveState::Shared { generation, .. } = state else {
                continue;
            };
            let released = self.object(&barcode, generation, "released")?;
            if self.read_json::<Marker>(&released)?.is_none() {
                continue;
            }
            {
                let _catalog = self.cartridges.lock_catalog();
                self.unpin(&barcode)?;
                self.cartridges.remove_moved(&barcode)?;
                self.cartridges.set_archive_state(&barcode, None)?;
                self.cartridges.store().sync()?;
            }
            self.delete_objects(&barcode, generation)?;
            out.push(barcode);
        }
        Ok(out)
    }

    /// Settles shares and adoptions a crash interrupted (see the module's tables); run when the
    /// server starts. Returns what it did, per barcode.
    pub fn recover(&self) -> Result<Vec<(String, &'static str)>, ShareError> {
        let mut out = Vec::new();
        for barcode in self.cartridges.archive_states()?.into_keys() {
            if let Some(what) = self.recover_one(&barcode)? {
                out.push((barcode, what));
            }
        }
        Ok(out)
    }

    fn recover_one(&self, barcode: &str) -> Result<Option<&'static str>, ShareError> {
        let _catalog = self.cartridges.lock_catalog();
        match self.cartridges.archive_state(barcode)? {
            Some(ArchiveState::Sharing { generation }) => {
                let share = self.object(barcode, generation, "share")?;
                if self.read_json::<ShareHeader>(&share)?.is_some() {
                    self.cartridges.set_archive_state(
                        barcode,
                        Some(ArchiveState::Shared {
                            generation,
                            shared_at: generation,
                        }),
                    )?;
                    self.cartridges.store().sync()?;
                    Ok(Some("shared"))
                } else {
                    self.unpin(barcode)?;
                    self.cartridges.set_archive_state(barcode, None)?;
                    self.cartridges.store().sync()?;
                    // Bundles of the attempt: garbage, no `.share` names them.
                    self.delete_objects(barcode, generation)?;
                    Ok(Some("share undone"))
                }
            }
            Some(ArchiveState::Adopting { generation }) => {
                let taken = self.object(barcode, generation, "taken")?;
                match self.read_json::<Marker>(&taken)? {
                    Some(m) if m.store == self.store => {
                        self.cartridges.set_archive_state(barcode, None)?;
                        self.cartridges.store().sync()?;
                        Ok(Some("adopted"))
                    }
                    _ => {
                        self.roll_back_adoption(barcode)?;
                        Ok(Some("adoption undone"))
                    }
                }
            }
            _ => Ok(None),
        }
    }

    /// Adopted cartridges still reading another store's data, with that store.
    pub fn adopted(&self) -> Result<BTreeMap<String, String>, ShareError> {
        let mut out = BTreeMap::new();
        for (k, v) in self.cartridges.store().records(ADOPTED_PREFIX)? {
            let barcode = String::from_utf8_lossy(&k[ADOPTED_PREFIX.len()..]).into_owned();
            if let Ok(a) = serde_json::from_slice::<Adopted>(&v) {
                out.insert(barcode, source_store(&a.source).to_string());
            }
        }
        Ok(out)
    }
}

fn not_found(barcode: &str) -> impl FnOnce(CartridgeError) -> ShareError + '_ {
    move |e| match e {
        CartridgeError::NotFound(_) => ShareError::NotFound(barcode.to_string()),
        other => ShareError::Cartridge(other),
    }
}

fn wrong_state(barcode: &str, state: Option<ArchiveState>, hint: &str) -> ShareError {
    ShareError::State {
        barcode: barcode.into(),
        state: state.map_or("available", |s| s.name()).into(),
        hint: hint.into(),
    }
}

#[cfg(test)]
mod tests;
