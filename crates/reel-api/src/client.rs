//! One typed, blocking client of the REST API (ureq): a method per endpoint of
//! [`endpoints::ALL`], bearer-token authentication (a token, or a login that makes one),
//! errors that carry the HTTP status and the server's code and message, and [`Client::raw`]
//! for requests no typed method would send (malformed bodies, other tokens, other paths).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cartridges::{
    CartridgeDetail, CartridgeView, CreateRequest, ListQuery, SharedCartridge, ShowQuery,
    UpdateRequest,
};
use crate::endpoints::{self, Endpoint};
use crate::error::ErrorBody;
use crate::library::{ExportRequest, ImportRequest, LibraryDetail, LibraryView, MoveRequest};
use crate::maintenance::{ArchiveStatus, ReclaimRequest, ReclaimStatus, VerifyStatus};
use crate::monitor::{EventsQuery, MonitorSample, SessionView, StoreView};
use crate::session::{
    AuditEvent, CreatedToken, LoginAnswer, LoginRequest, Me, NewPassword, NewToken, NewUser,
    TokenView, UserView,
};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("the URL {0:?} must start with http:// or https://")]
    Url(String),
    /// No answer: the server is not reachable, or the connection broke.
    #[error("{method} {path}: reaching reel at {base}: {source}")]
    Transport {
        method: String,
        path: String,
        base: String,
        #[source]
        source: Box<ureq::Error>,
    },
    /// The server answered with an error status; `code` and `message` are its error body's
    /// (`error` and the body's text when it sent none).
    #[error("{code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
        /// `Retry-After` seconds of a 429 (RFC 6585 §4).
        retry_after: Option<u64>,
    },
    /// A success whose body is not the endpoint's type (or, in strict mode, holds more or
    /// other than the type keeps).
    #[error("{method} {path}: the answer does not match its type: {detail}")]
    Decode {
        method: String,
        path: String,
        detail: String,
    },
}

impl Error {
    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's error code (`conflict`, `not_found`…) of an error answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// How the client connects.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Limit on each whole request; none by default.
    pub timeout: Option<Duration>,
    /// A new connection per request. hyper closes a connection when it answers before the
    /// request's body has arrived (a 401 from the token check, say), and a pooled connection
    /// the server is closing fails the next request with "peer disconnected".
    pub fresh_connections: bool,
    /// Check every typed answer field for field: deserialised and serialised again it must be
    /// the JSON the server sent (no unknown field, nothing lost), and record the endpoints
    /// called ([`Client::endpoints_called`]). For tests.
    pub strict: bool,
}

/// A client of one reel server, with or without a token.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    /// Most bytes of an answer's body read; ureq's default (10 MB) when `None`.
    body_limit: Option<u64>,
    strict: bool,
    called: Arc<Mutex<BTreeSet<Endpoint>>>,
}

/// An answer as it came: for requests outside the typed methods.
#[derive(Clone, Debug)]
pub struct RawAnswer {
    pub status: u16,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    pub text: String,
}

