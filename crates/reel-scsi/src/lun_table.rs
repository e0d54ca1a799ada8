//! The LUNs of one SCSI target port group: routing, REPORT LUNS (SPC-4 §6.33), the REPORT
//! LUNS well-known logical unit (SPC-4 §8.2) and requests to absent LUNs, and the SAM-5 §4.7
//! LUN encoding.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cdb::{Cdb, Opcode, SpcCommand};
use crate::inquiry;
use crate::sense::{Asc, Sense, SenseFormat};
use crate::{ItNexus, LogicalUnit, Request, Response, TaskManagement};

/// The REPORT LUNS well-known logical unit (SPC-4 §8.2), as [`decode_lun`] numbers it.
pub const WLUN_REPORT_LUNS: u64 = 0xC101;

/// Encodes a LUN for the 8-byte LUN field (SAM-5 §4.7): peripheral device addressing for
/// LUN < 256, flat space addressing for LUN < 16384, the extended well-known LUN form for
/// [`WLUN_REPORT_LUNS`]. Other values are written as their 8 big-endian bytes (not a SAM-5
/// encoding; such LUNs cannot be served).
pub fn encode_lun(lun: u64) -> [u8; 8] {
    let mut raw = [0u8; 8];
    match lun {
        0..=0xFF => raw[1] = lun as u8,
        0x100..=0x3FFF => {
            raw[0] = 0x40 | (lun >> 8) as u8;
            raw[1] = lun as u8;
        }
        WLUN_REPORT_LUNS => {
            raw[0] = 0xC1;
            raw[1] = 0x01;
        }
        _ => raw = lun.to_be_bytes(),
    }
    raw
}

/// Decodes an 8-byte LUN field (SAM-5 §4.7). Single-level peripheral and flat space LUNs and
/// the well-known LUN forms decode to their numbers (well-known: `0xC100 | W-LUN`); anything
/// else decodes to its 8 big-endian bytes, which no logical unit uses.
pub fn decode_lun(raw: [u8; 8]) -> u64 {
    let single_level = raw[2..].iter().all(|&b| b == 0);
    match raw[0] >> 6 {
        // Peripheral device addressing with bus identifier 0.
        0b00 if single_level && raw[0] == 0 => u64::from(raw[1]),
        0b01 if single_level => u64::from(raw[0] & 0x3F) << 8 | u64::from(raw[1]),
        // Extended addressing, length 00b, well-known logical unit (SAM-5 §4.7.8).
        0b11 if single_level && raw[0] == 0xC1 => 0xC100 | u64::from(raw[1]),
        _ => u64::from_be_bytes(raw),
    }
}

/// The logical units of one target port group.
#[derive(Default)]
pub struct LunTable {
    units: BTreeMap<u64, Arc<dyn LogicalUnit>>,
}

