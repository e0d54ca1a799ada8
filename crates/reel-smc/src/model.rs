//! Element types, changer models (identity, element address bases, capabilities), layouts and
//! the element address map (SMC-3 §4.3: elements and their addresses).

use std::fmt;

/// An element type (SMC-3 §4.3, table 2; ELEMENT TYPE CODE of READ ELEMENT STATUS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ElementType {
    /// Medium transport element (the robot's hand).
    Transport = 1,
    /// Storage element (a slot).
    Storage = 2,
    /// Import/export element (mail slot, CAP).
    ImportExport = 3,
    /// Data transfer element (a tape drive).
    DataTransfer = 4,
}

impl ElementType {
    /// All types in code order.
    pub const ALL: [ElementType; 4] = [
        Self::Transport,
        Self::Storage,
        Self::ImportExport,
        Self::DataTransfer,
    ];

    /// The ELEMENT TYPE CODE.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The type for an ELEMENT TYPE CODE (1–4).
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Transport,
            2 => Self::Storage,
            3 => Self::ImportExport,
            4 => Self::DataTransfer,
            _ => return None,
        })
    }

    fn index(self) -> usize {
        self as usize - 1
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Transport => "transport",
            Self::Storage => "storage",
            Self::ImportExport => "import/export",
            Self::DataTransfer => "data transfer",
        })
    }
}

/// One element: its type and its 0-based index among the elements of that type. The
/// inventory is kept by element, so addresses stay a presentation of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Element {
    pub kind: ElementType,
    pub index: u16,
}

impl Element {
    /// The element `index` of type `kind`.
    pub const fn new(kind: ElementType, index: u16) -> Self {
        Self { kind, index }
    }
}

/// How many elements of each kind a changer has. There is always one medium transport
/// element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub drives: u16,
    pub slots: u16,
    pub import_export: u16,
    /// Autoloaders: the storage slots sit in `(count, slots_each)` removable magazines
    /// (`count * slots_each == slots`); the operator may put cartridges into and take them
    /// out of magazine slots directly.
    pub magazines: Option<(u16, u16)>,
}

impl Layout {
    /// The number of elements of `kind` (one transport element).
    pub fn count(&self, kind: ElementType) -> u16 {
        match kind {
            ElementType::Transport => 1,
            ElementType::Storage => self.slots,
            ElementType::ImportExport => self.import_export,
            ElementType::DataTransfer => self.drives,
        }
    }
}

/// The DVCID identifier format a model reports for its drives (SMC-3 §6.10.4 data transfer
/// element descriptor; identifier types as in SPC-4 §7.8.6.1, table 465).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DvcidFormat {
    /// CODE SET 2 (ASCII), IDENTIFIER TYPE 1 (T10 vendor ID): the drive's INQUIRY vendor (8
    /// bytes) and product (16 bytes), space padded, followed by its VPD 80h serial number.
    /// With a 10-character serial this is the 34-byte form IBM, STK and HP libraries send.
    T10VendorId,
    /// CODE SET 2 (ASCII), IDENTIFIER TYPE 0 (vendor specific): the serial number only, as
    /// autoloaders such as the Quantum SuperLoader 3 send it.
    SerialOnly,
}

/// The first element address of each element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressBases {
    pub transport: u16,
    pub storage: u16,
    pub import_export: u16,
    pub drives: u16,
}

impl AddressBases {
    fn base(&self, kind: ElementType) -> u16 {
        match kind {
            ElementType::Transport => self.transport,
            ElementType::Storage => self.storage,
            ElementType::ImportExport => self.import_export,
            ElementType::DataTransfer => self.drives,
        }
    }
}

