//! `reel ctl …`: the running server's REST API from the command line (human tables or
//! `--json`). The token comes from `--token`, `REEL_TOKEN`, or a login with `--user` and
//! `REEL_PASSWORD`.

use anyhow::{Context, bail};
use serde_json::{Value, json};

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

struct Client {
    url: String,
    token: String,
    agent: ureq::Agent,
    /// The token is a session this call logged in for: it logs out when done.
    session: bool,
}

impl Drop for Client {
    /// Ends the session `--user` opened, whatever the command's outcome.
    fn drop(&mut self) {
        if self.session {
            self.session = false;
            if let Err(e) = self.request("POST", "/logout", None) {
                eprintln!("reel ctl: logging out: {e:#}");
            }
        }
    }
}

impl Client {
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let uri = format!("{}/api/v1{path}", self.url.trim_end_matches('/'));
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(&uri)
            .header("Authorization", format!("Bearer {}", self.token));
        let response = match body {
            Some(b) => self.agent.run(
                req.header("Content-Type", "application/json")
                    .body(b.to_string())?,
            ),
            None => self.agent.run(req.body(())?),
        }
        .with_context(|| format!("reaching reel at {} (is `reel serve` running?)", self.url))?;
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 400 {
            let message = value["error"]["message"].as_str().unwrap_or(&text);
            let code = value["error"]["code"].as_str().unwrap_or("error");
            bail!("{code}: {message}");
        }
        Ok(value)
    }
}

fn connect(args: &CtlArgs) -> anyhow::Result<Client> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut client = Client {
        url: args.url.clone(),
        token: args.token.clone().unwrap_or_default(),
        agent,
        session: false,
    };
    if let Some(user) = &args.user {
        let password =
            std::env::var("REEL_PASSWORD").context("--user needs the password in REEL_PASSWORD")?;
        let v = client.request(
            "POST",
            "/login",
            Some(json!({"username": user, "password": password})),
        )?;
        client.token = v["token"].as_str().unwrap_or_default().to_string();
        client.session = !client.token.is_empty();
    }
    if client.token.is_empty() {
        bail!("no credentials: pass --token (or REEL_TOKEN), or --user with REEL_PASSWORD");
    }
    Ok(client)
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn mb(v: &Value) -> String {
    format!("{:.1}", v.as_f64().unwrap_or(0.0) / 1e6)
}

