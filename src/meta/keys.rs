//! The key layout of the metadata database: the only place a key prefix is spelled.
//!
//! Owns: one typed builder and one parser per record kind, and the byte ranges
//! that bounded scans ([`super::MetaDb::range`]) walk.
//! Keys are a one-byte-plus-slash prefix followed by the key body:
//!
//! | prefix | body | record |
//! |---|---|---|
//! | `m/format` | — | format marker |
//! | `m/limits` | — | the store's quotas (owned by `quota`) |
//! | `m/gen` | — | the generation of the last journaled batch, u64 BE (owned by `meta::journaled`) |
//! | `o/` | object id, 32 bytes | object index entry (owned by `store`) |
//! | `s/` | session name | session record (owned by `session`) |
//! | `c/` | checkpoint id, 32 bytes | checkpoint record (owned by `refs`) |
//! | `r/` | branch name | ref (owned by `refs`) |
//! | `l/` | a whole original key | record moved aside by `fsck --repair` |
//! | `p/` | session name, NUL, sequence number (u64 BE) | operation record (owned by `oplog`) |
//! | `x/` | session name, NUL, sequence number (u64 BE), one tag byte | an operation's attachment, e.g. captured output (owned by `oplog`) |
//! | `i/` | session name | session info record (owned by `lifecycle`) |
//! | `t/` | session name, NUL, workspace path | a touched file (owned by `lifecycle::touched`) |
//! | `g/` | session name, NUL, stream tag byte, sequence number (u64 BE) | a conversation message (owned by `messages`) |
//! | `k/` | session name, NUL, message id | which stream and sequence number a message id has (owned by `messages`) |
//! | `v/` | session name | the conversation's hidden ranges, set by `rewind` (owned by `messages`) |
//! | `f/` | session name | the conversations a fork shares: per stream, the session and last sequence number it refers to (owned by `messages::share`) |
//! | `u/` | session name | bytes and count of the conversation records a session stored itself, for its quota (owned by `messages::share`) |
//! | `y/` | remote name | a remote's configuration (owned by `remote::config`) |
//! | `q/` | remote name, NUL, `b` or `s`, NUL, ref name | a remote tracking ref: a remote branch or session as last seen (owned by `refs::tracking`) |
//! | `a/` | session name, NUL, branch name | a branch given to a session: created in it or shared with it by the user (owned by `visibility`) |
//! | `h/` | session name, NUL, session name | a session created by another one: a fork or an experiment run (owned by `visibility`) |
//! | `b/` | session name, NUL, bisect id | the state of a bisect's search (owned by `ops::bisect::state`) |
//!
//! Invariants: no prefix is a prefix of another, so a prefix range holds exactly one
//! record kind; integers inside keys, when added, are big-endian so that sled's byte
//! order is numeric order. Parsers return `None` for a key of another kind or a
//! malformed body (a wrong-length id); they never panic.

use crate::id::{CheckpointId, ObjectId};

/// Key of the format marker written when a store is created.
pub const FORMAT_KEY: &[u8] = b"m/format";
/// Value of the format marker.
pub const FORMAT_VALUE: &[u8] = b"treefork-meta v1";
/// Key of the generation of the last batch that changed a journaled key (u64 BE;
/// see `meta::journaled`).
pub const GEN_KEY: &[u8] = b"m/gen";
/// Key of the store's quotas (`crate::quota`).
pub const LIMITS_KEY: &[u8] = b"m/limits";
/// Prefix of object-index keys.
pub const OBJECT_PREFIX: &[u8] = b"o/";
/// Prefix of session-record keys.
pub const SESSION_PREFIX: &[u8] = b"s/";
/// Prefix of checkpoint keys.
pub const CHECKPOINT_PREFIX: &[u8] = b"c/";
/// Prefix of ref (branch) keys.
pub const REF_PREFIX: &[u8] = b"r/";
/// Prefix of records moved aside by a repair (`l/` + the original key).
pub const LOST_PREFIX: &[u8] = b"l/";

