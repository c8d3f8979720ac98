//! Shared conversations: a fork (and `continue`) refers to its parent's
//! conversation instead of copying it, and what each session stores itself is
//! counted for its quota.
//!
//! A session's record `f/<session>` ([`Bases`]) names, per stream, a **base**:
//! the session whose records it shares and the last sequence number shared
//! (`upto`). The session's own records are numbered from `upto + 1`; records
//! `1..=upto` are read from the base's view, which may itself have a base. The
//! chain of a stream ([`chain`]) is a list of [`Seg`]ments: own records first,
//! then each base's records down to sequence number 1. A fork starts with the
//! parent's hidden ranges up to `upto` (its own `v/` record), so it shows exactly
//! the messages the parent showed.
//!
//! `u/<session>` ([`Usage`]) counts the bytes and records the session stored
//! itself (the writer adds each batch, under the op lock), for `crate::quota`.
//!
//! Invariants:
//! - A chain has at most `quota::MAX_FORK_DEPTH` bases: a fork that would make a
//!   longer one is refused (`quota`, limit `fork_depth`); a longer stored chain is
//!   corrupt. A base that contributes no record to a fork is skipped when the
//!   fork is made ([`base_for`]), so depth grows only with real sharing.
//! - A session whose records are shared is removed by copy-on-delete
//!   ([`release`]): the fork sharing the most of it (the **heir**) receives the
//!   records it needs (in pages, each its own commit, before the removal) and the
//!   other forks are pointed at the heir, in the commit that deletes the session.
//!   So no base is ever missing, and no conversation is stored twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{IdEntry, Stream, conversation};
use crate::error::{Error, Result};
use crate::meta::{self, KeyRange, MetaOp};
use crate::store::ObjectStore;

/// Record format version of `f/` and `u/`.
pub const SHARE_VERSION: u32 = 1;
/// Records read per scan step (bounds what one step holds: at most this many
/// records of at most ~2.1 MiB each).
pub const CHUNK: usize = 4;

/// What a stream shares: `session`'s view up to sequence number `upto`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// The session whose records are read.
    pub session: String,
    /// The last sequence number shared.
    pub upto: u64,
}

/// A session's bases, per stream.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Bases {
    /// Format version ([`SHARE_VERSION`]).
    pub version: u32,
    /// The `messages` stream's base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Base>,
    /// The `transcript` stream's base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Base>,
}

impl Bases {
    /// The base of `stream`.
    pub fn get(&self, stream: Stream) -> Option<&Base> {
        match stream {
            Stream::Messages => self.messages.as_ref(),
            Stream::Transcript => self.transcript.as_ref(),
        }
    }

    fn set(&mut self, stream: Stream, b: Option<Base>) {
        match stream {
            Stream::Messages => self.messages = b,
            Stream::Transcript => self.transcript = b,
        }
    }
}

/// `session`'s bases (none for a session that shares nothing).
pub fn load(store: &dyn ObjectStore, session: &str) -> Result<Bases> {
    match store.meta_get(&meta::conversation_base_key(session))? {
        None => Ok(Bases::default()),
        Some(v) => decode(session, &v),
    }
}

fn decode(session: &str, v: &[u8]) -> Result<Bases> {
    let b: Bases = serde_json::from_slice(v)
        .map_err(|e| Error::corrupt(format!("conversation bases of {session}"), e.to_string()))?;
    if b.version != SHARE_VERSION {
        return Err(Error::corrupt(
            format!("conversation bases of {session}"),
            format!("unsupported version {}", b.version),
        ));
    }
    Ok(b)
}

/// The op storing `b` as `session`'s bases.
pub fn put_op(session: &str, b: &Bases) -> MetaOp {
    let key = meta::conversation_base_key(session);
    if b.messages.is_none() && b.transcript.is_none() {
        return MetaOp::Delete(key);
    }
    let mut b = b.clone();
    b.version = SHARE_VERSION;
    MetaOp::Put(key, serde_json::to_vec(&b).expect("serializes"))
}

/// Records `lo+1..=hi` of a stream live under `session`'s keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg {
    /// Whose keys.
    pub session: String,
    /// Exclusive lower bound.
    pub lo: u64,
    /// Inclusive upper bound.
    pub hi: u64,
}

