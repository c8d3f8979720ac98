//! Store-wide ops run in this process when no daemon serves the store: the same
//! library calls the daemon makes, under the store lock, answering the same JSON.

use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use treefork::store::PackStore;

use super::{Op, Progress};

/// Run `op` on the store at `store` (no daemon serves it).
pub fn run(store: &Path, op: &Op, progress: &mut dyn FnMut(Progress)) -> Result<Value> {
    let mut report = |phase: &str, done: u64, total: u64| {
        progress(Progress {
            phase: Some(phase),
            done,
            total,
        })
    };
    if let Op::Sessions = op {
        let _lock = treefork::lock::StoreLock::acquire(store)?;
        let s = PackStore::open(store)?;
        let list: Vec<Value> = treefork::session::list_records(&s)?
            .into_iter()
            .map(|r| {
                json!({"name": r.name, "state": "stopped", "mountpoint": null,
                "bytes": r.bytes, "inodes": r.inodes, "updated": r.updated, "root": r.root})
            })
            .collect();
        return Ok(json!({"ok": true, "sessions": list}));
    }
    if !store.join(treefork::store::STORE_FILE).exists() {
        bail!("{} is not a treefork store", store.display());
    }
    let _lock = treefork::lock::StoreLock::acquire(store)?;
    let s = if matches!(op, Op::Fsck { repair: true }) {
        PackStore::open_for_repair(store)?
    } else {
        PackStore::open(store)?
    };
    Ok(match op {
        Op::Gc { dry_run } => {
            let r = treefork::gc::gc(&s, &treefork::gc::Offline, *dry_run, &mut report)?;
            json!({ "gc": r })
        }
        Op::Fsck { repair } => {
            let r = treefork::fsck::fsck(&s, *repair, &mut report)?;
            let clean = r.clean();
            json!({ "fsck": r, "clean": clean })
        }
        Op::SessionRm { name } => {
            treefork::session::remove_record(&s, name)?;
            json!({ "removed": name })
        }
        other => bail!("{} needs a running treefork daemon", other.name()),
    })
}