impl RawAnswer {
    /// The body as JSON; `null` when it is empty or not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl Client {
    /// A client of the server at `base` (`http://127.0.0.1:8080`), without a token yet.
    pub fn new(base: &str, options: ClientOptions) -> Result<Client, Error> {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Url(base.to_string()));
        }
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(options.timeout);
        if options.fresh_connections {
            config = config.max_idle_connections(0);
        }
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            token: None,
            agent: config.build().into(),
            body_limit: None,
            strict: options.strict,
            called: Arc::default(),
        })
    }

    /// Logs in at `base` as `user` and returns a client with the session's token.
    pub fn log_in(
        base: &str,
        options: ClientOptions,
        user: &str,
        password: &str,
    ) -> Result<Client, Error> {
        let client = Client::new(base, options)?;
        let answer = client.login(user, password)?;
        Ok(client.with_token(&answer.token))
    }

    /// The same client (connections, options) with `token`.
    pub fn with_token(&self, token: &str) -> Client {
        Client {
            token: Some(token.to_string()),
            ..self.clone()
        }
    }

    /// The same client reading answers of up to `bytes` (ureq stops at 10 MB otherwise; the
    /// views of a library with tens of thousands of slots are bigger).
    pub fn with_body_limit(&self, bytes: u64) -> Client {
        Client {
            body_limit: Some(bytes),
            ..self.clone()
        }
    }

    /// The same client without a token.
    pub fn anonymous(&self) -> Client {
        Client {
            token: None,
            ..self.clone()
        }
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `http://host:port`, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The endpoints the typed methods called so far (strict mode only; shared by clones).
    pub fn endpoints_called(&self) -> BTreeSet<Endpoint> {
        self.called.lock().map(|s| s.clone()).unwrap_or_default()
    }

    // ------------------------------------------------------------------ session, users, tokens

    /// Makes a session token (the client keeps its own token: see [`Client::log_in`]).
    pub fn login(&self, username: &str, password: &str) -> Result<LoginAnswer, Error> {
        let body = LoginRequest {
            username: username.to_string(),
            password: password.to_string(),
        };
        self.anonymous()
            .exchange(endpoints::LOGIN, &[], None, Some(&body))
    }

    /// Ends this client's session (or revokes its API token).
    pub fn logout(&self) -> Result<(), Error> {
        self.exchange_empty(endpoints::LOGOUT, &[], None::<&()>)
    }

    pub fn me(&self) -> Result<Me, Error> {
        self.exchange(endpoints::ME, &[], None, None::<&()>)
    }

    pub fn users(&self) -> Result<Vec<UserView>, Error> {
        self.exchange(endpoints::USERS, &[], None, None::<&()>)
    }

    pub fn create_user(&self, user: &NewUser) -> Result<UserView, Error> {
        self.exchange(endpoints::CREATE_USER, &[], None, Some(user))
    }

    pub fn delete_user(&self, username: &str) -> Result<(), Error> {
        self.exchange_empty(endpoints::DELETE_USER, &[username], None::<&()>)
    }

    pub fn set_password(&self, username: &str, password: &NewPassword) -> Result<(), Error> {
        self.exchange_empty(endpoints::SET_PASSWORD, &[username], Some(password))
    }

    pub fn tokens(&self) -> Result<Vec<TokenView>, Error> {
        self.exchange(endpoints::TOKENS, &[], None, None::<&()>)
    }

    pub fn create_token(&self, name: &str) -> Result<CreatedToken, Error> {
        let body = NewToken {
            name: name.to_string(),
        };
        self.exchange(endpoints::CREATE_TOKEN, &[], None, Some(&body))
    }

    pub fn revoke_token(&self, id: &str) -> Result<(), Error> {
        self.exchange_empty(endpoints::REVOKE_TOKEN, &[id], None::<&()>)
    }

    // ------------------------------------------------------------------ libraries

    pub fn libraries(&self) -> Result<Vec<LibraryView>, Error> {
        self.exchange(endpoints::LIBRARIES, &[], None, None::<&()>)
    }

    pub fn library(&self, name: &str) -> Result<LibraryDetail, Error> {
        self.exchange(endpoints::LIBRARY, &[name], None, None::<&()>)
    }

    /// MOVE MEDIUM from element `from` to element `to`.
    pub fn move_medium(&self, library: &str, from: u16, to: u16) -> Result<LibraryDetail, Error> {
        let body = MoveRequest { from, to };
        self.exchange(endpoints::MOVE, &[library], None, Some(&body))
    }

    /// A vaulted cartridge into mail slot `to` (the first free one when `None`).
    pub fn import(
        &self,
        library: &str,
        barcode: &str,
        to: Option<u16>,
    ) -> Result<LibraryDetail, Error> {
        let body = ImportRequest {
            barcode: barcode.to_string(),
            to,
        };
        self.exchange(endpoints::IMPORT, &[library], None, Some(&body))
    }

    /// The cartridge in mail slot `from` to the vault.
    pub fn export(&self, library: &str, from: u16) -> Result<LibraryDetail, Error> {
        let body = ExportRequest { from };
        self.exchange(endpoints::EXPORT, &[library], None, Some(&body))
    }

    // ------------------------------------------------------------------ cartridges

    pub fn cartridges(&self, query: &ListQuery) -> Result<Vec<CartridgeView>, Error> {
        let q = query_string(&[
            ("search", query.search.clone()),
            ("location", query.location.clone()),
        ]);
        self.exchange(endpoints::CARTRIDGES, &[], q, None::<&()>)
    }

    pub fn create_cartridges(&self, request: &CreateRequest) -> Result<Vec<CartridgeView>, Error> {
        self.exchange(endpoints::CREATE_CARTRIDGES, &[], None, Some(request))
    }

    pub fn cartridge(&self, barcode: &str, query: &ShowQuery) -> Result<CartridgeDetail, Error> {
        let q = query_string(&[("exclusive", query.exclusive.map(|e| e.to_string()))]);
        self.exchange(endpoints::CARTRIDGE, &[barcode], q, None::<&()>)
    }

    /// Sets or clears the write-protect switch.
    pub fn update_cartridge(
        &self,
        barcode: &str,
        update: &UpdateRequest,
    ) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::UPDATE_CARTRIDGE, &[barcode], None, Some(update))
    }

    pub fn delete_cartridge(&self, barcode: &str) -> Result<(), Error> {
        self.exchange_empty(endpoints::DELETE_CARTRIDGE, &[barcode], None::<&()>)
    }

    /// From a mail slot (or an operator-accessible slot) to the vault.
    pub fn vault(&self, barcode: &str) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::VAULT, &[barcode], None, None::<&()>)
    }

    pub fn erase(&self, barcode: &str) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::ERASE, &[barcode], None, None::<&()>)
    }

    /// Starts archiving a vaulted cartridge (a job; see [`Client::archive_status`]).
    pub fn archive(&self, barcode: &str) -> Result<ArchiveStatus, Error> {
        self.exchange(endpoints::ARCHIVE, &[barcode], None, None::<&()>)
    }

    /// Starts restoring an archived cartridge (a job; see [`Client::archive_status`]).
    pub fn restore(&self, barcode: &str) -> Result<ArchiveStatus, Error> {
        self.exchange(endpoints::RESTORE, &[barcode], None, None::<&()>)
    }

    /// Shares a vaulted cartridge for another store on the bucket to adopt.
    pub fn share(&self, barcode: &str) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::SHARE, &[barcode], None, None::<&()>)
    }

    /// Takes a shared cartridge back (before another store adopted it).
    pub fn unshare(&self, barcode: &str) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::UNSHARE, &[barcode], None, None::<&()>)
    }

    /// Every cartridge in the shared vault.
    pub fn shared_vault(&self) -> Result<Vec<SharedCartridge>, Error> {
        self.exchange(endpoints::SHARED_VAULT, &[], None, None::<&()>)
    }

    /// Adopts a shared cartridge into this store's vault, its data read in place.
    pub fn adopt(&self, barcode: &str) -> Result<CartridgeDetail, Error> {
        self.exchange(endpoints::ADOPT, &[barcode], None, None::<&()>)
    }

    /// The last archive or restore job.
    pub fn archive_status(&self) -> Result<ArchiveStatus, Error> {
        self.exchange(endpoints::ARCHIVE_STATUS, &[], None, None::<&()>)
    }

    // ------------------------------------------------------------------ monitor, store

    /// The store's figures, read now.
    pub fn stats(&self) -> Result<StoreView, Error> {
        self.exchange(endpoints::STATS, &[], None, None::<&()>)
    }

    pub fn monitor(&self) -> Result<MonitorSample, Error> {
        self.exchange(endpoints::MONITOR, &[], None, None::<&()>)
    }

    /// The Server-Sent Events stream of samples, once a second, until the token ends.
    pub fn monitor_stream(&self) -> Result<MonitorStream, Error> {
        self.record(endpoints::MONITOR_STREAM);
        let path = endpoints::MONITOR_STREAM.fill(&[]);
        let response = self.run("GET", &path, None)?;
        let status = response.status().as_u16();
        if status >= 400 {
            let text = response.into_body().read_to_string().unwrap_or_default();
            return Err(api_error(status, None, &text));
        }
        Ok(MonitorStream {
            lines: Box::new(BufReader::new(response.into_body().into_reader())),
            path,
            strict: self.strict,
        })
    }

    pub fn sessions(&self) -> Result<Vec<SessionView>, Error> {
        self.exchange(endpoints::SESSIONS, &[], None, None::<&()>)
    }

    pub fn events(&self, query: &EventsQuery) -> Result<Vec<AuditEvent>, Error> {
        let q = query_string(&[
            ("limit", query.limit.map(|l| l.to_string())),
            ("before", query.before.map(|b| b.to_string())),
        ]);
        self.exchange(endpoints::EVENTS, &[], q, None::<&()>)
    }

    pub fn verify_status(&self) -> Result<VerifyStatus, Error> {
        self.exchange(endpoints::VERIFY_STATUS, &[], None, None::<&()>)
    }

    pub fn start_verify(&self) -> Result<VerifyStatus, Error> {
        self.exchange(endpoints::START_VERIFY, &[], None, None::<&()>)
    }

    pub fn reclaim_status(&self) -> Result<ReclaimStatus, Error> {
        self.exchange(endpoints::RECLAIM_STATUS, &[], None, None::<&()>)
    }

    /// Starts a reclaim; no body means the server's defaults.
    pub fn start_reclaim(&self, request: Option<&ReclaimRequest>) -> Result<ReclaimStatus, Error> {
        self.exchange(endpoints::START_RECLAIM, &[], None, request)
    }

    /// Prometheus metrics (`/metrics`, outside the API), as text.
    pub fn metrics(&self) -> Result<String, Error> {
        self.text("GET", endpoints::METRICS)
    }

    /// The OpenAPI document.
    pub fn openapi(&self) -> Result<Value, Error> {
        let text = self.text("GET", endpoints::OPENAPI)?;
        serde_json::from_str(&text).map_err(|e| Error::Decode {
            method: "GET".into(),
            path: endpoints::OPENAPI.into(),
            detail: e.to_string(),
        })
    }

    // ------------------------------------------------------------------ the requests

    /// Any request with this client's token: `path` from the server's root (with its query),
    /// `body` sent as it is, with `Content-Type: application/json`. An error only when no
    /// answer came.
    pub fn raw(&self, method: &str, path: &str, body: Option<&str>) -> Result<RawAnswer, Error> {
        let response = self.run(method, path, body.map(str::to_string))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = response.into_body();
        let text = match self.body_limit {
            Some(limit) => body.with_config().limit(limit).read_to_string(),
            None => body.read_to_string(),
        }
        .unwrap_or_default();
        Ok(RawAnswer {
            status,
            retry_after,
            text,
        })
    }

    /// Sends one request: a JSON body as a `String` (a known length, not chunked).
    fn run(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<ureq::http::Response<ureq::Body>, Error> {
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let sent = match body {
            Some(b) => req
                .header("Content-Type", "application/json")
                .body(b)
                .map_err(ureq::Error::from)
                .and_then(|r| self.agent.run(r)),
            None => req
                .body(())
                .map_err(ureq::Error::from)
                .and_then(|r| self.agent.run(r)),
        };
        sent.map_err(|e| self.transport(method, path, e))
    }

    fn transport(&self, method: &str, path: &str, source: ureq::Error) -> Error {
        Error::Transport {
            method: method.to_string(),
            path: path.to_string(),
            base: self.base.clone(),
            source: Box::new(source),
        }
    }

    fn record(&self, endpoint: Endpoint) {
        if self.strict
            && let Ok(mut called) = self.called.lock()
        {
            called.insert(endpoint);
        }
    }

    /// A 2xx answer's text; an error status is an [`Error::Api`].
    fn send(
        &self,
        endpoint: Endpoint,
        args: &[&str],
        query: Option<String>,
        body: Option<&impl Serialize>,
    ) -> Result<(String, String), Error> {
        self.record(endpoint);
        let mut path = endpoint.fill(args);
        if let Some(q) = query {
            path.push('?');
            path.push_str(&q);
        }
        let body = body
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| Error::Decode {
                method: endpoint.method.to_string(),
                path: path.clone(),
                detail: format!("the request body: {e}"),
            })?;
        let answer = self.raw(endpoint.method.as_str(), &path, body.as_deref())?;
        if answer.status >= 400 {
            return Err(api_error(
                answer.status,
                answer.retry_after.as_deref(),
                &answer.text,
            ));
        }
        Ok((path, answer.text))
    }

    fn exchange<T: DeserializeOwned + Serialize>(
        &self,
        endpoint: Endpoint,
        args: &[&str],
        query: Option<String>,
        body: Option<&impl Serialize>,
    ) -> Result<T, Error> {
        let (path, text) = self.send(endpoint, args, query, body)?;
        decode(endpoint.method.as_str(), &path, &text, self.strict)
    }

    /// For the endpoints that answer 204 No Content.
    fn exchange_empty(
        &self,
        endpoint: Endpoint,
        args: &[&str],
        body: Option<&impl Serialize>,
    ) -> Result<(), Error> {
        self.send(endpoint, args, None, body).map(|_| ())
    }

    /// A GET outside the API's JSON (metrics, the document): the text of a 2xx answer.
    fn text(&self, method: &str, path: &str) -> Result<String, Error> {
        let answer = self.raw(method, path, None)?;
        if answer.status >= 400 {
            return Err(api_error(
                answer.status,
                answer.retry_after.as_deref(),
                &answer.text,
            ));
        }
        Ok(answer.text)
    }
}

