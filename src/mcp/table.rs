//! The table of tools: each tool's name, description, hints, schemas, probe op
//! and bridge function, in `tools/list` order (see [`super::tools`] for what a
//! [`Tool`] is and the invariants the table keeps).

use rmcp::model::JsonObject;
use serde_json::json;
use treefork::verbs::Op;

use super::schemas::{self as s, changes, nullable, object};
use super::tools::{ADD, Hints, READ, REPLACE, Tool};
use super::{calls, run};

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

/// Every tool, in `tools/list` order.
pub static TOOLS: &[Tool] = &[
    Tool {
        name: "status",
        title: "Pending changes",
        description: "Paths changed in the workspace since the last checkpoint, HEAD and the attached branch.",
        hints: READ,
        input: s::input::<s::NoArgs>,
        output: || {
            object(
                json!({"head": nullable("string"), "branch": nullable("string"), "changes": changes()}),
                &["changes"],
            )
        },
        probe: || Some(Op::Status(treefork::verbs::Status {})),
        run: calls::status,
    },
    Tool {
        name: "log",
        title: "Checkpoint log",
        description: "Checkpoints along first parents from a ref (default HEAD), newest first.",
        hints: READ,
        input: s::input::<s::LogArgs>,
        output: || {
            object(
                json!({"checkpoints": {"type": "array", "items": {"type": "object"}}}),
                &["checkpoints"],
            )
        },
        probe: || {
            Some(Op::Log(treefork::verbs::Log {
                limit: None,
                from: None,
                path: None,
            }))
        },
        run: calls::log,
    },
    Tool {
        name: "diff",
        title: "Diff two states",
        description: "Differences between two states (refs, or WORKING for the live files): name-status, stat, or patch text cut at max_bytes.",
        hints: READ,
        input: s::input::<s::DiffArgs>,
        output: || {
            object(
                json!({"entries": {"type": "array", "items": {"type": "object"}},
                    "patch": nullable("string"), "truncated": {"type": "boolean"},
                    "patch_bytes": {"type": "integer"}}),
                &["entries", "truncated"],
            )
        },
        probe: || {
            Some(Op::Diff(treefork::verbs::Diff {
                a: None,
                b: None,
                mode: None,
                stream: true,
            }))
        },
        run: calls::diff,
    },
    Tool {
        name: "show_file",
        title: "Read a file at a ref",
        description: "What is at a workspace path in a stored state (default HEAD), without a checkout: a file's text (or base64 when not UTF-8), a directory's entries, a link's target.",
        hints: READ,
        input: s::input::<s::ShowFileArgs>,
        output: || {
            object(
                json!({"kind": {"type": "string"}, "path": {"type": "string"},
                    "text": {"type": "string"}, "base64": {"type": "string"},
                    "truncated": {"type": "boolean"}, "size": {"type": "integer"},
                    "entries": {"type": "array"}}),
                &["kind"],
            )
        },
        probe: || {
            Some(Op::Show(treefork::verbs::Show {
                target: "HEAD".into(),
                path: Some(String::new()),
            }))
        },
        run: calls::show_file,
    },
    Tool {
        name: "checkpoint",
        title: "Take a checkpoint",
        description: "Save the workspace as a checkpoint (it becomes HEAD), with a message and an explanation kept in the operation log.",
        hints: ADD,
        input: s::input::<s::CheckpointArgs>,
        output: checkpoint_out,
        probe: || {
            Some(Op::Checkpoint(treefork::verbs::Checkpoint {
                message: String::new(),
                trigger: "manual".into(),
                meta: Default::default(),
            }))
        },
        run: calls::checkpoint,
    },
    Tool {
        name: "branch",
        title: "Create a branch",
        description: "Create a branch at a ref (default HEAD, pending changes checkpointed first). An existing name is a conflict.",
        hints: ADD,
        input: s::input::<s::BranchArgs>,
        output: || {
            object(
                json!({"branch": {"type": "string"}, "checkpoint": {"type": "string"}}),
                &["branch"],
            )
        },
        probe: || {
            Some(Op::Branch(treefork::verbs::Branch {
                name: String::new(),
                from: None,
            }))
        },
        run: calls::branch,
    },
    Tool {
        name: "fork",
        title: "Fork into a new workspace",
        description: "Create a new session from a ref (default: a fresh checkpoint) or from a message, mounted at a new directory.",
        hints: ADD,
        input: s::input::<s::ForkArgs>,
        output: || {
            object(
                // A fork from a message starts from that message's workspace
                // root, which need not be a checkpoint: `checkpoint` is then null.
                json!({"session": {"type": "string"}, "mountpoint": {"type": "string"},
                    "checkpoint": {"type": ["string", "null"]}}),
                &["session", "mountpoint"],
            )
        },
        probe: || {
            Some(Op::Fork(treefork::verbs::Fork {
                name: String::new(),
                from: None,
                mountpoint: "/".into(),
                agent_socket: None,
                agent_uid: None,
                from_message: None,
            }))
        },
        run: calls::fork,
    },
    Tool {
        name: "checkout",
        title: "Check out a ref",
        description: "Make the workspace show a ref's files (pending changes are saved first as a checkpoint; undo reverts it). A branch name attaches HEAD.",
        hints: Hints {
            idempotent: true,
            ..REPLACE
        },
        input: s::input::<s::CheckoutArgs>,
        output: || {
            object(
                json!({"checkpoint": {"type": "object"}, "branch": nullable("string"),
                    "detached": {"type": "boolean"}, "op": {"type": "integer"}}),
                &["checkpoint"],
            )
        },
        probe: || {
            Some(Op::Checkout(treefork::verbs::Checkout {
                target: None,
                create: None,
            }))
        },
        run: calls::checkout,
    },
    Tool {
        name: "restore",
        title: "Restore files from a ref",
        description: "Rewind the workspace, or some paths of it, to a ref. Dry run by default (reports what would change); pass dry_run=false to restore (pending changes are saved first).",
        hints: Hints {
            idempotent: true,
            ..REPLACE
        },
        input: s::input::<s::RestoreArgs>,
        output: || {
            object(
                json!({"dry_run": {"type": "boolean"}, "changes": changes()}),
                &["dry_run", "changes"],
            )
        },
        probe: || {
            Some(Op::Restore(treefork::verbs::Restore {
                target: "HEAD".into(),
                paths: vec![],
                dry_run: false,
            }))
        },
        run: calls::restore,
    },
    Tool {
        name: "undo",
        title: "Undo the last operation",
        description: "Revert what the session's newest not-undone operation changed (recorded itself; redo reverts it).",
        hints: REPLACE,
        input: s::input::<s::UndoArgs>,
        output: undo_out,
        probe: || {
            Some(Op::Undo(treefork::verbs::Undo {
                what: None,
                if_last: None,
            }))
        },
        run: calls::undo,
    },
    Tool {
        name: "redo",
        title: "Redo the last undo",
        description: "Revert the newest undo.",
        hints: REPLACE,
        input: s::input::<s::UndoArgs>,
        output: undo_out,
        probe: || {
            Some(Op::Redo(treefork::verbs::Redo {
                what: None,
                if_last: None,
            }))
        },
        run: calls::redo,
    },
    Tool {
        name: "op_log",
        title: "Operation log",
        description: "The session's operations (checkpoints, checkouts, execs, undos, ...), newest first.",
        hints: READ,
        input: s::input::<s::OpLogArgs>,
        output: || {
            object(
                json!({"operations": {"type": "array", "items": {"type": "object"}}}),
                &["operations"],
            )
        },
        probe: || Some(Op::OpLog(treefork::verbs::OpLog { limit: None })),
        run: calls::op_log,
    },
    Tool {
        name: "exec",
        title: "Run a command, recorded",
        description: "Run a command in the workspace (stdin empty, output captured) and record it: the before and after checkpoints, changed paths, exit status and output. Sends progress while it runs.",
        hints: REPLACE,
        input: s::input::<s::ExecArgs>,
        output: || {
            object(
                json!({"exec": {"type": "integer"}, "status": {"type": "integer"},
                    "exit_code": nullable("integer"), "signal": nullable("integer"),
                    "stdout": {"type": "string"}, "stderr": {"type": "string"},
                    "timed_out": {"type": "boolean"}, "duration_ms": {"type": "integer"},
                    "checkpoint": nullable("string"), "changed": {"type": "array"}}),
                &["exec", "status", "stdout", "stderr"],
            )
        },
        probe: || {
            Some(Op::ExecBegin(treefork::verbs::ExecBegin {
                argv: vec![],
                cwd: String::new(),
            }))
        },
        run: run::exec,
    },
    Tool {
        name: "experiment",
        title: "Try commands in parallel forks",
        description: "Run several commands at once, each in its own fork of the workspace, rank them (exit 0 first, then duration) and compare. Sends progress as runs finish. Adopt a run with experiment_adopt.",
        hints: ADD,
        input: s::input::<s::ExperimentArgs>,
        output: || {
            object(
                json!({"id": {"type": "string"}, "runs": {"type": "array", "items": {"type": "object"}},
                    "ranking": {"type": "array"}, "winner": nullable("integer")}),
                &["id", "runs"],
            )
        },
        probe: || {
            Some(Op::ExperimentBegin(treefork::verbs::ExperimentBegin {
                from: None,
                runs: vec![],
                cwd: None,
            }))
        },
        run: run::experiment,
    },
    Tool {
        name: "experiment_adopt",
        title: "Adopt an experiment's run",
        description: "Bring a run's final files into the workspace (pending changes saved first; undo reverts it).",
        hints: REPLACE,
        input: s::input::<s::AdoptArgs>,
        output: || {
            object(
                json!({"id": {"type": "string"}, "run": {"type": "integer"}, "op": {"type": "integer"}}),
                &["id", "run"],
            )
        },
        probe: || {
            Some(Op::ExperimentAdopt(treefork::verbs::ExperimentAdopt {
                id: None,
                run: None,
                winner: true,
            }))
        },
        run: run::adopt,
    },
    Tool {
        name: "messages_append",
        title: "Append a message",
        description: "Append a message to the session's conversation log, tied to the current checkpoint and operation (returns once queued; flush=true waits until durable).",
        hints: ADD,
        input: s::input::<s::AppendArgs>,
        output: || {
            object(
                json!({"id": {"type": "string"}, "queued": {"type": "boolean"}}),
                &["id"],
            )
        },
        probe: || {
            Some(Op::MessageAppend(treefork::verbs::MessageAppend {
                role: "user".into(),
                content: serde_json::Value::Null,
                tool_calls: None,
                tool_call_id: None,
                meta: None,
                id: None,
                stream: None,
            }))
        },
        run: calls::messages_append,
    },
    Tool {
        name: "messages_list",
        title: "List messages",
        description: "The session's messages, oldest first, each with the checkpoint and workspace it was appended at.",
        hints: READ,
        input: s::input::<s::ListArgs>,
        output: || {
            object(
                json!({"messages": {"type": "array", "items": {"type": "object"}}}),
                &["messages"],
            )
        },
        probe: || {
            Some(Op::Messages(treefork::verbs::Messages {
                stream: None,
                limit: None,
                upto: None,
                after: None,
            }))
        },
        run: calls::messages_list,
    },
    Tool {
        name: "rewind",
        title: "Rewind to a message",
        description: "Bring the files and/or the conversation back to a message (later messages are hidden, not deleted; undo brings them back).",
        hints: REPLACE,
        input: s::input::<s::RewindArgs>,
        output: || {
            object(
                json!({"op": {"type": ["integer", "null"]}, "files": {"type": "object"}, "conversation": {"type": "object"}}),
                &[],
            )
        },
        probe: || {
            Some(Op::Rewind(treefork::verbs::Rewind {
                to: String::new(),
                what: None,
                dry_run: true,
            }))
        },
        run: calls::rewind,
    },
    Tool {
        name: "promote",
        title: "Promote to the git repository",
        description: "Write the session's chosen paths back to the durable git repository it was mounted from (commit, branch or patch). Dry run by default; pass dry_run=false to write. User role only.",
        hints: REPLACE,
        input: s::input::<s::PromoteArgs>,
        output: || {
            object(
                json!({"dry_run": {"type": "boolean"}, "strategy": {"type": "string"},
                    "changes": {"type": "array", "items": {"type": "object"}}}),
                &["dry_run", "changes"],
            )
        },
        probe: || {
            Some(Op::Promote(treefork::verbs::Promote {
                paths: vec![],
                strategy: "commit".into(),
                message: None,
                dry_run: true,
                branch: None,
                onto_head: false,
                allow_large: false,
            }))
        },
        run: calls::promote,
    },
];
