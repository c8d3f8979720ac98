//! `hydrate`: fetch every object a session needs (its workspace, its base, and
//! every checkpoint and workspace root its history, operation log and messages
//! name) so it works with the remote gone.
//!
//! Invariants: node packs come whole (`fetch::NodeFetcher`), missing chunks are
//! grouped by pack into few large range reads (`fetch::fetch_ids`), everything
//! verified before it is kept and committed pack by pack (an interrupted hydrate
//! keeps what it got). Objects no remote holds are counted in `missing`, never
//! invented.

use std::collections::HashSet;
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::fetch::{self, NodeFetcher};
use crate::error::Result;
use crate::id::{CheckpointId, NodeId, ObjectId};
use crate::meta::KeyRange;
use crate::reach::{ChunkCheck, Walk};
use crate::remote::Remote;
use crate::remote::lazy::Source;
use crate::session::SessionRecord;
use crate::store::{Kind, ObjectStore};

/// What a hydrate did: the answer to `hydrate`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HydrateReport {
    /// The session.
    pub session: String,
    /// The remote read from.
    pub remote: String,
    /// Objects fetched (nodes and chunks).
    pub objects: u64,
    /// Bytes read from the remote.
    pub bytes: u64,
    /// Range requests made.
    pub requests: u64,
    /// Objects needed that neither the store nor the remote has.
    pub missing: usize,
    /// Wall time.
    pub seconds: f64,
}

/// Every tree root session `rec` needs: workspace, base, the checkpoints of
/// HEAD's ancestry and those its operation log and messages name, and the
/// workspace roots they name.
pub fn session_roots(store: &dyn ObjectStore, rec: &SessionRecord) -> Result<Vec<NodeId>> {
    let mut roots: Vec<NodeId> = vec![rec.root, rec.base];
    let mut cps: Vec<CheckpointId> = rec.head.into_iter().collect();
    for (k, v) in store.meta_range(&KeyRange::ops(&rec.name), usize::MAX)? {
        let op = crate::oplog::Operation::decode(&String::from_utf8_lossy(&k), &v)?;
        cps.extend(op.checkpoints());
        roots.push(op.before.workspace);
        roots.push(op.after.workspace);
    }
    // The session's whole conversation view, shared records included, a page at
    // a time (`messages::share`).
    for stream in [
        crate::messages::Stream::Messages,
        crate::messages::Stream::Transcript,
    ] {
        let chain = crate::messages::share::chain(store, &rec.name, stream)?;
        let last = crate::messages::last_seq(store, &rec.name, stream)?;
        let ranges = [[1, last]];
        let ranges = if last > 0 { &ranges[..] } else { &[][..] };
        crate::messages::share::walk(store, &chain, stream, ranges, false, &mut |seq, v| {
            let owner = format!("message {}#{seq}", rec.name);
            let m = crate::messages::Message::decode(&owner, &v)?;
            cps.extend(m.checkpoint);
            roots.push(m.workspace);
            Ok(true)
        })?;
    }
    let mut seen: HashSet<CheckpointId> = HashSet::new();
    while let Some(h) = cps.pop() {
        if !seen.insert(h) {
            continue;
        }
        if let Some(c) = crate::refs::load_present(store, &h)? {
            roots.push(c.root);
            cps.extend(c.parents);
        }
    }
    roots.sort_by_key(|n| n.0);
    roots.dedup();
    Ok(roots)
}

/// Hydrate session `rec` from `remote` (see the module docs).
pub fn hydrate(
    store: &dyn ObjectStore,
    remote: &Remote,
    rec: &SessionRecord,
    progress: &mut dyn FnMut(Value),
) -> Result<HydrateReport> {
    let t0 = Instant::now();
    remote.index.refresh(&remote.client)?;
    // Checkpoint records the history names but this store lacks (a session
    // mounted from a remote has them; an older pull may not).
    let heads: Vec<String> = rec.head.iter().map(|h| h.to_hex()).collect();
    let cps = super::refs::fetch_checkpoints(store, &remote.client, heads)?;
    store.commit(cps)?;
    let roots = session_roots(store, rec)?;
    let src = Source::from(remote);
    let nf = NodeFetcher::new(store, &src);
    let read = |k: Kind, id: &ObjectId| nf.read(k, id);
    // Missing chunks the remote has are collected (not read); nodes are read
    // (fetched by whole node packs).
    let boundary = |id: &ObjectId| {
        src.index.get(id).is_some_and(|e| e.kind == Kind::Chunk)
            && !store.contains(id).unwrap_or(false)
    };
    let mut w = Walk::new(&read, ChunkCheck::Mark).with_boundary(&boundary);
    for r in &roots {
        w.root(&format!("session {}", rec.name), *r);
    }
    let missing_nodes = w.problems.len();
    for p in w.problems.iter().take(5) {
        log::warn!(
            "hydrate {}: {} at {}: {}",
            rec.name,
            p.owner,
            p.path,
            p.error
        );
    }
    store.commit(Vec::new())?;
    let node_stats = *nf.stats.lock().unwrap();
    let want: Vec<ObjectId> = w.at_boundary.iter().copied().collect();
    let total = want.len() as u64 + node_stats.objects;
    let mut tick = |f: fetch::Fetched| {
        progress(json!({"event": "progress", "phase": "hydrate",
                        "done": node_stats.objects + f.objects, "total": total,
                        "bytes": node_stats.bytes + f.bytes}));
    };
    tick(fetch::Fetched::default());
    let (got, unknown) = fetch::fetch_ids(store, &src, want, &mut tick)?;
    store.commit(Vec::new())?;
    Ok(HydrateReport {
        session: rec.name.clone(),
        remote: remote.config.name.clone(),
        objects: node_stats.objects + got.objects,
        bytes: node_stats.bytes + got.bytes,
        requests: node_stats.requests + got.requests,
        missing: missing_nodes + unknown.len(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}
