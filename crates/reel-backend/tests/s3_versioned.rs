//! Compare-and-swap objects (`VersionedObjects`, what cluster leases are made of) against real
//! S3 servers on loopback: `If-None-Match: *` creates, `If-Match: <ETag>` swaps, exactly one
//! winner among concurrent writers.

#![cfg(feature = "s3")]

use std::time::Duration;

use reel_backend::{S3Backend, S3Config, S3Credentials, conformance};
use reel_s3test::{Kind, S3Server};

fn backend(server: &S3Server, prefix: &str) -> S3Backend {
    let mut c = S3Config::new(server.bucket(), prefix);
    c.endpoint = Some(server.endpoint());
    c.region = server.region().to_string();
    c.allow_http = true;
    c.credentials = S3Credentials::Static {
        access_key_id: server.access_key().to_string(),
        secret_access_key: server.secret_key().to_string(),
        session_token: None,
    };
    c.request_timeout = Duration::from_secs(30);
    S3Backend::open(&c).unwrap_or_else(|e| panic!("open: {e}"))
}

#[test]
fn compare_and_swap_on_versitygw_and_s3proxy() {
    for kind in [Kind::Versitygw, Kind::S3proxy] {
        let server = S3Server::start(kind).unwrap_or_else(|e| panic!("{e}"));
        conformance::versioned(&backend(&server, "cas-a"));
        // A second prefix is a separate namespace.
        conformance::versioned(&backend(&server, "cas-b"));
        eprintln!("[{kind}] compare-and-swap conformance passed");
    }
}