/// A changer product reel can present: INQUIRY strings, element address bases, a default
/// layout and capabilities. See `docs/design/smc.md` for where each value comes from.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangerModel {
    /// reel's name for the model (configuration key), e.g. `"ibm-3584"`.
    pub name: &'static str,
    /// T10 VENDOR IDENTIFICATION.
    pub vendor: &'static str,
    /// PRODUCT IDENTIFICATION.
    pub product: &'static str,
    /// PRODUCT REVISION LEVEL.
    pub revision: &'static str,
    /// One line for humans.
    pub description: &'static str,
    pub bases: AddressBases,
    pub default_layout: Layout,
    pub dvcid: DvcidFormat,
    /// EXCHANGE MEDIUM (and the exchange bits of the device capabilities page).
    pub exchange: bool,
    /// SEND VOLUME TAG and REQUEST VOLUME ELEMENT ADDRESS (alternate volume tags, translate).
    pub volume_tags: bool,
}

static MODELS: [ChangerModel; 6] = [
    ChangerModel {
        name: "ibm-3584",
        vendor: "IBM",
        product: "03584L32",
        revision: "C260",
        description: "IBM TS3500/TS4500 (3584) tape library",
        bases: AddressBases {
            transport: 0x0000,
            storage: 0x0401,
            import_export: 0x0301,
            drives: 0x0101,
        },
        default_layout: Layout {
            drives: 4,
            slots: 64,
            import_export: 8,
            magazines: None,
        },
        dvcid: DvcidFormat::T10VendorId,
        exchange: true,
        volume_tags: true,
    },
    ChangerModel {
        name: "stk-l700",
        vendor: "STK",
        product: "L700",
        revision: "0315",
        description: "StorageTek L700 tape library",
        bases: AddressBases {
            transport: 0,
            storage: 1000,
            import_export: 10,
            drives: 500,
        },
        default_layout: Layout {
            drives: 4,
            slots: 100,
            import_export: 20,
            magazines: None,
        },
        dvcid: DvcidFormat::T10VendorId,
        exchange: true,
        volume_tags: true,
    },
    ChangerModel {
        name: "stk-sl150",
        vendor: "STK",
        product: "SL150",
        revision: "0200",
        description: "Oracle StorageTek SL150 modular tape library",
        bases: AddressBases {
            transport: 0,
            storage: 1000,
            import_export: 10,
            drives: 500,
        },
        default_layout: Layout {
            drives: 2,
            slots: 30,
            import_export: 4,
            magazines: None,
        },
        dvcid: DvcidFormat::T10VendorId,
        exchange: true,
        volume_tags: true,
    },
    ChangerModel {
        name: "hp-msl-g3",
        vendor: "HP",
        product: "MSL G3 Series",
        revision: "E.20",
        description: "HP StorageWorks MSL2024/4048/8096 G3 series tape library",
        bases: AddressBases {
            transport: 0x0001,
            storage: 0x1000,
            import_export: 0x0010,
            drives: 0x0100,
        },
        default_layout: Layout {
            drives: 2,
            slots: 23,
            import_export: 1,
            magazines: None,
        },
        dvcid: DvcidFormat::T10VendorId,
        exchange: true,
        volume_tags: true,
    },
    ChangerModel {
        name: "quantum-scalar-i6000",
        vendor: "QUANTUM",
        product: "Scalar i6000",
        revision: "0100",
        description: "Quantum Scalar i6000 tape library",
        bases: AddressBases {
            transport: 0x0001,
            storage: 0x1000,
            import_export: 0x0010,
            drives: 0x0100,
        },
        default_layout: Layout {
            drives: 4,
            slots: 100,
            import_export: 12,
            magazines: None,
        },
        dvcid: DvcidFormat::T10VendorId,
        exchange: true,
        volume_tags: true,
    },
    ChangerModel {
        name: "hp-1x8-g2",
        vendor: "HP",
        product: "1x8 G2 AUTOLDR",
        revision: "0100",
        description: "HP StorageWorks 1/8 G2 autoloader: 1U, one drive, two 4-slot magazines",
        bases: AddressBases {
            transport: 0x0000,
            storage: 0x0001,
            import_export: 0x0010,
            drives: 0x0100,
        },
        default_layout: Layout {
            drives: 1,
            slots: 8,
            import_export: 0,
            magazines: Some((2, 4)),
        },
        dvcid: DvcidFormat::SerialOnly,
        exchange: false,
        volume_tags: false,
    },
];

