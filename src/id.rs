//! Typed identifiers.
//!
//! Owns: the 32-byte content ids (`ChunkId`, `NodeId`, `CheckpointId`), the object
//! store's id `ObjectId` (a chunk's or a node's), a remote pack's name `PackHash`,
//! and the inode number type `Ino`. Content ids are blake3 hashes in separate
//! key-derivation domains so that a chunk and a tree node with the same bytes never
//! share an id.
//! Invariant: an id is only ever constructed from the hash of the exact bytes it names
//! (or parsed from a stored/printed form of such a hash).
//!
//! In serde (records, the wire) an id is its 64-digit lowercase hex string,
//! exactly the form records held before they held typed ids, so stored bytes and
//! answers are unchanged; reading one that is not 64 hex digits is an error that
//! names the type and shows the string. Its JSON schema is that string.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// Key-derivation context for file data chunks.
pub const CHUNK_DOMAIN: &str = "treefork chunk v1";
/// Key-derivation context for tree nodes (directories, file block lists, roots).
pub const NODE_DOMAIN: &str = "treefork tree v1";
/// Key-derivation context for checkpoint records.
pub const CHECKPOINT_DOMAIN: &str = "treefork checkpoint v1";

macro_rules! id_forms {
    ($name:ident) => {
        impl $name {
            /// Full lowercase hex form (64 chars).
            pub fn to_hex(&self) -> String {
                hex(&self.0)
            }
            /// Parse the full hex form.
            pub fn from_hex(s: &str) -> Option<Self> {
                parse_hex32(s).map($name)
            }
            /// Short prefix for logs and human output.
            pub fn short(&self) -> String {
                hex(&self.0[..6])
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.short())
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.short())
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_hex())
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(HexVisitor(stringify!($name))).map($name)
            }
        }
        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                hex_schema()
            }
        }
    };
}

macro_rules! content_id {
    ($(#[$doc:meta])* $name:ident, $domain:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub [u8; 32]);

        impl $name {
            /// Hash `data` in this id's domain.
            pub fn of(data: &[u8]) -> Self {
                let mut h = blake3::Hasher::new_derive_key($domain);
                h.update(data);
                $name(*h.finalize().as_bytes())
            }
        }
        id_forms!($name);
    };
}

/// Reads a content id's hex string (`.0` names the id type for the error).
struct HexVisitor(&'static str);

impl<'de> de::Visitor<'de> for HexVisitor {
    type Value = [u8; 32];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} as 64 hex digits", self.0)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<[u8; 32], E> {
        parse_hex32(s).ok_or_else(|| {
            let shown: String = s.chars().take(80).collect();
            E::custom(format_args!(
                "bad {}: {shown:?} is not 64 hex digits",
                self.0
            ))
        })
    }
}

/// The JSON schema of a content id: its lowercase hex string.
fn hex_schema() -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": "^[0-9a-f]{64}$"
    })
}

content_id!(
    /// Id of a chunk of file data: blake3 (domain [`CHUNK_DOMAIN`]) of its raw bytes.
    ChunkId,
    CHUNK_DOMAIN
);
content_id!(
    /// Id of an encoded tree node: blake3 (domain [`NODE_DOMAIN`]) of its encoding.
    NodeId,
    NODE_DOMAIN
);
content_id!(
    /// Id of a checkpoint: blake3 (domain [`CHECKPOINT_DOMAIN`]) of its canonical record.
    CheckpointId,
    CHECKPOINT_DOMAIN
);

/// Id of an object in the object store: a [`ChunkId`] or a [`NodeId`]. Both kinds
/// live in one store; their hash domains keep them apart, so the store need not
/// know which an id names (a read says the kind it expects and verifies the hash in
/// that kind's domain). The 32 bytes (`.0`) are only touched where an id is encoded:
/// a metadata key, a pack record, a remote pack index entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);
id_forms!(ObjectId);

impl From<ChunkId> for ObjectId {
    fn from(id: ChunkId) -> Self {
        ObjectId(id.0)
    }
}
impl From<NodeId> for ObjectId {
    fn from(id: NodeId) -> Self {
        ObjectId(id.0)
    }
}
impl From<&ChunkId> for ObjectId {
    fn from(id: &ChunkId) -> Self {
        ObjectId(id.0)
    }
}
impl From<&NodeId> for ObjectId {
    fn from(id: &NodeId) -> Self {
        ObjectId(id.0)
    }
}

