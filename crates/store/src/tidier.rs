//! The tokens tidier: a thread of its own that blanks spent tokens in
//! `DIR/tokens` in batches (`Tokens::spent` queues while it runs), for the
//! server.
//!
//! Invariants: the [`Tidier`] guard owns the thread; dropping it stops the
//! thread, blanks what is still queued and turns batching off, so no spent
//! token stays listed after a clean shutdown.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::Store;

/// How long the tidier waits for spent tokens before looking again.
const TIDY_WAIT: Duration = Duration::from_millis(500);

/// The tidier thread, running until dropped.
pub struct Tidier {
    store: Arc<Store>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Tidier {
    /// Starts the thread: from now on [`Tokens::spent`] queues.
    pub fn start(store: Arc<Store>) -> io::Result<Tidier> {
        store.tokens.start_batching();
        let stop = Arc::new(AtomicBool::new(false));
        let (running, stopping) = (store.clone(), stop.clone());
        let thread = std::thread::Builder::new().name("tokens-tidier".into()).spawn(move || {
            while !stopping.load(Ordering::Acquire) {
                // Under a state format this binary does not know, nothing is written.
                if running.format_refusal().is_some() {
                    std::thread::sleep(TIDY_WAIT);
                    continue;
                }
                let turn = std::panic::AssertUnwindSafe(|| running.tokens.tidy_turn(TIDY_WAIT));
                if std::panic::catch_unwind(turn).is_err() {
                    tracing::error!(
                        "the tokens tidier panicked; the next maintenance pass blanks what it left"
                    );
                }
            }
        })?;
        Ok(Tidier { store, stop, thread: Some(thread) })
    }
}

impl Drop for Tidier {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.store.tokens.tidy_wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.store.tokens.flush_tidy();
    }
}
