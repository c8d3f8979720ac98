//! What a tool is ([`Tool`]: schemas, annotations, the op its role check is made
//! on, the function that bridges it), role filtering, argument parsing; the
//! tools themselves are in `table`.
//!
//! Invariants: names are `[a-z0-9_]`; every tool has an input schema, an output
//! schema and the three hints; which role sees a tool is decided by
//! [`Role::allows`] on the tool's probe op (the one place roles are classified),
//! so `tools/list` never shows a tool the socket's daemon would refuse. Tools
//! whose ops this build's `Op` enum does not spell yet (the message protocol)
//! have no probe and are listed for every role (they are session ops the agent
//! role may use).

use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use treefork::control::Role;
use treefork::verbs::Op;

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

/// One tool.
pub struct Tool {
    /// `[a-z0-9_]`.
    pub name: &'static str,
    /// Human title.
    pub title: &'static str,
    /// What it does (shown to the model).
    pub description: &'static str,
    /// Annotations.
    pub hints: Hints,
    /// Input schema.
    pub input: fn() -> Arc<JsonObject>,
    /// Output schema.
    pub output: fn() -> JsonObject,
    /// The op the role check is made on (`None`: every role).
    pub probe: fn() -> Option<Op>,
    /// Bridge a call.
    pub run: fn(&Call, Value) -> Outcome,
}

impl Tool {
    /// Whether a socket of `role` may use it.
    pub fn visible(&self, role: Role) -> bool {
        (self.probe)().is_none_or(|op| op.allowed(role))
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
            .with_raw_output_schema(Arc::new((self.output)()))
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
        assert!(args::<s::NoArgs>(json!({"x": 1})).is_err());
        let a: s::RestoreArgs = args(json!({"ref": "HEAD"})).unwrap();
        assert_eq!(a.dry_run, None);
        let _: s::NoArgs = args(Value::Null).unwrap();
    }
}
