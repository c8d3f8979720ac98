//! `rebase [--onto REF]`: bring the durable repository's new commits under the
//! session. Theirs is what git changed between the session's baseline commit and
//! the new head (default: the head of the branch the session was imported from);
//! the base of each file is its baseline blob, ours the workspace. Git runs on the
//! durable repository through promote's runner (`promote::gitio`: the owner's
//! identity, a clean environment, refs never taken as options).
//!
//! The new baseline — the commit, and the session's baseline tree with git's
//! changes applied — is recorded on the session's info record in the batch that
//! takes the rebase's checkpoint (or its `--continue`'s), read-guarded.

use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Job, MergeAnswer, Status, finish, land, refuse_if_stopped};
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::lifecycle::{self, Origin};
use crate::merge::{self, Change, Theirs, Ver};
use crate::ops::Target;
use crate::ops::promote::gitio::{Git, split_nul};
use crate::ops::record::Call;

/// Most bytes of blobs one rebase reads from git.
pub const BLOBS_MAX: u64 = 2 << 30;

/// What `rebase` takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RebaseRequest {
    /// The commit to rebase onto, as git names it in the durable repository
    /// (default: the head of the branch the session was imported from).
    #[serde(default)]
    pub onto: Option<String>,
    /// Only report what would change and conflict.
    #[serde(default)]
    pub dry_run: bool,
    /// Finish the stopped rebase, its conflicts resolved.
    #[serde(default, rename = "continue")]
    pub cont: bool,
    /// Put the workspace back as it was before the stopped rebase.
    #[serde(default)]
    pub abort: bool,
}

/// `rebase`.
pub(crate) fn run(t: &Target, call: &Call, req: &RebaseRequest) -> Result<MergeAnswer> {
    match (req.cont, req.abort) {
        (true, true) => {
            return Err(Error::Invalid(
                "continue and abort exclude each other".into(),
            ));
        }
        (true, false) => return finish::cont(t, call, "rebase"),
        (false, true) => return finish::abort(t, call, "rebase"),
        _ => {}
    }
    refuse_if_stopped(t, "rebase")?;
    let origin = git_origin(t)?;
    let baseline = origin.baseline.clone().expect("checked");
    let git = Git::new(&origin.path);
    let onto = onto_commit(&git, &origin, req.onto.as_deref())?;
    if onto == baseline {
        let mut a = MergeAnswer::new("rebase", Status::UpToDate, &onto, Some(baseline));
        a.next = Some("the session's baseline is already that commit".into());
        return Ok(a);
    }
    let changes = git_changes(&git, &baseline, &onto)?;
    let base_root = NodeId::from_hex(&origin.baseline_root)
        .ok_or_else(|| Error::corrupt("session info", "bad baseline root"))?;
    // The new baseline tree: the old one with all of git's changes taken.
    let new_base = merge::merge(&t.session, base_root, &changes, Theirs::Blobs)?.root;
    let mut meta = serde_json::Map::new();
    meta.insert("rebase_from".into(), baseline.clone().into());
    meta.insert("rebase_onto".into(), onto.clone().into());
    let job = Job {
        op: "rebase",
        theirs_spec: onto.clone(),
        theirs_id: None,
        base: Some(baseline),
        steps: vec![(changes, Theirs::Blobs)],
        sources: vec![base_root, new_base],
        message: format!("rebase onto {}", &onto[..onto.len().min(12)]),
        more_parents: Vec::new(),
        meta,
        onto: Some((onto, new_base)),
        finish_ops: Some(super::baseline::ops),
    };
    land(t, call, &job, req.dry_run)
}

/// The session's git origin, or why it has none.
fn git_origin(t: &Target) -> Result<Origin> {
    let info = lifecycle::load(&**t.session.store(), t.session.name())?;
    info.and_then(|i| i.origin)
        .filter(|o| o.git && o.baseline.is_some())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "session {} has no git baseline (it was not mounted --from a git work tree with a commit): nothing to rebase onto; use `treefork merge REF` between sessions",
                t.session.name()
            ))
        })
}

/// The commit to rebase onto: `onto` as git resolves it, else the head of the
/// session's branch.
fn onto_commit(git: &Git, origin: &Origin, onto: Option<&str>) -> Result<String> {
    let name = match (onto, &origin.branch) {
        (Some(r), _) => {
            if r.starts_with('-') || r.contains('\0') {
                return Err(Error::Invalid(format!("--onto {r:?}: not a git revision")));
            }
            r.to_string()
        }
        (None, Some(b)) => format!("refs/heads/{b}"),
        (None, None) => {
            return Err(Error::Invalid(
                "the session's baseline was a detached HEAD: name the commit with --onto".into(),
            ));
        }
    };
    git.try_line(&[
        "rev-parse",
        "-q",
        "--verify",
        "--end-of-options",
        &format!("{name}^{{commit}}"),
    ])?
    .ok_or_else(|| {
        Error::NotFound(format!(
            "{name}: no such commit in {}",
            origin.path.display()
        ))
    })
}

