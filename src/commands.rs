//! Session operations served on the control sockets: checkpoint, log, status,
//! branches, checkout, fork, diff, restore, config, and automatic checkpoints.
//!
//! Each op runs under its session's op lock (so a checkout waits for a running
//! checkpoint), first pushes the kernel's writeback cache to the daemon with
//! `syncfs(2)` (so what programs wrote is included), and sends kernel cache
//! invalidations only after every session lock is released.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::control::Op;
use crate::daemon::Daemon;
use crate::diff;
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::refs::{self, Checkpoint};
use crate::session::snapshot::Inval;
use crate::session::{self, Session, now_ms};
use crate::store::ObjectStore;
use crate::tree::Timespec;

/// Default number of log entries.
pub const DEFAULT_LOG_LIMIT: usize = 20;

struct Target {
    session: Arc<Session>,
    mountpoint: PathBuf,
    notifier: fuser::Notifier,
}

fn target(d: &Daemon, name: Option<&str>) -> Result<Target> {
    let m = d.mounts();
    let found = match name {
        Some(n) => m.iter().find(|(_, v)| v.session.name() == n),
        None if m.len() == 1 => m.iter().next(),
        None => {
            return Err(Error::Invalid(
                "which session? run the command inside a workspace, use -C PATH, or name the session".into(),
            ));
        }
    };
    let (mp, v) = found.ok_or_else(|| {
        Error::NotFound(format!("session {} is not mounted", name.unwrap_or("?")))
    })?;
    Ok(Target {
        session: v.session.clone(),
        mountpoint: mp.clone(),
        notifier: v.notifier.clone(),
    })
}

/// Push the kernel's dirty pages of the mount at `mp` to the daemon.
fn syncfs(mp: &Path) -> Result<()> {
    let f = std::fs::File::open(mp).map_err(|e| Error::io(mp, e))?;
    // SAFETY: syncfs on a valid fd we own.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) } != 0 {
        return Err(Error::io(mp, std::io::Error::last_os_error()));
    }
    Ok(())
}

fn send_invals(t: &Target, inval: Vec<Inval>) {
    for i in inval {
        let r = match &i {
            Inval::Entry(parent, name) => t
                .notifier
                .inval_entry(fuser::INodeNo(*parent), std::ffi::OsStr::from_bytes(name)),
            Inval::Inode(ino) => t.notifier.inval_inode(fuser::INodeNo(*ino), 0, 0),
        };
        if let Err(e) = r {
            // ENOENT: the kernel had nothing cached for it.
            if e.raw_os_error() != Some(libc::ENOENT) {
                log::warn!("invalidation {i:?} failed: {e}");
            }
        }
    }
}

fn ckpt_json(c: &Checkpoint) -> Value {
    json!({
        "id": c.id, "short": &c.id[..12], "session": c.session, "root": c.root,
        "parent": c.parent(), "parents": c.parents, "meta": c.meta, "time_ns": c.time_ns.to_string(),
        "time": (c.time_ns / 1_000_000_000) as i64,
        "message": c.message, "trigger": c.trigger, "files_changed": c.files_changed,
    })
}

fn auto_ref(kind: &str) -> String {
    let t = Timespec::now();
    format!("auto/{kind}-{}{:09}", t.sec, t.nsec)
}

/// Save pending changes as a checkpoint under an `auto/...` ref, if there are any.
fn save_pending(s: &Session, kind: &str, what: &str) -> Result<Option<(Checkpoint, String)>> {
    if !s.has_changes()? && s.record().head.is_some() {
        return Ok(None);
    }
    let name = auto_ref(kind);
    let c = s.checkpoint(&format!("auto: before {what}"), kind, Some(&name))?;
    Ok(Some((c, name)))
}

type Saved = Option<(Checkpoint, String)>;

