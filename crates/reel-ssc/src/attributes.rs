//! READ ATTRIBUTE and WRITE ATTRIBUTE (SPC-4 §6.17, §6.36) over the cartridge memory.
//!
//! reel-media keeps one set of host attributes per cartridge, while LTO keeps VOLUME
//! COHERENCY INFORMATION (080Ch) and PARTITION USER TEXT LABEL (0809h) per partition (LTFS
//! writes a coherency record for each partition). The copies of partitions 1–3 are stored
//! under host vendor-specific identifiers 17F1h–17F3h and 17F5h–17F7h, which the drive hides:
//! 17F0h–17FFh are neither reported nor writable by initiators.

use std::convert::Infallible;
use std::ops::RangeInclusive;

use reel_media::{
    AttributeFormat, Cartridge, Mam, MamAttribute, MediaError, PartitionStore, STANDARD_ATTRIBUTES,
};
use reel_scsi::{Bytes, Cdb, Response, Sense};

use crate::drive::{Reply, TapeDrive};
use crate::errors::{self, Op};

const VOLUME_COHERENCY: u16 = 0x080C;
const PARTITION_LABEL: u16 = 0x0809;
/// Identifiers reserved for the per-partition copies.
const HIDDEN: RangeInclusive<u16> = 0x17F0..=0x17FF;

/// Where the volume coherency information of every partition is stored.
pub(crate) const VOLUME_COHERENCY_IDS: [u16; 4] = [VOLUME_COHERENCY, 0x17F1, 0x17F2, 0x17F3];

/// The identifier under which attribute `id` of `partition` is stored.
fn stored_id(id: u16, partition: u8) -> u16 {
    match (id, partition) {
        (_, 0) => id,
        (VOLUME_COHERENCY, p) => 0x17F0 + u16::from(p & 3),
        (PARTITION_LABEL, p) => 0x17F4 + u16::from(p & 3),
        _ => id,
    }
}

/// The attributes an initiator sees for `partition`.
fn visible<S: PartitionStore>(
    cartridge: &Cartridge<S>,
    partition: u8,
) -> Result<Vec<MamAttribute>, Sense> {
    let mut all = cartridge
        .attributes(partition)
        .map_err(|e| errors::media(&e, Op::Read, 7))?;
    all.retain(|a| !HIDDEN.contains(&a.id));
    if partition > 0 {
        all.retain(|a| a.id != VOLUME_COHERENCY && a.id != PARTITION_LABEL);
        for id in [VOLUME_COHERENCY, PARTITION_LABEL] {
            if let Some(value) = cartridge.mam().host_attribute(stored_id(id, partition)) {
                let format = if id == PARTITION_LABEL {
                    AttributeFormat::Ascii
                } else {
                    AttributeFormat::Binary
                };
                all.push(MamAttribute {
                    id,
                    format,
                    read_only: false,
                    value: value.to_vec(),
                });
            }
        }
        all.sort_by_key(|a| a.id);
    }
    Ok(all)
}

fn encode(attribute: &MamAttribute, out: &mut Vec<u8>) {
    out.extend_from_slice(&attribute.id.to_be_bytes());
    out.push(u8::from(attribute.read_only) << 7 | attribute.format.code());
    let len = u16::try_from(attribute.value.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&attribute.value[..usize::from(len)]);
}

