//! `janus-swarm`: many simulated nodes against one endpoint, for load. Each
//! node has its own CA (minted before the clock starts) and behaves as a node
//! does on the wire: a new TLS connection per request, fleet-mode checks,
//! the same body and headers. It reports rates, latency percentiles and errors.

use secrecy::SecretString;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

use serde::Serialize;

use crate::SwarmError;
use janus_agent::http::{Endpoint, Request};
use janus_core::protocol::{AnnounceAnswer, AnnounceRequest, PROTOCOL, Trust};

/// The `janus-swarm` settings, the one type of them: the command line's,
/// and what [`run`] takes (files by path, read by [`run_command`]).
#[derive(Debug, Clone, clap::Args)]
pub struct SwarmArgs {
    /// The endpoint, host:port.
    #[arg(long)]
    pub addr: String,
    /// Poll this endpoint instead of `--addr`: another replica on the same
    /// state, which must hand every admitted node the same trust.
    #[arg(long)]
    pub poll_addr: Option<String>,
    /// Retry a poll answered 5xx or not at all, each second, for this long
    /// after the polls began (as a node keeps polling through an outage).
    #[arg(long, value_parser = janus_core::clock::parse_duration, default_value = "0s")]
    pub poll_retry_for: Duration,
    /// The fleet root the nodes check the endpoint with (fleet mode, SNI controller.fleet.janus).
    #[arg(long)]
    pub fleet_root: PathBuf,
    /// How many simulated nodes (each with its own CA, minted before timing starts).
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Polls each node makes after announcing.
    #[arg(long, default_value_t = 5)]
    pub polls: usize,
    /// A file of registration tokens (whitespace-separated): node i announces with token i.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Approve every pending node by creating STATE/approved/<id> before polling.
    #[arg(long)]
    pub approve_in: Option<PathBuf>,
    /// Only poll this path (e.g. /healthz) instead of announcing: the TLS ceiling.
    #[arg(long)]
    pub only_get: Option<String>,
    /// Write the report as JSON here too.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The server's pid: report the CPU seconds it spent on each phase (from /proc).
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// One phase's figures.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Phase {
    /// Requests made.
    pub requests: usize,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Requests per second.
    pub per_second: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 90th percentile latency.
    pub p90_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
    /// Slowest request.
    pub max_ms: f64,
    /// Answers by status, and transport errors as "error".
    pub outcomes: BTreeMap<String, usize>,
    /// CPU seconds the server spent during the phase (with `--server-pid`).
    pub server_cpu_seconds: Option<f64>,
}

/// A swarm's figures, by phase.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Report {
    /// The announcements.
    pub announce: Option<Phase>,
    /// The polls (or the `GET`s of `only_get`).
    pub poll: Option<Phase>,
    /// Announcements answered `admitted`.
    pub admitted_in_answer: usize,
    /// Of those, the nodes none of whose polls was handed the trust their
    /// answer carried (with `--polls`; 0 unless the endpoint polled lost an
    /// admission).
    pub admitted_untrusted_in_poll: usize,
    /// What those nodes' last polls were answered, by status ("error" for a
    /// transport error, "200-other-trust" for a trust not the answer's):
    /// where the trust went missing.
    pub untrusted_poll_outcomes: BTreeMap<String, usize>,
    /// Those nodes' ids (the first ten), to look them up in the state and logs.
    pub untrusted_ids: Vec<String>,
}

impl Report {
    /// The report as lines of text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (name, phase) in [("announce", &self.announce), ("poll", &self.poll)] {
            if let Some(p) = phase {
                out.push_str(&format!(
                    "{name:<9} {:>7} requests in {:>7.2}s = {:>9.1}/s  p50 {:>7.2}ms  p90 {:>7.2}ms  p99 {:>7.2}ms  max {:>7.2}ms  {:?}\n",
                    p.requests, p.seconds, p.per_second, p.p50_ms, p.p90_ms, p.p99_ms, p.max_ms, p.outcomes
                ));
            }
        }
        if self.poll.is_some() {
            out.push_str(&format!(
                "admitted  {} in their answer, {} of them never given the trust when polled{}\n",
                self.admitted_in_answer,
                self.admitted_untrusted_in_poll,
                if self.untrusted_poll_outcomes.is_empty() {
                    String::new()
                } else {
                    format!(" (last answered {:?})", self.untrusted_poll_outcomes)
                }
            ));
        }
        out
    }
}

struct Sample {
    latency: Duration,
    outcome: String,
    body: Vec<u8>,
}

/// Runs `count` requests, `concurrency` at a time; `make(i)` builds request i.
/// User plus system CPU seconds of process `pid`, from /proc.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    // Counted after the command name: utime and stime are the 12th and 13th.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Linux reports them in USER_HZ, 100 on every platform it runs on.
    Some(ticks / 100.0)
}

