//! The store's quotas: limits on what one session (and the agent serving it) can
//! make the daemon store or hold, kept in the store's metadata (`m/limits`) so
//! every daemon of the store applies the same ones.
//!
//! Owns: the [`Limits`] record (its defaults, [`load`], [`set`]), the `limits` op
//! ([`run`]: anyone may read them; only the user role may change them, see
//! `control::roles`) and the [`Error::Quota`] refusals ([`exceeded`]).
//!
//! Invariants:
//! - A missing record (every store created before quotas) reads as the defaults.
//! - A limit is checked by the op that grows what it bounds, before anything is
//!   written; a refusal changes nothing.
//! - Memory a request can make the daemon hold is bounded by constants of the
//!   code (pages of `messages`, see `crate::messages::PAGE_COUNT`), never by a
//!   setting: no limit here is the only thing between an agent and the daemon's
//!   memory. Two limits size the daemon's shared memory budgets instead
//!   (`unsealed_bytes`, `read_cache_bytes`, 0 = derived from the machine): they
//!   are applied at daemon start and at every change ([`apply_memory`]) and shown
//!   with what is in use ([`Memory`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

/// Record format version.
pub const LIMITS_VERSION: u32 = 1;
/// The longest chain of shared conversations a store may hold (`fork_depth`
/// can be set up to this; `crate::messages::share` reads no further).
pub const MAX_FORK_DEPTH: usize = 64;

/// The store's quotas. The defaults are generous for honest use (see
/// docs/design.md, "Quotas").
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Bytes of conversation records (messages and transcript) a session
    /// stores itself (a fork's inherited messages count for the session they
    /// were written in). Default 256 MiB.
    pub message_bytes: u64,
    /// Conversation records (messages and transcript) a session stores
    /// itself. Default 100,000.
    pub message_count: u64,
    /// Operation records in a session's log, past which ops asked for on an
    /// agent socket that would record one are refused. Default 100,000.
    pub op_records: u64,
    /// Live sessions the agent of a session has created (forks and experiment
    /// runs; each names the session it was made for). Default 64.
    pub agent_sessions: u64,
    /// Runs of one experiment (on top of the session's `experiment_max_runs`).
    /// Default 32.
    pub experiment_runs: u64,
    /// Sessions a forked conversation may be shared through (a fork of a fork
    /// ... refers to its parent's messages, see `crate::messages::share`); a
    /// fork past it is refused. Default 16, at most [`MAX_FORK_DEPTH`].
    pub fork_depth: u64,
    /// Bytes of written data every session together may hold in memory before
    /// it is sealed into the store (`crate::budget::unsealed`); past half of
    /// it the sessions holding the most seal first, past all of it every writer
    /// holding data seals before writing. 0 (the default): 1/16 of RAM, 256 MiB
    /// to 4 GiB. At least 16 MiB when set.
    pub unsealed_bytes: u64,
    /// Bytes of decoded file blocks the daemon keeps for reads, every session
    /// together. 0 (the default): 1/64 of RAM, 32 to 256 MiB.
    pub read_cache_bytes: u64,
}

/// The smallest `unsealed_bytes` that may be set (a seal per few writes below).
pub const MIN_UNSEALED: u64 = 16 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            message_bytes: 256 << 20,
            message_count: 100_000,
            op_records: 100_000,
            agent_sessions: 64,
            experiment_runs: 32,
            fork_depth: 16,
            unsealed_bytes: 0,
            read_cache_bytes: 0,
        }
    }
}

/// The stored form: the limits and a version.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    limits: Limits,
}

/// The store's limits (the defaults when none were set).
pub fn load(store: &dyn ObjectStore) -> Result<Limits> {
    match store.meta_get(meta::LIMITS_KEY)? {
        None => Ok(Limits::default()),
        Some(v) => {
            let s: Stored = serde_json::from_slice(&v)
                .map_err(|e| Error::corrupt("the store's limits", e.to_string()))?;
            if s.version != LIMITS_VERSION {
                return Err(Error::corrupt(
                    "the store's limits",
                    format!("unsupported version {}", s.version),
                ));
            }
            Ok(s.limits)
        }
    }
}

