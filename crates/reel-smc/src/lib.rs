//! # reel-smc — the SMC-3 medium changer personality
//!
//! [`Changer`] is a [`reel_scsi::Personality`]: put it in a [`reel_scsi::ScsiDevice`] and the
//! SCSI core answers the SPC commands while the changer answers READ ELEMENT STATUS, MOVE
//! MEDIUM, EXCHANGE MEDIUM, POSITION TO ELEMENT, INITIALIZE ELEMENT STATUS (WITH RANGE),
//! PREVENT ALLOW MEDIUM REMOVAL, OPEN/CLOSE IMPORT/EXPORT ELEMENT, SEND VOLUME TAG and
//! REQUEST VOLUME ELEMENT ADDRESS, plus mode pages 1Dh, 1Eh and 1Fh.
//!
//! The changer looks like a real product ([`ChangerModel`]: INQUIRY strings, element address
//! bases, capabilities). Where every cartridge is lives in the [`Inventory`], persisted through
//! a saver callback before any command that changed it completes. Drives are reached through
//! the [`DriveBay`] trait only.
//!
//! **Architecture invariant:** reel-smc does not depend on the tape drive crate; a data
//! transfer element is a [`DriveBay`] the library composition implements. All state changes
//! go through `Changer::commit`: drive bays first, then the saver, then the in-memory
//! inventory, so a failure anywhere leaves the inventory as it was.
//!
//! Formats, models and the sense table: `docs/design/smc.md`.

mod bay;
mod changer;
mod commands;
mod inventory;
mod model;

pub use bay::{BayError, DriveBay, DriveIdentification};
pub use changer::{Changer, ChangerError, ElementStatus, MAX_PARAMETER_LIST, OperatorError, Saver};
pub use inventory::{Cartridge, Inventory, InventoryError, VolumeTag, valid_barcode};
pub use model::{AddressBases, ChangerModel, DvcidFormat, Element, ElementType, Layout};

/// Test doubles for the library composition and this crate's tests.
pub mod testing {
    use std::sync::Mutex;

    use reel_scsi::ItNexus;

    use crate::{BayError, DriveBay, DriveIdentification};

    /// What a [`FakeBay`] was asked to do.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum BayEvent {
        Load(String),
        Unload(String),
    }

    /// An in-memory drive bay: records loads and unloads and can be told to refuse them.
    pub struct FakeBay {
        identification: DriveIdentification,
        state: Mutex<FakeState>,
    }

    #[derive(Default)]
    struct FakeState {
        loaded: Option<String>,
        events: Vec<BayEvent>,
        refuse_load: Option<BayError>,
        refuse_unload: Option<BayError>,
    }

    impl FakeBay {
        /// An empty drive with this serial number (vendor "IBM", product "ULT3580-TD9").
        pub fn new(serial: &str) -> Self {
            Self {
                identification: DriveIdentification {
                    vendor: "IBM".into(),
                    product: "ULT3580-TD9".into(),
                    serial: serial.into(),
                },
                state: Mutex::default(),
            }
        }

        fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
            self.state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        /// The barcode of the loaded cartridge.
        pub fn loaded(&self) -> Option<String> {
            self.state().loaded.clone()
        }

        /// Puts a cartridge in without an event (restoring a saved state).
        pub fn set_loaded(&self, barcode: Option<&str>) {
            self.state().loaded = barcode.map(str::to_owned);
        }

        /// Every load and unload so far.
        pub fn events(&self) -> Vec<BayEvent> {
            self.state().events.clone()
        }

        /// Makes every load fail with `error` (`None`: succeed again).
        pub fn refuse_load(&self, error: Option<BayError>) {
            self.state().refuse_load = error;
        }

        /// Makes every unload fail with `error` (`None`: succeed again).
        pub fn refuse_unload(&self, error: Option<BayError>) {
            self.state().refuse_unload = error;
        }
    }

    impl DriveBay for FakeBay {
        fn identification(&self) -> DriveIdentification {
            self.identification.clone()
        }

        fn load(&self, barcode: &str, _nexus: &ItNexus) -> Result<(), BayError> {
            let mut state = self.state();
            if let Some(error) = &state.refuse_load {
                return Err(error.clone());
            }
            if state.loaded.is_some() {
                return Err(BayError::DriveFailure(
                    "drive already holds a cartridge".into(),
                ));
            }
            state.loaded = Some(barcode.to_owned());
            state.events.push(BayEvent::Load(barcode.to_owned()));
            Ok(())
        }

        fn unload(&self, _nexus: &ItNexus) -> Result<String, BayError> {
            let mut state = self.state();
            if let Some(error) = &state.refuse_unload {
                return Err(error.clone());
            }
            let barcode = state
                .loaded
                .take()
                .ok_or_else(|| BayError::DriveFailure("drive is empty".into()))?;
            state.events.push(BayEvent::Unload(barcode.clone()));
            Ok(barcode)
        }
    }
}

