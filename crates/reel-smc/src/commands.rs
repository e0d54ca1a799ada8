//! The SMC-3 commands of [`Changer`], the element status data they return and the changer
//! mode pages (SMC-3 §6, §7).

use reel_scsi::{Asc, Cdb, Command, DeviceContext, ModePage, OpcodeDescriptor, ScsiResult, Sense};

use crate::changer::{BayOp, Changer, Translation};
use crate::inventory::{VolumeTag, valid_barcode};
use crate::model::{DvcidFormat, Element, ElementType};

/// Length of a volume tag information field (SMC-3 §7.x: 32-byte volume identifier, 2
/// reserved bytes, 2-byte volume sequence number).
const VOLUME_TAG_LEN: usize = 36;
/// The fixed part of every element descriptor (SMC-3 §6.10.x, bytes 0–11).
const DESCRIPTOR_FIXED_LEN: usize = 12;
/// The SEND VOLUME TAG parameter list (SMC-3 §6.x, table "send volume tag parameters").
const SEND_VOLUME_TAG_PARAMETERS_LEN: usize = 40;

/// INVALID FIELD IN CDB at `byte`, `bit`.
fn field(byte: u16, bit: u8) -> Sense {
    Sense::invalid_field_in_cdb(byte, Some(bit))
}

fn invalid_element_address() -> Sense {
    Sense::illegal_request(Asc::INVALID_ELEMENT_ADDRESS)
}

fn source_empty() -> Sense {
    Sense::illegal_request(Asc::MEDIUM_SOURCE_ELEMENT_EMPTY)
}

fn destination_full() -> Sense {
    Sense::illegal_request(Asc::MEDIUM_DESTINATION_ELEMENT_FULL)
}

fn be24(value: usize) -> [u8; 3] {
    let [_, a, b, c] = u32::try_from(value.min(0xFF_FFFF))
        .unwrap_or(0xFF_FFFF)
        .to_be_bytes();
    [a, b, c]
}

/// MEDIUM TYPE of an element descriptor (SMC-3 §6.10.x, table "medium type"): 1 data, 2
/// cleaning, 4 WORM — from the barcode as LTO labels encode it (`CLN…` cleaning, media ID
/// `LT`–`LZ` WORM).
fn medium_type(barcode: &str) -> u8 {
    let b = barcode.as_bytes();
    if barcode.starts_with("CLN") {
        2
    } else if b.len() >= 2 && b[b.len() - 2] == b'L' && (b'T'..=b'Z').contains(&b[b.len() - 1]) {
        4
    } else {
        1
    }
}

/// `template` (SMC-3 §6.x SEND VOLUME TAG: `*` any string, `?` one character) against `s`.
fn matches_template(template: &[u8], s: &[u8]) -> bool {
    // Dynamic programming over (template prefix, string prefix); both are at most 32 bytes.
    let mut row = vec![false; s.len() + 1];
    row[0] = true;
    for &t in template {
        let mut next = vec![false; s.len() + 1];
        if t == b'*' {
            let mut any = false;
            for j in 0..=s.len() {
                any |= row[j];
                next[j] = any;
            }
        } else {
            for j in 1..=s.len() {
                next[j] = row[j - 1] && (t == b'?' || t == s[j - 1]);
            }
        }
        row = next;
    }
    row[s.len()]
}

/// The volume identifier of a template field: trailing spaces and NULs dropped.
fn trim_identifier(raw: &[u8]) -> &[u8] {
    let end = raw
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &raw[..end]
}

fn volume_tag_field(identifier: Option<(&str, u16)>, out: &mut Vec<u8>) {
    match identifier {
        Some((id, sequence)) => {
            let mut field = [b' '; 32];
            for (f, b) in field.iter_mut().zip(id.bytes()) {
                *f = b;
            }
            out.extend_from_slice(&field);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&sequence.to_be_bytes());
        }
        None => out.extend_from_slice(&[0; VOLUME_TAG_LEN]),
    }
}

fn padded(s: &str, n: usize) -> Vec<u8> {
    let mut out: Vec<u8> = s.bytes().map(printable).take(n).collect();
    out.resize(n, b' ');
    out
}

fn printable(b: u8) -> u8 {
    if (0x20..0x7F).contains(&b) { b } else { b'?' }
}