impl LunTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the logical unit at `lun`.
    pub fn insert(&mut self, lun: u64, unit: Arc<dyn LogicalUnit>) {
        self.units.insert(lun, unit);
    }

    /// Removes the logical unit at `lun`.
    pub fn remove(&mut self, lun: u64) -> Option<Arc<dyn LogicalUnit>> {
        self.units.remove(&lun)
    }

    /// The logical unit at `lun`.
    pub fn get(&self, lun: u64) -> Option<&Arc<dyn LogicalUnit>> {
        self.units.get(&lun)
    }

    /// The LUNs in ascending order.
    pub fn luns(&self) -> impl Iterator<Item = u64> + '_ {
        self.units.keys().copied()
    }

    /// Executes a request for `lun`. REPORT LUNS is answered here for any LUN; the REPORT
    /// LUNS well-known LU answers INQUIRY, TEST UNIT READY and REQUEST SENSE too; an absent
    /// LUN gets INQUIRY data with PERIPHERAL QUALIFIER 011b / type 1Fh, REQUEST SENSE data
    /// LOGICAL UNIT NOT SUPPORTED, and CHECK CONDITION ILLEGAL REQUEST / LOGICAL UNIT NOT
    /// SUPPORTED for anything else (SPC-4 §6.6.2, SAM-5 §5.9.x "incorrect logical unit").
    pub fn execute(&self, lun: u64, request: Request<'_>) -> Response {
        if request.cdb.first() == Some(&Opcode::REPORT_LUNS.0) {
            return self.report_luns(request.cdb);
        }
        if let Some(unit) = self.units.get(&lun) {
            return unit.execute(request);
        }
        let well_known = lun == WLUN_REPORT_LUNS;
        let cdb = match Cdb::parse(request.cdb) {
            Ok(cdb) => cdb,
            Err(error) if well_known => return fixed_check(error.into()),
            Err(_) => return fixed_check(lu_not_supported()),
        };
        match SpcCommand::parse(&cdb) {
            Err(sense) if well_known => fixed_check(sense),
            Ok(Some(SpcCommand::Inquiry {
                evpd: false,
                allocation_length,
                ..
            })) => {
                let mut data = inquiry::absent();
                if well_known {
                    data[0] = 0x1E; // well known logical unit (SPC-4 §8.1)
                }
                Response::good(inquiry::truncate(data, usize::from(allocation_length)))
            }
            Ok(Some(SpcCommand::RequestSense {
                desc,
                allocation_length,
            })) => {
                let sense = if well_known {
                    Sense::no_sense()
                } else {
                    lu_not_supported()
                };
                let format = if desc {
                    SenseFormat::Descriptor
                } else {
                    SenseFormat::Fixed
                };
                Response::good(inquiry::truncate(
                    sense.encode(format),
                    usize::from(allocation_length),
                ))
            }
            Ok(Some(SpcCommand::TestUnitReady)) if well_known => Response::good_empty(),
            _ if well_known => fixed_check(Sense::invalid_opcode()),
            _ => fixed_check(lu_not_supported()),
        }
    }

    /// REPORT LUNS (SPC-4 §6.33): SELECT REPORT 00h all LUs but well-known ones, 01h the
    /// well-known LUs, 02h all.
    fn report_luns(&self, raw: &[u8]) -> Response {
        let cdb = match Cdb::parse(raw) {
            Ok(cdb) => cdb,
            Err(error) => return fixed_check(error.into()),
        };
        let Ok(Some(SpcCommand::ReportLuns {
            select_report,
            allocation_length,
        })) = SpcCommand::parse(&cdb)
        else {
            return fixed_check(Sense::invalid_opcode());
        };
        let mut luns: Vec<u64> = match select_report {
            0 => self.luns().collect(),
            1 => Vec::new(),
            2 => self.luns().collect(),
            _ => return fixed_check(Sense::invalid_field_in_cdb(2, Some(7))),
        };
        if select_report != 0 {
            luns.push(WLUN_REPORT_LUNS);
        }
        let mut data = Vec::with_capacity(8 + 8 * luns.len());
        let list_len = u32::try_from(8 * luns.len()).unwrap_or(u32::MAX);
        data.extend_from_slice(&list_len.to_be_bytes());
        data.extend_from_slice(&[0; 4]);
        for lun in luns {
            data.extend_from_slice(&encode_lun(lun));
        }
        let allocation_length = usize::try_from(allocation_length).unwrap_or(usize::MAX);
        Response::good(inquiry::truncate(data, allocation_length))
    }

    /// The most Data-Out bytes one command to the LUN in this 8-byte LUN field may carry
    /// ([`LogicalUnit::max_data_out`]); 0 for an absent LUN, which takes no data.
    pub fn max_data_out(&self, lun: [u8; 8]) -> u32 {
        self.units
            .get(&decode_lun(lun))
            .map_or(0, |unit| unit.max_data_out())
    }

    /// Answers a command whose Data-Out exceeded [`Self::max_data_out`] and was not received:
    /// the unit's refusal ([`LogicalUnit::refuse_data_out`]); for an absent LUN, what any
    /// command gets there (LOGICAL UNIT NOT SUPPORTED, or INVALID FIELD IN CDB from the
    /// REPORT LUNS well-known LU).
    pub fn refuse_data_out(&self, lun: u64, request: Request<'_>) -> Response {
        match self.units.get(&lun) {
            Some(unit) => unit.refuse_data_out(request),
            None if lun == WLUN_REPORT_LUNS => {
                fixed_check(Sense::illegal_request(Asc::INVALID_FIELD_IN_CDB))
            }
            None => fixed_check(lu_not_supported()),
        }
    }

    /// Applies a task management function to one LUN, or to all (`None`, target resets).
    pub fn task_management(&self, lun: Option<u64>, function: TaskManagement, nexus: &ItNexus) {
        match lun {
            Some(lun) => {
                if let Some(unit) = self.units.get(&lun) {
                    unit.task_management(function, nexus);
                }
            }
            None => {
                for unit in self.units.values() {
                    unit.task_management(function, nexus);
                }
            }
        }
    }

    /// The nexus is gone: every logical unit forgets its per-nexus state.
    pub fn nexus_lost(&self, nexus: &ItNexus) {
        for unit in self.units.values() {
            unit.nexus_lost(nexus);
        }
    }
}

