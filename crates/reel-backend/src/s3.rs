//! A back end over S3-compatible object storage (feature `s3`): object `k` is `prefix/k` in one
//! bucket, reached through the `object_store` crate's S3 client.
//!
//! [`Backend`] is synchronous and is called from plain threads as well as from threads inside
//! the server's tokio runtime, where `Runtime::block_on` would panic. So the back end owns a
//! small runtime of its own: each call spawns its request there and waits on a channel.
//!
//! Mapping (see `docs/design/backend.md`, "S3 back end"): put is one PUT (`If-None-Match: *`
//! for [`PutMode::Create`], whose 412 is `AlreadyExists`), after a key-conflict check (HEAD of
//! the ancestors and a short LIST of `key/`, not atomic across writers: each reel node owns its
//! prefix; skipped for keys of the store's flat layout, see [`S3Config::flat_prefixes`]), its
//! body unsigned where TLS or loopback makes that safe ([`S3Config::unsigned_payload`]); get is a GET; get_range a ranged GET checked against the object size in the reply
//! (S3 clamps ranges past the end, or answers 416); list is ListObjectsV2, every page; delete is
//! a DELETE, which S3 answers with success for a missing key. Transient failures (5xx, 429,
//! connection refused, timeouts of idempotent requests) are retried with exponential backoff for
//! [`S3Config::retry_window`]; authentication failures are not retried, and a 507 (full disk) is
//! made final so that it is `NoSpace` at once. A create-only PUT whose outcome is unknown (timed
//! out, or retried by the client after a lost answer) is retried here, and a 412 then counts as
//! success only if the object holds our bytes.

use std::fmt;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, Checksum};
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService, ReqwestConnector,
};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{
    BackoffConfig, Certificate, ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt,
    PutOptions, PutPayload, RetryConfig, StaticCredentialProvider,
};

use crate::{Backend, BackendError, Key, ObjectMeta, PutMode, Result, chain_text, check_range};

mod versioned;

/// Where the back end's objects live and how to reach them.
#[derive(Clone, Debug)]
pub struct S3Config {
    /// `http://host:port` of an S3-compatible server; `None` is AWS S3 in `region`.
    pub endpoint: Option<String>,
    pub bucket: String,
    /// Every key is stored as `prefix/key`; empty stores keys at the bucket's root. A valid
    /// [`Key`] itself (segments of `[A-Za-z0-9._-]`).
    pub prefix: String,
    pub region: String,
    /// Allows a plain-http endpoint (loopback test servers, a trusted network).
    pub allow_http: bool,
    pub credentials: S3Credentials,
    /// How long transient failures (5xx, 503 SlowDown, connection refused while the server
    /// restarts, timeouts) are retried before an operation fails: writes pause, then resume.
    pub retry_window: Duration,
    /// Longest single HTTP request, from connect to the last byte of the answer.
    pub request_timeout: Duration,
    /// Keys exactly one segment below one of these prefixes (`packs/<name>`, not
    /// `packs/a/b`) skip the key-conflict check: two requests per put saved. Sound only
    /// because the writer of such keys never writes the prefixes themselves or their ancestors
    /// as keys, nor anything deeper below them. The default is the chunk store's layout
    /// (`packs/<id>.pack`, `catalog/journal/<seq>.jrnl`), which keeps that rule; any other
    /// key is still checked, so a foreign `packs/x/y` is refused against `packs/x`.
    pub flat_prefixes: Vec<String>,
    /// Sends PUT bodies as `UNSIGNED-PAYLOAD` instead of signing their SHA-256 (saves that
    /// hash on both sides, ~0.5 CPU-s per GB each). The headers stay signed. `None` decides
    /// by the endpoint: unsigned over https (TLS protects the body in transit) and to a
    /// loopback address (no wire to protect); signed over plain http to any other host,
    /// where only TCP's checksum would guard the body. Either way damage that slips through
    /// is found at read time: every chunk and journal object carries its BLAKE3.
    pub unsigned_payload: Option<bool>,
    /// `x-amz-storage-class` of every PUT (the archive tier's image objects); `None` leaves
    /// the bucket's default.
    pub storage_class: Option<String>,
    /// PEM certificates trusted besides the system's, for an https endpoint whose certificate
    /// a private CA signed (an on-premises server). A certificate that fails verification is a
    /// final error, never retried.
    pub ca_certificates_pem: Option<Vec<u8>>,
    /// The EC2 instance metadata service (`http://169.254.169.254` on EC2). When set, the
    /// instance profile's role is the last place [`S3Credentials::Environment`] looks for keys
    /// (temporary, renewed before they expire). `None`: no request goes to a metadata address,
    /// which off EC2 would wait out connect timeouts for the whole retry window.
    pub instance_metadata: Option<String>,
}

impl S3Config {
    /// A configuration with defaults: AWS, region `us-east-1`, credentials from the environment,
    /// a 5-minute retry window and 60-second requests.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        S3Config {
            endpoint: None,
            bucket: bucket.into(),
            prefix: prefix.into(),
            region: "us-east-1".to_string(),
            allow_http: false,
            credentials: S3Credentials::Environment,
            retry_window: Duration::from_secs(5 * 60),
            request_timeout: Duration::from_secs(60),
            flat_prefixes: vec!["packs/".to_string(), "catalog/journal/".to_string()],
            unsigned_payload: None,
            storage_class: None,
            ca_certificates_pem: None,
            instance_metadata: None,
        }
    }

    /// Whether PUT bodies go unsigned (see [`S3Config::unsigned_payload`]).
    pub fn payload_unsigned(&self) -> bool {
        self.unsigned_payload
            .unwrap_or_else(|| self.endpoint.as_deref().is_none_or(endpoint_is_private))
    }
}

/// Whether `endpoint` is https or a loopback host (`localhost`, `127.x.x.x`, `[::1]`).
fn endpoint_is_private(endpoint: &str) -> bool {
    let lower = endpoint.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return true;
    }
    let Some(rest) = lower.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Where the access key comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum S3Credentials {
    /// Given explicitly (tests, a configuration file).
    Static {
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
    },
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` if set, else profile
    /// `AWS_PROFILE` (or `default`) of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`,
    /// or `~/.aws/credentials`). The variables are read once, when the back end is opened; the
    /// file is read again whenever it changes (keys rotated, temporary credentials renewed by
    /// whatever writes it), so a running node follows it without a restart.
    Environment,
}

// By hand, so that a logged configuration never shows a secret.
impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            S3Credentials::Static {
                access_key_id,
                session_token,
                ..
            } => f
                .debug_struct("Static")
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &"<redacted>")
                .field(
                    "session_token",
                    &session_token.as_ref().map(|_| "<redacted>"),
                )
                .finish(),
            S3Credentials::Environment => f.write_str("Environment"),
        }
    }
}

/// Credentials resolved to where the keys come from, and a description of that (for error
/// messages).
struct ResolvedCredentials {
    keys: KeySource,
    source: String,
}

/// Where the keys a back end signs with come from.
enum KeySource {
    /// The same keys for the back end's life (the configuration, environment variables).
    Fixed(StaticKeys),
    /// A profile of a shared credentials file, read again when the file changes
    /// ([`FileCredentials`]); `first` is what it holds now.
    File {
        path: PathBuf,
        profile: String,
        first: StaticKeys,
    },
    /// Temporary keys from the platform's credentials service, fetched and renewed before they
    /// expire by the S3 client's own provider, which these settings select.
    Service(Vec<(AmazonS3ConfigKey, String)>),
}

