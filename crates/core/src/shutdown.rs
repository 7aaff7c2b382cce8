//! One shutdown path: SIGINT or SIGTERM, as one future.
//!
//! The handlers are installed when [`signal`] is called, not when the future
//! is first polled: a SIGTERM that arrives right after the server says it is
//! serving must stop it gracefully, not kill it with the default action.

use std::future::Future;

use tokio::signal::unix::{SignalKind, signal as listen};

/// Installs the handlers now (inside a runtime) and returns the future that
/// resolves on the first SIGINT or SIGTERM.
pub fn signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut interrupt = listen(SignalKind::interrupt())?;
    let mut terminate = listen(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
