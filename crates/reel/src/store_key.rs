//! The store encryption key: `reel key generate`, and where a node finds its key
//! (`[store.encryption] key_file`, else the environment variable `REEL_STORE_KEY`).
//!
//! The key never goes into the data directory or the bucket: only its id does (`bucket.toml`,
//! every object's header). Losing the key is losing the data.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use reel_backend::StoreKey;

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

/// The configured key: the key file if one is given, else `REEL_STORE_KEY`, else none.
/// `env` is the environment (only the binary reads it).
pub fn load(
    key_file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<StoreKey>> {
    if let Some(path) = key_file {
        return read_key_file(path).map(Some);
    }
    match env(KEY_ENV) {
        Some(text) => {
            let text = zeroize::Zeroizing::new(text);
            Ok(Some(StoreKey::from_hex(&text).with_context(|| {
                format!("the environment variable {KEY_ENV}")
            })?))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            load(Some(&path), &env).unwrap().unwrap().id(),
            file_key.id()
        );
        assert_eq!(load(None, &env).unwrap().unwrap().id(), env_key.id());
        assert!(load(None, &none).unwrap().is_none());
        let bad = |_: &str| Some("xyz".to_string());
        let err = load(None, &bad).unwrap_err();
        assert!(format!("{err:#}").contains(KEY_ENV), "{err:#}");
    }
}