fn with_length_header(body: Vec<u8>) -> Vec<u8> {
    let mut out = u32::try_from(body.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(&body);
    out
}

impl<S: PartitionStore + Send> TapeDrive<S> {
    /// READ ATTRIBUTE service actions ATTRIBUTE VALUES (00h), ATTRIBUTE LIST (01h), LOGICAL
    /// VOLUME LIST (02h), PARTITION LIST (03h) and SUPPORTED ATTRIBUTES (05h). An absent
    /// FIRST ATTRIBUTE IDENTIFIER is INVALID FIELD IN CDB, as LTO drives answer (LTFS relies
    /// on it to learn that an attribute is not set).
    pub(crate) fn read_attribute(&mut self, cdb: &Cdb<'_>) -> Reply {
        let action = cdb.byte(1) & 0x1F;
        if !matches!(action, 0x00..=0x03 | 0x05) {
            return Err(Sense::invalid_field_in_cdb(1, Some(4)));
        }
        if cdb.byte(5) != 0 {
            return Err(Sense::invalid_field_in_cdb(5, Some(7)));
        }
        let partition = cdb.byte(7);
        let first = cdb.be16(8);
        let allocation = usize::try_from(cdb.be32(10)).unwrap_or(usize::MAX);
        let cartridge = self.present_cartridge()?;
        let count = u8::try_from(cartridge.partition_count()).unwrap_or(u8::MAX);
        if matches!(action, 0x00 | 0x01) && partition >= count {
            return Err(Sense::invalid_field_in_cdb(7, Some(7)));
        }
        let mut data = match action {
            0x00 => {
                let all = visible(cartridge, partition)?;
                if !all.iter().any(|a| a.id == first) {
                    return Err(Sense::invalid_field_in_cdb(8, Some(7)));
                }
                let mut body = Vec::new();
                for a in all.iter().filter(|a| a.id >= first) {
                    encode(a, &mut body);
                }
                with_length_header(body)
            }
            0x01 => {
                let body = visible(cartridge, partition)?
                    .iter()
                    .flat_map(|a| a.id.to_be_bytes())
                    .collect();
                with_length_header(body)
            }
            // Two-byte AVAILABLE DATA, then first and number of volumes / partitions.
            0x02 => vec![0, 2, 0, 1],
            0x03 => vec![0, 2, 0, count],
            _ => {
                let body = STANDARD_ATTRIBUTES
                    .iter()
                    .flat_map(|d| d.id.to_be_bytes())
                    .collect();
                with_length_header(body)
            }
        };
        data.truncate(allocation);
        Ok(Response::good(Bytes::from(data)))
    }

    /// WRITE ATTRIBUTE: every attribute of the list is checked (identifier, format, length,
    /// space) before any is written; an empty value deletes the attribute. The saver runs
    /// after the change.
    pub(crate) fn write_attribute(&mut self, cdb: &Cdb<'_>, data_out: &Bytes) -> Reply {
        if cdb.byte(5) != 0 {
            return Err(Sense::invalid_field_in_cdb(5, Some(7)));
        }
        let partition = cdb.byte(7);
        let length = usize::try_from(cdb.be32(10)).unwrap_or(usize::MAX);
        let cartridge = self.present_cartridge()?;
        if usize::from(partition) >= cartridge.partition_count() {
            return Err(Sense::invalid_field_in_cdb(7, Some(7)));
        }
        if length == 0 {
            return Ok(Response::good_empty());
        }
        let list = data_out
            .get(..length)
            .ok_or_else(Sense::parameter_list_length_error)?;
        let writes = parse_attributes(list, partition)?;
        // Space is checked on a copy so that a full MAM changes nothing.
        let mut trial: Mam = cartridge.mam().clone();
        for (stored, format, value) in &writes {
            trial
                .write(*stored, *format, value)
                .map_err(|e| errors::media(&MediaError::<Infallible>::Mam(e), Op::Write, 0))?;
        }
        for (stored, format, value) in &writes {
            cartridge
                .write_attribute(*stored, *format, value)
                .map_err(|e| errors::media(&e, Op::Write, 0))?;
        }
        self.save()?;
        Ok(Response::good_empty())
    }
}

/// Parses a WRITE ATTRIBUTE parameter list (SPC-4 §6.36): 4-byte PARAMETER DATA LENGTH, then
/// attributes (identifier, format, length, value). Returns (stored identifier, format, value).
fn parse_attributes(
    list: &[u8],
    partition: u8,
) -> Result<Vec<(u16, AttributeFormat, Vec<u8>)>, Sense> {
    let at = |i: usize| list.get(i).copied().unwrap_or(0);
    if list.len() < 4 {
        return Err(Sense::parameter_list_length_error());
    }
    // SPC-4 §6.36: the PARAMETER DATA LENGTH "shall be ignored by the device server"; the
    // attributes run to the end of the CDB's parameter list. (LTFS counts the 4-byte header in
    // it, other clients do not: both must work.)
    let end = list.len();
    let pointer = |i: usize, bit| {
        Sense::invalid_field_in_parameter_list(u16::try_from(i).unwrap_or(u16::MAX), bit)
    };
    let mut out = Vec::new();
    let mut offset = 4;
    while offset < end {
        if offset + 5 > end {
            return Err(Sense::parameter_list_length_error());
        }
        let id = u16::from_be_bytes([at(offset), at(offset + 1)]);
        let len = usize::from(u16::from_be_bytes([at(offset + 3), at(offset + 4)]));
        let value = list
            .get(offset + 5..offset + 5 + len)
            .filter(|_| offset + 5 + len <= end)
            .ok_or_else(Sense::parameter_list_length_error)?;
        let format = AttributeFormat::from_code(at(offset + 2) & 0x03)
            .ok_or(pointer(offset + 2, Some(1)))?;
        if HIDDEN.contains(&id) {
            return Err(pointer(offset, Some(7)));
        }
        Mam::validate_write(id, format, value).map_err(|_| pointer(offset, Some(7)))?;
        out.push((stored_id(id, partition), format, value.to_vec()));
        offset += 5 + len;
    }
    Ok(out)
}
