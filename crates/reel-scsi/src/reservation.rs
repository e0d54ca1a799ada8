//! SPC-2 RESERVE/RELEASE and SPC-4 persistent reservations (SPC-4 §5.9) of one logical unit.
//!
//! Registrations are kept per I_T nexus (no ALL_TG_PT, no SPEC_I_PT) and are not persisted
//! (APTPL = 1 is rejected). Both reservation kinds coexist as SPC-4 §5.9.3 "exceptions to
//! SPC-2 RESERVE and RELEASE behavior" (CRH = 1) describes.

use crate::ItNexus;
use crate::sense::{Asc, Sense};
use crate::unit_attention::UnitAttentions;

/// How a command interacts with reservations held through other I_T nexuses (SPC-2 §5.5.1;
/// SPC-4 §5.9.1, table "SPC commands that are allowed in the presence of various
/// reservations").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Allowed under every reservation, SPC-2 RESERVE included (INQUIRY, REPORT LUNS,
    /// REQUEST SENSE, LOG SENSE, PERSISTENT RESERVE IN, ...).
    Always,
    /// Allowed under every persistent reservation, conflicts with an SPC-2 reservation
    /// (TEST UNIT READY, PERSISTENT RESERVE OUT, ...).
    PersistentAllowed,
    /// Reads the medium or state: allowed under Write Exclusive types, conflicts under
    /// Exclusive Access types and SPC-2 reservations.
    Read,
    /// Writes or changes state: conflicts with every reservation held by another nexus.
    Write,
}

/// Persistent reservation types (SPC-4 §6.14.2, table 175).
pub(crate) const WRITE_EXCLUSIVE: u8 = 1;
pub(crate) const EXCLUSIVE_ACCESS: u8 = 3;
pub(crate) const WRITE_EXCLUSIVE_REGISTRANTS_ONLY: u8 = 5;
pub(crate) const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 6;
pub(crate) const WRITE_EXCLUSIVE_ALL_REGISTRANTS: u8 = 7;
pub(crate) const EXCLUSIVE_ACCESS_ALL_REGISTRANTS: u8 = 8;

fn valid_type(pr_type: u8) -> bool {
    matches!(pr_type, 1 | 3 | 5..=8)
}

fn all_registrants(pr_type: u8) -> bool {
    matches!(pr_type, 7 | 8)
}

/// Registrants-only and all-registrants types: registered nexuses get access.
fn registrants_have_access(pr_type: u8) -> bool {
    matches!(pr_type, 5..=8)
}

/// PERSISTENT RESERVE OUT service actions (SPC-4 §6.14.2, table 173).
mod service_action {
    pub(super) const REGISTER: u8 = 0;
    pub(super) const RESERVE: u8 = 1;
    pub(super) const RELEASE: u8 = 2;
    pub(super) const CLEAR: u8 = 3;
    pub(super) const PREEMPT: u8 = 4;
    pub(super) const PREEMPT_AND_ABORT: u8 = 5;
    pub(super) const REGISTER_AND_IGNORE_EXISTING_KEY: u8 = 6;
}

/// Why a reservation command failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReservationError {
    /// RESERVATION CONFLICT status.
    Conflict,
    /// CHECK CONDITION with this sense.
    Check(Sense),
}

impl From<Sense> for ReservationError {
    fn from(sense: Sense) -> Self {
        Self::Check(sense)
    }
}

#[derive(Clone, Debug)]
struct Reservation {
    /// The nexus that established it; for all-registrants types every registrant holds it.
    holder: ItNexus,
    pr_type: u8,
}

/// The reservation state of one logical unit.
#[derive(Debug, Default)]
pub(crate) struct Reservations {
    spc2: Option<ItNexus>,
    /// Registrations in registration order.
    registrations: Vec<(ItNexus, u64)>,
    reservation: Option<Reservation>,
    generation: u32,
}

/// The CDB fields of PERSISTENT RESERVE OUT (SPC-4 §6.14.1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrOutCdb {
    pub(crate) action: u8,
    pub(crate) scope: u8,
    pub(crate) pr_type: u8,
    pub(crate) parameter_list_length: u32,
}

