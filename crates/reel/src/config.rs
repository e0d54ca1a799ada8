//! reel's configuration file (TOML), validated before anything starts.
//!
//! Only the `reel` binary reads configuration; libraries get typed values.
//! Every error names the file, and where the TOML parser knows it, the line,
//! column and key.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub iscsi: IscsiConfig,
    #[serde(default)]
    pub http: HttpConfig,
}

/// The web console, REST API and metrics.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address of the console/API. Loopback by default; another address only when asked for.
    #[serde(default = "default_http_listen")]
    pub listen: String,
    /// PEM certificate chain and private key: serve HTTPS instead of HTTP.
    pub tls_cert: Option<std::path::PathBuf>,
    pub tls_key: Option<std::path::PathBuf>,
    /// Set to false to run without the console and API.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: default_http_listen(),
            tls_cert: None,
            tls_key: None,
            enabled: true,
        }
    }
}

fn default_http_listen() -> String {
    "127.0.0.1:8080".into()
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IscsiConfig {
    /// Portals to listen on. Loopback by default; "0.0.0.0:3260" only when asked for.
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Commands in flight per session (the CmdSN window).
    #[serde(default = "default_queue_depth")]
    pub queue_depth: u32,
    /// Seconds of silence after which the target pings an initiator (NOP-In).
    #[serde(default = "default_nop_interval")]
    pub nop_interval_secs: u64,
    /// Largest data segment we accept per PDU (MaxRecvDataSegmentLength).
    #[serde(default = "default_max_recv_segment")]
    pub max_recv_data_segment_length: u32,
    /// Largest burst (MaxBurstLength) we offer.
    #[serde(default = "default_max_burst")]
    pub max_burst_length: u32,
    /// Largest unsolicited burst (FirstBurstLength) we offer.
    #[serde(default = "default_first_burst")]
    pub first_burst_length: u32,
    /// CHAP for discovery sessions (optional).
    pub discovery_chap: Option<Chap>,
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetEntry>,
}

impl Default for IscsiConfig {
    /// The zero-configuration library: IBM 3584 changer, 4 IBM LTO-9 drives, 40 slots,
    /// 4 import/export elements, on 127.0.0.1:3260.
    fn default() -> Self {
        IscsiConfig {
            listen: default_listen(),
            queue_depth: default_queue_depth(),
            nop_interval_secs: default_nop_interval(),
            max_recv_data_segment_length: default_max_recv_segment(),
            max_burst_length: default_max_burst(),
            first_burst_length: default_first_burst(),
            discovery_chap: None,
            targets: vec![TargetEntry {
                name: DEFAULT_LIBRARY_IQN.into(),
                alias: Some("reel-library".into()),
                kind: TargetKind::Library,
                luns: 1,
                preset: None,
                changer: None,
                drive: None,
                drives: None,
                slots: None,
                import_export: None,
                barcode_prefix: String::new(),
                allow_initiators: None,
                chap: None,
                mutual_chap: None,
            }],
        }
    }
}

/// The target name of the zero-configuration library.
pub const DEFAULT_LIBRARY_IQN: &str = "iqn.2026-11.org.reel:library";
pub const DEFAULT_CHANGER: &str = "ibm-3584";
pub const DEFAULT_DRIVE: &str = "ibm-td9";

impl TargetEntry {
    /// The changer and drive models and element counts of a library target.
    pub fn library_layout(
        &self,
    ) -> anyhow::Result<(
        &'static reel_smc::ChangerModel,
        &'static reel_ssc::DriveModel,
        reel_smc::Layout,
    )> {
        let preset = self.preset.map(Preset::parts);
        let changer_name = self
            .changer
            .as_deref()
            .or(preset.as_ref().map(|p| p.0))
            .unwrap_or(DEFAULT_CHANGER);
        let changer = reel_smc::ChangerModel::by_name(changer_name).ok_or_else(|| {
            let names: Vec<&str> = reel_smc::ChangerModel::all()
                .iter()
                .map(|m| m.name())
                .collect();
            anyhow::anyhow!(
                "target {}: unknown changer {changer_name:?} (one of: {})",
                self.name,
                names.join(", ")
            )
        })?;
        let drive_name = self
            .drive
            .as_deref()
            .or(preset.as_ref().map(|p| p.1))
            .unwrap_or(DEFAULT_DRIVE);
        let drive = reel_ssc::DriveModel::by_name(drive_name).ok_or_else(|| {
            let names: Vec<&str> = reel_ssc::DriveModel::all()
                .iter()
                .map(|m| m.name())
                .collect();
            anyhow::anyhow!(
                "target {}: unknown drive {drive_name:?} (one of: {})",
                self.name,
                names.join(", ")
            )
        })?;
        let mut layout = changer.default_layout;
        if let Some((_, _, preset_layout)) = preset {
            layout = preset_layout;
        } else if changer.default_layout.magazines.is_none() {
            layout = reel_smc::Layout {
                drives: 4,
                slots: 40,
                import_export: 4,
                magazines: None,
            };
        }
        if let Some(d) = self.drives {
            layout.drives = d;
        }
        if let Some(s) = self.slots {
            layout.slots = s;
            layout.magazines = None;
        }
        if let Some(ie) = self.import_export {
            layout.import_export = ie;
        }
        if !(1..=256).contains(&layout.drives) {
            anyhow::bail!("target {}: drives must be 1 to 256", self.name);
        }
        if !(1..=10_000).contains(&layout.slots) {
            anyhow::bail!("target {}: slots must be 1 to 10000", self.name);
        }
        if layout.import_export > 255 {
            anyhow::bail!("target {}: import_export must be at most 255", self.name);
        }
        Ok((changer, drive, layout))
    }
}

fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:3260".into()]
}
fn default_queue_depth() -> u32 {
    64
}
fn default_nop_interval() -> u64 {
    15
}
fn default_max_recv_segment() -> u32 {
    262_144
}
fn default_max_burst() -> u32 {
    1 << 20
}
fn default_first_burst() -> u32 {
    65_536
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// A tape library: an SMC changer at LUN 0 and SSC drives at LUNs 1…n.
    Library,
    /// A direct-access LUN that discards writes and reads zeros: protocol tests and the
    /// iSCSI throughput benchmark.
    NullDisk,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    /// iSCSI name (iqn., eui. or naa. form, RFC 7143 §4.2.7).
    pub name: String,
    pub alias: Option<String>,
    pub kind: TargetKind,
    /// Number of LUNs (null-disk targets).
    #[serde(default = "one")]
    pub luns: u32,
    /// Library targets: a ready-made library ([`Preset`]); the keys below override it.
    pub preset: Option<Preset>,
    /// Library targets: the changer model (`reel models` lists them; default ibm-3584).
    pub changer: Option<String>,
    /// Library targets: the drive model (default ibm-td9).
    pub drive: Option<String>,
    /// Library targets: element counts (defaults: 4 drives, 40 slots, 4 import/export; an
    /// autoloader model brings its own).
    pub drives: Option<u16>,
    pub slots: Option<u16>,
    pub import_export: Option<u16>,
    /// Library targets: only cartridges whose barcode starts with this are placed here.
    #[serde(default)]
    pub barcode_prefix: String,
    /// Only these initiators may log in (all when absent).
    pub allow_initiators: Option<Vec<String>>,
    /// Initiators must authenticate with these credentials (one-way CHAP).
    pub chap: Option<Chap>,
    /// The target authenticates itself with these (mutual CHAP; needs `chap`).
    pub mutual_chap: Option<Chap>,
}