/// `text` as a `T`; in strict mode, also the proof that `T` keeps all of it: serialised again
/// it must be the same JSON (an unknown or renamed field, or a changed type, shows here).
fn decode<T: DeserializeOwned + Serialize>(
    method: &str,
    path: &str,
    text: &str,
    strict: bool,
) -> Result<T, Error> {
    let failed = |detail: String| Error::Decode {
        method: method.to_string(),
        path: path.to_string(),
        detail,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| failed(format!("not JSON: {e}")))?;
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| failed(e.to_string()))?;
    if strict {
        let again = serde_json::to_value(&typed).map_err(|e| failed(e.to_string()))?;
        if again != value {
            return Err(failed(format!(
                "the server sent {value}, the type keeps {again}"
            )));
        }
    }
    Ok(typed)
}

/// The error of an error status: the server's code and message from its [`ErrorBody`].
fn api_error(status: u16, retry_after: Option<&str>, text: &str) -> Error {
    let (code, message) = match serde_json::from_str::<ErrorBody>(text) {
        Ok(body) => (body.error.code, body.error.message),
        Err(_) => ("error".to_string(), text.to_string()),
    };
    Error::Api {
        status,
        code,
        message,
        retry_after: retry_after.and_then(|s| s.trim().parse().ok()),
    }
}

