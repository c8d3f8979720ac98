//! The `git-commit` trigger: a checkpoint after each commit made in the workspace,
//! noticed as a change of the commit the workspace's `.git/HEAD` points to (read
//! through the live session, never through the host path: the daemon does not
//! walk into its own mount).
//!
//! Cost: the refs are read only after the session saw a mutation since the last
//! look, at most every [`INTERVAL_MS`]; one `syncfs` first (git writes its ref
//! through the kernel's writeback cache), skipped with no `.git` at the root. The
//! first value seen after a mount is the baseline: only a change from it to a
//! commit triggers (so a repository created or cloned into the workspace later
//! counts as a commit too). A tree
//! swap by treefork (checkout, restore, undo, adopt) is no commit: it sets the
//! baseline to what the new tree's `.git/HEAD` names ([`rebaseline`]).
//!
//! Bounds: the agent writes `.git/HEAD` at will, and each checkpoint adds an
//! operation record and a metadata batch. Per session, a token bucket allows a
//! burst of [`BURST`] git-commit checkpoints, then one per [`REFILL_SECS`] s; while
//! it is empty the refs are not even read, so commits made meanwhile are taken
//! together by the next checkpoint (nothing is lost, their changes are merged into
//! one). Each checkpoint counts against the `op_records` quota like an agent's op
//! (`crate::quota::check_op_records`): once the session's log is full, a commit
//! is left to the next checkpoint the user takes, with a log line.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::control::RateLimit;
use crate::ops::{Target, syncfs};

/// Least time between two looks at a session's refs.
pub const INTERVAL_MS: u64 = 300;
/// git-commit checkpoints a session may take at once.
pub const BURST: u32 = 4;
/// Seconds per git-commit checkpoint past the burst.
pub const REFILL_SECS: u32 = 5;
/// Largest ref file read.
const MAX_REF: u32 = 4096;
/// Largest `packed-refs` read.
const MAX_PACKED: u32 = 1 << 20;

/// What HEAD named at the last look.
#[derive(Default, Clone, PartialEq)]
enum Head {
    /// Not looked at yet (since the daemon serves the session).
    #[default]
    Unknown,
    /// No repository at the workspace root (or HEAD names no commit yet).
    NoCommit,
    /// A commit.
    Commit(String),
}

/// Per session: when it was looked at, the last mutation time then, HEAD, and
/// the checkpoints it may still take (made full at the first look).
#[derive(Default, Clone)]
struct Seen {
    checked_ms: u64,
    mutation_ms: u64,
    head: Head,
    bucket: Option<RateLimit>,
}

static SEEN: Mutex<Option<HashMap<String, Seen>>> = Mutex::new(None);

fn seen(name: &str) -> Seen {
    let g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    g.as_ref()
        .and_then(|m| m.get(name).cloned())
        .unwrap_or_default()
}

fn store_seen(name: &str, v: Seen) {
    let mut g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(HashMap::new)
        .insert(name.to_string(), v);
}

/// Look at `t`'s `.git` and checkpoint when HEAD's commit changed.
pub(super) fn check(t: &Target, now: u64) {
    let s = &t.session;
    let mut st = seen(s.name());
    let (_, last_mutation) = s.activity();
    let first = st.checked_ms == 0;
    if !first
        && (now.saturating_sub(st.checked_ms) < INTERVAL_MS || last_mutation == st.mutation_ms)
    {
        return;
    }
    let bucket = st
        .bucket
        .get_or_insert_with(|| RateLimit::new(BURST.into(), 1.0 / f64::from(REFILL_SECS)));
    // No checkpoint allowed now: no look either (the mutation stays unseen, so
    // the first look once one is allowed takes every commit made meanwhile).
    if !first && !bucket.ready_at(Instant::now()) {
        store_seen(s.name(), st);
        return;
    }
    let Ok(_g) = s.op_lock.try_lock() else {
        return;
    };
    st.checked_ms = now;
    st.mutation_ms = last_mutation;
    // No `.git` at the root: no HEAD to read, so no syncfs either (names are never
    // held back in the kernel's cache, only data and times are). A look every
    // 300 ms while a workload without git mutates the tree cost a syncfs of the
    // mount each time.
    if matches!(s.root_has(b".git"), Ok(false)) {
        st.head = Head::NoCommit;
        store_seen(s.name(), st);
        return;
    }
    if let Err(e) = syncfs(&t.mount) {
        log::warn!("session {}: git-commit trigger: {e}", s.name());
        store_seen(s.name(), st);
        return;
    }
    let head = match head_commit(s).flatten() {
        Some(c) => Head::Commit(c),
        None => Head::NoCommit,
    };
    if let Head::Commit(new) = &head
        && st.head != Head::Unknown
        && st.head != head
    {
        if let Some(b) = st.bucket.as_mut() {
            b.allow();
        }
        commit_checkpoint(s, new);
    }
    st.head = head;
    store_seen(s.name(), st);
}