/// Prefix of operation-log keys.
pub const OP_PREFIX: &[u8] = b"p/";
/// Prefix of operation attachment keys.
pub const ATTACH_PREFIX: &[u8] = b"x/";
/// Prefix of session info keys.
pub const INFO_PREFIX: &[u8] = b"i/";
/// Prefix of touched-file keys.
pub const TOUCHED_PREFIX: &[u8] = b"t/";

/// Prefix of conversation message keys.
pub const MESSAGE_PREFIX: &[u8] = b"g/";
/// Prefix of message id index keys.
pub const MESSAGE_ID_PREFIX: &[u8] = b"k/";
/// Prefix of conversation visibility keys.
pub const CONVERSATION_PREFIX: &[u8] = b"v/";

/// Prefix of shared-conversation (fork base) keys.
pub const CONVERSATION_BASE_PREFIX: &[u8] = b"f/";
/// Prefix of conversation usage keys.
pub const CONVERSATION_USAGE_PREFIX: &[u8] = b"u/";

/// Prefix of remote configuration keys.
pub const REMOTE_PREFIX: &[u8] = b"y/";
/// Prefix of remote tracking ref keys.
pub const TRACKING_PREFIX: &[u8] = b"q/";

/// Whether `key` has a second copy in the metadata journal: every key except the
/// object index (the packs rebuild it) and the generation (each record carries its own).
pub fn journaled(key: &[u8]) -> bool {
    !key.starts_with(OBJECT_PREFIX) && key != GEN_KEY
}

/// Every record kind a key can be of, by prefix, with the plural naming it in a
/// repair report ([`record_kind`]).
const KINDS: &[(&[u8], &str)] = &[
    (b"m/", "store settings"),
    (OBJECT_PREFIX, "index entries"),
    (SESSION_PREFIX, "sessions"),
    (CHECKPOINT_PREFIX, "checkpoints"),
    (REF_PREFIX, "branches"),
    (LOST_PREFIX, "moved-aside records"),
    (OP_PREFIX, "operations"),
    (ATTACH_PREFIX, "operation attachments"),
    (INFO_PREFIX, "session infos"),
    (TOUCHED_PREFIX, "touched files"),
    (MESSAGE_PREFIX, "messages"),
    (MESSAGE_ID_PREFIX, "message ids"),
    (CONVERSATION_PREFIX, "conversation ranges"),
    (CONVERSATION_BASE_PREFIX, "shared conversations"),
    (CONVERSATION_USAGE_PREFIX, "conversation usages"),
    (REMOTE_PREFIX, "remotes"),
    (TRACKING_PREFIX, "tracking refs"),
    (GRANT_PREFIX, "branch grants"),
    (LINEAGE_PREFIX, "lineage links"),
    (BISECT_PREFIX, "bisect searches"),
];

/// The kind of record `key` is, as a plural noun ("sessions", "branches", ...;
/// "other records" for a key of no known prefix).
pub fn record_kind(key: &[u8]) -> &'static str {
    KINDS
        .iter()
        .find(|(p, _)| key.starts_with(p))
        .map_or("other records", |(_, k)| k)
}

/// The prefix of every record kind, in key order (a salvage reads them one by one).
pub fn kind_prefixes() -> impl Iterator<Item = &'static [u8]> {
    KINDS.iter().map(|(p, _)| *p)
}

/// Which kind of remote ref a tracking key names (`b` or `s` in the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrackKind {
    /// A remote branch (`refs/branches/<name>`).
    Branch,
    /// A pushed session (`refs/sessions/<name>`).
    Session,
}

impl TrackKind {
    /// The byte spelling it in a key.
    pub fn byte(self) -> u8 {
        match self {
            TrackKind::Branch => b'b',
            TrackKind::Session => b's',
        }
    }

