//! `promote`: take the session's chosen paths back to the durable git repository it
//! was imported from — as a commit on the durable branch, a new branch, or a patch.
//! User role only (`verbs::Promote`'s role rule).
//!
//! Order (see docs/design.md, "Promote"): resolve the chosen paths (default: the
//! touched files); the drift check ([`drift`]: refuses with `BASELINE_CONFLICT`,
//! writing nothing); save pending changes as a checkpoint (trigger `promote`) and
//! read the paths' state from its tree, never from the live mount; the plan
//! ([`plan`]); the strategy ([`strategy`]); then the session's info record (state
//! `promoted`, the result; guarded by `MetaOp::Expect` on its old bytes) and an
//! operation of kind `promote` in one commit.
//!
//! Invariants: `dry_run` writes nothing anywhere (no checkpoint, no object, no
//! ref); every git command on the durable repository runs through
//! `lifecycle::git` (as its owner); a session without a git baseline can only
//! make a patch.

mod drift;
mod gitio;
mod plan;
mod scratch;
mod strategy;

use serde_json::{Map, Value, json};

use self::drift::Durable;
use self::gitio::Git;
use self::plan::{Act, Inputs, Listing, Plan};
use self::scratch::Scratch;
use super::record::{Call, view_now, view_of};
use super::restore::clean_path;
use super::{Target, ref_or_fresh, working_root};
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::lifecycle::{self, Origin, Promoted, SessionInfo, State};
use crate::meta::{self, MetaOp};
use crate::store::ObjectStore;

pub use plan::SIZE_LIMIT;

/// How a promote lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A commit on the durable branch (its index and work tree follow).
    Commit,
    /// A new branch with one commit.
    Branch,
    /// A patch `git apply` takes.
    Patch,
}

impl Strategy {
    /// Parse the wire name.
    pub fn parse(s: &str) -> Result<Strategy> {
        match s {
            "commit" => Ok(Strategy::Commit),
            "branch" => Ok(Strategy::Branch),
            "patch" => Ok(Strategy::Patch),
            _ => Err(Error::Invalid(format!(
                "unknown promote strategy {s:?}: use commit, branch or patch"
            ))),
        }
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Commit => "commit",
            Strategy::Branch => "branch",
            Strategy::Patch => "patch",
        }
    }
}

/// A promote request (the `promote` op's fields).
#[derive(Debug, Clone)]
pub struct Request {
    /// Workspace-relative paths (empty: the touched files).
    pub paths: Vec<String>,
    /// How it lands.
    pub strategy: Strategy,
    /// Commit message.
    pub message: Option<String>,
    /// Only report.
    pub dry_run: bool,
    /// Branch name (`branch`).
    pub branch: Option<String>,
    /// Base the branch on the head, not the baseline (`branch`).
    pub onto_head: bool,
    /// Accept files over [`SIZE_LIMIT`].
    pub allow_large: bool,
}

/// Where the promote goes: a git origin (checked for drift) or none.
#[allow(clippy::large_enum_variant, reason = "one value per promote")]
enum Ground {
    Repo {
        origin: Origin,
        durable: Durable,
        listing: Listing,
    },
    Plain,
}