impl Changer {
    /// Executes a changer command; `None` for operation codes the changer does not have.
    pub(crate) fn execute_smc(
        &mut self,
        ctx: &mut DeviceContext<'_>,
        command: &Command<'_>,
    ) -> Option<ScsiResult<Vec<u8>>> {
        let cdb = &command.cdb;
        let nexus = ctx.nexus().clone();
        Some(match cdb.opcode().0 {
            // INITIALIZE ELEMENT STATUS (SMC-3 §6.2): the inventory is always current.
            0x07 => Ok(Vec::new()),
            0x1B => self.open_close_import_export(cdb),
            0x1E => self.prevent_allow(&nexus, cdb),
            0x2B => self.position_to_element(cdb),
            0x37 => self.initialize_with_range(cdb),
            0xA5 => self.move_medium(&nexus, cdb),
            0xA6 if self.model.exchange => self.exchange_medium(&nexus, cdb),
            0xB5 if self.model.volume_tags => self.request_volume_element_address(&nexus, cdb),
            0xB6 if self.model.volume_tags => self.send_volume_tag(&nexus, command),
            0xB8 => self.read_element_status(cdb),
            _ => return None,
        })
    }

    /// The transport element address of MOVE, EXCHANGE and POSITION: 0 is the default
    /// transport (SMC-3 §6.5), anything else must be a transport element.
    fn check_transport(&self, address: u16) -> ScsiResult<()> {
        match self.map.element(address) {
            _ if address == 0 => Ok(()),
            Some(e) if e.kind == ElementType::Transport => Ok(()),
            _ => Err(invalid_element_address()),
        }
    }

    fn element(&self, address: u16) -> ScsiResult<Element> {
        self.map
            .element(address)
            .ok_or_else(invalid_element_address)
    }

    /// OPEN/CLOSE IMPORT/EXPORT ELEMENT (1Bh, SMC-3 §6.3): byte 2–3 element address (0: all),
    /// byte 4 bits 1–0 the action. reel's import/export elements have no door, so the command
    /// only validates; the START STOP UNIT–shaped values mtx's `eject` sends are accepted.
    fn open_close_import_export(&self, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        if cdb.byte(4) & 0xFC != 0 {
            return Err(field(4, 7));
        }
        let address = cdb.be16(2);
        if address != 0 && self.element(address)?.kind != ElementType::ImportExport {
            return Err(invalid_element_address());
        }
        Ok(Vec::new())
    }

    /// PREVENT ALLOW MEDIUM REMOVAL (1Eh, SMC-3 §6.x / SPC-4 §6.13): per nexus; while any
    /// nexus prevents, nothing may be moved into an import/export element and the operator
    /// may not take cartridges out.
    fn prevent_allow(&mut self, nexus: &reel_scsi::ItNexus, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        match cdb.byte(4) {
            0 => {
                self.prevented.remove(nexus);
            }
            1 => {
                self.prevented.insert(nexus.clone());
            }
            // PREVENT values 10b and 11b are for attached changers; other bits are reserved.
            _ => return Err(field(4, 1)),
        }
        Ok(Vec::new())
    }

    /// POSITION TO ELEMENT (2Bh, SMC-3 §6.4): nothing to move; valid addresses are GOOD.
    fn position_to_element(&self, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        if cdb.bit(8, 0) {
            return Err(field(8, 0)); // INVERT: media are not two-sided
        }
        self.check_transport(cdb.be16(2))?;
        self.element(cdb.be16(4))?;
        Ok(Vec::new())
    }

    /// INITIALIZE ELEMENT STATUS WITH RANGE (37h, SMC-3 §6.3): the inventory is current; a
    /// range must start at an existing address.
    fn initialize_with_range(&self, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        if cdb.bit(1, 0) && cdb.be16(2) > self.map.highest() {
            return Err(invalid_element_address());
        }
        Ok(Vec::new())
    }