/// Change the limits named in `set` (each a non-negative integer); the others
/// keep their values. Returns the new limits.
pub fn set(store: &dyn ObjectStore, set: &Map<String, Value>) -> Result<Limits> {
    let old = load(store)?;
    let mut v = serde_json::to_value(&old).expect("limits serialize");
    for (k, val) in set {
        if v.get(k).is_none() {
            return Err(Error::Invalid(format!(
                "unknown limit {k:?}: expected one of {}",
                names().join(", ")
            )));
        }
        if val.as_u64().is_none() {
            return Err(Error::Invalid(format!(
                "limit {k} must be a non-negative integer, not {val}"
            )));
        }
        v[k] = val.clone();
    }
    let new: Limits =
        serde_json::from_value(v).map_err(|e| Error::Invalid(format!("bad limit: {e}")))?;
    if new.fork_depth > MAX_FORK_DEPTH as u64 {
        return Err(Error::Invalid(format!(
            "limit fork_depth is at most {MAX_FORK_DEPTH}"
        )));
    }
    if new.unsealed_bytes != 0 && new.unsealed_bytes < MIN_UNSEALED {
        return Err(Error::Invalid(format!(
            "limit unsealed_bytes is 0 (from the machine) or at least {MIN_UNSEALED}"
        )));
    }
    // The memory limits are left out while 0 (their default), so a daemon from
    // before them still reads the record.
    let mut limits = serde_json::to_value(&new).expect("limits serialize");
    for k in ["unsealed_bytes", "read_cache_bytes"] {
        if limits.get(k).and_then(Value::as_u64) == Some(0) {
            limits.as_object_mut().map(|m| m.remove(k));
        }
    }
    let rec = serde_json::json!({"version": LIMITS_VERSION, "limits": limits});
    store.commit(vec![MetaOp::Put(
        meta::LIMITS_KEY.to_vec(),
        serde_json::to_vec(&rec).expect("limits serialize"),
    )])?;
    Ok(new)
}