impl ChangerModel {
    /// Every model reel knows.
    pub fn all() -> &'static [ChangerModel] {
        &MODELS
    }

    /// The model called `name` (ASCII case-insensitive).
    pub fn by_name(name: &str) -> Option<&'static ChangerModel> {
        MODELS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
    }

    /// reel's name for the model.
    pub fn name(&self) -> &str {
        self.name
    }

    /// The most storage slots `layout`'s other element counts leave room for: SMC-3 element
    /// addresses are 16 bits, and the storage range must end before FFFFh is passed and
    /// before the next range of this model that starts above it.
    pub fn max_slots(&self, layout: &Layout) -> u16 {
        let base = self.bases.storage;
        let end = ElementType::ALL
            .into_iter()
            .filter(|&k| k != ElementType::Storage && layout.count(k) > 0)
            .map(|k| u32::from(self.bases.base(k)))
            .filter(|&b| b > u32::from(base))
            .min()
            .unwrap_or(u32::from(u16::MAX) + 1);
        u16::try_from(end - u32::from(base)).unwrap_or(u16::MAX)
    }

    /// The first element address of `kind` on this model.
    pub fn first_address(&self, kind: ElementType) -> u16 {
        self.bases.base(kind)
    }

    /// Whether `layout` can be addressed on this model (no range runs past FFFFh, none
    /// overlaps another); the error names the element type.
    pub fn check_layout(&self, layout: &Layout) -> Result<(), crate::ChangerError> {
        AddressMap::new(&self.bases, layout)
            .map(|_| ())
            .map_err(MapError::into_changer_error)
    }
}

impl MapError {
    pub(crate) fn into_changer_error(self) -> crate::ChangerError {
        match self {
            MapError::Overflow(kind) => crate::ChangerError::AddressOverflow { kind },
            MapError::Overlap(a, b) => crate::ChangerError::AddressOverlap(a, b),
        }
    }
}

/// Why a layout cannot be addressed on a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MapError {
    Overflow(ElementType),
    Overlap(ElementType, ElementType),
}

/// Element addresses of one changer: per type, the first address and the count.
#[derive(Clone, Debug)]
pub(crate) struct AddressMap {
    first: [u16; 4],
    count: [u16; 4],
    /// All elements sorted by address.
    ordered: Vec<(u16, Element)>,
}

