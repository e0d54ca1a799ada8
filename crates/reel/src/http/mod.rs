//! The HTTP surface of `reel serve`: the REST API (docs/design/api.md), its OpenAPI
//! document, Prometheus metrics and the embedded web console.
//!
//! Handlers never block the runtime: anything that takes a device or store lock runs in
//! [`blocking`]. Every change is written to the audit log with its outcome.

mod archive;
pub mod auth;
mod cartridges;
pub mod error;
mod help;
mod library;
pub mod limits;
pub mod maintenance;
mod model_charts;
pub mod monitor;
pub mod shared_vault;
mod users;
pub mod verify;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use reel_iscsi_net::TargetServer;
use reel_library::VirtualLibrary;
use reel_volume::Cartridges;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use self::auth::{Auth, Caller};
use self::error::{ApiError, ApiResult};
use self::monitor::Monitor;

/// What the handlers share.
pub struct AppState {
    pub libraries: Vec<Arc<VirtualLibrary>>,
    pub cartridges: Arc<Cartridges>,
    pub auth: Arc<Auth>,
    pub target: Arc<TargetServer>,
    pub monitor: Arc<Monitor>,
    /// The maintenance jobs, verify and reclaim (one runs at a time).
    pub maintenance: maintenance::Jobs,
    /// Login rate limits and caps (see `limits`).
    pub logins: Arc<limits::LoginLimits>,
    /// Who may read `/metrics`.
    pub metrics: MetricsAccess,
    /// The archive tier, when `[archive]` names a location.
    pub archive: Option<reel_volume::Archive>,
    /// Present when the store is on a bucket.
    pub shared_vault: Option<reel_volume::SharedVault>,
}

/// Who may read `/metrics` (`[http] metrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsAccess {
    /// Loopback peers only (127.0.0.0/8, ::1): a scraper on the same host.
    #[default]
    Loopback,
    /// Loopback peers, and others with a bearer token (any role).
    Token,
}

impl AppState {
    /// Records a change and its outcome in the audit log.
    pub fn audit<T>(&self, caller: &Caller, action: &str, target: &str, result: &ApiResult<T>) {
        let outcome = match result {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{}: {}", e.code, e.message),
        };
        self.auth.audit(&caller.username, action, target, &outcome);
    }
}

/// Runs `f` on the blocking pool (device locks, store I/O).
pub async fn blocking<T: Send + 'static>(
    state: Arc<AppState>,
    f: impl FnOnce(Arc<AppState>) -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(move || f(state))
        .await
        .map_err(|e| ApiError::internal(format!("the request failed: {e}")))?
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let header_token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        // EventSource cannot send headers: the stream alone takes `?token=`. (Inside the
        // nested /api/v1 router the path has lost its prefix.)
        let query_token = parts
            .uri
            .path()
            .ends_with("/monitor/stream")
            .then(|| parts.uri.query())
            .flatten()
            .and_then(|q| {
                q.split('&')
                    .find_map(|kv| kv.strip_prefix("token="))
                    .map(str::to_string)
            });
        let token = match (header_token, query_token) {
            (Some(t), _) => t.to_string(),
            (None, Some(t)) => t,
            (None, None) => {
                return Err(ApiError::unauthenticated(
                    "send Authorization: Bearer <token> (POST /api/v1/login gives one)",
                ));
            }
        };
        state.auth.authenticate(&token)
    }
}

/// No `Authorization` header: no caller; a bad one: 401.
impl axum::extract::OptionalFromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Option<Self>, Self::Rejection> {
        if !parts.headers.contains_key(header::AUTHORIZATION) {
            return Ok(None);
        }
        <Caller as FromRequestParts<Arc<AppState>>>::from_request_parts(parts, state)
            .await
            .map(Some)
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "reel", description = "REST API of the reel virtual tape library (docs/design/api.md)"),
    paths(
        users::login, users::logout, users::me,
        library::list_libraries, library::get_library, library::move_medium, library::import, library::export,
        cartridges::list, cartridges::create, cartridges::show, cartridges::update, cartridges::delete, cartridges::vault, cartridges::erase,
        archive::archive, archive::restore, archive::status,
        shared_vault::share, shared_vault::unshare, shared_vault::list, shared_vault::adopt,
        monitor::stats, monitor::monitor, monitor::stream, monitor::sessions, monitor::events,
        verify::status, verify::start, maintenance::reclaim_status, maintenance::start_reclaim,
        users::list_users, users::create_user, users::delete_user, users::set_password,
        users::list_tokens, users::create_token, users::revoke_token,
    ),
    modifiers(&BearerScheme)
)]
pub struct ApiDoc;

struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_pretty_json().unwrap_or_default(),
    )
}

#[derive(rust_embed::Embed)]
#[folder = "console/"]
struct Console;