    /// MOVE MEDIUM (A5h, SMC-3 §6.5).
    fn move_medium(&mut self, nexus: &reel_scsi::ItNexus, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        if cdb.bit(10, 0) {
            return Err(field(10, 0)); // INVERT
        }
        self.check_transport(cdb.be16(2))?;
        let source = self.element(cdb.be16(4))?;
        let destination = self.element(cdb.be16(6))?;
        let mut next = self.inventory.clone();
        let mut cartridge = next.take(source).ok_or_else(source_empty)?;
        if source == destination {
            return Ok(Vec::new());
        }
        if destination.kind == ElementType::Transport {
            // Nothing is left in the hand (device capabilities page: no moves to MT).
            return Err(invalid_element_address());
        }
        if next.get(destination).is_some() {
            return Err(destination_full());
        }
        self.check_removal(destination)?;
        let mut ops = Vec::new();
        if source.kind == ElementType::DataTransfer {
            ops.push(BayOp::Unload {
                drive: source.index,
                barcode: cartridge.barcode.clone(),
            });
        }
        if destination.kind == ElementType::DataTransfer {
            ops.push(BayOp::Load {
                drive: destination.index,
                barcode: cartridge.barcode.clone(),
            });
        }
        moved(&mut cartridge, source);
        next.force(destination, cartridge);
        self.commit(nexus, next, ops)?;
        self.travel(1);
        Ok(Vec::new())
    }

    /// SMC-3 §6.x PREVENT ALLOW MEDIUM REMOVAL: while prevented, media do not go to an
    /// import/export element.
    fn check_removal(&self, destination: Element) -> ScsiResult<()> {
        if destination.kind == ElementType::ImportExport && !self.prevented.is_empty() {
            return Err(Sense::illegal_request(Asc::MEDIUM_REMOVAL_PREVENTED));
        }
        Ok(())
    }

    /// EXCHANGE MEDIUM (A6h, SMC-3 §6.x): source → first destination, the medium that was in
    /// the first destination → second destination (which may be the source).
    fn exchange_medium(
        &mut self,
        nexus: &reel_scsi::ItNexus,
        cdb: &Cdb<'_>,
    ) -> ScsiResult<Vec<u8>> {
        if cdb.bit(10, 1) {
            return Err(field(10, 1)); // INV2
        }
        if cdb.bit(10, 0) {
            return Err(field(10, 0)); // INV1
        }
        self.check_transport(cdb.be16(2))?;
        let source = self.element(cdb.be16(4))?;
        let first = self.element(cdb.be16(6))?;
        let second = self.element(cdb.be16(8))?;
        if first == source {
            return Err(field(6, 7));
        }
        if second == first {
            return Err(field(8, 7));
        }
        let mut next = self.inventory.clone();
        let mut a = next.take(source).ok_or_else(source_empty)?;
        let mut b = next.take(first).ok_or_else(source_empty)?;
        if second.kind == ElementType::Transport {
            return Err(invalid_element_address());
        }
        if next.get(second).is_some() {
            return Err(destination_full());
        }
        self.check_removal(first)?;
        self.check_removal(second)?;
        let mut ops = Vec::new();
        for (element, cartridge) in [(source, &a), (first, &b)] {
            if element.kind == ElementType::DataTransfer {
                ops.push(BayOp::Unload {
                    drive: element.index,
                    barcode: cartridge.barcode.clone(),
                });
            }
        }
        for (element, cartridge) in [(second, &b), (first, &a)] {
            if element.kind == ElementType::DataTransfer {
                ops.push(BayOp::Load {
                    drive: element.index,
                    barcode: cartridge.barcode.clone(),
                });
            }
        }
        moved(&mut a, source);
        moved(&mut b, first);
        next.force(second, b);
        next.force(first, a);
        self.commit(nexus, next, ops)?;
        self.travel(2);
        Ok(Vec::new())
    }

    /// READ ELEMENT STATUS (B8h, SMC-3 §6.10).
    fn read_element_status(&self, cdb: &Cdb<'_>) -> ScsiResult<Vec<u8>> {
        // Byte 1 bits 7–5 held the LUN in SCSI-2 (the Linux ch driver still fills them).
        let voltag = cdb.bit(1, 4);
        let kind = element_type_filter(cdb.byte(1) & 0x0F)?;
        let start = cdb.be16(2);
        let number = usize::from(cdb.be16(4));
        // Byte 6: CURDATA (bit 1) needs no robot motion here; DVCID (bit 0).
        let dvcid = cdb.bit(6, 0);
        let allocation_length = usize::try_from(cdb.be(7, 3)).unwrap_or(usize::MAX);
        if start > self.map.highest() {
            return Err(invalid_element_address());
        }
        let elements: Vec<(u16, Element)> = self
            .map
            .ordered()
            .iter()
            .filter(|&&(address, e)| address >= start && kind.is_none_or(|k| e.kind == k))
            .take(number)
            .copied()
            .collect();
        let mut data = self.status_report(&elements, voltag, dvcid, 0);
        // SMC-3 §6.10.2: the header's counts describe the whole report, whatever is cut off.
        data.truncate(allocation_length);
        Ok(data)
    }

