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
//! operation of kind `promote` in one commit. The request is [`Promote`] (the wire
//! struct, re-exported by `verbs::promote`); the answer and the operation's `meta`
//! are [`answer`]'s types.
//!
//! Invariants: `dry_run` writes nothing anywhere (no checkpoint, no object, no
//! ref); every git command on the durable repository runs through
//! `lifecycle::git` (as its owner); a session without a git baseline can only
//! make a patch.

pub mod answer;
mod drift;
mod gitfmt;
pub(crate) mod gitio;
mod plan;
mod record;
mod rest;
mod scratch;
mod strategy;
mod workspace;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::answer::{Landed, PathWhy, PromoteAnswer, PromoteChange, PromoteTarget};
use self::drift::Durable;
use self::gitio::Git;
use self::plan::{Act, Inputs, Listing, Plan};
use self::scratch::Scratch;
use super::record::{Call, view_of};
use super::restore::clean_path;
use super::{Target, ref_or_fresh, working_root};
use crate::control::is_false;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::lifecycle::{self, Origin, Promoted, SessionInfo};
use crate::store::ObjectStore;

pub use plan::{IGNORED, SIZE_LIMIT};

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

/// Promote the session's chosen paths back to the durable git repository it
/// was imported from (user role only; see docs/design.md, "Promote").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Promote {
    /// Workspace-relative paths (files or directories); empty: the touched files.
    #[serde(default)]
    pub paths: Vec<String>,
    /// `commit` (default), `branch` or `patch`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Commit message (default: names the session and its task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Only report what would happen; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// `branch`: the new branch's name (default `treefork/<session>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// `branch`: base the commit on the durable branch's head, not the baseline.
    #[serde(default, skip_serializing_if = "is_false")]
    pub onto_head: bool,
    /// Accept files over the size limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_large: bool,
}

