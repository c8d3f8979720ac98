//! The table of tools, in `tools/list` order: one [`tool!`] entry per tool,
//! naming its verb (see [`super::tools`] for what a [`Tool`] is and the
//! invariants the table keeps).
//!
//! From the verb come the role rule (`Verb::AGENT`), the input schema and the
//! parser (the verb's request type, unless the tool names its own argument type)
//! and the output schema (the verb's response type). An entry carries its own
//! output schema only when the tool answers more than the verb (`Own(...)`).

use serde_json::json;
use treefork::control::Verb;
use treefork::verbs;

use super::schemas::{self as s, nullable, object};
use super::tools::Output::Own;
use super::tools::{ADD, Hints, READ, REPLACE, Tool};
use super::{bisect, calls, run};

/// A tool: `name = Verb` (arguments: the verb's request, sent as is) or
/// `name = Verb(ArgsType) => run_fn`; then hints, title, description, and an
/// output override when the output is not the verb's typed response.
macro_rules! tool {
    ($name:ident = $verb:ident, $($rest:tt)*) => {
        tool!(@ $name, $verb, verbs::$verb, calls::request::<verbs::$verb>, $($rest)*)
    };
    ($name:ident = $verb:ident($args:ty) => $run:expr, $($rest:tt)*) => {
        tool!(@ $name, $verb, $args, $run, $($rest)*)
    };
    (@output) => { None };
    (@output $output:expr) => { Some($output) };
    (@ $name:ident, $verb:ident, $args:ty, $run:expr,
     $hints:expr, $title:literal, $description:literal $(, $output:expr)? $(,)?) => {
        Tool {
            name: stringify!($name),
            verb: <verbs::$verb as Verb>::NAME,
            agent: <verbs::$verb as Verb>::AGENT,
            title: $title,
            description: $description,
            hints: $hints,
            input: s::input::<$args>,
            response: s::typed_output::<<verbs::$verb as Verb>::Response>,
            output: tool!(@output $($output)?),
            run: $run,
        }
    };
}

const IDEMPOTENT_REPLACE: Hints = Hints {
    idempotent: true,
    ..REPLACE
};

