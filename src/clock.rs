//! The wall clock: the one place the crate reads the system time.
//!
//! Owns: "now" as time since the Unix epoch, in the units records use (seconds
//! in info records and remote descriptors, milliseconds for session activity,
//! nanoseconds in operation, checkpoint and message records).
//!
//! Invariant: a clock set before 1970 reads as the epoch (zero), never an error
//! or a panic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the Unix epoch (zero for a clock set before it).
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Unix time now, in whole seconds.
pub fn unix_secs() -> i64 {
    since_epoch().as_secs() as i64
}

/// Unix time now, in milliseconds.
pub fn unix_ms() -> u64 {
    since_epoch().as_millis() as u64
}

/// Unix time now, in nanoseconds.
pub fn unix_ns() -> i128 {
    since_epoch().as_nanos() as i128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_agree() {
        let (s, ms, ns) = (unix_secs(), unix_ms(), unix_ns());
        let later = since_epoch();
        // Read in that order, each is at most the next, and all after 2020.
        assert!(s > 1_577_836_800, "{s}");
        assert!(s * 1000 <= ms as i64, "{s} s, {ms} ms");
        assert!(i128::from(ms) * 1_000_000 <= ns, "{ms} ms, {ns} ns");
        assert!(ns <= later.as_nanos() as i128);
    }
}