/// `session`'s view of `stream`, newest segment (its own records) first.
pub fn chain(store: &dyn ObjectStore, session: &str, stream: Stream) -> Result<Vec<Seg>> {
    let mut out = Vec::new();
    let mut name = session.to_string();
    let mut hi = u64::MAX;
    for _ in 0..=crate::quota::MAX_FORK_DEPTH {
        match load(store, &name)?.get(stream).cloned() {
            None => {
                out.push(Seg {
                    session: name,
                    lo: 0,
                    hi,
                });
                return Ok(out);
            }
            Some(b) => {
                if b.upto < hi {
                    out.push(Seg {
                        session: name,
                        lo: b.upto,
                        hi,
                    });
                    hi = b.upto;
                }
                name = b.session;
            }
        }
    }
    Err(Error::corrupt(
        format!("conversation of {session}"),
        format!(
            "its {} stream has more than {} bases",
            stream.name(),
            crate::quota::MAX_FORK_DEPTH
        ),
    ))
}

/// The highest sequence number of `session`'s view of `stream` (0: empty).
pub fn last_seq(store: &dyn ObjectStore, session: &str, stream: Stream) -> Result<u64> {
    let c = chain(store, session, stream)?;
    let own = &c[0];
    let range = KeyRange::message_seqs(&own.session, stream.tag(), own.lo + 1, own.hi);
    let got = store.meta_range_rev(&range, 1)?;
    Ok(got
        .first()
        .and_then(|(k, _)| meta::message_parts(k))
        .map_or(own.lo, |(_, _, seq)| seq))
}

/// Where message `id` of `session`'s view is: (stream, seq, the session whose
/// keys hold it).
pub fn locate(
    store: &dyn ObjectStore,
    session: &str,
    id: &str,
) -> Result<Option<(Stream, u64, String)>> {
    let mut cache: BTreeMap<String, Option<IdEntry>> = BTreeMap::new();
    for stream in [Stream::Messages, Stream::Transcript] {
        for seg in chain(store, session, stream)? {
            let e = match cache.get(&seg.session) {
                Some(e) => *e,
                None => {
                    let e = match store.meta_get(&meta::message_id_key(&seg.session, id))? {
                        None => None,
                        Some(raw) => {
                            Some(serde_json::from_slice::<IdEntry>(&raw).map_err(|e| {
                                Error::corrupt(
                                    format!("message index {}/{id}", seg.session),
                                    e.to_string(),
                                )
                            })?)
                        }
                    };
                    cache.insert(seg.session.clone(), e);
                    e
                }
            };
            if let Some(e) = e
                && e.stream == stream.tag() as char
                && e.seq > seg.lo
                && e.seq <= seg.hi
            {
                return Ok(Some((stream, e.seq, seg.session)));
            }
        }
    }
    Ok(None)
}

/// The ranges `[a, b]` of `from..=to` not hidden by `hidden`, in order.
pub fn visible(hidden: &conversation::Hidden, from: u64, to: u64) -> Vec<[u64; 2]> {
    let mut out = Vec::new();
    let mut at = from;
    for [a, b] in hidden {
        if at > to {
            break;
        }
        if *b < at {
            continue;
        }
        if *a > at {
            out.push([at, (*a - 1).min(to)]);
        }
        at = b.saturating_add(1).max(at);
        if *b == u64::MAX {
            return out;
        }
    }
    if at <= to {
        out.push([at, to]);
    }
    out
}

/// Walk the records of `ranges` (each `[a, b]`, ascending and disjoint) of a
/// view, oldest first or (with `rev`) newest first, [`CHUNK`] records at a time;
/// `f` gets each (seq, stored bytes) and returns whether to go on.
pub fn walk(
    store: &dyn ObjectStore,
    chain: &[Seg],
    stream: Stream,
    ranges: &[[u64; 2]],
    rev: bool,
    f: &mut dyn FnMut(u64, Vec<u8>) -> Result<bool>,
) -> Result<()> {
    // Pieces: (session, from, to), in the walk's order.
    let mut pieces = Vec::new();
    for [a, b] in ranges {
        let mut segs: Vec<&Seg> = chain.iter().collect();
        segs.reverse(); // oldest first
        for s in segs {
            let (from, to) = ((*a).max(s.lo + 1), (*b).min(s.hi));
            if from <= to {
                pieces.push((s.session.as_str(), from, to));
            }
        }
    }
    if rev {
        pieces.reverse();
    }
    for (session, from, to) in pieces {
        let (mut from, mut to) = (from, to);
        loop {
            if from > to {
                break;
            }
            let range = KeyRange::message_seqs(session, stream.tag(), from, to);
            let got = if rev {
                store.meta_range_rev(&range, CHUNK)?
            } else {
                store.meta_range(&range, CHUNK)?
            };
            let n = got.len();
            for (k, v) in got {
                let Some((_, _, seq)) = meta::message_parts(&k) else {
                    continue;
                };
                if rev {
                    to = seq.saturating_sub(1);
                    if seq == 0 {
                        from = 1;
                    }
                } else {
                    from = seq.saturating_add(1);
                    if seq == u64::MAX {
                        to = 0;
                    }
                }
                if !f(seq, v)? {
                    return Ok(());
                }
            }
            if n < CHUNK {
                break;
            }
        }
    }
    Ok(())
}

