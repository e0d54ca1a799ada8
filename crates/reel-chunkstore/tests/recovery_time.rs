//! Recovery from the bucket alone, with and without a catalog checkpoint (`checkpoint.rs`):
//! how long a fresh node takes to rebuild its catalog, and what it reads. A benchmark, not a
//! check (ignored by default; timings go in bench/store/RECOVERY.md):
//!
//! ```text
//! cargo test -p reel-chunkstore --release --test recovery_time -- --ignored --nocapture
//! ```
//!
//! `REEL_RECOVERY_SYNCS` sets the number of synchronising points written (default 2000): each
//! is one journal object, as each filemark a backup application writes is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reel_backend::{Backend, S3Backend, S3Config, S3Credentials};
use reel_chunkstore::{ChunkStore, StoreConfig, StreamId};
use reel_s3test::{Kind, S3Server};

fn bucket(server: &S3Server) -> Arc<S3Backend> {
    let mut config = S3Config::new(server.bucket().to_string(), "recovery".to_string());
    config.endpoint = Some(server.endpoint());
    config.allow_http = true;
    config.credentials = S3Credentials::Static {
        access_key_id: server.access_key().to_string(),
        secret_access_key: server.secret_key().to_string(),
        session_token: None,
    };
    Arc::new(S3Backend::open(&config).expect("open the S3 back end"))
}

fn config() -> StoreConfig {
    StoreConfig {
        journal: true,
        checkpoint_min_bytes: u64::MAX,
        ..StoreConfig::default()
    }
}

/// Rebuilds a catalog from the bucket into a fresh directory: seconds, requests, objects.
fn recover(server: &S3Server, dir: &std::path::Path) -> (Duration, u64, u64, u64, [u8; 32]) {
    let s3 = bucket(server);
    let backend: Arc<dyn Backend> = s3.clone();
    let started = Instant::now();
    let mut last = None;
    let store = ChunkStore::open_with_progress(dir, backend, config(), &mut |p| last = Some(p))
        .expect("recovery");
    let took = started.elapsed();
    let p = last.expect("progress");
    let c = s3.counters();
    (
        took,
        c.requests(),
        p.total,
        c.bytes_down,
        store.catalog_fingerprint().unwrap(),
    )
}

#[test]
#[ignore = "a benchmark: run with --ignored"]
fn recovery_from_the_journal_and_from_a_checkpoint() {
    let syncs = std::env::var("REEL_RECOVERY_SYNCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000u64);
    let server = S3Server::start(Kind::Versitygw).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    let write_started = Instant::now();
    {
        let backend: Arc<dyn Backend> = bucket(&server);
        let store = ChunkStore::open(&node, backend, config()).unwrap();
        let streams: Vec<_> = (0..4)
            .map(|s| store.open_stream(StreamId(s)).unwrap())
            .collect();
        let mut record = vec![0u8; 64 << 10];
        for i in 0..syncs {
            // Unique records, so every sync point adds chunks, a pack and extent rows.
            for (n, b) in record.iter_mut().enumerate() {
                *b = (n as u64 ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (n % 7)) as u8;
            }
            let stream = &streams[(i % 4) as usize];
            stream.append_record(&record).unwrap();
            stream.sync().unwrap();
        }
    }
    let wrote = write_started.elapsed();
    let (t_journal, req_journal, obj_journal, down_journal, fp_journal) =
        recover(&server, &dir.path().join("fresh-journal"));
    let report = {
        let backend: Arc<dyn Backend> = bucket(&server);
        let store = ChunkStore::open(&node, backend, config()).unwrap();
        store.checkpoint().unwrap().expect("a checkpoint")
    };
    let (t_ckpt, req_ckpt, obj_ckpt, down_ckpt, fp_ckpt) =
        recover(&server, &dir.path().join("fresh-checkpoint"));
    assert_eq!(fp_journal, fp_ckpt, "both rebuild the same catalog");
    println!(
        "\n{syncs} synchronising points written in {:.1} s; checkpoint: {} parts, {} bytes, {} rows, {} objects deleted\n",
        wrote.as_secs_f64(),
        report.parts,
        report.bytes,
        report.ops,
        report.deleted_objects
    );
    println!("| recovery from | objects applied | requests | bytes read | seconds |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| the journal ({syncs} sync points) | {obj_journal} | {req_journal} | {down_journal} | {:.2} |",
        t_journal.as_secs_f64()
    );
    println!(
        "| the checkpoint (+ the opening's journal object) | {obj_ckpt} | {req_ckpt} | {down_ckpt} | {:.2} |",
        t_ckpt.as_secs_f64()
    );
}
