//! The mode parameter framework (SPC-4 §7.5): MODE SENSE data assembly and MODE SELECT
//! parameter list parsing and validation against the changeable masks.

use crate::sense::{Asc, Sense};

/// The PC field of MODE SENSE (SPC-4 §6.11, table 100).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModePageControl {
    Current,
    Changeable,
    Default,
    Saved,
}

impl ModePageControl {
    pub(crate) fn from_bits(pc: u8) -> Self {
        match pc & 3 {
            0 => Self::Current,
            1 => Self::Changeable,
            2 => Self::Default,
            _ => Self::Saved,
        }
    }
}

/// One mode page or subpage (SPC-4 §7.5.7). The value vectors hold the page parameters only
/// (the bytes after the 2-byte page_0 or 4-byte sub_page header) and have the same length.
/// Saved values are not supported (PC = 11b gives SAVING PARAMETERS NOT SUPPORTED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModePage {
    pub page: u8,
    /// 0 for a page_0 format page, otherwise the subpage code (sub_page format).
    pub subpage: u8,
    pub current: Vec<u8>,
    /// Bits set here may be changed by MODE SELECT.
    pub changeable: Vec<u8>,
    pub default: Vec<u8>,
    /// `None`: MODE SELECT must send the whole page. `Some(n)`: a page of at least `n`
    /// parameter bytes is accepted, the missing tail being zero (variable-length pages such
    /// as SSC-4's medium partition page, whose partition size descriptors an initiator sends
    /// only as far as it needs).
    pub min_select_len: Option<usize>,
}

impl ModePage {
    /// A page whose current and default values are `values`, with nothing changeable.
    pub fn fixed(page: u8, subpage: u8, values: Vec<u8>) -> Self {
        Self {
            page,
            subpage,
            changeable: vec![0; values.len()],
            default: values.clone(),
            current: values,
            min_select_len: None,
        }
    }

    /// Sets the changeable mask.
    pub fn with_changeable(mut self, changeable: Vec<u8>) -> Self {
        self.changeable = changeable;
        self
    }

    fn header_len(&self) -> usize {
        if self.subpage == 0 { 2 } else { 4 }
    }

    /// The page with its header, for `pc` (not `Saved`).
    pub(crate) fn encode(&self, pc: ModePageControl, out: &mut Vec<u8>) {
        let values = match pc {
            ModePageControl::Changeable => &self.changeable,
            ModePageControl::Default => &self.default,
            ModePageControl::Current | ModePageControl::Saved => &self.current,
        };
        if self.subpage == 0 {
            out.push(self.page & 0x3F);
            out.push(u8::try_from(values.len()).unwrap_or(u8::MAX));
        } else {
            out.push(0x40 | (self.page & 0x3F)); // SPF
            out.push(self.subpage);
            out.extend_from_slice(
                &u16::try_from(values.len())
                    .unwrap_or(u16::MAX)
                    .to_be_bytes(),
            );
        }
        out.extend_from_slice(values);
    }
}

/// A mode parameter block descriptor (SPC-4 §7.5.5). Direct-access devices (peripheral type
/// 00h) use the SBC-3 §6.4.4 short LBA layout (no density code, 32-bit block count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockDescriptor {
    pub density: u8,
    pub blocks: u64,
    pub block_length: u32,
}

impl BlockDescriptor {
    pub(crate) fn encode(&self, long: bool, direct_access: bool, out: &mut Vec<u8>) {
        if long {
            // SBC-3 §6.4.4.3 long LBA: blocks (8), reserved (4), block length (4).
            out.extend_from_slice(&self.blocks.to_be_bytes());
            out.extend_from_slice(&[self.density, 0, 0, 0]);
            out.extend_from_slice(&self.block_length.to_be_bytes());
        } else if direct_access {
            let blocks = u32::try_from(self.blocks).unwrap_or(u32::MAX);
            out.extend_from_slice(&blocks.to_be_bytes());
            out.push(0);
            out.extend_from_slice(&be24(self.block_length));
        } else {
            out.push(self.density);
            out.extend_from_slice(&be24(
                u32::try_from(self.blocks.min(0xFF_FFFF)).unwrap_or(0),
            ));
            out.push(0);
            out.extend_from_slice(&be24(self.block_length));
        }
    }

    fn decode(bytes: &[u8], long: bool, direct_access: bool) -> Self {
        let be = |r: std::ops::Range<usize>| {
            r.fold(0u64, |a, i| {
                (a << 8) | u64::from(bytes.get(i).copied().unwrap_or(0))
            })
        };
        if long {
            Self {
                blocks: be(0..8),
                density: bytes.get(8).copied().unwrap_or(0),
                block_length: be(12..16) as u32,
            }
        } else if direct_access {
            Self {
                density: 0,
                blocks: be(0..4),
                block_length: be(5..8) as u32,
            }
        } else {
            Self {
                density: bytes.first().copied().unwrap_or(0),
                blocks: be(1..4),
                block_length: be(5..8) as u32,
            }
        }
    }
}