fn one() -> u32 {
    1
}

/// Libraries modelled on the systems of the field reports and their modern equivalents.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// A 1U autoloader: HPE 1/8 G2, one half-height LTO drive, two magazines of 4.
    Autoloader,
    /// A midrange library: StorageTek SL150, 4 drives, 48 slots, 4 mail slots.
    Midrange,
    /// A large library: IBM TS4500 (3584), 24 drives, 2,000 slots, 10 I/O slots.
    Large,
    /// A big VTL node: IBM 3584 personality, 256 drives, 10,000 slots, 32 I/O slots.
    VtlNode,
}

impl Preset {
    /// Changer, drive and layout of the preset.
    pub fn parts(self) -> (&'static str, &'static str, reel_smc::Layout) {
        let layout = |drives, slots, import_export, magazines| reel_smc::Layout {
            drives,
            slots,
            import_export,
            magazines,
        };
        match self {
            Preset::Autoloader => (
                "hp-1x8-g2",
                "hpe-ultrium9-hh",
                layout(1, 8, 0, Some((2, 4))),
            ),
            Preset::Midrange => ("stk-sl150", "hpe-ultrium9-hh", layout(4, 48, 4, None)),
            Preset::Large => ("ibm-3584", "ibm-td9", layout(24, 2000, 10, None)),
            Preset::VtlNode => ("ibm-3584", "ibm-td9", layout(256, 10_000, 32, None)),
        }
    }
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Chap {
    pub user: String,
    pub secret: String,
}

impl std::fmt::Debug for Chap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chap")
            .field("user", &self.user)
            .field("secret", &"<secret>")
            .finish()
    }
}

