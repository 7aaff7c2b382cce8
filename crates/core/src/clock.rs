//! Time as this crate writes it: RFC 3339, UTC, whole seconds (the audit
//! trail: milliseconds); Go-style durations, written and read. The one
//! reader of the wall clock (`clippy.toml` disallows it elsewhere); elapsed
//! time is the runtime's `tokio::time::Instant`, which tests can pause.

use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Now, as Unix seconds.
pub fn now_unix() -> i64 {
    #[expect(clippy::disallowed_methods, reason = "the wall clock's one reader")]
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// How long ago `then` (a file's time) was on the wall clock; `None`
/// when it is in the future (a clock set back, another host's skew).
pub fn age_of(then: std::time::SystemTime) -> Option<Duration> {
    #[expect(clippy::disallowed_methods, reason = "the wall clock's one reader")]
    then.elapsed().ok()
}

/// Now, UTC.
pub fn now_utc() -> OffsetDateTime {
    #[expect(clippy::disallowed_methods, reason = "the wall clock's one reader")]
    OffsetDateTime::now_utc()
}

/// Now, RFC 3339, UTC, whole seconds.
pub fn now_rfc3339() -> String {
    format(now_utc())
}

/// RFC 3339 with milliseconds: the audit trail's time, fine enough to merge
/// the files of several writers in the order things happened.
pub fn now_rfc3339_millis() -> String {
    // Always three fraction digits: audit lines stay in columns.
    const FIXED: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    now_utc().format(FIXED).unwrap_or_default()
}

/// Unix time in milliseconds of an RFC 3339 time, for ordering.
pub fn rfc3339_millis(text: &str) -> Option<i128> {
    OffsetDateTime::parse(text, &Rfc3339).ok().map(|t| t.unix_timestamp_nanos() / 1_000_000)
}

/// How long ago an RFC 3339 time was, in whole seconds (0 for one to
/// come): the one age every listing and page shows, each in its units
/// ([`Age::short`], [`Age::words`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Age(pub u64);

impl Age {
    /// The age of `at`, if it is an RFC 3339 time.
    pub fn of(at: &str) -> Option<Age> {
        let millis = rfc3339_millis(at)?;
        let secs = (i128::from(now_unix()) * 1000 - millis).max(0) / 1000;
        Some(Age(u64::try_from(secs).unwrap_or(u64::MAX)))
    }

    /// `45s`, `12m`, `5h`, `3d`: a terminal's column.
    pub fn short(self) -> String {
        let (n, unit) = self.scaled();
        format!("{n}{}", &unit[..1])
    }

    /// `45 s`, `12 min`, `5 h`, `3 days`: a page's words.
    pub fn words(self) -> String {
        let (n, unit) = self.scaled();
        format!("{n} {unit}")
    }

    fn scaled(self) -> (u64, &'static str) {
        match self.0 {
            s if s < 120 => (s, "s"),
            s if s < 7200 => (s / 60, "min"),
            s if s < 172_800 => (s / 3600, "h"),
            s => (s / 86_400, "days"),
        }
    }
}

/// A Unix time as RFC 3339, UTC.
pub fn unix_to_rfc3339(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs).map(format).unwrap_or_else(|_| secs.to_string())
}

fn format(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(0).unwrap_or(t);
    t.format(&Rfc3339).unwrap_or_default()
}

/// A duration as Go prints one (`5s`, `2m0s`, `1h0m0s`, `250ms`): the node's log lines use it.
pub fn go_duration(d: Duration) -> String {
    let total = d.as_secs();
    if total == 0 {
        return if d.is_zero() { "0s".into() } else { format!("{}ms", d.as_millis()) };
    }
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let frac = d.subsec_millis();
    // Go prints the fraction without trailing zeros: 1.1s, 1.25s, 1.005s.
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

/// A duration `parse_duration` cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a duration such as 90s, 15m, 12h or 10d")]
pub struct BadDuration(pub String);

/// `250ms`, `90s`, `15m`, `12h`, `10d`, or plain seconds; one that does
/// not fit in a `u64` of seconds is refused, never wrapped.
pub fn parse_duration(s: &str) -> Result<Duration, BadDuration> {
    let s = s.trim();
    let bad = || BadDuration(s.to_string());
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    if unit == "ms" {
        return Ok(Duration::from_millis(n));
    }
    let scale: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(bad()),
    };
    n.checked_mul(scale).map(Duration::from_secs).ok_or_else(bad)
}

/// A time `parse_since` cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is neither a duration ago (such as 90s, 15m, 12h, 10d) nor an RFC 3339 time (such as 2026-12-01T08:00:00Z)"
)]
pub struct BadSince(pub String);

/// A point in time as Unix seconds, given as a duration ago (`15m`: fifteen
/// minutes before now) or as an RFC 3339 time.
pub fn parse_since(s: &str) -> Result<i64, BadSince> {
    let s = s.trim();
    if let Ok(ago) = parse_duration(s) {
        let ago = i64::try_from(ago.as_secs()).map_err(|_| BadSince(s.to_string()))?;
        return Ok(now_unix().saturating_sub(ago));
    }
    OffsetDateTime::parse(s, &Rfc3339).map(|t| t.unix_timestamp()).map_err(|_| BadSince(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_is_one_number_said_two_ways() {
        assert_eq!((Age(45).short(), Age(45).words()), ("45s".to_string(), "45 s".to_string()));
        assert_eq!((Age(720).short(), Age(720).words()), ("12m".to_string(), "12 min".to_string()));
        assert_eq!((Age(7200).short(), Age(3 * 86_400).words()), ("2h".to_string(), "3 days".to_string()));
        assert_eq!(Age::of("2999-01-01T00:00:00Z"), Some(Age(0)), "a time to come is no age");
        assert_eq!(Age::of("yesterday"), None);
    }

    #[test]
    fn since() {
        assert_eq!(parse_since("2026-12-01T08:00:00Z"), Ok(1_796_112_000));
        let ago = now_unix() - parse_since("1h").unwrap();
        assert!((3600..3610).contains(&ago), "{ago}");
        assert!(parse_since("yesterday").is_err() && parse_since("2026-13-01T00:00:00Z").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("10d"), Ok(Duration::from_secs(864000)));
        assert!(parse_duration("ten").is_err() && parse_duration("5y").is_err());
        assert!(parse_duration("213503982334602d").is_err(), "refused, never wrapped");
    }
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(5)), "5s");
        assert_eq!(go_duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_millis(1100)), "1.1s");
        assert_eq!(go_duration(Duration::from_millis(1250)), "1.25s");
        assert_eq!(go_duration(Duration::from_millis(61_005)), "1m1.005s");
    }
}
