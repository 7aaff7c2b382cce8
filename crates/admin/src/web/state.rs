//! What every handler of the admin listener shares ([`AdminState`]) and
//! how a request's work reaches the store ([`on_store`]) or opens an event
//! stream ([`AdminState::open_stream`]).
//!
//! Invariants: at most [`MAX_WORK`] requests' work runs at once, each
//! within [`REQUEST_DEADLINE`] (503 past it, its permit held until the
//! work returns); a stream holds one of its credential's slots until it
//! ends, and ends when the server stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use janus_store::{AsyncStore, Store};
use serde_json::Value;

use super::stream;
use crate::credential::Caller;
use crate::error::{AdminError, Code};
use crate::model::Actor;

/// Requests whose state work runs at once, at most.
pub const MAX_WORK: usize = 16;
/// How long a request's work may take before it is answered 503 (the
/// state on a hung mount): its pool thread stays with it, its permit too.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// What every handler of the admin listener shares.
#[derive(Clone)]
pub(crate) struct AdminState {
    /// The server's own store: one per process, its locks shared.
    pub(crate) store: AsyncStore,
    /// The state directory, for the event streams' follower.
    pub(crate) state: Arc<PathBuf>,
    pub(crate) streams: Arc<stream::StreamSlots>,
    pub(crate) work: Arc<tokio::sync::Semaphore>,
    pub(crate) deadline: Duration,
    /// Set when the server stops: open event streams end.
    pub(crate) closing: tokio::sync::watch::Receiver<bool>,
}

impl AdminState {
    /// The state of a listener on `store` (whose directory is `state`).
    pub(crate) fn new(
        store: AsyncStore,
        state: PathBuf,
        closing: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        AdminState {
            store,
            state: Arc::new(state),
            streams: Arc::default(),
            work: Arc::new(tokio::sync::Semaphore::new(MAX_WORK)),
            deadline: REQUEST_DEADLINE,
            closing,
        }
    }

    /// An event stream of what `followed` says, in one of the credential's
    /// stream slots (503 when none is free), its events named by their kind
    /// or all `name`; it ends when the reader goes or the server stops.
    pub(crate) fn open_stream(
        &self,
        caller: &Caller,
        since: Option<Duration>,
        followed: crate::Followed,
        name: Option<&'static str>,
    ) -> Result<Response, AdminError> {
        let slot = self.streams.take(&caller.name)?;
        let (sender, receiver) = tokio::sync::mpsc::channel::<Value>(64);
        let mut closing = self.closing.clone();
        let state = self.state.clone();
        tokio::spawn(async move {
            let _slot = slot;
            // The server stopping ends the stream (its sender dropped), so a
            // shutdown does not wait out its grace on open streams.
            tokio::select! {
                () = crate::follow(state.as_ref().clone(), since, sender, followed) => {}
                _ = closing.wait_for(|closed| *closed) => {}
            }
        });
        let stream = stream::Received { receiver, name };
        Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
    }
}

/// Runs `work` on the server's store, on the blocking pool, for `actor`;
/// 503 when [`MAX_WORK`] requests' work is running and none finishes
/// within the deadline, or this one does not.
pub(crate) async fn on_store<T: Send + 'static>(
    state: &AdminState,
    actor: Actor,
    work: impl FnOnce(&Store, &Actor) -> Result<T, AdminError> + Send + 'static,
) -> Result<T, AdminError> {
    let deadline = state.deadline;
    let (store, slots) = (state.store.clone(), state.work.clone());
    let run = async move {
        let permit = slots.acquire_owned().await.map_err(|e| AdminError::internal(e.to_string()))?;
        let done = store
            .run(move |store| {
                let _permit = permit; // held while the work runs, however long
                work(store, &actor)
            })
            .await;
        match done {
            Ok(done) => done,
            // A panic's words are ours: logged, never sent.
            Err(failed) => Err(AdminError::internal(format!("the request's task failed: {failed}"))),
        }
    };
    tokio::time::timeout(deadline, run).await.unwrap_or_else(|_| {
        Err(AdminError::new(
            Code::DeadlineExceeded,
            format!(
                "the state did not answer within {} s (a hung mount?); what was asked may still be done: \
                 look before you retry",
                deadline.as_secs()
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Surface;

    /// Work on a hung mount: the request is answered 503 at its deadline,
    /// and its permit is held until the work returns. (Real time, a short
    /// deadline: blocking work keeps a paused clock from advancing.)
    #[tokio::test]
    async fn work_past_its_deadline_is_answered_503_and_keeps_its_permit() {
        let dir = tempfile::tempdir().unwrap();
        let store = AsyncStore::new(Store::open(dir.path()).unwrap());
        let (_closing, closed) = tokio::sync::watch::channel(false);
        let mut state = AdminState::new(store, dir.path().to_path_buf(), closed);
        state.deadline = Duration::from_millis(100);
        let (release, hung) = std::sync::mpsc::channel::<()>();
        let answer = on_store(&state, Actor::new(Surface::Api, "orchestrator"), move |_, _| {
            let _ = hung.recv(); // a read that does not return
            Ok(())
        })
        .await;
        let refused = answer.unwrap_err();
        assert_eq!(refused.code, Code::DeadlineExceeded);
        assert!(refused.said(Surface::Api).contains("did not answer within"));
        assert_eq!(state.work.available_permits(), MAX_WORK - 1, "the hung work keeps its permit");
        release.send(()).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while state.work.available_permits() < MAX_WORK {
            assert!(tokio::time::Instant::now() < deadline, "the permit came back when the work returned");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
