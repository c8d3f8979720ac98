//! `promote`: promote the session's chosen paths back to the durable git repository it
//! was imported from (user role only; see docs/design.md, "Promote").

use super::prelude::*;
use crate::control::is_false;

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
    "commit".into()
}

impl Verb for Promote {
    const NAME: &'static str = "promote";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Value;

    fn agent_may(&self) -> bool {
        // Writes to the user's durable git repository (commits, branches,
        // index and work tree): the user's decision, never the agent's.
        let Promote {
            paths: _,
            strategy: _,
            message: _,
            dry_run: _,
            branch: _,
            onto_head: _,
            allow_large: _,
        } = self;
        false
    }
}

impl Handler for Promote {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Value> {
        let Promote {
            paths,
            strategy,
            message,
            dry_run,
            branch,
            onto_head,
            allow_large,
        } = self;
        let req = ops::promote::Request {
            paths,
            strategy: ops::promote::Strategy::parse(&strategy)?,
            message,
            dry_run,
            branch,
            onto_head,
            allow_large,
        };
        ops::promote::run(&cx.target(), &cx.call, req)
    }
}
