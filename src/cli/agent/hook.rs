//! `treefork hook`: the one entry point an agent runtime's hooks call. It reads
//! the runtime's JSON on stdin ([`payload`](super::payload)), finds the workspace
//! from the runtime's working directory, and turns the event into operations of
//! the session: a prompt into the conversation log after a "before prompt N"
//! checkpoint, each tool call that can write into an exec record (`tool_begin` →
//! `tool_end`), the turn's end into the assistant's message (`tool_settle`
//! first), the session's start into its conversation metadata, and Claude Code's
//! worktree requests into forks.
//!
//! Invariants: never in the agent's way: outside a treefork workspace it does
//! nothing; when treefork cannot be reached or refuses, it says so on stderr and
//! exits 0 (the tool runs) unless `--strict` (exit 2: the runtime blocks the
//! tool) — except a worktree request, which fails (exit 1) when no fork is made,
//! since the runtime has nothing to run in then; it prints nothing on stdout but what the runtime reads (the path of a
//! worktree), since some runtimes hand a hook's stdout to the model; stdin is
//! read up to [`MAX_PAYLOAD`].

use std::io::Read;

use anyhow::Context;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::super::flags::Globals;
use super::super::prelude::*;
use super::payload::{self, Event, Payload, Runtime};

/// The most bytes of a hook document read (a Write call carries the whole file).
pub const MAX_PAYLOAD: u64 = 64 << 20;

/// Record what an agent runtime's hook reports (reads its JSON on stdin; installed
/// by `treefork agent install`).
#[derive(clap::Args)]
pub struct Hook {
    /// The runtime whose hook this is.
    #[arg(long, value_enum)]
    runtime: Runtime,
    /// Block the tool when treefork cannot record it (exit 2) instead of noting
    /// it on stderr and letting it run.
    #[arg(long)]
    strict: bool,
    /// Codex's `notify` program: the turn-complete JSON is this argument (not
    /// stdin).
    #[arg(long, value_name = "JSON")]
    notify: Option<String>,
}

impl Run for Hook {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r = self.handle(cx);
        log_line(self.runtime, &r);
        match r {
            Ok(_) => Ok(Outcome::Silent),
            // A worktree the runtime asked for has no "let it run": it fails.
            Err(e) if e.is::<super::super::Exit>() => Err(e),
            Err(e) if self.strict => Err(super::super::Exit {
                status: 2,
                error: e.context("treefork hook (--strict): the tool is blocked"),
            }
            .into()),
            Err(e) => {
                eprintln!("treefork: hook: not recorded: {e:#}");
                Ok(Outcome::Silent)
            }
        }
    }
}

impl Hook {
    /// Do what the event asks; says what it did.
    fn handle(&self, cx: &Ctx) -> Result<String> {
        let rt = self.runtime;
        let doc = match self.notify.clone() {
            Some(n) => return notify(cx, rt, &n).map(|()| "notify".into()),
            None => read_stdin()?,
        };
        let p = payload::parse(rt, &doc).map_err(|e| anyhow!(e))?;
        let what = format!("{:?}", p.event);
        let what: String = what.chars().take(300).collect();
        if let Event::Ignored(_) = p.event {
            return Ok(what);
        }
        let worktree = matches!(p.event, Event::WorktreeCreate(_));
        let fail = |e: anyhow::Error| -> anyhow::Error {
            if worktree {
                super::super::Exit {
                    status: 1,
                    error: e.context("WorktreeCreate"),
                }
                .into()
            } else {
                e
            }
        };
        let Some(ws) = Workspace::find(cx, p.cwd.as_deref()) else {
            if worktree {
                return Err(fail(anyhow!(
                    "not in a treefork workspace: treefork makes worktrees only as forks of a workspace (reinstall without --worktrees to let the runtime make its own)"
                )));
            }
            // Not in a treefork workspace: nothing to record.
            return Ok(format!("{what}: not in a workspace"));
        };
        ws.act(rt, p).map_err(fail)?;
        Ok(what)
    }
}

/// With `TREEFORK_HOOK_LOG=FILE`, a line per call appended to FILE (the
/// runtimes do not show a hook's stderr unless asked): what it did, or why not.
fn log_line(rt: Runtime, r: &Result<String>) {
    let Some(path) = std::env::var_os("TREEFORK_HOOK_LOG") else {
        return;
    };
    let what = match r {
        Ok(w) => w.clone(),
        Err(e) => format!("error: {e:#}"),
    };
    let line = format!(
        "{} pid {} {}: {what}\n",
        treefork::clock::unix_ns() / 1_000_000,
        std::process::id(),
        rt.name()
    );
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut f) = f {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Stdin as JSON, at most [`MAX_PAYLOAD`] bytes.
fn read_stdin() -> Result<Value> {
    let mut buf = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD + 1)
        .read_to_end(&mut buf)
        .context("cannot read the hook's JSON on stdin")?;
    if buf.len() as u64 > MAX_PAYLOAD {
        bail!("the hook's JSON is over {} MiB", MAX_PAYLOAD >> 20);
    }
    serde_json::from_slice(&buf).context("the hook's stdin is not JSON")
}

