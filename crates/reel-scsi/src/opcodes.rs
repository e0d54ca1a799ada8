//! REPORT SUPPORTED OPERATION CODES (SPC-4 §6.35): the descriptors of the core's commands and
//! the encoding of the all-commands and one-command parameter data.

use crate::cdb::has_service_action;
use crate::sense::Sense;

/// One supported command for REPORT SUPPORTED OPERATION CODES. `usage` is the CDB USAGE DATA
/// (SPC-4 §6.35.3): byte 0 the operation code, the SERVICE ACTION bits hold its value, every
/// other byte a mask of the bits the device server looks at; its length is the CDB length.
/// Timeouts are in seconds (0 = not specified; SPC-4 §6.35.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpcodeDescriptor {
    pub opcode: u8,
    pub service_action: Option<u16>,
    pub usage: Vec<u8>,
    pub nominal_timeout: u32,
    pub recommended_timeout: u32,
}

impl OpcodeDescriptor {
    /// A descriptor with no service action and the default timeouts (0, 30 s).
    pub fn new(usage: &[u8]) -> Self {
        Self {
            opcode: usage.first().copied().unwrap_or(0),
            service_action: None,
            usage: usage.to_vec(),
            nominal_timeout: 0,
            recommended_timeout: 30,
        }
    }

    /// A descriptor for a service action (taken from byte 1 of `usage`, bits 4:0).
    pub fn with_service_action(usage: &[u8]) -> Self {
        let mut d = Self::new(usage);
        d.service_action = Some(u16::from(usage.get(1).copied().unwrap_or(0) & 0x1F));
        d
    }

    /// Sets the timeouts in seconds.
    pub fn with_timeouts(mut self, nominal: u32, recommended: u32) -> Self {
        self.nominal_timeout = nominal;
        self.recommended_timeout = recommended;
        self
    }

    fn timeouts(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0x00, 0x0A, 0, 0]);
        out.extend_from_slice(&self.nominal_timeout.to_be_bytes());
        out.extend_from_slice(&self.recommended_timeout.to_be_bytes());
    }
}

/// The commands [`crate::ScsiDevice`] executes itself.
pub(crate) fn core_descriptors() -> Vec<OpcodeDescriptor> {
    let mut all = vec![
        OpcodeDescriptor::new(&[0x00, 0, 0, 0, 0, 0]), // TEST UNIT READY
        OpcodeDescriptor::new(&[0x03, 0x01, 0, 0, 0xFF, 0]), // REQUEST SENSE
        OpcodeDescriptor::new(&[0x12, 0x01, 0xFF, 0xFF, 0xFF, 0]), // INQUIRY
        OpcodeDescriptor::new(&[0x15, 0x11, 0, 0, 0xFF, 0]), // MODE SELECT(6)
        OpcodeDescriptor::new(&[0x16, 0, 0, 0, 0, 0]), // RESERVE(6)
        OpcodeDescriptor::new(&[0x17, 0, 0, 0, 0, 0]), // RELEASE(6)
        OpcodeDescriptor::new(&[0x1A, 0x08, 0xFF, 0xFF, 0xFF, 0]), // MODE SENSE(6)
        OpcodeDescriptor::new(&[0x4C, 0x03, 0xFF, 0xFF, 0, 0, 0, 0xFF, 0xFF, 0]), // LOG SELECT
        OpcodeDescriptor::new(&[0x4D, 0x03, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0]), // LOG SENSE
        OpcodeDescriptor::new(&[0x55, 0x11, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0]), // MODE SELECT(10)
        OpcodeDescriptor::new(&[0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0]), // RESERVE(10)
        OpcodeDescriptor::new(&[0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0]), // RELEASE(10)
        OpcodeDescriptor::new(&[0x5A, 0x18, 0xFF, 0xFF, 0, 0, 0, 0xFF, 0xFF, 0]), // MODE SENSE(10)
        OpcodeDescriptor::new(&[0xA0, 0, 0xFF, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0]), // REPORT LUNS
        // REPORT SUPPORTED OPERATION CODES, REPORT TIMESTAMP, SET TIMESTAMP.
        OpcodeDescriptor::with_service_action(&[
            0xA3, 0x0C, 0x87, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
        ]),
        OpcodeDescriptor::with_service_action(&[
            0xA3, 0x0F, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
        ]),
        OpcodeDescriptor::with_service_action(&[
            0xA4, 0x0F, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
        ]),
    ];
    for sa in 0..=3 {
        all.push(OpcodeDescriptor::with_service_action(&[
            0x5E, sa, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0,
        ]));
    }
    for sa in 0..=6 {
        all.push(OpcodeDescriptor::with_service_action(&[
            0x5F, sa, 0xFF, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0,
        ]));
    }
    all
}