/// The 24-byte PERSISTENT RESERVE OUT parameter list (SPC-4 §6.14.3, table 176).
const PR_OUT_PARAMETER_LIST_LEN: usize = 24;

impl Reservations {
    fn key_of(&self, nexus: &ItNexus) -> Option<u64> {
        self.registrations
            .iter()
            .find(|(n, _)| n == nexus)
            .map(|&(_, key)| key)
    }

    fn is_holder(&self, nexus: &ItNexus) -> bool {
        match &self.reservation {
            Some(r) if all_registrants(r.pr_type) => self.key_of(nexus).is_some(),
            Some(r) => &r.holder == nexus,
            None => false,
        }
    }

    /// Whether a command of class `access` from `nexus` is in conflict with a reservation.
    pub(crate) fn conflicts(&self, nexus: &ItNexus, access: Access) -> bool {
        if self.spc2.as_ref().is_some_and(|holder| holder != nexus) && access != Access::Always {
            return true;
        }
        if matches!(access, Access::Always | Access::PersistentAllowed) {
            return false;
        }
        let Some(reservation) = &self.reservation else {
            return false;
        };
        if self.is_holder(nexus) {
            return false;
        }
        let registered = self.key_of(nexus).is_some();
        match reservation.pr_type {
            WRITE_EXCLUSIVE => access == Access::Write,
            WRITE_EXCLUSIVE_REGISTRANTS_ONLY | WRITE_EXCLUSIVE_ALL_REGISTRANTS => {
                !registered && access == Access::Write
            }
            EXCLUSIVE_ACCESS_REGISTRANTS_ONLY | EXCLUSIVE_ACCESS_ALL_REGISTRANTS => !registered,
            EXCLUSIVE_ACCESS => true,
            // Only valid types are ever established.
            _ => true,
        }
    }

    /// Whether another nexus holds an SPC-2 reservation or a persistent reservation that
    /// `nexus` does not share.
    pub(crate) fn reserved_by_other(&self, nexus: &ItNexus) -> bool {
        self.conflicts(nexus, Access::Write)
    }

    /// RESERVE(6)/(10) (SPC-2 §7.21; with a persistent reservation, SPC-4 §5.9.3).
    pub(crate) fn reserve(&mut self, nexus: &ItNexus) -> Result<(), ReservationError> {
        if let Some(reservation) = &self.reservation {
            let registered_with_access =
                registrants_have_access(reservation.pr_type) && self.key_of(nexus).is_some();
            return if self.is_holder(nexus) || registered_with_access {
                Ok(())
            } else {
                Err(ReservationError::Conflict)
            };
        }
        match &self.spc2 {
            Some(holder) if holder != nexus => Err(ReservationError::Conflict),
            _ => {
                self.spc2 = Some(nexus.clone());
                Ok(())
            }
        }
    }

    /// RELEASE(6)/(10) (SPC-2 §7.19): releasing a reservation held by another nexus, or none,
    /// is GOOD without effect.
    pub(crate) fn release(&mut self, nexus: &ItNexus) -> Result<(), ReservationError> {
        if let Some(reservation) = &self.reservation {
            let registered_with_access =
                registrants_have_access(reservation.pr_type) && self.key_of(nexus).is_some();
            return if self.is_holder(nexus) || registered_with_access {
                Ok(())
            } else {
                Err(ReservationError::Conflict)
            };
        }
        if self.spc2.as_ref() == Some(nexus) {
            self.spc2 = None;
        }
        Ok(())
    }

    /// Drops the SPC-2 reservation held through `nexus` (I_T nexus loss or reset).
    pub(crate) fn release_spc2_of(&mut self, nexus: &ItNexus) {
        if self.spc2.as_ref() == Some(nexus) {
            self.spc2 = None;
        }
    }

    /// Drops any SPC-2 reservation (logical unit reset, SPC-2 §5.5.1).
    pub(crate) fn release_spc2(&mut self) {
        self.spc2 = None;
    }