/// Every tool, in `tools/list` order.
pub static TOOLS: &[Tool] = &[
    tool!(
        status = Status,
        READ,
        "Pending changes",
        "Paths changed in the workspace since the last checkpoint, HEAD and the attached branch."
    ),
    tool!(
        log = Log,
        READ,
        "Checkpoint log",
        "Checkpoints along first parents from a ref (default HEAD), newest first."
    ),
    tool!(diff = Diff(s::DiffArgs) => calls::diff, READ,
        "Diff two states",
        "Differences between two states (refs, or WORKING for the live files): name-status, stat, or patch text cut at max_bytes.",
        Own(|| object(
            json!({"entries": {"type": "array", "items": {"type": "object"}},
                "patch": nullable("string"), "truncated": {"type": "boolean"},
                "patch_bytes": {"type": "integer"}}),
            &["entries", "truncated"],
        ))
    ),
    tool!(show_file = Show(s::ShowFileArgs) => calls::show_file, READ,
        "Read a file at a ref",
        "What is at a workspace path in a stored state (default HEAD), without a checkout: a file's text (or base64 when not UTF-8), a directory's entries, a link's target.",
        Own(|| object(
            json!({"kind": {"type": "string"}, "path": {"type": "string"},
                "text": {"type": "string"}, "base64": {"type": "string"},
                "truncated": {"type": "boolean"}, "size": {"type": "integer"},
                "entries": {"type": "array"}}),
            &["kind"],
        ))
    ),
    tool!(checkpoint = Checkpoint(s::CheckpointArgs) => calls::checkpoint, ADD,
        "Take a checkpoint",
        "Save the workspace as a checkpoint (it becomes HEAD), with a message and an explanation kept in the operation log."
    ),
    tool!(
        branch = Branch,
        ADD,
        "Create a branch",
        "Create a branch at a ref (default HEAD, pending changes checkpointed first). An existing name is a conflict."
    ),
    tool!(fork = Fork(s::ForkArgs) => calls::fork, ADD,
        "Fork into a new workspace",
        "Create a new session from a ref (default: a fresh checkpoint) or from a message, mounted at a new directory."
    ),
    tool!(
        checkout = Checkout,
        IDEMPOTENT_REPLACE,
        "Check out a ref",
        "Make the workspace show a ref's files (pending changes are saved first as a checkpoint; undo reverts it). A branch name attaches HEAD."
    ),
    tool!(restore = Restore(s::RestoreArgs) => calls::restore, IDEMPOTENT_REPLACE,
        "Restore files from a ref",
        "Rewind the workspace, or some paths of it, to a ref. Dry run by default (reports what would change); pass dry_run=false to restore (pending changes are saved first)."
    ),
    tool!(
        merge = Merge,
        REPLACE,
        "Merge a ref into the workspace",
        "Three-way merge of a ref (checkpoint, branch, session name, REMOTE/NAME) into the workspace from their merge base; clean: a checkpoint with two parents. On conflicts it stops (status merge_conflict, conflicts listed with path and kind; text files carry conflict markers, binary ones PATH~theirs beside): resolve them, then call again with continue=true, or abort=true. dry_run=true only reports."
    ),
    tool!(
        cherry_pick = CherryPick,
        REPLACE,
        "Apply one checkpoint's changes",
        "Apply the changes one checkpoint made (against its first parent) to the workspace as a new checkpoint; conflicts stop it as merge does (continue=true / abort=true)."
    ),
    tool!(
        revert = Revert,
        REPLACE,
        "Take one change out",
        "Take out what one checkpoint changed, or with ref exec@N what recorded command N changed, keeping everything after it (a three-way merge; a new checkpoint). Where later changes touched the same lines it stops on conflicts as merge does (continue=true / abort=true)."
    ),
    tool!(
        rebase = Rebase,
        REPLACE,
        "Rebase onto the moved repository",
        "Replay the session's changes since its git baseline onto the durable repository's new head (default: the head of the branch it was imported from; onto names another commit), file by file; records the new baseline so promote counts only later commits as drift. Conflicts stop it as merge does (continue=true / abort=true)."
    ),
    tool!(undo = Undo(s::UndoArgs) => calls::undo, REPLACE,
        "Undo the last operation",
        "Revert what the session's newest not-undone operation changed (recorded itself; redo reverts it)."
    ),
    tool!(redo = Redo(s::UndoArgs) => calls::redo, REPLACE,
        "Redo the last undo",
        "Revert the newest undo."
    ),
    tool!(
        op_log = OpLog,
        READ,
        "Operation log",
        "The session's operations (checkpoints, checkouts, execs, undos, ...), newest first."
    ),
    tool!(exec = ExecBegin(s::ExecArgs) => run::exec, REPLACE,
        "Run a command, recorded",
        "Run a command in the workspace (stdin empty, output captured) and record it: the before and after checkpoints, changed paths, exit status and output. Sends progress while it runs.",
        Own(|| object(
            json!({"exec": {"type": "integer"}, "status": {"type": "integer"},
                "exit_code": nullable("integer"), "signal": nullable("integer"),
                "stdout": {"type": "string"}, "stderr": {"type": "string"},
                "timed_out": {"type": "boolean"}, "duration_ms": {"type": "integer"},
                "checkpoint": nullable("string"), "changed": {"type": "array"}}),
            &["exec", "status", "stdout", "stderr"],
        ))
    ),
    tool!(experiment = ExperimentBegin(s::ExperimentArgs) => run::experiment, ADD,
        "Try commands in parallel forks",
        "Run several commands at once, each in its own fork of the workspace, rank them (exit 0 first, then duration) and compare. Sends progress as runs finish. Adopt a run with experiment_adopt.",
        Own(|| object(
            json!({"id": {"type": "string"}, "runs": {"type": "array", "items": {"type": "object"}},
                "ranking": {"type": "array"}, "winner": nullable("integer")}),
            &["id", "runs"],
        ))
    ),
    tool!(experiment_adopt = ExperimentAdopt(verbs::ExperimentAdopt) => run::adopt, REPLACE,
        "Adopt an experiment's run",
        "Bring a run's final files into the workspace (pending changes saved first; undo reverts it)."
    ),
    tool!(bisect = BisectBegin(s::BisectArgs) => bisect::bisect, ADD,
        "Find the first bad checkpoint",
        "Run a test command (command: sh -c string, or argv) in throwaway forks of the checkpoints on the first-parent history from good (default: the oldest) to bad (default: HEAD), jobs at a time (a k-ary search), and name the first checkpoint where it fails (exit non-zero or timeout). The workspace never moves; the forks are removed; the result is recorded as one bisect operation. Sends progress per round.",
        Own(|| object(
            json!({"first_bad": {"type": ["object", "null"]}, "last_good": {"type": ["object", "null"]},
                "good": {"type": "object"}, "bad": {"type": "object"},
                "steps": {"type": "array", "items": {"type": "object"}},
                "candidates": {"type": "integer"}, "rounds": {"type": "integer"}}),
            &["first_bad", "steps"],
        ))
    ),
    tool!(messages_append = MessageAppend(s::AppendArgs) => calls::messages_append, ADD,
        "Append a message",
        "Append a message to the session's conversation log, tied to the current checkpoint and operation (returns once queued; flush=true waits until durable).",
        Own(|| object(
            json!({"id": {"type": "string"}, "queued": {"type": "boolean"}}),
            &["id"],
        ))
    ),
    tool!(messages_list = Messages(s::ListArgs) => calls::messages_list, READ,
        "List messages",
        "The session's messages, oldest first, each with the checkpoint and workspace it was appended at."
    ),
    tool!(rewind = Rewind(s::RewindArgs) => calls::rewind, REPLACE,
        "Rewind to a message",
        "Bring the files and/or the conversation back to a message (later messages are hidden, not deleted; undo brings them back)."
    ),
    tool!(promote = Promote(s::PromoteArgs) => calls::promote, REPLACE,
        "Promote to the git repository",
        "Write the session's chosen paths back to the durable git repository it was mounted from (commit, branch or patch). Dry run by default; pass dry_run=false to write. User role only."
    ),
];

