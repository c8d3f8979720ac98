//! Roles and limits: who may run which op ([`Role::allows`], the one place ops are
//! classified as user-only or also allowed to agents), who a mount is made for
//! ([`MountFor`]), agent sockets requested with a mount or fork, and the
//! per-connection limits ([`RateLimit`], [`MAX_CONNECTIONS`]).

use std::path::PathBuf;
use std::time::Instant;

use super::protocol::Op;
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

impl Role {
    /// Whether this role may run `op`. The one place roles are decided: an
    /// exhaustive match over every op and every field (no `_`/`..`), so a new op or
    /// a new argument does not compile until it is classified here.
    pub fn allows(&self, op: &Op) -> bool {
        let agent = match op {
            Op::Ping
            | Op::Status
            | Op::Branches
            | Op::Checkpoint {
                message: _,
                trigger: _,
                meta: _,
            }
            | Op::Log {
                limit: _,
                from: _,
                path: _,
            }
            // Reads stored states only (never follows links out of the tree).
            | Op::Show { target: _, path: _ }
            | Op::Diff {
                a: _,
                b: _,
                mode: _,
                // Streaming changes how the answer is framed, not what it reveals.
                stream: _,
            } => true,
            // Creates a new name only: an existing name is refused (`conflict`)
            // for every role, so no op moves or overwrites a branch.
            Op::Branch { name: _, from: _ } => true,
            // Both save pending changes as an `auto/before-...` checkpoint first.
            // `-b` creates a new name only (an existing one is a conflict).
            Op::Checkout {
                target: _,
                create: _,
            } => true,
            // Additive: they append operations and save pending changes first;
            // whatever they move back is still named by the log.
            Op::Undo {
                what: _,
                if_last: _,
            }
            | Op::Redo {
                what: _,
                if_last: _,
            }
            | Op::OpRestore { seq: _, what: _ }
            | Op::OpLog { limit: _ } => true,
            // Reading the activity and adding notes to it.
            Op::Timeline {
                since: _,
                actor: _,
                limit: _,
            }
            | Op::Note { text: _, kind: _ } => true,
            // Drops a name: the user's.
            Op::BranchRename { old: _, new: _ } => false,
            // Widens what an agent socket sees: the user's.
            Op::BranchShare { name: _, with: _ } => false,
            Op::Restore {
                target: _,
                paths: _,
                dry_run: _,
            } => true,
            // A fork adds a session; granting sockets to uids stays with the user.
            Op::Fork {
                name: _,
                from: _,
                mountpoint: _,
                agent_socket,
                agent_uid,
                // Reads the session's own messages and workspaces.
                from_message: _,
            } => agent_socket.is_none() && agent_uid.is_none(),
            // The conversation log: appending adds records; a rewind hides
            // messages (never deletes them), saves pending changes first and is
            // an undoable operation; the metadata merge changes counters only.
            Op::MessageAppend {
                role: _,
                content: _,
                tool_calls: _,
                tool_call_id: _,
                meta: _,
                id: _,
                stream: _,
            }
            | Op::MessageFlush
            | Op::Messages {
                stream: _,
                limit: _,
                upto: _,
                after: _,
            }
            | Op::Rewind {
                to: _,
                what: _,
                dry_run: _,
            }
            | Op::SessionMetaUpdate {
                model: _,
                add_turns: _,
                add_cost: _,
                exit_reason: _,
            } => true,
            // Reads any session of the store and mounts a new one: the user's.
            Op::Continue {
                project: _,
                name: _,
                mountpoint: _,
            } => false,
            // Recording a command adds a checkpoint and an operation; reading the
            // history reveals nothing the log does not.
            Op::ExecBegin {
                argv: _,
                cwd: _,
            }
            | Op::ExecOutput {
                exec: _,
                stream: _,
                data: _,
            }
            | Op::ExecEnd {
                exec: _,
                exit_code: _,
                signal: _,
                error: _,
                pid: _,
                duration_ms: _,
                stdout_truncated: _,
                stderr_truncated: _,
                timed_out: _,
            }
            | Op::History { limit: _ }
            | Op::HistoryShow { exec: _ } => true,
            // Showing is fine; changing settings is the user's.
            Op::Config { set } => set.is_none(),
            // The store's quotas bound what agents can make the daemon hold:
            // an agent may read them, only the user changes them.
            Op::Limits { set } => set.is_none(),
            // An experiment adds forks of the agent's own session (names and
            // mountpoints chosen by the daemon, the agent ownership rule applied)
            // and one operation; its end removes only the forks that experiment
            // made, after recording their results; an adopt saves pending changes
            // first and is recorded (undoable). The daemon runs no command.
            Op::ExperimentBegin {
                from: _,
                runs: _,
                cwd: _,
            }
            | Op::ExperimentEnd {
                id: _,
                results: _,
                rank_by: _,
                keep: _,
                abort: _,
            }
            | Op::ExperimentShow { id: _ }
            | Op::ExperimentAdopt {
                id: _,
                run: _,
                winner: _,
            } => true,
            // Its own session only: the daemon refuses (`forbidden`) a name other
            // than the session a bound socket serves.
            Op::SessionShow { name: _ } => true,
            // Lifecycle changes (eviction policy, discard, evicting) are the user's.
            Op::SessionExtend {
                name: _,
                ttl_idle: _,
                ttl_absolute: _,
                evict_to: _,
            }
            | Op::SessionDiscard { name: _ }
            | Op::SessionSweep => false,
            // Writes to the user's durable git repository (commits, branches,
            // index and work tree): the user's decision, never the agent's.
            Op::Promote {
                paths: _,
                strategy: _,
                message: _,
                dry_run: _,
                branch: _,
                onto_head: _,
                allow_large: _,
            } => false,
            // Remotes: configuring them reaches the network with the daemon's
            // credentials and changes store-wide state: the user's.
            Op::RemoteAdd {
                name: _,
                url: _,
                endpoint: _,
                region: _,
                single_writer: _,
            }
            | Op::RemoteList
            | Op::RemoteRm { name: _ } => false,
            // Trusting a pulled origin lets promote write to that repository.
            Op::RemoteTrust { name: _ } => false,
            // Pushing sends the store's history out with the daemon's
            // credentials: the user's.
            Op::Push {
                remote: _,
                refs: _,
                session: _,
                force: _,
            } => false,
            // Pulling and hydrating reach the network with the daemon's
            // credentials and move store-wide refs: the user's.
            Op::Pull {
                remote: _,
                refs: _,
            }
            | Op::Hydrate {
                session: _,
                remote: _,
            } => false,
            // Remote gc deletes history on the remote with the daemon's
            // credentials: the user's.
            Op::RemoteGc {
                remote: _,
                dry_run: _,
                grace_secs: _,
            } => false,
            // Trimming drops local copies store-wide (they come back over the
            // network with the daemon's credentials): the user's.
            Op::StoreTrim {
                older_than: _,
                keep_sessions: _,
                dry_run: _,
            } => false,
            // Store-wide maintenance and anything that drops history.
            Op::BranchDelete { name: _ }
            | Op::SessionRm { name: _ }
            | Op::Gc { dry_run: _ }
            | Op::Fsck { repair: _ }
            | Op::Umount { mountpoint: _ }
            | Op::Sessions
            | Op::Shutdown
            | Op::Mount {
                session: _,
                mountpoint: _,
                from: _,
                agent_socket: _,
                agent_uid: _,
                task: _,
                ttl_idle: _,
                ttl_absolute: _,
                until_promote: _,
                manual: _,
                from_remote: _,
                evict_to: _,
            } => false,
        };
        match self {
            Role::User => true,
            Role::Agent => agent,
        }
    }

    /// The refusal of `op` for this role.
    pub fn refusal(&self, op: &Op) -> Error {
        let what = match op {
            Op::Config { .. } => "config with \"set\"".to_string(),
            Op::Limits { .. } => "limits with \"set\"".to_string(),
            Op::Fork { .. } => "fork with agent_socket/agent_uid".to_string(),
            op => op.name(),
        };
        Error::Forbidden(format!(
            "{what} is not allowed on an agent socket (agent role: additive operations only)"
        ))
    }
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
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        if self.tokens >= 1.0 {
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