/// `k=v&…` of the parameters that are set, percent-encoded; `None` when none is.
fn query_string(pairs: &[(&str, Option<String>)]) -> Option<String> {
    let set: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| format!("{k}={}", endpoints::encode_query_value(v)))
        })
        .collect();
    (!set.is_empty()).then(|| set.join("&"))
}

/// The monitor's event stream: one sample per `monitor` event (text/event-stream, HTML
/// Living Standard §9.2); ends when the server ends it.
pub struct MonitorStream {
    lines: Box<dyn BufRead + Send>,
    path: String,
    /// The client's strict mode, for each sample.
    strict: bool,
}

impl Iterator for MonitorStream {
    type Item = Result<MonitorSample, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut data = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            match self.lines.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    return Some(decode("GET", &self.path, &data, self.strict));
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_a_scheme() {
        assert!(matches!(
            Client::new("127.0.0.1:8080", ClientOptions::default()),
            Err(Error::Url(_))
        ));
        let c = Client::new("http://127.0.0.1:8080/", ClientOptions::default()).unwrap();
        assert_eq!(c.base(), "http://127.0.0.1:8080");
    }

    #[test]
    fn error_answers_carry_the_servers_code_and_message() {
        let e = api_error(
            409,
            None,
            r#"{"error":{"code":"conflict","message":"source element empty"}}"#,
        );
        assert_eq!(e.to_string(), "conflict: source element empty");
        assert_eq!(e.status(), Some(409));
        let e = api_error(429, Some("3"), "slow down");
        assert!(matches!(e, Error::Api { retry_after: Some(3), ref code, .. } if code == "error"));
    }