/// The workspace a hook acts on, with a context whose session ops go to it.
struct Workspace {
    cx: Ctx,
    root: PathBuf,
    cwd: PathBuf,
}

impl Workspace {
    /// The workspace holding `cwd` (the runtime's working directory, else this
    /// process's), if any. With an explicit socket (`TREEFORK_SOCKET`, set by
    /// `treefork agent run`), its session.
    fn find(cx: &Ctx, cwd: Option<&Path>) -> Option<Workspace> {
        let cwd = match cwd {
            Some(c) => c.to_path_buf(),
            None => std::env::current_dir().ok()?,
        };
        let g = Globals {
            dir: Some(cwd.clone()),
            json: false,
            ..cx.globals().clone()
        };
        let cx = Ctx::new(g);
        let root = cx.workspace_root().ok()?;
        Some(Workspace { cx, root, cwd })
    }

    /// The runtime's directory relative to the workspace root ("" outside it).
    fn rel(&self) -> String {
        self.cwd
            .strip_prefix(&self.root)
            .ok()
            .and_then(Path::to_str)
            .unwrap_or("")
            .to_string()
    }

    fn act(&self, rt: Runtime, p: Payload) -> Result<()> {
        let meta = |extra: &[(&str, Value)]| {
            let mut m = Map::new();
            m.insert("runtime".into(), json!(rt.name()));
            if let Some(s) = &p.session_id {
                m.insert("runtime_session".into(), json!(s));
            }
            for (k, v) in extra {
                m.insert((*k).into(), v.clone());
            }
            m
        };
        match p.event.clone() {
            Event::Ignored(_) => Ok(()),
            Event::SessionStart => {
                let _: Reply<Value> = self.cx.session(Request::SessionMetaUpdate(
                    treefork::verbs::SessionMetaUpdate {
                        model: None,
                        add_turns: None,
                        add_cost: None,
                        exit_reason: None,
                        runtime: Some(rt.name().into()),
                        runtime_session: p.session_id.clone(),
                    },
                ))?;
                Ok(())
            }
            Event::SubagentStop => self.settle(rt, p.agent.clone()),
            Event::Prompt(text) => self.prompt(rt, text, meta),
            Event::PreTool {
                call,
                tool,
                summary,
            } => {
                let _: Reply<Answer<treefork::verbs::ToolBegin>> =
                    self.cx
                        .session(Request::ToolBegin(treefork::verbs::ToolBegin {
                            runtime: rt.name().into(),
                            call,
                            tool,
                            summary,
                            agent: p.agent.clone(),
                            cwd: self.rel(),
                            client_pid: runtime_pid(),
                        }))?;
                Ok(())
            }
            Event::PostTool { call, ok, error } => {
                let r: Result<Reply<Answer<treefork::verbs::ToolEnd>>> =
                    self.cx.session(Request::ToolEnd(treefork::verbs::ToolEnd {
                        call,
                        ok,
                        error,
                    }));
                match r {
                    // Begun before the hooks were installed, or settled: nothing open.
                    Err(e) if is_code(&e, &treefork::Error::NotFound(String::new())) => Ok(()),
                    r => r.map(drop),
                }
            }
            Event::Stop(last) => {
                self.settle(rt, None)?;
                if let Some(text) = last.filter(|t| !t.is_empty()) {
                    self.append("assistant", text, meta(&[]))?;
                }
                Ok(())
            }
            Event::WorktreeCreate(name) => {
                let mp = self.worktree(&name)?;
                // The runtime reads the worktree's path from the last stdout line.
                println!("{}", mp.display());
                Ok(())
            }
            Event::WorktreeRemove(path) => {
                let _: Reply<Value> = self.cx.store_op(
                    Request::Umount(treefork::verbs::Umount {
                        mountpoint: std::path::absolute(&path)?,
                    }),
                    false,
                )?;
                Ok(())
            }
        }
    }

    /// A prompt: end what the last turn left open, mark "before prompt N" with a
    /// checkpoint, then log the prompt (which records the state it was given in).
    fn prompt(
        &self,
        rt: Runtime,
        text: String,
        meta: impl Fn(&[(&str, Value)]) -> Map<String, Value>,
    ) -> Result<()> {
        self.settle(rt, None)?;
        let n = self.prompts()? + 1;
        let _: Reply<Value> =
            self.cx
                .session(Request::Checkpoint(treefork::verbs::Checkpoint {
                    message: format!("before prompt {n}"),
                    trigger: "before-prompt".into(),
                    meta: meta(&[("prompt", json!(n))]),
                }))?;
        self.append("user", text, meta(&[("prompt", json!(n))]))
    }

