//! After a `commit` promote: the workspace's own git repository (the `.git` the
//! session imported with the work tree) takes the promote commit in, as if the
//! agent had made it — fetched from the durable repository, its branch moved
//! there and its index read from it — so `git status` in the workspace shows only
//! what was not promoted.
//!
//! The session's baseline moves to the promote commit too when the durable
//! branch had nothing new since the baseline ([`advanced_baseline`]): the
//! baseline tree then gains exactly what was promoted.
//!
//! Only when that is safe to do without asking: the workspace's HEAD is the
//! origin's branch and that branch names a commit of the promote commit's own
//! history in the durable repository — the commit it built on, the baseline, or
//! an older baseline (after `treefork rebase` the baseline is the repository's
//! newer head while the workspace's git still names the one it was imported
//! at) — so the move is a fast-forward and hides no commit of the agent's own.
//! Otherwise nothing changes and the answer says why.
//!
//! **No git runs in the workspace** (its `.git` is the agent's: hooks, fsmonitor,
//! filters, includes, alternates, a `gitdir:` file are all ways to make whoever
//! runs git there run the agent's code). Git runs only on the durable repository
//! (hardened, [`crate::lifecycle::git`]): it checks the workspace's branch W is
//! in C's history (`merge-base --is-ancestor W C`, W read from the session's tree
//! and checked to be an object id), lists the objects the workspace lacks
//! (`rev-list --objects C --not W`), their bytes (`cat-file
//! --batch`, checked against their ids, at most [`MAX_TAKE_IN`]) and C's tree
//! (`ls-tree -r`). What `git fetch` + `update-ref` + `read-tree` did is then
//! written through the session with the workspace held (its write gate: nothing
//! lands between the check and the write): loose objects, the index (version 2,
//! `gitfmt`), the branch's loose ref, owned by the owner of `.git`; every path
//! component must be a directory of the session's tree (never a symbolic link).
//! No reflog entry is written. A failure is reported, never fatal: the promote
//! itself has landed.

use super::answer::{Committed, Landed};
use super::gitfmt;
use super::gitio::Git;
use super::{Ground, Strategy};
use crate::id::NodeId;
use crate::lifecycle::Origin;
use crate::merge::{self, Theirs};
use crate::ops::Target;
use crate::session::Session;
use crate::session::posix::NewNode;
use crate::tree::Kind;

/// After a landed promote: the new baseline (a `commit` promote built on the
/// baseline) and the note on the workspace's git.
pub(super) fn after(
    t: &Target,
    ground: &Ground,
    landed: &Landed,
    strategy: Strategy,
) -> (Option<(String, NodeId)>, Option<String>) {
    match (ground, &landed.commit, strategy) {
        (Ground::Repo { origin, .. }, Some(c), Strategy::Commit) => {
            (advanced_baseline(t, origin, c), take_in(t, origin, c))
        }
        _ => (None, None),
    }
}

/// The new baseline after commit `c` (its commit and tree) when the promote
/// built on the baseline itself: the baseline tree with what git changed from
/// the baseline to `c` (the promoted paths) taken in. `None` otherwise (others'
/// commits came first: only a rebase takes those in) or when it cannot be read.
fn advanced_baseline(t: &Target, origin: &Origin, c: &Committed) -> Option<(String, NodeId)> {
    if origin.baseline.as_deref() != Some(c.parent.as_str()) {
        return None;
    }
    let git = Git::new(&origin.path);
    let base = NodeId::from_hex(&origin.baseline_root)?;
    let r = crate::ops::merge::rebase::git_changes(&git, &c.parent, &c.sha)
        .and_then(|changes| merge::merge(&t.session, base, &changes, Theirs::Blobs));
    match r {
        Ok(m) => Some((c.sha.clone(), m.root)),
        // The promote has landed; the baseline stays where it was (a later
        // rebase takes the commit in).
        Err(e) => {
            ::log::warn!(
                "session {}: promote: the baseline does not move to {}: {e}",
                t.session.name(),
                c.sha
            );
            None
        }
    }
}

