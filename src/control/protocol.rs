//! Protocol: the request ops, parsing (bounded, never panics), encoding and response
//! framing, and the protocol version.
//!
//! A request is one line `{"v":1,"op":"...",...}`; the server may send event lines
//! (`{"event":"progress",...}`) and then exactly one response line: `{"ok":true,...}`
//! or `{"ok":false,"error":{"code":..,"message":..}}`. See docs/protocol.md.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u64 = 1;
/// Largest request line accepted, in bytes.
pub const MAX_REQUEST: usize = 1 << 20;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Liveness check; answers the daemon's pid and store.
    Ping,
    /// Mount a session (creating it, optionally from a host directory).
    Mount {
        /// Session name.
        session: String,
        /// Absolute mountpoint.
        mountpoint: PathBuf,
        /// Host directory to import when the session is created.
        #[serde(default)]
        from: Option<PathBuf>,
        /// Also serve the session on an agent-role socket at this absolute path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_socket: Option<PathBuf>,
        /// A uid allowed on the agent socket besides the daemon's and root (the socket
        /// file is then owned by it, mode 0600).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_uid: Option<u32>,
        /// What the session is for (stored in its info record).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// Idle TTL, a duration like `4h` (`never` clears it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_idle: Option<String>,
        /// Absolute TTL from now, a duration like `7d` (`never` clears it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_absolute: Option<String>,
        /// Evict once promoted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_promote: Option<bool>,
        /// Never evict automatically.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        manual: Option<bool>,
        /// Create the session from a remote ref `REMOTE/REF` (a remote session,
        /// or a new session at a remote branch); contents arrive lazily.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_remote: Option<String>,
        /// Push the session to this remote before an eviction unmounts it
        /// (`none` clears it); stored as the info's `policy.evict_to`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evict_to: Option<String>,
    },
    /// Flush and unmount.
    Umount {
        /// Absolute mountpoint.
        mountpoint: PathBuf,
    },
    /// List sessions.
    Sessions,
    /// Show (and with `set`, change) the store's quotas (`crate::quota`).
    Limits {
        /// Limits to change (name: non-negative integer).
        #[serde(default)]
        set: Option<serde_json::Map<String, Value>>,
    },
    /// Flush everything, unmount everything, exit.
    Shutdown,
    /// Take a checkpoint of the session.
    Checkpoint {
        /// Message.
        #[serde(default)]
        message: String,
        /// Why: `manual` (default), `auto`, `before-risky`, `milestone`, or any other
        /// well-formed name not reserved for the daemon (`refs::validate_requested_trigger`).
        #[serde(default = "default_trigger")]
        trigger: String,
        /// Caller-defined data stored in the record (and covered by its id).
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        meta: serde_json::Map<String, serde_json::Value>,
    },
    /// Checkpoints along first parents from a ref (default HEAD), newest first.
    Log {
        /// At most this many.
        #[serde(default)]
        limit: Option<usize>,
        /// Ref spec to start from (default HEAD).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// Only checkpoints where this workspace-relative path (a file, or a
        /// directory's subtree) differs from the first parent's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// Paths changed since the last checkpoint.
    Status,
    /// Create a branch at a ref (default: HEAD, checkpointing pending changes first).
    Branch {
        /// Branch name.
        name: String,
        /// Ref it points at.
        #[serde(default)]
        from: Option<String>,
    },
    /// List branches.
    Branches,
    /// Delete a branch.
    BranchDelete {
        /// Branch name.
        name: String,
    },
    /// Make the live mount show a ref's tree (saving pending changes first). A
    /// branch name attaches HEAD to it; anything else detaches HEAD.
    Checkout {
        /// The ref (default with `create`: HEAD).
        #[serde(rename = "ref", default)]
        target: Option<String>,
        /// Create this branch at the ref and attach HEAD to it (`checkout -b`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        create: Option<String>,
    },
    /// Share a branch with a session: that session's agent socket sees the branch
    /// and the history it names (see docs/design.md, "What an agent socket sees").
    BranchShare {
        /// Branch name.
        name: String,
        /// The session whose agent may see it.
        with: String,
    },
    /// Rename a branch (sessions attached to it follow).
    BranchRename {
        /// Current name.
        old: String,
        /// New name.
        new: String,
    },
    /// Undo the session's last operation (see docs/design.md, "Operation log").
    Undo {
        /// `files` or `refs` to limit it to the workspace or to HEAD and branches.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
        /// Refuse (`conflict`) unless this is still the session's newest operation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_last: Option<u64>,
    },
    /// Redo what the last undo undid.
    Redo {
        /// `files` or `refs`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
        /// Refuse (`conflict`) unless this is still the session's newest operation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_last: Option<u64>,
    },
    /// Return to the state right after operation `op`.
    OpRestore {
        /// Operation number.
        #[serde(rename = "operation")]
        seq: u64,
        /// `files` or `refs`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
    },
    /// The session's activity, oldest first: operations with the files each
    /// changed, and notes.
    Timeline {
        /// Only entries at or after this unix time (seconds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<i64>,
        /// Only entries by this role (`user`, `agent`, `daemon`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        actor: Option<String>,
        /// At most this many (the newest).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// Add an entry of the agent or its runtime to the session's log.
    Note {
        /// The text.
        text: String,
        /// `action` (default), `decision`, `error` or `nudge`.
        #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
    /// The session's operations, newest first.
    OpLog {
        /// At most this many.
        #[serde(default)]
        limit: Option<usize>,
    },
    /// Create a new session from a ref (default: a fresh checkpoint) and mount it.
    Fork {
        /// New session name.
        name: String,
        /// Ref to start from.
        #[serde(default)]
        from: Option<String>,
        /// Where to mount it (absolute, empty directory).
        mountpoint: PathBuf,
        /// Also serve the session on an agent-role socket at this absolute path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_socket: Option<PathBuf>,
        /// A uid allowed on the agent socket besides the daemon's and root (the socket
        /// file is then owned by it, mode 0600).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_uid: Option<u32>,
        /// Start from a message instead: the files as they were when it was
        /// recorded, the conversation up to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_message: Option<String>,
    },
    /// Differences between two states (refs, or `WORKING`).
    Diff {
        /// Old side (default HEAD).
        #[serde(default)]
        a: Option<String>,
        /// New side (default WORKING).
        #[serde(default)]
        b: Option<String>,
        /// `name-status` (default), `stat` or `patch`.
        #[serde(default)]
        mode: Option<String>,
        /// With `patch`: send each file's patch as a `{"event":"patch",...}` line as
        /// soon as it is made; the response then carries no `patch` text. Omitted
        /// when false, so daemons that predate it still accept the request.
        #[serde(default, skip_serializing_if = "is_false")]
        stream: bool,
    },
    /// Rewind the tree, or some paths of it, to a ref.
    Restore {
        /// The ref.
        #[serde(rename = "ref")]
        target: String,
        /// Paths relative to the workspace root (empty: everything).
        #[serde(default)]
        paths: Vec<String>,
        /// Only report what would change.
        #[serde(default)]
        dry_run: bool,
    },
    /// Garbage-collect the store (mark & sweep from every root, then repack).
    Gc {
        /// Only report what would be reclaimed.
        #[serde(default)]
        dry_run: bool,
    },
    /// Verify the store (and with `repair`, fix what can be fixed; store offline only).
    Fsck {
        /// Rebuild the index from packs and move unusable records aside.
        #[serde(default)]
        repair: bool,
    },
    /// Delete a session record (not mounted); its checkpoints become reclaimable.
    SessionRm {
        /// Session name.
        name: String,
    },
    /// A session's info record, touched-file count and mount state. On a socket
    /// bound to a session (a session or agent socket) only that session.
    SessionShow {
        /// Session name (default: the socket's session).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Change a session's eviction policy and restart its idle clock.
    SessionExtend {
        /// Session name.
        name: String,
        /// New idle TTL (`never` clears it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_idle: Option<String>,
        /// New absolute TTL, from now (`never` clears it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_absolute: Option<String>,
        /// Push to this remote before evicting (`none` clears it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evict_to: Option<String>,
    },
    /// Unmount a session and mark it discarded (`gc` removes it after retention).
    SessionDiscard {
        /// Session name.
        name: String,
    },
    /// Run an eviction sweep now.
    SessionSweep,
    /// A checkpoint's metadata and changed paths; with `path`, the bytes (or
    /// directory entries, or link target) at that path in it, streamed as
    /// `{"event":"data"}` lines.
    Show {
        /// The ref spec.
        #[serde(rename = "ref")]
        target: String,
        /// Workspace-relative path inside that state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// Show (and with `set`, change) the session's settings.
    Config {
        /// Fields to change.
        #[serde(default)]
        set: Option<serde_json::Map<String, Value>>,
    },
    /// Start an experiment: save the state, create and mount one fork per run.
    ExperimentBegin {
        /// Ref to start from (default: the current state, checkpointed).
        #[serde(default)]
        from: Option<String>,
        /// The runs (at least one, at most the `experiment_max_runs` setting).
        runs: Vec<crate::command::RunSpec>,
        /// The caller's directory relative to the workspace root.
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Finish an experiment: record every run's result as one operation and remove
    /// the forks (all but the winner's, unless `keep`; all with `abort`).
    ExperimentEnd {
        /// The experiment id (from `experiment_begin`).
        id: String,
        /// What each run did.
        #[serde(default)]
        results: Vec<crate::command::RunResult>,
        /// `exit`, `duration`, `output` or `score` (default: exit 0 first, then duration).
        #[serde(default)]
        rank_by: Option<String>,
        /// Leave every fork mounted.
        #[serde(default)]
        keep: bool,
        /// The experiment was interrupted: remove every fork.
        #[serde(default)]
        abort: bool,
    },
    /// A recorded experiment (default: the newest).
    ExperimentShow {
        /// The experiment id.
        #[serde(default)]
        id: Option<String>,
    },
    /// Bring a run's final state into the session (saving pending changes first).
    ExperimentAdopt {
        /// The experiment id (default: the newest).
        #[serde(default)]
        id: Option<String>,
        /// The run number.
        #[serde(default)]
        run: Option<u32>,
        /// Adopt the winner.
        #[serde(default)]
        winner: bool,
    },
    /// Start recording a command the client runs (`treefork exec`): save pending
    /// changes as the before checkpoint, start watching writers. Answers the exec
    /// number and the before checkpoint.
    ExecBegin {
        /// The command and its arguments.
        argv: Vec<String>,
        /// Its working directory, relative to the workspace root (text, recorded).
        #[serde(default)]
        cwd: String,
    },
    /// A chunk of a running exec's captured output (sent before `exec_end`).
    ExecOutput {
        /// The exec number `exec_begin` answered.
        exec: u64,
        /// `stdout` or `stderr`.
        stream: String,
        /// The bytes, base64.
        data: String,
    },
    /// Finish recording exec `exec`: checkpoint what changed, append its record.
    ExecEnd {
        /// The exec number.
        exec: u64,
        /// Exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// The signal that killed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Why it could not run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Its pid.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// Wall time, ms.
        #[serde(default)]
        duration_ms: u64,
        /// The client cut stdout at its capture limit.
        #[serde(default, skip_serializing_if = "is_false")]
        stdout_truncated: bool,
        /// The client cut stderr at its capture limit.
        #[serde(default, skip_serializing_if = "is_false")]
        stderr_truncated: bool,
        /// A timeout stopped it.
        #[serde(default, skip_serializing_if = "is_false")]
        timed_out: bool,
    },
    /// Exec records of the session, newest first.
    History {
        /// At most this many.
        #[serde(default)]
        limit: Option<usize>,
    },
    /// One exec record with its captured output.
    HistoryShow {
        /// The exec number.
        exec: u64,
    },
    /// Promote the session's chosen paths back to the durable git repository it
    /// was imported from (user role only; see docs/design.md, "Promote").
    Promote {
        /// Workspace-relative paths (files or directories); empty: the touched files.
        #[serde(default)]
        paths: Vec<String>,
        /// `commit` (default), `branch` or `patch`.
        #[serde(default = "default_strategy")]
        strategy: String,
        /// Commit message (default: names the session and its task).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Only report what would happen; change nothing.
        #[serde(default)]
        dry_run: bool,
        /// `branch`: the new branch's name (default `treefork/<session>`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        /// `branch`: base the commit on the durable branch's head, not the baseline.
        #[serde(default, skip_serializing_if = "is_false")]
        onto_head: bool,
        /// Accept files over the size limit.
        #[serde(default, skip_serializing_if = "is_false")]
        allow_large: bool,
    },
    /// Queue a message for the session's conversation log; answers once queued
    /// (a full queue makes the request wait).
    MessageAppend {
        /// `user`, `assistant`, `tool` or `system`.
        role: String,
        /// Any JSON (at most 1 MiB as JSON).
        content: Value,
        /// Tool calls the message makes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Value>,
        /// The tool call a `tool` message answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// Caller data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        meta: Option<serde_json::Map<String, Value>>,
        /// A client-chosen UUID (a repeated id is idempotent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `messages` (default) or `transcript`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<String>,
    },
    /// Answer once every message appended before is durable.
    MessageFlush,
    /// The session's visible messages, oldest first.
    Messages {
        /// `messages` (default) or `transcript`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<String>,
        /// Only the newest this many.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        /// Only up to (including) this message id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upto: Option<String>,
        /// Only after this message id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
    },
    /// Bring files and/or conversation back to a message (undoable).
    Rewind {
        /// The message id.
        to: String,
        /// `files`, `conversation` or `both` (default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
        /// Only report what would change.
        #[serde(default, skip_serializing_if = "is_false")]
        dry_run: bool,
    },
    /// Fork the latest session imported from `project`, its messages copied, and
    /// mount it (user role only).
    Continue {
        /// The durable repository (absolute path).
        project: PathBuf,
        /// New session name.
        name: String,
        /// Where to mount it (absolute).
        mountpoint: PathBuf,
    },
    /// Merge conversation metadata into the session's info record.
    SessionMetaUpdate {
        /// The model in use.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Turns to add to the count.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        add_turns: Option<u64>,
        /// Cost to add to the total.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        add_cost: Option<f64>,
        /// Why the agent stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_reason: Option<String>,
    },
    /// Configure a remote (S3-compatible object storage), after probing it
    /// (user role only; see docs/protocol.md, "Remotes").
    RemoteAdd {
        /// Remote name.
        name: String,
        /// `s3://BUCKET/PREFIX`.
        url: String,
        /// Endpoint, `http(s)://HOST[:PORT]`.
        endpoint: String,
        /// Region (default `us-east-1`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
        /// This store is the remote's only writer: accept a server that does not
        /// honour conditional writes.
        #[serde(default, skip_serializing_if = "is_false")]
        single_writer: bool,
    },
    /// The configured remotes.
    RemoteList,
    /// Forget a remote: its config, tracking refs and local cache (nothing on
    /// the remote is touched).
    RemoteRm {
        /// Remote name.
        name: String,
    },
    /// Adopt the origin and eviction policy a session pulled from a remote
    /// named (kept aside until now: see docs/design.md, "Remote tier: pull").
    RemoteTrust {
        /// The local session.
        name: String,
    },
    /// Send branches and sessions to a remote (user role only; see
    /// docs/protocol.md, "push").
    Push {
        /// The remote (default: the only configured one, else `origin`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<String>,
        /// `REF`, `SRC:DST` or `SESSION`; empty: the current session.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
        /// The current session (default: the socket's, else the only mounted one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
        /// Overwrite remote refs that are not fast-forwards.
        #[serde(default, skip_serializing_if = "is_false")]
        force: bool,
    },
    /// Fetch refs, checkpoint records and tree nodes from a remote (user role
    /// only; see docs/protocol.md, "pull").
    Pull {
        /// The remote (default: the only configured one, else `origin`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<String>,
        /// Remote ref names (a branch, else a session); empty: every ref.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
    },
    /// Fetch every object a session needs from a remote (user role only; see
    /// docs/protocol.md, "hydrate").
    Hydrate {
        /// The session (default: the socket's, else the only mounted one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
        /// The remote (default: the session's upstream, else the only
        /// configured one, else `origin`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<String>,
    },
    /// Delete what no ref of a remote reaches, in two phases with a grace
    /// period (user role only; see docs/protocol.md, "remote_gc").
    RemoteGc {
        /// The remote (default: the only configured one, else `origin`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<String>,
        /// Report only: take no lock, change nothing.
        #[serde(default, skip_serializing_if = "is_false")]
        dry_run: bool,
        /// Seconds between condemning and deleting (default 24 h).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_secs: Option<u64>,
    },
    /// Drop local copies of objects a remote holds (verified present) and no
    /// kept session needs (user role only; see docs/protocol.md, "store_trim").
    StoreTrim {
        /// Keep what sessions accessed within this duration reach (`30d`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        older_than: Option<String>,
        /// Keep every session's current workspace (trim only history).
        #[serde(default, skip_serializing_if = "is_false")]
        keep_sessions: bool,
        /// Report only.
        #[serde(default, skip_serializing_if = "is_false")]
        dry_run: bool,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn default_strategy() -> String {
    "commit".into()
}

fn default_trigger() -> String {
    "manual".into()
}

impl Op {
    /// The op's wire name (`"branch_delete"`, ...).
    pub fn name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("op").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default()
    }
}

/// A request: an op, optionally aimed at a session by name (on the store socket;
/// a session socket implies its session).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Target session.
    pub session: Option<String>,
    /// The operation.
    pub op: Op,
    /// Free text recorded with the operation in the session's log.
    pub explanation: Option<String>,
}

/// A protocol-level error before an op runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoError {
    /// Machine-readable code.
    pub code: &'static str,
    /// Human message.
    pub message: String,
}

/// Parse one request line. Never panics.
pub fn parse_request(line: &[u8]) -> std::result::Result<Op, ProtoError> {
    parse(line).map(|r| r.op)
}

/// Parse one request line with its optional session. Never panics.
pub fn parse(line: &[u8]) -> std::result::Result<Request, ProtoError> {
    let err = |code, message: String| ProtoError { code, message };
    if line.len() > MAX_REQUEST {
        return Err(err(
            "too_large",
            format!("request exceeds {MAX_REQUEST} bytes"),
        ));
    }
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| err("bad_request", format!("malformed JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(err("bad_request", "request must be a JSON object".into()));
    };
    match obj.get("v").and_then(Value::as_u64) {
        Some(PROTOCOL_VERSION) => {}
        Some(other) => {
            return Err(err(
                "unsupported_version",
                format!(
                    "protocol version {other} is not supported (this daemon speaks {PROTOCOL_VERSION})"
                ),
            ));
        }
        None => {
            return Err(err(
                "bad_request",
                "missing protocol version field \"v\"".into(),
            ));
        }
    }
    let op = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| err("bad_request", "missing \"op\"".into()))?
        .to_string();
    let mut body = obj.clone();
    body.remove("v");
    // `session` names the target session of any op; `mount` takes it as its argument.
    let taken = if op == "mount" {
        body.get("session").cloned()
    } else {
        body.remove("session")
    };
    let session = match taken {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(err("bad_request", "\"session\" must be a string".into())),
    };
    let explanation = match body.remove("explanation") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(err(
                "bad_request",
                "\"explanation\" must be a string".into(),
            ));
        }
    };
    let op: Op = serde_json::from_value(Value::Object(body)).map_err(|e| {
        let m = e.to_string();
        if m.contains("unknown variant") {
            err("unknown_op", format!("unknown op {op:?}"))
        } else {
            err("bad_request", format!("bad arguments for {op:?}: {m}"))
        }
    })?;
    Ok(Request {
        session,
        op,
        explanation,
    })
}

/// The explanation this process sends with every request (set once by the CLI's
/// `--explanation`).
static EXPLANATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Send `text` as the `explanation` of every request this process makes.
pub fn set_explanation(text: String) {
    let _ = EXPLANATION.set(text);
}

/// Encode a request line.
pub fn encode_request(op: &Op) -> Vec<u8> {
    let mut v = serde_json::to_value(op).expect("op serializes");
    let o = v.as_object_mut().unwrap();
    o.insert("v".into(), json!(PROTOCOL_VERSION));
    if let Some(e) = EXPLANATION.get() {
        o.insert("explanation".into(), json!(e));
    }
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    line
}

/// Error response body.
pub fn error_response(code: &str, message: &str) -> Value {
    json!({"ok": false, "error": {"code": code, "message": message}})
}

/// The error response for `e`: its code and message, plus the fields of
/// [`crate::Error::detail`] (e.g. `paths` of `BASELINE_CONFLICT`).
pub fn error_of(e: &crate::Error) -> Value {
    let mut v = error_response(e.code(), &e.to_string());
    if let Some(d) = e.detail() {
        v["error"].as_object_mut().unwrap().extend(d);
    }
    v
}
