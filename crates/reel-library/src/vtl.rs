//! A virtual tape library: one SMC changer, its SSC drives, slots and import/export
//! elements, over the cartridges kept in the chunk store.
//!
//! The changer ([`reel_smc::Changer`]) owns the inventory — which barcode is in which
//! element — and persists it through a saver into a store record, durably, before a move
//! completes. Its drive elements reach the tape drives ([`reel_ssc::TapeDrive`]) through
//! [`Bay`], which mounts a cartridge from [`Cartridges`] on load and saves it on unload.
//!
//! Invariants:
//! - A barcode is in at most one element of one library; a cartridge is mounted in at most
//!   one drive (its streams are opened once).
//! - Lock order: changer, then drive. Drive commands never reach the changer.
//! - After a crash the saved inventory is the truth: cartridges it places in drives are
//!   mounted there again at start-up (rewound; initiators see a power-on unit attention).

use std::collections::BTreeSet;
use std::sync::Arc;

use reel_scsi::{ItNexus, LunTable, ScsiDevice};
use reel_smc::{
    BayError, Changer, ChangerModel, DriveBay, DriveIdentification, Element, ElementType,
    Inventory, Layout,
};
use reel_ssc::{DriveModel, InsertError, RemoveError, TapeDrive};

use reel_volume::{BarcodeFilter, CartridgeError, Cartridges, ChunkPartition};

/// A drive as the library runs it.
pub type Drive = ScsiDevice<TapeDrive<ChunkPartition>>;

/// What a library is made of.
#[derive(Clone, Debug)]
pub struct LibrarySpec {
    /// Unique among the server's libraries; names the inventory record.
    pub name: String,
    pub changer: &'static ChangerModel,
    pub drive: &'static DriveModel,
    pub layout: Layout,
    /// Only these cartridges go into this library's free slots when it opens (its pool).
    pub barcodes: BarcodeFilter,
    /// The physical library this one is a logical partition of (for display; each
    /// partition is a library of its own with its own changer and element addresses).
    pub physical: Option<String>,
    /// Distinguishes serial numbers of several libraries (0, 1, …).
    pub index: u16,
    /// Physical timing (issue 17): off (`None`) by default.
    pub emulation: Option<Emulation>,
}

/// What a library emulates the timing of: its drives' physical model and its robot.
#[derive(Clone, Debug)]
pub struct Emulation {
    pub drive: &'static reel_drivemodel::DriveSpec,
    /// The drives (by index) that emulate; the others answer at reel's own speed.
    pub drives: Option<Vec<u16>>,
    pub robot: &'static reel_drivemodel::RobotSpec,
}