impl fmt::Debug for ResolvedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // StaticKeys' Debug shows the access key id only; the service settings hold no secret.
        let mut d = f.debug_struct("ResolvedCredentials");
        match &self.keys {
            KeySource::Fixed(keys) | KeySource::File { first: keys, .. } => d.field("keys", keys),
            KeySource::Service(settings) => d.field("service", settings),
        };
        d.field("source", &self.source).finish()
    }
}

impl S3Credentials {
    /// Resolves to keys, reading variables through `env` (the process environment in use);
    /// `instance_metadata` as [`S3Config::instance_metadata`].
    fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        instance_metadata: Option<&str>,
    ) -> Result<ResolvedCredentials, String> {
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        match self {
            S3Credentials::Static {
                access_key_id,
                secret_access_key,
                session_token,
            } => Ok(ResolvedCredentials {
                keys: KeySource::Fixed(StaticKeys {
                    access_key_id: access_key_id.clone(),
                    secret_access_key: secret_access_key.clone(),
                    session_token: session_token.clone(),
                }),
                source: "the configuration".to_string(),
            }),
            S3Credentials::Environment => {
                if let (Some(id), Some(secret)) =
                    (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
                {
                    return Ok(ResolvedCredentials {
                        keys: KeySource::Fixed(StaticKeys {
                            access_key_id: id,
                            secret_access_key: secret,
                            session_token: env("AWS_SESSION_TOKEN"),
                        }),
                        source: "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY".to_string(),
                    });
                }
                let service = credentials_service(&env).or_else(|| {
                    instance_metadata.map(|endpoint| {
                        (
                            vec![(AmazonS3ConfigKey::MetadataEndpoint, endpoint.to_string())],
                            format!("the instance profile (metadata service at {endpoint})"),
                        )
                    })
                });
                let file = match (env("AWS_SHARED_CREDENTIALS_FILE"), env("HOME")) {
                    (Some(f), _) => Some(PathBuf::from(f)),
                    (None, Some(home)) => Some(PathBuf::from(home).join(".aws/credentials")),
                    (None, None) => None,
                };
                let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
                let mut no_file = "neither AWS_SHARED_CREDENTIALS_FILE nor HOME to find a \
                                   credentials file"
                    .to_string();
                if let Some(path) = file {
                    match read_credentials_file(&path, &profile) {
                        Ok(first) => {
                            return Ok(ResolvedCredentials {
                                source: format!("profile {profile} of {}", path.display()),
                                keys: KeySource::File {
                                    path,
                                    profile,
                                    first,
                                },
                            });
                        }
                        // No file at all: the platform's service, if there is one.
                        Err(_) if !path.exists() => {
                            no_file = format!("no credentials file {}", path.display());
                        }
                        // One that is there but unusable is a mistake to report.
                        Err(e) => {
                            return Err(format!(
                                "no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and {e}"
                            ));
                        }
                    }
                }
                match service {
                    Some((settings, source)) => Ok(ResolvedCredentials {
                        keys: KeySource::Service(settings),
                        source,
                    }),
                    None => Err(format!(
                        "no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, {no_file}, no credentials \
                         service (AWS_WEB_IDENTITY_TOKEN_FILE, \
                         AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI) and no instance \
                         metadata service configured"
                    )),
                }
            }
        }
    }
}

/// The platform's credentials service the environment names, if any, as the S3 client's
/// settings for it and a description: web identity (Kubernetes service-account roles: a token
/// file exchanged with STS for a role's keys), a container credentials service with a token file
/// (EKS Pod Identity), or an ECS task role. The keys they hand out expire; the client fetches
/// new ones before they do. The instance metadata service (EC2 instance profiles) is not among
/// them: no request leaves for a metadata address unless the configuration names it
/// ([`S3Config::instance_metadata`]).
fn credentials_service(
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(Vec<(AmazonS3ConfigKey, String)>, String)> {
    use AmazonS3ConfigKey as K;
    if let (Some(token_file), Some(role)) =
        (env("AWS_WEB_IDENTITY_TOKEN_FILE"), env("AWS_ROLE_ARN"))
    {
        let mut settings = vec![
            (K::WebIdentityTokenFile, token_file),
            (K::RoleArn, role.clone()),
        ];
        if let Some(name) = env("AWS_ROLE_SESSION_NAME") {
            settings.push((K::RoleSessionName, name));
        }
        if let Some(sts) = env("AWS_ENDPOINT_URL_STS") {
            settings.push((K::StsEndpoint, sts));
        }
        return Some((settings, format!("web identity for role {role}")));
    }
    if let (Some(uri), Some(token_file)) = (
        env("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
    ) {
        let source = format!("the container credentials service at {uri}");
        let settings = vec![
            (K::ContainerCredentialsFullUri, uri),
            (K::ContainerAuthorizationTokenFile, token_file),
        ];
        return Some((settings, source));
    }
    let uri = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")?;
    Some((
        vec![(K::ContainerCredentialsRelativeUri, uri)],
        "the ECS task role".to_string(),
    ))
}

/// An access key, its secret and an optional session token: from the configuration, the
/// environment or a profile of a shared credentials file.
#[derive(Clone)]
struct StaticKeys {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

impl fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticKeys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl From<StaticKeys> for object_store::aws::AwsCredential {
    fn from(keys: StaticKeys) -> Self {
        object_store::aws::AwsCredential {
            key_id: keys.access_key_id,
            secret_key: keys.secret_access_key,
            token: keys.session_token,
        }
    }
}

/// Reads `profile` from the INI text of an AWS shared credentials file: `[name]` sections
/// (`[profile name]` is accepted too, as in `~/.aws/config`), `key = value` lines, comments
/// starting with `#` or `;`. Keys are case-insensitive; a repeated section adds to the first.
fn parse_credentials_file(text: &str, profile: &str) -> Result<StaticKeys, String> {
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut found = false;
    let mut in_profile = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let Some(name) = section.strip_suffix(']') else {
                return Err(format!("line {}: unterminated section header", n + 1));
            };
            let name = name.trim();
            let name = name.strip_prefix("profile ").map_or(name, str::trim);
            in_profile = name == profile;
            found |= in_profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("line {}: expected key = value", n + 1));
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => id = Some(v),
            "aws_secret_access_key" => secret = Some(v),
            "aws_session_token" => token = Some(v),
            _ => {} // region, output, role settings: not ours
        }
    }
    if !found {
        return Err(format!("no profile [{profile}]"));
    }
    match (id, secret) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(StaticKeys {
            access_key_id,
            secret_access_key,
            session_token: token.filter(|t| !t.is_empty()),
        }),
        _ => Err(format!(
            "profile [{profile}] lacks aws_access_key_id or aws_secret_access_key"
        )),
    }
}

/// `profile`'s keys from the credentials file at `path`.
fn read_credentials_file(path: &std::path::Path, profile: &str) -> Result<StaticKeys, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "the credentials file {} cannot be read: {e}",
            path.display()
        )
    })?;
    parse_credentials_file(&text, profile)
        .map_err(|e| format!("credentials file {}: {e}", path.display()))
}