fn default_strategy() -> String {
    Strategy::Commit.name().into()
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

pub(crate) fn run(t: &Target, call: &Call, req: Promote) -> Result<PromoteAnswer> {
    let s = &t.session;
    let store = s.store().clone();
    let info = lifecycle::load(&*store, s.name())?;
    let origin = info.as_ref().and_then(|i| i.origin.clone());
    refuse_untrusted(info.as_ref(), s.name())?;
    let strategy = Strategy::parse(&req.strategy)?;
    check_request(&req, strategy, origin.as_ref(), s.name())?;
    // Flushed first: the touched paths of changes still pending (an unlink not yet
    // synced) are written with the flush, so the default choice includes them.
    let live_root = working_root(t)?;
    let chosen = chosen_paths(&*store, s.name(), &req.paths)?;
    let ground = ground(origin.clone(), strategy, &chosen, req.dry_run)?;
    let base_root = match &origin {
        Some(o) => NodeId::from_hex(&o.baseline_root)
            .ok_or_else(|| Error::corrupt("session info", "bad baseline root"))?,
        None => crate::session::empty_root(&*store, 0, 0)?,
    };
    // The state: saved first (a checkpoint), except in a dry run (which writes
    // nothing: the flushed tree is read instead).
    let (root, saved) = if req.dry_run {
        (live_root, None)
    } else {
        let c = ref_or_fresh(t, call, None, "before promote", "promote")?;
        (c.root, Some(c))
    };
    let scratch_owner = match &ground {
        Ground::Repo { origin, .. } => origin.path.clone(),
        Ground::Plain => std::env::temp_dir(),
    };
    let scratch = Scratch::new(&scratch_owner)?;
    let (hasher, write) = hasher(&ground, &scratch, &req, strategy)?;
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
    let mut out = report(&req, strategy, &plan, &ground, s.name());
    if let Ground::Repo { durable, .. } = &ground {
        drift::mark(&mut out, durable);
    }
    if req.dry_run {
        return Ok(out);
    }
    if plan.items.is_empty() {
        return Err(Error::Invalid(
            "nothing to promote: no chosen path differs from the baseline".into(),
        ));
    }
    let message = message(&req, info.as_ref(), s.name(), &plan);
    let result = land(
        &req,
        strategy,
        &ground,
        &hasher,
        &scratch,
        &*store,
        &plan,
        &message,
        s.name(),
    )?;
    let (new_baseline, ws_git) = workspace::after(t, &ground, &result, strategy);
    out.workspace_git = ws_git;
    let mut in_repo = |left: &[rest::Changed]| match &ground {
        Ground::Repo { durable, .. } => {
            // The durable branch as it is now: moved by this promote (commit), or
            // as the drift check read it.
            let head = result
                .commit
                .as_ref()
                .filter(|_| strategy == Strategy::Commit);
            let head = head.map_or(durable.head.as_str(), |c| c.sha.as_str());
            rest::in_repo(&hasher, &*store, head, left)
        }
        Ground::Plain => Ok(Default::default()),
    };
    // The promote has landed: a failure to tell what it left out only keeps the
    // session mounted (it is counted incomplete).
    let coverage = rest::coverage(
        &*store,
        base_root,
        root,
        &chosen,
        &mut ignored,
        &mut in_repo,
    )
    .unwrap_or_else(|e| {
        log::warn!("session {}: promote coverage unknown: {e}", s.name());
        rest::Coverage {
            left: vec![format!("(unknown: {e})")],
        }
    });
    // (The views are set in the record's batch.)
    let view = view_of(&s.record(), root);
    let mut op = call.op("promote", view.clone(), view);
    op.meta = match serde_json::to_value(&result) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => unreachable!("a struct serializes to an object"),
    };
    // The repository it landed in, for the row that shows the commit.
    if let Ground::Repo { origin, .. } = &ground {
        op.meta.insert(
            "repo".into(),
            origin.path.to_string_lossy().into_owned().into(),
        );
    }
    // Undo does not reach into the durable repository: the record is inert.
    op.inert = true;
    let mut done = promoted(strategy, &plan, &result);
    done.complete = coverage.complete();
    done.root = Some(root.to_hex());
    let rec = record::record_result(t, op, root, done, new_baseline)?;
    out.lifecycle = info.as_ref().and_then(|i| rest::note(&i.policy, &coverage));
    out.landed = result;
    out.saved = saved.map(|c| c.id.to_hex());
    out.op = Some(rec.seq);
    Ok(out)
}

/// The promote result stored on the session's info record.
fn promoted(strategy: Strategy, plan: &Plan, landed: &Landed) -> Promoted {
    let c = landed.commit.as_ref();
    Promoted {
        strategy: strategy.name().into(),
        sha: c.map(|c| c.sha.clone()),
        branch: c.map(|c| c.branch.clone()),
        paths: plan
            .items
            .iter()
            .map(|i| String::from_utf8_lossy(&i.path).into_owned())
            .collect(),
        time: crate::tree::Timespec::now().sec,
        complete: true,
        root: None,
    }
}

