//! A session's lifecycle: the **session info** record (what the session is for,
//! where it came from, its state and eviction policy, promote result, metrics;
//! changed and read through [`manage`]), the touched-file set ([`touched`]), the
//! retention pass of `gc` ([`retention`], [`autorefs`]), and running the real
//! `git` on the durable repository a session was imported from ([`git`]).
//!
//! Owns: the info record at `i/<session>` (JSON, [`INFO_VERSION`]), separate from
//! the session record (`s/`, rewritten at every flush) because it changes rarely
//! and by other writers (mount, sweeps, promote); duration syntax ([`parse_duration`]).
//!
//! Invariants: a session created by this version has an info record from its
//! first commit on; a session without one (older stores) reads as
//! [`SessionInfo::legacy`]. The record is versioned and open (`meta`), and every
//! field added later must have a default.

pub mod autorefs;
pub mod git;
pub mod manage;
pub mod retention;
pub mod touched;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

/// Key in a pulled session's info `meta`: `{"remote", "session", "origin",
/// "policy"}`, the remote's origin and policy, not used until trusted (written by
/// `remote::pull`, read by `ops::promote`, cleared by `remote trust`).
pub const REMOTE_ORIGIN: &str = "remote_origin";

/// Info record format version.
pub const INFO_VERSION: u32 = 1;

/// Where a session's state is in its life.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Being worked on (mounted or not).
    #[default]
    Active,
    /// Its result was promoted to the durable repository.
    Promoted,
    /// Given up by the user (unmounted; data reclaimable after retention).
    Discarded,
    /// Evicted by a sweep (checkpointed and unmounted; `mount` resumes it).
    Expired,
}

/// When a session is evicted.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
#[serde(default)]
pub struct Policy {
    /// Evict after this many seconds without access (`None`: never).
    pub idle_ttl_secs: Option<u64>,
    /// Evict this many seconds after creation (`None`: never).
    pub absolute_ttl_secs: Option<u64>,
    /// Evict once promoted.
    pub until_promote: bool,
    /// Never evict automatically (only `session discard` / `rm`).
    pub manual: bool,
    /// Push the session to this remote before evicting it (a push that fails
    /// keeps it mounted; the next sweep retries). `None`: evict locally only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_to: Option<String>,
}

/// Default idle TTL (seed 003): 4 hours.
pub const DEFAULT_IDLE_TTL_SECS: u64 = 4 * 3600;

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            idle_ttl_secs: Some(DEFAULT_IDLE_TTL_SECS),
            absolute_ttl_secs: None,
            until_promote: true,
            manual: false,
            evict_to: None,
        }
    }
}

/// The durable repository a session was imported from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct Origin {
    /// The directory imported (absolute, canonical).
    pub path: PathBuf,
    /// Whether it is the top of a git work tree.
    pub git: bool,
    /// The branch checked out there at import (`None`: detached HEAD or not git).
    #[serde(default)]
    pub branch: Option<String>,
    /// The baseline: the commit HEAD named at import (`None`: no commit, not git).
    #[serde(default)]
    pub baseline: Option<String>,
    /// The root of the imported tree (hex): the session's state at the baseline.
    pub baseline_root: String,
    /// The commits this session's promotes made on the durable branch (`commit`
    /// strategy), oldest first, at most [`MAX_PROMOTED`]: a path whose newest
    /// change since the baseline is one of them is the session's own, not drift.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub promoted: Vec<String>,
}

/// Most commits [`Origin::promoted`] remembers (the oldest are dropped).
pub const MAX_PROMOTED: usize = 4096;

/// The result of a promote.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct Promoted {
    /// `commit`, `branch` or `patch`.
    pub strategy: String,
    /// The commit made (commit and branch strategies).
    #[serde(default)]
    pub sha: Option<String>,
    /// The branch it is on.
    #[serde(default)]
    pub branch: Option<String>,
    /// Paths promoted.
    pub paths: Vec<String>,
    /// Unix seconds.
    pub time: i64,
    /// Whether it took in everything the session changed since its baseline
    /// (paths git ignores aside): only then does `until-promote` evict it.
    /// Records written before it was kept read as complete.
    #[serde(default = "yes")]
    pub complete: bool,
    /// The tree promoted (hex): a session whose tree differs from it changed
    /// since, and is not evicted by `until-promote`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

