//! `reel ctl …`: the running server's REST API from the command line (human tables or
//! `--json`). The token comes from `--token`, `REEL_TOKEN`, or a login with `--user` and
//! `REEL_PASSWORD`.

use std::fmt::Display;

use anyhow::{Context, bail};
use reel_api::cartridges::{
    CartridgeDetail, CartridgeView, CreateRequest, ListQuery, ShowQuery, UpdateRequest,
};
use reel_api::library::LibraryDetail;
use reel_api::maintenance::{JobProgress, ReclaimRequest};
use reel_api::monitor::{DriveRate, EventsQuery, MonitorSample, StoreView};
use reel_api::{Client, ClientOptions};
use serde::Serialize;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct CtlArgs {
    /// The console/API address of the running reel.
    #[arg(long, env = "REEL_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API token (`reel ctl token create` or the console makes one).
    #[arg(long, env = "REEL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Log in as this user instead (password from REEL_PASSWORD).
    #[arg(long)]
    pub user: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum CtlCommand {
    /// Libraries, drives and slots.
    Status {
        /// One library (its target name); all when absent.
        library: Option<String>,
    },
    /// Cartridges (optionally matching a barcode substring).
    Cartridges { search: Option<String> },
    /// One cartridge in detail (location, space in the store with dedup and compression
    /// ratios, MAM, counters).
    Show {
        barcode: String,
        /// Also count what no other cartridge references (reads the whole catalog).
        #[arg(long)]
        exclusive: bool,
    },
    /// Create cartridges in bulk (into the vault, or a library's free slots).
    Create {
        #[arg(long, default_value = "REL")]
        prefix: String,
        #[arg(long, default_value_t = 1)]
        first: u32,
        #[arg(long, default_value_t = 1)]
        count: u32,
        #[arg(long, default_value = "lto9")]
        media: String,
        /// Put them into this library's free storage slots.
        #[arg(long)]
        library: Option<String>,
        #[arg(long)]
        write_protected: bool,
    },
    /// Set or clear a cartridge's write-protect switch.
    Protect {
        barcode: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Take a cartridge from its mail slot into the vault.
    Vault { barcode: String },
    /// Delete a vaulted cartridge and its data (`reel ctl reclaim` frees the space).
    Delete { barcode: String },
    /// Erase all data on a cartridge (not loaded in a drive, not write-protected, not WORM
    /// with data); it keeps its barcode and stays where it is. Asks first unless --yes.
    Erase {
        barcode: String,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
    /// Archive a vaulted cartridge into the `[archive]` location, with progress: its data
    /// leaves the store, and it must be restored before it can be imported again.
    Archive { barcode: String },
    /// Restore an archived cartridge into the store, with progress (also resumes an
    /// interrupted restore).
    Restore { barcode: String },
    /// Share a vaulted cartridge with the other stores on the bucket: another node adopts it
    /// without copying its data, and it leaves this store once that node releases it.
    Share { barcode: String },
    /// Take a shared cartridge back (only before another node adopted it).
    Unshare { barcode: String },
    /// The cartridges in the shared vault, and who adopted them.
    SharedVault,
    /// Adopt a cartridge from the shared vault into this store's vault (then `reel ctl
    /// import` puts it into a library).
    Adopt { barcode: String },
    /// Move a cartridge between element addresses (MOVE MEDIUM).
    Move { library: String, from: u16, to: u16 },
    /// Put a vaulted cartridge into a mail slot.
    Import { library: String, barcode: String },
    /// Take the cartridge out of a mail slot into the vault.
    Export { library: String, from: u16 },
    /// Logged-in iSCSI sessions.
    Sessions,
    /// The audit log, newest first.
    Events {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Throughput per drive and initiator now, store ratios.
    Monitor,
    /// Space, dedup and compression ratios, disk capacity, and throughput per drive and per
    /// initiator now.
    Stats,
    /// Re-read and re-hash the whole store while it serves, with progress; damage is named
    /// by cartridge and record. Exits non-zero when something is damaged.
    Verify,
    /// Free the space of deleted, erased and overwritten data, with progress. Writes wait
    /// while it runs.
    Reclaim {
        /// Rewrite packs with less than this share live (0 to 1).
        #[arg(long, default_value_t = 0.5)]
        rewrite_below: f64,
    },
}

/// The API client of one `reel ctl` call.
struct Ctl {
    client: Client,
    url: String,
    /// The token is a session this call logged in for: it logs out when done.
    session: bool,
}

impl Drop for Ctl {
    /// Ends the session `--user` opened, whatever the command's outcome.
    fn drop(&mut self) {
        if self.session {
            self.session = false;
            if let Err(e) = self.client.logout() {
                eprintln!(
                    "reel ctl: logging out: {}",
                    crate::error_text(&failure(e, &self.url))
                );
            }
        }
    }
}

/// An API error as `reel ctl` reports it: the server's `code: message`, or why it could not
/// be reached.
fn failure(e: reel_api::Error, url: &str) -> anyhow::Error {
    match e {
        reel_api::Error::Transport { source, .. } => anyhow::Error::new(*source)
            .context(format!("reaching reel at {url} (is `reel serve` running?)")),
        other => other.into(),
    }
}

impl Ctl {
    /// Runs one API call, its error as [`failure`] says.
    fn call<T>(&self, f: impl FnOnce(&Client) -> Result<T, reel_api::Error>) -> anyhow::Result<T> {
        f(&self.client).map_err(|e| failure(e, &self.url))
    }
}

fn connect(args: &CtlArgs) -> anyhow::Result<Ctl> {
    let client = Client::new(&args.url, ClientOptions::default())?;
    let mut ctl = Ctl {
        client: client.with_token(args.token.as_deref().unwrap_or_default()),
        url: args.url.clone(),
        session: false,
    };
    if let Some(user) = &args.user {
        let password =
            std::env::var("REEL_PASSWORD").context("--user needs the password in REEL_PASSWORD")?;
        let answer = ctl.call(|c| c.login(user, &password))?;
        ctl.client = client.with_token(&answer.token);
        ctl.session = !answer.token.is_empty();
    }
    if ctl.client.token().is_none_or(str::is_empty) {
        bail!("no credentials: pass --token (or REEL_TOKEN), or --user with REEL_PASSWORD");
    }
    Ok(ctl)
}

/// A value of a table cell; `-` for none.
fn s(v: Option<impl Display>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn mb(bytes_per_second: f64) -> String {
    format!("{:.1}", bytes_per_second / 1e6)
}

fn human(bytes: u64) -> String {
    crate::admin::human(bytes)
}

fn ratio(r: f64) -> String {
    format!("{r:.2}:1")
}

/// The answer as `--json` prints it: the API's JSON, keys sorted.
fn json(value: &impl Serialize) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(value)?)
}

/// Starts a maintenance job, or joins it when it already runs, and follows it with a
/// progress bar on stderr until it ends. Returns its last status.
fn follow_job<S>(
    ctl: &Ctl,
    verb: &str,
    start: impl Fn(&Client) -> Result<S, reel_api::Error>,
    status: impl Fn(&Client) -> Result<S, reel_api::Error>,
    progress: impl Fn(&S) -> &JobProgress,
    unit: &str,
) -> anyhow::Result<S> {
    if let Err(e) = start(&ctl.client) {
        // 409: this job (joined) or the other one runs.
        let running = ctl.call(&status)?;
        if e.code() != Some("conflict") || !progress(&running).is_running() {
            return Err(failure(e, &ctl.url));
        }
    }
    loop {
        let v = ctl.call(&status)?;
        let p = progress(&v);
        let (done, total) = (p.packs_done, p.packs_total);
        let width = 40;
        let filled = (done * width).checked_div(total).unwrap_or(0).min(width) as usize;
        eprint!(
            "\r{verb} [{}{}] {done}/{total} {unit}",
            "#".repeat(filled),
            "-".repeat(width as usize - filled)
        );
        if !p.is_running() {
            eprintln!();
            return Ok(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// A finished job's status: its JSON with `--json`, else what `table` prints.
fn print_job<S: Serialize>(
    as_json: bool,
    status: &S,
    table: impl FnOnce(&S),
) -> anyhow::Result<()> {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&json(status)?)?);
    } else {
        table(status);
    }
    Ok(())
}

/// Where a cartridge is, as the tables say it.
fn location(c: &CartridgeView) -> String {
    let l = &c.location;
    if l.vault {
        "vault".to_string()
    } else {
        format!(
            "{} {} ({})",
            s(l.kind.as_ref()),
            s(l.address),
            s(l.library.as_ref())
        )
    }
}

/// `reel ctl show`: the facts, then the space in the store.
fn print_cartridge(d: &CartridgeDetail) {
    let c = &d.cartridge;
    println!("barcode          {}", c.barcode);
    println!(
        "media            {}{}",
        c.media,
        if c.write_protected {
            ", write-protected"
        } else {
            ""
        }
    );
    println!("location         {}", location(c));
    match &d.archive {
        Some(a) => println!(
            "archive state    {} (image {:x}: {} of data, {} in the archive)",
            c.archive_state,
            a.generation,
            human(a.data_bytes),
            human(a.image_bytes)
        ),
        None => println!("archive state    {}", c.archive_state),
    }
    println!("capacity         {}", human(c.capacity));
    println!("written (life)   {}", human(c.written));
    println!("loads            {}", d.load_count);
    if let Some(u) = &d.usage {
        let estimate = if u.exact { "" } else { " (estimated)" };
        println!("host bytes       {}", human(u.logical_bytes));
        println!("unique           {}{estimate}", human(u.unique_bytes));
        println!("stored           {}{estimate}", human(u.stored_bytes));
        println!("dedup            {}", ratio(u.dedup_ratio));
        println!("compression      {}", ratio(u.compression_ratio));
        println!(
            "reduction        {}  (store: packs only)",
            ratio(u.reduction_ratio)
        );
        if let Some(r) = u.reduction_ratio_on_disk {
            println!(
                "reduction        {}  (on disk: its share of the data directory, estimated)",
                ratio(r)
            );
        }
        if let Some(stored) = u.exclusive_stored_bytes {
            println!(
                "only on this one {} stored ({} unique)",
                human(stored),
                human(u.exclusive_unique_bytes.unwrap_or(0))
            );
        }
    }
}

/// `reel ctl status`: each library, its drives and its slots.
fn print_libraries(details: &[LibraryDetail]) {
    for lib in details {
        let facts = &lib.library;
        println!(
            "library {}: {} changer, {} x {}, {} slots, {} import/export, {} cartridges",
            facts.name,
            facts.changer.model,
            lib.drives.len(),
            facts.drive_model,
            facts.slots,
            facts.import_export,
            facts.cartridges
        );
        println!(
            "{:<6} {:<8} {:<12} {:<10} {:<10} {:<10}",
            "DRIVE", "ADDRESS", "SERIAL", "STATE", "ACTIVITY", "BARCODE"
        );
        for d in &lib.drives {
            println!(
                "{:<6} {:<8} {:<12} {:<10} {:<10} {:<10}",
                d.index,
                d.address,
                d.serial,
                d.state,
                d.activity,
                s(d.barcode.as_ref())
            );
        }
        println!("{:<14} {:<8} {:<10}", "ELEMENT", "ADDRESS", "BARCODE");
        for e in &lib.elements {
            if e.kind != "transport" && e.kind != "drive" {
                println!(
                    "{:<14} {:<8} {:<10}",
                    format!("{} {}", e.kind, e.index),
                    e.address,
                    s(e.barcode.as_ref())
                );
            }
        }
    }
}

fn print_cartridges(list: &[CartridgeView]) {
    println!(
        "{:<10} {:<10} {:>16} {:>14} {:<4} {:<10} LOCATION",
        "BARCODE", "MEDIA", "CAPACITY", "WRITTEN", "WP", "STATE"
    );
    for c in list {
        println!(
            "{:<10} {:<10} {:>16} {:>14} {:<4} {:<10} {}",
            c.barcode,
            c.media,
            c.capacity,
            c.written,
            if c.write_protected { "yes" } else { "no" },
            c.archive_state,
            location(c)
        );
    }
}

/// Prints an answer as a table.
type Printer = Box<dyn FnOnce()>;

/// A printer of one fixed line.
fn line(text: String) -> Printer {
    Box::new(move || println!("{text}"))
}

pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let ctl = connect(&args)?;
    let (value, table): (Value, Printer) = match &args.command {
        CtlCommand::Status { library } => {
            let names: Vec<String> = match library {
                Some(l) => vec![l.clone()],
                None => ctl
                    .call(Client::libraries)?
                    .into_iter()
                    .map(|l| l.library.name)
                    .collect(),
            };
            let details = names
                .iter()
                .map(|n| ctl.call(|c| c.library(n)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            (json(&details)?, Box::new(move || print_libraries(&details)))
        }
        CtlCommand::Cartridges { search } => {
            let query = ListQuery {
                search: Some(search.clone().unwrap_or_default()),
                location: None,
            };
            let list = ctl.call(|c| c.cartridges(&query))?;
            (json(&list)?, Box::new(move || print_cartridges(&list)))
        }
        CtlCommand::Show { barcode, exclusive } => {
            let query = ShowQuery {
                exclusive: Some(*exclusive),
            };
            let detail = ctl.call(|c| c.cartridge(barcode, &query))?;
            (json(&detail)?, Box::new(move || print_cartridge(&detail)))
        }
        CtlCommand::Create {
            prefix,
            first,
            count,
            media,
            library,
            write_protected,
        } => {
            let request = CreateRequest {
                library: library.clone(),
                write_protected: *write_protected,
                ..CreateRequest::new(prefix, *first, *count, media)
            };
            let created = ctl.call(|c| c.create_cartridges(&request))?;
            (
                json(&created)?,
                Box::new(move || {
                    for c in &created {
                        println!("created {} ({})", c.barcode, c.media);
                    }
                }),
            )
        }
        CtlCommand::Protect { barcode, state } => {
            let update = UpdateRequest {
                write_protected: state == "on",
            };
            let v = ctl.call(|c| c.update_cartridge(barcode, &update))?;
            (
                json(&v)?,
                line(format!("{barcode}: write protection {state}")),
            )
        }
        CtlCommand::Vault { barcode } => {
            let v = ctl.call(|c| c.vault(barcode))?;
            (json(&v)?, line(format!("{barcode} is in the vault")))
        }
        CtlCommand::Delete { barcode } => {
            ctl.call(|c| c.delete_cartridge(barcode))?;
            (
                Value::Null,
                line(format!("deleted {barcode}; `reel reclaim` frees its space")),
            )
        }
        CtlCommand::Erase { barcode, yes } => {
            if !yes && !confirm(&format!("Erase all data on {barcode}?"))? {
                bail!("not erased: pass --yes to erase {barcode}");
            }
            let v = ctl.call(|c| c.erase(barcode))?;
            (
                json(&v)?,
                line(format!(
                    "erased {barcode}; `reel ctl reclaim` frees its space"
                )),
            )
        }
        CtlCommand::Share { barcode } => {
            let v = ctl.call(|c| c.share(barcode))?;
            (
                json(&v)?,
                line(format!(
                    "{barcode} is in the shared vault: another node can adopt it \
                     (`reel ctl adopt {barcode}` there)"
                )),
            )
        }
        CtlCommand::Unshare { barcode } => {
            let v = ctl.call(|c| c.unshare(barcode))?;
            (json(&v)?, line(format!("{barcode} is back in this vault")))
        }
        CtlCommand::Adopt { barcode } => {
            let v = ctl.call(|c| c.adopt(barcode))?;
            (
                json(&v)?,
                line(format!(
                    "{barcode} adopted into this vault (its data stays where it is); \
                     `reel ctl import LIBRARY {barcode}` puts it into a library"
                )),
            )
        }
        CtlCommand::SharedVault => {
            let shared = ctl.call(Client::shared_vault)?;
            (
                json(&shared)?,
                Box::new(move || {
                    println!(
                        "{:<10} {:<9} {:>10} {:<20} {:<20} ADOPTED BY",
                        "BARCODE", "STATE", "DATA", "FROM STORE", "FROM NODE"
                    );
                    for x in &shared {
                        println!(
                            "{:<10} {:<9} {:>10} {:<20} {:<20} {}",
                            x.barcode,
                            x.state,
                            human(x.data_bytes),
                            x.from_store,
                            x.from_node,
                            s(x.adopted_by_node.as_ref())
                        );
                    }
                }),
            )
        }
        CtlCommand::Move { library, from, to } => {
            ctl.call(|c| c.move_medium(library, *from, *to))?;
            (Value::Null, line(format!("moved {from} -> {to}")))
        }
        CtlCommand::Import { library, barcode } => {
            ctl.call(|c| c.import(library, barcode, None))?;
            (Value::Null, line(format!("{barcode} is in a mail slot")))
        }
        CtlCommand::Export { library, from } => {
            ctl.call(|c| c.export(library, *from))?;
            (
                Value::Null,
                line(format!(
                    "element {from} emptied; the cartridge is in the vault"
                )),
            )
        }
        CtlCommand::Sessions => {
            let sessions = ctl.call(Client::sessions)?;
            (
                json(&sessions)?,
                Box::new(move || {
                    println!("{:<6} {:<50} {:<22} TARGET", "TSIH", "INITIATOR", "PEER");
                    for x in &sessions {
                        println!(
                            "{:<6} {:<50} {:<22} {}",
                            x.tsih,
                            x.initiator,
                            x.peer,
                            s(x.target.as_ref())
                        );
                    }
                }),
            )
        }
        CtlCommand::Events { limit } => {
            let query = EventsQuery {
                limit: Some(*limit),
                before: None,
            };
            let events = ctl.call(|c| c.events(&query))?;
            (
                json(&events)?,
                Box::new(move || {
                    for e in &events {
                        println!(
                            "{:>6} {} {:<10} {:<20} {:<40} {}",
                            e.seq, e.time, e.user, e.action, e.target, e.result
                        );
                    }
                }),
            )
        }
        CtlCommand::Archive { barcode } | CtlCommand::Restore { barcode } => {
            let restore = matches!(args.command, CtlCommand::Restore { .. });
            let (verb, action) = if restore {
                ("restoring", "restore")
            } else {
                ("archiving", "archive")
            };
            let status = follow_job(
                &ctl,
                verb,
                |c| {
                    if restore {
                        c.restore(barcode)
                    } else {
                        c.archive(barcode)
                    }
                },
                Client::archive_status,
                |s| &s.progress,
                "bytes",
            )?;
            print_job(args.json, &status, |status| {
                println!(
                    "{action} of {} {}: {} bytes",
                    status.barcode, status.progress.state, status.bytes_total
                );
            })?;
            if status.progress.state != "done" || status.barcode != *barcode {
                bail!(
                    "{action} of {barcode}: {} {}",
                    status.progress.state,
                    s(status.progress.error.as_ref())
                );
            }
            return Ok(());
        }
        CtlCommand::Reclaim { rewrite_below } => {
            let request = ReclaimRequest {
                rewrite_below: Some(*rewrite_below),
            };
            let status = follow_job(
                &ctl,
                "reclaiming",
                |c| c.start_reclaim(Some(&request)),
                Client::reclaim_status,
                |s| &s.progress,
                "packs",
            )?;
            print_job(args.json, &status, |status| {
                println!(
                    "reclaim {}: {} packs examined, {} deleted, {} rewritten, {} chunks dropped, {} freed",
                    status.progress.state,
                    status.progress.packs_total,
                    status.packs_deleted,
                    status.packs_rewritten,
                    status.chunks_dropped,
                    human(status.bytes_freed)
                );
            })?;
            if status.progress.state != "done" {
                bail!(
                    "reclaim {}: {}",
                    status.progress.state,
                    s(status.progress.error.as_ref())
                );
            }
            return Ok(());
        }
        CtlCommand::Stats => {
            let stats = ctl.call(Client::stats)?;
            let monitor = ctl.call(Client::monitor)?;
            let value =
                json(&serde_json::json!({"stats": json(&stats)?, "monitor": json(&monitor)?}))?;
            (value, Box::new(move || print_stats(&stats, &monitor)))
        }
        CtlCommand::Verify => {
            let status = follow_job(
                &ctl,
                "verifying",
                Client::start_verify,
                Client::verify_status,
                |s| &s.progress,
                "packs",
            )?;
            print_job(args.json, &status, |status| {
                println!(
                    "verify {}: {} packs, {} chunks, {} bytes checked, {} bad chunks",
                    status.progress.state,
                    status.progress.packs_done,
                    status.chunks_checked,
                    status.bytes_checked,
                    status.bad_chunks
                );
                for d in &status.damage {
                    println!(
                        "damaged: cartridge {} partition {} records {}: {}",
                        s(d.barcode.as_ref()),
                        d.partition,
                        s(d.records.map(|(first, last)| format!("[{first},{last}]"))),
                        d.reason
                    );
                }
            })?;
            if status.progress.state != "clean" {
                bail!("the store is {}", status.progress.state);
            }
            return Ok(());
        }
        CtlCommand::Monitor => {
            let m = ctl.call(Client::monitor)?;
            (
                json(&m)?,
                Box::new(move || {
                    let store = m.store.as_ref();
                    println!(
                        "cpu {:.0}%  read {} MB/s  write {} MB/s  dedup {:.2}:1  compression {:.2}:1",
                        m.cpu_percent,
                        mb(m.totals.read_bps),
                        mb(m.totals.write_bps),
                        store.map_or(1.0, |s| s.dedup_ratio),
                        store.map_or(1.0, |s| s.compression_ratio)
                    );
                    print_drive_rates(&m.drives);
                }),
            )
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        table();
    }
    Ok(())
}

/// Asks a yes/no question on the terminal; false (without asking) when stdin is no terminal.
fn confirm(question: &str) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// `reel ctl stats`: the store, the disk, then throughput now.
fn print_stats(st: &StoreView, m: &MonitorSample) {
    let (total, free) = (st.disk_total, st.disk_free);
    println!("host bytes       {}", human(st.logical_bytes));
    println!("unique           {}", human(st.unique_bytes));
    println!(
        "stored           {}  ({} chunks in {} packs)",
        human(st.stored_bytes),
        st.chunks,
        st.packs
    );
    println!("dedup            {}", ratio(st.dedup_ratio));
    println!("compression      {}", ratio(st.compression_ratio));
    println!(
        "reduction        {}  (store: packs only)",
        ratio(st.reduction_ratio)
    );
    println!(
        "reduction        {}  (on disk: the data directory, {}, catalog included)",
        ratio(st.reduction_ratio_on_disk),
        human(st.on_disk_bytes)
    );
    println!(
        "disk             {} free of {} ({:.0} % used)",
        human(free),
        human(total),
        if total > 0 {
            total.saturating_sub(free) as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    );
    println!(
        "throughput       read {} MB/s, write {} MB/s, cpu {:.0} %",
        mb(m.totals.read_bps),
        mb(m.totals.write_bps),
        m.cpu_percent
    );
    print_drive_rates(&m.drives);
    println!(
        "{:<50} {:>10} {:>10} {:>10}",
        "INITIATOR", "READ MB/s", "WRITE MB/s", "CMD/s"
    );
    if m.initiators.is_empty() {
        println!("(no initiator logged in)");
    }
    for i in &m.initiators {
        println!(
            "{:<50} {:>10} {:>10} {:>10.0}",
            i.initiator,
            mb(i.read_bps),
            mb(i.write_bps),
            i.commands_per_s
        );
    }
}

/// The monitor's per-drive rates as a table (`ctl monitor`, `ctl stats`).
fn print_drive_rates(drives: &[DriveRate]) {
    println!(
        "{:<40} {:<6} {:<10} {:<10} {:>10} {:>10}",
        "LIBRARY", "DRIVE", "BARCODE", "ACTIVITY", "READ MB/s", "WRITE MB/s"
    );
    for d in drives {
        println!(
            "{:<40} {:<6} {:<10} {:<10} {:>10} {:>10}",
            d.library,
            d.index,
            s(d.barcode.as_ref()),
            d.activity,
            mb(d.read_bps),
            mb(d.write_bps)
        );
    }
}