/// One line of `git diff --raw`: modes, blob ids, and the path.
struct Raw {
    old_mode: u32,
    new_mode: u32,
    old: String,
    new: String,
    path: Vec<u8>,
}

fn parse_raw(out: &[u8]) -> Result<Vec<Raw>> {
    let bad = || Error::Invalid("git diff --raw: unexpected output".into());
    let mut it = split_nul(out);
    let mut rows = Vec::new();
    while let Some(head) = it.next() {
        let head = std::str::from_utf8(head).map_err(|_| bad())?;
        let f: Vec<&str> = head.trim_start_matches(':').split(' ').collect();
        let path = it.next().ok_or_else(bad)?;
        if f.len() < 5 {
            return Err(bad());
        }
        let mode = |s: &str| u32::from_str_radix(s, 8).map_err(|_| bad());
        rows.push(Raw {
            old_mode: mode(f[0])?,
            new_mode: mode(f[1])?,
            old: f[2].to_string(),
            new: f[3].to_string(),
            path: path.to_vec(),
        });
    }
    Ok(rows)
}

/// What git changed between `from` and `to`, with every blob read (bounded by
/// [`BLOBS_MAX`]); submodules are left out.
pub(crate) fn git_changes(git: &Git, from: &str, to: &str) -> Result<Vec<Change>> {
    let out = git.ok(&[
        "diff",
        "--raw",
        "-z",
        "--no-renames",
        "--no-abbrev",
        "--no-ext-diff",
        from,
        to,
        "--",
    ])?;
    let rows: Vec<Raw> = parse_raw(&out)?
        .into_iter()
        .filter(|r| r.old_mode & 0o170000 != 0o160000 && r.new_mode & 0o170000 != 0o160000)
        .collect();
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    let wanted: Vec<&str> = rows
        .iter()
        .flat_map(|r| [r.old.as_str(), r.new.as_str()])
        .filter(|s| !zero(s))
        .collect();
    let blobs = read_blobs(git, &wanted)?;
    // A blob git did not return is an error: an empty file in its place would
    // be merged as the content.
    let ver = |sha: &str, mode: u32| -> Result<Option<Ver>> {
        if zero(sha) {
            return Ok(None);
        }
        let data = blobs.get(sha).cloned().ok_or_else(|| {
            Error::Invalid(format!("git cat-file --batch: blob {sha} was not returned"))
        })?;
        Ok(Some(Ver::Blob { data, mode }))
    };
    let mut changes: Vec<Change> = rows
        .iter()
        .map(|r| {
            Ok(Change {
                path: r.path.clone(),
                base: ver(&r.old, r.old_mode)?,
                theirs: ver(&r.new, r.new_mode)?,
            })
        })
        .collect::<Result<_>>()?;
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(changes)
}

/// The blobs `shas`, by `git cat-file --batch`.
fn read_blobs(git: &Git, shas: &[&str]) -> Result<HashMap<String, Arc<Vec<u8>>>> {
    let mut input = Vec::new();
    for s in shas {
        input.extend_from_slice(s.as_bytes());
        input.push(b'\n');
    }
    // Bounded as the blobs are: git is killed past the budget (and headers).
    let cap = BLOBS_MAX as usize + 128 * shas.len() + 4096;
    let o = git.run_capped(&["cat-file", "--batch"], &input, cap)?;
    if !o.status.success() {
        return Err(git.failed(&["cat-file"], &o.stderr));
    }
    let out = o.stdout;
    let bad = || Error::Invalid("git cat-file --batch: unexpected output".into());
    let mut map = HashMap::new();
    let (mut at, mut total) = (0usize, 0u64);
    while at < out.len() {
        let nl = out[at..].iter().position(|&b| b == b'\n').ok_or_else(bad)? + at;
        let head = std::str::from_utf8(&out[at..nl]).map_err(|_| bad())?;
        let f: Vec<&str> = head.split(' ').collect();
        if f.len() != 3 {
            return Err(bad());
        }
        let size: usize = f[2].parse().map_err(|_| bad())?;
        total += size as u64;
        if total > BLOBS_MAX {
            return Err(Error::Invalid(format!(
                "rebase: the files git changed are over {} GiB together",
                BLOBS_MAX >> 30
            )));
        }
        let data = out.get(nl + 1..nl + 1 + size).ok_or_else(bad)?;
        map.insert(f[0].to_string(), Arc::new(data.to_vec()));
        at = nl + 1 + size + 1;
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_lines_parse() {
        let out = b":100644 100755 aaaa bbbb M\0dir/a b\0:000000 120000 0000 cccc A\0l\0";
        let rows = parse_raw(out).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].path, b"dir/a b");
        assert_eq!(rows[0].new_mode, 0o100755);
        assert_eq!(rows[1].old, "0000");
        assert!(parse_raw(b":100644 aaaa\0p\0").is_err());
    }
}
