//! `reel serve`: the library on its embedded default.
//!
//! A new data directory gets 20 blank LTO-9 cartridges (REL001L9…REL020L9). The store and the
//! cartridges are ready and persist across restarts; Ctrl-C or SIGTERM syncs and stops. The
//! iSCSI target, changer and drives that expose them come next (see the README's status).

use anyhow::Context;
use reel_media::{CartridgeInfo, MediaType};

use crate::admin::{barcodes, human, now};
use crate::data_dir::{self, DataDirArg};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub data: DataDirArg,
    /// Blank LTO-9 cartridges to create when the data directory is new.
    #[arg(long, default_value_t = 20)]
    pub cartridges: u32,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dir = &args.data.dir;
    let carts = data_dir::open(dir)?;
    if carts.list()?.is_empty() && args.cartridges > 0 {
        for b in barcodes("REL", 1, args.cartridges, MediaType::Lto9)? {
            carts.create(&CartridgeInfo::new(b, MediaType::Lto9, now()))?;
        }
    }
    let list = carts.list()?;
    let stats = carts.store().stats()?;
    println!(
        "reel {} — data directory {}",
        env!("CARGO_PKG_VERSION"),
        dir.display()
    );
    println!(
        "library store ready: {} cartridges ({} … {}), {} written, {} stored ({:.2}:1)",
        list.len(),
        list.first().map_or("-", |(_, i)| i.barcode().as_str()),
        list.last().map_or("-", |(_, i)| i.barcode().as_str()),
        human(stats.logical_bytes),
        human(stats.stored_bytes),
        stats.reduction_ratio()
    );
    println!("iSCSI target, tape drives and changer: not in this build yet (see README, Status)");
    println!("Ctrl-C or SIGTERM stops reel cleanly");

    let (tx, rx) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .context("installing the signal handler")?;
    let _ = rx.recv();
    carts
        .store()
        .sync()
        .context("syncing the store on shutdown")?;
    drop(carts);
    println!("reel stopped; everything is synced");
    Ok(())
}