    /// The kind a key byte spells.
    pub fn from_byte(b: u8) -> Option<TrackKind> {
        match b {
            b'b' => Some(TrackKind::Branch),
            b's' => Some(TrackKind::Session),
            _ => None,
        }
    }

    /// `"branch"` or `"session"` (the `kind` of the JSON records).
    pub fn as_str(self) -> &'static str {
        match self {
            TrackKind::Branch => "branch",
            TrackKind::Session => "session",
        }
    }
}

/// Key of remote `name`'s configuration.
pub fn remote_key(name: &str) -> Vec<u8> {
    key(REMOTE_PREFIX, name.as_bytes())
}

/// The remote name of a configuration key (`None` if not UTF-8).
pub fn remote_name(key: &[u8]) -> Option<&str> {
    name_body(REMOTE_PREFIX, key)
}

/// Key of the tracking ref of `remote`'s ref `name` of kind `kind` (remote names
/// never hold NUL; ref names may hold `/`).
pub fn tracking_key(remote: &str, kind: TrackKind, name: &str) -> Vec<u8> {
    let mut k = key(TRACKING_PREFIX, remote.as_bytes());
    k.push(0);
    k.push(kind.byte());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

/// (remote, kind, ref name) of a tracking key.
pub fn tracking_parts(key: &[u8]) -> Option<(&str, TrackKind, &str)> {
    let body = key.strip_prefix(TRACKING_PREFIX)?;
    let nul = body.iter().position(|&b| b == 0)?;
    let rest = &body[nul + 1..];
    let (&kind, rest) = rest.split_first()?;
    let name = rest.strip_prefix(&[0u8][..])?;
    Some((
        std::str::from_utf8(&body[..nul]).ok()?,
        TrackKind::from_byte(kind)?,
        std::str::from_utf8(name).ok()?,
    ))
}

/// Key of message `seq` of stream `tag` of `session`.
pub fn message_key(session: &str, tag: u8, seq: u64) -> Vec<u8> {
    let mut k = key(MESSAGE_PREFIX, session.as_bytes());
    k.push(0);
    k.push(tag);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// (session, stream tag, sequence number) of a message key.
pub fn message_parts(key: &[u8]) -> Option<(&str, u8, u64)> {
    let body = key.strip_prefix(MESSAGE_PREFIX)?;
    let nul = body.iter().position(|&b| b == 0)?;
    let rest = &body[nul + 1..];
    let (&tag, seq) = rest.split_first()?;
    let seq = u64::from_be_bytes(seq.try_into().ok()?);
    Some((std::str::from_utf8(&body[..nul]).ok()?, tag, seq))
}

/// Key of the index entry of message id `id` of `session`.
pub fn message_id_key(session: &str, id: &str) -> Vec<u8> {
    let mut k = key(MESSAGE_ID_PREFIX, session.as_bytes());
    k.push(0);
    k.extend_from_slice(id.as_bytes());
    k
}

/// Prefix of branch grants (`a/<session>\0<branch>`).
pub const GRANT_PREFIX: &[u8] = b"a/";
/// Prefix of session lineage records (`f/<parent>\0<child>`).
pub const LINEAGE_PREFIX: &[u8] = b"h/";

/// Prefix of bisect search states (`b/<session>\0<bisect id>`).
pub const BISECT_PREFIX: &[u8] = b"b/";

/// Key of the search state of bisect `id` of `session`.
pub fn bisect_key(session: &str, id: &str) -> Vec<u8> {
    pair_key(BISECT_PREFIX, session, id)
}

/// The prefix of every bisect search state of `session`.
pub fn bisect_session_prefix(session: &str) -> Vec<u8> {
    let mut k = key(BISECT_PREFIX, session.as_bytes());
    k.push(0);
    k
}

/// The session and bisect id of a bisect state key.
pub fn bisect_parts(key: &[u8]) -> Option<(&str, &str)> {
    pair_second(BISECT_PREFIX, key)
}

fn pair_key(prefix: &[u8], a: &str, b: &str) -> Vec<u8> {
    let mut k = key(prefix, a.as_bytes());
    k.push(0);
    k.extend_from_slice(b.as_bytes());
    k
}

fn pair_second<'a>(prefix: &[u8], key: &'a [u8]) -> Option<(&'a str, &'a str)> {
    let body = key.strip_prefix(prefix)?;
    let nul = body.iter().position(|&b| b == 0)?;
    Some((
        std::str::from_utf8(&body[..nul]).ok()?,
        std::str::from_utf8(&body[nul + 1..]).ok()?,
    ))
}

/// Key of the grant of `branch` to `session`.
pub fn grant_key(session: &str, branch: &str) -> Vec<u8> {
    pair_key(GRANT_PREFIX, session, branch)
}

/// The session and branch of a grant key.
pub fn grant_parts(key: &[u8]) -> Option<(&str, &str)> {
    pair_second(GRANT_PREFIX, key)
}

/// Key of the record that session `parent` created session `child`.
pub fn lineage_key(parent: &str, child: &str) -> Vec<u8> {
    pair_key(LINEAGE_PREFIX, parent, child)
}

/// The parent and child of a lineage key.
pub fn lineage_parts(key: &[u8]) -> Option<(&str, &str)> {
    pair_second(LINEAGE_PREFIX, key)
}

/// Key of `session`'s conversation visibility record.
pub fn conversation_key(session: &str) -> Vec<u8> {
    key(CONVERSATION_PREFIX, session.as_bytes())
}

/// Key of `session`'s shared-conversation record (its fork bases).
pub fn conversation_base_key(session: &str) -> Vec<u8> {
    key(CONVERSATION_BASE_PREFIX, session.as_bytes())
}

/// The session name of a shared-conversation key (`None` if not UTF-8).
pub fn conversation_base_session(key: &[u8]) -> Option<&str> {
    name_body(CONVERSATION_BASE_PREFIX, key)
}

/// Key of `session`'s conversation usage record.
pub fn conversation_usage_key(session: &str) -> Vec<u8> {
    key(CONVERSATION_USAGE_PREFIX, session.as_bytes())
}

/// Key of a session's info record.
pub fn info_key(session: &str) -> Vec<u8> {
    key(INFO_PREFIX, session.as_bytes())
}

/// The session name of an info key (`None` if not UTF-8).
pub fn info_session(key: &[u8]) -> Option<&str> {
    name_body(INFO_PREFIX, key)
}

/// Key of a touched path of a session.
pub fn touched_key(session: &str, path: &[u8]) -> Vec<u8> {
    let mut k = key(TOUCHED_PREFIX, session.as_bytes());
    k.push(0);
    k.extend_from_slice(path);
    k
}

/// The path of a touched-file key.
pub fn touched_path(key: &[u8]) -> Option<&[u8]> {
    let body = key.strip_prefix(TOUCHED_PREFIX)?;
    let nul = body.iter().position(|&b| b == 0)?;
    Some(&body[nul + 1..])
}

fn key(prefix: &[u8], body: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + body.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(body);
    k
}

/// The 32 id bytes after `prefix` (the one place a key's id body is decoded).
fn id_body(prefix: &[u8], key: &[u8]) -> Option<[u8; 32]> {
    key.strip_prefix(prefix)?.try_into().ok()
}

fn name_body<'a>(prefix: &[u8], key: &'a [u8]) -> Option<&'a str> {
    std::str::from_utf8(key.strip_prefix(prefix)?).ok()
}

