//! The soak's view of one library: its elements, which cartridge each holds, and which are
//! spoken for. Every actor (tape workers, changer sessions, the API client) reserves the
//! elements and the cartridge of a move before issuing it, so no move meets a full
//! destination or an empty source: a move that fails is a failure. After a restart the
//! inventory is read again (READ ELEMENT STATUS) and compared with what was acknowledged.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use reel_scsi::initiator::smc::{ElementStatus, ElementType};

use super::model::Rng;

/// A move between two elements of one library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub from: u16,
    pub to: u16,
    pub barcode: String,
}

#[derive(Debug, Default)]
pub struct Inventory {
    /// Every element the soak uses (slots, drives, import/export) and what it holds.
    pub at: BTreeMap<u16, Option<String>>,
    /// Elements a move in progress will touch.
    pub reserved: HashSet<u16>,
    /// Cartridges in use: loaded by a tape worker, being moved, or the API client's.
    pub busy: HashSet<String>,
    /// Cartridges whose move was sent and not yet answered: after a kill, either outcome.
    pub in_doubt: HashSet<String>,
}

impl Inventory {
    pub fn location(&self, barcode: &str) -> Option<u16> {
        self.at
            .iter()
            .find(|(_, b)| b.as_deref() == Some(barcode))
            .map(|(a, _)| *a)
    }

    fn usable_empty(&self, among: &[u16]) -> Vec<u16> {
        among
            .iter()
            .copied()
            .filter(|a| matches!(self.at.get(a), Some(None)) && !self.reserved.contains(a))
            .collect()
    }

    /// Full, unreserved elements among `among` whose cartridge is free and passes `take`.
    fn usable_full(&self, among: &[u16], take: &dyn Fn(&str) -> bool) -> Vec<u16> {
        among
            .iter()
            .copied()
            .filter(|a| {
                !self.reserved.contains(a)
                    && self
                        .at
                        .get(a)
                        .and_then(|b| b.as_deref())
                        .is_some_and(|b| !self.busy.contains(b) && take(b))
            })
            .collect()
    }

    fn reserve(&mut self, from: u16, to: u16) -> Move {
        let barcode = self.at[&from].clone().expect("a full source");
        self.reserved.insert(from);
        self.reserved.insert(to);
        self.busy.insert(barcode.clone());
        Move { from, to, barcode }
    }
}

/// One library target and the soak's model of its inventory.
#[derive(Debug)]
pub struct Library {
    pub index: usize,
    pub iqn: String,
    /// The name the REST API knows it by (its iSCSI name).
    pub changer_lun: u64,
    pub transport: u16,
    /// (LUN, element) of the drives the tape workers use, one each.
    pub tape_drives: Vec<(u64, u16)>,
    /// Drive elements only the changer sessions load and unload.
    pub mover_drives: Vec<u16>,
    pub slots: Vec<u16>,
    pub import_export: Vec<u16>,
    pub inv: Mutex<Inventory>,
}

/// Only the soak's own tape cartridges travel through the changer sessions.
pub fn is_tape_cartridge(barcode: &str) -> bool {
    barcode.starts_with('T')
}

