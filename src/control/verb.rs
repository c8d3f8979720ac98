//! What the protocol knows of a verb: its wire name, how the daemon serves it, its
//! role rule, whether it records an operation, and its request and response types
//! (serde, with JSON Schemas derived from the same types, so schema and parser
//! cannot drift apart).
//!
//! A verb is one file under `src/verbs/`: the request type implements [`Verb`]
//! (this module: the protocol's view, usable by any client) and `verbs::Handler`
//! (the daemon's view). The table in `src/verbs/mod.rs` names every verb once and
//! generates the request enum, routing, names and schemas from it.
//!
//! Invariant: [`Verb::agent_may`] destructures every field of its request (no
//! `..`), so a new argument does not compile until its role rule considers it.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How the daemon serves a verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Store-wide: served without resolving a mounted session first.
    Store,
    /// A session op: the target session is resolved (for the caller's scope), its
    /// access clock touched, its roots pinned, and the op runs under the
    /// session's op lock; the answer carries `branch_moved` when due.
    Session,
    /// A session op served without the op lock (the conversation log, whose
    /// appends wait only for room in the writer's queue).
    Unlocked,
}

/// Whether an agent socket may ever send a verb (what the MCP server lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Always.
    Yes,
    /// Never: the user's.
    No,
    /// With some arguments only ([`Verb::agent_may`] decides).
    Some,
}

/// A verb's request type.
pub trait Verb: Serialize + DeserializeOwned + JsonSchema + Sized {
    /// The wire name (the request's `op` field).
    const NAME: &'static str;
    /// How the daemon serves it.
    const KIND: Kind;
    /// Whether an agent socket may ever send it.
    const AGENT: Agent;
    /// Whether it appends an operation record when it succeeds, or begins
    /// something whose end does (`exec_begin`, `experiment_begin`): on an agent
    /// socket refused once the log holds `op_records` records (`crate::quota`);
    /// an end is never refused. Checked against what each verb does by the crash
    /// model test (`verbs::model_tests::crash`), not trusted.
    const RECORDS: bool;
    /// The answer's type.
    type Response: Serialize + DeserializeOwned + JsonSchema;

    /// Whether an agent socket may send this request: the one place the role rule
    /// of this verb is decided, destructuring every field.
    fn agent_may(&self) -> bool;

    /// What a refusal of this request on an agent socket names.
    fn refused_what(&self) -> String {
        Self::NAME.to_string()
    }
}

/// `skip_serializing_if` helper.
pub fn is_false(b: &bool) -> bool {
    !*b
}