/// The most object bytes a promote takes into the workspace's repository (the
/// objects are read from the durable repository before the workspace is held).
const MAX_TAKE_IN: u64 = 256 << 20;

/// Take commit `c` into the workspace's repository; a note saying what happened.
fn take_in(t: &Target, origin: &Origin, c: &Committed) -> Option<String> {
    // Read through the session: the daemon never makes a syscall inside its
    // own mount, and never runs git in an agent's tree.
    if !matches!(t.session.root_has(b".git"), Ok(true)) {
        return None;
    }
    // A `.git` file (`gitdir:`) or link: nothing of ours to update, said first
    // (before the branch is read through it).
    if !matches!(t.session.lookup(1, b".git"), Ok(st) if st.kind == Kind::Dir) {
        return Some("the workspace's .git is not a directory: it was left alone".into());
    }
    let short = &c.sha[..c.sha.len().min(12)];
    let r = (|| -> crate::error::Result<String> {
        let at = match fast_forward_from(t, origin, c)? {
            Ok(at) => at,
            Err(why) => return Ok(why),
        };
        let Some(parts) = gather(origin, c, &at)? else {
            return Ok(format!(
                "the promote commit {short} is not a SHA-1 commit or its objects pass \
                 {} MiB: the workspace's git was left alone",
                MAX_TAKE_IN >> 20
            ));
        };
        write_in(t, c, &at, &parts)
    })();
    Some(r.unwrap_or_else(|e| format!("the workspace's git was not updated: {e}")))
}

/// The commit the workspace's branch `c.branch` names, when moving it to `c` is a
/// fast-forward: it is `c`'s parent, the baseline, or (after a rebase moved the
/// baseline on) another commit of `c`'s history in the durable repository.
/// `Err(why not)` otherwise. Read before the workspace is held; [`standing`]
/// checks under the hold that the branch still names it.
fn fast_forward_from(
    t: &Target,
    origin: &Origin,
    c: &Committed,
) -> crate::error::Result<Result<String, String>> {
    let branch = &c.branch;
    let own = || {
        format!(
            "the workspace's branch {branch} has commits of its own: it was not moved to {}",
            &c.sha[..c.sha.len().min(12)]
        )
    };
    // An object id (checked hex by `git_ref_target`), never an option.
    let Some(at) =
        crate::ops::auto::git_ref_target(&t.session, &format!("ref: refs/heads/{branch}"))
    else {
        return Ok(Err(own()));
    };
    if at == c.parent || origin.baseline.as_deref() == Some(at.as_str()) {
        return Ok(Ok(at));
    }
    let o = Git::new(&origin.path).run_in(&["merge-base", "--is-ancestor", &at, &c.sha], b"")?;
    Ok(if o.status.success() {
        Ok(at)
    } else {
        Err(own())
    })
}

/// What the workspace's repository takes in, read from the durable repository.
struct Parts {
    /// Loose objects: (object id, stored bytes).
    objects: Vec<(String, Vec<u8>)>,
    /// The new index (commit `c`'s tree, as `git read-tree` writes it).
    index: Vec<u8>,
}

