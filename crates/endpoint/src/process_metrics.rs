//! The standard `process_*` series (as the Prometheus client libraries of
//! Go, Python and Java export them), read from `/proc/self` and
//! `getrlimit` at each scrape: CPU seconds, resident and virtual memory,
//! open and maximum file descriptors, threads, and the start time.
//!
//! Invariants: a value that cannot be read is left as last read (never a
//! guess, never a panic); nothing here is read outside a scrape.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Clock ticks a second in `/proc/<pid>/stat` (USER_HZ: 100 on every Linux
/// architecture's user-space ABI).
const USER_HZ: f64 = 100.0;

/// The process series, registered unprefixed.
pub(crate) struct ProcessMetrics {
    cpu_seconds: Counter<f64, AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    threads: Gauge,
    start_time: Gauge<f64, AtomicU64>,
}

impl ProcessMetrics {
    /// Registers the series in `registry` (without its prefix).
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = ProcessMetrics {
            cpu_seconds: Counter::default(),
            resident_bytes: Gauge::default(),
            virtual_bytes: Gauge::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
            threads: Gauge::default(),
            start_time: Gauge::default(),
        };
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            metrics.cpu_seconds.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            metrics.resident_bytes.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            metrics.virtual_bytes.clone(),
        );
        registry.register("process_open_fds", "Number of open file descriptors", metrics.open_fds.clone());
        registry.register(
            "process_max_fds",
            "Maximum number of open file descriptors",
            metrics.max_fds.clone(),
        );
        registry.register("process_threads", "Number of OS threads in the process", metrics.threads.clone());
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            metrics.start_time.clone(),
        );
        metrics.start_time.set(start_time().unwrap_or_else(|| janus_core::clock::now_unix() as f64));
        metrics
    }

    /// Reads the values now (at a scrape).
    pub(crate) fn refresh(&self) {
        if let Some(cpu) = stat_fields().and_then(|f| {
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
            Some((ticks(11)? + ticks(12)?) / USER_HZ)
        }) {
            let counted = self.cpu_seconds.get();
            if cpu > counted {
                self.cpu_seconds.inc_by(cpu - counted);
            }
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse::<i64>().ok()))
            };
            if let Some(kb) = field("VmRSS:") {
                self.resident_bytes.set(kb * 1024);
            }
            if let Some(kb) = field("VmSize:") {
                self.virtual_bytes.set(kb * 1024);
            }
            if let Some(n) = field("Threads:") {
                self.threads.set(n);
            }
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            // The listing's own descriptor is among them.
            self.open_fds.set(entries.count().saturating_sub(1) as i64);
        }
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        if let Some(max) = limit.current {
            self.max_fds.set(i64::try_from(max).unwrap_or(i64::MAX));
        }
    }
}

/// The fields of `/proc/self/stat` after the command's name (field 3 on):
/// the name, in parentheses, may hold spaces, so they follow its last ')'.
fn stat_fields() -> Option<Vec<String>> {
    // fold: a process series that cannot be read keeps its last value (not a state read).
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    Some(stat.rsplit_once(')')?.1.split_whitespace().map(String::from).collect())
}

/// When this process started (Unix seconds): its start in clock ticks since
/// boot (`/proc/self/stat`, field 22) after the boot time (`/proc/stat`, btime).
fn start_time() -> Option<f64> {
    // fold: without /proc the start time is when the metrics were made (not a state read).
    let ticks: f64 = stat_fields()?.get(19)?.parse().ok()?;
    // fold: as above.
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot = stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim();
    // fold: as above.
    let boot: f64 = boot.parse().ok()?;
    Some(boot + ticks / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_series_say_this_process() {
        let mut registry = Registry::default();
        let metrics = ProcessMetrics::register(&mut registry);
        metrics.refresh();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for series in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_threads ",
            "process_start_time_seconds ",
        ] {
            assert!(text.contains(series), "{series} in {text}");
        }
        assert!(
            metrics.resident_bytes.get() > 0 && metrics.threads.get() >= 1 && metrics.open_fds.get() >= 3
        );
        let started = metrics.start_time.get();
        let now = janus_core::clock::now_unix() as f64;
        assert!(started <= now + 1.0 && started > now - 86_400.0 * 365.0, "{started} vs {now}");
    }
}
