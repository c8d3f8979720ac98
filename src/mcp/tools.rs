//! What a tool is ([`Tool`]: its verb, schemas, annotations, the function that
//! bridges it), role filtering, argument parsing; the tools themselves are
//! declared in `table`, one `tool!` line each naming the verb.
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
pub use super::table::TOOLS;

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
    /// Hand-written, while the verb's response is untyped (`Value`): delete the
    /// override once it is typed (a unit test says so).
    Untyped(fn() -> JsonObject),
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
            None => (self.response)()
                .unwrap_or_else(|| panic!("tool {}: verb {} is untyped", self.name, self.verb)),
            Some(Output::Untyped(f) | Output::Own(f)) => Arc::new(f()),
        }
    }

    /// The MCP description of the tool.
    pub fn describe(&self) -> rmcp::model::Tool {
        let h = self.hints;
        let ann = ToolAnnotations::with_title(self.title)
            .read_only(h.read_only)
            .destructive(h.destructive)
            .idempotent(h.idempotent)
            .open_world(self.name == "exec" || self.name == "experiment");
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

/// The tool named `name`, if a socket of `role` may use it.
pub fn find(name: &str, role: Role) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name && t.visible(role))
}

#[cfg(test)]
mod tests {
    use super::super::schemas as s;
    use super::*;

    fn names(role: Role) -> Vec<&'static str> {
        TOOLS
            .iter()
            .filter(|t| t.visible(role))
            .map(|t| t.name)
            .collect()
    }

    #[test]
    fn names_are_snake_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for t in TOOLS {
            assert!(
                !t.name.is_empty()
                    && t.name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                t.name
            );
            assert!(seen.insert(t.name), "duplicate {}", t.name);
        }
        for want in [
            "status",
            "log",
            "diff",
            "show_file",
            "checkpoint",
            "branch",
            "fork",
            "checkout",
            "restore",
            "undo",
            "redo",
            "op_log",
            "exec",
            "experiment",
            "experiment_adopt",
            "messages_append",
            "messages_list",
            "rewind",
            "promote",
        ] {
            assert!(seen.contains(want), "missing {want}");
        }
    }

    /// A JSON Schema object as MCP wants it: `type: object`, `properties` an object
    /// of schemas, `required` naming properties only.
    fn check_schema(tool: &str, which: &str, s: &JsonObject) {
        let at = format!("{tool} {which}");
        assert_eq!(s.get("type"), Some(&json!("object")), "{at}: {s:?}");
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{at}: no properties"));
        for (k, v) in props {
            assert!(v.is_object(), "{at}.{k} is not a schema");
        }
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            assert!(
                props.contains_key(r),
                "{at}: required {r} is not a property"
            );
        }
    }

    #[test]
    fn every_tool_has_valid_schemas_and_hints() {
        for t in TOOLS {
            let d = t.describe();
            check_schema(t.name, "input", &d.input_schema);
            check_schema(t.name, "output", d.output_schema.as_ref().unwrap());
            let a = d.annotations.unwrap();
            assert!(a.read_only_hint.is_some() && a.destructive_hint.is_some());
            assert!(a.idempotent_hint.is_some());
            assert!(!t.description.is_empty());
            // Reading tools destroy nothing.
            assert!(!(t.hints.read_only && t.hints.destructive), "{}", t.name);
        }
        // The schemas are derived from the parsers: a required field is required.
        let d = find("checkpoint", Role::Agent).unwrap().describe();
        assert!(d.input_schema["properties"].get("explanation").is_some());
        let r = find("restore", Role::Agent).unwrap().describe();
        assert_eq!(r.input_schema["required"], json!(["ref"]));
    }

    /// A hand-written output schema stands in for an untyped verb response only:
    /// once the verb's response is typed, the tool's override is to be deleted.
    #[test]
    fn overrides_only_for_untyped_responses() {
        for t in TOOLS {
            match t.output {
                None => assert!((t.response)().is_some(), "{}", t.name),
                Some(Output::Untyped(_)) => assert!(
                    (t.response)().is_none(),
                    "tool {}: verb {}'s response is typed now: delete the tool's \
                     Untyped output override",
                    t.name,
                    t.verb
                ),
                Some(Output::Own(_)) => {}
            }
            assert!(treefork::verbs::NAMES.contains(&t.verb), "{}", t.verb);
        }
    }

    /// A tool's arguments are its verb's request properties, under the same
    /// names, except the few the tool itself uses (listed here).
    #[test]
    fn tool_arguments_are_their_verbs_or_the_tools_own() {
        let own: &[(&str, &[&str])] = &[
            ("diff", &["max_bytes"]),
            ("show_file", &["max_bytes"]),
            ("checkpoint", &["explanation"]),
            ("exec", &["timeout_s", "capture_limit", "explanation"]),
            // `rank_by` and `keep` go to `experiment_end`.
            (
                "experiment",
                &["commands", "env", "rank_by", "timeout_s", "keep"],
            ),
            ("messages_append", &["flush"]),
        ];
        let verbs = treefork::verbs::schemas();
        for t in TOOLS {
            let v = verbs.iter().find(|v| v.name == t.verb).unwrap();
            let props = v.request.get("properties").and_then(Value::as_object);
            let extra = own
                .iter()
                .find(|(n, _)| *n == t.name)
                .map_or(&[][..], |(_, e)| e);
            for p in (t.input)()["properties"].as_object().unwrap().keys() {
                assert!(
                    props.is_some_and(|ps| ps.contains_key(p)) || extra.contains(&p.as_str()),
                    "tool {}: argument {p} is not a property of {}'s request",
                    t.name,
                    t.verb
                );
            }
        }
    }

    #[test]
    fn roles_filter_the_list() {
        let user = names(Role::User);
        let agent = names(Role::Agent);
        assert_eq!(user.len(), TOOLS.len());
        assert!(user.contains(&"promote"));
        assert!(!agent.contains(&"promote"), "{agent:?}");
        assert_eq!(agent.len(), TOOLS.len() - 1, "{agent:?}");
        assert!(find("promote", Role::Agent).is_none());
        assert!(find("promote", Role::User).is_some());
        assert!(find("nope", Role::User).is_none());
    }

    #[test]
    fn arguments_are_checked_against_the_types() {
        let e = args::<s::RestoreArgs>(json!({"paths": []})).err().unwrap();
        assert_eq!(e.code(), "bad_request");
        // Unknown fields are refused, not ignored.
        assert!(args::<treefork::verbs::Status>(json!({"x": 1})).is_err());
        let a: s::RestoreArgs = args(json!({"ref": "HEAD"})).unwrap();
        assert_eq!(a.dry_run, None);
        let _: treefork::verbs::Status = args(Value::Null).unwrap();
    }
}