    /// SEND VOLUME TAG (B6h, SMC-3 §6.x).
    fn send_volume_tag(
        &mut self,
        nexus: &reel_scsi::ItNexus,
        command: &Command<'_>,
    ) -> ScsiResult<Vec<u8>> {
        let cdb = &command.cdb;
        let address = cdb.be16(2);
        let action = cdb.byte(5) & 0x1F;
        if cdb.byte(5) & 0xE0 != 0 {
            return Err(field(5, 7));
        }
        let length = usize::from(cdb.be16(8));
        let undefine = action == 0x0D;
        let parameters: &[u8] = if length == 0 && undefine {
            &[]
        } else if length != SEND_VOLUME_TAG_PARAMETERS_LEN {
            return Err(field(8, 7));
        } else {
            command
                .data_out
                .get(..SEND_VOLUME_TAG_PARAMETERS_LEN)
                .ok_or_else(Sense::parameter_list_length_error)?
        };
        let template = trim_identifier(parameters.get(..32).unwrap_or(&[]));
        let minimum = parameters
            .get(34..36)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        let maximum = parameters
            .get(38..40)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        match action {
            // Translate: 00h all tags, 01h primary, 02h alternate; 05h–07h the same ignoring
            // volume sequence numbers.
            0x00..=0x02 | 0x05..=0x07 => {
                let kind = element_type_filter(cdb.byte(1) & 0x0F)?;
                if address > self.map.highest() {
                    return Err(invalid_element_address());
                }
                if template.iter().any(|&b| !b.is_ascii_graphic()) {
                    return Err(Sense::invalid_field_in_parameter_list(0, Some(7)));
                }
                let which = action % 5;
                let ignore_sequence = action >= 5;
                let in_range = |seq: u16| ignore_sequence || (minimum..=maximum).contains(&seq);
                let elements = self
                    .map
                    .ordered()
                    .iter()
                    .filter(|&&(a, e)| a >= address && kind.is_none_or(|k| e.kind == k))
                    .filter(|&&(_, e)| {
                        let Some(c) = self.inventory.get(e) else {
                            return false;
                        };
                        let primary = which != 2
                            && in_range(0)
                            && matches_template(template, c.barcode.as_bytes());
                        let alternate = which != 1
                            && c.alternate.as_ref().is_some_and(|t| {
                                in_range(t.sequence)
                                    && matches_template(template, t.identifier.as_bytes())
                            });
                        primary || alternate
                    })
                    .map(|&(_, e)| e)
                    .collect();
                self.translations
                    .insert(nexus.clone(), Translation { action, elements });
                Ok(Vec::new())
            }
            // Assert (09h), replace (0Bh), undefine (0Dh) the alternate volume tag.
            0x09 | 0x0B | 0x0D => {
                let element = self.element(address)?;
                let tag = if undefine {
                    None
                } else {
                    let identifier = String::from_utf8_lossy(template).into_owned();
                    if !valid_barcode(&identifier) || identifier.contains(['*', '?']) {
                        return Err(Sense::invalid_field_in_parameter_list(0, Some(7)));
                    }
                    Some(VolumeTag {
                        identifier,
                        sequence: minimum,
                    })
                };
                let mut next = self.inventory.clone();
                let mut cartridge = next.take(element).ok_or_else(source_empty)?;
                if action == 0x09 && cartridge.alternate.is_some() {
                    // Assert only defines a tag that is not defined yet.
                    return Err(field(5, 4));
                }
                cartridge.alternate = tag;
                next.force(element, cartridge);
                self.commit(nexus, next, Vec::new())?;
                Ok(Vec::new())
            }
            // Primary volume tags are the barcodes the library reads; they are not changed by
            // command (08h assert, 0Ah replace, 0Ch undefine primary), the rest is reserved.
            _ => Err(field(5, 4)),
        }
    }

