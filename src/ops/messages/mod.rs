//! The conversation-log ops: `message_append`, `message_flush`, `messages`,
//! `session_meta_update` (served without the session's op lock: an append waits
//! only for room in the queue), `rewind` ([`rewind`]), `continue` ([`cont`]), and
//! the writer's sink ([`sink`]: what one batch of queued messages becomes).
//!
//! Invariants: ops that read the log as a whole (`rewind`, `fork`) first wait for
//! the writer ([`unlocked`]), before taking the op lock, which the writer takes for
//! each batch (so a message's `op`, `checkpoint` and `workspace` are one moment:
//! no op runs between them). Nothing that holds the op lock waits for the writer.

pub(super) mod cont;
mod rewind;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::record::Call;
use super::{Target, syncfs};
use crate::control::Op;
use crate::error::{Error, Result};
use crate::messages::{self, Draft, Message, Query, Stream, share, writer};
use crate::oplog;

pub(super) use cont::run as continue_session;
pub(super) use rewind::run as rewind;

/// The one value of `auto_checkpoint_on` that does something.
pub const ON_USER_MESSAGE: &str = "user_message";

/// Check the `auto_checkpoint_on` setting.
pub(super) fn check_setting(v: &str) -> Result<()> {
    match v {
        "" | "none" | ON_USER_MESSAGE => Ok(()),
        o => Err(Error::Invalid(format!(
            "auto_checkpoint_on {o:?}: expected user_message or none"
        ))),
    }
}

/// Serve the conversation ops that run without the op lock; hand every other op
/// back (after waiting for the writer when it reads the whole log).
pub(super) fn unlocked(t: &Target, _call: &Call, op: Op) -> Result<std::result::Result<Value, Op>> {
    match op {
        Op::MessageAppend {
            role,
            content,
            tool_calls,
            tool_call_id,
            meta,
            id,
            stream,
        } => {
            let d = Draft {
                id: id.unwrap_or_else(messages::new_id),
                stream: Stream::parse(stream.as_deref())?,
                role,
                content,
                tool_calls,
                tool_call_id,
                meta,
                time_ns: crate::clock::unix_ns(),
            };
            append(t, d).map(Ok)
        }
        Op::MessageFlush => flush(t).map(Ok),
        Op::Messages {
            stream,
            limit,
            upto,
            after,
        } => {
            let q = Query {
                stream,
                limit,
                upto,
                after,
            };
            // Read your writes: what was appended before (on any connection) is listed.
            wait(t)?;
            let s = &t.session;
            let page = messages::list(&**s.store(), s.name(), &q)?;
            let list: Vec<Value> = page.messages.iter().map(Message::json).collect();
            Ok(Ok(json!({ "messages": list, "more": page.more })))
        }
        Op::SessionMetaUpdate {
            model,
            add_turns,
            add_cost,
            exit_reason,
        } => meta_update(t, model, add_turns, add_cost, exit_reason).map(Ok),
        op @ (Op::Rewind { .. } | Op::Fork { .. }) => {
            wait(t)?;
            Ok(Err(op))
        }
        op => Ok(Err(op)),
    }
}

fn ident(t: &Target) -> usize {
    Arc::as_ptr(&t.session) as *const u8 as usize
}

fn append(t: &Target, d: Draft) -> Result<Value> {
    d.validate()?;
    let s = &t.session;
    let id = d.id.clone();
    if messages::exists(&**s.store(), s.name(), &id)? {
        return Ok(json!({"id": id, "queued": true, "duplicate": true}));
    }
    // What is stored already (the writer checks again, exactly, per record: what
    // is queued meanwhile can pass this check by at most the queue's length).
    let limits = crate::quota::load(&**s.store())?;
    let used = share::usage(&**s.store(), s.name())?;
    check_usage(&limits, used, draft_size(&d))?;
    writer::append(s.name(), ident(t), &mut || sink(t.clone()), d)?;
    Ok(json!({"id": id, "queued": true}))
}

/// Before an unmount or shutdown: write every queued message (an append answered
/// `queued` is never lost by a clean unmount). A failure is logged; the unmount goes on.
pub fn drain(t: &Target) {
    if let Err(e) = wait(t) {
        log::error!(
            "session {}: queued messages not written before unmount: {e}",
            t.session.name()
        );
    }
}

/// Wait until the writer has written everything queued.
fn wait(t: &Target) -> Result<()> {
    writer::flush(t.session.name(), ident(t), &mut || sink(t.clone()))
}

fn flush(t: &Target) -> Result<Value> {
    wait(t)?;
    let s = &t.session;
    let n = messages::last_seq(&**s.store(), s.name(), Stream::Messages)?;
    Ok(json!({ "durable": n }))
}

/// The writer's sink for `t`'s session: each batch written under the op lock.
fn sink(t: Target) -> writer::Sink {
    Box::new(move |drafts| write_batch(&t, drafts))
}

fn write_batch(t: &Target, drafts: Vec<Draft>) -> Result<()> {
    let s = &t.session;
    // The messages name the flushed workspace root (see `Session::pin_roots`).
    let _pins = s.pin_roots();
    let _lock = s.op_lock.lock().unwrap_or_else(|e| e.into_inner());
    let on_user = s.record().config.auto_checkpoint_on == ON_USER_MESSAGE;
    // With the user_message trigger each user message starts a group that begins
    // with a checkpoint.
    let mut groups: Vec<Vec<Draft>> = Vec::new();
    for d in drafts {
        let starts = on_user && d.stream == Stream::Messages && d.role == "user";
        match groups.last_mut() {
            Some(g) if !starts => g.push(d),
            _ => groups.push(vec![d]),
        }
    }
    for g in groups {
        if on_user && g[0].stream == Stream::Messages && g[0].role == "user" {
            user_checkpoint(t)?;
        }
        commit_group(t, g)?;
    }
    Ok(())
}