    /// PERSISTENT RESERVE IN (SPC-4 §6.13): the full parameter data for `service_action`
    /// (00h..=03h, already validated). `transport_id` encodes a nexus for READ FULL STATUS.
    pub(crate) fn persistent_reserve_in(
        &self,
        service_action: u8,
        transport_id: &dyn Fn(&ItNexus) -> Vec<u8>,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        match service_action {
            // READ KEYS (SPC-4 §6.13.2).
            0 => {
                out.extend_from_slice(&self.generation.to_be_bytes());
                out.extend_from_slice(&len32(self.registrations.len() * 8));
                for (_, key) in &self.registrations {
                    out.extend_from_slice(&key.to_be_bytes());
                }
            }
            // READ RESERVATION (SPC-4 §6.13.3).
            1 => {
                out.extend_from_slice(&self.generation.to_be_bytes());
                match &self.reservation {
                    Some(r) => {
                        out.extend_from_slice(&16u32.to_be_bytes());
                        let key = if all_registrants(r.pr_type) {
                            0
                        } else {
                            self.key_of(&r.holder).unwrap_or(0)
                        };
                        out.extend_from_slice(&key.to_be_bytes());
                        out.extend_from_slice(&[0; 4]); // obsolete
                        out.extend_from_slice(&[0, r.pr_type & 0x0F, 0, 0]); // scope LU = 0
                    }
                    None => out.extend_from_slice(&0u32.to_be_bytes()),
                }
            }
            // REPORT CAPABILITIES (SPC-4 §6.13.4): CRH = 1, TMV = 1, types supported: all six.
            2 => out.extend_from_slice(&[0x00, 0x08, 0x10, 0x80, 0xEA, 0x01, 0x00, 0x00]),
            // READ FULL STATUS (SPC-4 §6.13.5).
            _ => {
                out.extend_from_slice(&self.generation.to_be_bytes());
                out.extend_from_slice(&[0; 4]); // patched below
                for (nexus, key) in &self.registrations {
                    let holder = self.is_holder(nexus);
                    out.extend_from_slice(&key.to_be_bytes());
                    out.extend_from_slice(&[0; 4]);
                    out.push(u8::from(holder)); // R_HOLDER; ALL_TG_PT = 0
                    let scope_type = match (&self.reservation, holder) {
                        (Some(r), true) => r.pr_type & 0x0F,
                        _ => 0,
                    };
                    out.push(scope_type);
                    out.extend_from_slice(&[0; 4]);
                    out.extend_from_slice(&nexus.target_port.to_be_bytes());
                    let id = transport_id(nexus);
                    out.extend_from_slice(&len32(id.len()));
                    out.extend_from_slice(&id);
                }
                let additional = len32(out.len() - 8);
                out[4..8].copy_from_slice(&additional);
            }
        }
        out
    }

