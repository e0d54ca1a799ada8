//! The log page framework (SPC-4 §7.3): LOG SENSE data assembly and the supported pages
//! lists (page 00h, subpage 00h and FFh).

use crate::sense::Sense;

/// The PC field of LOG SENSE / LOG SELECT (SPC-4 §6.8, table 98).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPageControl {
    ThresholdCurrent,
    CumulativeCurrent,
    ThresholdDefault,
    CumulativeDefault,
}

impl LogPageControl {
    pub(crate) fn from_bits(pc: u8) -> Self {
        match pc & 3 {
            0 => Self::ThresholdCurrent,
            1 => Self::CumulativeCurrent,
            2 => Self::ThresholdDefault,
            _ => Self::CumulativeDefault,
        }
    }
}

/// One log parameter (SPC-4 §7.3.2.2): code, the control byte (DU, TSD, ETC, TMC, FORMAT AND
/// LINKING) and the value bytes (at most 255).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogParameter {
    pub code: u16,
    pub control: u8,
    pub value: Vec<u8>,
}

impl LogParameter {
    /// A binary-format counter parameter (FORMAT AND LINKING = 11b, SPC-4 §7.3.2.2.2.6).
    pub fn counter(code: u16, value: u64, width: usize) -> Self {
        let bytes = value.to_be_bytes();
        let width = width.clamp(1, 8);
        Self {
            code,
            control: 0x03,
            value: bytes[8 - width..].to_vec(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let value = &self.value[..self.value.len().min(255)];
        out.extend_from_slice(&self.code.to_be_bytes());
        out.push(self.control);
        out.push(value.len() as u8);
        out.extend_from_slice(value);
    }
}

/// A log page with its header (SPC-4 §7.3.2.1): DS = 0, SPF set for a subpage.
pub(crate) fn encode_page(page: u8, subpage: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.push(if subpage != 0 { 0x40 } else { 0 } | (page & 0x3F));
    out.push(subpage);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The parameters of a page from `parameter_pointer` on (SPC-4 §6.8: parameters with a code
/// at least the pointer), or INVALID FIELD IN CDB at the PARAMETER POINTER when it is beyond
/// the largest code.
pub(crate) fn encode_parameters(
    parameters: &[LogParameter],
    parameter_pointer: u16,
) -> Result<Vec<u8>, Sense> {
    let largest = parameters.iter().map(|p| p.code).max().unwrap_or(0);
    if parameter_pointer > largest {
        return Err(Sense::invalid_field_in_cdb(5, Some(7)));
    }
    let mut out = Vec::new();
    for parameter in parameters.iter().filter(|p| p.code >= parameter_pointer) {
        parameter.encode(&mut out);
    }
    Ok(out)
}

/// Page 00h subpage 00h, "Supported Log Pages" (SPC-4 §7.3.18): `pages` are (page, subpage)
/// pairs; the list holds page 00h and the distinct page codes.
pub(crate) fn supported_pages(pages: &[(u8, u8)]) -> Vec<u8> {
    let mut codes: Vec<u8> = pages.iter().map(|&(p, _)| p & 0x3F).collect();
    codes.push(0);
    codes.sort_unstable();
    codes.dedup();
    encode_page(0, 0, &codes)
}

/// Page 00h subpage FFh, "Supported Log Pages and Subpages" (SPC-4 §7.3.19).
pub(crate) fn supported_pages_and_subpages(pages: &[(u8, u8)]) -> Vec<u8> {
    let mut pairs: Vec<(u8, u8)> = pages.iter().map(|&(p, s)| (p & 0x3F, s)).collect();
    pairs.extend([(0, 0), (0, 0xFF)]);
    pairs.sort_unstable();
    pairs.dedup();
    let body: Vec<u8> = pairs.iter().flat_map(|&(p, s)| [p, s]).collect();
    encode_page(0, 0xFF, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_lists() {
        let pages = [(0x2E, 0), (0x11, 0), (0x11, 1)];
        assert_eq!(supported_pages(&pages), [0, 0, 0, 3, 0, 0x11, 0x2E]);
        assert_eq!(
            supported_pages_and_subpages(&pages),
            [0x40, 0xFF, 0, 10, 0, 0, 0, 0xFF, 0x11, 0, 0x11, 1, 0x2E, 0]
        );
    }

    #[test]
    fn parameter_pointer() {
        let params = [
            LogParameter::counter(1, 5, 2),
            LogParameter::counter(3, 7, 4),
        ];
        assert_eq!(encode_parameters(&params, 0).unwrap().len(), 6 + 8);
        assert_eq!(
            encode_parameters(&params, 2).unwrap(),
            [0, 3, 3, 4, 0, 0, 0, 7]
        );
        assert_eq!(
            encode_parameters(&params, 4),
            Err(Sense::invalid_field_in_cdb(5, Some(7)))
        );
    }
}
