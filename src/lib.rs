//! janus-registration: the protocol-2 registration endpoint Janus nodes
//! announce themselves to, a drop-in for the reference `registration-server.py`
//! on the same state layout, and the tools around it.
//!
//! # Layers
//! The workspace's crates are the layers: each depends only on those
//! below it, so an upward import does not compile.
//!
//! | crate | owns |
//! |---|---|
//! | `janus-core` | [`clock`], [`durable`], [`terminal`], [`shutdown`], [`protocol`], [`pki`], [`tls`]: no knowledge of nodes or requests |
//! | `janus-store` ([`store`]) | the state directory: `tokens`, `nodes/`, `approved/` and our additions; its only writer |
//! | `janus-endpoint` ([`server`]) | `serve`: the nodes' HTTPS endpoint, its listeners, limits and programs |
//! | `janus-admin` ([`admin`], [`admin_api`]) | `nodes` and `tokens`, and the admin API served beside the endpoint |
//! | `janus-agent` ([`agent`]) | the node side: janusd's HTTPS client, registration loop and the load generator |
//! | `janus-registration` (this crate) | the command line ([`cli`]) and the commands that compose the layers: [`certs`], [`demo`], [`healthcheck`] |
//!
//! This crate re-exports each layer under its module name, so a path such
//! as `janus_registration::store::Store` names the same item in every crate.

#![warn(missing_docs)]

pub use janus_admin as admin;
pub use janus_admin::api as admin_api;
pub use janus_agent as agent;
pub use janus_core::{clock, durable, pki, protocol, shutdown, terminal, tls};
pub use janus_endpoint as server;
pub use janus_store as store;

// The commands that compose the layers.
pub mod admin_args;
pub mod admin_cli;
pub mod certs;
pub mod cli;
pub mod demo;
pub mod healthcheck;
pub mod logging;
pub mod user_data;

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::io;
    use std::path::Path;

    /// Fails when any error in `error`'s chain repeats its source's message.
    fn assert_causes_said_once(error: &(dyn Error + 'static)) {
        let mut parent = error;
        while let Some(source) = parent.source() {
            let (outer, inner) = (parent.to_string(), source.to_string());
            assert!(
                !outer.contains(&inner),
                "{outer:?} says its source {inner:?} and returns it as source()"
            );
            parent = source;
        }
    }

    /// The folds that turn a state read's error into an answer (`.ok()`
    /// on a read, a presence's `unwrap_or`) each say why they are safe, on
    /// the line before (`// fold: ...`): a decision never folds one by
    /// accident (issue 46: the lossy twins were that, with names).
    #[test]
    fn every_fold_of_a_state_read_says_why() {
        let patterns = ["unwrap_or(false)", "unwrap_or(true)", ".ok().flatten()", ".ok()?"];
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
        let mut unexplained = Vec::new();
        for dir in ["store/src", "admin/src", "endpoint/src", "core/src/durable"] {
            let mut stack = vec![crates.join(dir)];
            while let Some(path) = stack.pop() {
                if path.is_dir() {
                    stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                // Unit tests fold freely: they assert what they expect.
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let lines: Vec<&str> = code.lines().collect();
                for (n, line) in lines.iter().enumerate() {
                    let explained = line.contains("// fold:")
                        || n.checked_sub(1).is_some_and(|p| lines[p].trim_start().starts_with("// fold:"));
                    if patterns.iter().any(|p| line.contains(p)) && !explained {
                        unexplained.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(unexplained.is_empty(), "folds without a `// fold:` reason:\n{}", unexplained.join("\n"));
    }

    #[test]
    fn every_wrapping_error_says_its_cause_once() {
        let io = || crate::durable::with_path(io::Error::from_raw_os_error(13), Path::new("/state/tokens"));
        let errors: Vec<Box<dyn Error>> = vec![
            Box::new(io()),
            Box::new(crate::store::StoreError::from(io())),
            Box::new(crate::admin::AdminError::from(crate::store::StoreError::from(io()))),
            Box::new(crate::agent::AgentError::File { path: "/f".into(), cause: io() }),
            Box::new(crate::agent::http::HttpError::Connect { url: "https://x/".into(), cause: io() }),
            Box::new(crate::pki::PkiError::Read { path: "/p".into(), cause: io() }),
            Box::new(crate::pki::mint::MintError::from(io())),
            Box::new(crate::server::error::ApiError::Internal(io())),
            Box::new(crate::server::StartupError::State(io().into())),
            Box::new(crate::server::StartupError::Fleet {
                dir: "/fleet".into(),
                cause: crate::pki::PkiError::Read { path: "/fleet/root.crt".into(), cause: io() },
            }),
        ];
        for error in &errors {
            assert_causes_said_once(error.as_ref());
            // And the cause is said: the OS error and the path reach the reader.
            let text = error.to_string();
            assert!(text.contains("/state/tokens") && text.contains("denied"), "{text}");
        }
    }
}
