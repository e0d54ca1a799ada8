//! INQUIRY data (SPC-4 §6.6): standard data and the VPD pages the core provides (00h, 80h,
//! 83h, 86h); personalities add their own VPD pages.

use crate::ItNexus;
use crate::device::Identity;
use crate::sense::Sense;

/// Version descriptors every reel logical unit claims (SPC-4 §6.6.2, table 144): SAM-5
/// (00A0h) and SPC-4 (0460h).
const CORE_VERSION_DESCRIPTORS: [u16; 2] = [0x00A0, 0x0460];

/// Length of the standard INQUIRY data: through the version descriptors plus reserved bytes.
const STANDARD_LEN: usize = 96;

/// Standard INQUIRY data (SPC-4 §6.6.2, table 142), 96 bytes.
pub(crate) fn standard(identity: &Identity) -> Vec<u8> {
    let mut out = vec![0u8; STANDARD_LEN];
    out[0] = identity.peripheral_type & 0x1F; // PERIPHERAL QUALIFIER 000b
    out[1] = u8::from(identity.removable) << 7;
    out[2] = 0x06; // VERSION: SPC-4
    out[3] = 0x10 | 0x02; // HISUP = 1, RESPONSE DATA FORMAT = 2
    out[4] = (STANDARD_LEN - 5) as u8; // ADDITIONAL LENGTH
    out[6] = u8::from(identity.medium_changer) << 3; // MCHNGR (obsolete in SPC-4; mtx reads it)
    out[7] = 0x02; // CMDQUE
    out[8..16].copy_from_slice(&identity.vendor);
    out[16..32].copy_from_slice(&identity.product);
    out[32..36].copy_from_slice(&identity.revision);
    out[36..56].fill(b' '); // vendor specific
    let descriptors = CORE_VERSION_DESCRIPTORS
        .iter()
        .chain(&identity.version_descriptors)
        .take(8);
    for (i, d) in descriptors.enumerate() {
        out[58 + 2 * i..60 + 2 * i].copy_from_slice(&d.to_be_bytes());
    }
    out
}

/// Standard INQUIRY data for a LUN with no logical unit (SPC-4 §6.6.2: PERIPHERAL QUALIFIER
/// 011b, PERIPHERAL DEVICE TYPE 1Fh), 36 bytes.
pub(crate) fn absent() -> Vec<u8> {
    let mut out = vec![0u8; 36];
    out[0] = 0x7F;
    out[2] = 0x06;
    out[3] = 0x12;
    out[4] = 31;
    out
}

/// The VPD pages the core provides.
pub(crate) const CORE_VPD_PAGES: [u8; 4] = [0x00, 0x80, 0x83, 0x86];