impl Library {
    /// Builds the library from its elements (READ ELEMENT STATUS of every type) and the
    /// tape LUNs in LUN order: the first `tape` drives go to tape workers, the rest to the
    /// changer sessions.
    pub fn new(
        index: usize,
        iqn: &str,
        changer_lun: u64,
        tape_luns: &[u64],
        elements: &[ElementStatus],
        tape: usize,
    ) -> anyhow::Result<Library> {
        let of = |t: ElementType| -> Vec<u16> {
            let mut v: Vec<u16> = elements
                .iter()
                .filter(|e| e.element_type == t)
                .map(|e| e.address)
                .collect();
            v.sort_unstable();
            v
        };
        let drives = of(ElementType::DATA_TRANSFER);
        if drives.len() <= tape || tape_luns.len() < drives.len() {
            anyhow::bail!(
                "library {iqn} has {} drive elements and {} tape LUNs; the soak needs more than {tape}",
                drives.len(),
                tape_luns.len()
            );
        }
        let lib = Library {
            index,
            iqn: iqn.to_string(),
            changer_lun,
            transport: of(ElementType::TRANSPORT).first().copied().unwrap_or(0),
            tape_drives: tape_luns[..tape]
                .iter()
                .copied()
                .zip(drives[..tape].iter().copied())
                .collect(),
            mover_drives: drives[tape..].to_vec(),
            slots: of(ElementType::STORAGE),
            import_export: of(ElementType::IMPORT_EXPORT),
            inv: Mutex::new(Inventory::default()),
        };
        lib.rebuild(elements);
        Ok(lib)
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inventory> {
        self.inv
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces the model with what the changer reports; the differences from what was
    /// acknowledged (cartridges not in doubt that are elsewhere, gone, or duplicated).
    pub fn rebuild(&self, elements: &[ElementStatus]) -> Vec<String> {
        let mut inv = self.lock();
        let mut problems = Vec::new();
        let mut at = BTreeMap::new();
        for e in elements {
            if e.element_type == ElementType::TRANSPORT {
                continue;
            }
            let b = if e.full {
                Some(e.barcode.clone().unwrap_or_default())
            } else {
                None
            };
            at.insert(e.address, b);
        }
        let mut seen = HashSet::new();
        for b in at.values().flatten() {
            if !seen.insert(b.clone()) {
                problems.push(format!("cartridge {b} is in two elements"));
            }
        }
        for (address, b) in &inv.at {
            let Some(b) = b else { continue };
            if inv.in_doubt.contains(b) || !is_tape_cartridge(b) {
                continue;
            }
            let now = at
                .iter()
                .find(|(_, x)| x.as_deref() == Some(b.as_str()))
                .map(|(a, _)| *a);
            if now != Some(*address) {
                problems.push(format!(
                    "cartridge {b} was acknowledged at element {address:#06x}, the changer now reports {}",
                    now.map_or("it nowhere".to_string(), |a| format!("element {a:#06x}"))
                ));
            }
        }
        // The API client's cartridges stay its own until it has dealt with them.
        let busy = at
            .values()
            .flatten()
            .filter(|b| !is_tape_cartridge(b))
            .cloned()
            .collect();
        *inv = Inventory {
            at,
            reserved: HashSet::new(),
            busy,
            in_doubt: HashSet::new(),
        };
        problems
    }

    /// A changer session's next move: slot to slot, slot to one of its drives, or back.
    ///
    /// As many idle cartridges as there are tape workers stay in their slots for them, and
    /// as many of those `unread` names (not read back since the restart): the changer
    /// sessions are fast enough to keep every cartridge in motion otherwise.
    pub fn plan_mover(&self, rng: &mut Rng, unread: &dyn Fn(&str) -> bool) -> Option<Move> {
        let mut inv = self.lock();
        let reserve = self.tape_drives.len();
        let idle = inv.usable_full(&self.slots, &is_tape_cartridge).len();
        let idle_unread = inv
            .usable_full(&self.slots, &|b| is_tape_cartridge(b) && unread(b))
            .len();
        let take = |b: &str| is_tape_cartridge(b) && (!unread(b) || idle_unread > reserve);
        let (full_slots, loadable) = if idle > reserve {
            (
                inv.usable_full(&self.slots, &take),
                // Into a spare drive only what was read back: the tape workers need the rest.
                inv.usable_full(&self.slots, &|b| is_tape_cartridge(b) && !unread(b)),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let empty_slots = inv.usable_empty(&self.slots);
        let full_drives = inv.usable_full(&self.mover_drives, &is_tape_cartridge);
        let unread_in_drives =
            inv.usable_full(&self.mover_drives, &|b| is_tape_cartridge(b) && unread(b));
        let empty_drives = inv.usable_empty(&self.mover_drives);
        let r = rng.below(100);
        let (from, to) = if !unread_in_drives.is_empty() && !empty_slots.is_empty() {
            // Left there by the restart: out first, so the tape workers can read it back.
            (rng.pick(&unread_in_drives)?, rng.pick(&empty_slots)?)
        } else if r < 20 && !full_drives.is_empty() && !empty_slots.is_empty() {
            (rng.pick(&full_drives)?, rng.pick(&empty_slots)?)
        } else if r < 40 && !loadable.is_empty() && !empty_drives.is_empty() {
            (rng.pick(&loadable)?, rng.pick(&empty_drives)?)
        } else if !full_slots.is_empty() && !empty_slots.is_empty() {
            (rng.pick(&full_slots)?, rng.pick(&empty_slots)?)
        } else if !full_drives.is_empty() && !empty_slots.is_empty() {
            (rng.pick(&full_drives)?, rng.pick(&empty_slots)?)
        } else {
            return None;
        };
        Some(inv.reserve(*from, *to))
    }

    /// A tape worker's load into `drive`: a free cartridge in a slot, those `prefer`
    /// accepts first; `only_preferred` refuses the others.
    pub fn plan_load(
        &self,
        rng: &mut Rng,
        drive: u16,
        prefer: &dyn Fn(&str) -> bool,
        only_preferred: bool,
    ) -> Option<Move> {
        let mut inv = self.lock();
        if inv.reserved.contains(&drive) || !matches!(inv.at.get(&drive), Some(None)) {
            return None;
        }
        let preferred = inv.usable_full(&self.slots, &|b| is_tape_cartridge(b) && prefer(b));
        let from = match rng.pick(&preferred) {
            Some(a) => *a,
            None if only_preferred => return None,
            None => *rng.pick(&inv.usable_full(&self.slots, &is_tape_cartridge))?,
        };
        Some(inv.reserve(from, drive))
    }

    /// A tape worker's unload of `drive` (whose cartridge it holds) into a free slot.
    pub fn plan_unload(&self, rng: &mut Rng, drive: u16) -> Option<Move> {
        let mut inv = self.lock();
        let barcode = inv.at.get(&drive)?.clone()?;
        let to = *rng.pick(&inv.usable_empty(&self.slots))?;
        inv.reserved.insert(drive);
        inv.reserved.insert(to);
        Some(Move {
            from: drive,
            to,
            barcode,
        })
    }

    /// The API client's elements: a free import/export element and a free slot.
    pub fn plan_api(&self, rng: &mut Rng) -> Option<(u16, u16)> {
        let mut inv = self.lock();
        let ie = *rng.pick(&inv.usable_empty(&self.import_export))?;
        let slot = *rng.pick(&inv.usable_empty(&self.slots))?;
        inv.reserved.insert(ie);
        inv.reserved.insert(slot);
        Some((ie, slot))
    }

    /// The move is about to be sent.
    pub fn begin(&self, mv: &Move) {
        self.lock().in_doubt.insert(mv.barcode.clone());
    }

    /// The move was answered: `done` applies it. The elements are released; the cartridge
    /// stays busy when `keep` (a tape worker holds it in its drive).
    pub fn finish(&self, mv: &Move, done: bool, keep: bool) {
        let mut inv = self.lock();
        inv.in_doubt.remove(&mv.barcode);
        if done {
            inv.at.insert(mv.from, None);
            inv.at.insert(mv.to, Some(mv.barcode.clone()));
        }
        inv.reserved.remove(&mv.from);
        inv.reserved.remove(&mv.to);
        if !keep {
            inv.busy.remove(&mv.barcode);
        }
    }

    /// The API client put `barcode` into `element` (import) or took it out (export).
    pub fn set(&self, element: u16, barcode: Option<&str>) {
        self.lock().at.insert(element, barcode.map(str::to_string));
    }

    pub fn release(&self, elements: &[u16]) {
        let mut inv = self.lock();
        for e in elements {
            inv.reserved.remove(e);
        }
    }

    pub fn tape_cartridges(&self) -> Vec<String> {
        self.lock()
            .at
            .values()
            .flatten()
            .filter(|b| is_tape_cartridge(b))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(t: ElementType, address: u16, barcode: Option<&str>) -> ElementStatus {
        ElementStatus {
            element_type: t,
            address,
            full: barcode.is_some(),
            barcode: barcode.map(str::to_string),
            source: None,
        }
    }

    fn library() -> Library {
        let elements = vec![
            el(ElementType::TRANSPORT, 1, None),
            el(ElementType::DATA_TRANSFER, 0x100, None),
            el(ElementType::DATA_TRANSFER, 0x101, None),
            el(ElementType::STORAGE, 0x400, Some("TA0001L9")),
            el(ElementType::STORAGE, 0x401, Some("TA0002L9")),
            el(ElementType::STORAGE, 0x402, None),
            el(ElementType::IMPORT_EXPORT, 0x300, None),
        ];
        Library::new(0, "iqn.x", 0, &[1, 2], &elements, 1).unwrap()
    }

    #[test]
    fn reservations_keep_moves_apart() {
        let mut lib = library();
        assert_eq!(lib.tape_drives, [(1, 0x100)]);
        assert_eq!(lib.mover_drives, [0x101]);
        let mut rng = Rng::new(1);
        let a = lib.plan_load(&mut rng, 0x100, &|_| true, false).unwrap();
        assert_eq!(a.to, 0x100);
        // The other cartridge can go to the mover's drive or the last free slot, not both.
        // One idle cartridge stays for the one tape worker.
        assert!(lib.plan_mover(&mut rng, &|_| false).is_none());
        lib.tape_drives.clear();
        let b = lib.plan_mover(&mut rng, &|_| false).unwrap();
        assert_ne!(b.barcode, a.barcode);
        assert!(lib.plan_mover(&mut rng, &|_| false).is_none());
        lib.begin(&a);
        lib.finish(&a, true, true);
        lib.finish(&b, true, false);
        let inv = lib.lock();
        assert_eq!(inv.at[&0x100].as_deref(), Some(a.barcode.as_str()));
        assert!(inv.busy.contains(&a.barcode) && !inv.busy.contains(&b.barcode));
        assert!(inv.reserved.is_empty() && inv.in_doubt.is_empty());
    }

    #[test]
    fn a_restart_is_compared_with_what_was_acknowledged() {
        let lib = library();
        let mut rng = Rng::new(2);
        let mv = lib.plan_load(&mut rng, 0x100, &|_| true, false).unwrap();
        lib.begin(&mv);
        // Killed before the answer: either place is fine.
        let mut after = vec![
            el(ElementType::DATA_TRANSFER, 0x100, Some(&mv.barcode)),
            el(ElementType::DATA_TRANSFER, 0x101, None),
            el(ElementType::STORAGE, 0x402, None),
            el(ElementType::IMPORT_EXPORT, 0x300, Some("Q00001L9")),
        ];
        let other = if mv.barcode == "TA0001L9" {
            "TA0002L9"
        } else {
            "TA0001L9"
        };
        let other_at = if mv.from == 0x400 { 0x401 } else { 0x400 };
        after.push(el(ElementType::STORAGE, other_at, Some(other)));
        after.push(el(ElementType::STORAGE, mv.from, None));
        assert!(lib.rebuild(&after).is_empty());
        assert!(lib.lock().busy.contains("Q00001L9"));
        // An acknowledged cartridge that moved by itself is reported.
        let mut moved = after.clone();
        moved.retain(|e| e.address != other_at && e.address != 0x402);
        moved.push(el(ElementType::STORAGE, other_at, None));
        moved.push(el(ElementType::STORAGE, 0x402, Some(other)));
        let problems = lib.rebuild(&moved);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(other), "{problems:?}");
    }
}
