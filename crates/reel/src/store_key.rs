//! The store encryption key: `reel key generate`, and where a node finds its key
//! (`[store.encryption] key_file`, else the environment variable `REEL_STORE_KEY`).
//!
//! The key never goes into the data directory or the bucket: only its id does (`bucket.toml`,
//! every object's header). Losing the key is losing the data.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use reel_backend::{Backend, EncryptedBackend, KeyId, StoreKey};

/// The environment variable holding the key as hex when no key file is configured.
pub const KEY_ENV: &str = "REEL_STORE_KEY";

#[derive(clap::Subcommand, Debug)]
pub enum KeyCommand {
    /// Write a new random 256-bit store key to FILE (mode 0600; an existing file is never
    /// overwritten). Keep a copy somewhere safe: losing the key is losing the data.
    Generate {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Finish a key rotation: rewrite every object of the store's bucket prefix that a
    /// previous key sealed, sealed with the current key (the node may keep serving). First
    /// configure the new key as `key_file` and the old one in `previous_key_files`, and
    /// restart `reel serve` so the data directory records them; afterwards the previous key
    /// can be removed from the configuration.
    Reseal {
        /// The node's data directory (its `bucket.toml` names the bucket and the key files).
        #[arg(long = "data", value_name = "DIR")]
        dir: PathBuf,
        /// Another prefix of the same bucket to reseal too (the shared vault,
        /// `<cluster prefix>/vault`); repeatable.
        #[arg(long = "prefix", value_name = "PREFIX")]
        prefixes: Vec<String>,
        /// The node's configuration file: its `[archive]` location (another bucket, a prefix
        /// or a directory), whose images are sealed with the store key, is resealed too.
        #[arg(long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

pub fn run(cmd: KeyCommand) -> anyhow::Result<()> {
    match cmd {
        KeyCommand::Generate { file } => {
            let key = StoreKey::generate()?;
            write_key_file(&file, &key)?;
            println!(
                "wrote store key {} to {}\n\
                 use it with [store.encryption] key_file = \"{}\" (or REEL_STORE_KEY);\n\
                 keep a copy apart from the node and the bucket: without the key the bucket's data cannot be read",
                key.id(),
                file.display(),
                file.display()
            );
            Ok(())
        }
        KeyCommand::Reseal {
            dir,
            prefixes,
            config,
        } => {
            let mut locations: Vec<(String, std::sync::Arc<dyn Backend>)> = Vec::new();
            if let Some(path) = &config {
                let config = crate::config::load(path)?;
                match &config.archive {
                    Some(section) => locations.push((
                        format!("archive {}", crate::archive_location::describe(section)),
                        crate::archive_location::location(section, &dir)?,
                    )),
                    None => println!(
                        "{}: no [archive] location, nothing more to reseal",
                        path.display()
                    ),
                }
            }
            let started = std::time::Instant::now();
            let mut last = std::time::Instant::now();
            let report =
                crate::data_dir::reseal(&dir, &prefixes, &locations, &mut |name, done, total| {
                    if done == total || last.elapsed().as_secs() >= 1 {
                        last = std::time::Instant::now();
                        println!("{name}: {done}/{total} objects checked");
                    }
                })?;
            println!(
                "resealed {} of {} objects with key {} in {:.1?} ({} already sealed with it, {} not encrypted)",
                report.resealed,
                report.objects,
                report.key_id,
                started.elapsed(),
                report.objects - report.resealed - report.not_encrypted,
                report.not_encrypted
            );
            println!(
                "every object is now sealed with key {}: the previous keys can be removed from [store.encryption] previous_key_files",
                report.key_id
            );
            Ok(())
        }
    }
}

fn write_key_file(path: &Path, key: &StoreKey) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| {
            format!(
                "creating the key file {} (an existing file is never overwritten)",
                path.display()
            )
        })?;
    file.write_all(format!("{}\n", key.to_hex()).as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing the key file {}", path.display()))?;
    Ok(())
}

/// Reads a key file: 64 hex digits, readable by its owner only.
pub fn read_key_file(path: &Path) -> anyhow::Result<StoreKey> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("the store key file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "the store key file {} has mode {mode:03o}: other users could read the key; make it private with `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the store key file {}", path.display()))?,
    );
    StoreKey::from_hex(&text).with_context(|| format!("the store key file {}", path.display()))
}

/// A store's keys: the one that seals what is written, and older ones that still open what
/// they sealed (key rotation).
#[derive(Clone, Debug)]
pub struct StoreKeys {
    pub current: StoreKey,
    pub previous: Vec<StoreKey>,
}

impl StoreKeys {
    pub fn id(&self) -> KeyId {
        self.current.id()
    }

    /// Whether objects sealed with key `id` open with these keys.
    pub fn opens(&self, id: KeyId) -> bool {
        self.current.id() == id || self.previous.iter().any(|k| k.id() == id)
    }

    /// `inner` sealed with the current key, opening with any of them.
    pub fn seal<B: Backend>(&self, inner: B) -> EncryptedBackend<B> {
        EncryptedBackend::new(inner, self.current.clone()).with_previous_keys(self.previous.clone())
    }
}

/// The configured keys: the key file if one is given, else `REEL_STORE_KEY`, else none; and
/// the previous keys' files. `env` is the environment (only the binary reads it).
pub fn load(
    key_file: Option<&Path>,
    previous_key_files: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<StoreKeys>> {
    let current = if let Some(path) = key_file {
        Some(read_key_file(path)?)
    } else {
        match env(KEY_ENV) {
            Some(text) => {
                let text = zeroize::Zeroizing::new(text);
                Some(
                    StoreKey::from_hex(&text)
                        .with_context(|| format!("the environment variable {KEY_ENV}"))?,
                )
            }
            None => None,
        }
    };
    let previous = previous_key_files
        .iter()
        .map(|p| read_key_file(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    match current {
        Some(current) => Ok(Some(StoreKeys { current, previous })),
        None if previous.is_empty() => Ok(None),
        None => anyhow::bail!(
            "previous_key_files are set but no current store key is configured ([store.encryption] key_file, or {KEY_ENV})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_keys_open_but_only_the_current_one_seals() {
        let dir = tempfile::tempdir().unwrap();
        let (new, old) = (dir.path().join("new"), dir.path().join("old"));
        let (new_key, old_key) = (StoreKey::generate().unwrap(), StoreKey::generate().unwrap());
        write_key_file(&new, &new_key).unwrap();
        write_key_file(&old, &old_key).unwrap();
        let none = |_: &str| None;
        let keys = load(Some(&new), std::slice::from_ref(&old), &none)
            .unwrap()
            .unwrap();
        assert_eq!(keys.id(), new_key.id());
        assert!(keys.opens(old_key.id()) && keys.opens(new_key.id()));
        assert!(!keys.opens(StoreKey::generate().unwrap().id()));
        let err = load(None, &[old], &none).unwrap_err();
        assert!(
            format!("{err:#}").contains("no current store key"),
            "{err:#}"
        );
    }

    #[test]
    fn a_generated_key_file_is_private_reads_back_and_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.key");
        let key = StoreKey::generate().unwrap();
        write_key_file(&path, &key).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_key_file(&path).unwrap().id(), key.id());
        let err = write_key_file(&path, &StoreKey::generate().unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains("never overwritten"), "{err:#}");
        assert_eq!(read_key_file(&path).unwrap().id(), key.id());

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_key_file(&path).unwrap_err();
        assert!(format!("{err:#}").contains("chmod 600"), "{err:#}");
    }

    #[test]
    fn the_key_file_wins_over_the_environment_and_bad_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let file_key = StoreKey::generate().unwrap();
        write_key_file(&path, &file_key).unwrap();
        let env_key = StoreKey::generate().unwrap();
        let env_hex = env_key.to_hex();
        let env = |name: &str| (name == KEY_ENV).then(|| env_hex.clone());
        let none = |_: &str| None;
        assert_eq!(
            load(Some(&path), &[], &env).unwrap().unwrap().id(),
            file_key.id()
        );
        assert_eq!(load(None, &[], &env).unwrap().unwrap().id(), env_key.id());
        assert!(load(None, &[], &none).unwrap().is_none());
        let bad = |_: &str| Some("xyz".to_string());
        let err = load(None, &[], &bad).unwrap_err();
        assert!(format!("{err:#}").contains(KEY_ENV), "{err:#}");
    }
}
