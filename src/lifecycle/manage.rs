//! Changing and reading session info records: atomic read-modify-write
//! ([`update`]), policy changes from `mount` flags and `session extend`
//! ([`PolicyChange`], [`extend`]), the expiry rule ([`expiry`]), metrics upkeep, and the
//! lifecycle columns of `sessions` / `session show` ([`row_fields`], [`show`]).
//!
//! Invariants: every change of an info record goes through [`update`], a
//! compare-and-swap on the stored bytes (`MetaOp::Expect`) retried a few times,
//! so concurrent writers (mount, sweeps, metrics, promote) never lose each
//! other's changes; a session without a record gets [`SessionInfo::legacy`] on
//! its first update.

use super::{SessionInfo, State, load, parse_duration};
use crate::error::{Error, Result};
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Apply `f` to `session`'s info record and store it atomically (its `updated`
/// stamped). `f` returns whether anything changed; nothing is written otherwise.
/// A session with no session record is `not_found`.
pub fn update(
    store: &dyn ObjectStore,
    session: &str,
    f: &mut dyn FnMut(&mut SessionInfo) -> Result<bool>,
) -> Result<SessionInfo> {
    let key = meta::info_key(session);
    for _ in 0..8 {
        let old = store.meta_get(&key)?;
        let mut info = match &old {
            Some(v) => SessionInfo::decode(session, v)?,
            None => {
                let rec = crate::refs::session_record::load_record(store, session)?
                    .ok_or_else(|| Error::NotFound(format!("no session named {session}")))?;
                SessionInfo::legacy(session, rec.created)
            }
        };
        if !f(&mut info)? && old.is_some() {
            return Ok(info);
        }
        let ops = vec![MetaOp::Expect(key.clone(), old), info.op()];
        match store.commit(ops) {
            Ok(()) => return Ok(info),
            Err(Error::Conflict(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Conflict(format!(
        "session info {session} kept changing concurrently; retry"
    )))
}

/// A policy (and task) change asked by `mount` flags or `session extend`.
/// Durations are written like `30s`, `4h`, `7d`; `never` (or `off`) clears a TTL.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyChange {
    /// New task text.
    pub task: Option<String>,
    /// Idle TTL.
    pub ttl_idle: Option<String>,
    /// Absolute TTL, counted from now (stored as seconds since creation).
    pub ttl_absolute: Option<String>,
    /// Evict once promoted.
    pub until_promote: Option<bool>,
    /// Never evict automatically.
    pub manual: Option<bool>,
    /// Push to this remote before evicting (`none` clears it).
    pub evict_to: Option<String>,
}

fn ttl(s: &str) -> Result<Option<u64>> {
    match s.trim() {
        "never" | "off" | "none" => Ok(None),
        d => parse_duration(d).map(Some),
    }
}

impl PolicyChange {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == PolicyChange::default()
    }

    /// Check the durations (before anything is created).
    pub fn validate(&self) -> Result<()> {
        for d in [&self.ttl_idle, &self.ttl_absolute].into_iter().flatten() {
            ttl(d)?;
        }
        if self.task.as_ref().is_some_and(|t| t.len() > 4096) {
            return Err(Error::Invalid("task text longer than 4096 bytes".into()));
        }
        Ok(())
    }

    /// Apply to `info` at `now`.
    pub fn apply(&self, info: &mut SessionInfo, now: i64) -> Result<()> {
        if let Some(t) = &self.task {
            info.task = Some(t.clone()).filter(|t| !t.is_empty());
        }
        if let Some(d) = &self.ttl_idle {
            info.policy.idle_ttl_secs = ttl(d)?;
        }
        if let Some(d) = &self.ttl_absolute {
            let age = now.saturating_sub(info.created).max(0) as u64;
            info.policy.absolute_ttl_secs = ttl(d)?.map(|s| s.saturating_add(age));
        }
        if let Some(u) = self.until_promote {
            info.policy.until_promote = u;
        }
        if let Some(m) = self.manual {
            info.policy.manual = m;
        }
        if let Some(r) = &self.evict_to {
            info.policy.evict_to = Some(r.clone()).filter(|r| !is_none(r));
        }
        Ok(())
    }

    /// Check `evict_to` against the remotes configured in `store` (`none`
    /// always passes: it clears the setting).
    pub fn check_remote(&self, store: &dyn ObjectStore) -> Result<()> {
        match &self.evict_to {
            Some(r) if !is_none(r) => {
                if !crate::refs::remote_names::exists(store, r)? {
                    return Err(Error::NotFound(format!(
                        "--evict-to {r}: no remote named {r} (see `treefork remote list`)"
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// `none`/`off`/`never` (or empty) clear `--evict-to`.
fn is_none(r: &str) -> bool {
    matches!(r.trim(), "" | "none" | "off" | "never")
}

/// The reason [`expiry`] gives for a promoted `until-promote` session.
pub const UNTIL_PROMOTE: &str = "promoted (until-promote)";

/// Why `info` is due for eviction at `now` (`None`: it is not). `manual` never
/// is; only active and promoted sessions are evicted.
pub fn expiry(info: &SessionInfo, now: i64) -> Option<String> {
    let p = &info.policy;
    if p.manual || !matches!(info.state, State::Active | State::Promoted) {
        return None;
    }
    // Only once everything it changed is promoted (`complete`); changes made
    // after the promote are checked by the sweep, which sees the live tree.
    if info.state == State::Promoted
        && p.until_promote
        && info.promoted.as_ref().is_none_or(|x| x.complete)
    {
        return Some(UNTIL_PROMOTE.into());
    }
    if let Some(ttl) = p.idle_ttl_secs {
        let idle = now.saturating_sub(info.last_access);
        if idle >= ttl as i64 {
            return Some(format!("idle {idle}s (ttl {ttl}s)"));
        }
    }
    if let Some(ttl) = p.absolute_ttl_secs {
        let age = now.saturating_sub(info.created);
        if age >= ttl as i64 {
            return Some(format!("age {age}s (absolute ttl {ttl}s)"));
        }
    }
    None
}

/// Why nothing is mounted at `mp` when a session mounted there was evicted
/// (the newest such eviction): a sentence naming the session, the reason, the
/// checkpoint its state was saved as, and how to mount it again.
pub fn evicted_at(store: &dyn ObjectStore, mp: &std::path::Path) -> Option<String> {
    let want = mp.display().to_string();
    let mut best: Option<(String, super::Evicted)> = None;
    for rec in crate::refs::session_record::list_records(store).ok()? {
        let Some(e) = load(store, &rec.name)
            .ok()
            .flatten()
            .and_then(|i| i.evicted)
        else {
            continue;
        };
        if e.mountpoint.as_deref() == Some(&want)
            && best.as_ref().is_none_or(|(_, b)| b.time < e.time)
        {
            best = Some((rec.name, e));
        }
    }
    let (name, e) = best?;
    let ago = crate::clock::unix_secs().saturating_sub(e.time);
    let saved = e
        .checkpoint
        .map(|c| format!(", its state saved as checkpoint {}", &c[..c.len().min(12)]))
        .unwrap_or_default();
    Some(format!(
        "{want} is no longer mounted: session {name} was evicted {ago}s ago ({}){saved}; \
         mount it again with `treefork mount {want} --session {name}`",
        e.why
    ))
}

/// How many touched paths `session` has.
pub fn touched_count(store: &dyn ObjectStore, session: &str) -> Result<usize> {
    Ok(store
        .meta_range(&KeyRange::touched(session), usize::MAX)?
        .len())
}

/// The info of `session`, or what a session without a record reads as.
pub fn load_or_legacy(store: &dyn ObjectStore, session: &str, created: i64) -> SessionInfo {
    match load(store, session) {
        Ok(Some(i)) => i,
        Ok(None) => SessionInfo::legacy(session, created),
        Err(e) => {
            log::warn!("session {session}: unreadable info record: {e}");
            SessionInfo::legacy(session, created)
        }
    }
}

/// The lifecycle columns of a `sessions` row.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LifeColumns {
    /// The session's lifecycle state.
    pub lifecycle: State,
    /// What the session is for.
    pub task: Option<String>,
    /// Seconds since it was created.
    pub age: i64,
    /// Seconds since it was last accessed (as last persisted).
    pub idle: i64,
    /// How many paths its workspace changed since its base.
    pub touched: usize,
    /// Why the last sweep could not evict it (`null`: nothing blocked it).
    pub evict_blocked: Option<String>,
}

/// The lifecycle columns of `session`'s `sessions` row.
pub fn row_fields(store: &dyn ObjectStore, session: &str, created: i64) -> LifeColumns {
    let t = crate::clock::unix_secs();
    let i = load_or_legacy(store, session, created);
    LifeColumns {
        lifecycle: i.state,
        age: t.saturating_sub(i.created).max(0),
        idle: t.saturating_sub(i.last_access).max(0),
        touched: touched_count(store, session).unwrap_or(0),
        task: i.task,
        evict_blocked: i.evict_blocked,
    }
}

/// The answer to `session_show`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SessionShown {
    /// The session's info record.
    pub info: SessionInfo,
    /// How many paths its workspace changed since its base.
    pub touched: usize,
    /// Whether it is mounted.
    pub mounted: bool,
    /// Where it is mounted (`null`: not mounted).
    pub mountpoint: Option<std::path::PathBuf>,
    /// How its mount talks to the kernel: `uring` or `dev` (`null`: not mounted).
    #[serde(default)]
    pub transport: Option<String>,
    /// Seconds since it was created.
    pub age: i64,
    /// Seconds since it was last accessed.
    pub idle: i64,
    /// Why it is due for eviction now (`null`: it is not).
    pub expires: Option<String>,
    /// Its agent socket: the one it is served on, or (not mounted) the one its
    /// next mount serves (`null`: none).
    #[serde(default)]
    pub agent_socket: Option<std::path::PathBuf>,
    /// What of its workspace is still only on the remote the store reads through
    /// (`null`: the store has no remote to read through, so everything is local).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_only: Option<RemoteOnly>,
}

/// The part of a lazily mounted session's workspace not fetched yet.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct RemoteOnly {
    /// Objects (directory and file nodes, chunks) of the workspace reached that are
    /// not in the local store.
    pub objects: u64,
    /// Of those, nodes: what is under them was not looked at (it is not local
    /// either), so `objects` is a lower bound when this is not 0.
    pub unread_nodes: u64,
    /// Objects of the workspace that are local.
    pub local: u64,
}

/// Walk the workspace tree `root` over local objects only, counting those that
/// are not local (not read: a missing node's subtree is not descended into). Reads
/// nothing from a remote; work is bounded by the local part of the tree.
fn remote_only(store: &dyn ObjectStore, root: crate::id::NodeId) -> RemoteOnly {
    use crate::reach::{ChunkCheck, Walk};
    let read = |k: crate::store::Kind, id: &crate::id::ObjectId| store.get(k, id);
    let not_local = |id: &crate::id::ObjectId| !store.contains(id).unwrap_or(false);
    let mut w = Walk::new(&read, ChunkCheck::Mark).with_boundary(&not_local);
    w.root("session show", root);
    let unread_nodes = w
        .at_boundary
        .iter()
        .filter(|id| w.nodes.contains(id))
        .count() as u64;
    let objects = w.at_boundary.len() as u64;
    RemoteOnly {
        objects,
        unread_nodes,
        local: (w.nodes.len() + w.chunks.len()) as u64 - objects,
    }
}

/// `session show`: the info record, touched count and mount state.
pub fn show(
    store: &dyn ObjectStore,
    session: &str,
    mounted: Option<&std::path::Path>,
) -> Result<SessionShown> {
    let rec = crate::refs::session_record::load_record(store, session)?
        .ok_or_else(|| Error::NotFound(format!("no session named {session}")))?;
    let info = load_or_legacy(store, session, rec.created);
    let t = crate::clock::unix_secs();
    Ok(SessionShown {
        touched: touched_count(store, session)?,
        mounted: mounted.is_some(),
        mountpoint: mounted.map(std::path::Path::to_path_buf),
        transport: None,
        age: t.saturating_sub(info.created).max(0),
        idle: t.saturating_sub(info.last_access).max(0),
        expires: expiry(&info, t),
        agent_socket: info.agent_socket.as_ref().map(|a| a.path.clone()),
        remote_only: store.fallback().map(|_| remote_only(store, rec.root)),
        info,
    })
}

/// `session extend`: new TTLs and eviction remote (each kept when `None`), the
/// idle clock restarted; answers the session's info as it now is. The daemon and
/// the CLI's offline path both run it.
pub fn extend(
    store: &dyn ObjectStore,
    session: &str,
    ttl_idle: Option<String>,
    ttl_absolute: Option<String>,
    evict_to: Option<String>,
) -> Result<super::SessionInfo> {
    let change = PolicyChange {
        ttl_idle,
        ttl_absolute,
        evict_to,
        ..PolicyChange::default()
    };
    change.validate()?;
    change.check_remote(store)?;
    let now = crate::clock::unix_secs();
    let info = update(store, session, &mut |i| {
        change.apply(i, now)?;
        i.last_access = now;
        Ok(true)
    })?;
    Ok(info)
}

/// Mark `session` discarded (gc removes it after the retention time); a pending
/// eviction block is cleared. The caller makes sure it is not mounted.
pub fn discard(store: &dyn ObjectStore, session: &str) -> Result<()> {
    update(store, session, &mut |i| {
        i.state = State::Discarded;
        i.evict_blocked = None;
        Ok(true)
    })?;
    Ok(())
}

/// Add to `session`'s counters (best effort: a failure is logged).
/// Apply `f` to the metrics of `session` in the caller's batch `ops`: to the
/// info record the batch already writes (a rebase's new baseline, a fork's new
/// info), or else by adding the record's new value guarded by its value now (a
/// batch refused because the info changed meanwhile is the caller's to build
/// again: [`info_changed`]). Returns the ops added.
pub fn bump_in(
    store: &dyn ObjectStore,
    session: &str,
    ops: &mut [MetaOp],
    f: &dyn Fn(&mut super::Metrics),
) -> Result<Vec<MetaOp>> {
    let key = meta::info_key(session);
    let last = ops
        .iter_mut()
        .rev()
        .find(|op| matches!(op, MetaOp::Put(k, _) | MetaOp::Delete(k) if *k == key));
    match last {
        Some(MetaOp::Put(_, v)) => {
            let mut info = SessionInfo::decode(session, v)?;
            f(&mut info.metrics);
            if let MetaOp::Put(_, nv) = info.op() {
                *v = nv;
            }
            Ok(Vec::new())
        }
        // The batch deletes it: nothing to count in.
        Some(_) => Ok(Vec::new()),
        None => bump_ops(store, session, f),
    }
}

/// The ops applying `f` to the metrics of `session` in a caller's batch that
/// does not write its info record otherwise (see [`bump_in`]).
pub fn bump_ops(
    store: &dyn ObjectStore,
    session: &str,
    f: &dyn Fn(&mut super::Metrics),
) -> Result<Vec<MetaOp>> {
    let key = meta::info_key(session);
    let old = store.meta_get(&key)?;
    let mut info = match &old {
        Some(v) => SessionInfo::decode(session, v)?,
        None => match crate::refs::session_record::load_record(store, session)? {
            Some(rec) => SessionInfo::legacy(session, rec.created),
            // A session made in the same batch: its info is in that batch.
            None => return Ok(Vec::new()),
        },
    };
    f(&mut info.metrics);
    Ok(vec![MetaOp::Expect(key, old), info.op()])
}

/// Whether the info record of `session` is no longer `was` (what a batch built by
/// [`bump_ops`] expected).
pub fn info_changed(store: &dyn ObjectStore, session: &str, was: &[MetaOp]) -> Result<bool> {
    let key = meta::info_key(session);
    let now = store.meta_get(&key)?;
    Ok(was
        .iter()
        .any(|op| matches!(op, MetaOp::Expect(k, v) if *k == key && *v != now)))
}

/// Apply `f` to the metrics of `session` in a commit of its own (for counts no
/// operation records: mounts after a crash). A failure is logged.
pub fn bump(store: &dyn ObjectStore, session: &str, f: &dyn Fn(&mut super::Metrics)) {
    let r = update(store, session, &mut |i| {
        f(&mut i.metrics);
        Ok(true)
    });
    if let Err(e) = r {
        log::warn!("session {session}: cannot update its metrics: {e}");
    }
}

/// Names of sessions discarded more than `retention_secs` ago (`gc` removes them).
pub fn discarded_before(
    store: &dyn ObjectStore,
    retention_secs: u64,
    now: i64,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for i in super::list(store)? {
        let name = i.session.as_str();
        if i.state == State::Discarded && now.saturating_sub(i.updated) >= retention_secs as i64 {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// The ops deleting everything a removed session leaves behind besides its
/// session record: operation records, info, touched set.
pub fn removal_ops(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    let mut ops = crate::oplog::delete_all_ops(store, session)?;
    ops.extend(super::delete_ops(store, session)?);
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rules() {
        let mut i = SessionInfo::new("s", None);
        i.created = 1000;
        i.last_access = 1000;
        i.policy.idle_ttl_secs = Some(60);
        assert!(expiry(&i, 1059).is_none());
        assert!(expiry(&i, 1060).is_some());
        i.policy.manual = true;
        assert!(expiry(&i, 99_999).is_none());
        i.policy.manual = false;
        i.policy.idle_ttl_secs = None;
        i.policy.absolute_ttl_secs = Some(100);
        assert!(expiry(&i, 1099).is_none());
        assert!(expiry(&i, 1100).unwrap().contains("absolute"));
        i.policy.absolute_ttl_secs = None;
        i.state = State::Promoted;
        assert!(expiry(&i, 1001).unwrap().contains("promoted"));
        i.policy.until_promote = false;
        assert!(expiry(&i, 1001).is_none());
        i.state = State::Expired;
        i.policy.idle_ttl_secs = Some(1);
        assert!(expiry(&i, 99_999).is_none(), "already expired");
    }

    #[test]
    fn policy_changes() {
        let mut i = SessionInfo::new("s", None);
        i.created = 1000;
        let c = PolicyChange {
            task: Some("fix it".into()),
            ttl_idle: Some("30s".into()),
            ttl_absolute: Some("1h".into()),
            until_promote: Some(false),
            manual: Some(true),
            evict_to: Some("origin".into()),
        };
        c.validate().unwrap();
        c.apply(&mut i, 1500).unwrap();
        assert_eq!(i.policy.evict_to.as_deref(), Some("origin"));
        assert_eq!(i.task.as_deref(), Some("fix it"));
        assert_eq!(i.policy.idle_ttl_secs, Some(30));
        assert_eq!(i.policy.absolute_ttl_secs, Some(3600 + 500));
        assert!(!i.policy.until_promote && i.policy.manual);
        let off = PolicyChange {
            ttl_idle: Some("never".into()),
            ..Default::default()
        };
        off.apply(&mut i, 1500).unwrap();
        assert_eq!(i.policy.idle_ttl_secs, None);
        assert_eq!(i.policy.evict_to.as_deref(), Some("origin"));
        let local = PolicyChange {
            evict_to: Some("none".into()),
            ..Default::default()
        };
        local.apply(&mut i, 1500).unwrap();
        assert_eq!(i.policy.evict_to, None);
        let bad = PolicyChange {
            ttl_idle: Some("soon".into()),
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn updates_are_compare_and_swap() {
        let s = crate::store::MemStore::default();
        let rec = crate::refs::session_record::new_record("s", crate::id::NodeId::of(b"r"), 0, 1)
            .unwrap();
        s.commit(vec![crate::refs::session_record::record_op(&rec)])
            .unwrap();
        // No info record yet: the first update starts from the legacy one.
        let i = update(&s, "s", &mut |i| {
            i.metrics.forks += 1;
            Ok(true)
        })
        .unwrap();
        assert!(i.policy.manual);
        let mut n = 0;
        update(&s, "s", &mut |i| {
            n += 1;
            if n == 1 {
                // Someone else writes meanwhile: our first try must fail and retry.
                let mut other = load(&s, "s").unwrap().unwrap();
                other.metrics.checkpoints += 1;
                s.commit(vec![other.op()]).unwrap();
            }
            i.metrics.forks += 1;
            Ok(true)
        })
        .unwrap();
        let i = load(&s, "s").unwrap().unwrap();
        assert_eq!((i.metrics.forks, i.metrics.checkpoints, n), (2, 1, 2));
        assert!(update(&s, "nope", &mut |_| Ok(true)).is_err());
    }
}
