//! `merge REF...`, `cherry-pick REF` and `revert REF`: theirs' changes since the
//! base, landed by
//! [`super::land`]. A merge's base is the merge base of HEAD and REF in the
//! checkpoint history (`crate::merge::base`); its checkpoint has two parents,
//! HEAD and REF. A cherry-pick's base is REF's first parent; its checkpoint has
//! HEAD alone for parent and names REF in its `meta`. A revert swaps the two:
//! base = REF's state, theirs = the state before it (for `exec@N`, that command's
//! own before and after states).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Job, MergeAnswer, Status, finish, land, refuse_if_stopped};
use crate::error::{Error, Result};
use crate::id::{CheckpointId, NodeId};
use crate::merge::{self, Theirs};
use crate::ops::record::Call;
use crate::ops::{Target, refctx};
use crate::refs;

/// What `merge` takes (the `merge` verb's request as is; `cherry_pick` and
/// `revert` fill it without `also`): a ref to bring in, or `continue` / `abort`
/// of the one that stopped on conflicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeRequest {
    /// The ref to bring in: a checkpoint, branch, session, experiment run or
    /// remote ref (required unless `continue` or `abort`).
    #[serde(rename = "ref", default)]
    pub target: Option<String>,
    /// More refs merged at once (`merge` only: an octopus merge, each merged in
    /// turn from its own merge base; the checkpoint has them all as parents).
    #[serde(default)]
    pub also: Vec<String>,
    /// The checkpoint's message (default: says what was merged).
    #[serde(default)]
    pub message: Option<String>,
    /// Only report what would change and conflict.
    #[serde(default)]
    pub dry_run: bool,
    /// Finish the stopped one, its conflicts resolved.
    #[serde(default, rename = "continue")]
    pub cont: bool,
    /// Put the workspace back as it was before the stopped one.
    #[serde(default)]
    pub abort: bool,
}

/// The ref a start needs, or what `continue`/`abort` do instead.
fn target<'r>(
    t: &Target,
    call: &Call,
    op: &'static str,
    req: &'r MergeRequest,
) -> Result<std::result::Result<&'r str, MergeAnswer>> {
    match (req.cont, req.abort, &req.target) {
        (true, true, _) => Err(Error::Invalid(
            "continue and abort exclude each other".into(),
        )),
        (true, false, None) => finish::cont(t, call, op).map(Err),
        (false, true, None) => finish::abort(t, call, op).map(Err),
        (_, _, _) if (req.cont || req.abort) && !req.also.is_empty() => Err(Error::Invalid(
            format!("{op} --continue and --abort take no ref"),
        )),
        (_, _, Some(_)) if req.cont || req.abort => Err(Error::Invalid(format!(
            "{op} --continue and --abort take no ref"
        ))),
        (_, _, None) => Err(Error::Invalid(format!("{op} needs a ref"))),
        (_, _, Some(r)) => {
            refuse_if_stopped(t, op)?;
            Ok(Ok(r))
        }
    }
}

fn root_of(t: &Target, id: Option<CheckpointId>) -> Result<NodeId> {
    let store = t.session.store();
    match id {
        Some(id) => Ok(refs::load(&**store, &id)?.root),
        None => crate::session::empty_root(&**store, 0, 0),
    }
}

/// `merge`.
pub(crate) fn merge(t: &Target, call: &Call, req: &MergeRequest) -> Result<MergeAnswer> {
    let spec = match target(t, call, "merge", req)? {
        Ok(s) => s,
        Err(done) => return Ok(done),
    };
    if req.also.len() + 1 > super::REFS_MAX {
        return Err(Error::Invalid(format!(
            "merge takes at most {} refs at once",
            super::REFS_MAX
        )));
    }
    let store = t.session.store().clone();
    let head = t.session.record().head;
    let specs: Vec<&str> = std::iter::once(spec)
        .chain(req.also.iter().map(String::as_str))
        .collect();
    let (mut steps, mut parents, mut bases) = (Vec::new(), Vec::new(), Vec::new());
    let mut sources = Vec::new();
    for s in &specs {
        let c = refctx::resolve_or_session(t, s)?;
        let base = match head {
            Some(h) => merge::merge_base(&*store, h, c.id)?,
            None => None,
        };
        if base == Some(c.id) || parents.contains(&c.id) {
            continue;
        }
        let base_root = root_of(t, base)?;
        steps.push((
            merge::tree_changes(&*store, base_root, c.root)?,
            Theirs::Tree(c.root),
        ));
        sources.extend([c.root, base_root]);
        parents.push(c.id);
        bases.extend(base.map(|b| b.to_hex()));
    }
    let theirs_spec = specs.join(" ");
    if parents.is_empty() {
        let mut a = MergeAnswer::new("merge", Status::UpToDate, &theirs_spec, None);
        a.next = Some(format!("{theirs_spec}: already part of HEAD's history"));
        return Ok(a);
    }
    let mut meta = serde_json::Map::new();
    let merged: Vec<serde_json::Value> = parents.iter().map(|p| p.to_hex().into()).collect();
    meta.insert(
        "merged".into(),
        if merged.len() == 1 {
            merged[0].clone()
        } else {
            merged.into()
        },
    );
    let job = Job {
        op: "merge",
        theirs_spec: theirs_spec.clone(),
        theirs_id: parents.first().copied(),
        base: bases.first().cloned(),
        steps,
        sources,
        message: req
            .message
            .clone()
            .unwrap_or_else(|| format!("merge {theirs_spec}")),
        more_parents: parents,
        meta,
        onto: None,
        finish_ops: None,
    };
    land(t, call, &job, req.dry_run)
}

