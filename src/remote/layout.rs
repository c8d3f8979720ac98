//! Remote key names: the only place the layout of a remote is spelled.
//!
//! Owns: every key under a remote's prefix (see docs/design.md, "Remote tier:
//! formats") and the parsers from a listed key back to what it names.
//!
//! Invariants: content-named keys carry 64 lowercase hex digits, and the parsers
//! refuse anything else (upper case, other lengths, extra path components), so a
//! foreign or hostile object under the prefix is never taken for one of ours.
//! Ref names are validated by the local rules (`refs::validate_ref_name` for
//! branches, `session::validate_session_name` for sessions) when a key is parsed;
//! callers validate names before building keys from them.

use crate::id::PackHash;
use crate::meta::TrackKind;

/// The descriptor object (`{"format":"treefork-remote","version":1,...}`).
pub const DESCRIPTOR: &str = "treefork-remote.json";
/// Descriptor `format` value.
pub const DESCRIPTOR_FORMAT: &str = "treefork-remote";
/// Descriptor `version` value.
pub const DESCRIPTOR_VERSION: u32 = 1;
/// Packs and their indexes.
pub const PACKS_DIR: &str = "packs";
/// Checkpoint records.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// Session log segments.
pub const LOGS_DIR: &str = "logs";
/// Branch refs.
pub const REFS_BRANCHES: &str = "refs/branches";
/// Session refs.
pub const REFS_SESSIONS: &str = "refs/sessions";
/// The remote gc lock.
pub const GC_LOCK: &str = "gc/lock";
/// The packs, logs and checkpoints a remote gc condemned.
pub const GC_CONDEMNED: &str = "gc/condemned";
/// Probe objects written by `remote add` (and removed after).
pub const PROBE_DIR: &str = "probe";
/// Suffix of a pack object.
pub const PACK_SUFFIX: &str = ".tfp";
/// Suffix of a pack index object.
pub const IDX_SUFFIX: &str = ".idx";

/// What a whole-object read fetches: each kind has a size cap derived from its
/// format, and [`Client::get`](super::client::Client::get) reads no further than
/// it (a body that declares or streams more is [`crate::Error::Remote`] naming
/// the key and the cap). Pack records are read by range: a range read takes at
/// most the bytes asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `treefork-remote.json`: a few fields.
    Descriptor,
    /// `refs/branches/*`, `refs/sessions/*`: a session ref carries its record,
    /// info, conversation state and the list of its log segments.
    Ref,
    /// `checkpoints/<C>`: ids, metadata (at most 64 KiB) and a message.
    Checkpoint,
    /// `logs/<H>`: one zstd frame of at most `MAX_SEGMENT_RAW` bytes.
    LogSegment,
    /// `packs/<H>.idx`: 84 bytes per record of a pack.
    PackIdx,
    /// `gc/lock`, `gc/condemned`: the lock and the condemned packs, logs and
    /// checkpoints of a remote gc.
    Gc,
    /// `packs/<H>.tfp` whole (treefork reads packs by range; tools and tests
    /// whole): a pack closes once it reaches `REMOTE_PACK_TARGET`.
    Pack,
}

/// Cap of a [`Body::Descriptor`].
pub const MAX_DESCRIPTOR_BYTES: u64 = 64 << 10;
/// Cap of a [`Body::Ref`].
pub const MAX_REF_BYTES: u64 = 16 << 20;
/// Cap of a [`Body::Checkpoint`].
pub const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;
/// Cap of a [`Body::LogSegment`]: zstd's bound for `MAX_SEGMENT_RAW` input (it
/// grows incompressible data by under 1/128, plus a frame header).
pub const MAX_SEGMENT_BYTES: u64 =
    super::segment::MAX_SEGMENT_RAW + (super::segment::MAX_SEGMENT_RAW >> 7) + (64 << 10);
/// Cap of a [`Body::PackIdx`]: a remote pack closes once it reaches
/// `REMOTE_PACK_TARGET`, so it holds at most that plus one largest record, and
/// every record is at least a record header: that many entries, 84 bytes each
/// (about 176 MiB).
pub const MAX_IDX_BYTES: u64 = {
    let entries = MAX_PACK_BYTES / crate::store::pack::RECORD_HEADER_LEN as u64;
    (super::packidx::IDX_HEADER_LEN + super::packidx::IDX_TRAILER_LEN) as u64
        + entries * super::packidx::IDX_ENTRY_LEN as u64
};
/// Cap of a [`Body::Pack`]: `REMOTE_PACK_TARGET` plus one largest record.
pub const MAX_PACK_BYTES: u64 = super::packidx::REMOTE_PACK_TARGET
    + 2 * crate::store::pack::RECORD_HEADER_LEN as u64
    + crate::store::pack::MAX_OBJECT_LEN as u64;
