//! Administration commands that work directly on a data directory (while no server runs).
//! With the server running, `reel ctl` does the same through the REST API.

use anyhow::{Context, bail};
use reel_media::{Barcode, CartridgeInfo, MediaType, UnixTime};

use crate::data_dir::{self, DataDirArg};

#[derive(clap::Subcommand, Debug)]
pub enum CartridgeCommand {
    /// List cartridges.
    List(DataDirArg),
    /// Create blank cartridges with consecutive LTO-style barcodes (PREFIX + number + suffix).
    Create(CreateArgs),
    /// Delete a cartridge and its data (refused for WORM media and for a cartridge an archive,
    /// restore or share has). Run `reel reclaim` afterwards. An archived cartridge's image is
    /// deleted from the archive location when the server next starts.
    Delete {
        barcode: String,
        #[command(flatten)]
        data: DataDirArg,
    },
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// Barcode prefix: 1 to 3 characters (A–Z, 0–9), e.g. REL gives REL001L9.
    #[arg(long, default_value = "REL")]
    pub prefix: String,
    /// Number of the first cartridge.
    #[arg(long, default_value_t = 1)]
    pub first: u32,
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    /// Media: lto5..lto9, or lto5-worm..lto9-worm.
    #[arg(long, default_value = "lto9")]
    pub media: String,
    /// Capacity per cartridge (e.g. 64M, 2G) instead of the media's native one: small
    /// cartridges reach early warning and end of medium quickly (tests, `btape fill`).
    #[arg(long, value_name = "SIZE")]
    pub capacity: Option<String>,
    /// Create the cartridges with their write-protect switch set.
    #[arg(long)]
    pub write_protected: bool,
    #[command(flatten)]
    pub data: DataDirArg,
}

pub fn parse_media(name: &str) -> anyhow::Result<MediaType> {
    let wanted = name.to_ascii_lowercase().replace(['-', '_', ' '], "");
    MediaType::ALL
        .into_iter()
        .find(|m| {
            m.to_string()
                .to_ascii_lowercase()
                .replace(['-', '_', ' '], "")
                == wanted
        })
        .with_context(|| format!("unknown media {name:?}: use lto5..lto9 or lto5-worm..lto9-worm"))
}

/// Barcodes PREFIX + zero-padded number + media suffix, 8 characters like real LTO labels.
pub fn barcodes(
    prefix: &str,
    first: u32,
    count: u32,
    media: MediaType,
) -> anyhow::Result<Vec<Barcode>> {
    if prefix.is_empty()
        || prefix.len() > 3
        || !prefix
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        bail!("barcode prefix {prefix:?} must be 1 to 3 characters A–Z or 0–9");
    }
    let digits = 6 - prefix.len();
    let last = u64::from(first) + u64::from(count) - 1;
    if count == 0 || last >= 10u64.pow(digits as u32) {
        bail!("cartridges {first}..={last} do not fit in {digits} digits after prefix {prefix:?}");
    }
    (u64::from(first)..=last)
        .map(|n| {
            let label = format!("{prefix}{n:0digits$}{}", media.barcode_suffix());
            Barcode::new(&label).with_context(|| format!("barcode {label}"))
        })
        .collect()
}

