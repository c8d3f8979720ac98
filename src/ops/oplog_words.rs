//! What an operation came to, in words, for its one-line summary (`op log`,
//! `timeline`, the web UI): what a bisect found, the commit a promote made, what
//! a merge (cherry-pick, revert, rebase) merged and its conflicts, an
//! experiment's winner or that it was interrupted, and what an undo or redo
//! reverted. Read from the record's `meta` (and `before`/`after`); a record
//! written before a field was kept says less, never something wrong. Every text
//! taken from a record is cut ([`MESSAGE_SHOWN`], [`COMMAND_SHOWN`]).

use serde_json::{Map, Value};

use crate::command::shell::{cut, quoted_short};
use crate::id::CheckpointId;
use crate::oplog::{Operation, View};

/// Widest command a summary shows (then cut, `...`).
pub const COMMAND_SHOWN: usize = 72;
/// Widest checkpoint message, ref or path a summary shows.
pub const MESSAGE_SHOWN: usize = 60;

/// The key of an undo's or redo's `meta` naming the operation it reverted
/// (`{seq, kind, what}`: for a redo, the operation its undo had undone).
pub const TARGET_KEY: &str = "target";

/// `m[k]`, `null` when absent (indexing a map by a missing key would panic).
fn at<'a>(m: &'a Map<String, Value>, k: &str) -> &'a Value {
    m.get(k).unwrap_or(&Value::Null)
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(|s| cut(s, MESSAGE_SHOWN))
}

fn short_hex(v: &Value) -> Option<String> {
    v.as_str().map(|s| s.chars().take(12).collect())
}

fn short(id: &Option<CheckpointId>) -> String {
    id.map_or_else(|| "-".into(), |h| h.short())
}

