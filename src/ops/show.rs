//! `show`: a checkpoint's metadata and the paths it changed (vs its first parent),
//! or with a path, what is at that path in it — without a checkout.
//!
//! The ref is resolved under the session's op lock, which is then released: the
//! rest reads only stored objects named by the checkpoint's root.
//!
//! Contents: a regular file's bytes (holes as zeros) and a symbolic link's target
//! are sent as `{"event":"data","data":<base64>}` lines of at most [`CHUNK`] bytes
//! each, so the daemon holds one chunk at a time whatever the file size; the
//! response then carries the `size` and `blake3` of all the bytes, which the
//! client checks. A directory answers its entries. The path is hostile input: NUL,
//! absolute paths and `..` are refused, and symbolic links inside the tree are
//! never followed (a path through one is refused, naming the link).

use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::restore::clean_path;
use super::views::{CheckpointView, PathChange};
use super::{Target, refctx};
use crate::diff::{self, Tree};
use crate::error::{Error, Result};
use crate::refs::{self, Checkpoint};
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, Content, Kind, Record};

/// Largest number of content bytes in one `data` event.
pub const CHUNK: usize = 256 * 1024;

/// The answer to `show`: a checkpoint (without `path`), or what is at a path in
/// one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ShowAnswer {
    /// `show REF`: the checkpoint and the paths it changed.
    Checkpoint(ShownCheckpoint),
    /// `show REF:PATH`: the file, directory, link or special file at the path.
    Path(ShownPath),
}

/// A checkpoint and the paths it changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShownCheckpoint {
    /// The checkpoint.
    pub checkpoint: CheckpointView,
    /// Paths changed vs its first parent; `null` for a checkpoint without parents.
    pub changes: Option<Vec<PathChange>>,
}

/// What is at a path in a checkpoint (a file's bytes and a link's target were
/// sent before as `{"event":"data","data":<base64>}` lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShownPath {
    /// The checkpoint's id (hex).
    pub checkpoint: String,
    /// The path, workspace-relative.
    pub path: String,
    /// `file`, `dir`, `symlink`, `fifo`, `socket`, `chardev` or `blockdev`.
    pub kind: String,
    /// Permission bits (`perm & 0o7777`).
    pub mode: u32,
    /// A directory's entries (absent for other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<DirEntryView>>,
    /// A file's or link target's byte count (absent for other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The blake3 (hex) of those bytes (absent for other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// One entry of a directory shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DirEntryView {
    /// The name (lossy for names that are not UTF-8).
    pub name: String,
    /// Its kind (as [`ShownPath::kind`]); `null` when its record cannot be found.
    pub kind: Option<String>,
    /// Its size in bytes; `null` when its record cannot be found.
    pub size: Option<u64>,
}

pub(crate) fn run(
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    spec: &str,
    path: Option<&str>,
    events: &mut dyn FnMut(Value),
) -> Result<ShowAnswer> {
    let path = path.map(clean_path).transpose()?;
    let c = refctx::resolve(t, spec)?;
    // The checkpoint is immutable: the rest reads stored objects only.
    drop(op_lock);
    let store = t.session.store().clone();
    match path {
        None => metadata(&*store, &c).map(ShowAnswer::Checkpoint),
        Some(p) => contents(&*store, &c, spec, &p, events).map(ShowAnswer::Path),
    }
}

/// The record, and the changed paths vs the first parent (`null` for a checkpoint
/// without parents).
fn metadata(store: &dyn ObjectStore, c: &Checkpoint) -> Result<ShownCheckpoint> {
    let changes = match c.parent() {
        Some(p) => {
            let parent = refs::load(store, &p)?;
            let list = diff::diff_roots(store, parent.root, c.root)?
                .iter()
                .map(PathChange::from)
                .collect();
            Some(list)
        }
        None => None,
    };
    Ok(ShownCheckpoint {
        checkpoint: CheckpointView::from(c),
        changes,
    })
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::File => "file",
        Kind::Dir => "dir",
        Kind::Symlink => "symlink",
        Kind::Fifo => "fifo",
        Kind::Socket => "socket",
        Kind::CharDev => "chardev",
        Kind::BlockDev => "blockdev",
    }
}