/// Cap of a [`Body::Gc`].
pub const MAX_GC_BYTES: u64 = 64 << 20;

impl Body {
    /// The most bytes a body of this kind may have.
    pub fn cap(self) -> u64 {
        match self {
            Body::Descriptor => MAX_DESCRIPTOR_BYTES,
            Body::Ref => MAX_REF_BYTES,
            Body::Checkpoint => MAX_CHECKPOINT_BYTES,
            Body::LogSegment => MAX_SEGMENT_BYTES,
            Body::PackIdx => MAX_IDX_BYTES,
            Body::Gc => MAX_GC_BYTES,
            Body::Pack => MAX_PACK_BYTES,
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Body::Descriptor => "descriptor",
            Body::Ref => "ref",
            Body::Checkpoint => "checkpoint record",
            Body::LogSegment => "log segment",
            Body::PackIdx => "pack index",
            Body::Gc => "gc state",
            Body::Pack => "pack",
        }
    }
}

/// Lowercase hex of a 32-byte hash.
pub fn hex32(h: &[u8; 32]) -> String {
    crate::id::hex(h)
}

/// Parse exactly 64 lowercase hex digits.
pub fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (digit(b[2 * i])? << 4) | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// Parse a pack's name (64 lowercase hex digits).
pub fn parse_pack_hash(s: &str) -> Option<PackHash> {
    parse_hex32(s).map(PackHash)
}

/// Whether `s` is 64 lowercase hex digits.
pub fn is_hex64(s: &str) -> bool {
    parse_hex32(s).is_some()
}

/// `packs/<H>.tfp`.
pub fn pack_key(h: &PackHash) -> String {
    format!("{PACKS_DIR}/{}{PACK_SUFFIX}", h.to_hex())
}

/// `packs/<H>.idx`.
pub fn idx_key(h: &PackHash) -> String {
    format!("{PACKS_DIR}/{}{IDX_SUFFIX}", h.to_hex())
}

/// `checkpoints/<C>` (`hex` = the checkpoint id's hex).
pub fn checkpoint_key(hex: &str) -> String {
    format!("{CHECKPOINTS_DIR}/{hex}")
}

/// `logs/<H>` (`h` = the segment's blake3 hex).
pub fn log_key(h: &str) -> String {
    format!("{LOGS_DIR}/{h}")
}

/// `probe/<token>` (`remote add`'s conditional-write probe).
pub fn probe_key(token: &str) -> String {
    format!("{PROBE_DIR}/{token}")
}

/// `refs/branches/<name>` (the name may contain `/`).
pub fn branch_ref_key(name: &str) -> String {
    format!("{REFS_BRANCHES}/{name}")
}

/// `refs/sessions/<name>`.
pub fn session_ref_key(name: &str) -> String {
    format!("{REFS_SESSIONS}/{name}")
}

/// The folder of refs of `kind` (`refs/branches` or `refs/sessions`).
pub fn refs_dir(kind: TrackKind) -> &'static str {
    match kind {
        TrackKind::Branch => REFS_BRANCHES,
        TrackKind::Session => REFS_SESSIONS,
    }
}

/// The key of ref `name` of `kind` ([`branch_ref_key`] or [`session_ref_key`]).
pub fn ref_key(kind: TrackKind, name: &str) -> String {
    match kind {
        TrackKind::Branch => branch_ref_key(name),
        TrackKind::Session => session_ref_key(name),
    }
}

/// What a key under `packs/` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackObject {
    /// `packs/<H>.tfp`.
    Pack(PackHash),
    /// `packs/<H>.idx`.
    Idx(PackHash),
}

/// Strip `dir/` from `key`; what remains must be one path component (no `/`).
fn leaf<'a>(key: &'a str, dir: &str) -> Option<&'a str> {
    let rest = key.strip_prefix(dir)?.strip_prefix('/')?;
    (!rest.contains('/')).then_some(rest)
}

