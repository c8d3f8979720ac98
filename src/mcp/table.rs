//! The table of tools, in `tools/list` order: one [`tool!`] entry per tool,
//! naming its verb (see [`super::tools`] for what a [`Tool`] is and the
//! invariants the table keeps).
//!
//! From the verb come the role rule (`Verb::AGENT`), the input schema and the
//! parser (the verb's request type, unless the tool names its own argument type)
//! and the output schema (the verb's response type). An entry carries an output
//! override while its verb's response is untyped (`Untyped(...)`: delete it when
//! the response is typed), or its own output when the tool answers more than the
//! verb (`Own(...)`).

use rmcp::model::JsonObject;
use serde_json::json;
use treefork::control::Verb;
use treefork::verbs;

use super::schemas::{self as s, changes, nullable, object};
use super::tools::Output::{Own, Untyped};
use super::tools::{ADD, Hints, READ, REPLACE, Tool};
use super::{calls, run};

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

fn checkpoint_out() -> JsonObject {
    object(
        json!({"checkpoint": {"type": "object", "properties": {
            "id": {"type": "string"}, "message": {"type": "string"},
            "parent": nullable("string")}, "required": ["id"]}}),
        &["checkpoint"],
    )
}

fn undo_out() -> JsonObject {
    object(
        json!({"op": {"type": "integer"}, "of": {"type": "integer"},
            "summary": {"type": "string"}, "head": nullable("string")}),
        &["op"],
    )
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
        "Paths changed in the workspace since the last checkpoint, HEAD and the attached branch.",
        Untyped(|| object(
            json!({"head": nullable("string"), "branch": nullable("string"), "changes": changes()}),
            &["changes"],
        ))
    ),
    tool!(
        log = Log,
        READ,
        "Checkpoint log",
        "Checkpoints along first parents from a ref (default HEAD), newest first.",
        Untyped(|| object(
            json!({"checkpoints": {"type": "array", "items": {"type": "object"}}}),
            &["checkpoints"],
        ))
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
        "Save the workspace as a checkpoint (it becomes HEAD), with a message and an explanation kept in the operation log.",
        Untyped(checkpoint_out)
    ),
    tool!(
        branch = Branch,
        ADD,
        "Create a branch",
        "Create a branch at a ref (default HEAD, pending changes checkpointed first). An existing name is a conflict.",
        Untyped(|| object(
            json!({"branch": {"type": "string"}, "checkpoint": {"type": "string"}}),
            &["branch"],
        ))
    ),
    tool!(fork = Fork(s::ForkArgs) => calls::fork, ADD,
        "Fork into a new workspace",
        "Create a new session from a ref (default: a fresh checkpoint) or from a message, mounted at a new directory.",
        // A fork from a message starts from that message's workspace root,
        // which need not be a checkpoint: `checkpoint` is then null.
        Untyped(|| object(
            json!({"session": {"type": "string"}, "mountpoint": {"type": "string"},
                "checkpoint": {"type": ["string", "null"]}}),
            &["session", "mountpoint"],
        ))
    ),
    tool!(
        checkout = Checkout,
        IDEMPOTENT_REPLACE,
        "Check out a ref",
        "Make the workspace show a ref's files (pending changes are saved first as a checkpoint; undo reverts it). A branch name attaches HEAD.",
        Untyped(|| object(
            json!({"checkpoint": {"type": "object"}, "branch": nullable("string"),
                "detached": {"type": "boolean"}, "op": {"type": "integer"}}),
            &["checkpoint"],
        ))
    ),
    tool!(restore = Restore(s::RestoreArgs) => calls::restore, IDEMPOTENT_REPLACE,
        "Restore files from a ref",
        "Rewind the workspace, or some paths of it, to a ref. Dry run by default (reports what would change); pass dry_run=false to restore (pending changes are saved first).",
        Untyped(|| object(
            json!({"dry_run": {"type": "boolean"}, "changes": changes()}),
            &["dry_run", "changes"],
        ))
    ),
    tool!(undo = Undo(s::UndoArgs) => calls::undo, REPLACE,
        "Undo the last operation",
        "Revert what the session's newest not-undone operation changed (recorded itself; redo reverts it).",
        Untyped(undo_out)
    ),
    tool!(redo = Redo(s::UndoArgs) => calls::redo, REPLACE,
        "Redo the last undo",
        "Revert the newest undo.",
        Untyped(undo_out)
    ),
    tool!(
        op_log = OpLog,
        READ,
        "Operation log",
        "The session's operations (checkpoints, checkouts, execs, undos, ...), newest first.",
        Untyped(|| object(
            json!({"operations": {"type": "array", "items": {"type": "object"}}}),
            &["operations"],
        ))
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
        "Bring a run's final files into the workspace (pending changes saved first; undo reverts it).",
        Untyped(|| object(
            json!({"id": {"type": "string"}, "run": {"type": "integer"}, "op": {"type": "integer"}}),
            &["id", "run"],
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
        "The session's messages, oldest first, each with the checkpoint and workspace it was appended at.",
        Untyped(|| object(
            json!({"messages": {"type": "array", "items": {"type": "object"}}}),
            &["messages"],
        ))
    ),
    tool!(rewind = Rewind(s::RewindArgs) => calls::rewind, REPLACE,
        "Rewind to a message",
        "Bring the files and/or the conversation back to a message (later messages are hidden, not deleted; undo brings them back).",
        Untyped(|| object(
            json!({"op": {"type": ["integer", "null"]}, "files": {"type": "object"}, "conversation": {"type": "object"}}),
            &[],
        ))
    ),
    tool!(promote = Promote(s::PromoteArgs) => calls::promote, REPLACE,
        "Promote to the git repository",
        "Write the session's chosen paths back to the durable git repository it was mounted from (commit, branch or patch). Dry run by default; pass dry_run=false to write. User role only.",
        Untyped(|| object(
            json!({"dry_run": {"type": "boolean"}, "strategy": {"type": "string"},
                "changes": {"type": "array", "items": {"type": "object"}}}),
            &["dry_run", "changes"],
        ))
    ),
];