fn contents(
    store: &dyn ObjectStore,
    c: &Checkpoint,
    spec: &str,
    path: &[u8],
    events: &mut dyn FnMut(Value),
) -> Result<ShownPath> {
    let shown = String::from_utf8_lossy(path).into_owned();
    let tree = Tree::load(store, c.root)?;
    if let Some(link) = tree.symlink_prefix(store, path)? {
        return Err(Error::Invalid(format!(
            "path {shown:?} goes through the symbolic link {:?} in {spec}; symbolic links are not followed",
            String::from_utf8_lossy(&link)
        )));
    }
    let r = tree.lookup(store, path)?.ok_or_else(|| {
        Error::NotFound(format!(
            "path {shown:?} does not exist in {spec} ({})",
            c.id.short()
        ))
    })?;
    let mut v = ShownPath {
        checkpoint: c.id.to_hex(),
        path: shown,
        kind: kind_name(r.kind).into(),
        mode: r.attr.perm & 0o7777,
        entries: None,
        size: None,
        blake3: None,
    };
    match r.kind {
        Kind::Dir => v.entries = Some(entries(store, &tree, &r)?),
        Kind::File | Kind::Symlink => {
            let mut out = Stream::new(events);
            match (&r.kind, &r.content) {
                (Kind::Symlink, Content::Bytes(b)) => out.push(b),
                (Kind::File, _) => file_bytes(store, &r, &mut out)?,
                _ => {}
            }
            let (size, hash) = out.finish();
            v.size = Some(size);
            v.blake3 = Some(hash);
        }
        _ => {}
    }
    Ok(v)
}

/// A directory's entries: name, kind, size.
fn entries(store: &dyn ObjectStore, tree: &Tree, r: &Record) -> Result<Vec<DirEntryView>> {
    let Content::Node(id) = r.content else {
        return Ok(Vec::new());
    };
    let dir = crate::dirs::load_dir(store, Some(id))?;
    Ok(dir
        .entries
        .iter()
        .map(|(name, e)| {
            let r = tree.resolve(e);
            DirEntryView {
                name: String::from_utf8_lossy(name).into_owned(),
                kind: r.as_ref().map(|r| kind_name(r.kind).to_string()),
                size: r.as_ref().map(|r| r.attr.size),
            }
        })
        .collect())
}

/// Feed a regular file's bytes (holes and a short last block as zeros, exactly
/// `size` bytes) to `out`, one stored block at a time.
fn file_bytes(store: &dyn ObjectStore, r: &Record, out: &mut Stream<'_>) -> Result<()> {
    let size = r.attr.size;
    if let Content::Node(id) = r.content {
        let loaded = crate::files::load(store, id)?;
        if let Some(d) = loaded.inline {
            out.push(&d[..(size.min(d.len() as u64)) as usize]);
        } else {
            for (idx, chunk) in loaded.blocks {
                let start = idx.saturating_mul(BLOCK_SIZE);
                if start >= size {
                    break;
                }
                out.zeros(start.saturating_sub(out.size));
                let data = store.get(ObjKind::Chunk, &chunk.into())?;
                let n = (data.len() as u64).min(size - start) as usize;
                out.push(&data[..n]);
            }
        }
    }
    out.zeros(size.saturating_sub(out.size));
    Ok(())
}

/// Bytes on their way to the client: buffered into `data` events of at most
/// [`CHUNK`] bytes, counted and hashed.
struct Stream<'a> {
    events: &'a mut dyn FnMut(Value),
    buf: Vec<u8>,
    hash: blake3::Hasher,
    /// Bytes pushed so far (sent or buffered).
    size: u64,
}

impl<'a> Stream<'a> {
    fn new(events: &'a mut dyn FnMut(Value)) -> Stream<'a> {
        Stream {
            events,
            buf: Vec::with_capacity(CHUNK),
            hash: blake3::Hasher::new(),
            size: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.size += data.len() as u64;
        while !data.is_empty() {
            let n = (CHUNK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.buf.len() == CHUNK {
                self.flush();
            }
        }
    }

    fn zeros(&mut self, mut n: u64) {
        const Z: [u8; 4096] = [0; 4096];
        while n > 0 {
            let k = n.min(Z.len() as u64) as usize;
            self.push(&Z[..k]);
            n -= k as u64;
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        self.hash.update(&self.buf);
        (self.events)(json!({"event": "data", "data": crate::control::b64_encode(&self.buf)}));
        self.buf.clear();
    }

    /// Send what is left; the byte count and blake3 (hex) of everything sent.
    fn finish(mut self) -> (u64, String) {
        self.flush();
        (self.size, self.hash.finalize().to_hex().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_chunks_count_and_hash() {
        let mut got: Vec<usize> = Vec::new();
        let mut ev = |v: Value| got.push(v["data"].as_str().unwrap().len());
        let mut s = Stream::new(&mut ev);
        s.push(&[1; 100]);
        s.zeros(CHUNK as u64 * 2);
        let (size, hash) = s.finish();
        let mut all = vec![1u8; 100];
        all.resize(100 + CHUNK * 2, 0);
        assert_eq!(size, all.len() as u64);
        assert_eq!(hash, blake3::hash(&all).to_hex().to_string());
        let enc = |n: usize| n.div_ceil(3) * 4;
        assert_eq!(got, vec![enc(CHUNK), enc(CHUNK), enc(100)]);
    }
}
