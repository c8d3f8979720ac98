//! The tools that are one control request each (or a request and a flush): the
//! arguments parsed as the verb's request ([`request`]) or mapped to it, the
//! answer returned as the structured result. `diff` and `show_file` also collect
//! the streamed events up to a byte limit.

use serde::Serialize;
use serde_json::{Value, json};
use treefork::control::{Verb, b64_decode};
use treefork::verbs::{self, Request};

use super::bridge::{Outcome, ToolError};
use super::schemas as s;
use super::tools::{Call, args};

/// Default patch bytes returned by `diff`.
pub const DIFF_LIMIT: usize = 64 << 10;
/// Default bytes returned by `show_file`.
pub const SHOW_LIMIT: usize = 256 << 10;

fn simple(cx: &Call, request: impl Into<Request>) -> Outcome {
    cx.bridge.call(&request.into(), None, &mut |_| {})
}

/// A tool whose arguments are its verb's request: parsed as that type, sent as is.
pub fn request<V: Verb + Into<Request>>(cx: &Call, v: Value) -> Outcome {
    simple(cx, args::<V>(v)?)
}

/// A unit enum's wire name (its serde name).
fn wire<T: Serialize>(t: T) -> String {
    match serde_json::to_value(t) {
        Ok(Value::String(s)) => s,
        other => unreachable!("a unit variant serializes as a string: {other:?}"),
    }
}

pub fn diff(cx: &Call, v: Value) -> Outcome {
    let a: s::DiffArgs = args(v)?;
    let mode = a.mode.unwrap_or(s::DiffMode::NameStatus);
    let limit = a.max_bytes.unwrap_or(DIFF_LIMIT);
    let patch = mode == s::DiffMode::Patch;
    let mut text = String::new();
    let mut total = 0usize;
    let mut cut = false;
    let mut on_event = |ev: &Value| {
        if let Some(t) = ev["text"].as_str().filter(|_| ev["event"] == "patch") {
            total += t.len();
            let room = limit.saturating_sub(text.len());
            if t.len() <= room {
                text.push_str(t);
            } else {
                let mut end = room;
                while !t.is_char_boundary(end) {
                    end -= 1;
                }
                text.push_str(&t[..end]);
                cut = true;
            }
        }
    };
    let request = Request::from(verbs::Diff {
        a: a.a,
        b: a.b,
        mode: Some(mode.wire().into()),
        stream: patch,
        ignored: a.ignored.unwrap_or(false),
        paths: a.paths.unwrap_or_default(),
    });
    let mut r = cx.bridge.call(&request, None, &mut on_event)?;
    r["truncated"] = json!(cut);
    if patch {
        r["patch"] = json!(text);
        r["patch_bytes"] = json!(total);
    }
    Ok(r)
}

pub fn show_file(cx: &Call, v: Value) -> Outcome {
    let a: s::ShowFileArgs = args(v)?;
    let limit = a.max_bytes.unwrap_or(SHOW_LIMIT);
    let mut bytes = Vec::new();
    let mut bad = None;
    let mut on_event = |ev: &Value| {
        if ev["event"] != "data" || bytes.len() >= limit {
            return;
        }
        match b64_decode(ev["data"].as_str().unwrap_or("")) {
            Some(d) => bytes.extend_from_slice(&d[..d.len().min(limit - bytes.len())]),
            None => bad = Some("not base64".to_string()),
        }
    };
    let request = Request::from(verbs::Show {
        target: a.target.unwrap_or_else(|| "HEAD".into()),
        path: Some(a.path),
    });
    let mut r = cx.bridge.call(&request, None, &mut on_event)?;
    if let Some(e) = bad {
        return Err(ToolError::new("corrupt", format!("data event: {e}")));
    }
    if r["kind"] == "file" || r["kind"] == "symlink" {
        let size = r["size"].as_u64().unwrap_or(0);
        r["truncated"] = json!((bytes.len() as u64) < size);
        match utf8_prefix(&bytes, (bytes.len() as u64) < size) {
            Some(t) => r["text"] = json!(t),
            None => r["base64"] = json!(treefork::control::b64_encode(&bytes)),
        }
    }
    Ok(r)
}

