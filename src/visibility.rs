//! What an agent socket may see of a store (docs/design.md, "What an agent socket
//! sees").
//!
//! Owns: the grants (`a/<session>\0<branch>`: a branch given to a session, because
//! it was created in it or the user shared it), the lineage records
//! (`h/<parent>\0<child>`: a fork or experiment run a session created), and each
//! live session's cache of the checkpoints its agent may name ([`Seen`]), with the
//! [`refs::Visibility`] check that ref resolution asks on an agent socket.
//!
//! The model: an agent socket of session S sees
//! - the sessions of S's lineage: S and, transitively, the forks and experiment
//!   runs created in them (at most [`MAX_LINEAGE`] sessions);
//! - the branches granted to a session of the lineage (created in it or shared
//!   with it) and the branch each is attached to;
//! - the checkpoints reachable (through every parent) from the HEADs of the
//!   lineage, from the HEADs their operation logs record, and from those branches.
//!
//! Everything else resolves exactly as a name or id that does not exist.
//!
//! Invariants:
//! - A grant holds the `created` time of the ref it was given for; a ref deleted
//!   and made again (another `created`) is not covered by an old grant.
//! - The cached set only grows while a session is mounted (every checkpoint once
//!   reachable from what the lineage sees stays visible to it); names are checked
//!   against the store at each lookup (a refresh), so a branch that stopped being
//!   granted is hidden at once.
//! - A refresh reads only what the lineage owns: its session records, the op-log
//!   records added since the last refresh, its grants, and the checkpoints not seen
//!   yet — never a store-wide scan. The first refresh walks the session's whole
//!   ancestry once.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::meta::{self, KeyRange, MetaOp};
use crate::refs;
use crate::refs::session_record::{self, SessionRecord};
use crate::store::ObjectStore;

/// Most sessions of a lineage an agent sees (its own, its forks, their forks...).
pub const MAX_LINEAGE: usize = 1024;
/// Most branch grants read per session of a lineage.
pub const MAX_GRANTS: usize = 100_000;

/// Who a request's names resolve for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every name and id in the store (the user's sockets, the daemon itself).
    #[default]
    All,
    /// What the session's lineage sees (an agent socket).
    Lineage,
}

/// A stored grant.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Grant {
    /// The `created` time of the ref it was given for.
    created: i64,
    /// `created` (in this session) or `shared` (by the user).
    how: String,
}

/// The op that gives `branch` (a ref created at `created`) to `session`: `how` is
/// `created` or `shared`.
pub fn grant_op(session: &str, branch: &str, created: i64, how: &str) -> MetaOp {
    let g = Grant {
        created,
        how: how.into(),
    };
    MetaOp::Put(
        meta::grant_key(session, branch),
        serde_json::to_vec(&g).expect("grant encodes"),
    )
}

/// The op that records that session `parent` created session `child`.
pub fn lineage_op(parent: &str, child: &str) -> MetaOp {
    MetaOp::Put(meta::lineage_key(parent, child), Vec::new())
}

/// What removing session `name` removes here: its grants, its lineage records,
/// and the records that name it as a child (a later session of that name is not
/// its creator's). The last needs a scan of every lineage record (`session rm` is
/// rare and the user's).
pub fn delete_ops(store: &dyn ObjectStore, name: &str) -> Result<Vec<MetaOp>> {
    let mut ops = Vec::new();
    for range in [KeyRange::grants(name), KeyRange::children(name)] {
        ops.extend(store.meta_delete_range_ops(&range)?);
    }
    for (k, _) in store.meta_scan(meta::LINEAGE_PREFIX)? {
        if meta::lineage_parts(&k).is_some_and(|(_, child)| child == name) {
            ops.push(MetaOp::Delete(k));
        }
    }
    Ok(ops)
}

/// Every session's creator: child name → parent name, from the lineage records
/// (a fork or experiment run knows the session it was made in). One scan of the
/// lineage records, as many as the store has sessions made that way.
pub fn parents(store: &dyn ObjectStore) -> Result<HashMap<String, String>> {
    let mut out = HashMap::new();
    for (k, _) in store.meta_scan(meta::LINEAGE_PREFIX)? {
        if let Some((parent, child)) = meta::lineage_parts(&k) {
            out.insert(child.to_string(), parent.to_string());
        }
    }
    Ok(out)
}