/// A signal's name (`SIGINT`), or its number.
pub fn signal_name(sig: i64) -> String {
    match sig {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        3 => "SIGQUIT".into(),
        9 => "SIGKILL".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The operation's kind and what it came to (`bisect of 'make test': first bad
/// …`), or `None` for kinds said by their state change alone.
pub(crate) fn outcome(o: &Operation) -> Option<String> {
    let m = &o.meta;
    let kind = o.kind.as_str();
    match kind {
        crate::ops::bisect::KIND => Some(bisect(m)),
        "promote" => Some(promote(m)),
        crate::ops::experiment::KIND => Some(experiment(m)),
        "merge" | "cherry-pick" | "revert" | "rebase" => Some(merge(kind, m)),
        _ => {
            let (op, end) = kind.rsplit_once('-')?;
            let done = match end {
                "continue" => "finished",
                "abort" => "abandoned",
                _ => return None,
            };
            let theirs = text(at(m, "theirs")).unwrap_or_else(|| "?".into());
            Some(format!("{kind}: {op} of {theirs} {done}"))
        }
    }
}

fn point(p: &Value) -> String {
    let id = short_hex(&p["short"]).or_else(|| short_hex(&p["id"]));
    let msg = text(&p["message"]).unwrap_or_default();
    format!("{} {msg:?}", id.unwrap_or_else(|| "?".into()))
}

fn bisect(m: &Map<String, Value>) -> String {
    let argv: Vec<String> = serde_json::from_value(at(m, "command").clone()).unwrap_or_default();
    let head = format!("bisect of {}", quoted_short(&argv, COMMAND_SHOWN));
    let (fb, good) = (at(m, "first_bad"), at(m, "good"));
    if fb.is_null() {
        return format!(
            "{head}: no first bad: the command passes at the bad end {}",
            point(at(m, "bad"))
        );
    }
    if !good.is_null() && fb["id"] == good["id"] {
        return format!(
            "{head}: the range was wrong: the command already fails at the good end {}",
            point(good)
        );
    }
    let mut s = format!("{head}: first bad {}", point(fb));
    if !at(m, "last_good").is_null() {
        s.push_str(&format!(", last good {}", point(at(m, "last_good"))));
    }
    s
}

fn promote(m: &Map<String, Value>) -> String {
    match (short_hex(at(m, "sha")), text(at(m, "branch"))) {
        (Some(sha), Some(b)) => {
            let mut s = format!("promote: commit {sha} on {b}");
            if let Some(r) = at(m, "repo").as_str() {
                s.push_str(&format!(" in {}", cut(r, 120)));
            }
            s
        }
        _ if m.contains_key("patch") || m.contains_key("patch_base64") => {
            "promote: a patch (`git apply` takes it)".into()
        }
        _ => "promote".into(),
    }
}

fn experiment(m: &Map<String, Value>) -> String {
    let id = text(at(m, "id")).unwrap_or_default();
    let runs = at(m, "runs").as_array().map_or(0, Vec::len);
    if at(m, "aborted").as_bool() == Some(true) {
        let by = at(m, "interrupted_by")
            .as_i64()
            .map_or(String::new(), |s| format!(" by {}", signal_name(s)));
        return format!("experiment {id}: {runs} runs, interrupted{by}: every run stopped");
    }
    match at(m, "winner").as_u64() {
        Some(w) => format!("experiment {id}: {runs} runs, winner run {w}"),
        None => format!("experiment {id}: {runs} runs, no winner (no run exited 0)"),
    }
}

fn merge(kind: &str, m: &Map<String, Value>) -> String {
    let theirs = text(at(m, "theirs")).unwrap_or_else(|| "?".into());
    let id = short_hex(at(m, "theirs_id"))
        .map(|h| format!(" ({h})"))
        .unwrap_or_default();
    let verb = match kind {
        "merge" => "merged",
        "cherry-pick" => "picked",
        "revert" => "reverted",
        _ => "rebased onto",
    };
    match at(m, "conflicts").as_u64() {
        Some(0) => format!("{kind}: {verb} {theirs}{id}, clean"),
        Some(n) => format!(
            "{kind}: {theirs}{id} stopped on {n} conflict{}",
            if n == 1 { "" } else { "s" }
        ),
        None => format!("{kind}: {verb} {theirs}{id}"),
    }
}

/// The `meta` an undo or redo keeps of the operation it reverted: `of` itself
/// (an undo), or what `of` (an undo, for a redo) had undone.
pub(crate) fn target_of(of: &Operation) -> Value {
    if of.undoes.is_some()
        && let Some(t) = of.meta.get(TARGET_KEY)
    {
        let mut t = t.clone();
        if let Value::Object(o) = &mut t {
            o.insert("undone_by".into(), of.seq.into());
        }
        return t;
    }
    serde_json::json!({
        "seq": of.seq,
        "kind": of.kind,
        "what": cut(&first_words(of), MESSAGE_SHOWN + 20),
    })
}

/// An operation named for a reader: a checkpoint's message, else what it came to,
/// else its kind (an exec: its number and command).
fn first_words(o: &Operation) -> String {
    if o.kind == "checkpoint"
        && let Some(msg) = o.request["message"].as_str()
    {
        return format!("checkpoint {:?}", cut(msg, MESSAGE_SHOWN));
    }
    outcome(o).unwrap_or_else(|| what(o))
}

/// The operation's kind; for an exec, its number and command, shell-quoted
/// (`exec 3: sh -c 'echo a b'`).
pub(crate) fn what(o: &Operation) -> String {
    let argv: Option<Vec<String>> = (o.kind == crate::ops::exec::KIND)
        .then(|| serde_json::from_value(o.request["argv"].clone()).ok())
        .flatten();
    let Some(argv) = argv else {
        return o.kind.clone();
    };
    let cmd = quoted_short(&argv, COMMAND_SHOWN);
    match o.meta.get("exec").and_then(|e| e["n"].as_u64()) {
        Some(n) => format!("{} {n}: {cmd}", o.kind),
        None => format!("{}: {cmd}", o.kind),
    }
}

/// An undo's or redo's summary in words: `undid #12 checkpoint "two": HEAD main
/// back to 3f2a…`.
pub(crate) fn reverted(o: &Operation, workspace_changed: bool) -> String {
    let t = o.meta.get(TARGET_KEY);
    let redo = o.redoes.is_some();
    let what = match t {
        Some(t) => {
            let seq = t["seq"].as_u64().unwrap_or(0);
            let name = t["what"].as_str().or(t["kind"].as_str()).unwrap_or("?");
            let by = t["undone_by"]
                .as_u64()
                .filter(|_| redo)
                .map_or(String::new(), |u| format!(" (undone by #{u})"));
            format!("{} #{seq} {name}{by}", if redo { "redid" } else { "undid" })
        }
        None => match (o.undoes, o.redoes) {
            (Some(n), _) => format!("undid operation #{n}"),
            (_, Some(u)) => format!("redid what undo #{u} undid"),
            _ => o.kind.clone(),
        },
    };
    let back = if redo { "to" } else { "back to" };
    let mut parts = Vec::new();
    let (a, b): (&View, &View) = (&o.before, &o.after);
    // As the session writes it (a stored name never leaves the daemon).
    let shown = |n: &String| crate::refs::names::display(n, Some(&o.session));
    if a.head != b.head || a.branch != b.branch {
        let (x, y) = (a.branch.as_ref().map(shown), b.branch.as_ref().map(shown));
        parts.push(match (&x, &y) {
            (Some(x), Some(y)) if x == y => format!("HEAD {y} {back} {}", short(&b.head)),
            (_, Some(y)) => format!("HEAD {back} branch {y} at {}", short(&b.head)),
            (_, None) => format!("HEAD detached {back} {}", short(&b.head)),
        });
    }
    for (full, v) in &b.branches {
        let was = a.branches.get(full).cloned().flatten();
        let name = shown(full);
        if was != *v {
            parts.push(match v {
                Some(_) if was.is_none() => format!("branch {name} made again at {}", short(v)),
                Some(_) => format!("branch {name} {back} {}", short(v)),
                None => format!("branch {name} deleted"),
            });
        }
    }
    if workspace_changed {
        parts.push(
            if redo {
                "files changed again"
            } else {
                "files changed back"
            }
            .into(),
        );
    }
    if parts.is_empty() {
        what
    } else {
        format!("{what}: {}", parts.join("; "))
    }
}
