//! Partitioning: the medium partition mode page (11h) values, FORMAT MEDIUM, SET CAPACITY
//! and ALLOW OVERWRITE (SSC-4).

use reel_media::{AttributeFormat, Cartridge, PartitionStore};
use reel_scsi::{Asc, Cdb, DeviceContext, Response, Sense};

use crate::attributes::VOLUME_COHERENCY_IDS;
use crate::drive::{Activity, Reply, TapeDrive, now};
use crate::errors::{self, Op};

/// FDP, SDP and IDP of the medium partition page (SSC-4, medium partition mode page).
pub(crate) const FDP: u8 = 0x80;
pub(crate) const SDP: u8 = 0x40;
pub(crate) const IDP: u8 = 0x20;
/// PSUM (bits 4:3): 00b bytes, 01b kilobytes, 10b megabytes, 11b 10^PARTITION UNITS bytes.
pub(crate) const PSUM_MASK: u8 = 0x18;
/// POFM: partitions are made by FORMAT MEDIUM, not by MODE SELECT.
pub(crate) const POFM: u8 = 0x04;
/// MEDIUM FORMAT RECOGNITION: format and partition recognition.
const FORMAT_RECOGNITION: u8 = 0x03;

/// The changeable part of the medium partition page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PartitionSettings {
    pub additional: u8,
    /// FDP, SDP, IDP and PSUM bits.
    pub flags: u8,
    pub units: u8,
    pub sizes: Vec<u16>,
}

impl PartitionSettings {
    /// The page parameters (after the 2-byte page header): 6 fixed bytes and one 2-byte
    /// partition size descriptor per partition the drive supports.
    pub(crate) fn encode(&self, max_additional: u8) -> Vec<u8> {
        let mut v = vec![
            max_additional,
            self.additional,
            self.flags | POFM,
            FORMAT_RECOGNITION,
            self.units & 0x0F,
            0,
        ];
        for size in &self.sizes {
            v.extend_from_slice(&size.to_be_bytes());
        }
        v
    }

    /// Decodes page parameters already checked against the changeable mask.
    pub(crate) fn decode(values: &[u8], descriptors: usize) -> Self {
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        Self {
            additional: at(1),
            flags: at(2) & (FDP | SDP | IDP | PSUM_MASK),
            units: at(4) & 0x0F,
            sizes: (0..descriptors)
                .map(|i| u16::from_be_bytes([at(6 + 2 * i), at(7 + 2 * i)]))
                .collect(),
        }
    }

    /// The settings describing a cartridge's layout: IDP with sizes in the smallest power of
    /// ten that fits every partition in 16 bits.
    pub(crate) fn of_layout(capacities: &[u64], descriptors: usize) -> Self {
        let largest = capacities.iter().copied().max().unwrap_or(0);
        let units = (0u8..=15)
            .find(|&e| largest / 10u64.pow(u32::from(e)) <= 0xFFFF)
            .unwrap_or(15);
        let unit = 10u64.pow(u32::from(units));
        let sizes = (0..descriptors)
            .map(|i| {
                capacities
                    .get(i)
                    .map_or(0, |&c| u16::try_from(c / unit).unwrap_or(u16::MAX))
            })
            .collect();
        Self {
            additional: u8::try_from(capacities.len().saturating_sub(1)).unwrap_or(0),
            flags: IDP | PSUM_MASK,
            units,
            sizes,
        }
    }

    /// The partition sizes in bytes these settings ask for on a cartridge of `capacity`
    /// bytes. SDP and FDP split the capacity equally (reel's device-defined layout); IDP uses
    /// the size descriptors, where FFFFh takes what the others leave.
    pub(crate) fn layout(&self, capacity: u64) -> Option<Vec<u64>> {
        let count = usize::from(self.additional) + 1;
        if self.flags & (FDP | SDP) != 0 || (self.flags & IDP == 0 && count > 1) {
            let each = capacity / count as u64;
            return (each > 0).then(|| vec![each; count]);
        }
        if self.flags & IDP == 0 {
            return Some(vec![capacity]);
        }
        let unit: u64 = match (self.flags & PSUM_MASK) >> 3 {
            0 => 1,
            1 => 1_000,
            2 => 1_000_000,
            _ => 10u64.checked_pow(u32::from(self.units))?,
        };
        let descriptors = self.sizes.get(..count)?;
        if descriptors.iter().filter(|&&s| s == 0xFFFF).count() > 1 {
            return None;
        }
        let fixed: u128 = descriptors
            .iter()
            .filter(|&&s| s != 0xFFFF)
            .map(|&s| u128::from(s) * u128::from(unit))
            .sum();
        let rest = u128::from(capacity).checked_sub(fixed)?;
        let sizes: Vec<u64> = descriptors
            .iter()
            .map(|&s| {
                let bytes = if s == 0xFFFF {
                    rest
                } else {
                    u128::from(s) * u128::from(unit)
                };
                u64::try_from(bytes).unwrap_or(u64::MAX)
            })
            .collect();
        sizes.iter().all(|&s| s > 0).then_some(sizes)
    }
}