fn yes() -> bool {
    true
}

/// Why and when a session was evicted (or expired unmounted), and where it was
/// mounted: what `sessions`, `session show` and an `umount` of that path say.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct Evicted {
    /// The reason (e.g. `promoted (until-promote)`, `idle 3600s (ttl 3600s)`).
    pub why: String,
    /// Unix seconds.
    pub time: i64,
    /// Where it was mounted (absent when it was not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mountpoint: Option<String>,
    /// The checkpoint its state was saved as (hex), when one was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

/// Counters of what happened in a session (seed 000).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(default)]
pub struct Metrics {
    /// Commands recorded by `exec`.
    pub commands: u64,
    /// Their total wall time, ms.
    pub command_ms: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Forks made from it.
    pub forks: u64,
    /// Mounts after a crash (the previous daemon died with it mounted).
    pub recoveries: u64,
    /// Unix seconds of the last checkpoint.
    pub last_checkpoint: Option<i64>,
}

/// The agent socket a session is served on when mounted ([`SessionInfo::agent_socket`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
pub struct AgentBinding {
    /// Absolute path of the socket file.
    pub path: PathBuf,
    /// The uid allowed on it besides the daemon's and root, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

/// The session info record.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct SessionInfo {
    /// Format version.
    pub version: u32,
    /// A unique id (hex), stable across renames and hosts.
    pub id: String,
    /// Session name.
    pub session: String,
    /// What the session is for.
    #[serde(default)]
    pub task: Option<String>,
    /// Where it came from (`None`: created empty).
    #[serde(default)]
    pub origin: Option<Origin>,
    /// Lifecycle state.
    #[serde(default)]
    pub state: State,
    /// Unix seconds.
    pub created: i64,
    /// Unix seconds of the last change of this record.
    pub updated: i64,
    /// Unix seconds of the last access (written at most once a minute).
    pub last_access: i64,
    /// Eviction policy.
    #[serde(default)]
    pub policy: Policy,
    /// The last promote.
    #[serde(default)]
    pub promoted: Option<Promoted>,
    /// Counters.
    #[serde(default)]
    pub metrics: Metrics,
    /// Why the last sweep could not evict it (a busy mount), if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_blocked: Option<String>,
    /// The last eviction (or expiry), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted: Option<Evicted>,
    /// The agent socket it was last mounted with: a later mount that names none
    /// (a remount, a resume after eviction) serves it again. Written only by the
    /// daemon at a mount the user asked for (never by a request's data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<AgentBinding>,
    /// Open map for later features.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
}

impl SessionInfo {
    /// A new record for `session`, now.
    pub fn new(session: &str, origin: Option<Origin>) -> SessionInfo {
        let t = crate::clock::unix_secs();
        let id = blake3::hash(format!("{session}\0{}\0{}", t, std::process::id()).as_bytes())
            .to_hex()[..32]
            .to_string();
        SessionInfo {
            version: INFO_VERSION,
            id,
            session: session.into(),
            task: None,
            origin,
            state: State::Active,
            created: t,
            updated: t,
            last_access: t,
            policy: Policy::default(),
            promoted: None,
            metrics: Metrics::default(),
            evict_blocked: None,
            evicted: None,
            agent_socket: None,
            meta: Map::new(),
        }
    }

    /// The info of a new session forked from one with info `src`: same origin
    /// (baseline) and policy, a new id, active, fresh counters. `src` is `None` for a
    /// source without a record (an older session).
    pub fn forked(src: Option<&SessionInfo>, session: &str) -> SessionInfo {
        let mut i = SessionInfo::new(session, src.and_then(|s| s.origin.clone()));
        if let Some(s) = src {
            i.task = s.task.clone();
            i.policy = s.policy.clone();
        }
        i
    }

    /// What a session created before info records existed reads as: active,
    /// no origin, never evicted automatically (it asked for nothing).
    pub fn legacy(session: &str, created: i64) -> SessionInfo {
        let mut i = SessionInfo::new(session, None);
        i.created = created;
        i.policy = Policy {
            idle_ttl_secs: None,
            absolute_ttl_secs: None,
            until_promote: false,
            manual: true,
            evict_to: None,
        };
        i
    }