/// Key of an object's index entry.
pub fn object_key(id: &ObjectId) -> Vec<u8> {
    key(OBJECT_PREFIX, &id.0)
}

/// The object id of an index key.
pub fn object_id(key: &[u8]) -> Option<ObjectId> {
    id_body(OBJECT_PREFIX, key).map(ObjectId)
}

/// Key of a session record.
pub fn session_key(name: &str) -> Vec<u8> {
    key(SESSION_PREFIX, name.as_bytes())
}

/// The session name of a session-record key (`None` if not UTF-8).
pub fn session_name(key: &[u8]) -> Option<&str> {
    name_body(SESSION_PREFIX, key)
}

/// Key of a checkpoint record.
pub fn checkpoint_key(id: &CheckpointId) -> Vec<u8> {
    key(CHECKPOINT_PREFIX, &id.0)
}

/// The checkpoint id of a checkpoint key.
pub fn checkpoint_id(key: &[u8]) -> Option<CheckpointId> {
    id_body(CHECKPOINT_PREFIX, key).map(CheckpointId)
}

/// Key of a ref (branch).
pub fn ref_key(name: &str) -> Vec<u8> {
    key(REF_PREFIX, name.as_bytes())
}

/// The branch name of a ref key (`None` if not UTF-8).
pub fn ref_name(key: &[u8]) -> Option<&str> {
    name_body(REF_PREFIX, key)
}