/// The `message` checkpoint taken at a user message (when anything changed since
/// HEAD, or there is no checkpoint yet), recorded as a daemon operation.
fn user_checkpoint(t: &Target) -> Result<()> {
    let s = &t.session;
    syncfs(&t.mount)?;
    if s.record().head.is_some() && !s.has_changes()? {
        return Ok(());
    }
    let actor = oplog::Actor::daemon();
    let call = Call {
        actor: &actor,
        explanation: None,
        request: json!({"op": "checkpoint", "trigger": "message", "message": "at user message"}),
    };
    let store = s.store().clone();
    let mut hook = call.checkpoint_hook(&*store, "checkpoint");
    s.checkpoint_logged(
        "auto: at user message",
        "message",
        None,
        Map::new(),
        Some(&mut hook),
    )?;
    Ok(())
}

/// Store `drafts` (ids not stored yet) with the current op, HEAD and workspace, in
/// one commit.
fn commit_group(t: &Target, drafts: Vec<Draft>) -> Result<()> {
    let s = &t.session;
    let store = s.store().clone();
    let name = s.name();
    let limits = crate::quota::load(&*store)?;
    let mut used = share::usage(&*store, name)?;
    let mut refused = None;
    syncfs(&t.mount)?;
    let root = s.flush()?;
    let head = s.record().head;
    let op = oplog::last(&*store, name)?.map(|o| o.seq);
    let mut next: HashMap<Stream, u64> = HashMap::new();
    let mut seen = HashSet::new();
    let mut ops = Vec::new();
    for d in drafts {
        if !seen.insert(d.id.clone()) || messages::exists(&*store, name, &d.id)? {
            continue;
        }
        let seq = match next.get_mut(&d.stream) {
            Some(n) => n,
            None => next
                .entry(d.stream)
                .or_insert(messages::last_seq(&*store, name, d.stream)?),
        };
        *seq += 1;
        let m = Message {
            version: messages::MSG_VERSION,
            id: d.id,
            seq: *seq,
            time_ns: d.time_ns,
            role: d.role,
            content: d.content,
            tool_calls: d.tool_calls,
            tool_call_id: d.tool_call_id,
            meta: d.meta,
            op,
            checkpoint: head.clone(),
            workspace: root.to_hex(),
        };
        let size = m.encode().len() as u64;
        if let Err(e) = check_usage(&limits, used, size) {
            // Refused: this one and the rest of the group (reported at the next
            // flush); what was accepted before it is stored.
            log::warn!("session {name}: message {} refused: {e}", m.id);
            refused = Some(e);
            break;
        }
        used.bytes += size;
        used.count += 1;
        ops.extend(messages::put_ops(name, d.stream, &m));
    }
    if !ops.is_empty() {
        ops.push(share::usage_op(name, used));
        store.commit(ops)?;
    }
    refused.map_or(Ok(()), Err)
}

/// The stored size of a draft, roughly (its record adds the ids and times).
fn draft_size(d: &Draft) -> u64 {
    let size = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len() as u64);
    let meta = d
        .meta
        .as_ref()
        .map_or(0, |m| size(&Value::Object(m.clone())));
    size(&d.content) + d.tool_calls.as_ref().map_or(0, size) + meta + 256
}

/// Refuse a record of `size` bytes past the session's message quotas.
fn check_usage(limits: &crate::quota::Limits, used: share::Usage, size: u64) -> Result<()> {
    crate::quota::check(
        "message_count",
        limits.message_count,
        used.count,
        1,
        "records",
    )?;
    crate::quota::check(
        "message_bytes",
        limits.message_bytes,
        used.bytes,
        size,
        "bytes",
    )
}

const MAX_META_TEXT: usize = 256;

fn check_text(what: &str, v: &Option<String>) -> Result<()> {
    if let Some(s) = v
        && (s.len() > MAX_META_TEXT || s.chars().any(char::is_control))
    {
        return Err(Error::Invalid(format!(
            "{what} must be at most {MAX_META_TEXT} bytes without control characters"
        )));
    }
    Ok(())
}

/// Merge into the info record's `meta.conversation`: `{model, turns, cost,
/// exit_reason}`.
fn meta_update(
    t: &Target,
    model: Option<String>,
    add_turns: Option<u64>,
    add_cost: Option<f64>,
    exit_reason: Option<String>,
) -> Result<Value> {
    check_text("model", &model)?;
    check_text("exit_reason", &exit_reason)?;
    if add_cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(Error::Invalid(
            "add_cost must be a finite number >= 0".into(),
        ));
    }
    let s = &t.session;
    let info = crate::lifecycle::manage::update(&**s.store(), s.name(), &mut |i| {
        let c = i.meta.entry("conversation").or_insert_with(|| json!({}));
        if !c.is_object() {
            *c = json!({});
        }
        if let Some(m) = &model {
            c["model"] = json!(m);
        }
        if let Some(n) = add_turns {
            let old = c["turns"].as_u64().unwrap_or(0);
            c["turns"] = json!(old.saturating_add(n));
        }
        if let Some(x) = add_cost {
            let old = c["cost"].as_f64().unwrap_or(0.0);
            c["cost"] = json!(old + x);
        }
        if let Some(r) = &exit_reason {
            c["exit_reason"] = json!(r);
        }
        Ok(true)
    })?;
    Ok(json!({ "conversation": info.meta.get("conversation") }))
}
