//! The answer to `promote` ([`PromoteAnswer`]) and what a promote landed
//! ([`Landed`], also the `promote` operation's `meta`).
//!
//! Invariant: a dry run's answer is the plan's report only; a promote's adds what
//! landed, the checkpoint saved first and the operation. Deserializing tolerates
//! fields added later (no `deny_unknown_fields`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diff::Change;

/// The answer to `promote`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromoteAnswer {
    /// Whether it only reported what would happen.
    pub dry_run: bool,
    /// `commit`, `branch` or `patch`.
    pub strategy: String,
    /// The paths written (or that would be).
    pub changes: Vec<PromoteChange>,
    /// Paths left out, and why.
    pub skipped: Vec<PathWhy>,
    /// Chosen paths that are the same as the baseline, and why.
    pub unchanged: Vec<PathWhy>,
    /// Touched paths in neither state (temporary files created and removed).
    pub transient: Vec<String>,
    /// The ref that moves (or would).
    pub target: PromoteTarget,
    /// What landed (absent from a dry run).
    #[serde(flatten)]
    pub landed: Landed,
    /// The checkpoint the session's state was saved as first (hex; absent from a
    /// dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<String>,
    /// The `promote` operation (absent from a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<u64>,
    /// What the session's lifecycle does next because of it (until-promote:
    /// evicted at the next sweep, or not while changed paths are left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<String>,
    /// A dry run: chosen paths the durable repository changed since the baseline
    /// (the promote itself would be refused with `BASELINE_CONFLICT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<crate::error::DriftedPath>,
    /// What to do next, in words (a dry run with drifted paths: rebase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// A `commit` promote: what became of the workspace's own git repository
    /// (the promote commit taken in, or why not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_git: Option<String>,
}

/// A path a promote writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromoteChange {
    /// Repository-relative path (lossy for names that are not UTF-8).
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub change: Change,
    /// The new git mode (`100644`, `100755`, `120000`); `null` when deleted.
    pub mode: Option<String>,
    /// The baseline's git mode; `null` when absent.
    pub old_mode: Option<String>,
    /// The new size in bytes (0 when deleted).
    pub size: u64,
    /// A dry run: how the durable repository changed this path since the
    /// baseline (the promote would be refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drifted: Option<crate::error::Drift>,
}

/// A path and why it is listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathWhy {
    /// Workspace-relative path.
    pub path: String,
    /// Why.
    pub why: String,
}

/// The durable ref a promote moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromoteTarget {
    /// The ref (`refs/heads/...`); `null` for a patch.
    #[serde(rename = "ref")]
    pub name: Option<String>,
    /// Where it is now (`commit`); `null` for a new branch or a patch.
    pub from: Option<String>,
    /// The commit the new one is made on (the patch's base); `null` without a
    /// git baseline.
    pub base: Option<String>,
}

/// What a promote landed: a commit (`commit`, `branch`), or a patch as text, or
/// as base64 when it is not UTF-8. Empty in a dry run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Landed {
    /// The commit made.
    #[serde(flatten)]
    pub commit: Option<Committed>,
    /// The patch (`git apply` takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The patch, base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_base64: Option<String>,
}

/// A commit a promote made in the durable repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Committed {
    /// The new commit.
    pub sha: String,
    /// The branch it is on.
    pub branch: String,
    /// The commit it was made on.
    pub parent: String,
    /// Why the durable index and work tree were not updated (`commit`); `null`
    /// when they were (or for a new branch).
    pub worktree_error: Option<String>,
}
