//! `janus-swarm`: the load generator's command line. Parses, runs, prints
//! the report; the work is in [`janus_bench::swarm`].

use std::process::ExitCode;

use clap::Parser;

/// Many simulated nodes against one endpoint, for load: each with its own
/// CA, a new TLS connection per request, the body and headers janusd sends.
#[derive(Debug, Parser)]
#[command(
    name = "janus-swarm",
    version,
    after_help = "Example:\n  janus-swarm --addr 127.0.0.1:8443 --fleet-root fleet/root.crt --nodes 1000 --concurrency 32"
)]
struct Cli {
    #[command(flatten)]
    args: janus_bench::swarm::SwarmArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("janus-swarm: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(janus_bench::swarm::run_command(&cli.args)) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("janus-swarm: {e}");
            ExitCode::FAILURE
        }
    }
}
