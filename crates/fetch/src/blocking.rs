//! Async requests from synchronous code.

use std::future::Future;

use crate::{Error, Result};

/// A background runtime (one worker thread) that runs request futures for synchronous
/// callers. [`Blocking::run`] blocks the calling thread until the future's answer arrives
/// and works from any thread, also from inside another tokio runtime (reqwest's blocking
/// client panics there in debug builds); like any blocking call, do not use it on an async
/// executor's thread for long.
///
/// Keep one per client: a reqwest client's connections belong to the runtime that opened
/// them.
pub struct Blocking {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Blocking {
    /// Starts the runtime.
    pub fn new() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("trellis-fetch")
            .enable_all()
            .build()
            .map_err(|e| Error::io("cannot start the HTTP runtime", e))?;
        Ok(Self {
            runtime: Some(runtime),
        })
    }

    /// Runs `future` on the background runtime and waits for its output.
    pub fn run<F>(&self, future: F) -> Result<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let runtime = self.runtime.as_ref().ok_or(Error::Runtime)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| Error::Runtime)
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics on an async thread; this does not.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Blocking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocking").finish_non_exhaustive()
    }
}
