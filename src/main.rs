//! The `janus-registration` binary: parse, set up logging, dispatch, and turn
//! the outcome into an exit code. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use janus_agent as agent;
use janus_core::shutdown;
use janus_endpoint as server;
use janus_registration::admin_args::actor_here;
use janus_registration::cli::{Cli, Command};
use janus_registration::{admin_cli, certs, demo, healthcheck, serving};
use janus_store as store;

fn main() -> ExitCode {
    let cli = Cli::parse();
    janus_registration::logging::init(cli.log_format, &cli.log_level);
    janus_core::durable::lock::set_wait(cli.lock_wait);
    match run(cli) {
        Ok(code) => code,
        Err(failure) => {
            // A refusal asked for as JSON is one line a program reads.
            if let Some(refused) = failure.downcast_ref::<admin_cli::Refused>()
                && refused.json
            {
                eprintln!("{refused}");
                return ExitCode::FAILURE;
            }
            // Our own multi-line messages print as lines; every other
            // control character is escaped (values from nodes are escaped
            // where they are put in).
            eprintln!("janus-registration: {}", janus_core::terminal::escape_lines(&failure.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// What an admin command says without a state directory.
const STATE_REQUIRED: &str = "--state (or JANUS_REGISTRATION_STATE) is required: the state directory serve uses, e.g. --state /var/lib/janus-registration";

/// The admin API client `--server` asks for, if it does.
fn remote(
    args: &janus_registration::cli::RemoteArgs,
) -> Result<Option<janus_admin::api::client::AdminClient>, Failure> {
    let (Some(server), Some(cert), Some(key), Some(ca)) =
        (&args.server, &args.client_cert, &args.client_key, &args.server_ca)
    else {
        return Ok(None);
    };
    Ok(Some(janus_admin::api::client::from_files(server, cert, key, ca)?))
}

/// Any command's failure, as one message; context is added here, at the edge.
type Failure = Box<dyn std::error::Error>;

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Serve(args) => {
            serve(args.config()?, args.admin().as_ref(), &args.listen, None).map(|()| ExitCode::SUCCESS)
        }
        Command::Demo(args) => {
            let demo::Demo { config, admin, instructions, lock } =
                demo::prepare(&args.dir, &args.listen, args.admin_listen)?;
            let served = serve(config, Some(&admin), &args.listen, Some(instructions));
            drop(lock);
            served.map(|()| ExitCode::SUCCESS)
        }
        Command::Agent(args) => {
            Ok(ExitCode::from(runtime()?.block_on(agent::run_command(&args.to_agent()))?))
        }
        Command::Nodes(args) => nodes(args),
        Command::Tokens(args) => tokens(args),
        Command::UserData(command) => {
            print(&janus_registration::user_data::user_data(&command)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(args) => {
            let state = args.state.as_deref().ok_or(STATE_REQUIRED)?;
            janus_registration::admin_cli::audit_trail(state, args.since, args.follow, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command, "janus-registration", &mut script);
            print(String::from_utf8_lossy(&script).trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Command::Openapi => {
            print(&serde_json::to_string_pretty(&janus_admin::api::document())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Manpage(args) => {
            manpage(&args.out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup(args) => {
            let taken = janus_registration::backup::backup(&args.state, &args.out)?;
            print(&format!(
                "backed up {} files of {} to {} (taken at {}, under the state's locks; the ledger and its key included)",
                taken.files,
                args.state.display(),
                args.out.display(),
                taken.taken_at
            ));
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore(args) => {
            let restored = janus_registration::backup::restore(&args.from, &args.state)?;
            print(&janus_registration::backup::restored_words(&restored, &args.state));
            Ok(ExitCode::SUCCESS)
        }
        Command::Init(args) => {
            store::Store::check_before_open(&args.state)?;
            store::Store::open(&args.state)?;
            print(&format!(
                "laid out {state}: tokens add --state {state} mints tokens now; serve --state {state} serves it",
                state = args.state.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Command::Healthcheck(args) => {
            print(&runtime()?.block_on(healthcheck::check(&args.addr, args.live, args.plain))?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs(command) => {
            print(&certs::run(&command)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `nodes`: through the admin API with `--server`, else on the state directory.
fn nodes(args: janus_registration::cli::NodesArgs) -> Result<ExitCode, Failure> {
    if let Some(client) = remote(&args.remote)? {
        let json = args.command.asks_json();
        let out = runtime()?
            .block_on(admin_cli::remote_nodes(&client, &args.command))
            .map_err(|e| admin_cli::remote_failure(e, json))?;
        // A followed stream has printed itself already.
        if !out.is_empty() {
            print(&out);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let state = args.state.as_deref().ok_or(STATE_REQUIRED)?;
    let json = args.command.asks_json();
    let actor = actor_here(args.acting_for.as_deref()).map_err(|e| admin_cli::Refused::new(e, json))?;
    let out = admin_cli::nodes(state, &args.command, &actor).map_err(|e| admin_cli::Refused::new(e, json))?;
    // A streamed listing has printed itself already.
    if !out.is_empty() {
        print(&out);
    }
    Ok(ExitCode::SUCCESS)
}

/// `tokens`: through the admin API with `--server`, else on the state
/// directory; secrets read from their files (or stdin) first.
fn tokens(mut args: janus_registration::cli::TokensArgs) -> Result<ExitCode, Failure> {
    args.command.read_secrets()?;
    if let Some(client) = remote(&args.remote)? {
        let json = args.command.asks_json();
        let made = runtime()?
            .block_on(admin_cli::remote_tokens(&client, &args.command))
            .map_err(|e| admin_cli::remote_failure(e, json))?;
        print(&made);
        return Ok(ExitCode::SUCCESS);
    }
    let state = args.state.as_deref().ok_or(STATE_REQUIRED)?;
    let json = args.command.asks_json();
    let actor = actor_here(args.acting_for.as_deref()).map_err(|e| admin_cli::Refused::new(e, json))?;
    print(&admin_cli::tokens(state, &args.command, &actor).map_err(|e| admin_cli::Refused::new(e, json))?);
    Ok(ExitCode::SUCCESS)
}

/// `manpage`: the page on stdout, or every page into `out`.
fn manpage(out: &Option<std::path::PathBuf>) -> Result<(), Failure> {
    let command = <Cli as clap::CommandFactory>::command();
    match out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .map_err(|e| format!("cannot write the manual page: {e}"))?;
            print(String::from_utf8_lossy(&page).trim_end());
        }
        Some(dir) => {
            let written = write_manpages(command, dir)
                .map_err(|e| format!("cannot write the manual pages into {}: {e}", dir.display()))?;
            print(&format!("wrote {written} manual pages into {}", dir.display()));
        }
    }
    Ok(())
}

/// Every startup check first, then the sockets, then (for the demo) what to try.
fn serve(
    config: server::ServeConfig,
    admin: Option<&janus_admin::listener::AdminApiConfig>,
    listen: &str,
    banner: Option<String>,
) -> Result<(), Failure> {
    janus_registration::settings::warn_of_unknown_variables(&<Cli as clap::CommandFactory>::command());
    let bound = serving::prepare(config, admin)?.bind(listen)?;
    let runtime = runtime()?;
    let served = runtime.block_on(async {
        // Signals are ours before anyone is told the endpoint is up: a
        // SIGTERM right after the banner is a clean shutdown, not a kill.
        let stop = shutdown::signal().map_err(|e| format!("cannot handle signals: {e}"))?;
        if let Some(banner) = banner {
            print(&banner);
        }
        Ok(bound.serve(stop).await?)
    });
    // Dropping the runtime would wait for every blocking-pool thread, and
    // one stuck in a hung mount never returns: SIGTERM must end the process.
    runtime.shutdown_timeout(server::SHUTDOWN_STRAGGLERS);
    served
}

/// Writes `text` and a line break to stdout. A reader that went away (`|
/// head`) ends the command quietly with status 0, as coreutils and ripgrep
/// do: not a panic with a backtrace.
fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("janus-registration: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// One manual page per command and subcommand, named as `man` expects
/// (`janus-registration-nodes-approve.1`, clap_mangen's `generate_to`);
/// how many were written.
fn write_manpages(command: clap::Command, dir: &std::path::Path) -> std::io::Result<usize> {
    fn pages(command: &clap::Command) -> usize {
        1 + command
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .map(pages)
            .sum::<usize>()
    }
    std::fs::create_dir_all(dir)?;
    let command = command.disable_help_subcommand(true);
    let written = pages(&command);
    clap_mangen::generate_to(command, dir)?;
    Ok(written)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}").into())
}
