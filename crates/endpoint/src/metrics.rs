//! Prometheus metrics (prometheus-client, the Prometheus project's own Rust
//! client), served on a separate plain-HTTP listener that is off by default.
//!
//! Invariants: labels are route templates and outcomes, never ids, names or
//! anything a client chose, so the number of series is bounded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `announce`, `poll`, `healthz`, `other`.
    pub route: &'static str,
    /// The answer's status.
    pub status: u16,
}

/// Labels of the latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// `announce`, `poll`, `healthz`, `other`.
    pub route: &'static str,
}

/// Labels of `build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BuildLabels {
    /// The crate's version (`--version`).
    pub version: &'static str,
    /// The crypto provider it was built with.
    pub crypto: &'static str,
    /// The oldest toolchain that builds it (Cargo.toml's `rust-version`).
    pub rust_version: &'static str,
}

/// Labels of the admissions counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HowLabels {
    /// `token`, `policy`, `file`, `cli`, `api`, `console`.
    pub how: &'static str,
}

/// Labels of the outcome counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// What came of it.
    pub outcome: &'static str,
}

type LatencyFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// Every metric `serve` exports.
pub struct Metrics {
    registry: Registry,
    /// Requests by route and status.
    pub requests: Family<RequestLabels, Counter>,
    /// Request latency by route.
    pub latency: LatencyFamily,
    /// Announcements by outcome.
    pub announcements: Family<OutcomeLabels, Counter>,
    /// Polls by outcome.
    pub polls: Family<OutcomeLabels, Counter>,
    /// Connections closed before a request, by reason.
    pub connection_failures: Family<OutcomeLabels, Counter>,
    /// Pending records, as last counted.
    pub pending: Gauge,
    /// Nodes left pending because the admission queue was full.
    pub admission_queue_full: Counter,
    /// When the served certificate expires (Unix time).
    pub cert_not_after: Gauge,
    /// The served bundle's version.
    pub bundle_version: Gauge,
    /// How many reasons the last health check gave for being degraded.
    pub degraded: Gauge,
    /// 1 when the last health check found that no node can be served.
    pub unavailable: Gauge,
    /// Nodes that got the trust from this process, by how they were admitted.
    pub admissions: Family<HowLabels, Counter>,
    /// The `process_*` series, read at each scrape.
    process: super::process_metrics::ProcessMetrics,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms to about 4 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        let process = super::process_metrics::ProcessMetrics::register(&mut root);
        let registry = root.sub_registry_with_prefix("janus_registration");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: LatencyFamily = Family::new_with_constructor(latency_histogram);
        let announcements = Family::<OutcomeLabels, Counter>::default();
        let polls = Family::<OutcomeLabels, Counter>::default();
        let connection_failures = Family::<OutcomeLabels, Counter>::default();
        let (pending, cert_not_after, bundle_version) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register("requests", "HTTP requests by route and status", requests.clone());
        registry.register("request_duration_seconds", "Time to answer a request, by route", latency.clone());
        registry.register(
            "announcements",
            "Announcements by outcome: pending, admitted_by_token, or refused_<reason>",
            announcements.clone(),
        );
        registry.register("polls", "Polls by outcome: pending, admitted, unknown", polls.clone());
        registry.register(
            "connection_failures",
            "Connections that never carried a request: tls (handshake failed or timed out), connection_cap, source_cap (per-source cap), emfile (out of file descriptors at accept), accept",
            connection_failures.clone(),
        );
        registry.register("pending_records", "Pending node records (as last counted)", pending.clone());
        let admission_queue_full = Counter::default();
        registry.register(
            "admission_queue_full",
            "Pending announcements the admission command was not asked about: its queue was full",
            admission_queue_full.clone(),
        );
        registry.register(
            "certificate_not_after_seconds",
            "Expiry of the served certificate, Unix seconds",
            cert_not_after.clone(),
        );
        registry.register("bundle_version", "Version of the served fleet bundle", bundle_version.clone());
        let (degraded, unavailable) = (Gauge::default(), Gauge::default());
        registry.register(
            "health_degraded_reasons",
            "Reasons the last /healthz gave for serving some nodes but not all (0: none)",
            degraded.clone(),
        );
        registry.register(
            "health_unavailable",
            "1 when the last /healthz found that no node can be served (503)",
            unavailable.clone(),
        );
        register_build_info(registry);
        let admissions = Family::<HowLabels, Counter>::default();
        registry.register(
            "admissions",
            "Nodes that got the trust from this process, by how they were admitted: token (in the announcement's answer); policy, file, cli, api, console (at the first poll after the approval)",
            admissions.clone(),
        );
        Metrics {
            registry: root,
            admissions,
            process,
            requests,
            latency,
            announcements,
            polls,
            connection_failures,
            pending,
            admission_queue_full,
            cert_not_after,
            bundle_version,
            degraded,
            unavailable,
        }
    }
}

/// `build_info{version,crypto,rust_version} 1`: what this build is.
fn register_build_info(registry: &mut Registry) {
    let build = Family::<BuildLabels, Gauge>::default();
    registry.register("build_info", "The build serving: always 1, its version in the labels", build.clone());
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            crypto: if cfg!(feature = "aws-lc-rs") { "aws-lc-rs" } else { "ring" },
            rust_version: env!("CARGO_PKG_RUST_VERSION"),
        })
        .set(1);
}

impl Metrics {
    /// Counts one `outcome` in `family`.
    pub fn outcome(family: &Family<OutcomeLabels, Counter>, outcome: &'static str) {
        family.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts one node that got the trust from this process. A token's
    /// node is counted at its answer, so a poll of it later is not.
    pub fn admitted(&self, how: janus_store::AdmittedHow, at_answer: bool) {
        if at_answer || how != janus_store::AdmittedHow::Token {
            self.admissions.get_or_create(&HowLabels { how: how.label() }).inc();
        }
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        self.process.refresh();
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The route template a path belongs to, for labels.
pub(crate) fn route_of(matched: Option<&str>) -> &'static str {
    match matched {
        Some("/register") => "/register",
        Some("/register/{id}") => "/register/{id}",
        Some("/healthz") => "/healthz",
        _ => "other",
    }
}
