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
//! | `janus-core` | clock, durable writes, terminal escaping, shutdown, the protocol, PKI, TLS: no knowledge of nodes or requests |
//! | `janus-store` | the state directory: `tokens`, `nodes/`, `approved/` and our additions; its only writer |
//! | `janus-listen` | what every listener is made of: bind, the connection table and shedding, PROXY, the error answer, spans, one shutdown |
//! | `janus-endpoint` | the nodes' HTTPS port: its routes, limits, programs, reloads, metrics |
//! | `janus-admin` | the admin model and its functions, and the admin listener (API and console) |
//! | `janus-agent` | the node side: janusd's HTTPS client and registration loop |
//! | `janus-registration` (this crate) | the command line ([`cli`], [`admin_args`], [`admin_cli`]) and the commands that compose the layers: [`serving`] (the two listeners side by side), [`backup`] (a state as one file, and back), [`settings`] (what startup says of them), [`certs`], [`demo`], [`healthcheck`], [`user_data`] |
//!
//! Each layer is named by its own crate (`janus_store::Store`): this crate
//! re-exports none of them. docs/architecture.md is the maintainer's map.

#![warn(missing_docs)]

// The commands that compose the layers.
pub mod admin_args;
pub mod admin_cli;
pub mod backup;
pub mod certs;
pub mod cli;
pub mod demo;
pub mod healthcheck;
pub mod logging;
pub mod serving;
pub mod settings;
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
        let io =
            || janus_core::durable::with_path(io::Error::from_raw_os_error(13), Path::new("/state/tokens"));
        let errors: Vec<Box<dyn Error>> = vec![
            Box::new(io()),
            Box::new(janus_store::StoreError::from(io())),
            Box::new(janus_admin::AdminError::from(janus_store::StoreError::from(io()))),
            Box::new(janus_agent::AgentError::File { path: "/f".into(), cause: io() }),
            Box::new(janus_agent::http::HttpError::Connect { url: "https://x/".into(), cause: io() }),
            Box::new(janus_core::pki::PkiError::Read { path: "/p".into(), cause: io() }),
            Box::new(janus_core::pki::mint::MintError::from(io())),
            Box::new(janus_endpoint::ApiError::Internal(io())),
            Box::new(janus_endpoint::StartupError::State(io().into())),
            Box::new(janus_endpoint::StartupError::Fleet {
                dir: "/fleet".into(),
                cause: janus_core::pki::PkiError::Read { path: "/fleet/root.crt".into(), cause: io() },
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
