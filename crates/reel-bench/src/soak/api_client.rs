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
use serde_json::{Value, json};

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
    if let Err(e) = result
        && !epoch.killing.load(Ordering::SeqCst)
    {
        soak.fail(format!("API client {k}: {e:#}"));
    }
}

/// One request that must answer with one of `expect`; 429 is waited out.
fn request(
    soak: &Soak,
    api: &ReelApi,
    method: &str,
    path: &str,
    body: Option<Value>,
    expect: &[u16],
) -> anyhow::Result<Value> {
    loop {
        let (status, answer) = api.call(method, path, body.clone())?;
        soak.stats.api_requests.fetch_add(1, Ordering::Relaxed);
        if expect.contains(&status) {
            return Ok(answer);
        }
        let message = answer["error"]["message"]
            .as_str()
            .map_or_else(|| answer.to_string(), str::to_string);
        match status {
            429 => {
                soak.stats.api_429.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(500));
            }
            500.. => {
                soak.stats.api_5xx.fetch_add(1, Ordering::Relaxed);
                bail!("{method} {path}: HTTP {status} (server error): {message}");
            }
            _ => {
                soak.stats.api_4xx.fetch_add(1, Ordering::Relaxed);
                bail!("{method} {path}: HTTP {status}, expected {expect:?}: {message}");
            }
        }
    }
}

fn library_path(lib: &Library, what: &str) -> String {
    format!("/api/v1/libraries/{}/{what}", lib.iqn)
}

fn api_move(
    soak: &Soak,
    api: &ReelApi,
    lib: &Library,
    from: u16,
    to: u16,
    barcode: &str,
) -> anyhow::Result<()> {
    request(
        soak,
        api,
        "POST",
        &library_path(lib, "move"),
        Some(json!({"from": from, "to": to})),
        &[200],
    )?;
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
    request(
        soak,
        api,
        "POST",
        &library_path(lib, "export"),
        Some(json!({"from": ie})),
        &[200],
    )?;
    lib.set(ie, None);
    soak.stats.api_exports.fetch_add(1, Ordering::Relaxed);
    delete(soak, api, barcode)
}

fn delete(soak: &Soak, api: &ReelApi, barcode: &str) -> anyhow::Result<()> {
    request(
        soak,
        api,
        "DELETE",
        &format!("/api/v1/cartridges/{barcode}"),
        None,
        &[204],
    )?;
    soak.stats.api_deletes.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn cycle(soak: &Soak, epoch: &Epoch, api: &ReelApi, rng: &mut Rng) -> anyhow::Result<()> {
    let n = soak.api_seq.fetch_add(1, Ordering::Relaxed);
    let created = request(
        soak,
        api,
        "POST",
        "/api/v1/cartridges",
        Some(json!({"prefix": PREFIX, "first": n, "count": 1, "media": "lto9"})),
        &[201],
    )?;
    let barcode = created[0]["barcode"]
        .as_str()
        .ok_or_else(|| anyhow!("POST /api/v1/cartridges answered {created} (no barcode)"))?
        .to_string();
    soak.stats.api_creates.fetch_add(1, Ordering::Relaxed);
    let lib = soak.libs[rng.below(soak.libs.len() as u64) as usize].clone();
    let Some((ie, slot)) = lib.plan_api(rng) else {
        // Nothing free in that library just now: the cartridge goes again.
        return delete(soak, api, &barcode);
    };
    lib.lock().busy.insert(barcode.clone());
    let steps = (|| {
        request(
            soak,
            api,
            "POST",
            &library_path(&lib, "import"),
            Some(json!({"barcode": barcode, "to": ie})),
            &[200],
        )?;
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
    let list = request(
        soak,
        api,
        "GET",
        &format!("/api/v1/cartridges?search={PREFIX}"),
        None,
        &[200],
    )?;
    for c in list.as_array().into_iter().flatten() {
        let Some(barcode) = c["barcode"].as_str().filter(|b| b.starts_with(PREFIX)) else {
            continue;
        };
        let loc = &c["location"];
        if loc["vault"].as_bool() == Some(true) {
            delete(soak, api, barcode)?;
            soak.stats.api_cleared.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let name = loc["library"].as_str().unwrap_or_default();
        let Some(lib) = soak.libs.iter().find(|l| l.iqn == name) else {
            bail!("cartridge {barcode} is in a library the soak does not know: {loc}");
        };
        let address = loc["address"]
            .as_u64()
            .ok_or_else(|| anyhow!("cartridge {barcode}: location without an address: {loc}"))?
            as u16;
        match loc["kind"].as_str() {
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
            _ => bail!("cartridge {barcode} is where the API client never puts one: {loc}"),
        }
        lib.lock().busy.remove(barcode);
        soak.stats.api_cleared.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