impl AddressMap {
    pub(crate) fn new(bases: &AddressBases, layout: &Layout) -> Result<Self, MapError> {
        let mut first = [0u16; 4];
        let mut count = [0u16; 4];
        for kind in ElementType::ALL {
            let (base, n) = (bases.base(kind), layout.count(kind));
            if n > 0 && u32::from(base) + u32::from(n) - 1 > u32::from(u16::MAX) {
                return Err(MapError::Overflow(kind));
            }
            first[kind.index()] = base;
            count[kind.index()] = n;
        }
        let mut ordered = Vec::new();
        for kind in ElementType::ALL {
            for index in 0..count[kind.index()] {
                ordered.push((first[kind.index()] + index, Element::new(kind, index)));
            }
        }
        ordered.sort_by_key(|&(address, _)| address);
        for pair in ordered.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(MapError::Overlap(pair[0].1.kind, pair[1].1.kind));
            }
        }
        Ok(Self {
            first,
            count,
            ordered,
        })
    }

    /// The first address of `kind` (reported even when there are none of that type).
    pub(crate) fn first(&self, kind: ElementType) -> u16 {
        self.first[kind.index()]
    }

    pub(crate) fn count(&self, kind: ElementType) -> u16 {
        self.count[kind.index()]
    }

    pub(crate) fn address(&self, element: Element) -> u16 {
        self.first(element.kind).wrapping_add(element.index)
    }

    /// The element at `address`, if any.
    pub(crate) fn element(&self, address: u16) -> Option<Element> {
        ElementType::ALL.into_iter().find_map(|kind| {
            let offset = address.checked_sub(self.first(kind))?;
            (offset < self.count(kind)).then_some(Element::new(kind, offset))
        })
    }

    /// All elements in address order.
    pub(crate) fn ordered(&self) -> &[(u16, Element)] {
        &self.ordered
    }

    /// The highest element address.
    pub(crate) fn highest(&self) -> u16 {
        self.ordered.last().map_or(0, |&(a, _)| a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_maps_its_default_layout() {
        for model in ChangerModel::all() {
            let map = AddressMap::new(&model.bases, &model.default_layout).unwrap();
            assert_eq!(
                map.ordered().len(),
                1 + usize::from(model.default_layout.drives)
                    + usize::from(model.default_layout.slots)
                    + usize::from(model.default_layout.import_export),
                "{}",
                model.name
            );
            assert!(model.vendor.len() <= 8 && model.product.len() <= 16);
            assert_eq!(model.revision.len(), 4);
            assert_eq!(
                ChangerModel::by_name(&model.name.to_uppercase()),
                Some(model)
            );
            if let Some((n, each)) = model.default_layout.magazines {
                assert_eq!(n * each, model.default_layout.slots);
            }
        }
    }

    #[test]
    fn overlapping_ranges_are_refused() {
        let model = ChangerModel::by_name("stk-l700").unwrap();
        let layout = Layout {
            drives: 4,
            slots: 10,
            import_export: 491, // 10..=500 runs into the first drive at 500
            magazines: None,
        };
        assert!(matches!(
            AddressMap::new(&model.bases, &layout),
            Err(MapError::Overlap(..))
        ));
        let layout = Layout {
            slots: u16::MAX,
            ..model.default_layout
        };
        assert_eq!(
            AddressMap::new(&model.bases, &layout).unwrap_err(),
            MapError::Overflow(ElementType::Storage)
        );
    }

    #[test]
    fn max_slots_is_what_the_address_space_holds() {
        for model in ChangerModel::all() {
            let layout = Layout {
                magazines: None,
                ..model.default_layout
            };
            let max = model.max_slots(&layout);
            let fits = Layout {
                slots: max,
                ..layout
            };
            assert!(model.check_layout(&fits).is_ok(), "{}: {max}", model.name);
            if max < u16::MAX {
                let over = Layout {
                    slots: max + 1,
                    ..layout
                };
                assert!(model.check_layout(&over).is_err(), "{}", model.name);
            }
        }
        // A TS4500-sized library and more fit the 3584's storage range (0401h..=FFFFh).
        let model = ChangerModel::by_name("ibm-3584").unwrap();
        assert_eq!(model.max_slots(&model.default_layout), 0xFFFF - 0x0401 + 1);
        for (name, max) in [
            ("stk-l700", 64_536),
            ("stk-sl150", 64_536),
            ("hp-msl-g3", 61_440),
            ("quantum-scalar-i6000", 61_440),
        ] {
            let model = ChangerModel::by_name(name).unwrap();
            assert_eq!(model.max_slots(&model.default_layout), max, "{name}");
        }
    }

    #[test]
    fn addresses_round_trip() {
        let model = ChangerModel::by_name("ibm-3584").unwrap();
        let map = AddressMap::new(&model.bases, &model.default_layout).unwrap();
        for &(address, element) in map.ordered() {
            assert_eq!(map.element(address), Some(element));
            assert_eq!(map.address(element), address);
        }
        assert_eq!(map.element(0x0100), None);
        assert_eq!(
            map.element(0x0101),
            Some(Element::new(ElementType::DataTransfer, 0))
        );
    }
}