/// Read the objects the workspace lacks (everything of `c` not reachable from
/// `at`, the commit its branch names) and `c`'s index from the durable
/// repository. `None` when `c` is not SHA-1 or the objects pass [`MAX_TAKE_IN`].
fn gather(origin: &Origin, c: &Committed, at: &str) -> crate::error::Result<Option<Parts>> {
    let hex = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    // Object ids only (checked hex: never taken as options).
    if !hex(&c.sha) || !hex(at) {
        return Ok(None);
    }
    let git = Git::new(&origin.path);
    let not = format!("^{at}");
    let listed = git.ok(&["rev-list", "--objects", c.sha.as_str(), not.as_str()])?;
    let ids: Vec<&[u8]> = listed
        .split(|&b| b == b'\n')
        .filter_map(|l| l.split(|&b| b == b' ').next())
        .filter(|id| id.len() == 40)
        .collect();
    let mut want = Vec::new();
    for id in &ids {
        want.extend_from_slice(id);
        want.push(b'\n');
    }
    let sizes = git.ok_in(&["cat-file", "--batch-check"], &want)?;
    let total: u64 = String::from_utf8_lossy(&sizes)
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    if total > MAX_TAKE_IN {
        return Ok(None);
    }
    let cap = (total as usize) + 128 * ids.len() + 4096;
    let batch = git.run_capped(&["cat-file", "--batch"], &want, cap)?;
    if !batch.status.success() {
        return Err(git.failed(&["cat-file"], &batch.stderr));
    }
    let objects = split_batch(&batch.stdout)?;
    let listing = git.ok(&["ls-tree", "-r", "-z", "--full-tree", &c.sha])?;
    let index = gitfmt::index_v2(gitfmt::parse_ls_tree(&listing)?)?;
    Ok(Some(Parts { objects, index }))
}

/// Split `git cat-file --batch` output into loose objects, each checked against
/// its id.
fn split_batch(mut out: &[u8]) -> crate::error::Result<Vec<(String, Vec<u8>)>> {
    let bad =
        |why: &str| crate::error::Error::Invalid(format!("unexpected git cat-file output: {why}"));
    let mut v = Vec::new();
    while !out.is_empty() {
        let nl = out
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("header"))?;
        let head = std::str::from_utf8(&out[..nl]).map_err(|_| bad("header"))?;
        let mut f = head.split(' ');
        let (Some(id), Some(kind), Some(size)) = (f.next(), f.next(), f.next()) else {
            return Err(bad(head));
        };
        let size: usize = size.parse().map_err(|_| bad("size"))?;
        let body = out.get(nl + 1..nl + 1 + size).ok_or_else(|| bad("short"))?;
        if gitfmt::object_id(kind, body) != id {
            return Err(bad("an object does not match its id"));
        }
        v.push((id.to_string(), gitfmt::loose_object(kind, body)));
        out = out.get(nl + 2 + size..).unwrap_or(&[]);
    }
    Ok(v)
}

/// With the workspace held (no write lands meanwhile): check its repository
/// still stands where the promote may move it, then write the objects, the
/// index and the branch through the session.
fn write_in(t: &Target, c: &Committed, at: &str, parts: &Parts) -> crate::error::Result<String> {
    let s = &t.session;
    let short = &c.sha[..c.sha.len().min(12)];
    crate::ops::syncfs(&t.mount)?;
    let gate = crate::session::relock(s.gate.write());
    let root = s.flush()?;
    let mut note = None;
    let mut written: Vec<Vec<u8>> = Vec::new();
    let target = s.build_beside(root, &mut |w| {
        match standing(w, c, at)? {
            Err(why) => note = Some(why),
            Ok(owner) => written = write_files(w, c, parts, owner)?,
        }
        Ok(())
    })?;
    if let Some(why) = note {
        return Ok(why);
    }
    let (inval, r) = s.graft(target, Some(&written), None);
    let r = r.and_then(|()| s.flush().map(|_| ()));
    if !inval.is_empty() {
        t.mount.inc_epoch();
    }
    drop(gate);
    crate::ops::send_invals(t, inval);
    r?;
    Ok(format!(
        "the workspace's git branch {} now names the promote commit {short}",
        c.branch
    ))
}