    /// PERSISTENT RESERVE OUT (SPC-4 §6.14, §5.9.7 - §5.9.11). `parameters` is the data-out
    /// buffer, `parameter_list_length` the CDB's field. Unit attentions for other nexuses go
    /// to `uas`.
    pub(crate) fn persistent_reserve_out(
        &mut self,
        nexus: &ItNexus,
        cdb: PrOutCdb,
        parameters: &[u8],
        uas: &mut UnitAttentions,
    ) -> Result<(), ReservationError> {
        use service_action::*;
        let PrOutCdb {
            action,
            scope,
            pr_type,
            parameter_list_length,
        } = cdb;
        // SPC-4 §6.14.1: the parameter list is exactly 24 bytes without SPEC_I_PT.
        if parameter_list_length as usize != PR_OUT_PARAMETER_LIST_LEN
            || parameters.len() < PR_OUT_PARAMETER_LIST_LEN
        {
            return Err(Sense::parameter_list_length_error().into());
        }
        let be64 = |at: usize| {
            parameters[at..at + 8]
                .iter()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
        };
        let key = be64(0);
        let sa_key = be64(8);
        let flags = parameters[20];
        let registering = matches!(action, REGISTER | REGISTER_AND_IGNORE_EXISTING_KEY);
        if flags & 0x08 != 0 {
            return Err(Sense::invalid_field_in_parameter_list(20, Some(3)).into()); // SPEC_I_PT
        }
        if registering && flags & 0x04 != 0 {
            return Err(Sense::invalid_field_in_parameter_list(20, Some(2)).into()); // ALL_TG_PT
        }
        if registering && flags & 0x01 != 0 {
            // APTPL: registrations are not persisted across power loss.
            return Err(Sense::invalid_field_in_parameter_list(20, Some(0)).into());
        }
        if matches!(action, RESERVE | RELEASE | PREEMPT | PREEMPT_AND_ABORT) {
            if scope != 0 {
                return Err(Sense::invalid_field_in_cdb(2, Some(7)).into());
            }
            if !valid_type(pr_type) {
                return Err(Sense::invalid_field_in_cdb(2, Some(3)).into());
            }
        }
        let own_key = self.key_of(nexus);
        match action {
            REGISTER | REGISTER_AND_IGNORE_EXISTING_KEY => {
                let ignore = action == REGISTER_AND_IGNORE_EXISTING_KEY;
                match own_key {
                    None if !ignore && key != 0 => return Err(ReservationError::Conflict),
                    None if sa_key == 0 => {}
                    None => {
                        self.registrations.push((nexus.clone(), sa_key));
                        self.generation = self.generation.wrapping_add(1);
                    }
                    Some(own) if !ignore && own != key => return Err(ReservationError::Conflict),
                    Some(_) if sa_key == 0 => {
                        self.unregister(nexus, uas);
                        self.generation = self.generation.wrapping_add(1);
                    }
                    Some(_) => {
                        if let Some(entry) = self.registrations.iter_mut().find(|(n, _)| n == nexus)
                        {
                            entry.1 = sa_key;
                        }
                        self.generation = self.generation.wrapping_add(1);
                    }
                }
                Ok(())
            }
            _ if own_key != Some(key) => Err(ReservationError::Conflict),
            RESERVE => match &self.reservation {
                None => {
                    self.reservation = Some(Reservation {
                        holder: nexus.clone(),
                        pr_type,
                    });
                    Ok(())
                }
                Some(r) if self.is_holder(nexus) && r.pr_type == pr_type => Ok(()),
                Some(_) => Err(ReservationError::Conflict),
            },
            RELEASE => {
                let Some(r) = &self.reservation else {
                    return Ok(());
                };
                if !self.is_holder(nexus) {
                    return Ok(());
                }
                if r.pr_type != pr_type {
                    return Err(Sense::illegal_request(
                        Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
                    )
                    .into());
                }
                let released_type = r.pr_type;
                self.reservation = None;
                if registrants_have_access(released_type) {
                    self.raise_registrants(uas, nexus, Asc::RESERVATIONS_RELEASED);
                }
                Ok(())
            }
            CLEAR => {
                self.raise_registrants(uas, nexus, Asc::RESERVATIONS_PREEMPTED);
                self.registrations.clear();
                self.reservation = None;
                self.generation = self.generation.wrapping_add(1);
                Ok(())
            }
            _ => self.preempt(nexus, sa_key, pr_type, uas),
        }
    }

    /// PREEMPT and PREEMPT AND ABORT (SPC-4 §5.9.11.4); aborting tasks is the transport's.
    fn preempt(
        &mut self,
        nexus: &ItNexus,
        sa_key: u64,
        pr_type: u8,
        uas: &mut UnitAttentions,
    ) -> Result<(), ReservationError> {
        let reservation = self.reservation.clone();
        let preempted: Vec<ItNexus> = match &reservation {
            Some(r) if all_registrants(r.pr_type) && sa_key == 0 => self
                .registrations
                .iter()
                .filter(|(n, _)| n != nexus)
                .map(|(n, _)| n.clone())
                .collect(),
            _ if sa_key == 0 => {
                return Err(Sense::invalid_field_in_parameter_list(8, None).into());
            }
            _ => self
                .registrations
                .iter()
                .filter(|(n, k)| *k == sa_key && n != nexus)
                .map(|(n, _)| n.clone())
                .collect(),
        };
        let takes_reservation = match &reservation {
            Some(r) if all_registrants(r.pr_type) => sa_key == 0,
            Some(r) => self.key_of(&r.holder) == Some(sa_key),
            None => false,
        };
        let own_key_matches = self.key_of(nexus) == Some(sa_key);
        if preempted.is_empty() && !takes_reservation && !own_key_matches {
            return Err(ReservationError::Conflict);
        }
        self.registrations.retain(|(n, _)| !preempted.contains(n));
        for n in &preempted {
            uas.raise(n, Asc::REGISTRATIONS_PREEMPTED);
        }
        if takes_reservation {
            self.reservation = Some(Reservation {
                holder: nexus.clone(),
                pr_type,
            });
        }
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    /// Removes the registration of `nexus` and the reservation it alone held (SPC-4 §5.9.11.3).
    fn unregister(&mut self, nexus: &ItNexus, uas: &mut UnitAttentions) {
        self.registrations.retain(|(n, _)| n != nexus);
        let Some(r) = &self.reservation else {
            return;
        };
        let released = if all_registrants(r.pr_type) {
            self.registrations.is_empty()
        } else {
            &r.holder == nexus
        };
        if released {
            let pr_type = r.pr_type;
            self.reservation = None;
            if registrants_have_access(pr_type) {
                self.raise_registrants(uas, nexus, Asc::RESERVATIONS_RELEASED);
            }
        }
    }

    fn raise_registrants(&self, uas: &mut UnitAttentions, except: &ItNexus, asc: Asc) {
        for (n, _) in &self.registrations {
            if n != except {
                uas.raise(n, asc);
            }
        }
    }
}

fn len32(len: usize) -> [u8; 4] {
    u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdb(action: u8, pr_type: u8, parameter_list_length: u32) -> PrOutCdb {
        PrOutCdb {
            action,
            scope: 0,
            pr_type,
            parameter_list_length,
        }
    }

    fn params(key: u64, sa_key: u64, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 24];
        p[..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sa_key.to_be_bytes());
        p[20] = flags;
        p
    }