/// How long a retried request waits between tries.
const RETRY_EVERY: Duration = Duration::from_secs(1);

async fn drive<F>(
    endpoint: &Endpoint,
    count: usize,
    concurrency: usize,
    server_pid: Option<u32>,
    retry_for: Duration,
    make: F,
) -> (Phase, Vec<Option<Sample>>)
where
    F: Fn(usize) -> (String, Vec<(&'static str, String)>, Option<Vec<u8>>) + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = server_pid.and_then(cpu_seconds);
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (endpoint, make, next) = (endpoint.clone(), make.clone(), next.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return done;
                    }
                    let (path, headers, body) = make(i);
                    let method = if body.is_some() { "POST" } else { "GET" };
                    let request = Request { method, path: &path, headers, body: body.as_deref() };
                    let sample = loop {
                        let t = Instant::now();
                        let sample = match endpoint.send(&request).await {
                            Ok((answer, _)) => Sample {
                                latency: t.elapsed(),
                                outcome: answer.status.to_string(),
                                body: answer.body,
                            },
                            Err(_) => Sample { latency: t.elapsed(), outcome: "error".into(), body: vec![] },
                        };
                        let failed = sample.outcome == "error" || sample.outcome.starts_with('5');
                        if !failed || started.elapsed() + RETRY_EVERY > retry_for {
                            break sample;
                        }
                        tokio::time::sleep(RETRY_EVERY).await;
                    };
                    done.push((i, sample));
                }
            })
        })
        .collect();
    let mut samples: Vec<Option<Sample>> = (0..count).map(|_| None).collect();
    for worker in workers {
        match worker.await {
            Ok(done) => {
                for (i, sample) in done {
                    samples[i] = Some(sample);
                }
            }
            // Its requests count as missing; the report must say why.
            Err(e) => {
                tracing::error!(cause = %e, "a swarm worker failed; its requests are missing from the report")
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let server_cpu_seconds = match (cpu_before, server_pid.and_then(cpu_seconds)) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    (summarize(&samples, seconds, server_cpu_seconds), samples)
}

/// A phase's figures from its samples: rate, latency percentiles, outcomes.
fn summarize(samples: &[Option<Sample>], seconds: f64, server_cpu_seconds: Option<f64>) -> Phase {
    let count = samples.len();
    let mut latencies: Vec<f64> = samples.iter().flatten().map(|s| s.latency.as_secs_f64() * 1e3).collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let mut outcomes = BTreeMap::new();
    for s in samples.iter().flatten() {
        *outcomes.entry(s.outcome.clone()).or_insert(0) += 1;
    }
    Phase {
        requests: count,
        seconds,
        per_second: count as f64 / seconds.max(1e-9),
        p50_ms: pct(0.50),
        p90_ms: pct(0.90),
        p99_ms: pct(0.99),
        max_ms: latencies.last().copied().unwrap_or(0.0),
        outcomes,
        server_cpu_seconds,
    }
}

/// A node the swarm announced and the endpoint recorded: its id, its poll
/// secret, and the trust its answer carried (admitted at once).
type Enrolled = (String, String, Option<Trust>);

/// Runs a swarm: announcements, then polls; the figures of each phase.
/// `fleet_root_pem` and `tokens` are the files `config` names, read.
pub async fn run(
    config: &SwarmArgs,
    fleet_root_pem: &[u8],
    tokens: &[SecretString],
) -> Result<Report, SwarmError> {
    let endpoint = Endpoint::new(&config.addr, fleet_root_pem, b"")?;
    let poll_endpoint = match &config.poll_addr {
        Some(addr) => Endpoint::new(addr, fleet_root_pem, b"")?,
        None => endpoint.clone(),
    };
    if let Some(path) = config.only_get.clone() {
        let total_polls = config.nodes * config.polls;
        let (poll, _) =
            drive(&endpoint, total_polls, config.concurrency, config.server_pid, Duration::ZERO, move |_| {
                (path.clone(), vec![], None)
            })
            .await;
        return Ok(Report { poll: Some(poll), ..Default::default() });
    }
    let (mut report, enrolled) = announce_all(&endpoint, config, tokens).await?;
    if !enrolled.is_empty() && config.polls > 0 {
        poll_all(&poll_endpoint, config, enrolled, &mut report).await;
    }
    Ok(report)
}

/// Announces `config.nodes` nodes (each with its own CA, minted before
/// the clock starts: CA generation is the node's cost, not the
/// endpoint's), approving the pending ones when asked to.
async fn announce_all(
    endpoint: &Endpoint,
    config: &SwarmArgs,
    tokens: &[SecretString],
) -> Result<(Report, Vec<Enrolled>), SwarmError> {
    let bodies: Vec<(Vec<u8>, String)> = (0..config.nodes)
        .map(|i| {
            let name = format!("swarm-{i}");
            let ca = janus_core::pki::mint::mint_node_ca(&name)?;
            let secret = janus_core::pki::hex(&rand::random::<[u8; 32]>());
            let request = AnnounceRequest {
                protocol: PROTOCOL,
                name,
                address: format!("10.{}.{}.{}:9505", (i >> 16) & 255, (i >> 8) & 255, i & 255),
                ca_cert_pem: ca.cert_pem,
                registration_token: tokens.get(i).cloned().unwrap_or_default(),
                poll_secret: secret.clone().into(),
            };
            Ok((request.to_go_json(), secret))
        })
        .collect::<Result<_, SwarmError>>()?;
    let bodies = Arc::new(bodies);
    let for_announce = bodies.clone();
    let (announce, samples) =
        drive(endpoint, config.nodes, config.concurrency, config.server_pid, Duration::ZERO, move |i| {
            (
                "/register".into(),
                vec![("Content-Type", "application/json".into())],
                Some(for_announce[i].0.clone()),
            )
        })
        .await;
    let mut enrolled = Vec::new();
    let mut admitted_in_answer = 0;
    // Approvals go through the store, as `nodes approve` makes them
    // (durably, audited as a command by the user `janus-swarm`), not around it.
    let approver = match &config.approve_in {
        Some(state) => Some(janus_store::Store::open_existing(state).map_err(SwarmError::approving(state))?),
        None => None,
    };
    for (i, sample) in samples.into_iter().enumerate() {
        let Some(answer) = sample.and_then(|s| serde_json::from_slice::<AnnounceAnswer>(&s.body).ok()) else {
            continue;
        };
        admitted_in_answer += usize::from(answer.admitted);
        if let Some(store) = &approver
            && !answer.admitted
            && let Some(id) = janus_store::NodeId::parse(&answer.id)
        {
            use janus_store::{Admitted, DecidedBy};
            store
                .admit(Admitted::new(id, DecidedBy::Command, Some("janus-swarm".into())))
                .map_err(SwarmError::approving(store.dir()))?;
        }
        enrolled.push((answer.id, bodies[i].1.clone(), answer.trust));
    }
    Ok((Report { announce: Some(announce), admitted_in_answer, ..Default::default() }, enrolled))
}

/// Polls each enrolled node `config.polls` times. A node admitted in its
/// answer must be handed the same trust when it polls: those never handed
/// it are counted in `report`, by their last answer (samples are in order).
async fn poll_all(endpoint: &Endpoint, config: &SwarmArgs, enrolled: Vec<Enrolled>, report: &mut Report) {
    let enrolled = Arc::new(enrolled);
    let count = enrolled.len() * config.polls;
    let for_poll = enrolled.clone();
    let (poll, samples) =
        drive(endpoint, count, config.concurrency, config.server_pid, config.poll_retry_for, move |i| {
            let (id, secret, _) = &for_poll[i % for_poll.len()];
            (format!("/register/{id}"), vec![("Authorization", format!("Bearer {secret}"))], None)
        })
        .await;
    let mut trusted = vec![false; enrolled.len()];
    let mut last = vec!["missing"; enrolled.len()];
    for (i, sample) in samples.iter().enumerate() {
        let node = i % enrolled.len();
        let (_, _, in_answer) = &enrolled[node];
        let polled = sample.as_ref().filter(|s| s.outcome == "200");
        let polled = polled.and_then(|s| serde_json::from_slice::<Trust>(&s.body).ok());
        trusted[node] |= polled.is_some_and(|t| in_answer.as_ref() == Some(&t));
        last[node] = match sample.as_ref().map(|s| s.outcome.as_str()) {
            Some("200") => "200-other-trust",
            Some(outcome) => outcome,
            None => "missing",
        };
    }
    for (((id, _, in_answer), trusted), outcome) in enrolled.iter().zip(&trusted).zip(last) {
        if in_answer.is_some() && !*trusted {
            report.admitted_untrusted_in_poll += 1;
            *report.untrusted_poll_outcomes.entry(outcome.into()).or_default() += 1;
            if report.untrusted_ids.len() < 10 {
                report.untrusted_ids.push(id.clone());
            }
        }
    }
    report.poll = Some(poll);
}

/// The `janus-swarm` command: the report as text.
pub async fn run_command(args: &SwarmArgs) -> Result<String, SwarmError> {
    let fleet_root_pem = std::fs::read(&args.fleet_root).map_err(SwarmError::file(&args.fleet_root))?;
    let tokens: Vec<SecretString> = match &args.tokens {
        Some(path) => std::fs::read_to_string(path)
            .map_err(SwarmError::file(path))?
            .split_whitespace()
            .map(SecretString::from)
            .collect(),
        None => vec![],
    };
    let report = run(args, &fleet_root_pem, &tokens).await?;
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&report).expect("plain data serialises");
        janus_core::durable::write_atomic(path, &json, 0o644).map_err(SwarmError::file(path))?;
    }
    Ok(report.text())
}