/// Save pending changes, then graft `target` — retrying when programs wrote in
/// between, so no acknowledged write is left out of both the saved checkpoint and
/// the new tree.
fn save_and_graft(
    t: &Target,
    kind: &str,
    what: &str,
    target: NodeId,
    paths: Option<&[Vec<u8>]>,
) -> Result<(Saved, Vec<Inval>)> {
    let mut saved_any = None;
    for _ in 0..5 {
        // syncfs first: it makes the kernel send writes, which need the gate.
        let t0 = std::time::Instant::now();
        syncfs(&t.mountpoint)?;
        let t_sync = t0.elapsed();
        // Writes wait (a few ms) until the tree is swapped: nothing falls between
        // the save and the graft. The generation check stays as a guard.
        let _gate = t.session.gate.write().unwrap();
        let generation = t.session.generation();
        let saved = save_pending(&t.session, kind, what)?;
        if saved.is_some() {
            saved_any = saved;
        }
        let t_save = t0.elapsed();
        let (inval, r) = t.session.graft(target, paths, Some(generation));
        log::debug!(
            "{what}: syncfs {t_sync:?} save {:?} graft {:?}",
            t_save - t_sync,
            t0.elapsed() - t_save
        );
        match r {
            Err(Error::Conflict(_)) if inval.is_empty() => continue,
            Ok(()) => return Ok((saved_any, inval)),
            Err(e) => {
                // A graft that failed midway changed part of the tree: the kernel
                // must forget what it changed all the same.
                send_invals(t, inval);
                return Err(e);
            }
        }
    }
    Err(Error::Conflict(format!(
        "{what}: the workspace kept changing while being saved; retry when writers pause"
    )))
}

/// The checkpoint named by `from`, or (without it) HEAD — checkpointing the live
/// state first when it has changes or the session has no checkpoint yet.
fn ref_or_fresh(
    t: &Target,
    from: Option<&str>,
    message: &str,
    trigger: &str,
) -> Result<Checkpoint> {
    let s = &t.session;
    if let Some(spec) = from {
        return refs::resolve(&**s.store(), s.record().head.as_deref(), spec);
    }
    syncfs(&t.mountpoint)?;
    if s.record().head.is_none() || s.has_changes()? {
        s.checkpoint(message, trigger, None)
    } else {
        refs::resolve(&**s.store(), s.record().head.as_deref(), "HEAD")
    }
}

fn working_root(t: &Target) -> Result<NodeId> {
    syncfs(&t.mountpoint)?;
    t.session.flush()
}

/// The root of a diff side: a ref, or `WORKING` for the live state.
fn side_root(t: &Target, spec: &str) -> Result<NodeId> {
    if spec == "WORKING" {
        return working_root(t);
    }
    let head = t.session.record().head;
    refs::resolve(&**t.session.store(), head.as_deref(), spec)?.root_id()
}

fn under(path: &[u8], prefixes: &[Vec<u8>]) -> bool {
    prefixes.is_empty()
        || prefixes.iter().any(|p| {
            p.is_empty()
                || path == &p[..]
                || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
        })
}

/// A path argument as a normalized workspace path: relative to the workspace root,
/// no NUL, no `..` (refused, not resolved), empty and `.` components dropped (the
/// empty result is the whole tree).
fn clean_path(p: &str) -> Result<Vec<u8>> {
    if p.contains('\0') {
        return Err(Error::Invalid(format!("path {p:?} contains a NUL byte")));
    }
    if p.starts_with('/') {
        return Err(Error::Invalid(format!(
            "path {p:?} must be relative to the workspace root"
        )));
    }
    let comps: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.contains(&"..") {
        return Err(Error::Invalid(format!(
            "path {p:?} must stay inside the workspace (no '..')"
        )));
    }
    Ok(comps.join("/").into_bytes())
}

