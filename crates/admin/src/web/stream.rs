//! The admin listener's event streams (the API's `/v1/events`, the
//! console's `/console/events`), opened by [`open`] alone.
//!
//! Invariants: at most [`MAX_STREAMS`] streams are open, and
//! [`MAX_STREAMS_PER_CREDENTIAL`] per credential, so one reader cannot take
//! them all; a stream ends when its reader goes or the server stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::response::sse::Event;
use serde_json::Value;

use crate::error::{AdminError, Code};

/// Event streams open at once, at most.
pub const MAX_STREAMS: usize = 8;
/// Of them, held by one credential: one reader cannot take them all.
pub const MAX_STREAMS_PER_CREDENTIAL: usize = 2;

/// Open event streams, by credential name.
#[derive(Default)]
pub(crate) struct StreamSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream's place, given back when dropped.
pub(crate) struct StreamSlot {
    slots: Arc<StreamSlots>,
    name: String,
}

impl StreamSlots {
    pub(crate) fn take(self: &Arc<Self>, name: &str) -> Result<StreamSlot, AdminError> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.values().sum::<usize>() >= MAX_STREAMS {
            return Err(AdminError::new(
                Code::StreamsFull,
                format!("{MAX_STREAMS} event streams are open already"),
            ));
        }
        let mine = open.entry(name.to_string()).or_insert(0);
        if *mine >= MAX_STREAMS_PER_CREDENTIAL {
            return Err(AdminError::new(
                Code::StreamsFull,
                format!(
                    "the credential {name:?} holds {MAX_STREAMS_PER_CREDENTIAL} event streams already: close one"
                ),
            ));
        }
        *mine += 1;
        Ok(StreamSlot { slots: self.clone(), name: name.to_string() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.name);
            }
        }
    }
}

/// The events a follower sends, as a stream of events named by their
/// kind, or all by one name.
pub(crate) struct Received {
    pub(crate) receiver: tokio::sync::mpsc::Receiver<Value>,
    pub(crate) name: Option<&'static str>,
}

impl futures_core::Stream for Received {
    type Item = Result<Event, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let name = self.name;
        self.receiver.poll_recv(cx).map(|decision| {
            decision.map(|d| {
                let kind = name.unwrap_or_else(|| d["event"].as_str().unwrap_or("event")).to_string();
                Ok(Event::default().event(kind).data(d.to_string()))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_credential_holds_two_streams_and_all_hold_eight() {
        let slots = Arc::new(StreamSlots::default());
        let a: Vec<_> = (0..2).map(|_| slots.take("a").unwrap()).collect();
        assert!(
            matches!(slots.take("a"), Err(AdminError { code: Code::StreamsFull, .. })),
            "a third for one credential"
        );
        let others: Vec<_> = (0..6).map(|i| slots.take(&format!("o{}", i / 2)).unwrap()).collect();
        assert!(slots.take("fresh").is_err(), "eight in all");
        drop(a);
        assert!(slots.take("a").is_ok(), "slots come back");
        drop(others);
        assert!(slots.open.lock().unwrap().len() <= 1);
    }
}