    /// A subagent's isolated worktree: a fork of the session (a fresh checkpoint
    /// of its state, no copy), session `SESSION-NAME`, mounted beside the
    /// workspace at `WS.NAME`; its work comes back with `treefork merge`.
    fn worktree(&self, name: &str) -> Result<PathBuf> {
        let safe = super::safe_name(name);
        if safe.is_empty() {
            bail!("WorktreeCreate: the name {name:?} has nothing usable for a session name");
        }
        let pong: Reply<Answer<treefork::verbs::Ping>> =
            self.cx.session(Request::Ping(treefork::verbs::Ping {}))?;
        let session = pong.body.session.unwrap_or_else(|| "session".into());
        let base = self
            .root
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("ws");
        let mp = self.root.with_file_name(format!("{base}.{safe}"));
        let _: Reply<Value> = self.cx.session(Request::Fork(treefork::verbs::Fork {
            name: format!("{session}-{safe}"),
            from: None,
            mountpoint: mp.clone(),
            agent_socket: None,
            agent_uid: None,
            from_message: None,
        }))?;
        Ok(mp)
    }

    /// How many prompts the (visible) conversation holds.
    fn prompts(&self) -> Result<u64> {
        let mut after = None;
        let mut n = 0;
        loop {
            let r: Reply<Answer<treefork::verbs::Messages>> =
                self.cx
                    .session(Request::Messages(treefork::verbs::Messages {
                        stream: None,
                        limit: None,
                        upto: None,
                        after: after.clone(),
                    }))?;
            n += r
                .body
                .messages
                .iter()
                .filter(|m| m.message.role == "user")
                .count() as u64;
            match r.body.messages.last() {
                Some(m) if r.body.more => after = Some(m.message.id.clone()),
                _ => return Ok(n),
            }
        }
    }

    /// End the turn of `agent` (none: the main agent's).
    fn settle(&self, rt: Runtime, agent: Option<String>) -> Result<()> {
        let _: Reply<Answer<treefork::verbs::ToolSettle>> =
            self.cx
                .session(Request::ToolSettle(treefork::verbs::ToolSettle {
                    runtime: Some(rt.name().into()),
                    agent,
                }))?;
        Ok(())
    }

    fn append(&self, role: &str, text: String, meta: Map<String, Value>) -> Result<()> {
        let _: Reply<Value> =
            self.cx
                .session(Request::MessageAppend(treefork::verbs::MessageAppend {
                    role: role.into(),
                    content: Value::String(cut(text)),
                    tool_calls: None,
                    tool_call_id: None,
                    meta: Some(meta),
                    id: None,
                    stream: None,
                }))?;
        Ok(())
    }
}

/// A message's text, cut below the conversation log's 1 MiB bound.
fn cut(mut s: String) -> String {
    const MAX: usize = 1000 * 1000;
    if s.len() > MAX {
        let mut i = MAX;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
        s.push_str("\n[cut by treefork]");
    }
    s
}

/// Codex's `notify`: at the end of each turn, settle the turn's tool calls and
/// take a checkpoint of what they did not record, if anything (the Stop hook
/// logs the message).
fn notify(cx: &Ctx, rt: Runtime, doc: &str) -> Result<()> {
    if doc.len() as u64 > MAX_PAYLOAD {
        bail!("the notification is over {} MiB", MAX_PAYLOAD >> 20);
    }
    let v: Value = serde_json::from_str(doc).context("the notification is not JSON")?;
    if v.get("type").and_then(Value::as_str) != Some("agent-turn-complete") {
        return Ok(());
    }
    let cwd = v.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let Some(ws) = Workspace::find(cx, cwd.as_deref()) else {
        return Ok(());
    };
    ws.settle(rt, None)?;
    // Only what no tool call recorded (an MCP tool, an editor beside the agent):
    // a checkpoint of nothing would be one more step for `undo` to take.
    let st: Reply<Answer<treefork::verbs::Status>> = ws
        .cx
        .session(Request::Status(treefork::verbs::Status { ignored: true }))?;
    if st.body.changes.is_empty() {
        return Ok(());
    }
    let turn = v.get("turn-id").and_then(Value::as_str).unwrap_or("");
    let mut meta = Map::new();
    meta.insert("runtime".into(), json!(rt.name()));
    if let Some(t) = v.get("thread-id") {
        meta.insert("runtime_session".into(), t.clone());
    }
    let _: Reply<Value> = ws
        .cx
        .session(Request::Checkpoint(treefork::verbs::Checkpoint {
            message: format!("{} turn {turn}", rt.name()).trim_end().to_string(),
            trigger: "after-turn".into(),
            meta,
        }))?;
    Ok(())
}

/// Whether the daemon refused with `kind`'s code.
fn is_code(e: &anyhow::Error, kind: &treefork::Error) -> bool {
    e.downcast_ref::<super::super::plumbing::DaemonError>()
        .is_some_and(|d| d.is(kind))
}

/// The runtime's pid: the first ancestor of this process that is not a shell
/// (runtimes start hooks through `sh -c` or `bash -c`). Its tool calls' writers
/// descend from it.
fn runtime_pid() -> Option<u32> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..8 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        if !matches!(comm.trim(), "sh" | "bash" | "dash" | "zsh" | "fish" | "ash") {
            return Some(pid);
        }
        pid = parent_of(pid)?;
    }
    None
}

/// The parent of `pid` (field 4 of /proc/PID/stat, after the command's parens).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(1)?.parse().ok()
}
