//! The walk from tree roots to every node and chunk they reference ([`Walk`]),
//! for gc, fsck, hydrate and `session show`.
//!
//! Invariants: iterative (no recursion limit on deep trees); each node is visited
//! once (dedup makes the graph a DAG); never aborts: an unreadable node is a
//! [`Problem`] with the path it was reached by, and the walk goes on; an id on the
//! [`Boundary`] is recorded as reached and never read or descended into.

use std::collections::HashSet;
use std::sync::Arc;

use super::Problem;
use crate::error::Result;
use crate::id::{ChunkId, NodeId, ObjectId};
use crate::store::Kind as ObjKind;
use crate::tree::{
    AnyDir, BlockLeaf, Content, Entry, FileNode, Kind, NODE_MAGIC, Record, RootNode,
};

/// How chunks are treated by a [`Walk`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChunkCheck {
    /// Only record chunk ids (gc).
    Mark,
    /// Also read and verify every chunk (fsck).
    Verify,
}

/// Reads an object, verifying its hash (fsck passes an uncached reader).
pub type Reader<'a> = &'a (dyn Fn(ObjKind, &ObjectId) -> Result<Arc<Vec<u8>>> + Sync);

enum Item {
    Root(NodeId),
    Record(Record),
    Dir(NodeId),
    File(NodeId),
    /// A block-map leaf ('B'), with its leaf number and file size when reached
    /// through its map.
    Leaf(NodeId, Option<(u64, u64)>),
    Any(NodeId),
}

/// The walk's work list: (path reached by, item).
type Stack = Vec<(String, Item)>;

/// Says whether an object id is on a walk's boundary: reached, but neither read
/// nor descended into (the remote tier: objects a remote holds, with everything
/// under them).
pub type Boundary<'a> = &'a (dyn Fn(&ObjectId) -> bool + Sync);

/// Objects stored elsewhere and absent here, as the caller of gc or fsck knows
/// them: those walks stop at such an object (counted, not read, not a problem) and,
/// given one, read locally only. gc and fsck never find out for themselves (that
/// would import the remote tier): the daemon and the CLI pass the remote tier's
/// `crate::remote::held::Held`; `None` means nothing is held elsewhere.
pub trait HeldElsewhere: Sync {
    /// Whether `id` is held elsewhere and not stored here.
    fn is_held(&self, id: &ObjectId) -> bool;
}

/// A walk over trees, accumulating reached objects and problems.
pub struct Walk<'a> {
    read: Reader<'a>,
    chunks_mode: ChunkCheck,
    boundary: Option<Boundary<'a>>,
    /// Reached ids (nodes and chunks) that were on the boundary (also in
    /// `nodes`/`chunks`).
    pub at_boundary: HashSet<ObjectId>,
    /// Node ids reached (read and decoded successfully or not).
    pub nodes: HashSet<ObjectId>,
    /// Chunk ids reached.
    pub chunks: HashSet<ObjectId>,
    /// Problems found.
    pub problems: Vec<Problem>,
    /// Bytes of chunk data read (Verify mode).
    pub bytes_verified: u64,
}

