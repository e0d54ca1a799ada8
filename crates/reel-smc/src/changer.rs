//! [`Changer`]: the SMC-3 medium changer personality — construction, inventory commits with
//! the saver, operator import/export, and the [`Personality`] glue. The commands themselves
//! are in `commands.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use reel_scsi::{
    Access, Asc, Cdb, Command, DeviceContext, Identity, ItNexus, OpcodeDescriptor, Personality,
    Response, ScsiResult, Sense, SenseKey, TaskManagement,
};
use thiserror::Error;

use crate::bay::{BayError, DriveBay};
use crate::inventory::{Cartridge, Inventory, InventoryError, VolumeTag, valid_barcode};
use crate::model::{AddressMap, ChangerModel, Element, ElementType, Layout, MapError};

/// Called with the new inventory after every change; must persist it durably.
pub type Saver = Box<dyn FnMut(&Inventory) -> Result<(), String> + Send>;

/// SMC-3 version descriptor "SMC-3 (no version claimed)" (SPC-4 §6.6.2, table 144).
const VERSION_SMC3: u16 = 0x0480;

/// Why a changer could not be built.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ChangerError {
    #[error("the {kind} elements do not fit in the 16-bit element address space")]
    AddressOverflow { kind: ElementType },
    #[error("the {0} and {1} element address ranges overlap")]
    AddressOverlap(ElementType, ElementType),
    #[error("{expected} drives in the layout but {got} drive bays")]
    BayCount { expected: u16, got: usize },
    #[error("magazines {count} x {each} do not make {slots} slots")]
    Magazines { count: u16, each: u16, slots: u16 },
    #[error("the inventory does not have the layout's element counts")]
    InventoryLayout,
    #[error("invalid inventory: {0}")]
    Inventory(#[from] InventoryError),
}

/// Why an operator action was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OperatorError {
    #[error("no element at address {0:#06x}")]
    InvalidElement(u16),
    #[error("element {0:#06x} is not reachable by the operator (not import/export or magazine)")]
    NotOperatorAccessible(u16),
    #[error("element {0:#06x} is full")]
    ElementFull(u16),
    #[error("element {0:#06x} is empty")]
    ElementEmpty(u16),
    #[error("invalid barcode {0:?} (1-32 printable ASCII characters, no spaces)")]
    InvalidBarcode(String),
    #[error("barcode {0:?} is already in the library")]
    DuplicateBarcode(String),
    #[error("medium removal is prevented (PREVENT ALLOW MEDIUM REMOVAL)")]
    RemovalPrevented,
    #[error("not enough free storage slots")]
    NoFreeSlot,
    #[error("the inventory could not be saved: {0}")]
    Persist(String),
}

/// One element as the console and the API show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementStatus {
    pub address: u16,
    pub element: Element,
    pub barcode: Option<String>,
    /// Address of the element the cartridge was last moved from.
    pub source: Option<u16>,
    /// Put there by the operator (IMPEXP).
    pub imported: bool,
    pub alternate_tag: Option<VolumeTag>,
    /// EXCEPT with this ASC/ASCQ.
    pub exception: Option<Asc>,
    /// Whether `operator_insert`/`operator_remove` work on this element.
    pub operator_accessible: bool,
}

/// The result of a SEND VOLUME TAG translate, kept per nexus for REQUEST VOLUME ELEMENT
/// ADDRESS (SMC-3 §6.x).
pub(crate) struct Translation {
    pub(crate) action: u8,
    pub(crate) elements: Vec<Element>,
}

/// One load or unload done on a drive bay during a move (undone in reverse on failure).
pub(crate) enum BayOp {
    Unload { drive: u16, barcode: String },
    Load { drive: u16, barcode: String },
}

/// The SMC-3 medium changer.
pub struct Changer {
    pub(crate) model: &'static ChangerModel,
    pub(crate) layout: Layout,
    pub(crate) map: AddressMap,
    pub(crate) identity: Identity,
    pub(crate) bays: Vec<Arc<dyn DriveBay>>,
    pub(crate) inventory: Inventory,
    saver: Option<Saver>,
    /// Nexuses holding PREVENT MEDIUM REMOVAL (SPC-4 §6.13 semantics, SMC-3 §6.x).
    pub(crate) prevented: HashSet<ItNexus>,
    pub(crate) translations: HashMap<ItNexus, Translation>,
    /// When the library emulates a physical robot: how long one move of a cartridge takes
    /// (MOVE MEDIUM returns after it; EXCHANGE MEDIUM makes two).
    pub(crate) move_time: Option<std::time::Duration>,
}

impl Changer {
    /// Emulates a physical robot's move time (`None`: moves are instant, the default).
    pub fn set_move_time(&mut self, move_time: Option<std::time::Duration>) {
        self.move_time = move_time;
    }