/// What tells one version of a file from the next without reading it: replaced (a new inode,
/// as editors and `aws configure` write), rewritten in place (size, modification time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileVersion {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileVersion {
    fn of(path: &std::path::Path) -> Option<FileVersion> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileVersion {
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// Keys from a shared credentials file, read again whenever the file changes: one `stat` per
/// request, nothing more while it stays the same. A version that cannot be used (half written,
/// the profile gone) keeps the last good keys, and the refusal they may earn names the problem
/// ([`FileCredentials::problem`]).
struct FileCredentials {
    path: PathBuf,
    profile: String,
    state: std::sync::Mutex<FileCredentialState>,
}

struct FileCredentialState {
    current: Arc<object_store::aws::AwsCredential>,
    /// The version last looked at (used or not); `None` if the file could not be found.
    seen: Option<FileVersion>,
    /// Why the version seen is not the one in use.
    problem: Option<String>,
}

impl FileCredentials {
    fn new(path: PathBuf, profile: String, keys: &StaticKeys) -> FileCredentials {
        let seen = FileVersion::of(&path);
        FileCredentials {
            path,
            profile,
            state: std::sync::Mutex::new(FileCredentialState {
                current: Arc::new(keys.clone().into()),
                seen,
                problem: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FileCredentialState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The keys to sign with now: the file's, read again if it changed since it was last
    /// looked at.
    fn current(&self) -> Arc<object_store::aws::AwsCredential> {
        let version = FileVersion::of(&self.path);
        let mut state = self.lock();
        if version != state.seen {
            state.seen = version;
            match read_credentials_file(&self.path, &self.profile) {
                Ok(keys) => {
                    state.current = Arc::new(keys.into());
                    state.problem = None;
                }
                Err(e) => state.problem = Some(e),
            }
        }
        state.current.clone()
    }

    /// Why the file's latest version is not in use, if it is not.
    fn problem(&self) -> Option<String> {
        self.lock().problem.clone()
    }
}

// By hand: the keys stay out of any log.
impl fmt::Debug for FileCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileCredentials")
            .field("path", &self.path)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl object_store::CredentialProvider for FileCredentials {
    type Credential = object_store::aws::AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<Self::Credential>> {
        Ok(self.current())
    }
}

/// Requests made and bytes moved since the back end was opened. A request retried by the
/// client counts once; a list counts one per page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct S3Counters {
    pub puts: u64,
    pub gets: u64,
    pub heads: u64,
    pub lists: u64,
    pub deletes: u64,
    /// Object bytes sent in PUT bodies.
    pub bytes_up: u64,
    /// Object bytes received in GET bodies.
    pub bytes_down: u64,
}

impl S3Counters {
    pub fn requests(&self) -> u64 {
        self.puts + self.gets + self.heads + self.lists + self.deletes
    }
}

#[derive(Default)]
struct Counters {
    puts: AtomicU64,
    gets: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// The state a request task needs; shared by the back end and its in-flight tasks.
struct Inner {
    store: AmazonS3,
    /// `prefix/`, or empty: what object names start with.
    base: String,
    describe: String,
    retry_window: Duration,
    /// See [`S3Config::flat_prefixes`].
    flat_prefixes: Vec<String>,
    storage_class: Option<String>,
    /// Named in authentication errors, so a refused key can be traced to its origin.
    credentials_source: String,
    /// The watched credentials file, when the keys come from one.
    file_credentials: Option<Arc<FileCredentials>>,
    counters: Counters,
}

/// A [`Backend`] over one bucket and prefix of an S3-compatible server.
pub struct S3Backend {
    inner: Arc<Inner>,
    /// `Option` only so that `Drop` can take it: see there.
    runtime: Option<tokio::runtime::Runtime>,
}

impl fmt::Debug for S3Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Backend")
            .field("at", &self.inner.describe)
            .finish_non_exhaustive()
    }
}

impl S3Backend {
    /// Opens the back end. No request is made: a wrong endpoint or credentials show up at the
    /// first operation.
    pub fn open(config: &S3Config) -> Result<Self> {
        Self::open_with_env(config, &|name| std::env::var(name).ok())
    }

    /// [`S3Backend::open`] with the environment looked up through `env`: the library reads no
    /// process state of its own accord (the `reel` binary passes the process environment).
    pub fn open_with_env(config: &S3Config, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let describe = describe(config);
        let bad = |msg: String| BackendError::io(&describe, io::Error::other(msg));
        if !config.prefix.is_empty() {
            Key::new(config.prefix.as_str())
                .map_err(|e| bad(format!("invalid S3 key prefix: {e}")))?;
        }
        if config.bucket.is_empty() {
            return Err(bad("no S3 bucket configured".to_string()));
        }
        let creds = config
            .credentials
            .resolve(env, config.instance_metadata.as_deref())
            .map_err(bad)?;
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                // Short enough that writes resume within seconds of a server coming back.
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            // The window, not a count, bounds retries.
            max_retries: usize::MAX,
            retry_timeout: config.retry_window,
        };
        let mut client = ClientOptions::new()
            .with_timeout(config.request_timeout)
            .with_connect_timeout(Duration::from_secs(5).min(config.request_timeout))
            .with_allow_http(config.allow_http);
        if let Some(pem) = &config.ca_certificates_pem {
            let certificates = Certificate::from_pem_bundle(pem)
                .map_err(|e| bad(format!("CA certificates: {e}")))?;
            if certificates.is_empty() {
                return Err(bad("CA certificates: no PEM certificate found".to_string()));
            }
            for certificate in certificates {
                client = client.with_root_certificate(certificate);
            }
        }
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_virtual_hosted_style_request(false)
            .with_unsigned_payload(config.payload_unsigned())
            // Every PUT carries `x-amz-checksum-crc64nvme` of its body, so a server that
            // received fewer bytes than sent (the node killed, the network cut mid-upload)
            // refuses the object instead of storing a shorter one under the key — which
            // versitygw 1.8 does when nothing covers the body, and which would then fence the
            // node at its next create of that key. CRC64-NVME costs ~0.05 CPU-s per GB here.
            .with_checksum_algorithm(Checksum::CRC64NVME)
            .with_retry(retry)
            // Carries `allow_http`; it replaces the builder's own client options.
            .with_client_options(client)
            .with_http_connector(FinalAnswersConnector);
        let file_credentials = match creds.keys {
            KeySource::Fixed(keys) => {
                builder = builder.with_credentials(Arc::new(StaticCredentialProvider::new(
                    object_store::aws::AwsCredential::from(keys),
                )));
                None
            }
            KeySource::File {
                path,
                profile,
                first,
            } => {
                let provider = Arc::new(FileCredentials::new(path, profile, &first));
                builder = builder.with_credentials(provider.clone());
                Some(provider)
            }
            KeySource::Service(settings) => {
                for (key, value) in settings {
                    builder = builder.with_config(key, value);
                }
                None
            }
        };
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        use_ring_for_tls();
        let store = builder
            .build()
            .map_err(|e| bad(format!("S3 client configuration: {e}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("reel-s3")
            .enable_all()
            .build()
            .map_err(|e| BackendError::io(&describe, e))?;
        let base = if config.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", config.prefix)
        };
        Ok(S3Backend {
            inner: Arc::new(Inner {
                store,
                base,
                describe,
                retry_window: config.retry_window,
                flat_prefixes: config.flat_prefixes.clone(),
                storage_class: config.storage_class.clone(),
                credentials_source: creds.source,
                file_credentials,
                counters: Counters::default(),
            }),
            runtime: Some(runtime),
        })
    }

    /// Where the keys it signs with come from ("profile default of /root/.aws/credentials",
    /// "the ECS task role", ...), for a person checking the setup.
    pub fn credentials_source(&self) -> &str {
        &self.inner.credentials_source
    }

    /// Requests and bytes so far.
    pub fn counters(&self) -> S3Counters {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        S3Counters {
            puts: get(&c.puts),
            gets: get(&c.gets),
            heads: get(&c.heads),
            lists: get(&c.lists),
            deletes: get(&c.deletes),
            bytes_up: get(&c.bytes_up),
            bytes_down: get(&c.bytes_down),
        }
    }

    /// Runs `op` on the back end's runtime and waits for it on this thread. Works from any
    /// thread, including one inside another tokio runtime (which it blocks meanwhile, as any
    /// synchronous I/O would).
    fn run<T, F>(&self, what: &dyn fmt::Display, op: impl FnOnce(Arc<Inner>) -> F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let fut = op(Arc::clone(&self.inner));
        let Some(rt) = &self.runtime else {
            unreachable!("the runtime is only taken in Drop");
        };
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        // A dropped sender means the task panicked: report it instead of propagating.
        rx.recv().unwrap_or_else(|_| {
            Err(BackendError::io(
                format!("{what} ({})", self.inner.describe),
                io::Error::other("S3 request task panicked"),
            ))
        })
    }
}

impl Drop for S3Backend {
    // Dropping a runtime blocks until its tasks end, which panics inside another runtime; no
    // task outlives the call that spawned it, so nothing is lost by not waiting.
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn describe(config: &S3Config) -> String {
    let at = match &config.endpoint {
        Some(e) => e.clone(),
        None => format!("AWS {}", config.region),
    };
    format!("s3://{}/{} at {at}", config.bucket, config.prefix)
}

impl Inner {
    fn path(&self, key: &str) -> Path {
        Path::from(format!("{}{key}", self.base))
    }

    /// An error for `op` on `key`, by meaning where the answer has one.
    fn error(&self, op: &str, key: &Key, e: object_store::Error) -> BackendError {
        let text = e.to_string();
        // A missing bucket is also a 404, and so is an unknown access key on versitygw: those
        // are configuration errors, not a missing key. (A HEAD has no body to tell them apart.)
        if matches!(e, object_store::Error::NotFound { .. })
            && !text.contains("NoSuchBucket")
            && !text.contains("UserNotFound")
        {
            return BackendError::NotFound(key.clone());
        }
        if is_no_space(&text) {
            return BackendError::NoSpace(key.clone());
        }
        self.io_error(op, key.as_str(), &e)
    }

    /// An `Io` error for `op` on `what`, naming the key, the endpoint and the server's answer,
    /// with a hint for the answers whose cause is known.
    fn io_error(&self, op: &str, what: &str, e: &object_store::Error) -> BackendError {
        use object_store::Error as E;
        let text = e.to_string();
        let refused = matches!(e, E::Unauthenticated { .. } | E::PermissionDenied { .. })
            || text.contains("InvalidAccessKeyId")
            || text.contains("SignatureDoesNotMatch")
            || text.contains("XAdminUserNotFound");
        let hint = if refused {
            // A newer version of the credentials file that could not be used explains why the
            // keys refused are older ones.
            let unused = self
                .file_credentials
                .as_ref()
                .and_then(|f| f.problem())
                .map(|why| format!("; its latest version is not used: {why}"))
                .unwrap_or_default();
            format!(
                "the server refused the credentials from {}{unused} (wrong access key or secret, \
                 or no permission on the bucket): ",
                self.credentials_source
            )
        } else if text.contains("NoSuchBucket") {
            "the bucket does not exist: ".to_string()
        } else {
            String::new()
        };
        self.error_msg(op, what, format!("{hint}{}", tidy_answer(&text)))
    }

    /// The size of `key` (HEAD).
    async fn head(&self, key: &Key) -> Result<u64> {
        bump(&self.counters.heads, 1);
        match self.store.head(&self.path(key.as_str())).await {
            Ok(meta) => Ok(meta.size),
            Err(e) => Err(self.error("HEAD", key, e)),
        }
    }

    /// Fails with `KeyConflict` if an ancestor of `key` is an object or objects exist below
    /// `key/`. Not atomic against another writer of the same prefix (see the module doc).
    async fn check_conflict(&self, key: &Key) -> Result<()> {
        let conflict = |existing: String| BackendError::KeyConflict {
            key: key.clone(),
            existing,
        };
        // Ancestors one at a time, shortest first, stopping at the first object found: on a
        // file-backed server a HEAD below an object (`a/b` under the file `a`) is a 500, which
        // would be retried for the whole window.
        for a in key.ancestors() {
            bump(&self.counters.heads, 1);
            match self.store.head(&self.path(a)).await {
                Ok(_) => return Err(conflict(a.to_string())),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.error("HEAD (key conflict check)", key, e)),
            }
        }
        bump(&self.counters.lists, 1);
        // A few keys, not one: the first may be a server's temporary file (not a conflict).
        let opts = PaginatedListOptions {
            max_keys: Some(16),
            ..Default::default()
        };
        let raw = format!("{}{key}/", self.base);
        let page = self
            .store
            .list_paginated(Some(&raw), opts)
            .await
            .map_err(|e| self.error("LIST (key conflict check)", key, e))?;
        let mut names = page.result.objects.iter().map(|m| self.strip(&m.location));
        match names.find(|n| !is_server_temp_name(n)) {
            Some(existing) => Err(conflict(existing)),
            None => Ok(()),
        }
    }

    /// Whether `key` is one segment below a flat prefix (see [`S3Config::flat_prefixes`]).
    fn is_flat(&self, key: &Key) -> bool {
        self.flat_prefixes.iter().any(|p| {
            key.as_str()
                .strip_prefix(p.as_str())
                .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        })
    }

    /// An object name without the back end's prefix.
    fn strip(&self, location: &Path) -> String {
        let s = location.as_ref();
        s.strip_prefix(self.base.as_str()).unwrap_or(s).to_string()
    }

    async fn put(&self, key: Key, data: Bytes, mode: PutMode) -> Result<()> {
        if is_server_temp_name(key.as_str()) {
            // It would be stored but never listed.
            return Err(self.error_msg(
                "PUT",
                key.as_str(),
                "a key ending in -UUID is reserved: s3proxy names its temporary files so"
                    .to_string(),
            ));
        }
        if !self.is_flat(&key) {
            self.check_conflict(&key).await?;
        }
        let opts = PutOptions {
            mode: match mode {
                PutMode::Create => object_store::PutMode::Create,
                PutMode::Overwrite => object_store::PutMode::Overwrite,
            },
            attributes: match &self.storage_class {
                Some(class) => {
                    let mut a = object_store::Attributes::new();
                    a.insert(object_store::Attribute::StorageClass, class.clone().into());
                    a
                }
                None => object_store::Attributes::new(),
            },
            ..Default::default()
        };
        let path = self.path(key.as_str());
        let deadline = Instant::now() + self.retry_window;
        // Set once an attempt timed out: it may have stored the object all the same.
        let mut maybe_stored = false;
        loop {
            bump(&self.counters.puts, 1);
            match self
                .store
                .put_opts(&path, PutPayload::from(data.clone()), opts.clone())
                .await
            {
                Ok(_) => {
                    bump(&self.counters.bytes_up, data.len() as u64);
                    return Ok(());
                }
                // 412 to If-None-Match (some servers answer 409).
                Err(
                    e @ (object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }),
                ) if mode == PutMode::Create => {
                    // The client also retries by itself, for instance after a connection closed
                    // before the answer, which the original request may have survived. Its
                    // error then says "after N retries" (the only sign it gives).
                    let retried = maybe_stored || e.to_string().contains(" retries, max_retries");
                    // If the object holds our bytes, an earlier attempt of ours won (or an
                    // identical object was there: indistinguishable, and as good).
                    if retried && self.get(key.clone()).await.is_ok_and(|d| d == data) {
                        return Ok(());
                    }
                    return Err(BackendError::AlreadyExists(key));
                }
                // The client retries everything else that is transient, but not a create-only
                // PUT that timed out: its outcome is unknown. Retried here, where a 412 can be
                // told apart from our own success.
                Err(e)
                    if mode == PutMode::Create
                        && outcome_unknown(&e)
                        && Instant::now() < deadline =>
                {
                    maybe_stored = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(self.error("PUT", &key, e)),
            }
        }
    }

    async fn get(&self, key: Key) -> Result<Vec<u8>> {
        bump(&self.counters.gets, 1);
        let res = self
            .store
            .get_opts(&self.path(key.as_str()), GetOptions::default())
            .await
            .map_err(|e| self.error("GET", &key, e))?;
        let bytes = res.bytes().await.map_err(|e| self.error("GET", &key, e))?;
        bump(&self.counters.bytes_down, bytes.len() as u64);
        Ok(bytes.into())
    }

    async fn get_range(&self, key: Key, range: Range<u64>) -> Result<Vec<u8>> {
        if range.start >= range.end {
            // Empty or reversed: S3 has no empty range, so only the size is needed.
            let size = self.head(&key).await?;
            check_range(&key, &range, size)?;
            return Ok(Vec::new());
        }
        bump(&self.counters.gets, 1);
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        let res = match self.store.get_opts(&self.path(key.as_str()), opts).await {
            Ok(res) => res,
            Err(object_store::Error::NotFound { .. }) => return Err(BackendError::NotFound(key)),
            Err(e) => {
                // A range starting at or past the end is a 416 (or a client-side range error):
                // the size tells whether that was it.
                let size = self.head(&key).await?;
                check_range(&key, &range, size)?;
                return Err(self.error("GET (range)", &key, e));
            }
        };
        // A range ending past the end is clamped by the server; the reply gives the full size.
        check_range(&key, &range, res.meta.size)?;
        let bytes = res
            .bytes()
            .await
            .map_err(|e| self.error("GET (range)", &key, e))?;
        bump(&self.counters.bytes_down, bytes.len() as u64);
        if bytes.len() as u64 != range.end - range.start {
            return Err(self.error_msg(
                "GET (range)",
                key.as_str(),
                format!(
                    "asked for bytes {}..{}, the server sent {} bytes",
                    range.start,
                    range.end,
                    bytes.len()
                ),
            ));
        }
        Ok(bytes.into())
    }

    fn error_msg(&self, op: &str, what: &str, msg: String) -> BackendError {
        BackendError::io(
            format!("{what} ({})", self.describe),
            io::Error::other(format!("S3 {op}: {msg}")),
        )
    }

    async fn list(&self, prefix: String) -> Result<Vec<ObjectMeta>> {
        // ListObjectsV2 prefixes are plain strings, as ours are: no trailing `/` is added.
        let raw = format!("{}{prefix}", self.base);
        let raw = (!raw.is_empty()).then_some(raw);
        let mut out = Vec::new();
        let mut token = None;
        loop {
            bump(&self.counters.lists, 1);
            let opts = PaginatedListOptions {
                page_token: token.take(),
                ..Default::default()
            };
            let page = self
                .store
                .list_paginated(raw.as_deref(), opts)
                .await
                .map_err(|e| self.io_error("LIST", &format!("list {prefix:?}"), &e))?;
            for m in page.result.objects {
                // Names that are not keys (directory markers such as `a/`, foreign objects)
                // were not written by a back end: skipped, as the local back end does. So are a
                // file-backed server's temporary files of puts in flight.
                let name = self.strip(&m.location);
                if is_server_temp_name(&name) {
                    continue;
                }
                if let Ok(key) = Key::new(name) {
                    out.push(ObjectMeta { key, size: m.size });
                }
            }
            match page.page_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out.dedup_by(|a, b| a.key == b.key);
        Ok(out)
    }

    async fn delete(&self, key: Key) -> Result<()> {
        bump(&self.counters.deletes, 1);
        match self.store.delete(&self.path(key.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("DELETE", &key, e)),
        }
    }
}

/// `text` with an S3 XML error document in it reduced to its code and message: the document
/// also carries the request's canonical form and string to sign in hex (versitygw's
/// SignatureDoesNotMatch: 2 KB), which buried the reason in logs and `reel doctor`. Anything
/// without such a document is returned as it is.
fn tidy_answer(text: &str) -> String {
    let element = |name: &str| {
        let start = text.find(&format!("<{name}>"))? + name.len() + 2;
        let len = text[start..].find(&format!("</{name}>"))?;
        Some(&text[start..start + len])
    };
    let Some(at) = text.find("<?xml").or_else(|| text.find("<Error>")) else {
        return text.to_string();
    };
    match (element("Code"), element("Message")) {
        (Some(code), Some(message)) => format!("{}{code}: {message}", &text[..at]),
        (Some(code), None) => format!("{}{code}", &text[..at]),
        _ => text.to_string(),
    }
}

/// Whether a request failed in a way that leaves unknown whether the server applied it: a
/// timeout or a connection lost after the request was sent.
fn outcome_unknown(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<HttpError>() {
            return matches!(
                h.kind(),
                HttpErrorKind::Timeout | HttpErrorKind::Interrupted
            );
        }
        source = s.source();
    }
    false
}

/// Whether `name` is a temporary file of a put in flight on a file-backed server, which some
/// list: s3proxy's filesystem store writes `name-<random UUID>` and renames it into place.
/// Such names are reserved (put refuses them) so that list can skip them.
fn is_server_temp_name(name: &str) -> bool {
    let Some((_, uuid)) = name.len().checked_sub(37).and_then(|i| {
        let (head, tail) = name.split_at_checked(i)?;
        Some((head, tail.strip_prefix('-')?))
    }) else {
        return false;
    };
    // 8-4-4-4-12 lower-case hex digits.
    uuid.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && uuid
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Makes ring the process's rustls crypto provider unless one is installed already. The S3
/// client's reqwest is built without a provider of its own (Cargo.toml: ring, not aws-lc-rs)
/// and panics when a client is built with none; the web console uses ring too. Called before
/// any `object_store` client is built.
pub fn use_ring_for_tls() {
    // Err only when a provider is installed already, which is all this asks for.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Starts the text of a `507 Insufficient Storage` answer as [`FinalAnswers`] passes it on.
const NO_SPACE_MARKER: &str = "507 Insufficient Storage";

/// The default HTTP client, except for answers that no retry can change, which the S3 client
/// would otherwise retry for the whole retry window (minutes) before failing:
/// - A `507 Insufficient Storage` answer (versitygw's for a full disk) reaches the S3 client
///   as a final 400 whose body starts with [`NO_SPACE_MARKER`], reported as `NoSpace`.
/// - A `501 Not Implemented` answer (a request needing what the server lacks: s3proxy's for a
///   session token) reaches it as a final 400 whose body starts with "501 Not Implemented".
/// - A TLS handshake that refused the server (its certificate not trusted, expired or for
///   another name; no protocol in common; a server that does not speak TLS at all) and an
///   endpoint whose host name does not resolve are final errors that say so ("…; not
///   retried").
///
/// Every other transport error keeps its kind (which decides whether it is retried) but
/// carries its whole cause chain in its text, so the S3 client's retry log and the final error
/// say why ("tcp connect error: Connection refused") instead of only "error sending request".
#[derive(Debug)]
struct FinalAnswers(HttpClient);

#[async_trait::async_trait]
impl HttpService for FinalAnswers {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let resp = match self.0.execute(req).await {
            Ok(resp) => resp,
            Err(e) => {
                // The HttpError's own text is "HTTP error: " and its source's: start below.
                let causes = chain_text(error_chain(&e).skip(1));
                let reason = match tls_refusal(&e).or_else(|| unknown_host(&causes)) {
                    Some(why) => HttpError::new(
                        HttpErrorKind::Unknown,
                        Reason(format!("{why}; not retried")),
                    ),
                    None => HttpError::new(e.kind(), Reason(causes)),
                };
                return Err(reason);
            }
        };
        let marker = match resp.status() {
            http::StatusCode::INSUFFICIENT_STORAGE => NO_SPACE_MARKER,
            http::StatusCode::NOT_IMPLEMENTED => "501 Not Implemented",
            _ => return Ok(resp),
        };
        let (mut parts, body) = resp.into_parts();
        let answer = String::from_utf8_lossy(&answer_start(body).await).into_owned();
        parts.status = http::StatusCode::BAD_REQUEST;
        parts.headers.remove(http::header::CONTENT_LENGTH);
        let body = HttpResponseBody::from(format!("{marker}: {answer}"));
        Ok(HttpResponse::from_parts(parts, body))
    }
}

/// How much of an error answer's body [`FinalAnswers`] reads into the error's text: enough
/// for any S3 error document, while a server that answers with an endless body cannot make
/// the client hold it all.
const ANSWER_BYTES_MAX: usize = 16 << 10;

/// The first [`ANSWER_BYTES_MAX`] bytes of `body` (fewer if it ends, or fails, sooner); the
/// rest is not read.
async fn answer_start(body: HttpResponseBody) -> Vec<u8> {
    use futures_util::StreamExt;
    let mut stream = body.bytes_stream();
    let mut answer = Vec::new();
    while answer.len() < ANSWER_BYTES_MAX {
        match stream.next().await {
            Some(Ok(bytes)) => answer.extend_from_slice(&bytes),
            Some(Err(_)) | None => break,
        }
    }
    answer.truncate(ANSWER_BYTES_MAX);
    answer
}

/// The errors of a chain from `e` down, outermost first. `io::Error::source` skips the error
/// it wraps (tokio-rustls puts rustls's there, and hyper wraps that io::Error in another), so
/// the walk steps into it instead.
fn error_chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |err| match err.downcast_ref::<io::Error>() {
        Some(io) => io.get_ref().map(|inner| inner as _),
        None => err.source(),
    })
}

/// The text an [`HttpError`] from [`FinalAnswers`] carries: a transport error's causes (its kind
/// stays on the `HttpError` around it), or why it is final.
#[derive(Debug)]
struct Reason(String);

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reason {}

/// Why a TLS handshake refused the server, for an error that no retry can change: the
/// certificate (untrusted issuer, expired, another name, a CA used as the server's own), no
/// protocol version or cipher suite in common, or an answer that is not TLS at all (a plain
/// http server on an https endpoint; TCP already guards the bytes, so it is no line noise).
/// `None` for anything else, which is retried.
fn tls_refusal(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let tls = error_chain(e).find_map(|err| err.downcast_ref::<rustls::Error>())?;
    match tls {
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::PeerIncompatible(_)
        | rustls::Error::UnsupportedNameType => Some(format!("TLS refused the server: {tls}")),
        rustls::Error::InvalidMessage(_) => Some(format!(
            "the server did not answer in TLS ({tls}): the endpoint may be http://, not https://"
        )),
        _ => None,
    }
}

/// Why the endpoint's host name does not resolve, when a transport error's `causes` say the
/// resolver has no such name (a typo in the endpoint), which no retry changes; `None` for
/// anything else, including a resolver that failed for now ("Temporary failure in name
/// resolution"), which is retried.
/// By text, since the standard library keeps the resolver's error code to itself: glibc's
/// EAI_NONAME and EAI_NODATA, and musl's.
fn unknown_host(causes: &str) -> Option<String> {
    const NO_SUCH_NAME: [&str; 3] = [
        "Name or service not known",
        "No address associated with hostname",
        "Name does not resolve",
    ];
    let lookup_failed = causes.contains("dns error") || causes.contains("lookup address");
    (lookup_failed && NO_SUCH_NAME.iter().any(|s| causes.contains(s)))
        .then(|| format!("the endpoint's host name does not resolve ({causes})"))
}

#[derive(Debug)]
struct FinalAnswersConnector;

impl HttpConnector for FinalAnswersConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(FinalAnswers(inner)))
    }
}

