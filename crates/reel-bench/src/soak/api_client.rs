//! The REST API client: creates a cartridge in the vault, imports it into a free
//! import/export element, moves it to a free slot and back, exports it to the vault and
//! deletes it, again and again, beside the initiators. The elements it uses are reserved in
//! the same model the initiators use, so every request is one that must succeed: any 4xx is
//! a failure, and a 5xx always is. After a restart it first clears away whatever a kill left
//! of its cartridges.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail};
use reel_api::cartridges::{CreateRequest, ListQuery};

use super::library::Library;
use super::model::Rng;
use super::{Epoch, Soak};
use crate::api::ReelApi;

/// Barcode prefix of the API client's cartridges (no library's pool takes them).
pub const PREFIX: &str = "Q";

/// Before the clients start: deletes what a kill left of their cartridges.
pub fn clear_up(soak: &Soak, epoch: &Epoch, api: &ReelApi) {
    let mut rng = Rng::new(soak.seed ^ 0xc1ea ^ u64::from(epoch.n));
    if let Err(e) = reconcile(soak, epoch, api, &mut rng) {
        soak.fail(format!(
            "API client, clearing up after restart {}: {e:#}",
            epoch.n - 1
        ));
    }
}

pub fn worker(soak: Arc<Soak>, epoch: Arc<Epoch>, api: ReelApi, k: usize) {
    let mut rng = Rng::new(soak.seed ^ 0xa91 ^ (u64::from(epoch.n) << 40) ^ k as u64);
    let result = (|| {
        while !epoch.over() && !epoch.verify_only {
            cycle(&soak, &epoch, &api, &mut rng)?;
        }
        anyhow::Ok(())
    })();
    soak.worker_ended(&epoch, &format!("API client {k}"), result);
}

/// One request that must succeed; 429 is waited out.
fn request<T>(
    soak: &Soak,
    what: &str,
    call: impl Fn() -> Result<T, reel_api::Error>,
) -> anyhow::Result<T> {
    loop {
        let error = match call() {
            Ok(answer) => {
                soak.stats.api_requests.fetch_add(1, Ordering::Relaxed);
                return Ok(answer);
            }
            Err(e) => e,
        };
        let Some(status) = error.status() else {
            return Err(anyhow!("{what}: {error}"));
        };
        soak.stats.api_requests.fetch_add(1, Ordering::Relaxed);
        match status {
            429 => {
                soak.stats.api_429.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(500));
            }
            500.. => {
                soak.stats.api_5xx.fetch_add(1, Ordering::Relaxed);
                bail!("{what}: HTTP {status} (server error): {error}");
            }
            _ => {
                soak.stats.api_4xx.fetch_add(1, Ordering::Relaxed);
                bail!("{what}: HTTP {status}: {error}");
            }
        }
    }
}

fn api_move(
    soak: &Soak,
    api: &ReelApi,
    lib: &Library,
    from: u16,
    to: u16,
    barcode: &str,
) -> anyhow::Result<()> {
    request(soak, "move", || api.move_medium(&lib.iqn, from, to))?;
    lib.set(from, None);
    lib.set(to, Some(barcode));
    soak.stats.api_moves.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn export_and_delete(
    soak: &Soak,
    api: &ReelApi,
    lib: &Library,
    ie: u16,
    barcode: &str,
) -> anyhow::Result<()> {
    request(soak, "export", || api.export(&lib.iqn, ie))?;
    lib.set(ie, None);
    soak.stats.api_exports.fetch_add(1, Ordering::Relaxed);
    delete(soak, api, barcode)
}

fn delete(soak: &Soak, api: &ReelApi, barcode: &str) -> anyhow::Result<()> {
    request(soak, "delete", || api.delete_cartridge(barcode))?;
    soak.stats.api_deletes.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn cycle(soak: &Soak, epoch: &Epoch, api: &ReelApi, rng: &mut Rng) -> anyhow::Result<()> {
    let n = soak.api_seq.fetch_add(1, Ordering::Relaxed);
    let n = u32::try_from(n).map_err(|_| anyhow!("cartridge number {n} is past u32"))?;
    let created = request(soak, "create", || {
        api.create_cartridges(&CreateRequest::new(PREFIX, n, 1, "lto9"))
    })?;
    let barcode = created
        .first()
        .ok_or_else(|| anyhow!("POST /api/v1/cartridges answered no cartridge"))?
        .barcode
        .clone();
    soak.stats.api_creates.fetch_add(1, Ordering::Relaxed);
    let lib = soak.libs[rng.below(soak.libs.len() as u64) as usize].clone();
    let Some((ie, slot)) = lib.plan_api(rng) else {
        // Nothing free in that library just now: the cartridge goes again.
        return delete(soak, api, &barcode);
    };
    lib.lock().busy.insert(barcode.clone());
    let steps = (|| {
        request(soak, "import", || api.import(&lib.iqn, &barcode, Some(ie)))?;
        lib.set(ie, Some(&barcode));
        soak.stats.api_imports.fetch_add(1, Ordering::Relaxed);
        api_move(soak, api, &lib, ie, slot, &barcode)?;
        if epoch.over() {
            // Left in the slot; the next restart's clearing-up takes it out.
            return anyhow::Ok(());
        }
        api_move(soak, api, &lib, slot, ie, &barcode)?;
        export_and_delete(soak, api, &lib, ie, &barcode)
    })();
    if steps.is_ok() {
        lib.release(&[ie, slot]);
        if !epoch.over() {
            lib.lock().busy.remove(&barcode);
        }
    }
    steps
}

/// Deletes the API client's cartridges a kill left behind, wherever they are.
fn reconcile(soak: &Soak, epoch: &Epoch, api: &ReelApi, rng: &mut Rng) -> anyhow::Result<()> {
    let query = ListQuery {
        search: Some(PREFIX.into()),
        location: None,
    };
    let list = request(soak, "list", || api.cartridges(&query))?;
    for c in &list {
        let barcode = c.barcode.as_str();
        if !barcode.starts_with(PREFIX) {
            continue;
        }
        let loc = &c.location;
        if loc.vault {
            delete(soak, api, barcode)?;
            soak.stats.api_cleared.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let name = loc.library.as_deref().unwrap_or_default();
        let Some(lib) = soak.libs.iter().find(|l| l.iqn == name) else {
            bail!("cartridge {barcode} is in a library the soak does not know: {loc:?}");
        };
        let address = loc
            .address
            .ok_or_else(|| anyhow!("cartridge {barcode}: location without an address: {loc:?}"))?;
        match loc.kind.as_deref() {
            Some("import_export") => export_and_delete(soak, api, lib, address, barcode)?,
            Some("slot") => {
                let ie = loop {
                    if let Some((ie, slot)) = lib.plan_api(rng) {
                        lib.release(&[slot]);
                        break ie;
                    }
                    if epoch.over() {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                };
                lib.lock().reserved.insert(address);
                api_move(soak, api, lib, address, ie, barcode)?;
                export_and_delete(soak, api, lib, ie, barcode)?;
                lib.release(&[address, ie]);
            }
            _ => bail!("cartridge {barcode} is where the API client never puts one: {loc:?}"),
        }
        lib.lock().busy.remove(barcode);
        soak.stats.api_cleared.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