fn be24(v: u32) -> [u8; 3] {
    let [_, a, b, c] = v.min(0xFF_FFFF).to_be_bytes();
    [a, b, c]
}

/// A validated MODE SELECT parameter list, handed to the personality.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModeSelectParams {
    /// MEDIUM TYPE of the mode parameter header.
    pub medium_type: u8,
    /// DEVICE-SPECIFIC PARAMETER of the header (buffered mode and speed for tape).
    pub device_specific: u8,
    pub block_descriptors: Vec<BlockDescriptor>,
    /// New page parameters (after the page header) with their page and subpage codes; only
    /// changeable bits differ from the current values.
    pub pages: Vec<(u8, u8, Vec<u8>)>,
}

/// Parses a MODE SELECT parameter list (SPC-4 §7.5.2 - §7.5.4) and checks every page against
/// `pages`: unknown pages, wrong lengths and changes of non-changeable bits are INVALID FIELD
/// IN PARAMETER LIST with a field pointer (C/D = 0); truncation is PARAMETER LIST LENGTH ERROR.
pub(crate) fn parse_mode_select(
    list: &[u8],
    ten: bool,
    direct_access: bool,
    pages: &[ModePage],
) -> Result<ModeSelectParams, Sense> {
    let header_len = if ten { 8 } else { 4 };
    if list.len() < header_len {
        return Err(Sense::parameter_list_length_error());
    }
    let at = |i: usize| list.get(i).copied().unwrap_or(0);
    let (medium_type, device_specific, long, bd_len) = if ten {
        (
            at(2),
            at(3),
            at(4) & 1 != 0,
            usize::from(u16::from_be_bytes([at(6), at(7)])),
        )
    } else {
        (at(1), at(2), false, usize::from(at(3)))
    };
    let bd_size = if long { 16 } else { 8 };
    if bd_len % bd_size != 0 {
        let byte = if ten { 7 } else { 3 };
        return Err(Sense::invalid_field_in_parameter_list(byte, None));
    }
    let pages_at = header_len + bd_len;
    let Some(descriptors) = list.get(header_len..pages_at) else {
        return Err(Sense::parameter_list_length_error());
    };
    let block_descriptors = descriptors
        .chunks_exact(bd_size)
        .map(|d| BlockDescriptor::decode(d, long, direct_access))
        .collect();
    let mut params = ModeSelectParams {
        medium_type,
        device_specific,
        block_descriptors,
        pages: Vec::new(),
    };
    let mut offset = pages_at;
    while offset < list.len() {
        let b0 = at(offset);
        let spf = b0 & 0x40 != 0;
        let page = b0 & 0x3F;
        let (subpage, len, header) = if spf {
            (
                at(offset + 1),
                usize::from(u16::from_be_bytes([at(offset + 2), at(offset + 3)])),
                4,
            )
        } else {
            (0, usize::from(at(offset + 1)), 2)
        };
        let Some(values) = list.get(offset + header..offset + header + len) else {
            return Err(Sense::parameter_list_length_error());
        };
        let pointer = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
        let Some(known) = pages
            .iter()
            .find(|p| p.page == page && p.subpage == subpage && (p.subpage != 0) == spf)
        else {
            return Err(Sense::invalid_field_in_parameter_list(
                pointer(offset),
                Some(5),
            ));
        };
        // A variable-length page sent short is the same page with the missing tail zero
        // (e.g. Linux st sends two partition size descriptors where the drive reports four).
        let padded;
        let values = if len < known.current.len() && known.min_select_len.is_some_and(|m| len >= m)
        {
            padded = [values, &vec![0u8; known.current.len() - len][..]].concat();
            &padded[..]
        } else if len != known.current.len() {
            let at = offset + if spf { 2 } else { 1 };
            return Err(Sense::invalid_field_in_parameter_list(pointer(at), Some(7)));
        } else {
            values
        };
        for (i, ((&new, &current), &mask)) in values
            .iter()
            .zip(&known.current)
            .zip(&known.changeable)
            .enumerate()
        {
            let bad = (new ^ current) & !mask;
            if bad != 0 {
                let bit = 7 - bad.leading_zeros() as u8;
                return Err(Sense::invalid_field_in_parameter_list(
                    pointer(offset + known.header_len() + i),
                    Some(bit),
                ));
            }
        }
        params.pages.push((page, subpage, values.to_vec()));
        offset += header + len;
    }
    Ok(params)
}

/// Selects the pages a MODE SENSE for `page`/`subpage` returns (SPC-4 §6.11: 3Fh = all pages,
/// subpage FFh = all subpages), or INVALID FIELD IN CDB at the PAGE CODE / SUBPAGE CODE.
pub(crate) fn select_pages(
    pages: &[ModePage],
    page: u8,
    subpage: u8,
) -> Result<Vec<&ModePage>, Sense> {
    let selected: Vec<&ModePage> = pages
        .iter()
        .filter(|p| {
            let page_matches = page == 0x3F || p.page == page;
            let subpage_matches = subpage == 0xFF || p.subpage == subpage;
            page_matches && subpage_matches
        })
        .collect();
    if selected.is_empty() {
        let page_known = page == 0x3F || pages.iter().any(|p| p.page == page);
        return Err(if page_known {
            Sense::invalid_field_in_cdb(3, Some(7))
        } else {
            Sense::invalid_field_in_cdb(2, Some(5))
        });
    }
    Ok(selected)
}