/// Whether a server's answer says the storage is full. 507 Insufficient Storage and MinIO's
/// `XMinioStorageFull` are what servers send; `EntityTooLarge` is a size limit per object, not a
/// full medium, so it is an ordinary error.
fn is_no_space(answer: &str) -> bool {
    answer.contains(NO_SPACE_MARKER)
        || answer.contains("XMinioStorageFull")
        || answer.contains("StorageFull")
        || answer.contains("QuotaExceeded")
}

impl S3Backend {
    fn put_body(&self, key: &Key, body: Bytes, mode: PutMode) -> Result<()> {
        let k = key.clone();
        self.run(key, move |s| async move { s.put(k, body, mode).await })
    }
}

/// A shared buffer as a request body ([`Bytes::from_owner`] wants the bytes as `AsRef<[u8]>`).
struct SharedBody(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBody {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Backend for S3Backend {
    fn put(&self, key: &Key, data: &[u8], mode: PutMode) -> Result<()> {
        // The request task must own its body; one copy per put.
        self.put_vec(key, data.to_vec(), mode)
    }

    fn put_vec(&self, key: &Key, data: Vec<u8>, mode: PutMode) -> Result<()> {
        // Owned already: the body is handed over without a copy.
        self.put_body(key, Bytes::from(data), mode)
    }

    fn put_shared(&self, key: &Key, data: Arc<Vec<u8>>, mode: PutMode) -> Result<()> {
        // The body holds the caller's handle; the bytes are not copied.
        self.put_body(key, Bytes::from_owner(SharedBody(data)), mode)
    }

    fn get(&self, key: &Key) -> Result<Vec<u8>> {
        let k = key.clone();
        self.run(key, move |s| async move { s.get(k).await })
    }

    fn get_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>> {
        let k = key.clone();
        self.run(key, move |s| async move { s.get_range(k, range).await })
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let p = prefix.to_string();
        self.run(&format!("list {prefix:?}"), move |s| async move {
            s.list(p).await
        })
    }

    fn delete(&self, key: &Key) -> Result<()> {
        let k = key.clone();
        self.run(key, move |s| async move { s.delete(k).await })
    }

    fn describe(&self) -> String {
        self.inner.describe.clone()
    }

    fn is_local(&self, _key: &Key, _range: Range<u64>) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# comment
[default]
aws_access_key_id = AKIDEFAULT
aws_secret_access_key=secretdefault
region = eu-west-1

; another comment
[profile work]
AWS_ACCESS_KEY_ID = AKIWORK
aws_secret_access_key = secret/work+x=
aws_session_token = tok
[broken]
aws_access_key_id = only
";

    #[test]
    fn parses_profiles() {
        let d = parse_credentials_file(FILE, "default").unwrap();
        assert_eq!(d.access_key_id, "AKIDEFAULT");
        assert_eq!(d.secret_access_key, "secretdefault");
        assert_eq!(d.session_token, None);
        let w = parse_credentials_file(FILE, "work").unwrap();
        assert_eq!(w.access_key_id, "AKIWORK");
        // Only the first `=` splits: secrets may contain `=`.
        assert_eq!(w.secret_access_key, "secret/work+x=");
        assert_eq!(w.session_token.as_deref(), Some("tok"));
    }

    #[test]
    fn credentials_file_errors_are_clear() {
        let e = parse_credentials_file(FILE, "nope").unwrap_err();
        assert!(e.contains("no profile [nope]"), "{e}");
        let e = parse_credentials_file(FILE, "broken").unwrap_err();
        assert!(e.contains("lacks"), "{e}");
        let e = parse_credentials_file("[default\nx=y\n", "default").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_credentials_file("[default]\njunk\n", "default").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        // Error texts name keys, never values.
        assert!(!format!("{:?}", parse_credentials_file(FILE, "work")).contains("secret/work"));
    }

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn environment_variables_come_first() {
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
        ]);
        let c = S3Credentials::Environment.resolve(&env, None).unwrap();
        let KeySource::Fixed(keys) = c.keys else {
            panic!("{c:?}")
        };
        assert_eq!(
            (keys.access_key_id.as_str(), keys.session_token.as_deref()),
            ("AKIENV", Some("t"))
        );
    }

    /// The access key id of fixed or file keys.
    fn key_id(c: &ResolvedCredentials) -> &str {
        match &c.keys {
            KeySource::Fixed(keys) | KeySource::File { first: keys, .. } => &keys.access_key_id,
            KeySource::Service(_) => panic!("a credentials service: {c:?}"),
        }
    }

    #[test]
    fn credentials_services_after_variables_and_file() {
        use AmazonS3ConfigKey as K;
        let service = |vars: &[(&str, &str)]| match S3Credentials::Environment
            .resolve(&env_of(vars), None)
            .unwrap()
        {
            ResolvedCredentials {
                keys: KeySource::Service(settings),
                source,
            } => (settings, source),
            other => panic!("{other:?}"),
        };
        let (settings, source) = service(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/reel"),
            ("AWS_ROLE_SESSION_NAME", "node-a"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ]);
        assert_eq!(
            settings,
            [
                (K::WebIdentityTokenFile, "/var/run/token".to_string()),
                (K::RoleArn, "arn:aws:iam::1:role/reel".to_string()),
                (K::RoleSessionName, "node-a".to_string()),
            ]
        );
        assert!(source.contains("arn:aws:iam::1:role/reel"), "{source}");
        let (settings, source) = service(&[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://127.0.0.1:9/creds",
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                "/var/run/pod-token",
            ),
            ("HOME", "/nonexistent"),
        ]);
        assert_eq!(settings[0].0, K::ContainerCredentialsFullUri);
        assert_eq!(settings[1].0, K::ContainerAuthorizationTokenFile);
        assert!(source.contains("http://127.0.0.1:9/creds"), "{source}");
        let (settings, _) = service(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")]);
        assert_eq!(
            settings,
            [(K::ContainerCredentialsRelativeUri, "/v2/creds".to_string())]
        );

        // A credentials file that is there comes first; one that is there but unusable is an
        // error, not a reason to try the service.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("creds");
        std::fs::write(&file, FILE).unwrap();
        let f = file.to_str().unwrap();
        let with_file = [
            ("AWS_SHARED_CREDENTIALS_FILE", f),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ];
        let c = S3Credentials::Environment
            .resolve(&env_of(&with_file), None)
            .unwrap();
        assert_eq!(key_id(&c), "AKIDEFAULT");
        let with_broken = [
            ("AWS_SHARED_CREDENTIALS_FILE", f),
            ("AWS_PROFILE", "broken"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ];
        let e = S3Credentials::Environment
            .resolve(&env_of(&with_broken), None)
            .unwrap_err();
        assert!(e.contains("profile [broken] lacks"), "{e}");
        // Half a service is none.
        let e = S3Credentials::Environment
            .resolve(
                &env_of(&[("AWS_ROLE_ARN", "arn:aws:iam::1:role/reel")]),
                None,
            )
            .unwrap_err();
        assert!(e.contains("no credentials service"), "{e}");

        // The instance profile only when asked for, and last.
        let imds = Some("http://127.0.0.1:9");
        let c = S3Credentials::Environment
            .resolve(&env_of(&[("HOME", "/nonexistent")]), imds)
            .unwrap();
        let KeySource::Service(settings) = c.keys else {
            panic!("{c:?}")
        };
        assert_eq!(
            settings,
            [(K::MetadataEndpoint, "http://127.0.0.1:9".to_string())]
        );
        assert!(c.source.contains("instance profile"), "{}", c.source);
        let c = S3Credentials::Environment
            .resolve(&env_of(&with_file), imds)
            .unwrap();
        assert_eq!(key_id(&c), "AKIDEFAULT");
    }

    #[test]
    fn shared_credentials_file_and_profile() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("creds");
        std::fs::write(&file, FILE).unwrap();
        let f = file.to_str().unwrap();
        let c = S3Credentials::Environment
            .resolve(&env_of(&[("AWS_SHARED_CREDENTIALS_FILE", f)]), None)
            .unwrap();
        assert_eq!(key_id(&c), "AKIDEFAULT");
        let c = S3Credentials::Environment
            .resolve(
                &env_of(&[("AWS_SHARED_CREDENTIALS_FILE", f), ("AWS_PROFILE", "work")]),
                None,
            )
            .unwrap();
        assert_eq!(key_id(&c), "AKIWORK");
        assert!(c.source.contains("profile work"), "{}", c.source);
        // ~/.aws/credentials under HOME.
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), FILE).unwrap();
        let home = dir.path().to_str().unwrap();
        let c = S3Credentials::Environment
            .resolve(&env_of(&[("HOME", home)]), None)
            .unwrap();
        assert_eq!(key_id(&c), "AKIDEFAULT");
        let e = S3Credentials::Environment
            .resolve(&env_of(&[("HOME", "/nonexistent")]), None)
            .unwrap_err();
        assert!(e.contains("/nonexistent/.aws/credentials"), "{e}");
    }

    #[test]
    fn debug_redacts_secrets() {
        let mut config = S3Config::new("b", "p");
        config.credentials = S3Credentials::Static {
            access_key_id: "AKIVISIBLE".to_string(),
            secret_access_key: "TOPSECRET".to_string(),
            session_token: Some("TOKENSECRET".to_string()),
        };
        let text = format!("{config:?}");
        assert!(text.contains("AKIVISIBLE"), "{text}");
        assert!(
            !text.contains("TOPSECRET") && !text.contains("TOKENSECRET"),
            "{text}"
        );
        let b = S3Backend::open(&config).unwrap();
        assert!(!format!("{b:?} {}", b.describe()).contains("TOPSECRET"));
    }

    #[test]
    fn invalid_configuration_is_refused() {
        let mut config = S3Config::new("b", "bad//prefix");
        config.credentials = S3Credentials::Static {
            access_key_id: "a".to_string(),
            secret_access_key: "s".to_string(),
            session_token: None,
        };
        let e = S3Backend::open(&config).unwrap_err().to_string();
        assert!(e.contains("prefix"), "{e}");
        config.prefix = String::new();
        config.bucket = String::new();
        assert!(S3Backend::open(&config).is_err());
    }

    /// A back end on `endpoint` with static credentials and the given retry window.
    fn backend_on(endpoint: &str, retry_window: Duration) -> S3Backend {
        let mut config = S3Config::new("b", "");
        config.endpoint = Some(endpoint.to_string());
        config.allow_http = true;
        config.retry_window = retry_window;
        config.request_timeout = Duration::from_secs(5);
        config.credentials = S3Credentials::Static {
            access_key_id: "a".to_string(),
            secret_access_key: "s".to_string(),
            session_token: None,
        };
        S3Backend::open(&config).unwrap()
    }

    /// The error of a GET on `backend`, or a failure if none came within a minute (an error
    /// that should be final was retried: the retry window is ten).
    fn get_error(backend: S3Backend) -> String {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Backend::get(&backend, &Key::new("k").unwrap()));
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(_)) => panic!("a GET from no server succeeded"),
            Err(_) => panic!("still retrying after a minute: the error was not final"),
        }
    }

    #[test]
    fn a_host_name_that_does_not_resolve_is_not_retried() {
        // RFC 6761: `.invalid` never resolves.
        let backend = backend_on("http://no-such-host.invalid:9000", Duration::from_secs(600));
        let e = get_error(backend);
        assert!(
            e.contains("host name does not resolve") && e.contains("not retried"),
            "{e}"
        );
    }

    #[test]
    fn a_plain_http_server_on_an_https_endpoint_is_not_retried() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
            }
        });
        let backend = backend_on(
            &format!("https://127.0.0.1:{port}"),
            Duration::from_secs(600),
        );
        let e = get_error(backend);
        assert!(
            e.contains("did not answer in TLS") && e.contains("not retried"),
            "{e}"
        );
    }

    /// A 507 whose body never ends is still a full disk, reported at once: the client reads
    /// the body's first 16 KiB. Before, it read until the connection failed, holding every
    /// byte (8.4 GB in 5 s in this test).
    #[test]
    fn an_endless_error_answer_is_read_only_in_part() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (sent_tx, sent_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(mut stream) = listener.incoming().flatten().next() {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let head =
                    b"HTTP/1.1 507 Insufficient Storage\r\ntransfer-encoding: chunked\r\n\r\n";
                let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, "x".repeat(1 << 16));
                let mut sent = 0usize;
                if stream.write_all(head).is_ok() {
                    // Until the client hangs up.
                    while stream.write_all(chunk.as_bytes()).is_ok() {
                        sent += chunk.len();
                    }
                }
                let _ = sent_tx.send(sent);
            }
        });
        let backend = backend_on(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(600),
        );
        let e = get_error(backend);
        assert!(e.contains("no space left"), "{}", &e[..e.len().min(300)]);
        // What the server got into the connection before the client hung up: the kernel's
        // socket buffers (a few MB on loopback), not the gigabytes a whole read took.
        let sent = sent_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(
            sent < 64 << 20,
            "the client took {sent} bytes of the answer"
        );
    }

    #[test]
    fn a_retried_transport_error_says_why() {
        // A port nothing listens on: refused, retried for the (short) window, then failed with
        // the cause in the text rather than only "error sending request".
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let backend = backend_on(&format!("http://127.0.0.1:{port}"), Duration::from_secs(1));
        let e = get_error(backend);
        assert!(e.contains("Connection refused"), "{e}");
        assert!(!e.contains("not retried"), "{e}");
    }

    #[test]
    fn describe_names_bucket_prefix_and_endpoint() {
        let mut config = S3Config::new("bkt", "node1");
        config.endpoint = Some("http://127.0.0.1:9000".to_string());
        assert_eq!(describe(&config), "s3://bkt/node1 at http://127.0.0.1:9000");
    }

    #[test]
    fn server_temp_names() {
        assert!(is_server_temp_name(
            "conformance/l/00/32-6758cfaa-0b2e-453b-8f67-f09d76a7292c"
        ));
        assert!(is_server_temp_name(
            "x-6758cfaa-0b2e-453b-8f67-f09d76a7292c"
        ));
        assert!(!is_server_temp_name("6758cfaa-0b2e-453b-8f67-f09d76a7292c"));
        assert!(!is_server_temp_name(
            "x-6758CFAA-0b2e-453b-8f67-f09d76a7292c"
        ));
        assert!(!is_server_temp_name(
            "x-6758cfaa-0b2e-453b-8f67-f09d76a7292"
        ));
        assert!(!is_server_temp_name("packs/000123.pack"));
        assert!(!is_server_temp_name(""));
    }

    #[test]
    fn unsigned_payload_by_endpoint() {
        for (endpoint, private) in [
            ("https://s3.example.com", true),
            ("HTTPS://s3.example.com:443/x", true),
            ("http://127.0.0.1:9000", true),
            ("http://127.9.8.7", true),
            ("http://localhost:7070/", true),
            ("http://[::1]:9000", true),
            ("http://user@127.0.0.1:9000", true),
            ("http://10.0.0.5:9000", false),
            ("http://s3.example.com", false),
            ("http://127.0.0.1.example.com", false),
            ("http://localhost.example.com:80", false),
            ("ftp://127.0.0.1", false),
        ] {
            assert_eq!(endpoint_is_private(endpoint), private, "{endpoint}");
            let mut c = S3Config::new("b", "p");
            c.endpoint = Some(endpoint.to_string());
            assert_eq!(c.payload_unsigned(), private, "{endpoint}");
            c.unsigned_payload = Some(!private);
            assert_eq!(c.payload_unsigned(), !private, "{endpoint}");
        }
        // AWS itself is https.
        assert!(S3Config::new("b", "p").payload_unsigned());
    }

    #[test]
    fn server_error_documents_are_reduced_to_code_and_message() {
        let answer = "S3 LIST: Error performing GET http://h/b in 1ms - Server returned non-2xx \
                      status code: 403 Forbidden: <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                      <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature \
                      we calculated does not match.</Message><StringToSignBytes>41 57 53\
                      </StringToSignBytes></Error>";
        assert_eq!(
            tidy_answer(answer),
            "S3 LIST: Error performing GET http://h/b in 1ms - Server returned non-2xx status \
             code: 403 Forbidden: SignatureDoesNotMatch: The request signature we calculated \
             does not match."
        );
        let plain = "HTTP error: tcp connect error: Connection refused";
        assert_eq!(tidy_answer(plain), plain);
        // Not an error document after all: left whole.
        let odd = "answer: <?xml version=\"1.0\"?><Other/>";
        assert_eq!(tidy_answer(odd), odd);
    }

    #[test]
    fn no_space_answers() {
        assert!(is_no_space(
            "Server returned non-2xx status code: 507 Insufficient Storage: "
        ));
        assert!(is_no_space("<Code>XMinioStorageFull</Code>"));
        assert!(!is_no_space("<Code>EntityTooLarge</Code>"));
    }
}