fn lu_not_supported() -> Sense {
    Sense::illegal_request(Asc::LOGICAL_UNIT_NOT_SUPPORTED)
}

/// Absent LUNs have no control mode page: fixed format sense.
fn fixed_check(sense: Sense) -> Response {
    Response::check_condition(&sense, SenseFormat::Fixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lun_encodings() {
        assert_eq!(encode_lun(5), [0, 5, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode_lun(0x1234), [0x52, 0x34, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode_lun(WLUN_REPORT_LUNS), [0xC1, 0x01, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode_lun([0x00, 0x01, 0, 0, 0, 0, 0, 0]), 1);
        assert_eq!(
            decode_lun([0x00, 0x01, 0, 0, 0, 0, 0, 1]),
            0x0001_0000_0000_0001
        );
        assert_eq!(
            decode_lun([0x01, 0x01, 0, 0, 0, 0, 0, 0]),
            0x0101_0000_0000_0000
        );
    }

    #[test]
    fn data_out_limits_and_refusals() {
        use crate::{Bytes, ItNexus, NullDisk, ScsiDevice, Status, TaskAttribute, parse_sense};
        let mut table = LunTable::new();
        table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 20))));
        assert_eq!(table.max_data_out(encode_lun(0)), 64 << 20);
        assert_eq!(
            table.max_data_out(encode_lun(1)),
            0,
            "absent LUNs take no data"
        );
        let nexus = ItNexus::new("iqn.t,i,0x000000000001", 1);
        let write10 = [0x2a, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0];
        let refuse = |lun| {
            table.refuse_data_out(
                lun,
                Request {
                    nexus: &nexus,
                    cdb: &write10,
                    data_out: Bytes::new(),
                    data_in_len: 0,
                    attribute: TaskAttribute::Simple,
                },
            )
        };
        // The first command of a nexus reports the power-on unit attention (SAM-5 §5.14).
        let first = refuse(0);
        assert_eq!(
            parse_sense(first.sense.as_deref().unwrap()).unwrap().key,
            crate::SenseKey::UNIT_ATTENTION
        );
        let refused = refuse(0);
        assert_eq!(refused.status, Status::CheckCondition);
        let sense = parse_sense(refused.sense.as_deref().unwrap()).unwrap();
        assert_eq!(sense, Sense::invalid_field_in_cdb(7, None));
        let absent = refuse(3);
        let sense = parse_sense(absent.sense.as_deref().unwrap()).unwrap();
        assert_eq!(sense.asc, Asc::LOGICAL_UNIT_NOT_SUPPORTED);
    }

    proptest! {
        #[test]
        fn lun_round_trip(lun in prop_oneof![0u64..0x4000, Just(WLUN_REPORT_LUNS)]) {
            prop_assert_eq!(decode_lun(encode_lun(lun)), lun);
        }
    }
}
