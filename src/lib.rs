//! janus-registration: the protocol-2 registration endpoint Janus nodes
//! announce themselves to, a drop-in for the reference `registration-server.py`
//! on the same state layout, and the tools around it.
//!
//! # Layers
//! Each layer uses only the ones above it.
//!
//! **Foundation** — no knowledge of nodes or requests:
//! - [`clock`]: Unix time, RFC 3339, Go-style durations.
//! - [`durable`]: the one helper for every file written: atomic, durable, never through a link.
//! - [`terminal`]: escaping what others wrote before it reaches a terminal.
//! - [`shutdown`]: SIGINT/SIGTERM as one future.
//!
//! **Protocol and trust** — what the wire and the certificates say:
//! - [`protocol`]: the wire types, shared by the server and the agent.
//! - [`pki`]: every certificate, key and bundle check (the only DER reader),
//!   and minting with rcgen (its public path: [`certs`]).
//! - [`tls`]: the one crypto provider, the server's and the clients' TLS configurations.
//!
//! **State** — the only writer of the state directory:
//! - [`store`]: `tokens`, `nodes/`, `approved/` and our additions; its async
//!   face [`store::AsyncStore`] is all the server sees.
//!
//! **Services** — long-running roles:
//! - [`server`]: `serve`, the HTTPS endpoint.
//! - [`agent`]: the node side: janusd's HTTPS client and registration loop, and the load generator.
//!
//! **Commands** — one-shot jobs behind the command line:
//! - [`cli`]: the command line (clap), turned into each command's config.
//! - [`admin`]: `nodes` and `tokens`, day-2 operation on the state directory.
//! - [`certs`]: `certs`, writing fleets and certificates.
//! - [`demo`]: `demo`, the embedded default on a development fleet.
//! - [`healthcheck`]: `healthcheck`, the container's probe of `/healthz`.

//! # Errors
//! Every error's message says its whole cause, once: an error whose message
//! includes its cause does not also return it as `source()` (a printer that
//! walks the chain would say it twice), and a wrapper that adds nothing is
//! `#[error(transparent)]`. The store's refusals are [`store::StoreError`]'s
//! own variants, made where they are met: never an I/O error told apart by
//! a downcast later.

#![warn(missing_docs)]

// Foundation.
pub mod clock;
pub mod durable;
pub mod shutdown;
pub mod terminal;

// Protocol and trust.
pub mod pki;
pub mod protocol;
pub mod tls;

// State.
pub mod store;

// Services.
pub mod agent;
pub mod server;

// Commands.
pub mod admin;
pub mod admin_api;
pub mod certs;
pub mod cli;
pub mod demo;
pub mod healthcheck;

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
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut unexplained = Vec::new();
        for dir in ["store", "admin", "admin_api", "server", "durable"] {
            let mut stack = vec![root.join(dir)];
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
            Box::new(crate::admin::AdminError::Revoke { key: "k".into(), cause: io().into() }),
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