/// The base a fork of `from` gets for `stream` sharing records `1..=upto`, with
/// the bases that would contribute nothing skipped (`None` when `upto` is 0).
pub fn base_for(
    store: &dyn ObjectStore,
    from: &str,
    stream: Stream,
    upto: u64,
) -> Result<Option<Base>> {
    if upto == 0 {
        return Ok(None);
    }
    let mut name = from.to_string();
    for _ in 0..=crate::quota::MAX_FORK_DEPTH {
        match load(store, &name)?.get(stream) {
            Some(b) if upto <= b.upto => name = b.session.clone(),
            _ => {
                return Ok(Some(Base {
                    session: name,
                    upto,
                }));
            }
        }
    }
    Err(Error::corrupt(
        format!("conversation of {from}"),
        "too many bases",
    ))
}

/// Bytes and count of the records a session stored itself (`u/<session>`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Format version.
    #[serde(default)]
    pub version: u32,
    /// Bytes of stored records (both streams).
    pub bytes: u64,
    /// Stored records (both streams).
    pub count: u64,
}

/// `session`'s usage (zero when it never stored a record since quotas exist).
pub fn usage(store: &dyn ObjectStore, session: &str) -> Result<Usage> {
    match store.meta_get(&meta::conversation_usage_key(session))? {
        None => Ok(Usage::default()),
        Some(v) => serde_json::from_slice(&v)
            .map_err(|e| Error::corrupt(format!("conversation usage of {session}"), e.to_string())),
    }
}

/// The op storing `u` as `session`'s usage.
pub fn usage_op(session: &str, u: Usage) -> MetaOp {
    let u = Usage {
        version: SHARE_VERSION,
        ..u
    };
    MetaOp::Put(
        meta::conversation_usage_key(session),
        serde_json::to_vec(&u).expect("serializes"),
    )
}

/// The ops making new session `to` share `from`'s conversation: every record of
/// both streams (only the messages up to `upto_seq` when given, and then no
/// transcript), and the hidden ranges over them. Refused (`quota`, limit
/// `fork_depth`) when a chain would get longer than the store allows.
pub fn fork_ops(
    store: &dyn ObjectStore,
    from: &str,
    to: &str,
    upto_seq: Option<u64>,
) -> Result<Vec<MetaOp>> {
    let limits = crate::quota::load(store)?;
    let mut bases = Bases::default();
    for stream in [Stream::Messages, Stream::Transcript] {
        let upto = match (stream, upto_seq) {
            (Stream::Messages, Some(n)) => n,
            (Stream::Transcript, Some(_)) => 0,
            (_, None) => last_seq(store, from, stream)?,
        };
        let b = base_for(store, from, stream, upto)?;
        if let Some(b) = &b {
            let depth = chain(store, &b.session, stream)?.len() as u64;
            if depth > limits.fork_depth {
                return Err(crate::quota::exceeded(
                    "fork_depth",
                    limits.fork_depth,
                    format!(
                        "the {} stream of {from} is shared through {depth} sessions already",
                        stream.name()
                    ),
                ));
            }
        }
        bases.set(stream, b);
    }
    let mut ops = vec![put_op(to, &bases)];
    if let Some(b) = &bases.messages {
        let clipped: conversation::Hidden = conversation::hidden(store, from)?
            .into_iter()
            .filter(|[a, _]| *a <= b.upto)
            .map(|[a, e]| [a, e.min(b.upto)])
            .collect();
        if !clipped.is_empty() {
            ops.push(conversation::put_op(to, &clipped));
        }
    }
    Ok(ops)
}