/// The tool named `name`, if a socket of `role` may use it.
pub fn find(name: &str, role: treefork::control::Role) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name && t.visible(role))
}

#[cfg(test)]
mod tests {
    use super::super::schemas as s;
    use super::super::tools::*;
    use super::*;
    use rmcp::model::JsonObject;
    use serde_json::Value;
    use treefork::control::Role;

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
            "merge",
            "cherry_pick",
            "rebase",
            "revert",
            "undo",
            "redo",
            "op_log",
            "exec",
            "experiment",
            "experiment_adopt",
            "bisect",
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

    /// Every tool's verb exists, and a tool without its own output (`Own`: it
    /// answers more than the verb, or the verb answers a choice of shapes, which
    /// MCP's object-only output schema cannot say) has its verb's typed object.
    #[test]
    fn outputs_come_from_typed_responses() {
        for t in TOOLS {
            if t.output.is_none() {
                let typed = (t.response)().is_some();
                assert!(typed, "{}: verb {} answers no object", t.name, t.verb);
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
                &["commands", "env", "rank_by", "timeout_s", "keep", "run_at"],
            ),
            (
                "bisect",
                &[
                    "command",
                    "argv",
                    "jobs",
                    "good",
                    "bad",
                    "timeout_s",
                    "run_at",
                ],
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
