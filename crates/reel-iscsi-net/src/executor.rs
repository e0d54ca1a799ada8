//! One worker thread per logical unit.
//!
//! Invariant: the commands of one LU run one at a time, in the order they were
//! submitted. The connection hands commands out in CmdSN order, so a tape drive
//! sees them in the order the initiator issued them, and a command that blocks
//! on storage holds up only its own LU.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use parking_lot::Mutex;
use reel_iscsi::pdu::TaskAttr;
use reel_iscsi::session::{Command, ScsiOutcome};
use reel_scsi::{ItNexus, LunTable, Request, TaskAttribute};
use tokio::sync::mpsc;

use crate::target::outcome_from;

pub(crate) struct Job {
    pub luns: Arc<LunTable>,
    pub nexus: ItNexus,
    pub command: Command,
    pub done: mpsc::UnboundedSender<(u32, ScsiOutcome)>,
}

/// Workers keyed by (LUN table identity, LUN).
pub(crate) struct Executor {
    workers: Mutex<HashMap<(usize, u64), std_mpsc::Sender<Job>>>,
}

fn attribute(attr: TaskAttr) -> TaskAttribute {
    match attr {
        TaskAttr::Ordered => TaskAttribute::Ordered,
        TaskAttr::HeadOfQueue => TaskAttribute::HeadOfQueue,
        TaskAttr::Aca => TaskAttribute::Aca,
        TaskAttr::Untagged | TaskAttr::Simple => TaskAttribute::Simple,
    }
}

/// Runs a job here and now.
fn execute(job: Job) -> (u32, ScsiOutcome) {
    let lun = reel_scsi::decode_lun(job.command.lun);
    let request = Request {
        nexus: &job.nexus,
        cdb: &job.command.cdb,
        data_out: job.command.data_out,
        data_in_len: job.command.data_in_len,
        attribute: attribute(job.command.attr),
    };
    // Data-Out beyond the unit's limit was never received: the unit answers without running it.
    let response = if job.command.data_out_refused {
        job.luns.refuse_data_out(lun, request)
    } else {
        job.luns.execute(lun, request)
    };
    (job.command.itt, outcome_from(response))
}

/// Runs a job and reports its end on the job's channel (worker threads).
fn run(job: Job) {
    let done = job.done.clone();
    let _ = done.send(execute(job));
}

impl Executor {
    pub fn new() -> Self {
        Executor {
            workers: Mutex::new(HashMap::new()),
        }
    }

    /// Queues `job` on its LU's worker, or — for absent LUNs and units that never block —
    /// runs it at once and returns its result for the caller to complete.
    pub fn submit(&self, job: Job) -> Option<(u32, ScsiOutcome)> {
        let lun = reel_scsi::decode_lun(job.command.lun);
        let Some(unit) = job.luns.get(lun) else {
            // Absent LUNs answer from tables (REPORT LUNS, INQUIRY, errors): no worker, and
            // no thread per LUN number a hostile initiator can make up.
            return Some(execute(job));
        };
        if !unit.may_block() {
            // Nothing to wait for (e.g. a null disk): inline, no thread hand-off. Commands
            // of one connection still run in CmdSN order.
            return Some(execute(job));
        }
        let key = (Arc::as_ptr(&job.luns) as usize, lun);
        let mut workers = self.workers.lock();
        let sender = workers.entry(key).or_insert_with(|| {
            let (tx, rx) = std_mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name(format!("lu-{lun}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        run(job);
                    }
                })
                .expect("spawning an LU worker thread");
            tx
        });
        if let Err(std_mpsc::SendError(job)) = sender.send(job) {
            return Some(execute(job));
        }
        None
    }
}
