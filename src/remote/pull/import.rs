//! Importing a remote session's log segments under a LOCAL session name: the
//! operation records, their attachments, the conversation and transcript
//! messages (with the `k/` id index rebuilt) and the touched paths.
//!
//! Invariants: every segment is verified by its hash (`segment::decode`) and
//! every record by its own decoder before anything is written; keys are built
//! with the local name and each record's `session` field is rewritten to it; an
//! entry already present locally is not written again (a re-import is
//! idempotent). The caller commits the returned ops together with the session
//! record, so a session never has half its log. An operation record's touched
//! branches (`before.branches` / `after.branches`) are dropped: they name
//! branches of the remote's store, and `undo` / `op restore` would otherwise move
//! the LOCAL branches of those names to checkpoints the remote chose.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::remote::client::Client;
use crate::remote::layout;
use crate::remote::segment::{self, SegEntry, Segment};
use crate::store::ObjectStore;

/// What importing segments yields.
#[derive(Debug, Default)]
pub struct Imported {
    /// Ops storing the entries (not committed).
    pub ops: Vec<MetaOp>,
    /// Checkpoints (hex) the records name (to fetch their records).
    pub checkpoints: Vec<String>,
    /// Workspace roots (hex) the records name.
    pub roots: Vec<String>,
    /// Operation records imported.
    pub operations: u64,
    /// Messages imported.
    pub messages: u64,
}

/// Download and import segments `hashes` (hex, oldest first) of remote session
/// logs as local session `local`.
pub fn import(
    store: &dyn ObjectStore,
    client: &Client,
    local: &str,
    hashes: &[String],
) -> Result<Imported> {
    let mut out = Imported::default();
    let mut touched: HashSet<Vec<u8>> = HashSet::new();
    each_segment(client, hashes, &mut |_, seg| {
        for e in seg.entries {
            entry(store, local, e, &mut out, &mut touched)?;
        }
        Ok(())
    })?;
    Ok(out)
}

/// Download segments `hashes` (hex, in order), each verified by its hash
/// (`segment::decode`), and hand each to `f` with its key, in order. A segment
/// the remote does not have is `Error::Remote` (a session ref names it).
pub fn each_segment(
    client: &Client,
    hashes: &[String],
    f: &mut dyn FnMut(&str, Segment) -> Result<()>,
) -> Result<()> {
    let keys: Vec<String> = hashes.iter().map(|h| layout::log_key(h)).collect();
    for ((h, k), got) in hashes
        .iter()
        .zip(&keys)
        .zip(client.get_many(&keys, layout::Body::LogSegment)?)
    {
        let got = got.ok_or_else(|| Error::Remote {
            remote: client.name().to_string(),
            detail: format!("{k} is named by a session ref but missing"),
        })?;
        f(k, segment::decode(&got.bytes, h)?)?;
    }
    Ok(())
}

fn with_session(mut v: Value, local: &str) -> Value {
    if let Some(o) = v.as_object_mut()
        && o.contains_key("session")
    {
        o.insert("session".into(), json!(local));
    }
    v
}

/// `v` (an operation record) without the branches it touched (see the module
/// docs).
fn without_branches(mut v: Value) -> Value {
    for side in ["before", "after"] {
        if let Some(view) = v.get_mut(side).and_then(Value::as_object_mut) {
            view.remove("branches");
        }
    }
    v
}

fn entry(
    store: &dyn ObjectStore,
    local: &str,
    e: SegEntry,
    out: &mut Imported,
    touched: &mut HashSet<Vec<u8>>,
) -> Result<()> {
    match e {
        SegEntry::Op { seq, v } => {
            let key = meta::op_key(local, seq);
            if store.meta_get(&key)?.is_some() {
                return Ok(());
            }
            let bytes =
                serde_json::to_vec(&without_branches(with_session(v, local))).expect("json");
            let op = crate::oplog::Operation::decode(&format!("{local}#{seq}"), &bytes)?;
            if op.seq != seq {
                return Err(Error::corrupt(
                    format!("remote operation {local}#{seq}"),
                    "its seq does not match its entry",
                ));
            }
            out.checkpoints.extend(op.checkpoints().map(|c| c.to_hex()));
            out.roots
                .extend([op.before.workspace.to_hex(), op.after.workspace.to_hex()]);
            out.ops.push(MetaOp::Put(key, bytes));
            out.operations += 1;
        }
        SegEntry::Attach { seq, tag, bytes } => {
            if tag == b'o' || tag == b'e' {
                out.ops
                    .push(MetaOp::Put(meta::attach_key(local, seq, tag), bytes));
            }
        }
        SegEntry::Msg { tag, seq, v } => {
            let key = meta::message_key(local, tag, seq);
            if !(tag == b'm' || tag == b't') || store.meta_get(&key)?.is_some() {
                return Ok(());
            }
            let bytes = serde_json::to_vec(&v).expect("json");
            let owner = format!("{local}#{}{seq}", tag as char);
            let m = crate::messages::Message::decode(&owner, &bytes)?;
            if m.seq != seq {
                return Err(Error::corrupt(
                    format!("remote message {owner}"),
                    "its seq does not match its entry",
                ));
            }
            out.checkpoints.extend(m.checkpoint.map(|c| c.to_hex()));
            out.roots.push(m.workspace.to_hex());
            let idx = json!({"stream": (tag as char).to_string(), "seq": seq});
            out.ops.push(MetaOp::Put(key, bytes));
            out.ops.push(MetaOp::Put(
                meta::message_id_key(local, &m.id),
                serde_json::to_vec(&idx).expect("json"),
            ));
            out.messages += 1;
        }
        SegEntry::Touched { path } => {
            if touched.insert(path.clone()) {
                out.ops
                    .push(MetaOp::Put(meta::touched_key(local, &path), Vec::new()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::{Actor, NewOp, View};
    use crate::remote::client::PutIf;
    use crate::remote::segment::Segment;
    use crate::store::MemStore;

    #[test]
    fn imported_operations_name_no_local_branches() {
        let id = |cp: &str| crate::id::CheckpointId::from_hex(&cp.repeat(64));
        let view = |cp: &str| View {
            head: id(cp),
            branch: Some("main".into()),
            workspace: crate::id::NodeId([0; 32]),
            branches: [("main".to_string(), id(cp))].into(),
        };
        let op = NewOp::new(
            &Actor::daemon(),
            "checkpoint",
            json!({}),
            view("a"),
            view("b"),
        )
        .build("remote-s", 1);
        let seg = Segment {
            session: "remote-s".into(),
            entries: vec![SegEntry::Op {
                seq: 1,
                v: serde_json::to_value(&op).unwrap(),
            }],
        };
        let (hash, bytes) = segment::encode(&seg);
        let client = Client::memory("evil");
        client
            .put(&layout::log_key(&hash), bytes, PutIf::Always)
            .unwrap();
        let store = MemStore::default();
        let imp = import(&store, &client, "s", &[hash]).unwrap();
        store.commit(imp.ops).unwrap();
        let got = store.meta_get(&meta::op_key("s", 1)).unwrap().unwrap();
        let got = crate::oplog::Operation::decode("s#1", &got).unwrap();
        assert!(got.before.branches.is_empty() && got.after.branches.is_empty());
        assert_eq!(got.session, "s");
        assert_eq!(got.after.head, id("b"));
    }
}