/// All-commands parameter data (SPC-4 §6.35.2, reporting options 000b).
pub(crate) fn report_all(descriptors: &[OpcodeDescriptor], rctd: bool) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    for d in descriptors {
        out.push(d.opcode);
        out.push(0);
        out.extend_from_slice(&d.service_action.unwrap_or(0).to_be_bytes());
        out.push(0);
        out.push(u8::from(rctd) << 1 | u8::from(d.service_action.is_some()));
        out.extend_from_slice(&u16::try_from(d.usage.len()).unwrap_or(0).to_be_bytes());
        if rctd {
            d.timeouts(&mut out);
        }
    }
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// One-command parameter data (SPC-4 §6.35.3, reporting options 001b, 010b, 011b). An
/// operation code that needs a service action under 001b, or has none under 010b, is INVALID
/// FIELD IN CDB at REPORTING OPTIONS.
pub(crate) fn report_one(
    descriptors: &[OpcodeDescriptor],
    reporting_options: u8,
    opcode: u8,
    service_action: u16,
    rctd: bool,
) -> Result<Vec<u8>, Sense> {
    let with_sa = has_service_action(opcode)
        || descriptors
            .iter()
            .any(|d| d.opcode == opcode && d.service_action.is_some());
    let wrong_form = match reporting_options {
        1 => with_sa,
        2 => !with_sa,
        _ => false,
    };
    if wrong_form {
        return Err(Sense::invalid_field_in_cdb(2, Some(2)));
    }
    let found = descriptors
        .iter()
        .find(|d| d.opcode == opcode && (!with_sa || d.service_action == Some(service_action)));
    let Some(d) = found else {
        return Ok(vec![0, 0x01, 0, 0]); // SUPPORT = 001b: not supported
    };
    let mut out = vec![0, u8::from(rctd) << 7 | 0x03]; // CTDP, SUPPORT = 011b
    out.extend_from_slice(&u16::try_from(d.usage.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&d.usage);
    if rctd {
        d.timeouts(&mut out);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_command_forms() {
        let d = core_descriptors();
        assert_eq!(
            report_one(&d, 1, 0x12, 0, false).unwrap(),
            [0, 3, 0, 6, 0x12, 1, 0xFF, 0xFF, 0xFF, 0]
        );
        assert_eq!(
            report_one(&d, 1, 0xA3, 0, false),
            Err(Sense::invalid_field_in_cdb(2, Some(2)))
        );
        assert_eq!(
            report_one(&d, 2, 0x12, 0, false),
            Err(Sense::invalid_field_in_cdb(2, Some(2)))
        );
        assert_eq!(report_one(&d, 2, 0xA3, 0x1F, false).unwrap(), [0, 1, 0, 0]);
        let rsoc = report_one(&d, 2, 0xA3, 0x0C, true).unwrap();
        assert_eq!(&rsoc[..4], &[0, 0x83, 0, 12]);
        assert_eq!(rsoc.len(), 4 + 12 + 12);
        assert_eq!(report_one(&d, 3, 0x00, 0x55, false).unwrap()[1], 3);
    }

    #[test]
    fn all_commands_layout() {
        let d = vec![OpcodeDescriptor::new(&[0x00, 0, 0, 0, 0, 0])];
        assert_eq!(report_all(&d, false), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 6]);
        assert_eq!(report_all(&d, true).len(), 4 + 20);
    }
}