/// Entry points for fuzz targets.
#[doc(hidden)]
pub mod fuzzing {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use reel_scsi::{LunTable, ScsiDevice};

    use crate::testing::FakeBay;
    use crate::{Changer, ChangerModel, DriveBay, Inventory};

    /// Builds a changer (model chosen by the first byte, default layout, half the slots full)
    /// in a [`LunTable`], then feeds the rest as commands: each is a length byte and that many
    /// bytes in [`reel_scsi::fuzzing::run`]'s format (selector, CDB length, CDB, data-out).
    /// Byte 1 makes drive bays refuse loads/unloads. Panics only if an invariant breaks: sense
    /// must parse, and no cartridge may be lost or duplicated.
    pub fn fuzz_changer(data: &[u8]) {
        let (Some(&pick), Some(&faults)) = (data.first(), data.get(1)) else {
            return;
        };
        let models = ChangerModel::all();
        let model = &models[usize::from(pick) % models.len()];
        let layout = model.default_layout;
        let bays: Vec<Arc<FakeBay>> = (0..layout.drives)
            .map(|i| Arc::new(FakeBay::new(&format!("SN{i:08}"))))
            .collect();
        for (i, bay) in bays.iter().enumerate() {
            if faults >> (i % 8) & 1 != 0 {
                bay.refuse_load(Some(crate::BayError::IncompatibleMedium));
                bay.refuse_unload(Some(crate::BayError::RemovalPrevented));
            }
        }
        let barcodes: Vec<String> = (0..layout.slots / 2)
            .map(|i| format!("F{i:05}L9"))
            .collect();
        let inventory = Changer::initial_inventory(&layout, &barcodes);
        let dyn_bays = bays
            .iter()
            .map(|b| Arc::clone(b) as Arc<dyn DriveBay>)
            .collect();
        let Ok(changer) = Changer::new(model, layout, "FUZZ0001", dyn_bays, inventory) else {
            panic!("default layout of {} must build", model.name);
        };
        let device = Arc::new(ScsiDevice::new(changer));
        let mut table = LunTable::new();
        table.insert(0, device.clone());
        let mut rest = &data[2..];
        while let Some((&len, tail)) = rest.split_first() {
            let len = usize::from(len).min(tail.len());
            let (command, tail) = tail.split_at(len);
            reel_scsi::fuzzing::run(&table, command);
            rest = tail;
        }
        let inventory = device.with_personality(|c| c.inventory().clone());
        check_conservation(&inventory, &barcodes);
        // Drives hold exactly what the inventory says.
        for (i, bay) in bays.iter().enumerate() {
            let element = crate::Element::new(crate::ElementType::DataTransfer, i as u16);
            assert_eq!(
                bay.loaded(),
                inventory.get(element).map(|c| c.barcode.clone()),
                "drive {i} disagrees with the inventory"
            );
        }
    }

    fn check_conservation(inventory: &Inventory, barcodes: &[String]) {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let now = inventory.barcodes();
        for b in &now {
            *counts.entry(b.as_str()).or_default() += 1;
        }
        assert!(counts.values().all(|&n| n == 1), "duplicated cartridge");
        let mut expected: Vec<&str> = barcodes.iter().map(String::as_str).collect();
        expected.sort_unstable();
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            expected,
            "lost cartridge"
        );
    }

    /// Decodes arbitrary bytes as an inventory; a successful decode must re-encode to the
    /// same bytes.
    pub fn fuzz_inventory(data: &[u8]) {
        if let Ok(inventory) = Inventory::decode(data) {
            assert_eq!(inventory.encode(), data, "decode/encode is not canonical");
        }
    }
}