pub fn now() -> UnixTime {
    UnixTime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

pub fn cartridges(cmd: CartridgeCommand) -> anyhow::Result<()> {
    match cmd {
        CartridgeCommand::List(data) => {
            let carts = data_dir::open(&data.dir)?;
            println!(
                "{:<10} {:<12} {:>14} {:>14} {:>6} {:>5}  STATE",
                "BARCODE", "MEDIA", "CAPACITY", "WRITTEN", "LOADS", "WP"
            );
            let states = carts.archive_states()?;
            for (_, info) in carts.list()? {
                let barcode = info.barcode().as_str();
                let state = states.get(barcode);
                // An archived cartridge's data is in its image, not in the store.
                let written: u64 = match state {
                    Some(reel_volume::ArchiveState::Archived { data_bytes, .. }) => *data_bytes,
                    _ => carts
                        .mount(barcode)?
                        .partitions()
                        .iter()
                        .map(reel_media::PartitionStore::data_bytes)
                        .sum(),
                };
                println!(
                    "{:<10} {:<12} {:>14} {:>14} {:>6} {:>5}  {}",
                    barcode,
                    info.media_type().to_string(),
                    human(info.partition_capacities().iter().sum()),
                    human(written),
                    info.load_count(),
                    if info.write_protected() { "yes" } else { "no" },
                    state.map_or("available", |s| s.name())
                );
            }
            Ok(())
        }
        CartridgeCommand::Create(args) => {
            let media = parse_media(&args.media)?;
            let labels = barcodes(&args.prefix, args.first, args.count, media)?;
            let carts = data_dir::open(&args.data.dir)?;
            let capacity = args
                .capacity
                .as_deref()
                .map(reel_datagen::parse_size)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--capacity: {e}"))?;
            for b in labels {
                let label = b.as_str().to_string();
                let mut info =
                    CartridgeInfo::new(b, media, now()).with_write_protected(args.write_protected);
                if let Some(bytes) = capacity {
                    info = info
                        .with_capacity(bytes)
                        .with_context(|| format!("capacity of {label}"))?;
                }
                carts
                    .create(&info)
                    .with_context(|| format!("creating {label}"))?;
                let wp = if args.write_protected {
                    ", write-protected"
                } else {
                    ""
                };
                println!("created {label} ({media}, {}{wp})", human(info.capacity()));
            }
            Ok(())
        }
        CartridgeCommand::Delete { barcode, data } => {
            let carts = data_dir::open(&data.dir)?;
            match carts.delete(&barcode)? {
                None => println!("deleted {barcode}; run `reel reclaim` to free its space"),
                Some(generation) => println!(
                    "deleted {barcode}, which was archived; its image ({generation:x}) is deleted from the archive location when the server next starts"
                ),
            }
            Ok(())
        }
    }
}

/// Re-reads and re-hashes everything; exits non-zero if anything is damaged.
pub fn verify(data: DataDirArg) -> anyhow::Result<()> {
    let carts = data_dir::open(&data.dir)?;
    let report = carts
        .store()
        .scrub(&mut |done, total| progress("verifying packs", done, total))?;
    eprintln!();
    println!(
        "checked {} packs, {} chunks, {} bytes",
        report.packs_checked, report.chunks_checked, report.bytes_checked
    );
    if report.is_clean() {
        println!("no damage found");
        return Ok(());
    }
    for (id, why) in &report.bad_chunks {
        println!("bad chunk {id}: {why}");
    }
    for problem in &report.index_problems {
        println!("catalog: {problem}");
    }
    for d in carts.locate_damage(&report.damage)? {
        let records = d.records.map_or("records unknown".to_string(), |(a, b)| {
            format!("records {a}..={b}")
        });
        println!(
            "damaged: cartridge {} partition {} {records}: {}",
            d.barcode.as_deref().unwrap_or("(none)"),
            d.partition,
            d.reason
        );
    }
    bail!(
        "{} damaged ranges, {} bad chunks, {} chunk index problems",
        report.damage.len(),
        report.bad_chunks.len(),
        report.index_problems.len()
    )
}

pub fn reclaim(data: DataDirArg) -> anyhow::Result<()> {
    let carts = data_dir::open(&data.dir)?;
    let r = carts
        .store()
        .reclaim(0.5, &mut |done, total| progress("reclaiming", done, total))?;
    eprintln!();
    println!(
        "examined {} packs: deleted {}, rewrote {}, dropped {} chunks, freed {}",
        r.packs_examined,
        r.packs_deleted,
        r.packs_rewritten,
        r.chunks_dropped,
        human(r.bytes_freed)
    );
    Ok(())
}

/// Compacts the catalog file, any size (`ChunkStore::compact_catalog_now`).
pub fn compact(data: DataDirArg) -> anyhow::Result<()> {
    let carts = data_dir::open(&data.dir)?;
    eprintln!("compacting the catalog (about 10-20 ms per MB of file)");
    match carts.store().compact_catalog_now()? {
        Ok(c) => println!(
            "catalog file compacted: {} -> {} in {:.1} s",
            human(c.before),
            human(c.after),
            c.took.as_secs_f64()
        ),
        Err(why) => println!("catalog file left as it is: {why}"),
    }
    Ok(())
}

pub fn stats(data: DataDirArg) -> anyhow::Result<()> {
    let carts = data_dir::open(&data.dir)?;
    let s = carts.store().stats()?;
    println!("cartridges        {}", carts.list()?.len());
    println!("written (logical) {}", human(s.logical_bytes));
    println!("unique            {}", human(s.unique_bytes));
    println!("stored (packs)    {}", human(s.stored_bytes));
    println!("dedup             {:.2}:1", s.dedup_ratio());
    println!("compression       {:.2}:1", s.compression_ratio());
    let on_disk = crate::disk_usage::bytes_on_disk(&data.dir)?;
    println!(
        "on disk           {}  (everything under {})",
        human(on_disk),
        data.dir.display()
    );
    println!(
        "reduction         {:.2}:1  (store: packs only)",
        s.reduction_ratio()
    );
    println!(
        "reduction         {:.2}:1  (on disk: the data directory, catalog included)",
        if on_disk > 0 {
            s.logical_bytes as f64 / on_disk as f64
        } else {
            1.0
        }
    );
    println!("chunks            {}  in {} packs", s.chunks, s.packs);
    // The catalog's share of "on disk", table by table: what the reduction on disk pays for.
    let space = carts.store().catalog_space()?;
    let file = crate::disk_usage::bytes_on_disk(&data.dir.join(data_dir::CATALOG_DIR))?;
    println!(
        "catalog           {}  on disk, {} in tables (largest first):",
        human(file),
        human(space.total_bytes())
    );
    let (large, small): (Vec<_>, Vec<_>) = space
        .tables
        .iter()
        .partition(|t| t.total_bytes() >= 64 << 10);
    for t in large {
        println!(
            "  {:<22} {:>10}  {:>9} rows",
            t.name,
            human(t.total_bytes()),
            t.rows
        );
    }
    println!(
        "  {} smaller tables     {:>10}",
        small.len(),
        human(small.iter().map(|t| t.total_bytes()).sum())
    );
    Ok(())
}

fn progress(what: &str, done: u64, total: u64) {
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    eprint!("\r{what}: {done}/{total} ({pct} %)");
}

pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit < UNITS.len() - 1 {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barcodes_are_lto_labels() {
        let b = barcodes("REL", 1, 3, MediaType::Lto9).unwrap();
        let labels: Vec<&str> = b.iter().map(Barcode::as_str).collect();
        assert_eq!(labels, ["REL001L9", "REL002L9", "REL003L9"]);
        assert_eq!(
            barcodes("A", 7, 1, MediaType::Lto8Worm).unwrap()[0].as_str(),
            "A00007LY"
        );
        assert!(
            barcodes("REL", 999, 2, MediaType::Lto9).is_err(),
            "1000 does not fit in 3 digits"
        );
        assert!(barcodes("rel", 1, 1, MediaType::Lto9).is_err());
        assert!(barcodes("", 1, 1, MediaType::Lto9).is_err());
        assert!(barcodes("REL", 1, 0, MediaType::Lto9).is_err());
    }

    #[test]
    fn media_names_parse() {
        assert_eq!(parse_media("lto9").unwrap(), MediaType::Lto9);
        assert_eq!(parse_media("LTO-7-WORM").unwrap(), MediaType::Lto7Worm);
        assert!(parse_media("dlt").is_err());
    }
}

#[derive(clap::Args, Debug)]
pub struct RecoverArgs {
    /// The node's bucket and prefix: `s3://BUCKET/PREFIX` (as in its `[store.s3]`).
    #[arg(long, value_name = "s3://BUCKET/PREFIX")]
    pub from: String,
    /// The S3 endpoint, e.g. `http://127.0.0.1:7070` (omit for AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// PEM file of CA certificates trusted besides the system's (an https endpoint whose
    /// certificate a private CA signed); the new node keeps using it (`[store.s3] ca_file`).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// The EC2 instance metadata service (`http://169.254.169.254`), to sign with the instance
    /// profile's role when no other keys are found; the new node keeps using it
    /// (`[store.s3] instance_metadata`).
    #[arg(long, value_name = "URL")]
    pub instance_metadata: Option<String>,
    /// The new node's durability (`local` or `bucket`; see `[store] durability`).
    #[arg(long, default_value = "local")]
    pub durability: String,
    /// The new node's cache size (`[store.cache] size`).
    #[arg(long, default_value = "20G")]
    pub cache_size: String,
    /// The store key file, for an encrypted bucket (else `REEL_STORE_KEY` is used if set).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// A key the bucket was sealed with before the current one, while objects sealed with it
    /// remain (a rotation not finished by `reel key reseal`); repeatable.
    #[arg(long = "previous-key-file", value_name = "FILE")]
    pub previous_key_files: Vec<std::path::PathBuf>,
    /// The new data directory: missing or empty. Credentials come from the environment or the
    /// AWS credentials file, never from here.
    #[arg(long = "data", value_name = "DIR")]
    pub dir: std::path::PathBuf,
    /// Where the cluster's leases are (`[cluster] prefix`): a store whose lease is live is not
    /// recovered, since opening it deletes packs its node may be about to name.
    #[arg(long, default_value = "reel-cluster")]
    pub cluster_prefix: String,
}

/// `reel recover`: a fresh data directory bound to the bucket, with the catalog replayed from
/// the bucket's journal. Packs stay in the bucket and are read on demand.
pub fn recover(args: RecoverArgs) -> anyhow::Result<()> {
    use crate::config::{BackendKind, CacheSection, DurabilityLevel, S3Section, StoreSection};
    let Some(rest) = args.from.strip_prefix("s3://") else {
        bail!("--from {:?}: expected s3://BUCKET/PREFIX", args.from);
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        bail!("--from {:?}: the bucket name is missing", args.from);
    }
    if args.dir.exists()
        && std::fs::read_dir(&args.dir)
            .with_context(|| format!("reading {}", args.dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} is not empty: recover into a new directory (the old one's cache may hold data the bucket lacks; keep it until the recovered node is checked)",
            args.dir.display()
        );
    }
    let durability = match args.durability.as_str() {
        "local" => DurabilityLevel::Local,
        "bucket" => DurabilityLevel::Bucket,
        other => bail!("--durability {other:?}: expected local or bucket"),
    };
    let section = StoreSection {
        data_dir: None,
        backend: BackendKind::S3,
        durability,
        s3: Some(S3Section {
            endpoint: args.endpoint.clone(),
            bucket: bucket.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
            region: args.region.clone(),
            ca_file: args.ca_file.clone(),
            instance_metadata: args.instance_metadata.clone(),
        }),
        cache: Some(CacheSection {
            size: args.cache_size.clone(),
            ..CacheSection::default()
        }),
        encryption: args
            .key_file
            .clone()
            .map(|path| crate::config::EncryptionSection {
                key_file: Some(path),
                previous_key_files: args.previous_key_files.clone(),
            }),
        catalog_cache: None,
        chunk_size: None,
        catalog_compact_idle_secs: None,
    };
    crate::config::validate_store(&section)?;
    if let Some(s3) = &section.s3 {
        let leases = data_dir::open_bucket(s3, &args.cluster_prefix, None)?;
        let key = crate::cluster::lease_key(&s3.prefix);
        if let Some(holder) = crate::cluster::live_holder(&leases, &key)? {
            bail!(
                "{} is being served by node {} (portal {}): recovering it now would delete the packs \
                 that node is writing. Stop it (or let its lease expire) first; to take a store over \
                 from a live cluster, run `reel serve` with [cluster] standby = true",
                args.from,
                holder.node,
                holder.portal
            );
        }
    }
    let started = std::time::Instant::now();
    let mut last_report = std::time::Instant::now();
    let opened = data_dir::open_with(&args.dir, Some(&section), &mut |p| {
        // A line a second at most, and the last one.
        if p.done == p.total || last_report.elapsed().as_secs() >= 1 {
            last_report = std::time::Instant::now();
            println!(
                "catalog from the bucket: {}/{} objects (checkpoint parts, then journal), {} changes",
                p.done, p.total, p.ops
            );
        }
    })?;
    let carts = opened.carts;
    let list = carts.list()?;
    let stats = carts.store().stats()?;
    println!(
        "recovered {} cartridges, {} written ({} in packs in the bucket), catalog at journal {}, in {:.1?}",
        list.len(),
        human(stats.logical_bytes),
        human(stats.stored_bytes),
        carts.store().journal_seq(),
        started.elapsed()
    );
    for (_, info) in &list {
        println!("  {}", info.barcode().as_str());
    }
    println!(
        "start it with: reel serve --data {} (the directory remembers its bucket; credentials from the environment)",
        args.dir.display()
    );
    Ok(())
}