    /// REQUEST VOLUME ELEMENT ADDRESS (B5h, SMC-3 §6.x): the elements found by this nexus's
    /// last SEND VOLUME TAG translate, in element status format.
    fn request_volume_element_address(
        &self,
        nexus: &reel_scsi::ItNexus,
        cdb: &Cdb<'_>,
    ) -> ScsiResult<Vec<u8>> {
        let voltag = cdb.bit(1, 4);
        let kind = element_type_filter(cdb.byte(1) & 0x0F)?;
        let start = cdb.be16(2);
        let number = usize::from(cdb.be16(4));
        let dvcid = cdb.bit(6, 0);
        let allocation_length = usize::try_from(cdb.be(7, 3)).unwrap_or(usize::MAX);
        let translation = self
            .translations
            .get(nexus)
            .ok_or(Sense::illegal_request(Asc::COMMAND_SEQUENCE_ERROR))?;
        let elements: Vec<(u16, Element)> = translation
            .elements
            .iter()
            .map(|&e| (self.map.address(e), e))
            .filter(|&(a, e)| a >= start && kind.is_none_or(|k| e.kind == k))
            .take(number)
            .collect();
        let mut data = self.status_report(&elements, voltag, dvcid, translation.action);
        data.truncate(allocation_length);
        Ok(data)
    }

