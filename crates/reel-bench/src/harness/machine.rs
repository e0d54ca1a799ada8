//! The machine a report was measured on: `reel-sysinfo`'s description plus the load average
//! at the start and the end of the run (other load skews wall-clock speeds).

use serde::{Deserialize, Serialize};

/// The `machine` object of the tape and soak reports (its JSON fields stay flat).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    #[serde(flatten)]
    pub host: reel_sysinfo::Machine,
    pub load_average_start: String,
    pub load_average_end: String,
}

impl Machine {
    /// This machine, with the load average now as the start's.
    pub fn at_start() -> Machine {
        Machine {
            host: reel_sysinfo::Machine::describe(),
            load_average_start: reel_sysinfo::load_average(),
            load_average_end: String::new(),
        }
    }

    /// Records the load average at the end of the run.
    pub fn finish(&mut self) {
        self.load_average_end = reel_sysinfo::load_average();
    }
}
