//! What a tool is ([`Tool`]: its verb, schemas, annotations, the function that
//! bridges it), role filtering, argument parsing; the tools themselves are
//! declared in `table` (with the lookup by name), one `tool!` line each naming the
//! verb.
//!
//! Invariants: names are `[a-z0-9_]`; every tool has an input schema, an output
//! schema and the three hints; which role sees a tool is decided by its verb's
//! [`Verb::AGENT`](treefork::control::Verb::AGENT) (an agent socket lists every
//! tool whose verb is not [`Agent::No`]), so `tools/list` never shows a tool the
//! socket's daemon would refuse outright (a verb an agent may send with some
//! arguments only is listed; the daemon refuses the arguments it may not send).

use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use treefork::control::{Agent, Role};

use super::bridge::{Bridge, Outcome, ToolError};

/// Reports progress of a running tool: (progress, total, message).
pub type Progress<'a> = &'a (dyn Fn(f64, Option<f64>, String) + Sync);

/// What a tool runs with.
pub struct Call<'a> {
    /// The session's socket.
    pub bridge: &'a Bridge,
    /// Progress notifications (no-ops when the client asked for none).
    pub progress: Progress<'a>,
}

/// The MCP hints of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Hints {
    /// Changes nothing.
    pub read_only: bool,
    /// May replace or drop state (else only adds).
    pub destructive: bool,
    /// Repeating it with the same arguments changes nothing more.
    pub idempotent: bool,
}

pub const READ: Hints = Hints {
    read_only: true,
    destructive: false,
    idempotent: true,
};
pub const ADD: Hints = Hints {
    read_only: false,
    destructive: false,
    idempotent: false,
};
pub const REPLACE: Hints = Hints {
    read_only: false,
    destructive: true,
    idempotent: false,
};

/// A tool's output schema when it is not its verb's (typed) response.
#[derive(Clone, Copy)]
pub enum Output {
    /// The tool's own: it answers more than one verb's response.
    Own(fn() -> JsonObject),
}

/// One tool.
pub struct Tool {
    /// `[a-z0-9_]`.
    pub name: &'static str,
    /// The verb it sends (its role rule decides who sees the tool).
    pub verb: &'static str,
    /// Whether an agent socket may send that verb.
    pub agent: Agent,
    /// Human title.
    pub title: &'static str,
    /// What it does (shown to the model).
    pub description: &'static str,
    /// Annotations.
    pub hints: Hints,
    /// Input schema.
    pub input: fn() -> Arc<JsonObject>,
    /// The verb's response schema, when typed.
    pub response: fn() -> Option<Arc<JsonObject>>,
    /// Output schema (`None`: the verb's response).
    pub output: Option<Output>,
    /// Bridge a call.
    pub run: fn(&Call, Value) -> Outcome,
}

impl Tool {
    /// Whether a socket of `role` may use it.
    pub fn visible(&self, role: Role) -> bool {
        role == Role::User || self.agent != Agent::No
    }

    /// The output schema.
    pub fn output_schema(&self) -> Arc<JsonObject> {
        match self.output {
            None => (self.response)().unwrap_or_else(|| {
                panic!("tool {}: verb {} answers no object", self.name, self.verb)
            }),
            Some(Output::Own(f)) => Arc::new(f()),
        }
    }

    /// The MCP description of the tool.
    pub fn describe(&self) -> rmcp::model::Tool {
        let h = self.hints;
        let ann = ToolAnnotations::with_title(self.title)
            .read_only(h.read_only)
            .destructive(h.destructive)
            .idempotent(h.idempotent)
            .open_world(matches!(self.name, "exec" | "experiment" | "bisect"));
        rmcp::model::Tool::new(self.name, self.description, (self.input)())
            .with_title(self.title)
            .with_raw_output_schema(self.output_schema())
            .with_annotations(ann)
    }
}

/// Parse a tool's arguments (`null` or absent: `{}`).
pub fn args<T: DeserializeOwned>(v: Value) -> Result<T, ToolError> {
    let v = if v.is_null() { json!({}) } else { v };
    serde_json::from_value(v).map_err(ToolError::bad_args)
}
