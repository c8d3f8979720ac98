//! Control protocol: versioned newline-delimited JSON over Unix sockets.
//!
//! Owns: [`protocol`] (parsing, framing, versions), [`verb`] (what the protocol
//! knows of a verb: the [`Verb`] trait its request type implements), [`roles`]
//! (roles, rate bound, connection cap, who a mount is for), [`registry`] (runtime
//! directory, socket paths, mount records) and [`client`] (the clients' side: the
//! connection, and [`send`], the one typed call of the CLI and the MCP server).
//! Everything is re-exported here, so callers write `control::parse`,
//! `control::find_mount`, ... The verbs themselves are in `crate::verbs`. See
//! docs/protocol.md.

pub mod client;
pub mod protocol;
pub mod registry;
pub mod roles;
pub mod verb;

mod b64;
pub use b64::{b64_decode, b64_encode};
pub use client::{Answered, Client, SendError, send, send_with};
pub use protocol::*;
pub use registry::*;
pub use roles::*;
pub use verb::{Agent, Kind, Verb, is_false};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn rate_limit_bucket() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(3.0, 10.0);
        r.last = t0;
        assert!((0..3).all(|_| r.allow_at(t0)));
        assert!(!r.allow_at(t0));
        // 100 ms refills one token; never more than the burst.
        assert!(r.allow_at(t0 + Duration::from_millis(100)));
        assert!(!r.allow_at(t0 + Duration::from_millis(100)));
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| r.allow_at(later)).count(), 3);
    }
}