impl Emulation {
    fn covers(&self, drive: u16) -> bool {
        self.drives.as_ref().is_none_or(|d| d.contains(&drive))
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LibraryError {
    #[error("cartridges: {0}")]
    Cartridges(#[from] CartridgeError),
    #[error("store: {0}")]
    Store(#[from] reel_chunkstore::StoreError),
    #[error("library {library}: saved inventory is unreadable: {reason}")]
    Inventory { library: String, reason: String },
    #[error("library {library}: {reason}")]
    Changer { library: String, reason: String },
    #[error("library {library}: cartridge {barcode} could not be put back in its drive: {reason}")]
    Remount {
        library: String,
        barcode: String,
        reason: String,
    },
}

/// One virtual tape library.
pub struct VirtualLibrary {
    spec: LibrarySpec,
    changer: Arc<ScsiDevice<Changer>>,
    drives: Vec<Arc<Drive>>,
    /// Each drive's state as of its last command (see [`DriveStatus`]).
    statuses: Vec<Arc<std::sync::Mutex<DriveStatus>>>,
}

/// What a status display shows of a drive. Each drive publishes it after every command, so
/// reading it never waits behind a long command holding the drive (with 256 drives writing,
/// asking each drive in turn would wait for each one's current WRITE).
#[derive(Clone, Debug)]
pub struct DriveStatus {
    pub state: reel_ssc::DriveState,
    pub stats: reel_ssc::DriveStats,
    pub barcode: Option<String>,
    /// PREVENT ALLOW MEDIUM REMOVAL in force.
    pub removal_prevented: bool,
    pub serial: String,
    /// The physical model's state, when the drive emulates one.
    pub physical: Option<(
        &'static reel_drivemodel::DriveSpec,
        reel_drivemodel::DriveStats,
    )>,
}

impl DriveStatus {
    fn publish(board: &std::sync::Mutex<DriveStatus>, drive: &TapeDrive<ChunkPartition>) {
        let Ok(mut status) = board.lock() else {
            return;
        };
        status.state = drive.state();
        status.stats = drive.stats();
        status.removal_prevented = drive.removal_prevented();
        status.physical = drive.physical();
        let barcode = drive.medium().map(|c| c.barcode().as_str());
        // Most commands change no cartridge: no allocation then.
        if status.barcode.as_deref() != barcode {
            status.barcode = barcode.map(str::to_string);
        }
    }
}

/// The identity used for actions of the library itself (start-up remounts).
fn internal_nexus() -> ItNexus {
    ItNexus::new("reel-library,internal", 0)
}

fn inventory_key(name: &str) -> Vec<u8> {
    format!("library/{name}/inventory").into_bytes()
}

/// A drive element's link to its tape drive.
pub struct Bay {
    drive: Arc<Drive>,
    cartridges: Arc<Cartridges>,
    identification: DriveIdentification,
}

impl DriveBay for Bay {
    fn identification(&self) -> DriveIdentification {
        self.identification.clone()
    }

    fn load(&self, barcode: &str, nexus: &ItNexus) -> Result<(), BayError> {
        let cartridge = self
            .cartridges
            .mount(barcode)
            .map_err(|e| BayError::DriveFailure(e.to_string()))?;
        self.drive
            .with_context(nexus, |drive, ctx| {
                drive.insert(cartridge, ctx).map_err(|(_, e)| e)
            })
            .map_err(|e| match e {
                InsertError::Incompatible { .. } => BayError::IncompatibleMedium,
                other => BayError::DriveFailure(other.to_string()),
            })
    }

    fn unload(&self, nexus: &ItNexus) -> Result<String, BayError> {
        let cartridge = self
            .drive
            .with_context(nexus, TapeDrive::remove)
            .map_err(|e| match e {
                RemoveError::Prevented => BayError::RemovalPrevented,
                RemoveError::Empty => BayError::NotReady,
                other => BayError::DriveFailure(other.to_string()),
            })?;
        Ok(cartridge.barcode().as_str().to_string())
    }
}

impl VirtualLibrary {
    /// Opens every library of the server over one set of cartridges. Each library's saved
    /// inventory is loaded first; cartridges no library holds (new ones) then go to the free
    /// storage slots of the first library whose barcode prefix they match, and inventories
    /// naming cartridges that no longer exist forget them.
    pub fn open_all(
        cartridges: Arc<Cartridges>,
        specs: &[LibrarySpec],
    ) -> Result<Vec<VirtualLibrary>, LibraryError> {
        let existing: BTreeSet<String> = cartridges
            .list()?
            .into_iter()
            .map(|(_, info)| info.barcode().as_str().to_string())
            .collect();
        // Archived cartridges (and those moving to or from the archive) stay in the vault:
        // their data is not in the store, so no library may take them in as newcomers.
        let archived = cartridges
            .archive_states()
            .map_err(|e| LibraryError::Inventory {
                library: "(all)".into(),
                reason: format!("reading the archive states: {e}"),
            })?;
        let mut inventories = Vec::new();
        let mut claimed: BTreeSet<String> = archived.into_keys().collect();
        for spec in specs {
            let mut inventory = match cartridges.store().record(&inventory_key(&spec.name))? {
                Some(bytes) => Inventory::decode(&bytes).map_err(|e| LibraryError::Inventory {
                    library: spec.name.clone(),
                    reason: e.to_string(),
                })?,
                None => Inventory::empty(&spec.layout),
            };
            if !inventory.fits(&spec.layout) {
                return Err(LibraryError::Inventory {
                    library: spec.name.clone(),
                    reason: "the saved inventory has other element counts than the configuration; \
                             move cartridges out of removed elements first"
                        .into(),
                });
            }
            let elements: Vec<(Element, String)> = inventory
                .iter()
                .filter_map(|(e, c)| c.map(|c| (e, c.barcode.clone())))
                .collect();
            for (element, barcode) in elements {
                if !existing.contains(&barcode) || claimed.contains(&barcode) {
                    // Deleted while reel was stopped, or claimed by another library first.
                    inventory.take(element);
                } else {
                    claimed.insert(barcode);
                }
            }
            inventories.push(inventory);
        }
        for (spec, inventory) in specs.iter().zip(&mut inventories) {
            let free: Vec<Element> = (0..spec.layout.slots)
                .map(|i| Element::new(ElementType::Storage, i))
                .filter(|e| inventory.get(*e).is_none())
                .collect();
            let newcomers: Vec<String> = existing
                .iter()
                .filter(|b| !claimed.contains(*b) && spec.barcodes.matches(b))
                .take(free.len())
                .cloned()
                .collect();
            // One pass (Inventory::put_all): placing 60,000 cartridges stays linear.
            let placements: Vec<(Element, String)> = free.into_iter().zip(newcomers).collect();
            let refused: BTreeSet<Element> = inventory
                .put_all(
                    placements
                        .iter()
                        .map(|(e, b)| (*e, reel_smc::Cartridge::new(b))),
                )
                .into_iter()
                .map(|(e, _)| e)
                .collect();
            for (element, barcode) in placements {
                if !refused.contains(&element) {
                    claimed.insert(barcode);
                }
            }
        }
        specs
            .iter()
            .zip(inventories)
            .map(|(spec, inventory)| Self::open(cartridges.clone(), spec.clone(), inventory))
            .collect()
    }

    fn open(
        cartridges: Arc<Cartridges>,
        spec: LibrarySpec,
        inventory: Inventory,
    ) -> Result<VirtualLibrary, LibraryError> {
        let mut drives = Vec::new();
        let mut statuses = Vec::new();
        let mut bays: Vec<Arc<dyn DriveBay>> = Vec::new();
        for d in 0..spec.layout.drives {
            // 10 characters: what PBS expects to parse the changer's DVCID (docs/design/smc.md).
            let serial = format!("RD{:03}{:05}", spec.index, d);
            let saver_carts = cartridges.clone();
            let factory_carts = cartridges.clone();
            let mut drive = TapeDrive::new(spec.drive, &serial)
                .with_saver(Box::new(move |cartridge| {
                    saver_carts.save(cartridge).map_err(|e| e.to_string())?;
                    saver_carts.store().sync().map_err(|e| e.to_string())
                }))
                .with_partition_factory(Box::new(move |info, partition| {
                    let (number, _) = factory_carts
                        .info(info.barcode().as_str())
                        .map_err(|e| reel_chunkstore::StoreError::Invalid(e.to_string()))?;
                    factory_carts.open_partition(number, partition)
                }));
            if let Some(emulation) = spec.emulation.as_ref().filter(|e| e.covers(d)) {
                drive.emulate(Some(emulation.drive));
            }
            let board = Arc::new(std::sync::Mutex::new(DriveStatus {
                state: drive.state(),
                stats: drive.stats(),
                barcode: None,
                removal_prevented: false,
                serial: serial.clone(),
                physical: drive.physical(),
            }));
            let publisher = board.clone();
            let drive = Arc::new(
                ScsiDevice::new(drive).with_observer(move |d| DriveStatus::publish(&publisher, d)),
            );
            statuses.push(board);
            bays.push(Arc::new(Bay {
                drive: drive.clone(),
                cartridges: cartridges.clone(),
                identification: DriveIdentification {
                    vendor: spec.drive.vendor().to_string(),
                    product: spec.drive.product().to_string(),
                    serial,
                },
            }));
            drives.push(drive);
        }
        // Cartridges the saved inventory places in drives go back in (after a restart or crash).
        let nexus = internal_nexus();
        for (element, cartridge) in inventory.iter() {
            let (Some(cartridge), ElementType::DataTransfer) = (cartridge, element.kind) else {
                continue;
            };
            let bay = &bays[element.index as usize];
            bay.load(&cartridge.barcode, &nexus)
                .map_err(|e| LibraryError::Remount {
                    library: spec.name.clone(),
                    barcode: cartridge.barcode.clone(),
                    reason: e.to_string(),
                })?;
        }
        let saver_carts = cartridges.clone();
        let key = inventory_key(&spec.name);
        // Persist the starting inventory (placement of new cartridges, forgotten ones).
        cartridges
            .store()
            .put_record(&key, Some(&inventory.encode()))?;
        cartridges.store().sync()?;
        let mut changer = Changer::new(
            spec.changer,
            spec.layout,
            &format!("RC{:03}00000", spec.index),
            bays,
            inventory,
        )
        .map_err(|e| LibraryError::Changer {
            library: spec.name.clone(),
            reason: e.to_string(),
        })?
        .with_saver(Box::new(move |inventory| {
            // Durable before the move completes: a crash never loses where a cartridge is.
            saver_carts
                .store()
                .put_record(&key, Some(&inventory.encode()))
                .map_err(|e| e.to_string())?;
            saver_carts.store().sync().map_err(|e| e.to_string())
        }));
        changer.set_move_time(spec.emulation.as_ref().map(|e| e.robot.move_time));
        Ok(VirtualLibrary {
            spec,
            changer: Arc::new(ScsiDevice::new(changer)),
            drives,
            statuses,
        })
    }

    /// Every drive's status as of its last command, without waiting for any drive.
    pub fn drive_statuses(&self) -> Vec<DriveStatus> {
        self.statuses
            .iter()
            .map(|s| match s.lock() {
                Ok(s) => s.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            })
            .collect()
    }

    pub fn spec(&self) -> &LibrarySpec {
        &self.spec
    }

    pub fn changer(&self) -> &Arc<ScsiDevice<Changer>> {
        &self.changer
    }

    pub fn drives(&self) -> &[Arc<Drive>] {
        &self.drives
    }

    /// The logical units as one SCSI target: the changer at LUN 0, drives at LUN 1…n (in
    /// drive element order, so drive element k is LUN k+1).
    pub fn lun_table(&self) -> LunTable {
        let mut table = LunTable::new();
        table.insert(0, self.changer.clone());
        for (i, drive) in self.drives.iter().enumerate() {
            table.insert(i as u64 + 1, drive.clone());
        }
        table
    }

    /// Synchronises every loaded cartridge and saves its state: the clean stop. Cartridges
    /// stay in their drive elements; the next start mounts them again. Returns the drives
    /// that failed, with why.
    pub fn flush(&self) -> Vec<(usize, String)> {
        let mut failures = Vec::new();
        for (i, drive) in self.drives.iter().enumerate() {
            if let Err(e) = drive.with_personality(TapeDrive::flush) {
                failures.push((i, e));
            }
        }
        failures
    }
}