/// Check the durable repository of a git origin (drift, baseline listing).
fn ground(
    origin: Option<Origin>,
    strategy: Strategy,
    chosen: &[Vec<u8>],
    dry_run: bool,
) -> Result<Ground> {
    let Some(o) = origin.filter(|o| o.git && o.baseline.is_some()) else {
        return Ok(Ground::Plain);
    };
    let git = Git::new(&o.path);
    let durable = drift::check(&git, &o, chosen, dry_run)?;
    if strategy == Strategy::Commit && durable.branch.is_none() {
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

fn check_request(
    req: &Promote,
    strategy: Strategy,
    origin: Option<&Origin>,
    session: &str,
) -> Result<()> {
    let git = origin.is_some_and(|o| o.git && o.baseline.is_some());
    if strategy != Strategy::Patch && !git {
        return Err(Error::Invalid(format!(
            "session {session} has no git baseline (it was imported from a plain directory, or created empty): only --strategy patch is possible"
        )));
    }
    if strategy != Strategy::Branch && (req.branch.is_some() || req.onto_head) {
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
fn hasher(
    ground: &Ground,
    scratch: &Scratch,
    req: &Promote,
    strategy: Strategy,
) -> Result<(Git, bool)> {
    Ok(match ground {
        Ground::Repo { origin, .. } => {
            let git = Git::new(&origin.path);
            match (req.dry_run, strategy) {
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
fn message(req: &Promote, info: Option<&SessionInfo>, session: &str, plan: &Plan) -> String {
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
fn report(
    req: &Promote,
    strategy: Strategy,
    plan: &Plan,
    ground: &Ground,
    session: &str,
) -> PromoteAnswer {
    let changes = plan
        .items
        .iter()
        .map(|i| PromoteChange {
            path: String::from_utf8_lossy(&i.path).into_owned(),
            change: i.act,
            mode: i.mode.map(str::to_string),
            old_mode: i.old_mode.clone(),
            size: i.size,
            drifted: None,
        })
        .collect();
    let pairs = |v: &[(String, String)]| -> Vec<PathWhy> {
        v.iter()
            .map(|(p, w)| PathWhy {
                path: p.clone(),
                why: w.clone(),
            })
            .collect()
    };
    let target =
        |name: Option<String>, from: Option<&String>, base: Option<&String>| PromoteTarget {
            name,
            from: from.cloned(),
            base: base.cloned(),
        };
    let moves = match (ground, strategy) {
        (Ground::Repo { durable, .. }, Strategy::Commit) => target(
            Some(format!(
                "refs/heads/{}",
                durable.branch.clone().unwrap_or_default()
            )),
            Some(&durable.head),
            Some(&durable.head),
        ),
        (Ground::Repo { durable, .. }, Strategy::Branch) => target(
            Some(format!("refs/heads/{}", branch_name(req, session))),
            None,
            Some(if req.onto_head {
                &durable.head
            } else {
                &durable.baseline
            }),
        ),
        (Ground::Repo { durable, .. }, Strategy::Patch) => {
            target(None, None, Some(&durable.baseline))
        }
        (Ground::Plain, _) => target(None, None, None),
    };
    PromoteAnswer {
        dry_run: req.dry_run,
        strategy: strategy.name().into(),
        changes,
        skipped: pairs(&plan.skipped),
        unchanged: pairs(&plan.unchanged),
        transient: plan.transient.clone(),
        target: moves,
        landed: Landed::default(),
        saved: None,
        op: None,
        lifecycle: None,
        drifted: Vec::new(),
        next: None,
        workspace_git: None,
    }
}

fn branch_name(req: &Promote, session: &str) -> String {
    req.branch
        .clone()
        .unwrap_or_else(|| format!("treefork/{session}"))
}

/// Run the strategy; its result fields.
#[allow(clippy::too_many_arguments)]
fn land(
    req: &Promote,
    strategy: Strategy,
    ground: &Ground,
    hasher: &Git,
    scratch: &Scratch,
    store: &dyn ObjectStore,
    plan: &Plan,
    message: &str,
    session: &str,
) -> Result<Landed> {
    let made = match (ground, strategy) {
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
            return Ok(patch(p));
        }
        (Ground::Plain, _) => {
            let p = strategy::patch_plain(hasher, scratch, store, &plan.items)?;
            return Ok(patch(p));
        }
    };
    Ok(Landed {
        commit: Some(made),
        ..Landed::default()
    })
}

/// The patch as text, or base64 when it is not UTF-8 (a text hunk of a
/// non-UTF-8 file).
fn patch(p: Vec<u8>) -> Landed {
    match String::from_utf8(p) {
        Ok(s) => Landed {
            patch: Some(s),
            ..Landed::default()
        },
        Err(e) => Landed {
            patch_base64: Some(super::exec::b64_encode(e.as_bytes())),
            ..Landed::default()
        },
    }
}