/// Key under which a repair keeps the record that was at `original`.
pub fn lost_key(original: &[u8]) -> Vec<u8> {
    key(LOST_PREFIX, original)
}

/// The original key of a moved-aside record.
pub fn lost_original(key: &[u8]) -> Option<&[u8]> {
    key.strip_prefix(LOST_PREFIX)
}

fn session_seq_key(prefix: &[u8], session: &str, seq: u64) -> Vec<u8> {
    let mut k = key(prefix, session.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// Key of operation `seq` of `session` (session names never hold NUL).
pub fn op_key(session: &str, seq: u64) -> Vec<u8> {
    session_seq_key(OP_PREFIX, session, seq)
}

/// (session, sequence number) of an operation key.
pub fn op_parts(key: &[u8]) -> Option<(&str, u64)> {
    let body = key.strip_prefix(OP_PREFIX)?;
    let nul = body.iter().position(|&b| b == 0)?;
    let seq = u64::from_be_bytes(body[nul + 1..].try_into().ok()?);
    Some((std::str::from_utf8(&body[..nul]).ok()?, seq))
}

/// Key of attachment `tag` of operation `seq` of `session`.
pub fn attach_key(session: &str, seq: u64, tag: u8) -> Vec<u8> {
    let mut k = session_seq_key(ATTACH_PREFIX, session, seq);
    k.push(tag);
    k
}

/// (session, operation sequence number, tag) of an attachment key.
pub fn attach_parts(key: &[u8]) -> Option<(&str, u64, u8)> {
    let body = key.strip_prefix(ATTACH_PREFIX)?;
    let nul = body.iter().position(|&b| b == 0)?;
    let rest = &body[nul + 1..];
    if rest.len() != 9 {
        return None;
    }
    let seq = u64::from_be_bytes(rest[..8].try_into().ok()?);
    Some((std::str::from_utf8(&body[..nul]).ok()?, seq, rest[8]))
}

/// A half-open key range `[start, end)`; `end: None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// First key in the range.
    pub start: Vec<u8>,
    /// First key after the range.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> KeyRange {
        KeyRange {
            start: prefix.to_vec(),
            end: prefix_end(prefix),
        }
    }

    /// Whether `k` lies in the range.
    pub fn contains(&self, k: &[u8]) -> bool {
        k >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| k < e)
    }

    /// Every operation of `session`.
    pub fn ops(session: &str) -> KeyRange {
        let mut p = key(OP_PREFIX, session.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Operations of `session` numbered `from` and up.
    pub fn ops_from(session: &str, from: u64) -> KeyRange {
        KeyRange {
            start: op_key(session, from),
            end: KeyRange::ops(session).end,
        }
    }

    /// Operations of `session` numbered below `end`.
    pub fn ops_before(session: &str, end: u64) -> KeyRange {
        KeyRange {
            start: KeyRange::ops(session).start,
            end: Some(op_key(session, end)),
        }
    }

    /// Every branch grant of `session`.
    pub fn grants(session: &str) -> KeyRange {
        let mut p = key(GRANT_PREFIX, session.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Every session `parent` created.
    pub fn children(parent: &str) -> KeyRange {
        let mut p = key(LINEAGE_PREFIX, parent.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Every touched-file key of `session`.
    pub fn touched(session: &str) -> KeyRange {
        let mut p = key(TOUCHED_PREFIX, session.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Every tracking ref of `remote`, or only those of `kind`.
    pub fn tracking(remote: &str, kind: Option<TrackKind>) -> KeyRange {
        let mut p = key(TRACKING_PREFIX, remote.as_bytes());
        p.push(0);
        if let Some(k) = kind {
            p.push(k.byte());
            p.push(0);
        }
        KeyRange::prefix(&p)
    }

    /// Every message of stream `tag` of `session`.
    pub fn messages(session: &str, tag: u8) -> KeyRange {
        let mut p = key(MESSAGE_PREFIX, session.as_bytes());
        p.push(0);
        p.push(tag);
        KeyRange::prefix(&p)
    }

    /// Messages `from..=to` of stream `tag` of `session` (empty when `from > to`).
    pub fn message_seqs(session: &str, tag: u8, from: u64, to: u64) -> KeyRange {
        let start = message_key(session, tag, from);
        let end = match to.checked_add(1) {
            Some(n) if from <= to => Some(message_key(session, tag, n)),
            Some(_) => Some(start.clone()),
            None => KeyRange::messages(session, tag).end,
        };
        KeyRange { start, end }
    }

    /// Every message of every stream of `session`.
    pub fn all_messages(session: &str) -> KeyRange {
        let mut p = key(MESSAGE_PREFIX, session.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Every message id index entry of `session`.
    pub fn message_ids(session: &str) -> KeyRange {
        let mut p = key(MESSAGE_ID_PREFIX, session.as_bytes());
        p.push(0);
        KeyRange::prefix(&p)
    }

    /// Every attachment of `session`'s operations, or of one of them.
    pub fn attachments(session: &str, seq: Option<u64>) -> KeyRange {
        match seq {
            Some(n) => KeyRange::prefix(&session_seq_key(ATTACH_PREFIX, session, n)),
            None => {
                let mut p = key(ATTACH_PREFIX, session.as_bytes());
                p.push(0);
                KeyRange::prefix(&p)
            }
        }
    }

    /// Checkpoint keys whose id, written in hex, starts with `hex` (any length up to
    /// 64, odd lengths included; case-insensitive). `None` if `hex` is not hex or
    /// longer than an id.
    pub fn checkpoint_hex(hex: &str) -> Option<KeyRange> {
        hex_prefix_range(CHECKPOINT_PREFIX, hex)
    }
}

/// The smallest key greater than every key starting with `prefix` (`None` if there is
/// none: the prefix is empty or all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Keys `prefix` + a binary body whose hex spelling starts with `hex`.
///
/// An even number of digits is a byte prefix. An odd one fixes the high nibble of
/// the next byte: `abc` is the bytes `ab c0` up to (excluding) `ab d0`.
fn hex_prefix_range(prefix: &[u8], hex: &str) -> Option<KeyRange> {
    if hex.len() > 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let nib = |b: u8| (b as char).to_digit(16).unwrap() as u8;
    let digits: Vec<u8> = hex.bytes().map(nib).collect();
    let mut start = prefix.to_vec();
    for pair in digits.chunks(2) {
        start.push(match pair {
            [hi, lo] => hi << 4 | lo,
            [hi] => hi << 4,
            _ => unreachable!(),
        });
    }
    let end = if digits.len() % 2 == 1 {
        // Exclusive end of the high nibble: the next nibble value, with carry.
        let mut e = start.clone();
        let last = e.pop().unwrap();
        if last >= 0xf0 {
            prefix_end(&e)
        } else {
            e.push(last + 0x10);
            Some(e)
        }
    } else {
        prefix_end(&start)
    };
    Some(KeyRange { start, end })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn builders_and_parsers_round_trip() {
        let id = ObjectId([7u8; 32]);
        let cid = CheckpointId(id.0);
        assert_eq!(object_key(&id), [b"o/".as_slice(), &id.0].concat());
        assert_eq!(object_id(&object_key(&id)), Some(id));
        assert_eq!(checkpoint_id(&checkpoint_key(&cid)), Some(cid));
        assert_eq!(session_name(&session_key("work")), Some("work"));
        assert_eq!(ref_name(&ref_key("auto/x")), Some("auto/x"));
        assert_eq!(
            lost_original(&lost_key(b"c/abc")),
            Some(b"c/abc".as_slice())
        );
        // Another kind's key, or a malformed body, parses to None.
        assert_eq!(object_id(&checkpoint_key(&cid)), None);
        assert_eq!(checkpoint_id(b"c/short"), None);
        assert_eq!(checkpoint_id(&[b"c/".as_slice(), &[0; 33]].concat()), None);
        assert_eq!(session_name(&ref_key("x")), None);
        assert_eq!(session_name(b"s/\xff"), None);
    }

    #[test]
    fn prefixes_are_disjoint() {
        let all = [
            FORMAT_KEY,
            OBJECT_PREFIX,
            SESSION_PREFIX,
            CHECKPOINT_PREFIX,
            REF_PREFIX,
            LOST_PREFIX,
            OP_PREFIX,
            ATTACH_PREFIX,
            INFO_PREFIX,
            TOUCHED_PREFIX,
            MESSAGE_PREFIX,
            MESSAGE_ID_PREFIX,
            CONVERSATION_PREFIX,
            REMOTE_PREFIX,
            TRACKING_PREFIX,
            GRANT_PREFIX,
            LINEAGE_PREFIX,
            CONVERSATION_BASE_PREFIX,
            CONVERSATION_USAGE_PREFIX,
        ];
        for (i, a) in all.iter().enumerate() {
            for (j, b) in all.iter().enumerate() {
                if i != j {
                    assert!(!a.starts_with(b), "{a:?} starts with {b:?}");
                }
            }
        }
    }

    /// Every prefix has a kind in the repair report, and the journal covers every
    /// key but the object index and the generation.
    #[test]
    fn every_prefix_has_a_kind_and_only_the_index_is_unjournaled() {
        let prefixes: Vec<&[u8]> = kind_prefixes().collect();
        for p in [
            SESSION_PREFIX,
            GRANT_PREFIX,
            LINEAGE_PREFIX,
            TRACKING_PREFIX,
        ] {
            assert!(prefixes.contains(&p));
        }
        assert_eq!(record_kind(&ref_key("main")), "branches");
        assert_eq!(record_kind(&session_key("s")), "sessions");
        assert_eq!(record_kind(b"z/unknown"), "other records");
        assert!(!journaled(&object_key(&ObjectId([1; 32]))));
        assert!(!journaled(GEN_KEY));
        assert!(journaled(FORMAT_KEY) && journaled(LIMITS_KEY));
        assert!(journaled(&op_key("s", 1)) && journaled(&touched_key("s", b"a")));
    }

    #[test]
    fn message_keys_round_trip_and_order() {
        let k = message_key("s", b'm', 258);
        assert_eq!(message_parts(&k), Some(("s", b'm', 258)));
        assert!(message_key("s", b'm', 255) < message_key("s", b'm', 256));
        assert!(KeyRange::messages("s", b'm').contains(&k));
        assert!(!KeyRange::messages("s", b't').contains(&k));
        assert!(!KeyRange::messages("s2", b'm').contains(&k));
        assert!(KeyRange::all_messages("s").contains(&k));
        assert!(KeyRange::message_ids("s").contains(&message_id_key("s", "x")));
        assert_eq!(message_parts(b"g/s\0m12"), None);
    }

    #[test]
    fn remote_keys_round_trip() {
        assert_eq!(remote_name(&remote_key("origin")), Some("origin"));
        assert_eq!(remote_name(&ref_key("origin")), None);
        let k = tracking_key("origin", TrackKind::Branch, "team/main");
        assert_eq!(
            tracking_parts(&k),
            Some(("origin", TrackKind::Branch, "team/main"))
        );
        let s = tracking_key("origin", TrackKind::Session, "s1");
        assert_eq!(
            tracking_parts(&s),
            Some(("origin", TrackKind::Session, "s1"))
        );
        assert!(KeyRange::tracking("origin", None).contains(&k));
        assert!(KeyRange::tracking("origin", None).contains(&s));
        assert!(KeyRange::tracking("origin", Some(TrackKind::Branch)).contains(&k));
        assert!(!KeyRange::tracking("origin", Some(TrackKind::Branch)).contains(&s));
        // A remote whose name extends another's is not in its range.
        assert!(!KeyRange::tracking("o", None).contains(&k));
        assert_eq!(tracking_parts(b"q/origin\0x\0n"), None);
        assert_eq!(tracking_parts(b"q/origin\0b"), None);
        assert_eq!(tracking_parts(b"q/origin"), None);
    }

    #[test]
    fn hex_ranges() {
        let r = KeyRange::checkpoint_hex("abc").unwrap();
        assert_eq!(r.start, b"c/\xab\xc0");
        assert_eq!(r.end.as_deref(), Some(b"c/\xab\xd0".as_slice()));
        let r = KeyRange::checkpoint_hex("ABcd").unwrap();
        assert_eq!(r.start, b"c/\xab\xcd");
        assert_eq!(r.end.as_deref(), Some(b"c/\xab\xce".as_slice()));
        // Carries: a last nibble or byte of f rolls over into the byte before.
        let r = KeyRange::checkpoint_hex("aff").unwrap();
        assert_eq!(r.start, b"c/\xaf\xf0");
        assert_eq!(r.end.as_deref(), Some(b"c/\xb0".as_slice()));
        let r = KeyRange::checkpoint_hex("ffff").unwrap();
        assert_eq!(r.end.as_deref(), Some(b"c0".as_slice()));
        let r = KeyRange::checkpoint_hex("").unwrap();
        assert_eq!(r, KeyRange::prefix(b"c/"));
        assert!(KeyRange::checkpoint_hex("abg").is_none());
        assert!(KeyRange::checkpoint_hex(&"a".repeat(65)).is_none());
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
    }

    proptest! {
        /// A hex-prefix range holds exactly the checkpoint keys whose hex id starts
        /// with the prefix, whatever its length or case.
        #[test]
        fn hex_range_is_exact(
            id in any::<[u8; 32]>(),
            other in any::<[u8; 32]>(),
            len in 0usize..=64,
            upper in any::<bool>(),
        ) {
            let hex = crate::id::hex(&id);
            let mut p = hex[..len].to_string();
            if upper {
                p = p.to_ascii_uppercase();
            }
            let r = KeyRange::checkpoint_hex(&p).unwrap();
            prop_assert!(r.contains(&checkpoint_key(&CheckpointId(id))));
            let o = crate::id::hex(&other);
            prop_assert_eq!(r.contains(&checkpoint_key(&CheckpointId(other))), o.starts_with(&hex[..len]));
            // Nothing of another kind falls in it.
            prop_assert!(!r.contains(&ref_key(&hex)));
            prop_assert!(!r.contains(&object_key(&ObjectId(id))));
        }
    }
}