impl<S: PartitionStore + Send> TapeDrive<S> {
    /// Descriptors in the medium partition page: one per partition the drive supports.
    pub(crate) fn partition_descriptors(&self) -> usize {
        usize::from(self.model.max_partitions())
    }

    /// MAXIMUM ADDITIONAL PARTITIONS: what both the drive and the loaded cartridge support.
    pub(crate) fn max_additional_partitions(&self) -> u8 {
        let drive = self.model.max_partitions();
        let medium = self
            .medium
            .as_ref()
            .map_or(drive, |c| c.media_type().max_partitions());
        drive.min(medium).saturating_sub(1)
    }

    /// The current medium partition settings: those of a MODE SELECT not yet applied by
    /// FORMAT MEDIUM, else the cartridge's layout.
    pub(crate) fn partition_settings(&self) -> PartitionSettings {
        let descriptors = self.partition_descriptors();
        if let Some(pending) = &self.pending_partitions {
            return pending.clone();
        }
        match &self.medium {
            Some(c) => PartitionSettings::of_layout(c.info().partition_capacities(), descriptors),
            None => PartitionSettings {
                additional: 0,
                flags: IDP | PSUM_MASK,
                units: 9,
                sizes: vec![0; descriptors],
            },
        }
    }

    /// MODE SELECT of the medium partition page: the settings are checked against the
    /// cartridge (if any) and kept for FORMAT MEDIUM (POFM = 1).
    pub(crate) fn select_partitions(&mut self, values: &[u8]) -> Result<(), Sense> {
        let settings = PartitionSettings::decode(values, self.partition_descriptors());
        let invalid = || Sense::illegal_request(Asc::INVALID_FIELD_IN_PARAMETER_LIST);
        if settings.additional > self.max_additional_partitions()
            || (settings.flags & (FDP | SDP | IDP)).count_ones() > 1
        {
            return Err(invalid());
        }
        if let Some(c) = &self.medium {
            let sizes = settings.layout(c.info().capacity()).ok_or_else(invalid)?;
            c.info().validate_layout(&sizes).map_err(|_| invalid())?;
        }
        self.pending_partitions = Some(settings);
        Ok(())
    }

    /// FORMAT MEDIUM (SSC-4): FORMAT 0h makes one partition of the whole capacity; 1h and 2h
    /// partition as the medium partition page says. All data is erased; a parameter list
    /// (TRANSFER LENGTH ≠ 0) is not supported.
    pub(crate) fn format_medium(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        if cdb.be16(3) != 0 {
            return Err(Sense::invalid_field_in_cdb(3, Some(7)));
        }
        let format = cdb.byte(2) & 0x0F;
        if format > 2 {
            return Err(Sense::invalid_field_in_cdb(2, Some(3)));
        }
        let settings = self.partition_settings();
        let capacity = self.writable_cartridge()?.info().capacity();
        let sizes = if format == 0 {
            vec![capacity]
        } else {
            settings
                .layout(capacity)
                .ok_or_else(|| Sense::invalid_field_in_cdb(2, Some(3)))?
        };
        self.apply_format(ctx, &sizes, cdb.bit(1, 0))
    }

    /// SET CAPACITY (SSC-4): one partition of CAPACITY PROPORTION VALUE / FFFFh of the
    /// native capacity, all data erased.
    pub(crate) fn set_capacity(&mut self, ctx: &mut DeviceContext<'_>, cdb: &Cdb<'_>) -> Reply {
        let proportion = cdb.be16(3);
        if proportion == 0 {
            return Err(Sense::invalid_field_in_cdb(3, Some(7)));
        }
        let capacity = self.writable_cartridge()?.info().capacity();
        let size = u128::from(capacity) * u128::from(proportion) / 0xFFFF;
        let size = u64::try_from(size).unwrap_or(capacity).max(1);
        self.apply_format(ctx, &[size], cdb.bit(1, 0))
    }