/// Refuse a path that goes *through* a symbolic link in the tree `root` (`what`
/// names the tree in the message): links are never followed, and grafting the link
/// instead would change more than the caller named.
fn refuse_symlink_prefix(
    store: &dyn ObjectStore,
    root: NodeId,
    what: &str,
    path: &[u8],
) -> Result<()> {
    let tree = diff::Tree::load(store, root)?;
    if let Some(link) = tree.symlink_prefix(store, path)? {
        return Err(Error::Invalid(format!(
            "path {:?} goes through the symbolic link {:?} in {what}; symbolic links are not followed (name the link itself to restore it)",
            String::from_utf8_lossy(path),
            String::from_utf8_lossy(&link)
        )));
    }
    Ok(())
}

/// Run a session op.
pub fn run(d: &Daemon, session: Option<&str>, op: Op) -> Result<Value> {
    let store: Arc<dyn ObjectStore> = d.store().clone();
    match op {
        Op::Branches => {
            let mut list = Vec::new();
            for (name, r) in refs::list_refs(&*store)? {
                let c = CheckpointId::from_hex(&r.checkpoint)
                    .and_then(|id| refs::load(&*store, &id).ok());
                list.push(json!({
                    "name": name, "checkpoint": r.checkpoint, "created": r.created,
                    "message": c.as_ref().map(|c| c.message.clone()),
                    "session": c.as_ref().map(|c| c.session.clone()),
                }));
            }
            return Ok(json!({"branches": list}));
        }
        Op::BranchDelete { name } => {
            if refs::get_ref(&*store, &name)?.is_none() {
                return Err(Error::NotFound(format!("no branch named {name:?}")));
            }
            store.commit(vec![refs::delete_ref_op(&name)])?;
            return Ok(json!({"deleted": name}));
        }
        _ => {}
    }
    let t = target(d, session)?;
    let s = t.session.clone();
    let _op = s.op_lock.lock().unwrap();
    match op {
        Op::Checkpoint { message, trigger } => {
            refs::validate_requested_trigger(&trigger)?;
            syncfs(&t.mountpoint)?;
            let c = s.checkpoint(&message, &trigger, None)?;
            Ok(json!({"checkpoint": ckpt_json(&c)}))
        }
        Op::Log { limit } => {
            let limit = limit.unwrap_or(DEFAULT_LOG_LIMIT);
            let mut out = Vec::new();
            let mut cur = s.record().head;
            while let Some(id) = cur.as_deref().and_then(CheckpointId::from_hex) {
                if out.len() >= limit {
                    break;
                }
                let c = refs::load(&*store, &id)?;
                cur = c.parent().map(str::to_string);
                out.push(ckpt_json(&c));
            }
            Ok(json!({"checkpoints": out}))
        }
        Op::Status => {
            let root = working_root(&t)?;
            let entries = diff::diff_roots(&*store, s.base_root()?, root)?;
            let list: Vec<Value> = entries
                .iter()
                .map(|e| json!({"path": e.path_str(), "change": e.change}))
                .collect();
            Ok(json!({"head": s.record().head, "changes": list}))
        }
        Op::Branch { name, from } => {
            refs::validate_ref_name(&name)?;
            if refs::get_ref(&*store, &name)?.is_some() {
                return Err(Error::Conflict(format!("branch {name:?} already exists")));
            }
            let c = ref_or_fresh(&t, from.as_deref(), &format!("branch {name}"), "manual")?;
            let r = refs::RefRecord {
                checkpoint: c.id.clone(),
                created: Timespec::now().sec,
            };
            store.commit(vec![refs::ref_op(&name, &r)])?;
            Ok(json!({"branch": name, "checkpoint": c.id}))
        }
        Op::Checkout { target: spec } => {
            let head = s.record().head;
            let c = refs::resolve(&*store, head.as_deref(), &spec)?;
            let t0 = std::time::Instant::now();
            let (saved, inval) = save_and_graft(
                &t,
                "before-checkout",
                &format!("checkout of {spec}"),
                c.root_id()?,
                None,
            )?;
            let t1 = t0.elapsed();
            s.commit_checkout(&c.id, c.root_id()?)?;
            let t2 = t0.elapsed();
            let n = inval.len();
            send_invals(&t, inval);
            log::debug!(
                "checkout {spec}: sync+save+graft {t1:?} commit {:?} {n} invalidations {:?}",
                t2 - t1,
                t0.elapsed() - t2
            );
            Ok(json!({
                "checkpoint": ckpt_json(&c),
                "saved": saved.map(|(c, r)| json!({"checkpoint": c.id, "ref": r})),
            }))
        }
        Op::Fork {
            name,
            from,
            mountpoint,
            agent_socket,
            agent_uid,
        } => {
            let agent = crate::daemon::AgentSocket::from_request(agent_socket, agent_uid)?;
            session::validate_session_name(&name)?;
            if session::load_record(&*store, &name)?.is_some() {
                return Err(Error::Conflict(format!("session {name} already exists")));
            }
            if !mountpoint.is_absolute() {
                return Err(Error::Invalid(format!(
                    "mountpoint {} must be absolute",
                    mountpoint.display()
                )));
            }
            crate::daemon::check_mountpoint(&mountpoint, &|| d.is_dead_mount_of_ours(&mountpoint))?;
            let c = ref_or_fresh(&t, from.as_deref(), &format!("fork {name}"), "fork")?;
            let root = c.root_id()?;
            let mut rec = session::new_record(&name, root, s.usage().0, s.usage().1)?;
            rec.head = Some(c.id.clone());
            rec.config = s.record().config;
            store.commit(vec![session::record_op(&rec)])?;
            drop(_op);
            match d.mount_record(&name, &mountpoint, Some(rec), None, agent, &mut |_| {}) {
                Ok(mut v) => {
                    v["checkpoint"] = json!(c.id);
                    Ok(v)
                }
                Err(e) => {
                    // Nothing half-made stays behind.
                    let _ = store.commit(vec![crate::meta::MetaOp::Delete(
                        crate::meta::session_key(&name),
                    )]);
                    Err(e)
                }
            }
        }
        Op::Diff { a, b, mode } => {
            let mode = mode.unwrap_or_else(|| "name-status".into());
            if !["name-status", "stat", "patch"].contains(&mode.as_str()) {
                return Err(Error::Invalid(format!(
                    "unknown diff mode {mode:?} (name-status, stat, patch)"
                )));
            }
            let ra = match a.as_deref() {
                Some(spec) => side_root(&t, spec)?,
                None if s.record().head.is_some() => side_root(&t, "HEAD")?,
                None => s.base_root()?,
            };
            let rb = side_root(&t, b.as_deref().unwrap_or("WORKING"))?;
            let entries = diff::diff_roots(&*store, ra, rb)?;
            let mut list = Vec::new();
            let mut text = String::new();
            for e in &entries {
                let mut v = json!({"path": e.path_str(), "change": e.change});
                if mode == "stat" {
                    match diff::line_counts(&*store, e)? {
                        Some((add, del)) => {
                            v["added"] = json!(add);
                            v["removed"] = json!(del);
                        }
                        None => v["binary"] = json!(true),
                    }
                }
                if mode == "patch" {
                    text.push_str(&diff::patch(&*store, e)?);
                }
                list.push(v);
            }
            Ok(
                json!({"a": ra.to_hex(), "b": rb.to_hex(), "entries": list, "patch": if mode == "patch" { Some(text) } else { None }}),
            )
        }
        Op::Restore {
            target: spec,
            paths,
            dry_run,
        } => {
            let c = refs::resolve(&*store, s.record().head.as_deref(), &spec)?;
            let paths: Vec<Vec<u8>> = paths.iter().map(|p| clean_path(p)).collect::<Result<_>>()?;
            let root = working_root(&t)?;
            for p in &paths {
                refuse_symlink_prefix(&*store, root, "the working tree", p)?;
                refuse_symlink_prefix(&*store, c.root_id()?, &spec, p)?;
            }
            let plan: Vec<Value> = diff::diff_roots(&*store, root, c.root_id()?)?
                .iter()
                .filter(|e| under(&e.path, &paths))
                .map(|e| json!({"path": e.path_str(), "change": e.change}))
                .collect();
            if dry_run {
                return Ok(json!({"dry_run": true, "changes": plan}));
            }
            if plan.is_empty() {
                return Ok(json!({"dry_run": false, "changes": plan, "saved": null}));
            }
            let only = if paths.is_empty() || paths.iter().any(|p| p.is_empty()) {
                None
            } else {
                Some(&paths[..])
            };
            let (saved, inval) = save_and_graft(
                &t,
                "before-restore",
                &format!("restore of {spec}"),
                c.root_id()?,
                only,
            )?;
            s.flush()?;
            send_invals(&t, inval);
            Ok(json!({
                "dry_run": false, "changes": plan,
                "saved": saved.map(|(c, r)| json!({"checkpoint": c.id, "ref": r})),
            }))
        }
        Op::Config { set } => {
            let mut cfg = s.record().config;
            if let Some(set) = set {
                let mut v = serde_json::to_value(&cfg).unwrap();
                for (k, val) in set {
                    if v.get(&k).is_none() {
                        return Err(Error::Invalid(format!("unknown setting {k:?}")));
                    }
                    v[&k] = val;
                }
                cfg = serde_json::from_value(v)
                    .map_err(|e| Error::Invalid(format!("bad setting: {e}")))?;
                let new = cfg.clone();
                let mut extra = |rec: &mut session::SessionRecord, _: NodeId| -> Result<Vec<_>> {
                    rec.config = new.clone();
                    Ok(vec![])
                };
                s.flush_with(Some(&mut extra))?;
            }
            Ok(json!({"config": cfg}))
        }
        _ => Err(Error::Invalid("not a session operation".into())),
    }
}

