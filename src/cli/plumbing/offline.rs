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
    if let Op::Sessions(treefork::verbs::Sessions {}) = op {
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
    let s = if matches!(op, Op::Fsck(treefork::verbs::Fsck { repair: true })) {
        PackStore::open_for_repair(store)?
    } else {
        PackStore::open(store)?
    };
    Ok(match op {
        Op::Gc(treefork::verbs::Gc { dry_run }) => {
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
        Op::Fsck(treefork::verbs::Fsck { repair }) => {
            let held = Held::of(&s)?;
            let r = treefork::fsck::fsck(&s, held::boundary(&held), *repair, &mut report)?;
            let clean = r.clean();
            json!({ "ok": true, "fsck": r, "clean": clean })
        }
        Op::SessionRm(treefork::verbs::SessionRm { name }) => {
            treefork::lifecycle::retention::remove_session(&s, name)?;
            json!({ "ok": true, "removed": name })
        }
        Op::SessionShow(treefork::verbs::SessionShow { name: Some(name) }) => {
            treefork::lifecycle::manage::show(&s, name, None)?
        }
        Op::SessionExtend(treefork::verbs::SessionExtend {
            name,
            ttl_idle,
            ttl_absolute,
            evict_to,
        }) => treefork::lifecycle::manage::extend(
            &s,
            name,
            ttl_idle.clone(),
            ttl_absolute.clone(),
            evict_to.clone(),
        )?,
        Op::SessionDiscard(treefork::verbs::SessionDiscard { name }) => {
            treefork::lifecycle::manage::update(&s, name, &mut |i| {
                i.state = treefork::lifecycle::State::Discarded;
                i.evict_blocked = None;
                Ok(true)
            })?;
            json!({"session": name, "discarded": true, "unmounted": null})
        }
        Op::SessionSweep(treefork::verbs::SessionSweep {}) => {
            json!({"evicted": [], "busy": [], "expired": []})
        }
        Op::Limits(treefork::verbs::Limits { set }) => {
            let mut v = treefork::quota::run(&s, set.as_ref())?;
            v["ok"] = json!(true);
            v
        }
        Op::RemoteAdd(treefork::verbs::RemoteAdd {
            name,
            url,
            endpoint,
            region,
            single_writer,
        }) => {
            use treefork::remote::ops::remote_add;
            let req = remote_add::Request {
                name,
                url,
                endpoint,
                region: region.as_deref(),
                single_writer: *single_writer,
            };
            let ready = remote_add::prepare(&s, &req)?;
            ok(remote_add::commit(&s, ready)?)
        }
        Op::RemoteList(treefork::verbs::RemoteList {}) => {
            ok(treefork::remote::ops::remote_list::run(&s)?)
        }
        Op::RemoteRm(treefork::verbs::RemoteRm { name }) => {
            ok(treefork::remote::ops::remote_rm::run(&s, name)?)
        }
        Op::RemoteTrust(treefork::verbs::RemoteTrust { name }) => {
            ok(treefork::remote::ops::remote_trust::run(&s, name)?)
        }
        Op::RemoteGc(treefork::verbs::RemoteGc {
            remote,
            dry_run,
            grace_secs,
        }) => ok(treefork::remote::ops::remote_gc::run_store(
            &s,
            remote.clone(),
            *dry_run,
            *grace_secs,
        )?),
        Op::Push(treefork::verbs::Push {
            remote,
            refs,
            session,
            force,
        }) => {
            let mut events = |e: Value| {
                let n = |k: &str| e[k].as_u64().unwrap_or(0);
                report("upload", n("done"), n("total"));
            };
            let req = treefork::remote::ops::push::Request {
                remote: remote.clone(),
                refs: refs.clone(),
                session: session.clone(),
                force: *force,
            };
            ok(treefork::remote::ops::push::run_store(
                &s,
                req,
                &mut events,
            )?)
        }
        Op::StoreTrim(treefork::verbs::StoreTrim {
            older_than,
            keep_sessions,
            dry_run,
        }) => {
            let mut events = |e: Value| {
                let n = |k: &str| e[k].as_u64().unwrap_or(0);
                report(e["phase"].as_str().unwrap_or("trim"), n("done"), n("total"));
            };
            let live = treefork::gc::Offline;
            let req = treefork::remote::ops::store_trim::request(
                older_than.as_deref(),
                *keep_sessions,
                *dry_run,
            )?;
            ok(treefork::remote::ops::store_trim::run(
                &s,
                &live,
                req,
                &mut events,
            )?)
        }
        other => bail!("{} needs a running treefork daemon", other.name()),
    })
}

/// A successful answer `v` in protocol form (`ok: true`).
fn ok(mut v: Value) -> Value {
    v["ok"] = json!(true);
    v
}

/// The retention work of the daemon's `gc` (the same pass, `lifecycle::retention`):
/// (records, sessions, refs) removed.
fn retention(s: &PackStore) -> Result<(usize, usize, usize)> {
    use treefork::lifecycle::retention;
    let retain = treefork::daemon::sweep::DEFAULT_DISCARD_SECS;
    let p = retention::run(s, retain, treefork::clock::unix_secs(), &mut |name| {
        retention::remove_session(s, name)
    })?;
    Ok((p.operations, p.sessions, p.auto_refs))
}
