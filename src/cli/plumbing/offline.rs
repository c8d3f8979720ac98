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
use treefork::verbs;

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
        let sessions = treefork::session::list_records(&s)?
            .into_iter()
            .map(|r| verbs::sessions::SessionRow {
                life: treefork::lifecycle::manage::row_fields(&s, &r.name, r.created),
                name: r.name,
                state: "stopped".into(),
                mountpoint: None,
                bytes: r.bytes,
                inodes: r.inodes,
                live_inodes: None,
                updated: r.updated,
                root: r.root.to_hex(),
            })
            .collect();
        return answer(&verbs::sessions::SessionList { sessions });
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
            answer(&verbs::gc::Collected {
                gc: r,
                operations_pruned: pruned,
                discarded_removed: discarded,
                auto_refs_dropped: auto_refs,
            })?
        }
        Op::Fsck(treefork::verbs::Fsck { repair }) => {
            let held = Held::of(&s)?;
            let r = treefork::fsck::fsck(&s, held::boundary(&held), *repair, &mut report)?;
            answer(&verbs::fsck::Checked::new(r))?
        }
        Op::SessionRm(treefork::verbs::SessionRm { name }) => {
            treefork::lifecycle::retention::remove_session(&s, name)?;
            answer(&verbs::session_rm::SessionRemoved {
                removed: name.clone(),
            })?
        }
        Op::SessionShow(treefork::verbs::SessionShow { name: Some(name) }) => {
            answer(&treefork::lifecycle::manage::show(&s, name, None)?)?
        }
        Op::SessionExtend(treefork::verbs::SessionExtend {
            name,
            ttl_idle,
            ttl_absolute,
            evict_to,
        }) => {
            let info = treefork::lifecycle::manage::extend(
                &s,
                name,
                ttl_idle.clone(),
                ttl_absolute.clone(),
                evict_to.clone(),
            )?;
            answer(&verbs::session_extend::Extended {
                session: name.clone(),
                policy: info.policy,
            })?
        }
        Op::SessionDiscard(treefork::verbs::SessionDiscard { name }) => {
            treefork::lifecycle::manage::update(&s, name, &mut |i| {
                i.state = treefork::lifecycle::State::Discarded;
                i.evict_blocked = None;
                Ok(true)
            })?;
            answer(&verbs::session_discard::Discarded {
                session: name.clone(),
                discarded: true,
                unmounted: None,
            })?
        }
        Op::SessionSweep(treefork::verbs::SessionSweep {}) => {
            answer(&verbs::session_sweep::Swept::default())?
        }
        Op::Limits(treefork::verbs::Limits { set }) => {
            answer(&treefork::quota::run(&s, set.as_ref())?)?
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
            answer(&remote_add::commit(&s, ready)?)?
        }
        Op::RemoteList(treefork::verbs::RemoteList {}) => {
            answer(&treefork::remote::ops::remote_list::run(&s)?)?
        }
        Op::RemoteRm(treefork::verbs::RemoteRm { name }) => {
            answer(&treefork::remote::ops::remote_rm::run(&s, name)?)?
        }
        Op::RemoteTrust(treefork::verbs::RemoteTrust { name }) => {
            answer(&treefork::remote::ops::remote_trust::run(&s, name)?)?
        }
        Op::RemoteGc(treefork::verbs::RemoteGc {
            remote,
            dry_run,
            grace_secs,
        }) => answer(&treefork::remote::ops::remote_gc::run_store(
            &s,
            remote.clone(),
            *dry_run,
            *grace_secs,
        )?)?,
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
            answer(&treefork::remote::ops::push::run_store(
                &s,
                req,
                &mut events,
            )?)?
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
            answer(&treefork::remote::ops::store_trim::run(
                &s,
                &live,
                req,
                &mut events,
            )?)?
        }
        other => bail!("{} needs a running treefork daemon", other.name()),
    })
}

/// A verb's typed answer `r` in protocol form (`ok: true`).
fn answer<R: serde::Serialize>(r: &R) -> Result<Value> {
    Ok(ok(serde_json::to_value(r)?))
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