pub(crate) fn run(t: &Target, call: &Call, req: Request) -> Result<Value> {
    let s = &t.session;
    let store = s.store().clone();
    let info = lifecycle::load(&*store, s.name())?;
    let origin = info.as_ref().and_then(|i| i.origin.clone());
    refuse_untrusted(info.as_ref(), s.name())?;
    check_request(&req, origin.as_ref(), s.name())?;
    // Flushed first: the touched paths of changes still pending (an unlink not yet
    // synced) are written with the flush, so the default choice includes them.
    let live_root = working_root(t)?;
    let chosen = chosen_paths(&*store, s.name(), &req.paths)?;
    let ground = ground(origin.clone(), &req, &chosen)?;
    let base_root = match &origin {
        Some(o) => NodeId::from_hex(&o.baseline_root)
            .ok_or_else(|| Error::corrupt("session info", "bad baseline root"))?,
        None => crate::session::empty_root(&*store, 0, 0)?,
    };
    // The state: saved first (a checkpoint), except in a dry run (which writes
    // nothing: the flushed tree is read instead).
    let (before, root, saved) = if req.dry_run {
        (None, live_root, None)
    } else {
        let before = view_now(t)?;
        let c = ref_or_fresh(t, None, "before promote", "promote")?;
        (Some(before), c.root, Some(c))
    };
    let scratch_owner = match &ground {
        Ground::Repo { origin, .. } => origin.path.clone(),
        Ground::Plain => std::env::temp_dir(),
    };
    let scratch = Scratch::new(&scratch_owner)?;
    let (hasher, write) = hasher(&ground, &scratch, &req)?;
    let inputs = Inputs {
        store: &*store,
        base_root,
        root,
        chosen: &chosen,
        from_touched: req.paths.is_empty(),
        allow_large: req.allow_large,
        git_base: match &ground {
            Ground::Repo { listing, .. } => Some(listing),
            Ground::Plain => None,
        },
    };
    let mut hash = |r: &crate::tree::Record, p: &[u8]| hasher.hash(&*store, r, p, write);
    let mut ignored = |paths: &[Vec<u8>]| match &ground {
        Ground::Repo { origin, .. } => plan::ignored_by(&Git::new(&origin.path), paths),
        Ground::Plain => Ok(Default::default()),
    };
    let plan = plan::build(&inputs, &mut hash, &mut ignored)?;
    let mut out = report(&req, &plan, &ground, s.name());
    if req.dry_run {
        return Ok(Value::Object(out));
    }
    if plan.items.is_empty() {
        return Err(Error::Invalid(
            "nothing to promote: no chosen path differs from the baseline".into(),
        ));
    }
    let message = message(&req, info.as_ref(), s.name(), &plan);
    let result = land(
        &req,
        &ground,
        &hasher,
        &scratch,
        &*store,
        &plan,
        &message,
        s.name(),
    )?;
    out.extend(result.clone());
    let saved = saved.expect("not a dry run");
    out.insert("saved".into(), json!(saved.id));
    let after = view_of(&s.record(), root);
    let mut op = call.op("promote", before.expect("not a dry run"), after);
    op.meta = result;
    // Undo does not reach into the durable repository: the record is inert.
    op.inert = true;
    let rec = record_result(t, op, promoted(&req, &plan, &out))?;
    out.insert("op".into(), json!(rec.seq));
    Ok(Value::Object(out))
}

/// The promote result stored on the session's info record.
fn promoted(req: &Request, plan: &Plan, out: &Map<String, Value>) -> Promoted {
    let text = |k: &str| out.get(k).and_then(Value::as_str).map(str::to_string);
    Promoted {
        strategy: req.strategy.name().into(),
        sha: text("sha"),
        branch: text("branch"),
        paths: plan
            .items
            .iter()
            .map(|i| String::from_utf8_lossy(&i.path).into_owned())
            .collect(),
        time: crate::tree::Timespec::now().sec,
    }
}

/// Check the durable repository of a git origin (drift, baseline listing).
fn ground(origin: Option<Origin>, req: &Request, chosen: &[Vec<u8>]) -> Result<Ground> {
    let Some(o) = origin.filter(|o| o.git && o.baseline.is_some()) else {
        return Ok(Ground::Plain);
    };
    let git = Git::new(&o.path);
    let durable = drift::check(&git, &o, chosen)?;
    if req.strategy == Strategy::Commit && durable.branch.is_none() {
        return Err(Error::Invalid(
            "the baseline was a detached HEAD (no branch to commit on): use --strategy branch or patch"
                .into(),
        ));
    }
    let listing = plan::listing(&git, &durable.baseline, chosen)?;
    Ok(Ground::Repo {
        origin: o,
        durable,
        listing,
    })
}

/// Refuse requests that cannot apply to this session.
/// A session pulled from a remote whose origin the user has not trusted yet
/// (`remote trust`) is not promoted: the remote chose that repository.
fn refuse_untrusted(info: Option<&lifecycle::SessionInfo>, session: &str) -> Result<()> {
    let pulled = info
        .filter(|i| i.origin.is_none())
        .and_then(|i| i.meta.get(crate::lifecycle::REMOTE_ORIGIN));
    let Some(p) = pulled.and_then(|v| v["origin"]["path"].as_str()) else {
        return Ok(());
    };
    Err(Error::Forbidden(format!(
        "session {session} was pulled from remote {}, which names {p} as its origin: that is not trusted; check it, then run `treefork remote trust {session}`",
        pulled.and_then(|v| v["remote"].as_str()).unwrap_or("?")
    )))
}