    /// The robot's travel for `moves` cartridge moves, when a move time is emulated.
    pub(crate) fn travel(&self, moves: u32) {
        if let Some(time) = self.move_time {
            std::thread::sleep(time * moves);
        }
    }

    /// A changer of `model` with `layout`, one bay per drive (in drive order) and its saved
    /// inventory.
    pub fn new(
        model: &'static ChangerModel,
        layout: Layout,
        serial: &str,
        bays: Vec<Arc<dyn DriveBay>>,
        inventory: Inventory,
    ) -> Result<Changer, ChangerError> {
        let map = AddressMap::new(&model.bases, &layout).map_err(MapError::into_changer_error)?;
        if let Some((count, each)) = layout.magazines
            && u32::from(count) * u32::from(each) != u32::from(layout.slots)
        {
            return Err(ChangerError::Magazines {
                count,
                each,
                slots: layout.slots,
            });
        }
        if bays.len() != usize::from(layout.drives) {
            return Err(ChangerError::BayCount {
                expected: layout.drives,
                got: bays.len(),
            });
        }
        if !inventory.fits(&layout) {
            return Err(ChangerError::InventoryLayout);
        }
        inventory.validate()?;
        let mut identity = Identity::new(
            0x08,
            model.vendor,
            model.product,
            model.revision,
            serial,
            default_naa(serial),
        );
        identity.removable = true;
        // MCHNGR stays 0: this is a standalone changer, not one attached to a drive (mtx
        // switches to the attached-changer commands when it is set).
        identity.version_descriptors = vec![VERSION_SMC3];
        Ok(Changer {
            model,
            layout,
            map,
            identity,
            bays,
            inventory,
            saver: None,
            prevented: HashSet::new(),
            translations: HashMap::new(),
            move_time: None,
        })
    }

    /// Installs the saver, called with the new inventory after every change before the
    /// command completes; an error fails the command (HARDWARE ERROR) and rolls back.
    pub fn with_saver(mut self, saver: Saver) -> Self {
        self.saver = Some(saver);
        self
    }

    /// Replaces the NAA designator of VPD 83h (default: NAA 3h, locally assigned, derived
    /// from the serial number).
    pub fn with_naa(mut self, naa: u64) -> Self {
        self.identity.naa = naa;
        self
    }

    /// The current inventory.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The model.
    pub fn model(&self) -> &'static ChangerModel {
        self.model
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// An empty inventory for `layout` with `barcodes` in the first storage slots (extra
    /// barcodes are dropped; invalid or duplicate ones are refused by [`Changer::new`]).
    pub fn initial_inventory(layout: &Layout, barcodes: &[String]) -> Inventory {
        let mut inventory = Inventory::empty(layout);
        let placements = (0..layout.slots)
            .zip(barcodes)
            .map(|(index, barcode)| (Element::new(ElementType::Storage, index), barcode));
        let refused = inventory.put_all(
            placements
                .clone()
                .map(|(element, barcode)| (element, Cartridge::new(barcode))),
        );
        for (element, _) in refused {
            // Keep the slot so Changer::new reports the bad barcode.
            if let Some(barcode) = barcodes.get(usize::from(element.index)) {
                inventory.force(element, Cartridge::new(barcode));
            }
        }
        inventory
    }

    /// The element at `address`.
    pub fn element_at(&self, address: u16) -> Option<Element> {
        self.map.element(address)
    }

    /// The address of `element`.
    pub fn address_of(&self, element: Element) -> u16 {
        self.map.address(element)
    }

    /// Every element in address order.
    pub fn elements(&self) -> Vec<ElementStatus> {
        self.map
            .ordered()
            .iter()
            .map(|&(address, element)| {
                let cartridge = self.inventory.get(element);
                ElementStatus {
                    address,
                    element,
                    barcode: cartridge.map(|c| c.barcode.clone()),
                    source: cartridge
                        .and_then(|c| c.source)
                        .map(|s| self.map.address(s)),
                    imported: cartridge.is_some_and(|c| c.imported),
                    alternate_tag: cartridge.and_then(|c| c.alternate.clone()),
                    exception: self.exception(element),
                    operator_accessible: self.operator_accessible(element),
                }
            })
            .collect()
    }

    pub(crate) fn exception(&self, element: Element) -> Option<Asc> {
        match element.kind {
            ElementType::DataTransfer => self
                .bays
                .get(usize::from(element.index))
                .and_then(|b| b.exception()),
            _ => None,
        }
    }

    fn operator_accessible(&self, element: Element) -> bool {
        match element.kind {
            ElementType::ImportExport => true,
            ElementType::Storage => self.layout.magazines.is_some(),
            _ => false,
        }
    }