impl ObjectId {
    /// This object as a chunk id: for the id a store returned for a chunk it was
    /// given (or an id read from a record that names a chunk).
    pub fn chunk(self) -> ChunkId {
        ChunkId(self.0)
    }
    /// This object as a tree node id (see [`chunk`](Self::chunk)).
    pub fn node(self) -> NodeId {
        NodeId(self.0)
    }
}

/// Name of a remote pack: blake3 (no key-derivation domain) of the pack file's
/// bytes. Not an object id: it names a file on a remote (`packs/<hex>.tfp`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PackHash(pub [u8; 32]);
id_forms!(PackHash);

impl PackHash {
    /// The hash of a whole pack file.
    pub fn of(pack: &[u8]) -> Self {
        PackHash(*blake3::hash(pack).as_bytes())
    }
}

/// Inode number. Persistent: stored in directory entries, stable across remounts.
/// `Ino(1)` is the root directory.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Ino(pub u64);

impl Ino {
    /// The workspace root directory.
    pub const ROOT: Ino = Ino(1);
}

impl fmt::Display for Ino {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ino {}", self.0)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    let b = s.as_bytes();
    for i in 0..32 {
        let hi = (b[2 * i] as char).to_digit(16)?;
        let lo = (b[2 * i + 1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// 16 random bytes from `/dev/urandom` (a hash of the time and pid when it cannot
/// be read): names and tokens that must not collide, never secrets.
pub fn random16() -> [u8; 16] {
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = crate::clock::since_epoch();
        let seed = format!("{}-{:?}", std::process::id(), t);
        b.copy_from_slice(&blake3::hash(seed.as_bytes()).as_bytes()[..16]);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_differ() {
        assert_ne!(ChunkId::of(b"x").0, NodeId::of(b"x").0);
    }

    #[test]
    fn hex_round_trip() {
        let id = ChunkId::of(b"hello");
        assert_eq!(ChunkId::from_hex(&id.to_hex()), Some(id));
        assert_eq!(ChunkId::from_hex("zz"), None);
        assert_eq!(id.short().len(), 12);
    }

    #[test]
    fn object_ids_keep_the_bytes_of_what_they_name() {
        let c = ChunkId::of(b"data");
        let n = NodeId::of(b"data");
        let (oc, on) = (ObjectId::from(c), ObjectId::from(&n));
        assert_eq!((oc.0, on.0), (c.0, n.0));
        assert_ne!(
            oc, on,
            "one store holds both kinds; their domains keep them apart"
        );
        assert_eq!((oc.chunk(), on.node()), (c, n));
        assert_eq!(ObjectId::from_hex(&oc.to_hex()), Some(oc));
        assert_eq!(oc.to_hex(), c.to_hex());
        assert_eq!(format!("{on}"), n.short());
        let p = PackHash::of(b"pack bytes");
        assert_eq!(&p.0, blake3::hash(b"pack bytes").as_bytes());
        assert_eq!(PackHash::from_hex(&p.to_hex()), Some(p));
    }

    #[test]
    fn serde_is_the_hex_string() {
        let id = NodeId::of(b"root");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", id.to_hex()));
        assert_eq!(serde_json::from_str::<NodeId>(&json).unwrap(), id);
        let opt: Option<CheckpointId> = serde_json::from_str("null").unwrap();
        assert_eq!(opt, None);
    }

    #[test]
    fn serde_refuses_a_bad_string_and_says_why() {
        for bad in ["\"abc\"", &format!("\"{}\"", "g".repeat(64)), "17"] {
            let e = serde_json::from_str::<CheckpointId>(bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("CheckpointId"), "{bad}: {e}");
        }
        let e = serde_json::from_str::<NodeId>("\"abc\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad NodeId: \"abc\" is not 64 hex digits"),
            "{e}"
        );
    }

    #[test]
    fn schema_is_a_hex_string() {
        let s = serde_json::to_value(schemars::schema_for!(Option<NodeId>)).unwrap();
        let text = s.to_string();
        assert!(text.contains("^[0-9a-f]{64}$"), "{text}");
        let s = serde_json::to_value(schemars::schema_for!(CheckpointId)).unwrap();
        assert_eq!(s["type"], "string");
        assert_eq!(s["pattern"], "^[0-9a-f]{64}$");
    }
}
