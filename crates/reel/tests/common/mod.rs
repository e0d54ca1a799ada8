//! What the integration tests share: `reel serve` as a child process and a blocking tape
//! session come from the dev-only `reel-testkit`; the REST helpers live in [`api`].

#![allow(dead_code, unused_imports)] // each test binary uses part of it

pub mod api;
pub mod cartridges;
pub mod keys;

pub use reel_testkit::{ANY_PORTAL, Server, free_portal, tape};