/// Loads and validates a configuration file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Parses and validates configuration text.
pub fn parse(text: &str) -> anyhow::Result<Config> {
    let config: Config = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    validate(&config)?;
    Ok(config)
}

/// A valid iSCSI name (RFC 7143 §4.2.7.1–§4.2.7.4, RFC 3722 stringprep aside: we
/// accept the lowercase ASCII subset everyone uses).
pub fn valid_iscsi_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.:".contains(c);
    if name.len() > 223 || !name.chars().all(allowed) {
        return false;
    }
    if let Some(rest) = name.strip_prefix("iqn.") {
        // iqn.yyyy-mm.reversed.domain[:anything]
        let bytes = rest.as_bytes();
        bytes.len() > 8
            && bytes[..4].iter().all(u8::is_ascii_digit)
            && bytes[4] == b'-'
            && bytes[5..7].iter().all(u8::is_ascii_digit)
            && bytes[7] == b'.'
    } else if let Some(hex) = name.strip_prefix("eui.") {
        hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit())
    } else if let Some(hex) = name.strip_prefix("naa.") {
        (hex.len() == 16 || hex.len() == 32) && hex.chars().all(|c| c.is_ascii_hexdigit())
    } else {
        false
    }
}

fn validate_chap(target: &str, which: &str, chap: &Chap) -> anyhow::Result<()> {
    if chap.user.is_empty() || chap.user.len() > 255 {
        anyhow::bail!("target {target}: {which}.user must be 1 to 255 characters");
    }
    // RFC 7143 §12.1.3 asks for secrets of at least 96 bits; the Linux initiator wants 12–16 characters.
    if chap.secret.len() < 12 || chap.secret.len() > 255 {
        anyhow::bail!(
            "target {target}: {which}.secret must be 12 to 255 characters (RFC 7143 §12.1.3)"
        );
    }
    Ok(())
}

