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
    /// One cartridge in detail (MAM, counters, location).
    Show { barcode: String },
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
    /// Delete a vaulted cartridge and its data (`reel reclaim` frees the space).
    Delete { barcode: String },
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
    /// Re-read and re-hash the whole store while it serves, with progress; damage is named
    /// by cartridge and record. Exits non-zero when something is damaged.
    Verify,
}

struct Client {
    url: String,
    token: String,
    agent: ureq::Agent,
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

/// Starts a verify (or joins a running one) and follows it with a progress line on stderr.
fn verify(client: &Client) -> anyhow::Result<Value> {
    // A verify already running (409) is joined.
    if let Err(e) = client.request("POST", "/verify", None)
        && !e.to_string().starts_with("conflict")
    {
        return Err(e);
    }
    loop {
        let v = client.request("GET", "/verify", None)?;
        let (done, total) = (
            v["packs_done"].as_u64().unwrap_or(0),
            v["packs_total"].as_u64().unwrap_or(0),
        );
        let width = 40;
        let filled = (done * width).checked_div(total).unwrap_or(0).min(width) as usize;
        eprint!(
            "\rverifying [{}{}] {done}/{total} packs",
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
                            s(&lib["drives"]),
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
        CtlCommand::Show { barcode } => (
            client.request("GET", &format!("/cartridges/{barcode}"), None)?,
            Box::new(|v: &Value| {
                println!("{}", serde_json::to_string_pretty(v).unwrap_or_default())
            }),
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
        CtlCommand::Verify => {
            let status = verify(&client)?;
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
                println!(
                    "{:<6} {:<10} {:<10} {:>10} {:>10}",
                    "DRIVE", "BARCODE", "ACTIVITY", "READ MB/s", "WRITE MB/s"
                );
                for d in v["drives"].as_array().into_iter().flatten() {
                    println!(
                        "{:<6} {:<10} {:<10} {:>10} {:>10}",
                        s(&d["index"]),
                        s(&d["barcode"]),
                        s(&d["activity"]),
                        mb(&d["read_bps"]),
                        mb(&d["write_bps"])
                    );
                }
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