/// Take automatic checkpoints where a session's settings ask for them.
pub fn auto_checkpoints(d: &Daemon) {
    let now = now_ms();
    let due: Vec<(PathBuf, Arc<Session>)> = d
        .mounts()
        .iter()
        .filter_map(|(mp, m)| {
            let cfg = m.session.record().config;
            let (muts, last) = m.session.activity();
            let min_gap = cfg.auto_checkpoint_min_interval_secs * 1000;
            let by_ops = cfg.auto_checkpoint_ops > 0 && muts >= cfg.auto_checkpoint_ops;
            let by_idle = cfg.auto_checkpoint_idle_secs > 0
                && muts > 0
                && now.saturating_sub(last) >= cfg.auto_checkpoint_idle_secs * 1000;
            ((by_ops || by_idle) && now.saturating_sub(m.last_auto_ms) >= min_gap)
                .then(|| (mp.clone(), m.session.clone()))
        })
        .collect();
    for (mp, s) in due {
        let Ok(_g) = s.op_lock.try_lock() else {
            continue;
        };
        let r = syncfs(&mp).and_then(|_| {
            let (muts, _) = s.activity();
            s.checkpoint(&format!("auto: {muts} changes"), "auto", None)
        });
        match r {
            Ok(c) => log::info!("session {}: automatic checkpoint {}", s.name(), &c.id[..12]),
            Err(e) => log::error!("session {}: automatic checkpoint failed: {e}", s.name()),
        }
        if let Some(m) = d.mounts().get_mut(&mp) {
            m.last_auto_ms = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_filters() {
        assert!(under(b"a/b", &[b"a".to_vec()]));
        assert!(!under(b"ab", &[b"a".to_vec()]));
        assert!(under(b"x", &[]));
        assert_eq!(clean_path("a/./b/").unwrap(), b"a/b");
        assert!(clean_path("a/../../etc").is_err());
        assert!(clean_path("a/../b").is_err());
        assert!(clean_path("/etc/passwd").is_err());
        assert!(clean_path("a\0b").is_err());
        assert_eq!(clean_path(".").unwrap(), b"");
        assert_eq!(clean_path("").unwrap(), b"");
    }
}