/// Share branch `branch` with session `session` (the user's `branch share`): the
/// agent of `session` sees it (and the history it names) from its next request.
pub fn share(store: &dyn ObjectStore, branch: &str, session: &str) -> Result<i64> {
    let r = refs::get_ref(store, branch)?
        .ok_or_else(|| Error::NotFound(format!("no branch named {branch:?}")))?;
    if session_record::load_record(store, session)?.is_none() {
        return Err(Error::NotFound(format!("no session named {session:?}")));
    }
    store.commit(vec![
        MetaOp::Expect(
            meta::ref_key(branch),
            Some(serde_json::to_vec(&r).expect("ref encodes")),
        ),
        grant_op(session, branch, r.created, "shared"),
    ])?;
    Ok(r.created)
}

/// A live session as its agent's view needs it (implemented by
/// `crate::session::Session`, which keeps the view's cache): `visibility` is below
/// `session` and never names it.
pub trait LiveSession {
    /// The session's name.
    fn name(&self) -> &str;
    /// Its store.
    fn store(&self) -> &dyn ObjectStore;
    /// Its current session record (HEAD, attached branch).
    fn record(&self) -> SessionRecord;
    /// Its agent's cache ([`new_cache`]).
    fn seen(&self) -> &Mutex<Seen>;
}

/// A session's cache of what its agent sees (kept on the live session, see
/// [`LiveSession::seen`]).
#[derive(Default)]
pub struct Seen {
    /// Visible checkpoints, sorted (an id prefix is a range of it).
    ids: BTreeSet<[u8; 32]>,
    /// Visible branch names as of the last refresh.
    branches: HashSet<String>,
    /// Per session of the lineage: the newest op-log record folded in.
    cursors: HashMap<String, u64>,
    /// Whether it was refreshed at least once (before that it is empty).
    refreshed: bool,
}

impl Seen {
    /// Bring the cache up to date for session `s` (see the module docs).
    fn refresh(&mut self, store: &dyn ObjectStore, s: &dyn LiveSession) -> Result<()> {
        let mut roots: Vec<CheckpointId> = Vec::new();
        let mut branches = HashSet::new();
        let own = s.record();
        let lineage = lineage(store, s.name())?;
        for name in &lineage {
            let rec = if name == s.name() {
                Some(own.clone())
            } else {
                session_record::load_record(store, name)?
            };
            if let Some(rec) = rec {
                roots.extend(rec.head);
                branches.extend(rec.branch);
            }
            let from = self.cursors.get(name).map_or(1, |n| n + 1);
            // Paged, oldest first: memory is the new heads, not the whole log.
            let mut last = None;
            crate::oplog::walk::forward(store, name, from, usize::MAX, &mut |op| {
                roots.extend(op.before.head);
                roots.extend(op.after.head);
                last = Some(op.seq);
                Ok(true)
            })?;
            if let Some(seq) = last {
                self.cursors.insert(name.clone(), seq);
            }
            for (k, v) in store.meta_range(&KeyRange::grants(name), MAX_GRANTS)? {
                let Some((_, b)) = meta::grant_parts(&k) else {
                    continue;
                };
                let Ok(g) = serde_json::from_slice::<Grant>(&v) else {
                    log::warn!("grant {b} of session {name}: unreadable; ignored");
                    continue;
                };
                if let Some(r) = refs::get_ref(store, b)?
                    && r.created == g.created
                {
                    branches.insert(b.to_string());
                }
            }
        }
        for b in &branches {
            if let Some(r) = refs::get_ref(store, b)? {
                roots.push(r.checkpoint);
            }
        }
        self.branches = branches;
        self.walk(store, roots);
        self.refreshed = true;
        Ok(())
    }

