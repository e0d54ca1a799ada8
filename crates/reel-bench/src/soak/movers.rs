//! A changer session: MOVE MEDIUM after MOVE MEDIUM (slot to slot, slot to one of the
//! library's spare drives and back), up to the queue depth in flight, each on elements the
//! model reserved for it so that no two moves in flight touch the same element.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::anyhow;
use bytes::Bytes;
use tokio::task::JoinSet;

use super::library::{Library, Move};
use super::model::Rng;
use super::{Epoch, Soak};
use reel_scsi::initiator::{describe, smc};

pub async fn worker(soak: Arc<Soak>, epoch: Arc<Epoch>, lib: Arc<Library>, k: usize) {
    let name = format!("library {} changer session {k}", lib.index);
    let result = run(&soak, &epoch, &lib, k, &name).await;
    soak.worker_ended(&epoch, &name, result);
}

async fn run(
    soak: &Soak,
    epoch: &Epoch,
    lib: &Arc<Library>,
    k: usize,
    name: &str,
) -> anyhow::Result<()> {
    let client = crate::session::connect(epoch.addr, &lib.iqn).await?;
    let probe = crate::session::Drive {
        name: name.to_string(),
        client: client.clone(),
        lun: lib.changer_lun,
        changer: None,
        timeout: epoch.timeout,
    };
    probe.clear_attentions(lib.changer_lun).await?;
    let mut rng =
        Rng::new(soak.seed ^ 0x5eed ^ (u64::from(epoch.n) << 40) ^ (lib.index * 64 + k) as u64);
    let mut set: JoinSet<(Move, anyhow::Result<reel_iscsi::initiator::ScsiResult>)> =
        JoinSet::new();
    let timeout = epoch.timeout;
    loop {
        while set.len() < soak.queue_depth && !epoch.over() {
            let unread = |b: &str| soak.needs_verify(b, epoch.n);
            let Some(mv) = lib.plan_mover(&mut rng, &unread) else {
                break;
            };
            lib.begin(&mv);
            let client = client.clone();
            let cdb = smc::move_medium(lib.transport, mv.from, mv.to);
            let lun = lib.changer_lun;
            set.spawn(async move {
                let r = tokio::time::timeout(timeout, client.execute(lun, &cdb, Bytes::new(), 0))
                    .await
                    .map_err(|_| {
                        anyhow!(
                            "MOVE MEDIUM did not complete within {} s",
                            timeout.as_secs()
                        )
                    })
                    .and_then(|r| r.map_err(anyhow::Error::from));
                (mv, r)
            });
        }
        if set.is_empty() {
            if epoch.over() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let Some(joined) = set.join_next().await else {
            continue;
        };
        let (mv, result) = joined.map_err(|e| anyhow!("a move task failed: {e}"))?;
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                // In doubt: the kill (or a real failure, which the caller reports).
                set.abort_all();
                return Err(e.context(format!(
                    "MOVE MEDIUM {} from {:#06x} to {:#06x}",
                    mv.barcode, mv.from, mv.to
                )));
            }
        };
        if r.status == 0 {
            lib.finish(&mv, true, false);
            soak.stats.moves.fetch_add(1, Ordering::Relaxed);
            soak.stats.changer_moves.fetch_add(1, Ordering::Relaxed);
        } else if r.status == 2 && describe::is_unit_attention(r.sense.as_deref()) {
            // Not executed (SAM-5 §5.14): plan again.
            soak.stats.unit_attentions.fetch_add(1, Ordering::Relaxed);
            lib.finish(&mv, false, false);
        } else {
            lib.finish(&mv, false, false);
            let cdb = smc::move_medium(lib.transport, mv.from, mv.to);
            soak.fail(
                probe
                    .failure(
                        lib.changer_lun,
                        &cdb,
                        &r,
                        &format!(
                            "{} from {:#06x} to {:#06x} (the model had both free for it)",
                            mv.barcode, mv.from, mv.to
                        ),
                    )
                    .to_string(),
            );
            soak.stats.failed_moves.fetch_add(1, Ordering::Relaxed);
        }
    }
}