fn check_request(req: &Request, origin: Option<&Origin>, session: &str) -> Result<()> {
    let git = origin.is_some_and(|o| o.git && o.baseline.is_some());
    if req.strategy != Strategy::Patch && !git {
        return Err(Error::Invalid(format!(
            "session {session} has no git baseline (it was imported from a plain directory, or created empty): only --strategy patch is possible"
        )));
    }
    if req.strategy != Strategy::Branch && (req.branch.is_some() || req.onto_head) {
        return Err(Error::Invalid(
            "--branch and --onto-head go with --strategy branch".into(),
        ));
    }
    Ok(())
}

/// The chosen paths: the request's (cleaned; `.git` refused), else the touched files.
fn chosen_paths(store: &dyn ObjectStore, session: &str, paths: &[String]) -> Result<Vec<Vec<u8>>> {
    let chosen: Vec<Vec<u8>> = if paths.is_empty() {
        lifecycle::touched::list(store, session)?
    } else {
        paths.iter().map(|p| clean_path(p)).collect::<Result<_>>()?
    };
    if chosen.is_empty() {
        return Err(Error::Invalid(
            "nothing to promote: the session has no touched files (name the paths to promote)"
                .into(),
        ));
    }
    plan::refuse_git_paths(&chosen)?;
    Ok(chosen)
}

/// The git that hashes the session's files, and whether it writes them: the
/// repository itself (commit, branch), a scratch object directory with the
/// repository as alternate (patch), a scratch repository (no git origin), or the
/// repository without writing (dry run).
fn hasher(ground: &Ground, scratch: &Scratch, req: &Request) -> Result<(Git, bool)> {
    Ok(match ground {
        Ground::Repo { origin, .. } => {
            let git = Git::new(&origin.path);
            match (req.dry_run, req.strategy) {
                (true, _) => (git, false),
                (false, Strategy::Patch) => {
                    let objects = git.line(&[
                        "rev-parse",
                        "--path-format=absolute",
                        "--git-path",
                        "objects",
                    ])?;
                    let mine = scratch.mkdir("objects")?;
                    let g = git
                        .with("GIT_OBJECT_DIRECTORY", mine)
                        .with("GIT_ALTERNATE_OBJECT_DIRECTORIES", objects);
                    (g, true)
                }
                (false, _) => (git, true),
            }
        }
        Ground::Plain => {
            let repo = scratch.mkdir("repo")?;
            let git = Git::scratch(&repo);
            git.ok(&["init", "-q", "."])?;
            (git, true)
        }
    })
}

/// The default commit message.
fn message(req: &Request, info: Option<&SessionInfo>, session: &str, plan: &Plan) -> String {
    if let Some(m) = &req.message {
        return m.clone();
    }
    let mut m = format!("Promote treefork session {session}\n");
    if let Some(task) = info.and_then(|i| i.task.as_deref()) {
        m.push_str(&format!("\n{task}\n"));
    }
    m.push('\n');
    for i in &plan.items {
        let l = match i.act {
            Act::Added => 'A',
            Act::Modified => 'M',
            Act::Deleted => 'D',
        };
        m.push_str(&format!("{l} {}\n", String::from_utf8_lossy(&i.path)));
    }
    m
}

/// The report of a plan (the whole answer of a dry run): changes, skipped and
/// unchanged paths, and the ref that would move.
fn report(req: &Request, plan: &Plan, ground: &Ground, session: &str) -> Map<String, Value> {
    let changes: Vec<Value> = plan
        .items
        .iter()
        .map(|i| {
            json!({
                "path": String::from_utf8_lossy(&i.path), "change": i.act,
                "mode": i.mode, "old_mode": i.old_mode, "size": i.size,
            })
        })
        .collect();
    let pairs = |v: &[(String, String)]| -> Vec<Value> {
        v.iter()
            .map(|(p, w)| json!({"path": p, "why": w}))
            .collect()
    };
    let moves = match (ground, req.strategy) {
        (Ground::Repo { durable, .. }, Strategy::Commit) => json!({
            "ref": format!("refs/heads/{}", durable.branch.clone().unwrap_or_default()),
            "from": durable.head, "base": durable.head,
        }),
        (Ground::Repo { durable, .. }, Strategy::Branch) => json!({
            "ref": format!("refs/heads/{}", branch_name(req, session)),
            "from": null,
            "base": if req.onto_head { &durable.head } else { &durable.baseline },
        }),
        (Ground::Repo { durable, .. }, Strategy::Patch) => {
            json!({"ref": null, "from": null, "base": durable.baseline})
        }
        (Ground::Plain, _) => json!({"ref": null, "from": null, "base": null}),
    };
    let mut m = Map::new();
    m.insert("dry_run".into(), json!(req.dry_run));
    m.insert("strategy".into(), json!(req.strategy.name()));
    m.insert("changes".into(), json!(changes));
    m.insert("skipped".into(), json!(pairs(&plan.skipped)));
    m.insert("unchanged".into(), json!(pairs(&plan.unchanged)));
    m.insert("transient".into(), json!(plan.transient));
    m.insert("target".into(), moves);
    m
}

