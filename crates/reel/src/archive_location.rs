//! Opens the `[archive]` location (docs/design/archive.md): a directory on the local back end,
//! or a bucket and prefix on S3 with credentials from the environment, as for `[store.s3]`.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use reel_backend::{Backend, LocalBackend};
use reel_volume::{Archive, Cartridges};

use crate::config::ArchiveSection;
use crate::store_key::StoreKeys;

/// `dir/…` or `s3://bucket/prefix at endpoint`, for messages.
pub fn describe(section: &ArchiveSection) -> String {
    match (&section.directory, &section.s3) {
        (Some(dir), _) => dir.display().to_string(),
        (None, Some(s3)) => format!(
            "s3://{}/{}{}{}",
            s3.bucket,
            s3.prefix,
            s3.endpoint
                .as_ref()
                .map(|e| format!(" at {e}"))
                .unwrap_or_default(),
            section
                .storage_class
                .as_ref()
                .map(|c| format!(" (storage class {c})"))
                .unwrap_or_default()
        ),
        (None, None) => "nowhere".into(),
    }
}

/// The archive tier over `cartridges`, on the configured location. `data_dir` is refused as
/// (or around) a directory location: the store and the archive must not share files.
/// With the store's `keys` (an encrypted store), every image object is sealed with them, as
/// the store's own objects are: a cartridge's data leaves the node encrypted on its way to
/// the archive too.
pub fn open(
    section: &ArchiveSection,
    cartridges: &Cartridges,
    data_dir: &Path,
    keys: Option<&StoreKeys>,
) -> anyhow::Result<Archive> {
    let location = sealed(location(section, data_dir)?, keys);
    Ok(Archive::new(cartridges.clone(), location).with_piece_size(section.piece_size_bytes()?))
}

/// The location's objects through the store's keys, when it has some.
pub fn sealed(location: Arc<dyn Backend>, keys: Option<&StoreKeys>) -> Arc<dyn Backend> {
    match keys {
        Some(keys) => Arc::new(keys.seal(location)),
        None => location,
    }
}

/// The configured location itself (objects as stored: sealed or not).
pub fn location(section: &ArchiveSection, data_dir: &Path) -> anyhow::Result<Arc<dyn Backend>> {
    Ok(match (&section.directory, &section.s3) {
        (Some(dir), _) => {
            let (a, b) = (absolute(dir), absolute(data_dir));
            if a.starts_with(&b) || b.starts_with(&a) {
                anyhow::bail!(
                    "archive.directory {} and the data directory {} overlap: give the archive a directory of its own",
                    dir.display(),
                    data_dir.display()
                );
            }
            Arc::new(
                LocalBackend::open(dir)
                    .with_context(|| format!("opening the archive directory {}", dir.display()))?,
            )
        }
        (None, Some(s3)) => Arc::new(
            crate::data_dir::open_bucket(s3, &s3.prefix, section.storage_class.as_deref())
                .context("opening the archive location")?,
        ),
        (None, None) => anyhow::bail!("archive: no location (validated at load)"),
    })
}

fn absolute(p: &Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
