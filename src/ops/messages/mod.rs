//! The conversation-log ops: `message_append`, `message_flush`, `messages`,
//! `session_meta_update` (served without the session's op lock: an append waits
//! only for room in the queue), `rewind` ([`rewind`]), `continue` ([`cont`]), and
//! the writer's sink ([`sink`]: what one batch of queued messages becomes).
//!
//! Invariants: ops that read the log as a whole (`rewind`, `fork`) first wait for
//! the writer ([`unlocked`]), before taking the op lock, which the writer takes for
//! each batch (so a message's `op`, `checkpoint` and `workspace` are one moment:
//! no op runs between them). Nothing that holds the op lock waits for the writer.

pub mod cont;
pub mod rewind;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::record::Call;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::views::MessageView;
use super::{Target, syncfs};
use crate::error::{Error, Result};
use crate::messages::{self, Draft, Message, Query, Stream, share, writer};
use crate::oplog;

pub(crate) use cont::run as continue_session;
pub(crate) use rewind::run as rewind;

/// The one value of `auto_checkpoint_on` that does something.
pub const ON_USER_MESSAGE: &str = "user_message";

/// Check the `auto_checkpoint_on` setting.
pub(crate) fn check_setting(v: &str) -> Result<()> {
    match v {
        "" | "none" | ON_USER_MESSAGE => Ok(()),
        o => Err(Error::Invalid(format!(
            "auto_checkpoint_on {o:?}: expected user_message or none"
        ))),
    }
}

/// The answer to `messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessagesAnswer {
    /// The messages, oldest first.
    pub messages: Vec<MessageView>,
    /// Matching messages were left out of this page (ask again `after` the last).
    pub more: bool,
}

/// The answer to `message_append`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Queued {
    /// The message id (the one given, or a new UUID).
    pub id: String,
    /// Always `true`: queued for the writer (or already recorded).
    pub queued: bool,
    /// `true` when a message with this id was already recorded (nothing was
    /// queued); absent otherwise.
    #[serde(default, skip_serializing_if = "crate::control::is_false")]
    pub duplicate: bool,
}

/// The answer to `message_flush`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Durable {
    /// The sequence number of the newest durable message (0: none).
    pub durable: u64,
}

/// The answer to `session_meta_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetaUpdated {
    /// The session info's conversation metadata after the merge.
    pub conversation: Option<ConversationMeta>,
}

/// Conversation metadata of a session (`meta.conversation` of its info record);
/// fields in name order, as the untyped record prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationMeta {
    /// Total cost reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Why the agent stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<String>,
    /// The model in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent runtime working in the session (`claude`, `codex`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The runtime's own id of its session (to resume it there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_session: Option<String>,
    /// Turns reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
}

/// What `session_meta_update` sets besides the counters.
#[derive(Debug, Clone, Default)]
pub struct MetaTexts {
    pub model: Option<String>,
    pub exit_reason: Option<String>,
    pub runtime: Option<String>,
    pub runtime_session: Option<String>,
}

/// `messages`: the session's visible messages (read your writes: what was
/// appended before, on any connection, is listed).
pub(crate) fn list(t: &Target, q: Query) -> Result<MessagesAnswer> {
    wait(t)?;
    let s = &t.session;
    let page = messages::list(&**s.store(), s.name(), &q)?;
    Ok(MessagesAnswer {
        messages: page.messages.iter().map(MessageView::from).collect(),
        more: page.more,
    })
}

fn ident(t: &Target) -> usize {
    Arc::as_ptr(&t.session) as *const u8 as usize
}

/// `message_append`: queue `d` for the writer.
pub(crate) fn append(t: &Target, d: Draft) -> Result<Queued> {
    d.validate()?;
    let s = &t.session;
    let id = d.id.clone();
    if messages::exists(&**s.store(), s.name(), &id)? {
        return Ok(Queued {
            id,
            queued: true,
            duplicate: true,
        });
    }
    // What is stored already (the writer checks again, exactly, per record: what
    // is queued meanwhile can pass this check by at most the queue's length).
    let limits = crate::quota::load(&**s.store())?;
    let used = share::usage(&**s.store(), s.name())?;
    check_usage(&limits, used, draft_size(&d))?;
    writer::append(s.name(), ident(t), &mut || sink(t.clone()), d)?;
    Ok(Queued {
        id,
        queued: true,
        duplicate: false,
    })
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
pub(crate) fn wait(t: &Target) -> Result<()> {
    writer::flush(t.session.name(), ident(t), &mut || sink(t.clone()))
}

pub(crate) fn flush(t: &Target) -> Result<Durable> {
    wait(t)?;
    let s = &t.session;
    let n = messages::last_seq(&**s.store(), s.name(), Stream::Messages)?;
    Ok(Durable { durable: n })
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
    crate::ops::checkpoint::take(
        s,
        &call,
        &crate::ops::checkpoint::Taking::new("auto: at user message", "message"),
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
            id: d.id,
            seq: *seq,
            time_ns: d.time_ns,
            role: d.role,
            content: d.content,
            tool_calls: d.tool_calls,
            tool_call_id: d.tool_call_id,
            meta: d.meta,
            op,
            checkpoint: head,
            workspace: root,
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
/// exit_reason, runtime, runtime_session}`.
pub(crate) fn meta_update(
    t: &Target,
    texts: MetaTexts,
    add_turns: Option<u64>,
    add_cost: Option<f64>,
) -> Result<MetaUpdated> {
    let MetaTexts {
        model,
        exit_reason,
        runtime,
        runtime_session,
    } = texts;
    check_text("model", &model)?;
    check_text("exit_reason", &exit_reason)?;
    check_text("runtime", &runtime)?;
    check_text("runtime_session", &runtime_session)?;
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
        if let Some(r) = &runtime {
            c["runtime"] = json!(r);
        }
        if let Some(r) = &runtime_session {
            c["runtime_session"] = json!(r);
        }
        Ok(true)
    })?;
    let conversation = match info.meta.get("conversation") {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
            Error::corrupt(
                format!("session {}", s.name()),
                format!("meta.conversation: {e}"),
            )
        })?),
    };
    Ok(MetaUpdated { conversation })
}