    /// Element status data (SMC-3 §6.10.2): an 8-byte header and one element status page per
    /// run of elements of one type. `byte4` is the header's byte 4 (reserved for READ
    /// ELEMENT STATUS, the SEND ACTION CODE for REQUEST VOLUME ELEMENT ADDRESS).
    fn status_report(
        &self,
        elements: &[(u16, Element)],
        voltag: bool,
        dvcid: bool,
        byte4: u8,
    ) -> Vec<u8> {
        let mut pages = Vec::new();
        for run in elements.chunk_by(|a, b| a.1.kind == b.1.kind) {
            self.status_page(run, voltag, dvcid, &mut pages);
        }
        let first = elements.first().map_or(0, |&(a, _)| a);
        let count = u16::try_from(elements.len()).unwrap_or(u16::MAX);
        let mut out = Vec::with_capacity(8 + pages.len());
        out.extend_from_slice(&first.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        out.push(byte4);
        out.extend_from_slice(&be24(pages.len()));
        out.extend_from_slice(&pages);
        out
    }

    /// The DVCID identifier of drive `index`: (IDENTIFIER TYPE, IDENTIFIER).
    fn drive_identifier(&self, index: u16) -> (u8, Vec<u8>) {
        let Some(bay) = self.bays.get(usize::from(index)) else {
            return (0, Vec::new());
        };
        let id = bay.identification();
        let serial: Vec<u8> = id.serial.bytes().map(printable).collect();
        let (kind, mut out) = match self.model.dvcid {
            DvcidFormat::T10VendorId => {
                let mut out = padded(&id.vendor, 8);
                out.extend_from_slice(&padded(&id.product, 16));
                out.extend_from_slice(&serial);
                (1, out)
            }
            DvcidFormat::SerialOnly => (0, serial),
        };
        out.truncate(255);
        (kind, out)
    }

    /// One element status page (SMC-3 §6.10.3) for `run`, elements of one type.
    fn status_page(&self, run: &[(u16, Element)], voltag: bool, dvcid: bool, out: &mut Vec<u8>) {
        let Some(&(_, first)) = run.first() else {
            return;
        };
        let kind = first.kind;
        // AVOLTAG: alternate tags are reported only when one is defined in this page.
        let avoltag = voltag
            && run
                .iter()
                .any(|&(_, e)| self.inventory.get(e).is_some_and(|c| c.alternate.is_some()));
        let identifiers: Vec<(u8, Vec<u8>)> = if dvcid && kind == ElementType::DataTransfer {
            run.iter()
                .map(|&(_, e)| self.drive_identifier(e.index))
                .collect()
        } else {
            Vec::new()
        };
        // Descriptors of one page share a length: identifiers are zero-padded to the longest
        // (IDENTIFIER LENGTH keeps each one's own length).
        let identifier_room = identifiers
            .iter()
            .map(|(_, id)| id.len())
            .max()
            .unwrap_or(0);
        let descriptor_len = DESCRIPTOR_FIXED_LEN
            + if voltag { VOLUME_TAG_LEN } else { 0 }
            + if avoltag { VOLUME_TAG_LEN } else { 0 }
            + if dvcid { 4 + identifier_room } else { 0 };
        out.push(kind.code());
        out.push(u8::from(voltag) << 7 | u8::from(avoltag) << 6);
        out.extend_from_slice(&u16::try_from(descriptor_len).unwrap_or(0).to_be_bytes());
        out.push(0);
        out.extend_from_slice(&be24(descriptor_len.saturating_mul(run.len())));
        for (i, &(address, element)) in run.iter().enumerate() {
            let start = out.len();
            self.descriptor(address, element, voltag, avoltag, out);
            if dvcid {
                match identifiers.get(i) {
                    Some((id_type, id)) => {
                        // CODE SET 2h (ASCII), IDENTIFIER TYPE, reserved, IDENTIFIER LENGTH.
                        out.extend_from_slice(&[0x02, *id_type, 0, id.len() as u8]);
                        out.extend_from_slice(id);
                    }
                    None => out.extend_from_slice(&[0, 0, 0, 0]),
                }
            }
            out.resize(start + descriptor_len, 0);
        }
    }

    /// The common part of an element descriptor (SMC-3 §6.10.4–§6.10.7) and its volume tags.
    fn descriptor(
        &self,
        address: u16,
        element: Element,
        voltag: bool,
        avoltag: bool,
        out: &mut Vec<u8>,
    ) {
        let cartridge = self.inventory.get(element);
        let exception = self.exception(element);
        out.extend_from_slice(&address.to_be_bytes());
        // Byte 2: FULL (bit 0), IMPEXP (1), EXCEPT (2), ACCESS (3), EXENAB (4), INENAB (5).
        let mut flags = u8::from(cartridge.is_some());
        if exception.is_some() {
            flags |= 0x04;
        }
        match element.kind {
            ElementType::Transport => {}
            ElementType::Storage | ElementType::DataTransfer => flags |= 0x08,
            ElementType::ImportExport => {
                flags |= 0x30 | 0x08;
                if cartridge.is_some_and(|c| c.imported) {
                    flags |= 0x02;
                }
            }
        }
        out.push(flags);
        out.push(0);
        let asc = exception.unwrap_or(Asc::NO_ADDITIONAL_SENSE);
        out.extend_from_slice(&[asc.asc(), asc.ascq()]);
        // Bytes 6–8: for a data transfer element NOT BUS, ID VALID, LU VALID, LUN, SCSI BUS
        // ADDRESS — all zero: the drive is reached through its own target, not a bus ID.
        out.extend_from_slice(&[0, 0, 0]);
        // Byte 9: SVALID (bit 7), INVERT (6, always 0), ED (3, 0), MEDIUM TYPE (2–0).
        let source = cartridge.and_then(|c| c.source);
        let mut byte9 = cartridge.map_or(0, |c| medium_type(&c.barcode));
        if source.is_some() {
            byte9 |= 0x80;
        }
        out.push(byte9);
        let source_address = source.map_or(0, |s| self.map.address(s));
        out.extend_from_slice(&source_address.to_be_bytes());
        if voltag {
            volume_tag_field(cartridge.map(|c| (c.barcode.as_str(), 0)), out);
        }
        if avoltag {
            volume_tag_field(
                cartridge
                    .and_then(|c| c.alternate.as_ref())
                    .map(|t| (t.identifier.as_str(), t.sequence)),
                out,
            );
        }
    }

    /// Element address assignment (1Dh), transport geometry (1Eh) and device capabilities
    /// (1Fh) mode pages (SMC-3 §7.3); none is changeable, saving is not supported.
    pub(crate) fn mode_pages_smc(&self) -> Vec<ModePage> {
        let mut assignment = Vec::with_capacity(18);
        for kind in [
            ElementType::Transport,
            ElementType::Storage,
            ElementType::ImportExport,
            ElementType::DataTransfer,
        ] {
            assignment.extend_from_slice(&self.map.first(kind).to_be_bytes());
            assignment.extend_from_slice(&self.map.count(kind).to_be_bytes());
        }
        assignment.extend_from_slice(&[0, 0]);
        // One transport, no rotation (media are not two-sided), member 0 of its set.
        let geometry = vec![0x00, 0x00];
        // Device capabilities: STORST, STORI/E, STORDT in byte 2; then MT→, ST→, I/E→, DT→
        // moves (bytes 4–7) and exchanges (bytes 12–15), each bit 0 MT, 1 ST, 2 I/E, 3 DT.
        let mut capabilities = vec![0u8; 18];
        capabilities[0] = 0x0E;
        let to_any = 0x0E; // ST, I/E, DT; never the transport
        capabilities[3..6].fill(to_any);
        if self.model.exchange {
            capabilities[11..14].fill(to_any);
        }
        vec![
            ModePage::fixed(0x1D, 0, assignment),
            ModePage::fixed(0x1E, 0, geometry),
            ModePage::fixed(0x1F, 0, capabilities),
        ]
    }

    /// The changer's commands for REPORT SUPPORTED OPERATION CODES.
    pub(crate) fn opcode_descriptors(&self) -> Vec<OpcodeDescriptor> {
        let mut all = vec![
            OpcodeDescriptor::new(&[0x07, 0, 0, 0, 0, 0]).with_timeouts(0, 600),
            OpcodeDescriptor::new(&[0x1B, 0, 0xFF, 0xFF, 0x03, 0]),
            OpcodeDescriptor::new(&[0x1E, 0, 0, 0, 0x03, 0]),
            OpcodeDescriptor::new(&[0x2B, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x01, 0]),
            OpcodeDescriptor::new(&[0x37, 0x01, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0])
                .with_timeouts(0, 600),
            OpcodeDescriptor::new(&[0xA5, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x01, 0])
                .with_timeouts(0, 600),
            OpcodeDescriptor::new(&[
                0xB8, 0x1F, 0xFF, 0xFF, 0xFF, 0xFF, 0x03, 0xFF, 0xFF, 0xFF, 0, 0,
            ]),
        ];
        if self.model.exchange {
            all.push(
                OpcodeDescriptor::new(&[
                    0xA6, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x03, 0,
                ])
                .with_timeouts(0, 600),
            );
        }
        if self.model.volume_tags {
            all.push(OpcodeDescriptor::new(&[
                0xB5, 0x1F, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0xFF, 0xFF, 0xFF, 0, 0,
            ]));
            all.push(OpcodeDescriptor::new(&[
                0xB6, 0x0F, 0xFF, 0xFF, 0, 0x1F, 0, 0, 0xFF, 0xFF, 0, 0,
            ]));
        }
        all
    }
}

/// Records a move out of `from`: a cartridge leaving a storage or import/export element
/// remembers it as its source (SVALID); leaving a drive keeps the earlier source. A cartridge
/// moved by the transport was not placed by the operator.
fn moved(cartridge: &mut crate::inventory::Cartridge, from: Element) {
    if matches!(from.kind, ElementType::Storage | ElementType::ImportExport) {
        cartridge.source = Some(from);
    }
    cartridge.imported = false;
}

/// ELEMENT TYPE CODE: 0 all types, 1–4 one type, anything else INVALID FIELD IN CDB.
fn element_type_filter(code: u8) -> ScsiResult<Option<ElementType>> {
    match code {
        0 => Ok(None),
        c => ElementType::from_code(c).map(Some).ok_or(field(1, 3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        assert!(matches_template(b"A*", b"A00001L9"));
        assert!(matches_template(b"*L9", b"A00001L9"));
        assert!(matches_template(b"A0000?L9", b"A00001L9"));
        assert!(matches_template(b"*", b""));
        assert!(!matches_template(b"A?", b"A"));
        assert!(!matches_template(b"B*", b"A00001L9"));
        assert!(matches_template(b"**1*", b"A00001L9"));
        assert!(!matches_template(b"", b"A"));
    }

    #[test]
    fn medium_types() {
        assert_eq!(medium_type("A00001L9"), 1);
        assert_eq!(medium_type("CLN001L1"), 2);
        assert_eq!(medium_type("W00001LZ"), 4);
        assert_eq!(medium_type("X"), 1);
    }

    #[test]
    fn identifier_trim() {
        assert_eq!(trim_identifier(b"ABC  \0\0"), b"ABC");
        assert_eq!(trim_identifier(b"   "), b"");
    }
}