/// The checkpoint of git commit `new`, counted against the session's
/// `op_records` quota (refused with a log line once it is reached: the changes
/// stay pending in the workspace).
fn commit_checkpoint(s: &crate::session::Session, new: &str) {
    let msg = format!("git commit {}", &new[..new.len().min(12)]);
    if let Err(e) = crate::quota::check_op_records(&**s.store(), s.name()) {
        log::warn!("session {}: {msg}: no git-commit checkpoint: {e}", s.name());
        return;
    }
    match super::logged_checkpoint(s, &msg, "git-commit") {
        Ok(c) => log::info!("session {}: {msg}: checkpoint {}", s.name(), c.id.short()),
        Err(e) => log::error!("session {}: git-commit checkpoint failed: {e}", s.name()),
    }
}

/// Take the commit `.git/HEAD` points to now as the baseline, after treefork
/// itself replaced the workspace's tree (checkout, restore, undo, adopt): the
/// `.git` it brought in names another commit, but no commit was made. Called with
/// the session's op lock held, so no look runs meanwhile.
pub(in crate::ops) fn rebaseline(s: &crate::session::Session) {
    let head = match head_commit(s).flatten() {
        Some(c) => Head::Commit(c),
        None => Head::NoCommit,
    };
    let (_, last_mutation) = s.activity();
    let mut st = seen(s.name());
    st.head = head;
    st.mutation_ms = last_mutation;
    st.checked_ms = crate::clock::unix_ms().max(1);
    store_seen(s.name(), st);
}

/// The commit `.git/HEAD` points to: `None` when the workspace root is not a git
/// repository, `Some(None)` when HEAD names no commit (yet).
fn head_commit(s: &crate::session::Session) -> Option<Option<String>> {
    let head = s.read_live(&[b".git", b"HEAD"], MAX_REF).ok()??;
    let head = String::from_utf8(head).ok()?;
    Some(ref_target(s, head.trim()))
}

/// The commit named by the content of HEAD (a hash, or `ref: refs/...`).
pub(in crate::ops) fn ref_target(s: &crate::session::Session, head: &str) -> Option<String> {
    let Some(name) = head.strip_prefix("ref:") else {
        return is_hash(head).then(|| head.to_string());
    };
    let name = name.trim();
    let parts: Vec<&[u8]> = name.split('/').map(str::as_bytes).collect();
    if !name.starts_with("refs/")
        || parts
            .iter()
            .any(|p| p.is_empty() || *p == b"." || *p == b"..")
    {
        return None;
    }
    let mut path: Vec<&[u8]> = vec![b".git"];
    path.extend(parts);
    if let Ok(Some(v)) = s.read_live(&path, MAX_REF) {
        let v = String::from_utf8(v).ok()?;
        return is_hash(v.trim()).then(|| v.trim().to_string());
    }
    let packed = s.read_live(&[b".git", b"packed-refs"], MAX_PACKED).ok()??;
    let packed = String::from_utf8_lossy(&packed);
    packed.lines().find_map(|l| {
        let (hash, r) = l.split_once(' ')?;
        (r == name && is_hash(hash)).then(|| hash.to_string())
    })
}

fn is_hash(s: &str) -> bool {
    (40..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}
