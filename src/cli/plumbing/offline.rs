//! Store-wide ops run in this process when no daemon serves the store: the same
//! library calls the daemon makes, under the store lock, answering the same JSON
//! (`ok` included), so a `--json` document has one shape whoever answered.
//! Offline `gc` does the daemon's retention work too (operation records, `auto/`
//! refs, sessions discarded longer than the default retention) and reports it
//! under the same keys.

use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use treefork::remote::held::{self, Held};
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
                let life = treefork::lifecycle::manage::row_fields(&s, &r.name, r.created);
                let mut row = json!({"name": r.name, "state": "stopped", "mountpoint": null,
                "bytes": r.bytes, "inodes": r.inodes, "updated": r.updated, "root": r.root});
                if let Some(o) = row.as_object_mut() {
                    o.extend(life);
                }
                row
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
            let (pruned, discarded, auto_refs) = if *dry_run { (0, 0, 0) } else { retention(&s)? };
            let held = Held::of(&s)?;
            let r = treefork::gc::gc(
                &s,
                &treefork::gc::Offline,
                held::boundary(&held),
                *dry_run,
                &mut report,
            )?;
            json!({
                "ok": true,
                "gc": r,
                "operations_pruned": pruned,
                "discarded_removed": discarded,
                "auto_refs_dropped": auto_refs,
            })
        }
        Op::Fsck { repair } => {
            let held = Held::of(&s)?;
            let r = treefork::fsck::fsck(&s, held::boundary(&held), *repair, &mut report)?;
            let clean = r.clean();
            json!({ "ok": true, "fsck": r, "clean": clean })
        }
        Op::SessionRm { name } => {
            treefork::lifecycle::retention::remove_session(&s, name)?;
            json!({ "ok": true, "removed": name })
        }
        Op::SessionShow { name: Some(name) } => treefork::lifecycle::manage::show(&s, name, None)?,
        Op::SessionExtend {
            name,
            ttl_idle,
            ttl_absolute,
            evict_to,
        } => {
            let change = treefork::lifecycle::manage::PolicyChange {
                ttl_idle: ttl_idle.clone(),
                ttl_absolute: ttl_absolute.clone(),
                evict_to: evict_to.clone(),
                ..Default::default()
            };
            change.validate()?;
            change.check_remote(&s)?;
            let now = treefork::lifecycle::manage::now();
            let info = treefork::lifecycle::manage::update(&s, name, &mut |i| {
                change.apply(i, now)?;
                i.last_access = now;
                Ok(true)
            })?;
            json!({"session": name, "policy": info.policy})
        }
        Op::SessionDiscard { name } => {
            treefork::lifecycle::manage::update(&s, name, &mut |i| {
                i.state = treefork::lifecycle::State::Discarded;
                i.evict_blocked = None;
                Ok(true)
            })?;
            json!({"session": name, "discarded": true, "unmounted": null})
        }
        Op::SessionSweep => json!({"evicted": [], "busy": [], "expired": []}),
        Op::Limits { set } => {
            let mut v = treefork::quota::run(&s, set.as_ref())?;
            v["ok"] = json!(true);
            v
        }
        op @ (Op::RemoteAdd { .. }
        | Op::RemoteList
        | Op::RemoteRm { .. }
        | Op::RemoteTrust { .. }
        | Op::RemoteGc { .. }) => {
            let mut v = treefork::remote::ops::run_store(&s, op.clone(), &mut |_| {})?;
            v["ok"] = json!(true);
            v
        }
        op @ Op::Push { .. } => {
            let mut events = |e: Value| {
                let n = |k: &str| e[k].as_u64().unwrap_or(0);
                report("upload", n("done"), n("total"));
            };
            let mut v = treefork::remote::ops::run_store(&s, op.clone(), &mut events)?;
            v["ok"] = json!(true);
            v
        }
        op @ Op::StoreTrim { .. } => {
            let mut events = |e: Value| {
                let n = |k: &str| e[k].as_u64().unwrap_or(0);
                report(e["phase"].as_str().unwrap_or("trim"), n("done"), n("total"));
            };
            let live = treefork::gc::Offline;
            let mut v = treefork::remote::ops::store_trim::run(&s, &live, op, &mut events)?;
            v["ok"] = json!(true);
            v
        }
        other => bail!("{} needs a running treefork daemon", other.name()),
    })
}

/// The retention work of the daemon's `gc` (the same pass, `lifecycle::retention`):
/// (records, sessions, refs) removed.
fn retention(s: &PackStore) -> Result<(usize, usize, usize)> {
    use treefork::lifecycle::{manage, retention};
    let retain = treefork::daemon::sweep::DEFAULT_DISCARD_SECS;
    let p = retention::run(s, retain, manage::now(), &mut |name| {
        retention::remove_session(s, name)
    })?;
    Ok((p.operations, p.sessions, p.auto_refs))
}
