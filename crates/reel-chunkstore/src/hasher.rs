//! Chunking and hashing of whole records on a pool of threads, so that one stream uses every
//! core. Only records that start on a chunk boundary and are long enough to end on one (at least
//! the average chunk size) are sent here: their cut points then depend on nothing outside the
//! record, and the result is exactly what the stream's own chunker would produce.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::chunker::{Chunker, ChunkerParams};
use crate::format::ChunkId;

/// A record and its chunks: (id, length) in order, covering the record exactly.
pub struct Hashed {
    pub data: Vec<u8>,
    pub chunks: Vec<(ChunkId, u32)>,
}

struct Job {
    data: Vec<u8>,
    reply: Sender<Hashed>,
}

pub struct HashPool {
    params: ChunkerParams,
    tx: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl HashPool {
    pub fn new(params: ChunkerParams, threads: usize) -> std::io::Result<HashPool> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(threads * 4);
        let threads = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("reel-hash-{i}"))
                    .spawn(move || {
                        for job in rx {
                            let chunks = chunk_and_hash(params, &job.data);
                            // The stream may have gone; then nobody wants the result.
                            let _ = job.reply.send(Hashed {
                                data: job.data,
                                chunks,
                            });
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(HashPool {
            params,
            tx: Some(tx),
            threads,
        })
    }

    /// Queues a record; the result arrives on the returned channel.
    pub fn submit(&self, data: Vec<u8>) -> Receiver<Hashed> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        let job = Job { data, reply };
        let unsent = match &self.tx {
            Some(tx) => tx
                .send(job)
                .err()
                .map(crossbeam_channel::SendError::into_inner),
            None => Some(job),
        };
        if let Some(job) = unsent {
            let chunks = chunk_and_hash(self.params, &job.data);
            let _ = job.reply.send(Hashed {
                data: job.data,
                chunks,
            });
        }
        rx
    }
}

impl Drop for HashPool {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Cuts a record that starts on a chunk boundary and ends on one (its end is a cut because it
/// is at least `params.avg` long, see `Chunker::boundary`), then hashes all its chunks in one
/// batch (`multihash`: twice the rate of hashing them one by one).
pub fn chunk_and_hash(params: ChunkerParams, data: &[u8]) -> Vec<(ChunkId, u32)> {
    let mut chunker = Chunker::new(params);
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(data.len() / params.avg as usize + 2);
    let mut rest = data;
    while let Some(n) = chunker.scan(rest) {
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    let mut ids = Vec::with_capacity(chunks.len());
    crate::multihash::hash_all(&chunks, &mut ids);
    ids.into_iter()
        .zip(&chunks)
        .map(|(id, chunk)| (id, chunk.len() as u32))
        .collect()
}