impl<'a> Walk<'a> {
    /// A new walk reading with `read`.
    pub fn new(read: Reader<'a>, chunks_mode: ChunkCheck) -> Walk<'a> {
        Walk {
            read,
            chunks_mode,
            boundary: None,
            at_boundary: HashSet::new(),
            nodes: HashSet::new(),
            chunks: HashSet::new(),
            problems: Vec::new(),
            bytes_verified: 0,
        }
    }

    /// Stop at ids `b` says are on the boundary (see [`Boundary`]): they are
    /// recorded as reached and in [`at_boundary`](Self::at_boundary), never read.
    pub fn with_boundary(mut self, b: Boundary<'a>) -> Walk<'a> {
        self.boundary = Some(b);
        self
    }

    fn on_boundary(&mut self, id: &ObjectId) -> bool {
        if self.boundary.is_some_and(|b| b(id)) {
            self.at_boundary.insert(*id);
            return true;
        }
        false
    }

    /// Every object id reached (nodes and chunks).
    pub fn reached(&self) -> impl Iterator<Item = &ObjectId> {
        self.nodes.iter().chain(self.chunks.iter())
    }

    /// Walk the tree under root node `id`.
    pub fn root(&mut self, owner: &str, id: NodeId) {
        self.run(owner, "/".into(), Item::Root(id));
    }

    /// Walk a node of unknown type (a live session's table holds root, directory
    /// and file node ids): its type byte decides.
    pub fn any_node(&mut self, owner: &str, id: NodeId) {
        self.run(owner, "(live)".into(), Item::Any(id));
    }

    /// Record a chunk id (a live session's sealed block).
    pub fn chunk(&mut self, owner: &str, path: &str, id: ChunkId) {
        let id = ObjectId::from(id);
        if !self.chunks.insert(id) || self.on_boundary(&id) || self.chunks_mode == ChunkCheck::Mark
        {
            return;
        }
        match (self.read)(ObjKind::Chunk, &id) {
            Ok(b) => self.bytes_verified += b.len() as u64,
            Err(e) => self.problem(owner, path, &id, e.to_string()),
        }
    }

    fn problem(&mut self, owner: &str, path: &str, id: &ObjectId, error: String) {
        self.problems.push(Problem {
            owner: owner.to_string(),
            path: path.to_string(),
            object: Some(id.to_hex()),
            error,
        });
    }

    /// Read a node once; `None` when already visited or unreadable (then recorded).
    fn node(&mut self, owner: &str, path: &str, id: &NodeId) -> Option<Arc<Vec<u8>>> {
        if !self.nodes.insert(id.into()) || self.on_boundary(&id.into()) {
            return None;
        }
        match (self.read)(ObjKind::Node, &id.into()) {
            Ok(b) => Some(b),
            Err(e) => {
                self.problem(owner, path, &id.into(), e.to_string());
                None
            }
        }
    }

    fn run(&mut self, owner: &str, path: String, first: Item) {
        let mut stack = vec![(path, first)];
        while let Some((path, item)) = stack.pop() {
            match item {
                Item::Any(id) => self.visit_any(owner, path, id, &mut stack),
                Item::Root(id) => self.visit_root(owner, &path, id, &mut stack),
                Item::Record(r) => self.visit_record(owner, path, r, &mut stack),
                Item::Dir(id) => self.visit_dir(owner, &path, id, &mut stack),
                Item::File(id) => self.visit_file(owner, &path, id, &mut stack),
                Item::Leaf(id, at) => self.visit_leaf(owner, &path, id, at),
            }
        }
    }

    /// A node of unknown type: peek its type byte without marking, then push it as
    /// what it is.
    fn visit_any(&mut self, owner: &str, path: String, id: NodeId, stack: &mut Stack) {
        if self.nodes.contains(&id.into()) {
            return;
        }
        if self.on_boundary(&id.into()) {
            self.nodes.insert(id.into());
            return;
        }
        match (self.read)(ObjKind::Node, &id.into()) {
            Ok(b) if b.len() > 5 && &b[..4] == NODE_MAGIC => {
                let next = match b[5] {
                    b'R' => Item::Root(id),
                    b'F' | b'M' => Item::File(id),
                    b'B' => Item::Leaf(id, None),
                    _ => Item::Dir(id),
                };
                stack.push((path, next));
            }
            Ok(_) => {
                self.nodes.insert(id.into());
                self.problem(owner, &path, &id.into(), "not a tree node".into());
            }
            Err(e) => {
                self.nodes.insert(id.into());
                self.problem(owner, &path, &id.into(), e.to_string());
            }
        }
    }

    /// A root node: its root directory's record and every hard-linked inode's.
    fn visit_root(&mut self, owner: &str, path: &str, id: NodeId, stack: &mut Stack) {
        let Some(b) = self.node(owner, path, &id) else {
            return;
        };
        match RootNode::decode(&b) {
            Ok(r) => {
                for l in r.links {
                    let p = format!("(hard-linked inode {})", l.ino);
                    stack.push((p, Item::Record(l)));
                }
                stack.push(("/".into(), Item::Record(r.root)));
            }
            Err(e) => self.problem(owner, path, &id.into(), e.to_string()),
        }
    }

    /// An inode record: the node it names, if any.
    fn visit_record(&mut self, owner: &str, path: String, r: Record, stack: &mut Stack) {
        if let Content::Node(id) = r.content {
            match r.kind {
                Kind::Dir => stack.push((path, Item::Dir(id))),
                Kind::File => stack.push((path, Item::File(id))),
                _ => self.problem(owner, &path, &id.into(), "node on a special file".into()),
            }
        }
    }

    /// A directory node: its shards (index) or its inline entries (flat).
    fn visit_dir(&mut self, owner: &str, path: &str, id: NodeId, stack: &mut Stack) {
        let Some(b) = self.node(owner, path, &id) else {
            return;
        };
        match AnyDir::decode(&b) {
            Ok(AnyDir::Index(ix)) => {
                for (_, leaf) in ix.shards {
                    stack.push((path.to_string(), Item::Dir(leaf)));
                }
            }
            Ok(AnyDir::Flat(d)) => {
                for (name, e) in d.entries {
                    if let Entry::Inline(r) = e {
                        stack.push((join(path, &name), Item::Record(r)));
                    }
                }
            }
            Err(e) => self.problem(owner, path, &id.into(), e.to_string()),
        }
    }

    /// A file node: its chunks.
    fn visit_file(&mut self, owner: &str, path: &str, id: NodeId, stack: &mut Stack) {
        let Some(b) = self.node(owner, path, &id) else {
            return;
        };
        match FileNode::decode(&b) {
            Ok(FileNode::Inline(_)) => {}
            Ok(FileNode::Blocks { blocks, .. }) => {
                for (_, c) in blocks {
                    self.chunk(owner, path, c);
                }
            }
            Ok(FileNode::Map(m)) => {
                for (k, leaf) in m.leaves {
                    stack.push((path.to_string(), Item::Leaf(leaf, Some((k, m.size)))));
                }
            }
            Err(e) => self.problem(owner, path, &id.into(), e.to_string()),
        }
    }

    /// A block-map leaf: its chunks.
    fn visit_leaf(&mut self, owner: &str, path: &str, id: NodeId, at: Option<(u64, u64)>) {
        let Some(b) = self.node(owner, path, &id) else {
            return;
        };
        let leaf = match at {
            Some((k, size)) => BlockLeaf::decode(&b, k, size),
            None => BlockLeaf::decode_unplaced(&b),
        };
        match leaf {
            Ok(l) => {
                for (_, c) in l.blocks {
                    self.chunk(owner, path, c);
                }
            }
            Err(e) => self.problem(owner, path, &id.into(), e.to_string()),
        }
    }
}

fn join(dir: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}