fn validate(config: &Config) -> anyhow::Result<()> {
    let http = &config.http;
    http.listen.parse::<SocketAddr>().map_err(|_| {
        anyhow::anyhow!(
            "http.listen: {:?} is not an address:port such as 127.0.0.1:8080",
            http.listen
        )
    })?;
    if http.tls_cert.is_some() != http.tls_key.is_some() {
        anyhow::bail!("http: tls_cert and tls_key go together");
    }
    let iscsi = &config.iscsi;
    for listen in &iscsi.listen {
        listen.parse::<SocketAddr>().map_err(|_| {
            anyhow::anyhow!(
                "iscsi.listen: {listen:?} is not an address:port such as 127.0.0.1:3260"
            )
        })?;
    }
    if !(1..=4096).contains(&iscsi.queue_depth) {
        anyhow::bail!(
            "iscsi.queue_depth must be 1 to 4096, not {}",
            iscsi.queue_depth
        );
    }
    if iscsi.nop_interval_secs == 0 {
        anyhow::bail!("iscsi.nop_interval_secs must be at least 1");
    }
    for (key, value) in [
        (
            "max_recv_data_segment_length",
            iscsi.max_recv_data_segment_length,
        ),
        ("max_burst_length", iscsi.max_burst_length),
        ("first_burst_length", iscsi.first_burst_length),
    ] {
        if !(512..=16_777_215).contains(&value) {
            anyhow::bail!(
                "iscsi.{key} must be 512 to 16777215 (RFC 7143 §13.12–§13.14), not {value}"
            );
        }
    }
    if let Some(chap) = &iscsi.discovery_chap {
        validate_chap("(discovery)", "discovery_chap", chap)?;
    }
    let mut names = HashSet::new();
    for target in &iscsi.targets {
        if !valid_iscsi_name(&target.name) {
            anyhow::bail!(
                "iscsi.target: {:?} is not a valid iSCSI name (lowercase iqn.yyyy-mm.domain[:id], eui.<16 hex> or naa.<hex>)",
                target.name
            );
        }
        if !names.insert(target.name.as_str()) {
            anyhow::bail!("iscsi.target: {} is defined twice", target.name);
        }
        if target.kind == TargetKind::Library {
            target.library_layout()?;
        }
        if !(1..=256).contains(&target.luns) {
            anyhow::bail!("target {}: luns must be 1 to 256", target.name);
        }
        for initiator in target.allow_initiators.iter().flatten() {
            if !valid_iscsi_name(initiator) {
                anyhow::bail!(
                    "target {}: allow_initiators: {initiator:?} is not a valid iSCSI name",
                    target.name
                );
            }
        }
        if let Some(chap) = &target.chap {
            validate_chap(&target.name, "chap", chap)?;
        }
        if let Some(mutual) = &target.mutual_chap {
            validate_chap(&target.name, "mutual_chap", mutual)?;
            if target.chap.is_none() {
                anyhow::bail!(
                    "target {}: mutual_chap needs chap (the initiator authenticates first)",
                    target.name
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_example_parses() {
        let config = parse(
            r#"
            [iscsi]
            listen = ["127.0.0.1:3260"]
            [[iscsi.target]]
            name = "iqn.2026-11.org.reel.test:open"
            alias = "open"
            kind = "null-disk"
            [[iscsi.target]]
            name = "iqn.2026-11.org.reel.test:mutual"
            kind = "null-disk"
            allow_initiators = ["iqn.2026-11.org.reel.test:guest"]
            chap = { user = "reel-user", secret = "reel-secret-12" }
            mutual_chap = { user = "reel-target", secret = "target-secret-1" }
            "#,
        )
        .unwrap();
        assert_eq!(config.iscsi.targets.len(), 2);
        assert_eq!(
            config.iscsi.targets[1].mutual_chap.as_ref().unwrap().user,
            "reel-target"
        );
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let err = parse("[iscsi]\nlisten = [\"127.0.0.1:3260\"]\nqueue_dept = 4\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3") && err.contains("queue_dept"),
            "{err}"
        );
        let err = parse("[[iscsi.target]]\nname = \"IQN.bad\"\nkind = \"null-disk\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid iSCSI name"), "{err}");
        let err = parse("[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"tape\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3") && err.contains("null-disk"), "{err}");
        let err = parse("[iscsi]\nlisten = [\"localhost\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an address:port"), "{err}");
    }

    #[test]
    fn weak_or_lonely_secrets_are_refused_without_echoing_them() {
        let err = parse(
            "[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"null-disk\"\nchap = { user = \"u\", secret = \"short\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("12 to 255") && !err.contains("short"), "{err}");
        let err = parse(
            "[[iscsi.target]]\nname = \"iqn.2026-11.org.x:a\"\nkind = \"null-disk\"\nmutual_chap = { user = \"u\", secret = \"long-enough-secret\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("needs chap"), "{err}");
        let debug = format!(
            "{:?}",
            Chap {
                user: "u".into(),
                secret: "hunter2hunter2".into()
            }
        );
        assert!(!debug.contains("hunter2"));
    }

    #[test]
    fn iscsi_names() {
        assert!(valid_iscsi_name("iqn.2026-11.org.reel:lib0"));
        assert!(valid_iscsi_name("eui.02004567a425678d"));
        assert!(!valid_iscsi_name("iqn.26-11.org"));
        assert!(!valid_iscsi_name("iqn.2026-11.org.reel:Lib0"));
        assert!(!valid_iscsi_name("target0"));
    }
}