/// Before `session`'s conversation is deleted: for each stream other sessions
/// share, copy what the heir needs to it (in pages, each committed) and return
/// the ops re-pointing every sharing session (to be committed with the
/// deletion). See the module docs.
pub fn release(store: &dyn ObjectStore, session: &str) -> Result<Vec<MetaOp>> {
    let mut sharers: BTreeMap<String, Bases> = BTreeMap::new();
    for (k, v) in store.meta_scan(meta::CONVERSATION_BASE_PREFIX)? {
        if let Some(name) = meta::conversation_base_session(&k)
            && name != session
        {
            let b = decode(name, &v)?;
            if [b.messages.as_ref(), b.transcript.as_ref()]
                .iter()
                .any(|x| x.is_some_and(|x| x.session == session))
            {
                sharers.insert(name.to_string(), b);
            }
        }
    }
    if sharers.is_empty() {
        return Ok(Vec::new());
    }
    let mine = load(store, session)?;
    for stream in [Stream::Messages, Stream::Transcript] {
        let users: Vec<(String, u64)> = sharers
            .iter()
            .filter_map(|(n, b)| {
                b.get(stream)
                    .filter(|x| x.session == session)
                    .map(|x| (n.clone(), x.upto))
            })
            .collect();
        let Some((heir, top)) = users.iter().max_by_key(|(_, u)| *u).cloned() else {
            continue;
        };
        // The heir takes over this session's own records up to `top`, and this
        // session's base below them.
        let my_base = mine.get(stream).cloned();
        let own_lo = my_base.as_ref().map_or(0, |b| b.upto);
        let keep = my_base.as_ref().filter(|b| b.upto > 0).map(|b| Base {
            session: b.session.clone(),
            upto: b.upto.min(top),
        });
        if own_lo < top {
            copy_range(store, session, &heir, stream, own_lo + 1, top)?;
        }
        sharers.get_mut(&heir).expect("a sharer").set(stream, keep);
        for (n, upto) in users {
            if n != heir {
                sharers.get_mut(&n).expect("a sharer").set(
                    stream,
                    Some(Base {
                        session: heir.clone(),
                        upto,
                    }),
                );
            }
        }
    }
    Ok(sharers.iter().map(|(n, b)| put_op(n, b)).collect())
}

