//! Every endpoint of the REST API, once: its method and its path as the OpenAPI document
//! writes it (`{name}` for a path parameter). The [`Client`](crate::Client) builds each
//! request from these constants, and the server's tests check that its OpenAPI document has
//! exactly the set in [`ALL`].

/// An HTTP method the API uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Get => "GET",
            Post => "POST",
            Put => "PUT",
            Patch => "PATCH",
            Delete => "DELETE",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One operation: a method on a path template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub method: Method,
    /// From the server's root, e.g. `/api/v1/cartridges/{barcode}`.
    pub path: &'static str,
}

const fn endpoint(method: Method, path: &'static str) -> Endpoint {
    Endpoint { method, path }
}

use Method::{Delete, Get, Patch, Post, Put};

pub const LOGIN: Endpoint = endpoint(Post, "/api/v1/login");
pub const LOGOUT: Endpoint = endpoint(Post, "/api/v1/logout");
pub const ME: Endpoint = endpoint(Get, "/api/v1/me");
pub const LIBRARIES: Endpoint = endpoint(Get, "/api/v1/libraries");
pub const LIBRARY: Endpoint = endpoint(Get, "/api/v1/libraries/{name}");
pub const MOVE: Endpoint = endpoint(Post, "/api/v1/libraries/{name}/move");
pub const IMPORT: Endpoint = endpoint(Post, "/api/v1/libraries/{name}/import");
pub const EXPORT: Endpoint = endpoint(Post, "/api/v1/libraries/{name}/export");
pub const CARTRIDGES: Endpoint = endpoint(Get, "/api/v1/cartridges");
pub const CREATE_CARTRIDGES: Endpoint = endpoint(Post, "/api/v1/cartridges");
pub const CARTRIDGE: Endpoint = endpoint(Get, "/api/v1/cartridges/{barcode}");
pub const UPDATE_CARTRIDGE: Endpoint = endpoint(Patch, "/api/v1/cartridges/{barcode}");
pub const DELETE_CARTRIDGE: Endpoint = endpoint(Delete, "/api/v1/cartridges/{barcode}");
pub const VAULT: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/vault");
pub const ERASE: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/erase");
pub const ARCHIVE: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/archive");
pub const RESTORE: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/restore");
pub const ARCHIVE_STATUS: Endpoint = endpoint(Get, "/api/v1/archive");
pub const SHARE: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/share");
pub const UNSHARE: Endpoint = endpoint(Post, "/api/v1/cartridges/{barcode}/unshare");
pub const SHARED_VAULT: Endpoint = endpoint(Get, "/api/v1/shared-vault");
pub const ADOPT: Endpoint = endpoint(Post, "/api/v1/shared-vault/{barcode}/adopt");
pub const STATS: Endpoint = endpoint(Get, "/api/v1/stats");
pub const MONITOR: Endpoint = endpoint(Get, "/api/v1/monitor");
pub const MONITOR_STREAM: Endpoint = endpoint(Get, "/api/v1/monitor/stream");
pub const SESSIONS: Endpoint = endpoint(Get, "/api/v1/sessions");
pub const EVENTS: Endpoint = endpoint(Get, "/api/v1/events");
pub const VERIFY_STATUS: Endpoint = endpoint(Get, "/api/v1/verify");
pub const START_VERIFY: Endpoint = endpoint(Post, "/api/v1/verify");
pub const RECLAIM_STATUS: Endpoint = endpoint(Get, "/api/v1/reclaim");
pub const START_RECLAIM: Endpoint = endpoint(Post, "/api/v1/reclaim");
pub const USERS: Endpoint = endpoint(Get, "/api/v1/users");
pub const CREATE_USER: Endpoint = endpoint(Post, "/api/v1/users");
pub const DELETE_USER: Endpoint = endpoint(Delete, "/api/v1/users/{username}");
pub const SET_PASSWORD: Endpoint = endpoint(Put, "/api/v1/users/{username}/password");
pub const TOKENS: Endpoint = endpoint(Get, "/api/v1/tokens");
pub const CREATE_TOKEN: Endpoint = endpoint(Post, "/api/v1/tokens");
pub const REVOKE_TOKEN: Endpoint = endpoint(Delete, "/api/v1/tokens/{id}");

/// Every endpoint of the OpenAPI document (not `/api/v1/openapi.json` itself, nor `/metrics`,
/// which is Prometheus text outside the API).
pub const ALL: &[Endpoint] = &[
    LOGIN,
    LOGOUT,
    ME,
    LIBRARIES,
    LIBRARY,
    MOVE,
    IMPORT,
    EXPORT,
    CARTRIDGES,
    CREATE_CARTRIDGES,
    CARTRIDGE,
    UPDATE_CARTRIDGE,
    DELETE_CARTRIDGE,
    VAULT,
    ERASE,
    ARCHIVE,
    RESTORE,
    ARCHIVE_STATUS,
    SHARE,
    UNSHARE,
    SHARED_VAULT,
    ADOPT,
    STATS,
    MONITOR,
    MONITOR_STREAM,
    SESSIONS,
    EVENTS,
    VERIFY_STATUS,
    START_VERIFY,
    RECLAIM_STATUS,
    START_RECLAIM,
    USERS,
    CREATE_USER,
    DELETE_USER,
    SET_PASSWORD,
    TOKENS,
    CREATE_TOKEN,
    REVOKE_TOKEN,
];

/// The OpenAPI document's own path.
pub const OPENAPI: &str = "/api/v1/openapi.json";
/// Prometheus metrics (text exposition format, not JSON).
pub const METRICS: &str = "/metrics";

impl Endpoint {
    /// The path with `args` in place of its parameters, in order, percent-encoded.
    ///
    /// # Panics
    /// When `args` does not have one value per parameter: a mistake in this crate.
    pub fn fill(&self, args: &[&str]) -> String {
        let mut out = String::with_capacity(self.path.len() + 32);
        let mut args = args.iter();
        for segment in self.path.split('/').skip(1) {
            out.push('/');
            if segment.starts_with('{') {
                let arg = args.next().expect("one argument per path parameter");
                out.push_str(&encode(arg));
            } else {
                out.push_str(segment);
            }
        }
        assert!(args.next().is_none(), "more arguments than parameters");
        out
    }
}

/// Percent-encodes everything but RFC 3986 §3.3 `pchar`s (unreserved, sub-delims, `:`, `@`),
/// so barcodes and iSCSI names (`iqn.2026-11.org.reel:library`) go as they are.
pub fn encode(text: &str) -> String {
    percent_encode(text, b"-._~!$&'()*+,;=:@")
}

/// Percent-encodes everything but the unreserved characters (RFC 3986 §2.3), for a value of
/// a query string (where `&`, `=` and `+` mean something).
pub(crate) fn encode_query_value(text: &str) -> String {
    percent_encode(text, b"-._~")
}

/// Percent-encodes every byte but ASCII letters, digits and `keep`.
fn percent_encode(text: &str, keep: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_filled_in_order_and_encoded() {
        assert_eq!(
            MOVE.fill(&["iqn.2026-11.org.reel:library"]),
            "/api/v1/libraries/iqn.2026-11.org.reel:library/move"
        );
        assert_eq!(
            SET_PASSWORD.fill(&["a b/c"]),
            "/api/v1/users/a%20b%2Fc/password"
        );
        assert_eq!(STATS.fill(&[]), "/api/v1/stats");
    }

    #[test]
    fn every_endpoint_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for e in ALL {
            assert!(e.path.starts_with("/api/v1/"), "{e:?}");
            assert!(seen.insert(*e), "{e:?} twice");
        }
    }
}
