//! reel's REST API (docs/design/api.md) in one place: the request and answer types the server
//! serialises and every client deserialises, the table of endpoints, and one typed blocking
//! [`Client`] used by `reel ctl`, the benchmarks and the tests.
//!
//! The server's OpenAPI document is generated from these same types (feature `openapi`), and
//! the server's tests check that its paths equal [`endpoints::ALL`], the table the client is
//! built on; a [`Client`] in strict mode checks every answer against its type, field for
//! field. So the document, the server and the clients cannot drift apart unnoticed.
//!
//! This crate knows nothing of the server: no axum, no store; types and a client only.

pub mod cartridges;
mod client;
pub mod endpoints;
pub mod error;
pub mod library;
pub mod maintenance;
pub mod monitor;
pub mod session;

pub use client::{Client, ClientOptions, Error, MonitorStream, RawAnswer};
pub use endpoints::{Endpoint, Method};
pub use error::{ErrorBody, ErrorDetail};
pub use session::Role;
