//! Value parsers for command-line arguments (clap `value_parser`s): a bad value
//! is refused by clap as a usage error (exit 2, code `usage`) before anything is
//! sent, the same for every command. A parser that only validates returns the
//! text unchanged, so what goes on the wire stays what the daemon parses.
//! This module imports nothing of the CLI.

use std::time::Duration;

/// A duration as the daemon takes it (`30s`, `15m`, `4h`, `7d`, `2w`, plain
/// seconds): checked here with the library's parser, returned as written.
pub fn duration(s: &str) -> Result<String, String> {
    treefork::lifecycle::parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// A TTL: a [`duration`], or `never` (also `off`, `none`): no limit.
pub fn ttl(s: &str) -> Result<String, String> {
    match s.trim() {
        "never" | "off" | "none" => Ok(s.to_string()),
        _ => duration(s).map_err(|e| format!("{e}, or never")),
    }
}

/// A point in time: unix seconds, or an age (a [`duration`] ago).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Unix seconds.
    At(i64),
    /// This many seconds before now.
    Ago(u64),
}

impl Since {
    /// Unix seconds, given the time now.
    pub fn at(self, now: i64) -> i64 {
        match self {
            Since::At(t) => t,
            Since::Ago(d) => now.saturating_sub(i64::try_from(d).unwrap_or(i64::MAX)),
        }
    }
}

/// A [`Since`]: unix seconds, or an age like `30m`, `2h`, `1d`.
pub fn since(s: &str) -> Result<Since, String> {
    if let Ok(n) = s.trim().parse::<i64>() {
        return Ok(Since::At(n));
    }
    treefork::lifecycle::parse_duration(s)
        .map(Since::Ago)
        .map_err(|_| format!("expected unix seconds or an age like 30m, 2h, 1d, not {s:?}"))
}

/// A positive number of seconds (fractions allowed), below 10⁹.
pub fn seconds(s: &str) -> Result<Duration, String> {
    let bad = || format!("expected a positive number of seconds, not {s:?}");
    let n: f64 = s.trim().parse().map_err(|_| bad())?;
    if !(n.is_finite() && n > 0.0 && n < 1e9) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(n))
}

/// A count of at least 1.
pub fn count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number of at least 1, not {s:?}")),
    }
}

/// `K=V` (a key that is not empty), returned as written.
pub fn key_value(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.is_empty() => Ok(s.to_string()),
        _ => Err(format!("expected KEY=VALUE, not {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ttls() {
        assert_eq!(duration("4h").unwrap(), "4h");
        assert_eq!(duration("90").unwrap(), "90");
        for bad in ["5x", "", "h", "-3m"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        assert_eq!(ttl("never").unwrap(), "never");
        assert_eq!(ttl("7d").unwrap(), "7d");
        assert!(ttl("5x").unwrap_err().contains("never"));
    }

    #[test]
    fn since_is_seconds_or_an_age() {
        assert_eq!(since("1700000000").unwrap(), Since::At(1_700_000_000));
        assert_eq!(since("30m").unwrap().at(10_000), 10_000 - 1800);
        assert_eq!(since("2d").unwrap().at(1_000_000), 1_000_000 - 172_800);
        for bad in ["5x", "5y", "m", ""] {
            assert!(since(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds_are_positive_and_finite() {
        assert_eq!(seconds("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["0", "-1", "nan", "inf", "1e10", "x"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_start_at_one() {
        assert_eq!(count("3").unwrap(), 3);
        for bad in ["0", "-1", "x", ""] {
            assert!(count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_values_need_a_key_and_an_equals_sign() {
        assert_eq!(key_value("A=1").unwrap(), "A=1");
        assert_eq!(key_value("A=").unwrap(), "A=");
        for bad in ["A", "=1", ""] {
            assert!(key_value(bad).is_err(), "{bad}");
        }
    }
}
