//! Roles and limits: the roles (each verb's file decides what an agent may send:
//! `crate::control::Verb::agent_may`), who a mount is made for
//! ([`MountFor`]), agent sockets requested with a mount or fork, and the
//! per-connection limits ([`RateLimit`], [`MAX_CONNECTIONS`]).

use std::path::PathBuf;
use std::time::Instant;

use crate::error::{Error, Result};

/// Who is calling, decided by the socket a request arrives on.
///
/// The store socket and each session's own socket serve the **user** (the mounting
/// user and root): every op. A session's optional agent socket serves the **agent**
/// role, which may only add history, never drop it ("nothing is ever lost"): it can
/// take checkpoints, create branches and forks, and check out or restore (both save
/// pending changes as an `auto/...` checkpoint first), but not delete branches,
/// unmount, mount, shut down, list the store's sessions, or change settings. It
/// also sees less: only its session's lineage and the branches given to it
/// (`crate::visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Full rights.
    User,
    /// Additive operations only.
    Agent,
}

/// Requests a connection may send at once before it is rate limited.
pub const RATE_BURST: f64 = 200.0;
/// Sustained requests per second per connection (the bucket's refill rate).
pub const RATE_PER_SEC: f64 = 1000.0;
/// Connections served at once per socket; the next one gets `busy` and is closed.
pub const MAX_CONNECTIONS: usize = 64;

/// A token bucket: `burst` requests at once, refilled at `per_sec`.
#[derive(Debug, Clone)]
pub struct RateLimit {
    tokens: f64,
    burst: f64,
    per_sec: f64,
    pub(super) last: Instant,
}

impl RateLimit {
    /// A full bucket.
    pub fn new(burst: f64, per_sec: f64) -> RateLimit {
        RateLimit {
            tokens: burst,
            burst,
            per_sec,
            last: Instant::now(),
        }
    }

    /// Take one token at `now`; false when the bucket is empty.
    pub fn allow_at(&mut self, now: Instant) -> bool {
        if self.ready_at(now) {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Take one token now.
    pub fn allow(&mut self) -> bool {
        self.allow_at(Instant::now())
    }

    /// Whether a token is there at `now` (none is taken).
    pub fn ready_at(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        self.tokens >= 1.0
    }
}

/// Who a mount is made for: decides which directories may be mounted over and the
/// mount flags (see `daemon::mountpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountFor {
    /// The mounting user (the daemon's uid) or root: any directory they name.
    User,
    /// An agent (any peer of an agent socket): only a directory the socket's
    /// agent uid owns; mounted `nosuid,nodev`.
    Agent {
        /// The uid the agent socket was made for.
        uid: u32,
        /// The agent's gid (owner group of directories created for it).
        gid: u32,
    },
}

impl MountFor {
    /// For a request from `peer` (uid, gid) on a socket of `role` made for
    /// `agent_uid` (its `--agent-uid`, agent sockets only) and served by a daemon
    /// running as `me`. On an agent socket the agent rule applies whatever the
    /// peer's uid (a container's root is an agent like any other): the agent is
    /// the uid the socket was made for, else the daemon's own uid (a socket only
    /// it and root may use). The gid (owner group of directories created for the
    /// agent) is the peer's when the peer is that uid, else the uid's number.
    pub fn of(role: Role, peer: (u32, u32), agent_uid: Option<u32>, me: u32) -> MountFor {
        match role {
            Role::Agent => {
                let uid = agent_uid.unwrap_or(me);
                let gid = if peer.0 == uid { peer.1 } else { uid };
                MountFor::Agent { uid, gid }
            }
            Role::User => MountFor::User,
        }
    }
}

/// An agent-role socket requested with a mount or fork.
#[derive(Debug, Clone)]
pub struct AgentSocket {
    /// Absolute path of the socket file.
    pub path: PathBuf,
    /// A uid allowed besides the daemon's and root; the socket file is chowned to it.
    pub uid: Option<u32>,
}

impl AgentSocket {
    /// From the `agent_socket`/`agent_uid` fields of a request.
    pub fn from_request(path: Option<PathBuf>, uid: Option<u32>) -> Result<Option<Self>> {
        match (path, uid) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(Error::Invalid(
                "agent_uid needs agent_socket (the socket it may use)".into(),
            )),
            (Some(path), uid) if path.is_absolute() => Ok(Some(AgentSocket { path, uid })),
            (Some(path), _) => Err(Error::Invalid(format!(
                "agent socket {} must be an absolute path",
                path.display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_rule_applies_to_every_peer_of_an_agent_socket() {
        // The agent uid itself, root (a container's root) and the daemon's uid.
        for peer in [(65534, 65534), (0, 0), (1000, 1000)] {
            let who = MountFor::of(Role::Agent, peer, Some(65534), 1000);
            assert!(
                matches!(who, MountFor::Agent { uid: 65534, .. }),
                "{peer:?}: {who:?}"
            );
        }
        assert_eq!(
            MountFor::of(Role::Agent, (65534, 42), Some(65534), 0),
            MountFor::Agent {
                uid: 65534,
                gid: 42
            }
        );
        // A socket without an agent uid serves the daemon's uid (and root).
        assert_eq!(
            MountFor::of(Role::Agent, (0, 0), None, 1000),
            MountFor::Agent {
                uid: 1000,
                gid: 1000
            }
        );
        assert_eq!(
            MountFor::of(Role::User, (0, 0), Some(65534), 0),
            MountFor::User
        );
    }
}