/// `cherry-pick`.
pub(crate) fn cherry_pick(t: &Target, call: &Call, req: &MergeRequest) -> Result<MergeAnswer> {
    let spec = match target(t, call, "cherry-pick", req)? {
        Ok(s) => s,
        Err(done) => return Ok(done),
    };
    let store = t.session.store().clone();
    let c = refctx::resolve_or_session(t, spec)?;
    let base = c.parent();
    let base_root = root_of(t, base)?;
    let changes = merge::tree_changes(&*store, base_root, c.root)?;
    let mut meta = serde_json::Map::new();
    meta.insert("cherry_pick".into(), c.id.to_hex().into());
    let short = &c.id.to_hex()[..12];
    let job = Job {
        op: "cherry-pick",
        theirs_spec: spec.to_string(),
        theirs_id: Some(c.id),
        base: base.map(|b| b.to_hex()),
        steps: vec![(changes, Theirs::Tree(c.root))],
        sources: vec![c.root, base_root],
        message: req
            .message
            .clone()
            .unwrap_or_else(|| format!("cherry-pick {short}: {}", c.message)),
        more_parents: Vec::new(),
        meta,
        onto: None,
        finish_ops: None,
    };
    land(t, call, &job, req.dry_run)
}

/// What a revert takes out: the changes from `after` back to `before` (roots),
/// and what to call it. `exec@N` alone names exec N's own change (its record's
/// before and after states); any other ref, the change its checkpoint made
/// against its first parent.
struct Reverted {
    before: NodeId,
    after: NodeId,
    id: Option<CheckpointId>,
    label: String,
    exec: Option<u64>,
}

fn revert_points(t: &Target, spec: &str) -> Result<Option<Reverted>> {
    let store = t.session.store().clone();
    let exec = crate::refs::exec_ref(spec);
    if let Some(n) = exec {
        let o = crate::ops::exec::history::find(&*store, t.session.name(), n)?;
        let meta = &o.meta["exec"];
        let Some(after) = meta["after"].as_str() else {
            return Ok(None);
        };
        let after = refctx::resolve(t, after)?;
        let before = match meta["before"].as_str() {
            Some(b) => refctx::resolve(t, b)?.root,
            None => root_of(t, after.parent())?,
        };
        let argv: Vec<String> = serde_json::from_value(meta["argv"].clone()).map_err(|e| {
            Error::corrupt(
                format!(
                    "operation record {} of session {} (exec {n})",
                    o.seq,
                    t.session.name()
                ),
                format!("argv: {e}"),
            )
        })?;
        return Ok(Some(Reverted {
            before,
            after: after.root,
            id: Some(after.id),
            label: format!("exec {n} ({})", crate::command::shell::quoted(&argv)),
            exec: Some(n),
        }));
    }
    let c = refctx::resolve_or_session(t, spec)?;
    Ok(Some(Reverted {
        before: root_of(t, c.parent())?,
        after: c.root,
        id: Some(c.id),
        label: format!("{}: {}", &c.id.to_hex()[..12], c.message),
        exec: None,
    }))
}

/// `revert`: take out what one checkpoint (or `exec@N`: one recorded command)
/// changed, keeping everything after it — a three-way merge with base = its
/// state, theirs = the state before it.
pub(crate) fn revert(t: &Target, call: &Call, req: &MergeRequest) -> Result<MergeAnswer> {
    let spec = match target(t, call, "revert", req)? {
        Ok(s) => s,
        Err(done) => return Ok(done),
    };
    let Some(r) = revert_points(t, spec)? else {
        let mut a = MergeAnswer::new("revert", Status::UpToDate, spec, None);
        a.next = Some(format!("{spec} changed nothing"));
        return Ok(a);
    };
    let store = t.session.store().clone();
    let changes = merge::tree_changes(&*store, r.after, r.before)?;
    let mut meta = serde_json::Map::new();
    if let Some(id) = r.id {
        meta.insert("reverts".into(), id.to_hex().into());
    }
    if let Some(n) = r.exec {
        meta.insert("reverts_exec".into(), n.into());
    }
    let job = Job {
        op: "revert",
        theirs_spec: spec.to_string(),
        theirs_id: r.id,
        base: r.id.map(|i| i.to_hex()),
        steps: vec![(changes, Theirs::Tree(r.before))],
        sources: vec![r.before, r.after],
        message: req
            .message
            .clone()
            .unwrap_or_else(|| format!("revert {}", r.label)),
        more_parents: Vec::new(),
        meta,
        onto: None,
        finish_ops: None,
    };
    land(t, call, &job, req.dry_run)
}