/// A VPD page (SPC-4 §7.8). `extra` are the personality's page codes, `page_body` yields the
/// personality's page contents after the 4-byte header. An unsupported page is INVALID FIELD IN
/// CDB at the PAGE CODE.
pub(crate) fn vpd(
    identity: &Identity,
    page: u8,
    nexus: &ItNexus,
    extra: &[u8],
    page_body: impl FnOnce(u8) -> Option<Vec<u8>>,
) -> Result<Vec<u8>, Sense> {
    let body = match page {
        // Supported VPD pages (SPC-4 §7.8.13).
        0x00 => {
            let mut pages: Vec<u8> = CORE_VPD_PAGES.iter().chain(extra).copied().collect();
            pages.sort_unstable();
            pages.dedup();
            pages
        }
        // Unit Serial Number (SPC-4 §7.8.14).
        0x80 => identity.serial.as_bytes().to_vec(),
        0x83 => device_identification(identity, nexus),
        0x86 => extended_inquiry(),
        _ if extra.contains(&page) => {
            page_body(page).ok_or(Sense::invalid_field_in_cdb(2, Some(7)))?
        }
        _ => return Err(Sense::invalid_field_in_cdb(2, Some(7))),
    };
    let mut out = Vec::with_capacity(4 + body.len());
    out.push(identity.peripheral_type & 0x1F);
    out.push(page);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Device Identification VPD page body (SPC-4 §7.8.6): the NAA designator of the logical unit,
/// a T10 vendor ID designator (vendor + product + serial) and the relative target port
/// (designator type 4) of the nexus. Transport-specific designators (such as the iSCSI name)
/// are not the core's business.
fn device_identification(identity: &Identity, nexus: &ItNexus) -> Vec<u8> {
    let mut out = Vec::new();
    // NAA (type 3), binary code set, associated with the logical unit.
    let mut naa = identity.naa.to_be_bytes().to_vec();
    if let Some(extension) = identity.naa_extension {
        naa.extend_from_slice(&extension.to_be_bytes());
    }
    designator(&mut out, 0x01, 0x03, &naa);
    // T10 vendor ID (type 1), ASCII code set.
    let mut t10 = identity.vendor.to_vec();
    t10.extend_from_slice(&identity.product);
    t10.extend_from_slice(identity.serial.as_bytes());
    designator(&mut out, 0x02, 0x01, &t10);
    // Relative target port (type 4), associated with the target port (ASSOCIATION 01b).
    let [hi, lo] = nexus.target_port.to_be_bytes();
    designator(&mut out, 0x01, 0x10 | 0x04, &[0, 0, hi, lo]);
    out
}

fn designator(out: &mut Vec<u8>, code_set: u8, association_and_type: u8, value: &[u8]) {
    let value = &value[..value.len().min(255)];
    out.extend_from_slice(&[code_set, association_and_type, 0, value.len() as u8]);
    out.extend_from_slice(value);
}

/// Extended INQUIRY Data VPD page body (SPC-4 §7.8.7), 60 bytes: HEADSUP, ORDSUP and SIMPSUP
/// (task attributes are accepted and ordered by the transport), LUICLR = 1.
fn extended_inquiry() -> Vec<u8> {
    let mut body = vec![0u8; 0x3C];
    body[1] = 0x07;
    body[3] = 0x01;
    body
}

/// Truncates parameter data to the allocation length (SPC-4 §4.2.5.6): fields that describe
/// the full length keep their values.
pub(crate) fn truncate(mut data: Vec<u8>, allocation_length: usize) -> Vec<u8> {
    data.truncate(allocation_length);
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity::new(
            0x01,
            "REEL",
            "VTAPE",
            "0100",
            "SN123",
            0x5000_0000_0000_0001,
        )
    }

    #[test]
    fn standard_layout() {
        let data = standard(&identity());
        assert_eq!(&data[..8], &[0x01, 0x00, 0x06, 0x12, 91, 0, 0, 0x02]);
        assert_eq!(&data[8..16], b"REEL    ");
        assert_eq!(&data[16..32], b"VTAPE           ");
        assert_eq!(&data[32..36], b"0100");
        assert_eq!(&data[58..62], &[0x00, 0xA0, 0x04, 0x60]);
    }

    #[test]
    fn vpd_pages() {
        let nexus = ItNexus::new("i", 2);
        let id = identity();
        assert_eq!(
            vpd(&id, 0, &nexus, &[0xB0], |_| None).unwrap(),
            [0x01, 0x00, 0, 5, 0x00, 0x80, 0x83, 0x86, 0xB0]
        );
        assert_eq!(
            vpd(&id, 0x80, &nexus, &[], |_| None).unwrap(),
            b"\x01\x80\x00\x05SN123"
        );
        let di = vpd(&id, 0x83, &nexus, &[], |_| None).unwrap();
        assert_eq!(&di[4..8], &[0x01, 0x03, 0, 8]);
        assert_eq!(&di[8..16], &0x5000_0000_0000_0001u64.to_be_bytes());
        assert_eq!(&di[16..20], &[0x02, 0x01, 0, 29]);
        assert_eq!(&di[49..57], &[0x01, 0x14, 0, 4, 0, 0, 0, 2]);
        assert_eq!(
            usize::from(u16::from_be_bytes([di[2], di[3]])),
            di.len() - 4
        );
        assert_eq!(
            vpd(&id, 0xB0, &nexus, &[], |_| None),
            Err(Sense::invalid_field_in_cdb(2, Some(7)))
        );
    }
}
