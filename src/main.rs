//! The `janus-registration` binary: parse, set up logging, dispatch, and turn
//! the outcome into an exit code. Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use janus_registration::cli::{AgentSubcommand, Cli, Command, LogFormat};
use janus_registration::{admin, agent, certs, demo, healthcheck, server, shutdown};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format, &cli.log_level);
    match run(cli) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("janus-registration: {}", janus_registration::terminal::escape(&failure.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// Any command's failure, as one message; context is added here, at the edge.
type Failure = Box<dyn std::error::Error>;

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Serve(args) => serve(args.config(), &args.listen, None).map(|()| ExitCode::SUCCESS),
        Command::Demo(args) => {
            let demo::Demo { config, instructions, lock } = demo::prepare(&args.dir, &args.listen)?;
            let served = serve(config, &args.listen, Some(instructions));
            drop(lock);
            served.map(|()| ExitCode::SUCCESS)
        }
        Command::Agent(command) => match &command.swarm {
            Some(AgentSubcommand::Swarm(args)) => {
                println!("{}", runtime()?.block_on(agent::swarm::run_command(&args.to_swarm()))?);
                Ok(ExitCode::SUCCESS)
            }
            None => Ok(ExitCode::from(runtime()?.block_on(agent::run_command(&command.args.to_agent()))?)),
        },
        Command::Nodes(args) => {
            let state = args.state.as_deref().ok_or("--state (or JANUS_REGISTRATION_STATE) is required")?;
            let out = admin::nodes(state, &args.command.to_admin())?;
            // A streamed listing has printed itself already.
            if !out.is_empty() {
                println!("{out}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tokens(args) => {
            let state = args.state.as_deref().ok_or("--state (or JANUS_REGISTRATION_STATE) is required")?;
            println!("{}", admin::tokens(state, &args.command.to_admin())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(args) => {
            let state = args.state.as_deref().ok_or("--state (or JANUS_REGISTRATION_STATE) is required")?;
            admin::audit_trail(state, args.since, args.follow, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut command, "janus-registration", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Manpage => {
            let command = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(command)
                .render(&mut std::io::stdout())
                .map_err(|e| format!("cannot write the manual page: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Healthcheck(args) => {
            println!("{}", runtime()?.block_on(healthcheck::check(&args.addr, args.live))?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs(command) => {
            println!("{}", certs::run(&command.to_certs())?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Startup checks first, then the socket, then (for the demo) what to try.
fn serve(config: server::ServeConfig, listen: &str, banner: Option<String>) -> Result<(), Failure> {
    let prepared = server::prepare(config)?;
    let listener = server::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    if let Some(banner) = banner {
        println!("{banner}");
    }
    runtime()?.block_on(async {
        let stop = shutdown::signal().map_err(|e| format!("cannot handle signals: {e}"))?;
        Ok(prepared.serve(listener, stop).await?)
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}").into())
}

/// Logs go to stderr. Text lines pass through the terminal escaper (so no
/// colour: the escaper cannot tell our colours from a node's), JSON lines
/// escape their strings themselves. A log line that cannot be written is
/// dropped: by default tracing-subscriber would `eprintln!` the error,
/// which panics once stderr is gone (a log collector that died), and a
/// panicking log call would take the request, or the shutdown, with it.
fn init_tracing(format: LogFormat, level: &str) {
    use janus_registration::terminal::EscapingWriter;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("janus_registration={level}")));
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).log_internal_errors(false).with_ansi(false);
    match format {
        LogFormat::Text => builder.with_writer(|| EscapingWriter(std::io::stderr())).init(),
        LogFormat::Json => builder.with_writer(std::io::stderr).json().init(),
    }
}
