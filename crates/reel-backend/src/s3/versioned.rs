//! Compare-and-swap objects on S3: `If-None-Match: *` to create, `If-Match: <ETag>` to replace.

use bytes::Bytes;
use object_store::{GetOptions, ObjectStore, PutOptions, PutPayload, UpdateVersion};

use super::{Inner, S3Backend, bump};
use crate::{BackendError, Key, Result, Version, VersionedObjects};

impl Inner {
    async fn read_versioned(&self, key: Key) -> Result<Option<(Vec<u8>, Version)>> {
        bump(&self.counters.gets, 1);
        let res = match self
            .store
            .get_opts(&self.path(key.as_str()), GetOptions::default())
            .await
        {
            Ok(res) => res,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error("GET", &key, e)),
        };
        let Some(etag) = res.meta.e_tag.clone() else {
            return Err(self.error_msg(
                "GET",
                key.as_str(),
                "the server sent no ETag: compare-and-swap is impossible".into(),
            ));
        };
        let bytes = res.bytes().await.map_err(|e| self.error("GET", &key, e))?;
        bump(&self.counters.bytes_down, bytes.len() as u64);
        Ok(Some((bytes.into(), Version(etag))))
    }

    async fn write_versioned(
        &self,
        key: Key,
        data: Bytes,
        expected: Option<Version>,
    ) -> Result<Version> {
        let mode = match &expected {
            None => object_store::PutMode::Create,
            Some(v) => object_store::PutMode::Update(UpdateVersion {
                e_tag: Some(v.0.clone()),
                version: None,
            }),
        };
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        bump(&self.counters.puts, 1);
        let answer = self
            .store
            .put_opts(
                &self.path(key.as_str()),
                PutPayload::from(data.clone()),
                opts,
            )
            .await;
        match answer {
            Ok(done) => {
                bump(&self.counters.bytes_up, data.len() as u64);
                match done.e_tag {
                    Some(etag) => Ok(Version(etag)),
                    // Some servers omit the ETag on PUT: read it.
                    None => match self.read_versioned(key.clone()).await? {
                        Some((_, v)) => Ok(v),
                        None => Err(BackendError::VersionMismatch(key)),
                    },
                }
            }
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => {
                // The client retries a request whose answer was lost; if that first attempt
                // stored our bytes, the retry fails its condition. Callers write bodies that
                // are unique to each write (a lease carries its renewal count), so finding our
                // bytes means our write won.
                if let Some((now, version)) = self.read_versioned(key.clone()).await?
                    && now == data
                {
                    return Ok(version);
                }
                Err(match expected {
                    None => BackendError::AlreadyExists(key),
                    Some(_) => BackendError::VersionMismatch(key),
                })
            }
            Err(e) => Err(self.error("PUT", &key, e)),
        }
    }
}

impl VersionedObjects for S3Backend {
    fn read_versioned(&self, key: &Key) -> Result<Option<(Vec<u8>, Version)>> {
        let k = key.clone();
        self.run(key, move |s| async move { s.read_versioned(k).await })
    }

    fn write_versioned(
        &self,
        key: &Key,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version> {
        let (k, data, expected) = (key.clone(), Bytes::copy_from_slice(data), expected.cloned());
        self.run(key, move |s| async move {
            s.write_versioned(k, data, expected).await
        })
    }

    fn list_versioned(&self, prefix: &str) -> Result<Vec<Key>> {
        Ok(crate::Backend::list(self, prefix)?
            .into_iter()
            .map(|o| o.key)
            .collect())
    }
}