    #[test]
    fn strict_decoding_refuses_fields_the_type_does_not_keep() {
        let text = r#"{"username":"a","role":"admin"}"#;
        assert!(decode::<Me>("GET", "/me", text, true).is_ok());
        let extra = r#"{"username":"a","role":"admin","since":3}"#;
        assert!(decode::<Me>("GET", "/me", extra, false).is_ok());
        assert!(matches!(
            decode::<Me>("GET", "/me", extra, true),
            Err(Error::Decode { .. })
        ));
    }

    #[test]
    fn a_strict_clients_stream_refuses_fields_the_type_does_not_keep() {
        let sample = serde_json::to_value(MonitorSample::default()).unwrap();
        let mut extra = sample.clone();
        extra["since"] = 3.into();
        let stream = |strict| MonitorStream {
            lines: Box::new(std::io::Cursor::new(format!(
                "event: monitor\ndata: {sample}\n\nevent: monitor\ndata: {extra}\n\n"
            ))),
            path: "/api/v1/monitor/stream".into(),
            strict,
        };
        let lax: Vec<_> = stream(false).collect();
        assert!(lax.len() == 2 && lax.iter().all(Result::is_ok));
        let strict: Vec<_> = stream(true).collect();
        assert!(strict[0].is_ok());
        assert!(matches!(strict[1], Err(Error::Decode { .. })));
    }

    #[test]
    fn queries_hold_only_what_is_set() {
        assert_eq!(query_string(&[("a", None)]), None);
        assert_eq!(
            query_string(&[
                ("search", Some("A B&".into())),
                ("x", None),
                ("n", Some("1".into()))
            ]),
            Some("search=A%20B%26&n=1".into())
        );
    }
}