/// Starts a maintenance job at `path` (`/verify`, `/reclaim`), or joins it when it already
/// runs, and follows it with a progress bar on stderr until it ends. Returns its last status.
fn follow_job(
    client: &Client,
    path: &str,
    verb: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    if let Err(e) = client.request("POST", path, body) {
        // 409: this job (joined) or the other one runs.
        let running = client.request("GET", path, None)?;
        if !e.to_string().starts_with("conflict") || running["state"] != "running" {
            return Err(e);
        }
    }
    loop {
        let v = client.request("GET", path, None)?;
        let (done, total) = (
            v["packs_done"].as_u64().unwrap_or(0),
            v["packs_total"].as_u64().unwrap_or(0),
        );
        let width = 40;
        let filled = (done * width).checked_div(total).unwrap_or(0).min(width) as usize;
        eprint!(
            "\r{verb} [{}{}] {done}/{total} packs",
            "#".repeat(filled),
            "-".repeat(width as usize - filled)
        );
        if v["state"] != "running" {
            eprintln!();
            return Ok(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

fn human(v: &Value) -> String {
    crate::admin::human(v.as_u64().unwrap_or(0))
}

fn ratio(v: &Value) -> String {
    format!("{:.2}:1", v.as_f64().unwrap_or(1.0))
}

/// `reel ctl show`: the facts, then the space in the store.
fn print_cartridge(c: &Value) {
    let location = if c["location"]["vault"] == true {
        "vault".to_string()
    } else {
        format!(
            "{} {} ({})",
            s(&c["location"]["kind"]),
            s(&c["location"]["address"]),
            s(&c["location"]["library"])
        )
    };
    println!("barcode          {}", s(&c["barcode"]));
    println!(
        "media            {}{}",
        s(&c["media"]),
        if c["write_protected"] == true {
            ", write-protected"
        } else {
            ""
        }
    );
    println!("location         {location}");
    println!("capacity         {}", human(&c["capacity"]));
    println!("written (life)   {}", human(&c["written"]));
    println!("loads            {}", s(&c["load_count"]));
    let u = &c["usage"];
    if u.is_object() {
        let estimate = if u["exact"] == false {
            " (estimated)"
        } else {
            ""
        };
        println!("host bytes       {}", human(&u["logical_bytes"]));
        println!("unique           {}{estimate}", human(&u["unique_bytes"]));
        println!("stored           {}{estimate}", human(&u["stored_bytes"]));
        println!("dedup            {}", ratio(&u["dedup_ratio"]));
        println!("compression      {}", ratio(&u["compression_ratio"]));
        println!(
            "reduction        {}  (store: packs only)",
            ratio(&u["reduction_ratio"])
        );
        if u["reduction_ratio_on_disk"].is_number() {
            println!(
                "reduction        {}  (on disk: its share of the data directory, estimated)",
                ratio(&u["reduction_ratio_on_disk"])
            );
        }
        if u["exclusive_stored_bytes"].is_u64() {
            println!(
                "only on this one {} stored ({} unique)",
                human(&u["exclusive_stored_bytes"]),
                human(&u["exclusive_unique_bytes"])
            );
        }
    }
}

/// Prints an answer as a table.
type Printer = Box<dyn Fn(&Value)>;

pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let client = connect(&args)?;
    let (value, table): (Value, Printer) = match &args.command {
        CtlCommand::Status { library } => {
            let names: Vec<String> = match library {
                Some(l) => vec![l.clone()],
                None => client
                    .request("GET", "/libraries", None)?
                    .as_array()
                    .map(|a| a.iter().map(|l| s(&l["name"])).collect())
                    .unwrap_or_default(),
            };
            let details = names
                .iter()
                .map(|n| client.request("GET", &format!("/libraries/{n}"), None))
                .collect::<anyhow::Result<Vec<_>>>()?;
            (
                Value::Array(details),
                Box::new(|v: &Value| {
                    for lib in v.as_array().into_iter().flatten() {
                        println!(
                            "library {}: {} changer, {} x {}, {} slots, {} import/export, {} cartridges",
                            s(&lib["name"]),
                            s(&lib["changer"]["model"]),
                            // The detail's `drives` is the list of drives (it replaces
                            // the summary's count of the same name).
                            lib["drives"]
                                .as_array()
                                .map_or_else(|| s(&lib["drives"]), |d| d.len().to_string()),
                            s(&lib["drive_model"]),
                            s(&lib["slots"]),
                            s(&lib["import_export"]),
                            s(&lib["cartridges"])
                        );
                        println!(
                            "{:<6} {:<8} {:<12} {:<10} {:<10} {:<10}",
                            "DRIVE", "ADDRESS", "SERIAL", "STATE", "ACTIVITY", "BARCODE"
                        );
                        for d in lib["drives"].as_array().into_iter().flatten() {
                            println!(
                                "{:<6} {:<8} {:<12} {:<10} {:<10} {:<10}",
                                s(&d["index"]),
                                s(&d["address"]),
                                s(&d["serial"]),
                                s(&d["state"]),
                                s(&d["activity"]),
                                s(&d["barcode"])
                            );
                        }
                        println!("{:<14} {:<8} {:<10}", "ELEMENT", "ADDRESS", "BARCODE");
                        for e in lib["elements"].as_array().into_iter().flatten() {
                            if e["kind"] != "transport" && e["kind"] != "drive" {
                                println!(
                                    "{:<14} {:<8} {:<10}",
                                    format!("{} {}", s(&e["kind"]), s(&e["index"])),
                                    s(&e["address"]),
                                    s(&e["barcode"])
                                );
                            }
                        }
                    }
                }),
            )
        }
        CtlCommand::Cartridges { search } => (
            client.request(
                "GET",
                &format!("/cartridges?search={}", search.as_deref().unwrap_or("")),
                None,
            )?,
            Box::new(|v: &Value| {
                println!(
                    "{:<10} {:<10} {:>16} {:>14} {:<4} LOCATION",
                    "BARCODE", "MEDIA", "CAPACITY", "WRITTEN", "WP"
                );
                for c in v.as_array().into_iter().flatten() {
                    let loc = if c["location"]["vault"] == true {
                        "vault".to_string()
                    } else {
                        format!(
                            "{} {} ({})",
                            s(&c["location"]["kind"]),
                            s(&c["location"]["address"]),
                            s(&c["location"]["library"])
                        )
                    };
                    println!(
                        "{:<10} {:<10} {:>16} {:>14} {:<4} {loc}",
                        s(&c["barcode"]),
                        s(&c["media"]),
                        s(&c["capacity"]),
                        s(&c["written"]),
                        if c["write_protected"] == true {
                            "yes"
                        } else {
                            "no"
                        }
                    );
                }
            }),
        ),
        CtlCommand::Show { barcode, exclusive } => (
            client.request(
                "GET",
                &format!("/cartridges/{barcode}?exclusive={exclusive}"),
                None,
            )?,
            Box::new(print_cartridge),
        ),
        CtlCommand::Create {
            prefix,
            first,
            count,
            media,
            library,
            write_protected,
        } => {
            let v = client.request(
                "POST",
                "/cartridges",
                Some(
                    json!({"prefix": prefix, "first": first, "count": count, "media": media,
                    "library": library, "write_protected": write_protected}),
                ),
            )?;
            (
                v,
                Box::new(|v: &Value| {
                    for c in v.as_array().into_iter().flatten() {
                        println!("created {} ({})", s(&c["barcode"]), s(&c["media"]));
                    }
                }),
            )
        }
        CtlCommand::Protect { barcode, state } => {
            let v = client.request(
                "PATCH",
                &format!("/cartridges/{barcode}"),
                Some(json!({"write_protected": state == "on"})),
            )?;
            let line = format!("{barcode}: write protection {state}");
            (v, Box::new(move |_: &Value| println!("{line}")))
        }
        CtlCommand::Vault { barcode } => {
            let v = client.request("POST", &format!("/cartridges/{barcode}/vault"), None)?;
            let line = format!("{barcode} is in the vault");
            (v, Box::new(move |_: &Value| println!("{line}")))
        }
        CtlCommand::Delete { barcode } => {
            client.request("DELETE", &format!("/cartridges/{barcode}"), None)?;
            let line = format!("deleted {barcode}; `reel reclaim` frees its space");
            (Value::Null, Box::new(move |_: &Value| println!("{line}")))
        }
        CtlCommand::Erase { barcode, yes } => {
            if !yes && !confirm(&format!("Erase all data on {barcode}?"))? {
                bail!("not erased: pass --yes to erase {barcode}");
            }
            let v = client.request("POST", &format!("/cartridges/{barcode}/erase"), None)?;
            let line = format!("erased {barcode}; `reel ctl reclaim` frees its space");
            (v, Box::new(move |_: &Value| println!("{line}")))
        }
        CtlCommand::Move { library, from, to } => {
            client.request(
                "POST",
                &format!("/libraries/{library}/move"),
                Some(json!({"from": from, "to": to})),
            )?;
            let (from, to) = (*from, *to);
            (
                Value::Null,
                Box::new(move |_: &Value| println!("moved {from} -> {to}")),
            )
        }
        CtlCommand::Import { library, barcode } => {
            client.request(
                "POST",
                &format!("/libraries/{library}/import"),
                Some(json!({"barcode": barcode})),
            )?;
            let b = barcode.clone();
            (
                Value::Null,
                Box::new(move |_: &Value| println!("{b} is in a mail slot")),
            )
        }
        CtlCommand::Export { library, from } => {
            client.request(
                "POST",
                &format!("/libraries/{library}/export"),
                Some(json!({"from": from})),
            )?;
            let f = *from;
            (
                Value::Null,
                Box::new(move |_: &Value| {
                    println!("element {f} emptied; the cartridge is in the vault")
                }),
            )
        }
        CtlCommand::Sessions => (
            client.request("GET", "/sessions", None)?,
            Box::new(|v: &Value| {
                println!("{:<6} {:<50} {:<22} TARGET", "TSIH", "INITIATOR", "PEER");
                for x in v.as_array().into_iter().flatten() {
                    println!(
                        "{:<6} {:<50} {:<22} {}",
                        s(&x["tsih"]),
                        s(&x["initiator"]),
                        s(&x["peer"]),
                        s(&x["target"])
                    );
                }
            }),
        ),
        CtlCommand::Events { limit } => (
            client.request("GET", &format!("/events?limit={limit}"), None)?,
            Box::new(|v: &Value| {
                for e in v.as_array().into_iter().flatten() {
                    println!(
                        "{:>6} {} {:<10} {:<20} {:<40} {}",
                        s(&e["seq"]),
                        s(&e["time"]),
                        s(&e["user"]),
                        s(&e["action"]),
                        s(&e["target"]),
                        s(&e["result"])
                    );
                }
            }),
        ),
        CtlCommand::Reclaim { rewrite_below } => {
            let status = follow_job(
                &client,
                "/reclaim",
                "reclaiming",
                Some(json!({"rewrite_below": rewrite_below})),
            )?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                println!(
                    "reclaim {}: {} packs examined, {} deleted, {} rewritten, {} chunks dropped, {} freed",
                    s(&status["state"]),
                    s(&status["packs_total"]),
                    s(&status["packs_deleted"]),
                    s(&status["packs_rewritten"]),
                    s(&status["chunks_dropped"]),
                    human(&status["bytes_freed"])
                );
            }
            if status["state"] != "done" {
                bail!("reclaim {}: {}", s(&status["state"]), s(&status["error"]));
            }
            return Ok(());
        }
        CtlCommand::Stats => {
            let stats = client.request("GET", "/stats", None)?;
            let monitor = client.request("GET", "/monitor", None)?;
            (
                json!({"stats": stats, "monitor": monitor}),
                Box::new(print_stats),
            )
        }
        CtlCommand::Verify => {
            let status = follow_job(&client, "/verify", "verifying", None)?;
            let damaged = status["state"] != "clean";
            let printer: Printer = Box::new(|v: &Value| {
                println!(
                    "verify {}: {} packs, {} chunks, {} bytes checked, {} bad chunks",
                    s(&v["state"]),
                    s(&v["packs_done"]),
                    s(&v["chunks_checked"]),
                    s(&v["bytes_checked"]),
                    s(&v["bad_chunks"])
                );
                for d in v["damage"].as_array().into_iter().flatten() {
                    println!(
                        "damaged: cartridge {} partition {} records {}: {}",
                        s(&d["barcode"]),
                        s(&d["partition"]),
                        s(&d["records"]),
                        s(&d["reason"])
                    );
                }
            });
            if args.json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                printer(&status);
            }
            if damaged {
                bail!("the store is {}", s(&status["state"]));
            }
            return Ok(());
        }
        CtlCommand::Monitor => (
            client.request("GET", "/monitor", None)?,
            Box::new(|v: &Value| {
                println!(
                    "cpu {:.0}%  read {} MB/s  write {} MB/s  dedup {:.2}:1  compression {:.2}:1",
                    v["cpu_percent"].as_f64().unwrap_or(0.0),
                    mb(&v["totals"]["read_bps"]),
                    mb(&v["totals"]["write_bps"]),
                    v["store"]["dedup_ratio"].as_f64().unwrap_or(1.0),
                    v["store"]["compression_ratio"].as_f64().unwrap_or(1.0)
                );
                print_drive_rates(&v["drives"]);
            }),
        ),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        table(&value);
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
fn print_stats(v: &Value) {
    let st = &v["stats"];
    let (total, free) = (
        st["disk_total"].as_u64().unwrap_or(0),
        st["disk_free"].as_u64().unwrap_or(0),
    );
    println!("host bytes       {}", human(&st["logical_bytes"]));
    println!("unique           {}", human(&st["unique_bytes"]));
    println!(
        "stored           {}  ({} chunks in {} packs)",
        human(&st["stored_bytes"]),
        s(&st["chunks"]),
        s(&st["packs"])
    );
    println!("dedup            {}", ratio(&st["dedup_ratio"]));
    println!("compression      {}", ratio(&st["compression_ratio"]));
    println!(
        "reduction        {}  (store: packs only)",
        ratio(&st["reduction_ratio"])
    );
    println!(
        "reduction        {}  (on disk: the data directory, {}, catalog included)",
        ratio(&st["reduction_ratio_on_disk"]),
        human(&st["on_disk_bytes"])
    );
    println!(
        "disk             {} free of {} ({:.0} % used)",
        crate::admin::human(free),
        crate::admin::human(total),
        if total > 0 {
            total.saturating_sub(free) as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    );
    let m = &v["monitor"];
    println!(
        "throughput       read {} MB/s, write {} MB/s, cpu {:.0} %",
        mb(&m["totals"]["read_bps"]),
        mb(&m["totals"]["write_bps"]),
        m["cpu_percent"].as_f64().unwrap_or(0.0)
    );
    print_drive_rates(&m["drives"]);
    println!(
        "{:<50} {:>10} {:>10} {:>10}",
        "INITIATOR", "READ MB/s", "WRITE MB/s", "CMD/s"
    );
    let initiators = m["initiators"].as_array().map_or(&[][..], |a| a.as_slice());
    if initiators.is_empty() {
        println!("(no initiator logged in)");
    }
    for i in initiators {
        println!(
            "{:<50} {:>10} {:>10} {:>10.0}",
            s(&i["initiator"]),
            mb(&i["read_bps"]),
            mb(&i["write_bps"]),
            i["commands_per_s"].as_f64().unwrap_or(0.0)
        );
    }
}

/// The monitor's per-drive rates as a table (`ctl monitor`, `ctl stats`).
fn print_drive_rates(drives: &Value) {
    println!(
        "{:<40} {:<6} {:<10} {:<10} {:>10} {:>10}",
        "LIBRARY", "DRIVE", "BARCODE", "ACTIVITY", "READ MB/s", "WRITE MB/s"
    );
    for d in drives.as_array().into_iter().flatten() {
        println!(
            "{:<40} {:<6} {:<10} {:<10} {:>10} {:>10}",
            s(&d["library"]),
            s(&d["index"]),
            s(&d["barcode"]),
            s(&d["activity"]),
            mb(&d["read_bps"]),
            mb(&d["write_bps"])
        );
    }
}