    fn apply_format(&mut self, ctx: &mut DeviceContext<'_>, sizes: &[u64], immed: bool) -> Reply {
        let time = now(ctx);
        let cartridge = self.writable_cartridge()?;
        // SSC-4 (FORMAT MEDIUM, SET CAPACITY): only at the beginning of partition 0.
        let at_bop0 = cartridge
            .position()
            .is_ok_and(|p| p.partition == 0 && p.object == 0);
        if !at_bop0 {
            return Err(Sense::illegal_request(
                Asc::POSITION_PAST_BEGINNING_OF_MEDIUM,
            ));
        }
        self.activity = Activity::Formatting;
        let Self {
            medium, factory, ..
        } = self;
        let cartridge = medium.as_mut().ok_or_else(errors::not_present)?;
        if sizes.len() > cartridge.partition_count() && factory.is_none() {
            return Err(errors::internal_failure());
        }
        cartridge.set_time(time);
        let info = cartridge.info().clone();
        let result = cartridge.format(sizes, |index| match factory.as_mut() {
            Some(make) => make(&info, index),
            // Cartridge::format asks for stores only beyond the existing partitions, which
            // the check above allows only with a factory.
            None => unreachable!("partition store requested without a factory"),
        });
        let result = match result {
            Ok(_removed) => {
                clear_volume_coherency(cartridge);
                self.pending_partitions = None;
                self.save()
            }
            Err(e) => Err(errors::media(&e, Op::Write, 2)),
        };
        match result {
            Ok(()) => Ok(Response::good_empty()),
            Err(sense) if immed => {
                ctx.defer(sense);
                Ok(Response::good_empty())
            }
            Err(sense) => Err(sense),
        }
    }

    /// ALLOW OVERWRITE (SSC-4): reel's drives are never in append-only mode, so every
    /// overwrite is already allowed; the command is checked and accepted.
    pub(crate) fn allow_overwrite(&mut self, cdb: &Cdb<'_>) -> Reply {
        if cdb.byte(2) & 0x0F > 2 {
            return Err(Sense::invalid_field_in_cdb(2, Some(3)));
        }
        self.ready_cartridge()?;
        Ok(Response::good_empty())
    }
}

/// A new layout invalidates the volume coherency information of every partition.
fn clear_volume_coherency<S: PartitionStore>(cartridge: &mut Cartridge<S>) {
    for id in VOLUME_COHERENCY_IDS {
        // Deleting an absent host attribute is not an error; nothing else can fail here.
        let _ = cartridge.write_attribute(id, AttributeFormat::Binary, &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idp(additional: u8, psum: u8, units: u8, sizes: &[u16]) -> PartitionSettings {
        PartitionSettings {
            additional,
            flags: IDP | psum << 3,
            units,
            sizes: sizes.to_vec(),
        }
    }

    #[test]
    fn layouts() {
        const GB: u64 = 1_000_000_000;
        // LTFS: 1 GB index partition, the rest for data.
        assert_eq!(
            idp(1, 3, 9, &[1, 0xFFFF, 0, 0]).layout(20 * GB),
            Some(vec![GB, 19 * GB])
        );
        // Megabytes, both sizes given.
        assert_eq!(
            idp(1, 2, 0, &[100, 200]).layout(GB),
            Some(vec![100_000_000, 200_000_000])
        );
        // Too big, two remainders, a zero size, too few descriptors: refused.
        assert_eq!(idp(1, 3, 9, &[30, 0xFFFF]).layout(20 * GB), None);
        assert_eq!(idp(1, 3, 9, &[0xFFFF, 0xFFFF]).layout(20 * GB), None);
        assert_eq!(idp(1, 3, 9, &[0, 0xFFFF]).layout(20 * GB), None);
        assert_eq!(idp(2, 3, 9, &[1, 1]).layout(20 * GB), None);
        // SDP splits equally; no flag and no additional partition is one partition.
        let sdp = PartitionSettings {
            additional: 3,
            flags: SDP,
            units: 0,
            sizes: vec![],
        };
        assert_eq!(sdp.layout(400), Some(vec![100; 4]));
        let none = PartitionSettings {
            additional: 0,
            flags: 0,
            units: 0,
            sizes: vec![],
        };
        assert_eq!(none.layout(400), Some(vec![400]));
    }

    #[test]
    fn page_round_trip() {
        let s = PartitionSettings::of_layout(&[1_000_000_000, 17_000_000_000_000], 4);
        assert_eq!(s.units, 9);
        assert_eq!(s.sizes, [1, 17_000, 0, 0]);
        let page = s.encode(3);
        assert_eq!(page.len(), 14);
        assert_eq!(&page[..6], &[3, 1, IDP | PSUM_MASK | POFM, 3, 9, 0]);
        assert_eq!(PartitionSettings::decode(&page, 4), s);
        assert_eq!(
            s.layout(18_000_000_000_000),
            Some(vec![1_000_000_000, 17_000_000_000_000])
        );
    }
}
