//! The changer's persistent inventory: which cartridge (by barcode) is in which element, where
//! it was last moved from, its alternate volume tag and whether the operator put it there.
//!
//! Encoding (all integers big-endian):
//!
//! ```text
//! magic "RSMC" | version u16 = 1 | storage u16 | import_export u16 | drives u16
//! then one entry per element, storage first, then import/export, then drives:
//!   0x00                                  empty
//!   0x01 | flags u8 | len u8 | barcode    full; flags: bit 0 IMPORTED, 1 SOURCE, 2 ALTERNATE
//!        [ | source type u8 | source index u16 ]            if SOURCE
//!        [ | len u8 | identifier | sequence u16 ]           if ALTERNATE
//! crc32 (IEEE) of everything before it, u32
//! ```
//!
//! Decoding checks the magic, the version, the CRC, every length and value, that no barcode
//! appears twice and that nothing follows; it never panics.

use std::collections::HashSet;

use thiserror::Error;

use crate::model::{Element, ElementType, Layout};

const MAGIC: &[u8; 4] = b"RSMC";
const VERSION: u16 = 1;
const FLAG_IMPORTED: u8 = 0x01;
const FLAG_SOURCE: u8 = 0x02;
const FLAG_ALTERNATE: u8 = 0x04;

/// A volume identifier of a volume tag (SMC-3 §7.x volume tag information: 32 bytes of
/// left-aligned ASCII, here without the padding) with its volume sequence number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VolumeTag {
    pub identifier: String,
    pub sequence: u16,
}

/// A cartridge in an element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cartridge {
    /// The primary volume tag: the barcode label (1–32 printable ASCII characters).
    pub barcode: String,
    /// The storage or import/export element it was last moved from (SVALID + SOURCE STORAGE
    /// ELEMENT ADDRESS).
    pub source: Option<Element>,
    /// An alternate volume tag set by SEND VOLUME TAG.
    pub alternate: Option<VolumeTag>,
    /// Placed into its import/export element by the operator (IMPEXP = 1).
    pub imported: bool,
}

impl Cartridge {
    /// A cartridge with no history.
    pub fn new(barcode: &str) -> Self {
        Self {
            barcode: barcode.to_owned(),
            source: None,
            alternate: None,
            imported: false,
        }
    }
}

/// Why an inventory could not be decoded or built.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InventoryError {
    #[error("not a changer inventory (bad magic)")]
    BadMagic,
    #[error("inventory format version {0} is not supported")]
    UnsupportedVersion(u16),
    #[error("inventory checksum mismatch")]
    Checksum,
    #[error("inventory is truncated")]
    Truncated,
    #[error("inventory has {0} trailing bytes")]
    TrailingBytes(usize),
    #[error("invalid barcode or volume identifier {0:?}")]
    InvalidBarcode(String),
    #[error("barcode {0:?} appears more than once")]
    DuplicateBarcode(String),
    #[error("invalid value {value:#x} at byte {offset}")]
    InvalidValue { offset: usize, value: u32 },
    #[error("{0:?} is not an element of this inventory")]
    NoSuchElement(Element),
    #[error("element {0:?} is full")]
    ElementFull(Element),
}