    struct Lu {
        r: Reservations,
        uas: UnitAttentions,
    }

    impl Lu {
        fn new() -> Self {
            Self {
                r: Reservations::default(),
                uas: UnitAttentions::default(),
            }
        }
        fn out(
            &mut self,
            nexus: &ItNexus,
            action: u8,
            pr_type: u8,
            key: u64,
            sa_key: u64,
        ) -> Result<(), ReservationError> {
            let p = params(key, sa_key, 0);
            self.r
                .persistent_reserve_out(nexus, cdb(action, pr_type, 24), &p, &mut self.uas)
        }
    }

    #[test]
    fn spc2_reserve_release() {
        let mut r = Reservations::default();
        let (a, b) = (ItNexus::new("a", 1), ItNexus::new("b", 1));
        r.reserve(&a).unwrap();
        assert_eq!(r.reserve(&b), Err(ReservationError::Conflict));
        assert!(r.conflicts(&b, Access::Read));
        assert!(r.conflicts(&b, Access::PersistentAllowed));
        assert!(!r.conflicts(&b, Access::Always));
        assert!(!r.conflicts(&a, Access::Write));
        r.release(&b).unwrap();
        assert!(r.conflicts(&b, Access::Write));
        r.release(&a).unwrap();
        assert!(!r.conflicts(&b, Access::Write));
    }

    #[test]
    fn register_reserve_preempt() {
        let mut lu = Lu::new();
        let (a, b, c) = (
            ItNexus::new("a", 1),
            ItNexus::new("b", 1),
            ItNexus::new("c", 1),
        );
        lu.out(&a, 0, 0, 0, 0xA).unwrap();
        lu.out(&b, 0, 0, 0, 0xB).unwrap();
        assert_eq!(lu.out(&c, 0, 0, 5, 0xC), Err(ReservationError::Conflict));
        assert_eq!(lu.r.generation, 2);
        lu.out(&a, 1, EXCLUSIVE_ACCESS, 0xA, 0).unwrap();
        assert!(lu.r.conflicts(&b, Access::Read));
        assert!(lu.r.conflicts(&c, Access::Read));
        assert!(!lu.r.conflicts(&c, Access::PersistentAllowed));
        assert_eq!(
            lu.out(&b, 1, EXCLUSIVE_ACCESS, 0xB, 0),
            Err(ReservationError::Conflict)
        );
        // B preempts A: A's registration goes, B holds a Write Exclusive reservation.
        lu.out(&b, 4, WRITE_EXCLUSIVE, 0xB, 0xA).unwrap();
        assert_eq!(lu.uas.pop(&a), Some(Asc::REGISTRATIONS_PREEMPTED));
        assert!(lu.r.conflicts(&a, Access::Write));
        assert!(!lu.r.conflicts(&a, Access::Read));
        assert_eq!(lu.r.key_of(&a), None);
        // Wrong type on release.
        assert_eq!(
            lu.out(&b, 2, EXCLUSIVE_ACCESS, 0xB, 0),
            Err(ReservationError::Check(Sense::illegal_request(
                Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION
            )))
        );
        lu.out(&b, 2, WRITE_EXCLUSIVE, 0xB, 0).unwrap();
        assert!(!lu.r.conflicts(&a, Access::Write));
    }

