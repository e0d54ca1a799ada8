//! Compare-and-swap objects (`VersionedObjects`, what cluster leases are made of) against real
//! S3 servers on loopback: `If-None-Match: *` creates, `If-Match: <ETag>` swaps, exactly one
//! winner among concurrent writers.

#![cfg(feature = "s3")]

mod common;

use common::backend;
use reel_backend::conformance;
use reel_s3test::{Kind, S3Server};

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