/// `bytes` as text when UTF-8 (when `cut`, a character split at the end is dropped).
fn utf8_prefix(bytes: &[u8], cut: bool) -> Option<String> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t.to_string()),
        Err(e) if cut && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned())
        }
        Err(_) => None,
    }
}

pub fn checkpoint(cx: &Call, v: Value) -> Outcome {
    let a: s::CheckpointArgs = args(v)?;
    let request = Request::from(verbs::Checkpoint {
        message: a.message,
        trigger: a.trigger.unwrap_or_else(|| "manual".into()),
        meta: a.meta.unwrap_or_default(),
    });
    cx.bridge
        .call(&request, a.explanation.as_deref(), &mut |_| {})
}

pub fn fork(cx: &Call, v: Value) -> Outcome {
    let a: s::ForkArgs = args(v)?;
    let request = Request::from(verbs::Fork {
        name: a.name,
        from: a.from,
        mountpoint: a.mountpoint.into(),
        agent_socket: None,
        agent_uid: None,
        from_message: a.from_message,
    });
    simple(cx, request)
}

pub fn restore(cx: &Call, v: Value) -> Outcome {
    let a: s::RestoreArgs = args(v)?;
    simple(
        cx,
        verbs::Restore {
            target: a.target,
            paths: a.paths,
            dry_run: a.dry_run.unwrap_or(true),
        },
    )
}

pub fn undo(cx: &Call, v: Value) -> Outcome {
    let a: s::UndoArgs = args(v)?;
    simple(
        cx,
        verbs::Undo {
            what: a.what.map(s::UndoWhat::wire),
            if_last: None,
        },
    )
}

pub fn redo(cx: &Call, v: Value) -> Outcome {
    let a: s::UndoArgs = args(v)?;
    simple(
        cx,
        verbs::Redo {
            what: a.what.map(s::UndoWhat::wire),
            if_last: None,
        },
    )
}

pub fn messages_append(cx: &Call, v: Value) -> Outcome {
    let a: s::AppendArgs = args(v)?;
    let mut r = simple(
        cx,
        verbs::MessageAppend {
            role: wire(a.role),
            content: a.content,
            tool_calls: a.tool_calls,
            tool_call_id: a.tool_call_id,
            meta: a.meta,
            id: a.id,
            stream: a.stream.map(wire),
        },
    )?;
    if a.flush {
        let f = simple(cx, verbs::MessageFlush {})?;
        r["durable"] = f["durable"].clone();
    }
    Ok(r)
}

pub fn messages_list(cx: &Call, v: Value) -> Outcome {
    let a: s::ListArgs = args(v)?;
    simple(
        cx,
        verbs::Messages {
            stream: a.stream.map(wire),
            limit: a.limit,
            upto: a.upto,
            after: a.after,
        },
    )
}

pub fn rewind(cx: &Call, v: Value) -> Outcome {
    let a: s::RewindArgs = args(v)?;
    simple(
        cx,
        verbs::Rewind {
            to: a.to,
            prompt: None,
            what: a.what.map(wire),
            dry_run: a.dry_run,
        },
    )
}

pub fn promote(cx: &Call, v: Value) -> Outcome {
    let a: s::PromoteArgs = args(v)?;
    simple(
        cx,
        verbs::Promote {
            paths: a.paths,
            strategy: a.strategy.unwrap_or_else(|| "commit".into()),
            message: a.message,
            dry_run: a.dry_run.unwrap_or(true),
            branch: a.branch,
            onto_head: a.onto_head,
            allow_large: a.allow_large,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_prefix_drops_only_a_split_character() {
        let t = "é".as_bytes();
        assert_eq!(utf8_prefix(&t[..1], true).as_deref(), Some(""));
        assert_eq!(utf8_prefix(&t[..1], false), None);
        assert_eq!(utf8_prefix(b"\xff ok", true), None);
        assert_eq!(utf8_prefix(b"ok", false).as_deref(), Some("ok"));
    }
}