/// The control mode page (SPC-4 §7.5.8, page 0Ah), owned by the core. Only D_SENSE is
/// changeable. TST = 000b (one task set), QUEUE ALGORITHM MODIFIER = 1 (unrestricted
/// reordering allowed), TAS = 0.
pub(crate) fn control_page(d_sense: bool) -> ModePage {
    let mut current = vec![0u8; 10];
    current[0] = u8::from(d_sense) << 2;
    current[1] = 0x10;
    let mut default = current.clone();
    default[0] = 0;
    let mut changeable = vec![0u8; 10];
    changeable[0] = 0x04;
    ModePage {
        page: 0x0A,
        subpage: 0,
        current,
        changeable,
        default,
        min_select_len: None,
    }
}

/// SAVING PARAMETERS NOT SUPPORTED (SPC-4 §6.11: PC = 11b and MODE SELECT SP = 1).
pub(crate) fn saving_not_supported() -> Sense {
    Sense::illegal_request(Asc::SAVING_PARAMETERS_NOT_SUPPORTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages() -> Vec<ModePage> {
        vec![
            control_page(false),
            ModePage::fixed(0x10, 1, vec![1, 2, 3]).with_changeable(vec![0, 0xFF, 0]),
        ]
    }

    #[test]
    fn encodes_both_page_formats() {
        let mut out = Vec::new();
        pages()[0].encode(ModePageControl::Changeable, &mut out);
        assert_eq!(out, [0x0A, 10, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.clear();
        pages()[1].encode(ModePageControl::Current, &mut out);
        assert_eq!(out, [0x50, 1, 0, 3, 1, 2, 3]);
    }

    #[test]
    fn select_validates_changeable_bits() {
        let list = [0, 0, 0, 0, 0x0A, 10, 0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0];
        let params = parse_mode_select(&list, false, false, &pages()).unwrap();
        assert_eq!(params.pages[0].2[0], 0x04);
        let mut bad = list;
        bad[7] = 0x30; // QUEUE ALGORITHM MODIFIER is not changeable
        assert_eq!(
            parse_mode_select(&bad, false, false, &pages()),
            Err(Sense::invalid_field_in_parameter_list(7, Some(5)))
        );
        let sub = [0, 0, 0, 0, 0x50, 1, 0, 3, 1, 9, 3];
        assert!(parse_mode_select(&sub, false, false, &pages()).is_ok());
        let sub_bad = [0, 0, 0, 0, 0x50, 1, 0, 3, 1, 9, 4];
        assert_eq!(
            parse_mode_select(&sub_bad, false, false, &pages()),
            Err(Sense::invalid_field_in_parameter_list(10, Some(2)))
        );
    }

    #[test]
    fn select_structure_errors() {
        assert_eq!(
            parse_mode_select(&[0, 0, 0], false, false, &pages()),
            Err(Sense::parameter_list_length_error())
        );
        assert_eq!(
            parse_mode_select(&[0, 0, 0, 0, 0x0A, 10, 0], false, false, &pages()),
            Err(Sense::parameter_list_length_error())
        );
        assert_eq!(
            parse_mode_select(&[0, 0, 0, 0, 0x0B, 0], false, false, &pages()),
            Err(Sense::invalid_field_in_parameter_list(4, Some(5)))
        );
        assert_eq!(
            parse_mode_select(&[0, 0, 0, 0, 0x0A, 1, 0], false, false, &pages()),
            Err(Sense::invalid_field_in_parameter_list(5, Some(7)))
        );
        // One general block descriptor: density 0x5A, block length 512.
        let list = [0, 0, 0x10, 8, 0x5A, 0, 0, 0, 0, 0, 2, 0];
        let params = parse_mode_select(&list, false, false, &pages()).unwrap();
        assert_eq!(params.device_specific, 0x10);
        assert_eq!(
            params.block_descriptors,
            [BlockDescriptor {
                density: 0x5A,
                blocks: 0,
                block_length: 512
            }]
        );
    }

    #[test]
    fn page_selection() {
        let p = pages();
        assert_eq!(select_pages(&p, 0x3F, 0).unwrap().len(), 1);
        assert_eq!(select_pages(&p, 0x3F, 0xFF).unwrap().len(), 2);
        assert_eq!(select_pages(&p, 0x10, 0xFF).unwrap().len(), 1);
        assert_eq!(
            select_pages(&p, 0x11, 0),
            Err(Sense::invalid_field_in_cdb(2, Some(5)))
        );
        assert_eq!(
            select_pages(&p, 0x10, 2),
            Err(Sense::invalid_field_in_cdb(3, Some(7)))
        );
    }
}