    /// Parse a stored record.
    pub fn decode(session: &str, bytes: &[u8]) -> Result<SessionInfo> {
        let i: SessionInfo = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(format!("session info {session}"), e.to_string()))?;
        if i.version != INFO_VERSION {
            return Err(Error::corrupt(
                format!("session info {session}"),
                format!("unsupported version {}", i.version),
            ));
        }
        Ok(i)
    }

    /// The op storing this record (stamping `updated`).
    pub fn op(&mut self) -> MetaOp {
        self.updated = crate::clock::unix_secs();
        MetaOp::Put(
            meta::info_key(&self.session),
            serde_json::to_vec(self).expect("info serializes"),
        )
    }
}

/// The info record of `session`, if it has one.
pub fn load(store: &dyn ObjectStore, session: &str) -> Result<Option<SessionInfo>> {
    store
        .meta_get(&meta::info_key(session))?
        .map(|v| SessionInfo::decode(session, &v))
        .transpose()
}

/// Every readable info record (an unreadable one is skipped: fsck reports it).
pub fn list(store: &dyn ObjectStore) -> Result<Vec<SessionInfo>> {
    let mut out = Vec::new();
    for (k, v) in store.meta_scan(meta::INFO_PREFIX)? {
        if let Some(name) = meta::info_session(&k)
            && let Ok(i) = SessionInfo::decode(name, &v)
        {
            out.push(i);
        }
    }
    Ok(out)
}

/// The ops deleting `session`'s info record, touched set, conversation log,
/// branch grants, lineage records and bisect search states (`session rm`).
pub fn delete_ops(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    let mut ops = vec![MetaOp::Delete(meta::info_key(session))];
    for (k, _) in store.meta_scan(&meta::bisect_session_prefix(session))? {
        ops.push(MetaOp::Delete(k));
    }
    ops.extend(touched::delete_ops(store, session)?);
    ops.extend(crate::messages::delete_ops(store, session)?);
    ops.extend(crate::visibility::delete_ops(store, session)?);
    Ok(ops)
}

/// A duration written `30s`, `15m`, `4h`, `7d` or `2w` (or plain seconds), in seconds.
pub fn parse_duration(s: &str) -> Result<u64> {
    let bad = || {
        Error::Invalid(format!(
            "bad duration {s:?}: write it like 30s, 15m, 4h, 7d or 2w"
        ))
    };
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// The origin of an import of `dir`: its git facts when it is the top of a git
/// work tree (branch, HEAD commit), else a plain directory.
pub fn detect_origin(dir: &Path, baseline_root: &str) -> Result<Origin> {
    let path = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let plain = Origin {
        path: path.clone(),
        git: false,
        branch: None,
        baseline: None,
        baseline_root: baseline_root.to_string(),
        promoted: Vec::new(),
    };
    let Some(top) = git::output(&path, &["rev-parse", "--show-toplevel"])? else {
        return Ok(plain);
    };
    if Path::new(top.trim()) != path {
        return Ok(plain);
    }
    let branch = git::output(&path, &["symbolic-ref", "-q", "--short", "HEAD"])?
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty());
    let baseline = git::output(&path, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty());
    Ok(Origin {
        git: true,
        branch,
        baseline,
        ..plain
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), 30);
        assert_eq!(parse_duration("4h").unwrap(), 14_400);
        assert_eq!(parse_duration("7d").unwrap(), 604_800);
        assert_eq!(parse_duration("2w").unwrap(), 1_209_600);
        assert_eq!(parse_duration("90").unwrap(), 90);
        for bad in ["", "h", "4x", "-1s", "4h30m", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn info_round_trips_and_legacy_never_evicts() {
        let mut i = SessionInfo::new("s", None);
        let MetaOp::Put(_, v) = i.op() else { panic!() };
        assert_eq!(SessionInfo::decode("s", &v).unwrap(), i);
        let l = SessionInfo::legacy("old", 5);
        assert!(l.policy.manual && l.policy.idle_ttl_secs.is_none());
        assert!(SessionInfo::decode("s", b"{\"version\":7}").is_err());
    }
}