    fn operator_element(&self, address: u16) -> Result<Element, OperatorError> {
        let element = self
            .map
            .element(address)
            .ok_or(OperatorError::InvalidElement(address))?;
        if !self.operator_accessible(element) {
            return Err(OperatorError::NotOperatorAccessible(address));
        }
        Ok(element)
    }

    /// The operator puts cartridge `barcode` into an import/export element (or, on an
    /// autoloader, a magazine slot). Every nexus gets a unit attention: 28h/01h IMPORT OR
    /// EXPORT ELEMENT ACCESSED for an import/export element, 28h/00h NOT READY TO READY
    /// CHANGE, MEDIUM MAY HAVE CHANGED for a magazine slot.
    pub fn operator_insert(
        &mut self,
        element: u16,
        barcode: &str,
        ctx: &mut DeviceContext<'_>,
    ) -> Result<(), OperatorError> {
        let target = self.operator_element(element)?;
        if !valid_barcode(barcode) {
            return Err(OperatorError::InvalidBarcode(barcode.to_owned()));
        }
        if self.inventory.get(target).is_some() {
            return Err(OperatorError::ElementFull(element));
        }
        if self.inventory.find(barcode).is_some() {
            return Err(OperatorError::DuplicateBarcode(barcode.to_owned()));
        }
        let mut next = self.inventory.clone();
        let mut cartridge = Cartridge::new(barcode);
        cartridge.imported = target.kind == ElementType::ImportExport;
        next.put(target, cartridge)
            .map_err(|e| OperatorError::Persist(e.to_string()))?;
        self.save(&next).map_err(OperatorError::Persist)?;
        self.inventory = next;
        ctx.raise_unit_attention_all(operator_ua(target));
        Ok(())
    }

    /// The operator takes the cartridge out of an import/export element (or magazine slot);
    /// returns its barcode. Refused while a nexus prevents medium removal.
    pub fn operator_remove(
        &mut self,
        element: u16,
        ctx: &mut DeviceContext<'_>,
    ) -> Result<String, OperatorError> {
        let target = self.operator_element(element)?;
        if self.inventory.get(target).is_none() {
            return Err(OperatorError::ElementEmpty(element));
        }
        if !self.prevented.is_empty() {
            return Err(OperatorError::RemovalPrevented);
        }
        let mut next = self.inventory.clone();
        let cartridge = next
            .take(target)
            .ok_or(OperatorError::ElementEmpty(element))?;
        self.save(&next).map_err(OperatorError::Persist)?;
        self.inventory = next;
        ctx.raise_unit_attention_all(operator_ua(target));
        Ok(cartridge.barcode)
    }

    /// An administrator adds new cartridges straight into free storage slots (as when a
    /// library door is opened and the library re-inventoried): each barcode goes to the
    /// lowest free storage element, all or none, saved once; every nexus gets 28h/00h.
    /// Returns the element addresses used, in `barcodes` order.
    pub fn insert_into_storage(
        &mut self,
        barcodes: &[String],
        ctx: &mut DeviceContext<'_>,
    ) -> Result<Vec<u16>, OperatorError> {
        let mut next = self.inventory.clone();
        let free: Vec<Element> = (0..self.layout.slots)
            .map(|i| Element::new(ElementType::Storage, i))
            .filter(|e| next.get(*e).is_none())
            .collect();
        let mut free = free.into_iter();
        let mut used = Vec::with_capacity(barcodes.len());
        let mut placements = Vec::with_capacity(barcodes.len());
        // Every barcode present, once: checking each new one is then O(1), not a scan of
        // every element (quadratic for a bulk insert into a big library).
        let mut present: HashSet<&str> = self
            .inventory
            .iter()
            .filter_map(|(_, c)| c.map(|c| c.barcode.as_str()))
            .collect();
        for barcode in barcodes {
            if !valid_barcode(barcode) {
                return Err(OperatorError::InvalidBarcode(barcode.clone()));
            }
            if !present.insert(barcode.as_str()) {
                return Err(OperatorError::DuplicateBarcode(barcode.clone()));
            }
            let element = free.next().ok_or(OperatorError::NoFreeSlot)?;
            placements.push((element, Cartridge::new(barcode)));
            used.push(self.map.address(element));
        }
        if let Some((_, e)) = next.put_all(placements).into_iter().next() {
            return Err(OperatorError::Persist(e.to_string()));
        }
        if used.is_empty() {
            return Ok(used);
        }
        self.save(&next).map_err(OperatorError::Persist)?;
        self.inventory = next;
        ctx.raise_unit_attention_all(Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED);
        Ok(used)
    }

    /// Tells every nexus the inventory may have changed behind its back (28h/00h), e.g. after
    /// the library was restored or re-read.
    pub fn notify_inventory_changed(&self, ctx: &mut DeviceContext<'_>) {
        ctx.raise_unit_attention_all(Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED);
    }