/// Copy `from`'s own records `a..=b` of `stream` (and their id index entries) to
/// `to`, a page per commit. Idempotent: the copies sit below `to`'s base bound
/// (unread) until the commit re-pointing `to` lands.
fn copy_range(
    store: &dyn ObjectStore,
    from: &str,
    to: &str,
    stream: Stream,
    a: u64,
    b: u64,
) -> Result<()> {
    let seg = [Seg {
        session: from.to_string(),
        lo: a - 1,
        hi: b,
    }];
    let mut page: Vec<MetaOp> = Vec::new();
    let mut bytes = 0usize;
    walk(store, &seg, stream, &[[a, b]], false, &mut |seq, v| {
        let owner = format!("message {from}#{}{seq}", stream.tag() as char);
        let m = super::Message::decode(&owner, &v)?;
        let entry = IdEntry {
            stream: stream.tag() as char,
            seq,
        };
        bytes += v.len();
        page.push(MetaOp::Put(meta::message_key(to, stream.tag(), seq), v));
        page.push(MetaOp::Put(
            meta::message_id_key(to, &m.id),
            serde_json::to_vec(&entry).expect("serializes"),
        ));
        if bytes >= 8 << 20 {
            store.commit(std::mem::take(&mut page))?;
            bytes = 0;
        }
        Ok(true)
    })?;
    if !page.is_empty() {
        store.commit(page)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{self, Message, Query};
    use crate::store::MemStore;

    /// Append `n` messages to `session`'s view; their ids.
    fn append(s: &MemStore, session: &str, n: u64) -> Vec<String> {
        let mut ids = Vec::new();
        let mut ops = Vec::new();
        let last = last_seq(s, session, Stream::Messages).unwrap();
        for seq in last + 1..=last + n {
            let id = messages::new_id();
            let m = Message {
                id: id.clone(),
                seq,
                time_ns: 1,
                role: "user".into(),
                content: serde_json::json!(format!("{session} {seq}")),
                tool_calls: None,
                tool_call_id: None,
                meta: None,
                op: None,
                checkpoint: None,
                workspace: crate::id::NodeId([0; 32]),
            };
            ops.extend(messages::put_ops(session, Stream::Messages, &m));
            ids.push(id);
        }
        s.commit(ops).unwrap();
        ids
    }

    fn contents(s: &MemStore, session: &str) -> Vec<String> {
        let p = messages::list(s, session, &Query::default()).unwrap();
        assert!(!p.more);
        p.messages
            .iter()
            .map(|m| format!("{}:{}", m.seq, m.content.as_str().unwrap()))
            .collect()
    }

    #[test]
    fn forks_share_and_survive_their_parent() {
        let s = MemStore::default();
        let p_ids = append(&s, "p", 5);
        s.commit(fork_ops(&s, "p", "f", None).unwrap()).unwrap();
        append(&s, "f", 2);
        assert_eq!(contents(&s, "p").len(), 5);
        let f_all = contents(&s, "f");
        assert_eq!(f_all.len(), 7);
        assert_eq!(f_all[4], "5:p 5");
        assert_eq!(f_all[5], "6:f 6");
        // A fork of f up to message 3 skips f (it adds nothing below 3).
        s.commit(fork_ops(&s, "f", "g", Some(3)).unwrap()).unwrap();
        assert_eq!(
            load(&s, "g").unwrap().messages,
            Some(Base {
                session: "p".into(),
                upto: 3
            })
        );
        s.commit(fork_ops(&s, "f", "h", None).unwrap()).unwrap();
        assert_eq!(chain(&s, "h", Stream::Messages).unwrap().len(), 3);
        let (_, m) = messages::by_id(&s, "g", &p_ids[1]).unwrap();
        assert_eq!(m.seq, 2);
        assert!(messages::by_id(&s, "g", &p_ids[4]).is_err());
        // Removing p: f (sharing the most) inherits p's records; g is pointed at f.
        let ops = messages::delete_ops(&s, "p").unwrap();
        s.commit(ops).unwrap();
        assert!(
            s.meta_scan(&meta::message_key("p", b'm', 0)[..4])
                .unwrap()
                .is_empty()
        );
        assert_eq!(load(&s, "f").unwrap().messages, None);
        assert_eq!(load(&s, "g").unwrap().messages.unwrap().session, "f");
        assert_eq!(contents(&s, "f"), f_all);
        assert_eq!(contents(&s, "h"), f_all);
        assert_eq!(contents(&s, "g"), f_all[..3].to_vec());
        let (_, m) = messages::by_id(&s, "g", &p_ids[1]).unwrap();
        assert_eq!(m.seq, 2);
        // Limits: a page of the newest one says more are older.
        let q = Query {
            limit: Some(1),
            ..Query::default()
        };
        let page = messages::list(&s, "h", &q).unwrap();
        assert!(page.more);
        assert_eq!(page.messages[0].seq, 7);
        assert_eq!(messages::visible_count(&s, "h").unwrap(), 7);
    }

    #[test]
    fn fork_depth_is_bounded() {
        let s = MemStore::default();
        let mut m = serde_json::Map::new();
        m.insert("fork_depth".into(), serde_json::json!(2));
        crate::quota::set(&s, &m).unwrap();
        append(&s, "a0", 1);
        for i in 1..=2 {
            let (from, to) = (format!("a{}", i - 1), format!("a{i}"));
            s.commit(fork_ops(&s, &from, &to, None).unwrap()).unwrap();
            append(&s, &to, 1);
        }
        let e = fork_ops(&s, "a2", "a3", None).unwrap_err();
        assert_eq!(e.code(), "quota");
        assert_eq!(contents(&s, "a2").len(), 3);
    }

    #[test]
    fn visible_ranges() {
        assert_eq!(visible(&vec![], 1, 10), vec![[1, 10]]);
        assert_eq!(visible(&vec![[3, 4], [8, 20]], 1, 10), vec![[1, 2], [5, 7]]);
        assert_eq!(visible(&vec![[1, 4]], 1, 4), Vec::<[u64; 2]>::new());
        assert_eq!(visible(&vec![[1, 2]], 5, 6), vec![[5, 6]]);
        assert_eq!(visible(&vec![[6, 9]], 5, 6), vec![[5, 5]]);
        assert_eq!(visible(&vec![], 3, 2), Vec::<[u64; 2]>::new());
        assert_eq!(visible(&vec![[5, u64::MAX]], 1, u64::MAX), vec![[1, 4]]);
    }
}
