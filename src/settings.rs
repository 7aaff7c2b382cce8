//! What `serve` (and `demo`) say of their settings at startup: a
//! `JANUS_REGISTRATION_*` variable that names no setting (a typo clap would
//! ignore silently), with the nearest name; and one `settings` line with
//! the effective values, after the ports are bound.
//!
//! Invariants: the variables known are read from the command line's own
//! definition (every `env = …` of every command), never from a second list;
//! the settings line names paths, addresses, limits and times, never a
//! secret (no key, token or password is a setting's value: they are files).

use std::net::SocketAddr;

use janus_endpoint::ServeConfig;

/// The prefix of every variable the binary reads.
pub const PREFIX: &str = "JANUS_REGISTRATION_";

/// The variables the tests set to reach a fault (never a user's setting).
const TEST_HOOKS: &str = "JANUS_REGISTRATION_TEST_";

/// Every variable a command of `command` reads (its `env = …`), sorted.
pub fn known_variables(command: &clap::Command) -> Vec<String> {
    let mut names = Vec::new();
    collect(command, &mut names);
    names.sort();
    names.dedup();
    names
}

fn collect(command: &clap::Command, names: &mut Vec<String>) {
    names.extend(
        command.get_arguments().filter_map(|a| a.get_env()).filter_map(|e| e.to_str()).map(String::from),
    );
    for sub in command.get_subcommands() {
        collect(sub, names);
    }
}

/// One warning for each `JANUS_REGISTRATION_*` name in `present` that no
/// command reads, with the nearest known name when one is close.
pub fn unknown_variables<'a>(present: impl IntoIterator<Item = &'a str>, known: &[String]) -> Vec<String> {
    present
        .into_iter()
        .filter(|name| name.starts_with(PREFIX) && !name.starts_with(TEST_HOOKS))
        .filter(|name| !known.iter().any(|k| k == name))
        .map(|name| match nearest(name, known) {
            Some(near) => format!("{name} names no setting and is ignored: did you mean {near}?"),
            None => format!("{name} names no setting and is ignored (`serve --help` lists every variable)"),
        })
        .collect()
}

/// The known name closest to `name`, if it is close: at most a third of
/// the setting's part of its name in edits.
fn nearest<'k>(name: &str, known: &'k [String]) -> Option<&'k str> {
    let at_most = name.len().saturating_sub(PREFIX.len()).div_ceil(3).max(1);
    janus_core::nearest::nearest(name, known.iter().map(String::as_str), at_most)
}

/// Logs a warning for every variable of this process's environment that
/// names no setting.
pub fn warn_of_unknown_variables(command: &clap::Command) {
    let present: Vec<String> = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect();
    for warning in unknown_variables(present.iter().map(String::as_str), &known_variables(command)) {
        tracing::warn!("{warning}");
    }
}

/// The `settings` line: what this server runs with, once its ports are bound.
pub fn log_effective(config: &ServeConfig, listen: SocketAddr, admin_listen: Option<SocketAddr>) {
    let limits = &config.limits;
    let go = janus_core::clock::go_duration;
    tracing::info!(
        listen = %listen,
        admin_listen = %admin_listen.map_or("off".to_string(), |a| a.to_string()),
        metrics_listen = %config.metrics_listen.map_or("off".to_string(), |a| a.to_string()),
        state = %config.state.display(),
        fleet = %config.fleet.display(),
        cert = %config.cert.display(),
        key = %config.key.display(),
        max_connections = config.max_connections,
        max_connections_per_source = config.max_connections_per_source,
        max_connections_per_network = config.max_connections_per_network,
        burst = limits.burst,
        refill_every = %go(limits.refill_every),
        max_pending = limits.max_pending,
        pending_max_age = %go(limits.pending_max_age),
        handshake_timeout = %go(config.handshake_timeout),
        head_timeout = %go(config.head_timeout),
        body_timeout = %go(config.body_timeout),
        keep_alive = config.keep_alive,
        shutdown_grace = %go(config.shutdown_grace),
        reload_every = %go(config.reload_every),
        maintenance_every = %go(config.maintenance_every),
        reconcile_every = %go(config.reconcile_every),
        readmit_window = %go(config.readmit_window),
        proxy_protocol = %format!("{:?}", config.proxy_protocol),
        admission_command = %config.admission.as_ref().map_or("off".to_string(), |p| p.command.display().to_string()),
        on_admitted = %config.on_admitted.as_ref().map_or("off".to_string(), |p| p.command.display().to_string()),
        "settings"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_variable_is_warned_with_the_nearest_name() {
        let known = known_variables(&<crate::cli::Cli as clap::CommandFactory>::command());
        assert!(known.iter().any(|k| k == "JANUS_REGISTRATION_STATE"), "{known:?}");
        let warned = unknown_variables(
            [
                "JANUS_REGISTRATION_STAT",
                "JANUS_REGISTRATION_STATE",
                "JANUS_REGISTRATION_MAX_CONECTIONS",
                "JANUS_REGISTRATION_WHATEVER_ELSE_ENTIRELY",
                "JANUS_REGISTRATION_TEST_FAULT_IN_FINISH",
                "HOME",
            ],
            &known,
        );
        assert_eq!(
            warned,
            [
                "JANUS_REGISTRATION_STAT names no setting and is ignored: did you mean JANUS_REGISTRATION_STATE?",
                "JANUS_REGISTRATION_MAX_CONECTIONS names no setting and is ignored: did you mean JANUS_REGISTRATION_MAX_CONNECTIONS?",
                "JANUS_REGISTRATION_WHATEVER_ELSE_ENTIRELY names no setting and is ignored (`serve --help` lists every variable)",
            ]
        );
    }
}