/// Whether the repository in `w` may take `c` in: `.git` a directory of its own
/// (not a linked worktree's), HEAD on the origin's branch, that branch still at
/// `at` (checked by [`fast_forward_from`]). `Ok(owner of .git)`, or `Err(why not)`.
fn standing(
    w: &Session,
    c: &Committed,
    at: &str,
) -> crate::error::Result<Result<(u32, u32), String>> {
    let branch = &c.branch;
    let dot = match w.lookup(1, b".git") {
        Ok(st) if st.kind == Kind::Dir => st,
        _ => {
            return Ok(Err(
                "the workspace's .git is not a directory: it was left alone".into(),
            ));
        }
    };
    let has = |name: &[u8]| w.lookup(dot.ino, name).map(|st| st.kind);
    if has(b"commondir").is_ok() || !matches!(has(b"objects"), Ok(Kind::Dir)) {
        return Ok(Err(
            "the workspace's .git is not a repository of its own: it was left alone".into(),
        ));
    }
    let head = w.read_live(&[b".git", b"HEAD"], 4096)?.unwrap_or_default();
    if String::from_utf8_lossy(&head).trim() != format!("ref: refs/heads/{branch}") {
        return Ok(Err(format!(
            "the workspace's git is not on branch {branch}: its HEAD was left alone"
        )));
    }
    let now = crate::ops::auto::git_ref_target(w, &format!("ref: refs/heads/{branch}"));
    if now.as_deref() != Some(at) {
        return Ok(Err(format!(
            "the workspace's branch {branch} moved while promoting: it was not moved to {}",
            &c.sha[..c.sha.len().min(12)]
        )));
    }
    Ok(Ok((dot.attr.uid, dot.attr.gid)))
}

/// Write the objects, the index and the branch into `w`'s `.git`, owned by
/// `owner` (the owner of `.git`); the paths written.
fn write_files(
    w: &Session,
    c: &Committed,
    parts: &Parts,
    owner: (u32, u32),
) -> crate::error::Result<Vec<Vec<u8>>> {
    let mut written = Vec::new();
    for (id, bytes) in &parts.objects {
        let path = format!(".git/objects/{}/{}", &id[..2], &id[2..]);
        if put(w, &path, bytes, 0o444, owner, false)? {
            written.push(path.into_bytes());
        }
    }
    put(w, ".git/index", &parts.index, 0o644, owner, true)?;
    written.push(b".git/index".to_vec());
    let r = format!(".git/refs/heads/{}", c.branch);
    put(w, &r, format!("{}\n", c.sha).as_bytes(), 0o644, owner, true)?;
    written.push(r.into_bytes());
    Ok(written)
}

/// Write `data` at `path` (from the root) in `w`, making missing directories
/// (0755) on the way; every component must be a directory (a symbolic link is
/// refused, never followed). An existing file is replaced when `replace`, else
/// left (a loose object of that id already holds these bytes). Whether written.
fn put(
    w: &Session,
    path: &str,
    data: &[u8],
    mode: u32,
    (uid, gid): (u32, u32),
    replace: bool,
) -> crate::error::Result<bool> {
    let comps: Vec<&str> = path.split('/').collect();
    if comps
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(crate::error::Error::Invalid(format!(
            "bad path in .git: {path:?}"
        )));
    }
    let (name, dirs) = comps.split_last().expect("a path has a name");
    let mut dir = 1u64;
    for d in dirs {
        dir = match w.lookup(dir, d.as_bytes()) {
            Ok(st) if st.kind == Kind::Dir => st.ino,
            Ok(_) => {
                return Err(crate::error::Error::Invalid(format!(
                    "{path}: {d} is not a directory"
                )));
            }
            Err(_) => {
                w.create_node(dir, d.as_bytes(), NewNode::Dir, 0o755, uid, gid)?
                    .ino
            }
        };
    }
    if w.lookup(dir, name.as_bytes()).is_ok() {
        if !replace {
            return Ok(false);
        }
        w.remove(dir, name.as_bytes(), false)?;
    }
    let f = w.create_node(dir, name.as_bytes(), NewNode::File, mode, uid, gid)?;
    let mut off = 0usize;
    while off < data.len() {
        let end = (off + (1 << 20)).min(data.len());
        w.write(f.ino, off as u64, &data[off..end])?;
        off = end;
    }
    Ok(true)
}