fn branch_name(req: &Request, session: &str) -> String {
    req.branch
        .clone()
        .unwrap_or_else(|| format!("treefork/{session}"))
}

/// Run the strategy; its result fields.
#[allow(clippy::too_many_arguments)]
fn land(
    req: &Request,
    ground: &Ground,
    hasher: &Git,
    scratch: &Scratch,
    store: &dyn ObjectStore,
    plan: &Plan,
    message: &str,
    session: &str,
) -> Result<Map<String, Value>> {
    let mut m = Map::new();
    let made = match (ground, req.strategy) {
        (
            Ground::Repo {
                origin, durable, ..
            },
            Strategy::Commit,
        ) => {
            let git = Git::new(&origin.path);
            strategy::commit(&git, scratch, durable, &plan.items, message)?
        }
        (
            Ground::Repo {
                origin, durable, ..
            },
            Strategy::Branch,
        ) => {
            let git = Git::new(&origin.path);
            let name = branch_name(req, session);
            strategy::valid_branch(&git, &name)?;
            let base = if req.onto_head {
                &durable.head
            } else {
                &durable.baseline
            };
            strategy::branch(&git, scratch, &name, base, &plan.items, message)?
        }
        (Ground::Repo { durable, .. }, Strategy::Patch) => {
            let p = strategy::patch_git(hasher, scratch, &durable.baseline, &plan.items)?;
            put_patch(&mut m, p);
            return Ok(m);
        }
        (Ground::Plain, _) => {
            let p = strategy::patch_plain(hasher, scratch, store, &plan.items)?;
            put_patch(&mut m, p);
            return Ok(m);
        }
    };
    m.insert("sha".into(), json!(made.sha));
    m.insert("branch".into(), json!(made.branch));
    m.insert("parent".into(), json!(made.parent));
    m.insert("worktree_error".into(), json!(made.worktree_error));
    Ok(m)
}

/// The patch as text, or base64 when it is not UTF-8 (a text hunk of a
/// non-UTF-8 file).
fn put_patch(m: &mut Map<String, Value>, p: Vec<u8>) {
    match String::from_utf8(p) {
        Ok(s) => m.insert("patch".into(), json!(s)),
        Err(e) => m.insert(
            "patch_base64".into(),
            json!(super::exec::b64_encode(e.as_bytes())),
        ),
    };
}

/// Store the result on the session's info record (state `promoted`, guarded by
/// its old bytes) together with the operation; retried when the record changed
/// meanwhile (the promote itself already happened).
fn record_result(
    t: &Target,
    op: crate::oplog::NewOp,
    promoted: Promoted,
) -> Result<crate::oplog::Operation> {
    let s = &t.session;
    let store = s.store();
    let key = meta::info_key(s.name());
    for _ in 0..8 {
        let old = store.meta_get(&key)?;
        let mut info = match &old {
            Some(b) => SessionInfo::decode(s.name(), b)?,
            None => SessionInfo::legacy(s.name(), crate::tree::Timespec::now().sec),
        };
        info.state = State::Promoted;
        info.promoted = Some(promoted.clone());
        let extra = vec![MetaOp::Expect(key.clone(), old), info.op()];
        match crate::oplog::append(&**store, s.name(), op.clone(), extra) {
            Err(Error::Conflict(_)) => continue,
            r => return r,
        }
    }
    Err(Error::Busy(format!(
        "session {}: its info record kept changing while recording the promote; the promote itself is done",
        s.name()
    )))
}