    /// Add `roots` and every ancestor of them not seen yet.
    fn walk(&mut self, store: &dyn ObjectStore, roots: Vec<CheckpointId>) {
        let mut stack = roots;
        while let Some(id) = stack.pop() {
            if !self.ids.insert(id.0) {
                continue;
            }
            match refs::load(store, &id) {
                Ok(c) => stack.extend(c.parents),
                // A pruned or unreadable record: it names no ancestors to see.
                Err(e) => log::debug!("visibility walk: checkpoint {id}: {e}"),
            }
        }
    }

    /// Visible ids that start with the hex digits `lower`, at most `max`.
    fn with_prefix(&self, lower: &str, max: usize) -> Vec<CheckpointId> {
        let mut start = [0u8; 32];
        for (i, c) in lower.as_bytes().chunks(2).enumerate().take(32) {
            let hi = hex_val(c[0]);
            let lo = c.get(1).map_or(0, |&b| hex_val(b));
            start[i] = (hi << 4) | lo;
        }
        self.ids
            .range(start..)
            .map(|id| CheckpointId(*id))
            .take_while(|id| id.to_hex().starts_with(lower))
            .take(max)
            .collect()
    }
}

fn hex_val(b: u8) -> u8 {
    (b as char).to_digit(16).unwrap_or(0) as u8
}

/// Session `name` and, breadth first, every session created from it (at most
/// [`MAX_LINEAGE`]; past that a warning is logged and the rest is not seen).
fn lineage(store: &dyn ObjectStore, name: &str) -> Result<Vec<String>> {
    let mut out = vec![name.to_string()];
    let mut seen: HashSet<String> = out.iter().cloned().collect();
    let mut queue: VecDeque<String> = out.iter().cloned().collect();
    while let Some(p) = queue.pop_front() {
        for (k, _) in store.meta_range(&KeyRange::children(&p), MAX_LINEAGE)? {
            let Some((_, child)) = meta::lineage_parts(&k) else {
                continue;
            };
            if out.len() >= MAX_LINEAGE {
                log::warn!(
                    "session {name}: lineage larger than {MAX_LINEAGE} sessions; the rest is \
                     not visible to its agent"
                );
                return Ok(out);
            }
            if seen.insert(child.to_string()) {
                out.push(child.to_string());
                queue.push_back(child.to_string());
            }
        }
    }
    Ok(out)
}

/// The [`refs::Visibility`] of a live session's agent.
pub struct AgentView<'a> {
    session: &'a dyn LiveSession,
}

impl<'a> AgentView<'a> {
    /// What the agent of `session` sees.
    pub fn new(session: &'a dyn LiveSession) -> AgentView<'a> {
        AgentView { session }
    }

    fn seen(&self) -> std::sync::MutexGuard<'a, Seen> {
        self.session
            .seen()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The refreshed cache.
    fn fresh(&self) -> Result<std::sync::MutexGuard<'a, Seen>> {
        let mut seen = self.seen();
        seen.refresh(self.session.store(), self.session)?;
        Ok(seen)
    }

    /// The names of the branches the agent sees (one refresh).
    pub fn branches(&self) -> Result<HashSet<String>> {
        Ok(self.fresh()?.branches.clone())
    }

    /// Whether the agent sees session `name` (which may not exist): one of its
    /// lineage.
    pub fn session(&self, name: &str) -> Result<bool> {
        let s = self.session;
        Ok(lineage(s.store(), s.name())?.iter().any(|n| n == name))
    }
}

impl refs::Visibility for AgentView<'_> {
    fn branch(&self, name: &str) -> Result<bool> {
        Ok(self.fresh()?.branches.contains(name))
    }

    fn checkpoint(&self, id: &CheckpointId) -> Result<bool> {
        {
            let seen = self.seen();
            if seen.refreshed && seen.ids.contains(&id.0) {
                return Ok(true);
            }
        }
        Ok(self.fresh()?.ids.contains(&id.0))
    }

    fn with_prefix(&self, lower: &str, max: usize) -> Result<Vec<CheckpointId>> {
        Ok(self.fresh()?.with_prefix(lower, max))
    }
}

/// A fresh cache for a session (see [`Seen`]).
pub fn new_cache() -> Mutex<Seen> {
    Mutex::new(Seen::default())
}

#[cfg(test)]
mod tests;
