//! Where log lines go and which are kept: stderr, text or JSON, filtered
//! by `RUST_LOG` or `--log-level`.
//!
//! Invariants: every line passes an escaper (text through the terminal
//! escaper, so no colour; JSON escaping its strings itself); a line that
//! cannot be written is dropped, never a panic. A bare `janus_registration`
//! directive (the default, `--log-level`'s) is said for every crate of the
//! workspace; a module is named by its own crate's path
//! (`janus_endpoint::routes=debug`).

use crate::cli::LogFormat;

/// The crates whose lines a bare `janus_registration` directive keeps.
const CRATES: [&str; 6] =
    ["janus_admin", "janus_agent", "janus_endpoint", "janus_listen", "janus_store", "janus_core"];

/// `directives` with a bare `janus_registration` directive also said for
/// every crate of the workspace: `janus_registration=debug` keeps the
/// debug lines of every layer.
pub fn expand(directives: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for directive in directives.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        out.push(directive.to_string());
        let Some(rest) = directive.strip_prefix("janus_registration") else { continue };
        if rest.is_empty() || rest.starts_with('=') || rest.starts_with('[') {
            out.extend(CRATES.iter().map(|krate| format!("{krate}{rest}")));
        }
    }
    out.join(",")
}

/// Logs go to stderr. Text lines pass through the terminal escaper (so no
/// colour: the escaper cannot tell our colours from a node's), JSON lines
/// escape their strings themselves. A log line that cannot be written is
/// dropped: by default tracing-subscriber would `eprintln!` the error,
/// which panics once stderr is gone (a log collector that died), and a
/// panicking log call would take the request, or the shutdown, with it.
pub fn init(format: LogFormat, level: &str) {
    use janus_core::terminal::{EscapingWriter, JsonEscapingWriter};
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| format!("janus_registration={level}"));
    let filter = tracing_subscriber::EnvFilter::try_new(expand(&directives)).unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(expand(&format!("janus_registration={level}")))
    });
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).log_internal_errors(false).with_ansi(false);
    match format {
        LogFormat::Text => builder.with_writer(|| EscapingWriter(std::io::stderr())).init(),
        LogFormat::Json => builder.with_writer(|| JsonEscapingWriter(std::io::stderr())).json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn a_directive_for_the_crate_reaches_every_layer() {
        let all = expand("janus_registration=debug");
        for krate in
            ["janus_registration=debug", "janus_endpoint=debug", "janus_store=debug", "janus_core=debug"]
        {
            assert!(all.split(',').any(|d| d == krate), "{all}");
        }
        assert_eq!(
            expand("janus_endpoint::routes=trace,hyper=info"),
            "janus_endpoint::routes=trace,hyper=info"
        );
        assert_eq!(expand("info"), "info");
    }

    /// A layer added to the binary's dependencies is one whose lines the
    /// default directive keeps: a crate missing here logs nothing.
    #[test]
    fn every_layer_the_binary_links_is_expanded() {
        let manifest = include_str!("../Cargo.toml");
        let dependencies = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
        let layers: Vec<String> = dependencies
            .lines()
            .filter_map(|line| line.strip_prefix("janus-")?.split_once(".workspace"))
            .map(|(name, _)| format!("janus_{}", name.replace('-', "_")))
            .collect();
        assert!(layers.len() >= 5, "{layers:?}");
        for layer in &layers {
            assert!(super::CRATES.contains(&layer.as_str()), "{layer} is not in CRATES");
        }
    }
}