    #[test]
    fn all_registrants_and_clear() {
        let mut lu = Lu::new();
        let (a, b, c) = (
            ItNexus::new("a", 1),
            ItNexus::new("b", 1),
            ItNexus::new("c", 1),
        );
        lu.out(&a, 0, 0, 0, 1).unwrap();
        lu.out(&b, 6, 0, 99, 2).unwrap();
        lu.out(&a, 1, EXCLUSIVE_ACCESS_ALL_REGISTRANTS, 1, 0)
            .unwrap();
        assert!(!lu.r.conflicts(&b, Access::Write));
        assert!(lu.r.conflicts(&c, Access::Read));
        // The establishing nexus leaves; the reservation stays with B.
        lu.out(&a, 0, 0, 1, 0).unwrap();
        assert!(lu.r.reservation.is_some());
        assert!(!lu.r.conflicts(&b, Access::Write));
        lu.out(&c, 0, 0, 0, 3).unwrap();
        lu.out(&c, 3, 0, 3, 0).unwrap();
        assert_eq!(lu.uas.pop(&b), Some(Asc::RESERVATIONS_PREEMPTED));
        assert!(lu.r.registrations.is_empty());
        assert!(lu.r.reservation.is_none());
    }

    #[test]
    fn parameter_list_checks() {
        let mut lu = Lu::new();
        let a = ItNexus::new("a", 1);
        let p = params(0, 1, 0x01);
        assert_eq!(
            lu.r.persistent_reserve_out(&a, cdb(0, 0, 24), &p, &mut lu.uas),
            Err(Sense::invalid_field_in_parameter_list(20, Some(0)).into())
        );
        assert_eq!(
            lu.r.persistent_reserve_out(&a, cdb(0, 0, 23), &p, &mut lu.uas),
            Err(Sense::parameter_list_length_error().into())
        );
        lu.out(&a, 0, 0, 0, 1).unwrap();
        assert_eq!(
            lu.out(&a, 1, 2, 1, 0),
            Err(Sense::invalid_field_in_cdb(2, Some(3)).into())
        );
    }

    #[test]
    fn spc2_reserve_with_persistent_reservation() {
        let mut lu = Lu::new();
        let (a, b) = (ItNexus::new("a", 1), ItNexus::new("b", 1));
        lu.out(&a, 0, 0, 0, 1).unwrap();
        lu.out(&a, 1, WRITE_EXCLUSIVE, 1, 0).unwrap();
        assert_eq!(lu.r.reserve(&a), Ok(()));
        assert_eq!(lu.r.reserve(&b), Err(ReservationError::Conflict));
        assert!(lu.r.spc2.is_none());
    }

    #[test]
    fn read_full_status_layout() {
        let mut lu = Lu::new();
        let a = ItNexus::new("a", 3);
        lu.out(&a, 0, 0, 0, 0x1122).unwrap();
        lu.out(&a, 1, WRITE_EXCLUSIVE, 0x1122, 0).unwrap();
        let data = lu.r.persistent_reserve_in(3, &|_| vec![1, 2, 3, 4]);
        assert_eq!(&data[..8], &[0, 0, 0, 1, 0, 0, 0, 28]);
        assert_eq!(&data[8..16], &0x1122u64.to_be_bytes());
        assert_eq!(data[20], 1);
        assert_eq!(data[21], WRITE_EXCLUSIVE);
        assert_eq!(&data[26..28], &[0, 3]);
        assert_eq!(&data[28..36], &[0, 0, 0, 4, 1, 2, 3, 4]);
        let data = lu.r.persistent_reserve_in(1, &|_| vec![]);
        assert_eq!(data.len(), 24);
        assert_eq!(data[21], WRITE_EXCLUSIVE);
    }
}