/// The names of the limits.
pub fn names() -> Vec<String> {
    match serde_json::to_value(Limits::default()) {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The answer to `limits`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LimitsShown {
    /// The store's limits (after the change, with `set`).
    #[serde(deserialize_with = "known_limits")]
    pub limits: Limits,
    /// The daemon's memory budgets in effect and what is in use (absent from an
    /// older daemon's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

/// The daemon's shared memory budgets, as in effect now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    /// The budget of unsealed data, every session together (bytes).
    pub unsealed_limit: u64,
    /// Unsealed data held now.
    pub unsealed_used: u64,
    /// Sessions holding unsealed data now.
    pub unsealed_sessions: u64,
    /// Seals the daemon's sealer made for the budget since it started.
    pub sealer_seals: u64,
    /// Writes that first sealed their session because the budget was spent.
    pub forced_seals: u64,
    /// One session's own seal mark (bytes): it seals past this whatever the rest.
    pub session_seal: u64,
    /// The read cache's capacity and what it holds (bytes).
    pub read_cache_limit: u64,
    pub read_cache_used: u64,
}

/// Apply the memory limits of `l` to this process's budgets (the daemon at
/// start and after `limits set`): a 0 limit means the machine's default.
pub fn apply_memory(store: &dyn ObjectStore, l: &Limits) {
    use crate::budget::unsealed;
    unsealed::ledger().set_limit(match l.unsealed_bytes {
        0 => unsealed::default_limit(),
        n => n,
    });
    store.set_read_cache(match l.read_cache_bytes {
        0 => crate::store::packstore::read_cache_bytes(),
        n => n as usize,
    });
}

/// The budgets in effect now.
pub fn memory(store: &dyn ObjectStore, session_seal: u64) -> Memory {
    let u = crate::budget::unsealed::ledger().usage();
    let (cap, held) = store.read_cache();
    Memory {
        unsealed_limit: u.limit,
        unsealed_used: u.used,
        unsealed_sessions: u.active,
        sealer_seals: u.sealer_seals,
        forced_seals: u.forced,
        session_seal,
        read_cache_limit: cap as u64,
        read_cache_used: held as u64,
    }
}

/// [`Limits`] read from an answer: a limit this version does not know (a newer
/// daemon's) is ignored there (a stored record with one is still refused).
fn known_limits<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Limits, D::Error> {
    let mut m = Map::<String, Value>::deserialize(d)?;
    let known = names();
    m.retain(|k, _| known.contains(k));
    serde_json::from_value(Value::Object(m)).map_err(serde::de::Error::custom)
}

/// The `limits` op: show the limits, and with `set` change them first (the
/// user role only; the verb's role rule refuses `set` on an agent socket) and
/// apply the memory ones. `session_seal` is one session's own seal mark (the
/// session layer's, above this one).
pub fn run(
    store: &dyn ObjectStore,
    change: Option<&Map<String, Value>>,
    session_seal: u64,
) -> Result<LimitsShown> {
    let limits = match change {
        Some(c) => {
            let l = set(store, c)?;
            apply_memory(store, &l);
            l
        }
        None => load(store)?,
    };
    let memory = Some(memory(store, session_seal));
    Ok(LimitsShown { limits, memory })
}

/// The key, in the meta of a session record, naming the session whose agent
/// created it (a fork or an experiment run asked for on an agent socket).
pub const AGENT_OF: &str = "agent_of";

/// Refuse when the agent of `session`, creating `adding` more sessions, would
/// have more live sessions than `agent_sessions`.
pub fn check_agent_sessions(store: &dyn ObjectStore, session: &str, adding: u64) -> Result<()> {
    let l = load(store)?;
    let used = crate::refs::session_record::list_records(store)?
        .iter()
        .filter(|r| r.meta.get(AGENT_OF).and_then(Value::as_str) == Some(session))
        .count() as u64;
    check(
        "agent_sessions",
        l.agent_sessions,
        used,
        adding,
        "live sessions created by the agent",
    )
}

/// Refuse an op that would record an operation, asked for on an agent socket,
/// when `session`'s log holds `op_records` records already.
pub fn check_op_records(store: &dyn ObjectStore, session: &str) -> Result<()> {
    let l = load(store)?;
    let used = crate::oplog::last(store, session)?.map_or(0, |o| o.seq);
    check("op_records", l.op_records, used, 1, "operation records")
}

/// The refusal for limit `what` (value `limit`), the request reaching `detail`.
pub fn exceeded(what: &'static str, limit: u64, detail: impl Into<String>) -> Error {
    Error::Quota {
        what,
        limit,
        detail: detail.into(),
    }
}

/// Refuse when `used + adding > limit`.
pub fn check(what: &'static str, limit: u64, used: u64, adding: u64, unit: &str) -> Result<()> {
    let total = used.saturating_add(adding);
    if total > limit {
        return Err(exceeded(
            what,
            limit,
            format!("{used} {unit} used, {adding} more asked"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use serde_json::json;

    #[test]
    fn defaults_set_and_refusals() {
        let s = MemStore::default();
        assert_eq!(load(&s).unwrap(), Limits::default());
        let mut m = Map::new();
        m.insert("agent_sessions".into(), json!(3));
        assert_eq!(set(&s, &m).unwrap().agent_sessions, 3);
        assert_eq!(load(&s).unwrap().agent_sessions, 3);
        assert_eq!(load(&s).unwrap().op_records, 100_000);
        m.insert("nope".into(), json!(1));
        assert!(matches!(set(&s, &m), Err(Error::Invalid(_))));
        let mut m = Map::new();
        m.insert("op_records".into(), json!(-1));
        assert!(matches!(set(&s, &m), Err(Error::Invalid(_))));
        // The memory limits: left out of the record while 0 (an older daemon reads
        // it), at least MIN_UNSEALED when set.
        let raw = s.meta_get(meta::LIMITS_KEY).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&raw).unwrap();
        assert!(v["limits"].get("unsealed_bytes").is_none(), "{v}");
        assert_eq!(v["limits"]["agent_sessions"], 3);
        let mut m = Map::new();
        m.insert("unsealed_bytes".into(), json!(1000));
        assert!(matches!(set(&s, &m), Err(Error::Invalid(_))));
        m.insert("unsealed_bytes".into(), json!(MIN_UNSEALED));
        assert_eq!(set(&s, &m).unwrap().unsealed_bytes, MIN_UNSEALED);
        assert_eq!(load(&s).unwrap().unsealed_bytes, MIN_UNSEALED);
        assert!(check("message_count", 10, 9, 1, "records").is_ok());
        let e = check("message_count", 10, 10, 1, "records").unwrap_err();
        assert_eq!(e.code(), "quota");
        assert!(e.to_string().contains("message_count"));
    }
}
