//! Unit attention conditions per I_T nexus (SAM-5 §5.14, SPC-4 §4.5.6 / §5.x "unit attention
//! condition").
//!
//! Each I_T nexus has a small queue of pending unit attentions. The first command seen from a
//! nexus establishes POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (29h/00h). A reset condition
//! (ASC 29h) replaces whatever else is queued, because it tells the initiator to assume all
//! state is lost. Reporting consumes one condition per command; UA interlock is not supported.

use std::collections::{HashMap, VecDeque};

use crate::ItNexus;
use crate::sense::Asc;

/// Queued conditions kept per nexus; older conditions win when the queue is full (SPC-4
/// lets a device server drop conditions when it runs out of room).
const MAX_QUEUED: usize = 8;

/// The unit attention queues of one logical unit.
#[derive(Debug, Default)]
pub(crate) struct UnitAttentions {
    queues: HashMap<ItNexus, VecDeque<Asc>>,
}

impl UnitAttentions {
    /// Registers `nexus` if new, establishing the power-on unit attention for it.
    pub(crate) fn touch(&mut self, nexus: &ItNexus) {
        if !self.queues.contains_key(nexus) {
            self.queues.insert(
                nexus.clone(),
                VecDeque::from([Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED]),
            );
        }
    }

    /// Establishes `asc` for `nexus` (which becomes known if it was not).
    pub(crate) fn raise(&mut self, nexus: &ItNexus, asc: Asc) {
        let queue = self.queues.entry(nexus.clone()).or_default();
        push(queue, asc);
    }

    /// Establishes `asc` for every known nexus except `except`.
    pub(crate) fn raise_all(&mut self, asc: Asc, except: Option<&ItNexus>) {
        for (nexus, queue) in &mut self.queues {
            if Some(nexus) != except {
                push(queue, asc);
            }
        }
    }

    /// Takes the oldest condition pending for `nexus`.
    pub(crate) fn pop(&mut self, nexus: &ItNexus) -> Option<Asc> {
        self.queues.get_mut(nexus)?.pop_front()
    }

    /// The conditions pending for `nexus`, oldest first.
    #[cfg(test)]
    pub(crate) fn pending(&self, nexus: &ItNexus) -> Vec<Asc> {
        self.queues
            .get(nexus)
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

fn push(queue: &mut VecDeque<Asc>, asc: Asc) {
    if asc.asc() == 0x29 {
        queue.clear();
    } else if queue.contains(&asc) || queue.iter().any(|q| q.asc() == 0x29) {
        // A pending reset condition already tells the initiator to re-read everything.
        return;
    }
    if queue.len() < MAX_QUEUED {
        queue.push_back(asc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_contact_gets_power_on_once() {
        let mut uas = UnitAttentions::default();
        let a = ItNexus::new("a", 1);
        uas.touch(&a);
        uas.touch(&a);
        assert_eq!(
            uas.pop(&a),
            Some(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED)
        );
        assert_eq!(uas.pop(&a), None);
        uas.touch(&a);
        assert_eq!(uas.pop(&a), None);
    }

    #[test]
    fn raise_all_skips_the_originator_and_dedups() {
        let mut uas = UnitAttentions::default();
        let (a, b) = (ItNexus::new("a", 1), ItNexus::new("b", 1));
        uas.touch(&a);
        uas.touch(&b);
        uas.pop(&a);
        uas.pop(&b);
        uas.raise_all(Asc::MODE_PARAMETERS_CHANGED, Some(&a));
        uas.raise_all(Asc::MODE_PARAMETERS_CHANGED, Some(&a));
        assert!(uas.pending(&a).is_empty());
        assert_eq!(uas.pending(&b), [Asc::MODE_PARAMETERS_CHANGED]);
    }

    #[test]
    fn reset_replaces_other_conditions() {
        let mut uas = UnitAttentions::default();
        let a = ItNexus::new("a", 1);
        uas.raise(&a, Asc::MODE_PARAMETERS_CHANGED);
        uas.raise(&a, Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
        uas.raise(&a, Asc::RESERVATIONS_RELEASED);
        assert_eq!(uas.pending(&a), [Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED]);
        for i in 0..20 {
            uas.raise(&ItNexus::new("b", 1), Asc(0x3F00 + i));
        }
        assert_eq!(uas.pending(&ItNexus::new("b", 1)).len(), MAX_QUEUED);
    }
}