    fn save(&mut self, inventory: &Inventory) -> Result<(), String> {
        match &mut self.saver {
            Some(saver) => saver(inventory),
            None => Ok(()),
        }
    }

    /// Performs `ops` on the drive bays, saves `next` and installs it. On any failure the
    /// bay operations done so far are undone (best effort) and the inventory is unchanged.
    pub(crate) fn commit(
        &mut self,
        nexus: &ItNexus,
        next: Inventory,
        ops: Vec<BayOp>,
    ) -> ScsiResult<()> {
        let mut done: Vec<BayOp> = Vec::with_capacity(ops.len());
        for op in ops {
            let result = match &op {
                BayOp::Unload { drive, .. } => {
                    self.bay(*drive).and_then(|b| b.unload(nexus)).map(drop)
                }
                BayOp::Load { drive, barcode } => {
                    self.bay(*drive).and_then(|b| b.load(barcode, nexus))
                }
            };
            if let Err(error) = result {
                self.undo(&done, nexus);
                return Err(error.sense());
            }
            done.push(op);
        }
        if self.save(&next).is_err() {
            self.undo(&done, nexus);
            return Err(Sense::new(
                SenseKey::HARDWARE_ERROR,
                Asc::INTERNAL_TARGET_FAILURE,
            ));
        }
        self.inventory = next;
        Ok(())
    }

    fn bay(&self, drive: u16) -> Result<&Arc<dyn DriveBay>, BayError> {
        self.bays
            .get(usize::from(drive))
            .ok_or_else(|| BayError::DriveFailure(format!("no bay for drive {drive}")))
    }

    fn undo(&self, done: &[BayOp], nexus: &ItNexus) {
        for op in done.iter().rev() {
            // Best effort: the inventory is left as it was, the drives as close to it as
            // they can get.
            match op {
                BayOp::Unload { drive, barcode } => {
                    if let Ok(bay) = self.bay(*drive) {
                        let _ = bay.load(barcode, nexus);
                    }
                }
                BayOp::Load { drive, .. } => {
                    if let Ok(bay) = self.bay(*drive) {
                        let _ = bay.unload(nexus);
                    }
                }
            }
        }
    }
}

fn operator_ua(element: Element) -> Asc {
    if element.kind == ElementType::ImportExport {
        Asc::IMPORT_OR_EXPORT_ELEMENT_ACCESSED
    } else {
        Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
    }
}

/// NAA 3h (locally assigned, SPC-4 §7.8.6.6.2) with 60 bits derived from the serial.
fn default_naa(serial: &str) -> u64 {
    let high = u64::from(crc32fast::hash(serial.as_bytes()));
    let mut salted = b"reel-smc:".to_vec();
    salted.extend_from_slice(serial.as_bytes());
    let low = u64::from(crc32fast::hash(&salted));
    (0x3 << 60) | ((high << 28) ^ low) & 0x0FFF_FFFF_FFFF_FFFF
}

/// [`Personality::max_transfer_length`] of a changer.
pub const MAX_PARAMETER_LIST: u32 = 64 * 1024;

impl Personality for Changer {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    /// A changer's parameter lists (MODE SELECT, SEND VOLUME TAG, PERSISTENT RESERVE OUT,
    /// SET TIMESTAMP) are small: 64 KiB covers the largest (MODE SELECT(10)'s 16-bit length).
    fn max_transfer_length(&self) -> u32 {
        MAX_PARAMETER_LIST
    }

    fn mode_pages(&self) -> Vec<reel_scsi::ModePage> {
        self.mode_pages_smc()
    }

    fn supported_opcodes(&self) -> Vec<OpcodeDescriptor> {
        self.opcode_descriptors()
    }

    fn access(&self, cdb: &Cdb<'_>) -> Access {
        match cdb.opcode().0 {
            // Reading status changes nothing (SPC-4 §5.9.1 treats it as a read).
            0xB8 | 0xB5 => Access::Read,
            _ => Access::Write,
        }
    }

    fn execute(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Response> {
        let result = self.execute_smc(ctx, command)?;
        Some(ctx.respond(result.map(reel_scsi::Bytes::from)))
    }

    fn task_management(&mut self, ctx: &mut DeviceContext<'_>, function: TaskManagement) {
        match function {
            // SPC-4 §6.13: a reset clears every prevention; the translate results go too.
            TaskManagement::LogicalUnitReset
            | TaskManagement::TargetWarmReset
            | TaskManagement::TargetColdReset => {
                self.prevented.clear();
                self.translations.clear();
            }
            TaskManagement::ItNexusReset => {
                let nexus = ctx.nexus().clone();
                self.nexus_lost(&nexus);
            }
            _ => {}
        }
    }

    fn nexus_lost(&mut self, nexus: &ItNexus) {
        self.prevented.remove(nexus);
        self.translations.remove(nexus);
    }
}
