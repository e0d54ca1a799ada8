//! A few named threads that take jobs from one bounded queue, for the store's pipelines
//! (hashing records, compressing blobs). A job carries its own reply channel, so callers
//! collect results in the order they need them.

use crossbeam_channel::Sender;
use std::thread::JoinHandle;

pub(crate) struct Workers<J: Send + 'static> {
    tx: Option<Sender<J>>,
    threads: Vec<JoinHandle<()>>,
}

impl<J: Send + 'static> Workers<J> {
    /// Starts `threads` threads named `{name}-{i}`, each running the handler `handler()`
    /// makes for it on every job it takes; at most four jobs per thread wait in the queue.
    pub(crate) fn spawn<H>(
        name: &str,
        threads: usize,
        mut handler: impl FnMut() -> H,
    ) -> std::io::Result<Workers<J>>
    where
        H: FnMut(J) + Send + 'static,
    {
        let threads = threads.max(1);
        let (tx, rx) = crossbeam_channel::bounded::<J>(threads * 4);
        let threads = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                let mut handle = handler();
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || {
                        for job in rx {
                            handle(job);
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Workers {
            tx: Some(tx),
            threads,
        })
    }

    /// Queues `job` (waiting while the queue is full); gives it back if the threads are gone,
    /// for the caller to run itself.
    pub(crate) fn send(&self, job: J) -> Result<(), J> {
        match &self.tx {
            Some(tx) => tx
                .send(job)
                .map_err(crossbeam_channel::SendError::into_inner),
            None => Err(job),
        }
    }
}

impl<J: Send + 'static> Drop for Workers<J> {
    fn drop(&mut self) {
        // Closing the queue ends each thread's loop once the jobs queued are done.
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