async fn console(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    if path.starts_with("api/") {
        return ApiError::not_found(format!("no route {}", uri.path())).into_response();
    }
    match Console::get(path) {
        Some(file) => {
            let mime = match path.rsplit('.').next() {
                Some("html") => "text/html; charset=utf-8",
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                Some("svg") => "image/svg+xml",
                Some("png") => "image/png",
                Some("json") => "application/json",
                _ => "application/octet-stream",
            };
            let mut response = file.data.into_owned().into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/login", post(users::login))
        .route("/logout", post(users::logout))
        .route("/me", get(users::me))
        .route("/libraries", get(library::list_libraries))
        .route("/libraries/{name}", get(library::get_library))
        .route("/libraries/{name}/move", post(library::move_medium))
        .route("/libraries/{name}/import", post(library::import))
        .route("/libraries/{name}/export", post(library::export))
        .route(
            "/cartridges",
            get(cartridges::list).post(cartridges::create),
        )
        .route(
            "/cartridges/{barcode}",
            get(cartridges::show)
                .patch(cartridges::update)
                .delete(cartridges::delete),
        )
        .route("/cartridges/{barcode}/vault", post(cartridges::vault))
        .route("/cartridges/{barcode}/erase", post(cartridges::erase))
        .route("/cartridges/{barcode}/archive", post(archive::archive))
        .route("/cartridges/{barcode}/restore", post(archive::restore))
        .route("/archive", get(archive::status))
        .route("/cartridges/{barcode}/share", post(shared_vault::share))
        .route("/cartridges/{barcode}/unshare", post(shared_vault::unshare))
        .route("/shared-vault", get(shared_vault::list))
        .route("/shared-vault/{barcode}/adopt", post(shared_vault::adopt))
        .route("/stats", get(monitor::stats))
        .route("/monitor", get(monitor::monitor))
        .route("/monitor/stream", get(monitor::stream))
        .route("/sessions", get(monitor::sessions))
        .route("/events", get(monitor::events))
        .route("/verify", get(verify::status).post(verify::start))
        .route(
            "/reclaim",
            get(maintenance::reclaim_status).post(maintenance::start_reclaim),
        )
        .route("/users", get(users::list_users).post(users::create_user))
        .route(
            "/users/{username}",
            axum::routing::delete(users::delete_user),
        )
        .route("/users/{username}/password", put(users::set_password))
        .route("/tokens", get(users::list_tokens).post(users::create_token))
        .route("/tokens/{id}", axum::routing::delete(users::revoke_token))
        .route("/openapi.json", get(openapi_json))
        .fallback(|uri: Uri| async move { ApiError::not_found(format!("no route {}", uri.path())) })
        .method_not_allowed_fallback(|| async { ApiError::new_method_not_allowed() });
    Router::new()
        .nest("/api/v1", api)
        .route("/metrics", get(monitor::metrics))
        .route("/help", get(help::start))
        .route("/docs/{*path}", get(help::page))
        .route("/model/{id}/{file}", get(model_charts::chart))
        .fallback(console)
        .layer(axum::extract::DefaultBodyLimit::max(limits::BODY_MAX))
        .layer(axum::middleware::from_fn(limits::bounded_body))
        .with_state(state)
}

impl ApiError {
    fn new_method_not_allowed() -> ApiError {
        ApiError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            code: "method_not_allowed",
            message: "this route does not take that method".into(),
        }
    }
}

/// TLS material for the console and API.
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Tls {
    /// Reads and checks the certificate chain and key (they parse, and the key is the
    /// certificate's), so a bad one stops reel at start instead of the HTTPS task later.
    pub async fn load(&self) -> anyhow::Result<axum_server::tls_rustls::RustlsConfig> {
        use anyhow::Context;
        // One crypto provider for the process (ureq's rustls uses the same one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        for path in [&self.cert, &self.key] {
            std::fs::metadata(path)
                .with_context(|| format!("TLS: cannot read {}", path.display()))?;
        }
        axum_server::tls_rustls::RustlsConfig::from_pem_file(&self.cert, &self.key)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "TLS: the certificate {} or the key {} is not usable: {e} \
                     (both PEM; the key must belong to the certificate's first entry)",
                    self.cert.display(),
                    self.key.display()
                )
            })
    }
}

/// Serves the router on `listener` until `shutdown` resolves, over TLS with `tls` (loaded
/// by [`Tls::load`]) when given.
pub async fn serve(
    listener: std::net::TcpListener,
    state: Arc<AppState>,
    tls: Option<axum_server::tls_rustls::RustlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // The peer's address reaches the handlers (login limits, /metrics).
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    match tls {
        None => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(config) => {
            let handle = axum_server::Handle::new();
            let h = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                h.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
            });
            axum_server::from_tcp_rustls(listener, config)?
                .handle(handle)
                .serve(app)
                .await
        }
    }
}

/// Binds the HTTP listener (std, so binding errors surface before anything else starts).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use reel_api::endpoints::{self, Endpoint, Method};
    use utoipa::OpenApi;

    use super::ApiDoc;

    /// The document and the table the client is built on name the same operations.
    #[test]
    fn the_openapi_document_has_exactly_the_clients_endpoints() {
        let doc = ApiDoc::openapi();
        let mut documented = BTreeSet::new();
        for (path, item) in &doc.paths.paths {
            let operations = [
                (Method::Get, item.get.is_some()),
                (Method::Post, item.post.is_some()),
                (Method::Put, item.put.is_some()),
                (Method::Patch, item.patch.is_some()),
                (Method::Delete, item.delete.is_some()),
            ];
            for (method, present) in operations {
                if present {
                    documented.insert((method, path.clone()));
                }
            }
        }
        let table: BTreeSet<(Method, String)> = endpoints::ALL
            .iter()
            .map(|e: &Endpoint| (e.method, e.path.to_string()))
            .collect();
        assert_eq!(documented, table);
    }
}