/// Whether `s` is a valid barcode or volume identifier: 1–32 printable ASCII characters
/// without spaces (SMC-3 §7.x: volume identification is left-aligned ASCII, space padded).
pub fn valid_barcode(s: &str) -> bool {
    (1..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Where every cartridge is. Drives, slots and import/export elements are kept by index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inventory {
    storage: Vec<Option<Cartridge>>,
    import_export: Vec<Option<Cartridge>>,
    drives: Vec<Option<Cartridge>>,
}

impl Inventory {
    /// An inventory with every element of `layout` empty.
    pub fn empty(layout: &Layout) -> Self {
        Self {
            storage: vec![None; usize::from(layout.slots)],
            import_export: vec![None; usize::from(layout.import_export)],
            drives: vec![None; usize::from(layout.drives)],
        }
    }

    /// The number of elements of `kind` this inventory holds (0 for the transport: a move
    /// never leaves a cartridge in the hand).
    pub fn count(&self, kind: ElementType) -> u16 {
        u16::try_from(self.column(kind).map_or(0, Vec::len)).unwrap_or(u16::MAX)
    }

    fn column(&self, kind: ElementType) -> Option<&Vec<Option<Cartridge>>> {
        match kind {
            ElementType::Transport => None,
            ElementType::Storage => Some(&self.storage),
            ElementType::ImportExport => Some(&self.import_export),
            ElementType::DataTransfer => Some(&self.drives),
        }
    }

    fn column_mut(&mut self, kind: ElementType) -> Option<&mut Vec<Option<Cartridge>>> {
        match kind {
            ElementType::Transport => None,
            ElementType::Storage => Some(&mut self.storage),
            ElementType::ImportExport => Some(&mut self.import_export),
            ElementType::DataTransfer => Some(&mut self.drives),
        }
    }

    fn slot_mut(&mut self, element: Element) -> Option<&mut Option<Cartridge>> {
        self.column_mut(element.kind)?
            .get_mut(usize::from(element.index))
    }

    /// The cartridge in `element`, if any.
    pub fn get(&self, element: Element) -> Option<&Cartridge> {
        self.column(element.kind)?
            .get(usize::from(element.index))?
            .as_ref()
    }

    /// Takes the cartridge out of `element`.
    pub fn take(&mut self, element: Element) -> Option<Cartridge> {
        self.slot_mut(element)?.take()
    }

    /// Puts `cartridge` into the empty `element`; the barcode must be valid and not present.
    pub fn put(&mut self, element: Element, cartridge: Cartridge) -> Result<(), InventoryError> {
        if !valid_barcode(&cartridge.barcode) {
            return Err(InventoryError::InvalidBarcode(cartridge.barcode));
        }
        if self.find(&cartridge.barcode).is_some() {
            return Err(InventoryError::DuplicateBarcode(cartridge.barcode));
        }
        let slot = self
            .slot_mut(element)
            .ok_or(InventoryError::NoSuchElement(element))?;
        if slot.is_some() {
            return Err(InventoryError::ElementFull(element));
        }
        *slot = Some(cartridge);
        Ok(())
    }

    /// Puts each cartridge into its element with the checks of [`Inventory::put`], in one
    /// pass: the barcodes present are indexed once, so filling a 60,000-slot library is
    /// linear, not quadratic. Returns the placements refused, with why.
    pub fn put_all(
        &mut self,
        placements: impl IntoIterator<Item = (Element, Cartridge)>,
    ) -> Vec<(Element, InventoryError)> {
        let mut present: HashSet<String> = self
            .iter()
            .filter_map(|(_, c)| c.map(|c| c.barcode.clone()))
            .collect();
        let mut refused = Vec::new();
        for (element, cartridge) in placements {
            let error = if !valid_barcode(&cartridge.barcode) {
                Some(InventoryError::InvalidBarcode(cartridge.barcode))
            } else if present.contains(&cartridge.barcode) {
                Some(InventoryError::DuplicateBarcode(cartridge.barcode))
            } else {
                match self.slot_mut(element) {
                    None => Some(InventoryError::NoSuchElement(element)),
                    Some(Some(_)) => Some(InventoryError::ElementFull(element)),
                    Some(slot) => {
                        present.insert(cartridge.barcode.clone());
                        *slot = Some(cartridge);
                        None
                    }
                }
            };
            if let Some(e) = error {
                refused.push((element, e));
            }
        }
        refused
    }

    /// Sets `element` without any check (Changer::initial_inventory keeps bad barcodes so
    /// that Changer::new reports them).
    pub(crate) fn force(&mut self, element: Element, cartridge: Cartridge) {
        if let Some(slot) = self.slot_mut(element) {
            *slot = Some(cartridge);
        }
    }

    /// Every element with its content, storage first, then import/export, then drives.
    pub fn iter(&self) -> impl Iterator<Item = (Element, Option<&Cartridge>)> + '_ {
        [
            ElementType::Storage,
            ElementType::ImportExport,
            ElementType::DataTransfer,
        ]
        .into_iter()
        .flat_map(move |kind| {
            self.column(kind)
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(i, c)| (Element::new(kind, i as u16), c.as_ref()))
        })
    }

    /// Where the cartridge `barcode` is.
    pub fn find(&self, barcode: &str) -> Option<Element> {
        self.iter()
            .find(|(_, c)| c.is_some_and(|c| c.barcode == barcode))
            .map(|(e, _)| e)
    }

    /// Every barcode, in element order.
    pub fn barcodes(&self) -> Vec<String> {
        self.iter()
            .filter_map(|(_, c)| c.map(|c| c.barcode.clone()))
            .collect()
    }

    /// Whether the inventory fits `layout` (same element counts).
    pub fn fits(&self, layout: &Layout) -> bool {
        self.storage.len() == usize::from(layout.slots)
            && self.import_export.len() == usize::from(layout.import_export)
            && self.drives.len() == usize::from(layout.drives)
    }

    /// Checks barcodes, alternate tags, sources and duplicates.
    pub fn validate(&self) -> Result<(), InventoryError> {
        let mut seen = HashSet::new();
        for (_, cartridge) in self.iter() {
            let Some(c) = cartridge else { continue };
            if !valid_barcode(&c.barcode) {
                return Err(InventoryError::InvalidBarcode(c.barcode.clone()));
            }
            if !seen.insert(c.barcode.as_str()) {
                return Err(InventoryError::DuplicateBarcode(c.barcode.clone()));
            }
            if let Some(tag) = &c.alternate
                && !valid_barcode(&tag.identifier)
            {
                return Err(InventoryError::InvalidBarcode(tag.identifier.clone()));
            }
            if let Some(source) = c.source
                && (!matches!(
                    source.kind,
                    ElementType::Storage | ElementType::ImportExport
                ) || source.index >= self.count(source.kind))
            {
                return Err(InventoryError::NoSuchElement(source));
            }
        }
        Ok(())
    }

    /// The versioned, CRC-protected encoding (module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_be_bytes());
        for column in [&self.storage, &self.import_export, &self.drives] {
            let n = u16::try_from(column.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&n.to_be_bytes());
        }
        for column in [&self.storage, &self.import_export, &self.drives] {
            for entry in column.iter().take(usize::from(u16::MAX)) {
                let Some(c) = entry else {
                    out.push(0);
                    continue;
                };
                out.push(1);
                let mut flags = 0;
                if c.imported {
                    flags |= FLAG_IMPORTED;
                }
                if c.source.is_some() {
                    flags |= FLAG_SOURCE;
                }
                if c.alternate.is_some() {
                    flags |= FLAG_ALTERNATE;
                }
                out.push(flags);
                put_str(&mut out, &c.barcode);
                if let Some(source) = c.source {
                    out.push(source.kind.code());
                    out.extend_from_slice(&source.index.to_be_bytes());
                }
                if let Some(tag) = &c.alternate {
                    put_str(&mut out, &tag.identifier);
                    out.extend_from_slice(&tag.sequence.to_be_bytes());
                }
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes [`Inventory::encode`] output; anything else is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<Inventory, InventoryError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(InventoryError::BadMagic);
        }
        let mut r = Reader { bytes, at: 4 };
        let version = r.u16()?;
        if version != VERSION {
            return Err(InventoryError::UnsupportedVersion(version));
        }
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or(InventoryError::Truncated)?;
        let (body, crc) = bytes.split_at(body_len);
        if body_len < 12 {
            return Err(InventoryError::Truncated);
        }
        if crc32fast::hash(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(InventoryError::Checksum);
        }
        let mut r = Reader {
            bytes: body,
            at: r.at,
        };
        let counts = [r.u16()?, r.u16()?, r.u16()?];
        let mut columns: [Vec<Option<Cartridge>>; 3] = Default::default();
        for (column, &n) in columns.iter_mut().zip(&counts) {
            for _ in 0..n {
                let at = r.at;
                match r.u8()? {
                    0 => column.push(None),
                    1 => column.push(Some(r.cartridge()?)),
                    v => {
                        return Err(InventoryError::InvalidValue {
                            offset: at,
                            value: u32::from(v),
                        });
                    }
                }
            }
        }
        if r.at != body.len() {
            return Err(InventoryError::TrailingBytes(body.len() - r.at));
        }
        let [storage, import_export, drives] = columns;
        let inventory = Inventory {
            storage,
            import_export,
            drives,
        };
        inventory.validate()?;
        Ok(inventory)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], InventoryError> {
        let end = self.at.checked_add(n).ok_or(InventoryError::Truncated)?;
        let out = self
            .bytes
            .get(self.at..end)
            .ok_or(InventoryError::Truncated)?;
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, InventoryError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, InventoryError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn string(&mut self) -> Result<String, InventoryError> {
        let len = usize::from(self.u8()?);
        let raw = self.take(len)?;
        let s = String::from_utf8_lossy(raw).into_owned();
        if !valid_barcode(&s) {
            return Err(InventoryError::InvalidBarcode(s));
        }
        Ok(s)
    }

    fn cartridge(&mut self) -> Result<Cartridge, InventoryError> {
        let at = self.at;
        let flags = self.u8()?;
        if flags & !(FLAG_IMPORTED | FLAG_SOURCE | FLAG_ALTERNATE) != 0 {
            return Err(InventoryError::InvalidValue {
                offset: at,
                value: u32::from(flags),
            });
        }
        let barcode = self.string()?;
        let source = if flags & FLAG_SOURCE != 0 {
            let at = self.at;
            let code = self.u8()?;
            let kind = ElementType::from_code(code).ok_or(InventoryError::InvalidValue {
                offset: at,
                value: u32::from(code),
            })?;
            Some(Element::new(kind, self.u16()?))
        } else {
            None
        };
        let alternate = if flags & FLAG_ALTERNATE != 0 {
            let identifier = self.string()?;
            Some(VolumeTag {
                identifier,
                sequence: self.u16()?,
            })
        } else {
            None
        };
        Ok(Cartridge {
            barcode,
            source,
            alternate,
            imported: flags & FLAG_IMPORTED != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(slots: u16, ie: u16, drives: u16) -> Layout {
        Layout {
            drives,
            slots,
            import_export: ie,
            magazines: None,
        }
    }

    fn arb_inventory() -> impl Strategy<Value = Inventory> {
        (0u16..40, 0u16..6, 0u16..5).prop_flat_map(|(slots, ie, drives)| {
            let n = usize::from(slots + ie + drives);
            (
                Just((slots, ie, drives)),
                proptest::collection::vec(
                    proptest::option::of((
                        any::<bool>(),
                        proptest::option::of((2u8..=3, 0u16..6)),
                        proptest::option::of(("[A-Z0-9_]{1,32}", any::<u16>())),
                    )),
                    n,
                ),
            )
                .prop_map(|((slots, ie, drives), entries)| {
                    let mut inv = Inventory::empty(&layout(slots, ie, drives));
                    let elements: Vec<Element> = inv.iter().map(|(e, _)| e).collect();
                    for (i, (element, entry)) in elements.into_iter().zip(entries).enumerate() {
                        let Some((imported, source, alt)) = entry else {
                            continue;
                        };
                        let source = source
                            .map(|(k, idx)| Element::new(ElementType::from_code(k).unwrap(), idx))
                            .filter(|s| s.index < inv.count(s.kind));
                        let cartridge = Cartridge {
                            barcode: format!("C{i:05}L9"),
                            source,
                            alternate: alt.map(|(identifier, sequence)| VolumeTag {
                                identifier,
                                sequence,
                            }),
                            imported,
                        };
                        inv.put(element, cartridge).unwrap();
                    }
                    inv
                })
        })
    }

    proptest! {
        #[test]
        fn round_trip(inv in arb_inventory()) {
            let bytes = inv.encode();
            prop_assert_eq!(Inventory::decode(&bytes), Ok(inv));
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Inventory::decode(&bytes);
            let mut prefixed = MAGIC.to_vec();
            prefixed.extend_from_slice(&bytes);
            let _ = Inventory::decode(&prefixed);
        }

        #[test]
        fn any_flipped_bit_is_detected(
            inv in arb_inventory(),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut bytes = inv.encode();
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            prop_assert!(Inventory::decode(&bytes).is_err());
        }
    }

    #[test]
    fn put_all_checks_like_put_in_one_pass() {
        let storage = |i| Element::new(ElementType::Storage, i);
        let mut inv = Inventory::empty(&layout(5, 0, 1));
        inv.put(storage(0), Cartridge::new("A00001L9")).unwrap();
        let refused = inv.put_all([
            (storage(1), Cartridge::new("A00002L9")),
            (storage(2), Cartridge::new("A00001L9")),
            (storage(0), Cartridge::new("A00003L9")),
            (storage(3), Cartridge::new("A00002L9")),
            (storage(3), Cartridge::new("bad code")),
            (storage(9), Cartridge::new("A00004L9")),
            (storage(4), Cartridge::new("A00005L9")),
        ]);
        assert_eq!(
            refused,
            [
                (
                    storage(2),
                    InventoryError::DuplicateBarcode("A00001L9".into())
                ),
                (storage(0), InventoryError::ElementFull(storage(0))),
                (
                    storage(3),
                    InventoryError::DuplicateBarcode("A00002L9".into())
                ),
                (
                    storage(3),
                    InventoryError::InvalidBarcode("bad code".into())
                ),
                (storage(9), InventoryError::NoSuchElement(storage(9))),
            ]
        );
        assert_eq!(
            inv.barcodes(),
            ["A00001L9", "A00002L9", "A00005L9"].map(String::from)
        );
        assert_eq!(inv.validate(), Ok(()));
    }

    #[test]
    fn refuses_duplicates_and_truncation() {
        let mut inv = Inventory::empty(&layout(3, 0, 1));
        inv.put(
            Element::new(ElementType::Storage, 0),
            Cartridge::new("A00001L9"),
        )
        .unwrap();
        assert_eq!(
            inv.put(
                Element::new(ElementType::Storage, 1),
                Cartridge::new("A00001L9")
            ),
            Err(InventoryError::DuplicateBarcode("A00001L9".into()))
        );
        assert_eq!(
            inv.put(Element::new(ElementType::Storage, 0), Cartridge::new("B")),
            Err(InventoryError::ElementFull(Element::new(
                ElementType::Storage,
                0
            )))
        );
        assert!(matches!(
            inv.put(
                Element::new(ElementType::Storage, 1),
                Cartridge::new("has space")
            ),
            Err(InventoryError::InvalidBarcode(_))
        ));
        let bytes = inv.encode();
        for n in 0..bytes.len() {
            assert!(Inventory::decode(&bytes[..n]).is_err(), "prefix {n}");
        }
        assert_eq!(Inventory::decode(&bytes), Ok(inv));
    }
}