/// Parse a key under `packs/` (as [`Client::list`](super::client::Client::list)
/// returns it, relative to the remote's prefix).
pub fn parse_pack_object(key: &str) -> Option<PackObject> {
    let name = leaf(key, PACKS_DIR)?;
    if let Some(h) = name.strip_suffix(PACK_SUFFIX) {
        return parse_pack_hash(h).map(PackObject::Pack);
    }
    name.strip_suffix(IDX_SUFFIX)
        .and_then(parse_pack_hash)
        .map(PackObject::Idx)
}

/// Parse `checkpoints/<C>` into the checkpoint id.
pub fn parse_checkpoint_key(key: &str) -> Option<[u8; 32]> {
    parse_hex32(leaf(key, CHECKPOINTS_DIR)?)
}

/// Parse `logs/<H>` into the segment hash.
pub fn parse_log_key(key: &str) -> Option<[u8; 32]> {
    parse_hex32(leaf(key, LOGS_DIR)?)
}

/// Parse `refs/branches/<name>` into a valid branch name.
pub fn parse_branch_ref_key(key: &str) -> Option<String> {
    let name = key.strip_prefix(REFS_BRANCHES)?.strip_prefix('/')?;
    crate::refs::validate_ref_name(name).ok()?;
    Some(name.to_string())
}

/// Parse `refs/sessions/<name>` into a valid session name.
pub fn parse_session_ref_key(key: &str) -> Option<String> {
    let name = leaf(key, REFS_SESSIONS)?;
    crate::session::validate_session_name(name).ok()?;
    Some(name.to_string())
}

/// Parse the key of a ref of `kind` into a valid name of that kind.
pub fn parse_ref_key(kind: TrackKind, key: &str) -> Option<String> {
    match kind {
        TrackKind::Branch => parse_branch_ref_key(key),
        TrackKind::Session => parse_session_ref_key(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let h = [0xabu8; 32];
        let p = PackHash(h);
        assert_eq!(parse_pack_object(&pack_key(&p)), Some(PackObject::Pack(p)));
        assert_eq!(parse_pack_object(&idx_key(&p)), Some(PackObject::Idx(p)));
        let hx = hex32(&h);
        assert_eq!(parse_checkpoint_key(&checkpoint_key(&hx)), Some(h));
        assert_eq!(parse_log_key(&log_key(&hx)), Some(h));
        assert_eq!(
            parse_branch_ref_key(&branch_ref_key("team/main")).as_deref(),
            Some("team/main")
        );
        assert_eq!(
            parse_session_ref_key(&session_ref_key("s-1")).as_deref(),
            Some("s-1")
        );
        for (kind, name) in [
            (TrackKind::Branch, "team/main"),
            (TrackKind::Session, "s-1"),
        ] {
            let k = ref_key(kind, name);
            assert!(k.starts_with(&format!("{}/", refs_dir(kind))), "{k}");
            assert_eq!(parse_ref_key(kind, &k).as_deref(), Some(name));
        }
        // A key of one kind is not a ref of the other.
        assert_eq!(
            parse_ref_key(TrackKind::Session, &branch_ref_key("b")),
            None
        );
        assert_eq!(
            parse_ref_key(TrackKind::Branch, &session_ref_key("s")),
            None
        );
    }

    #[test]
    fn parsers_refuse_foreign_keys() {
        let hx = hex32(&[0xab; 32]);
        let upper = hx.to_uppercase();
        for k in [
            format!("packs/{upper}.tfp"),
            format!("packs/{}.tfp", &hx[..63]),
            format!("packs/{hx}.tmp"),
            format!("packs/x/{hx}.idx"),
            format!("packsx/{hx}.idx"),
            format!("packs/{hx}"),
        ] {
            assert_eq!(parse_pack_object(&k), None, "{k}");
        }
        assert_eq!(parse_checkpoint_key(&format!("checkpoints/{upper}")), None);
        assert_eq!(parse_log_key(&format!("logs/{hx}/x")), None);
        assert_eq!(parse_log_key(&format!("logs/g{}", &hx[1..])), None);
        assert_eq!(parse_branch_ref_key("refs/branches/../x"), None);
        assert_eq!(parse_branch_ref_key("refs/branches/"), None);
        assert_eq!(parse_session_ref_key("refs/sessions/a/b"), None);
        assert_eq!(parse_session_ref_key("refs/sessions/.hidden"), None);
    }
}
