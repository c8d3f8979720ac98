//! Driver of the tree model test: applies one [`Op`] to a live session (the way
//! the FUSE layer and the control ops drive it) and to the [`Model`], then checks
//! that the session's tree equals the model.
//!
//! Checked after every op: the set of paths; each path's kind, symlink target and
//! file bytes; hard links (paths sharing a model file id are exactly the paths
//! sharing an inode); each file's and directory's link count; the session's usage
//! numbers. Checkouts and restores follow `src/ops` (save pending changes under
//! an `auto/...` ref, graft with the generation guard, commit or flush); forks open
//! a second session from a checkpoint; gc runs the real collector with the live
//! sessions as roots, then every session and every checkpoint must still read.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::model::{Model, Node, leaf, parent, under};
use crate::error::Error;
use crate::id::{ChunkId, NodeId};
use crate::refs::Checkpoint;
use crate::session::posix::{NewNode, SetAttr};
use crate::session::{Session, Stat, create_record, empty_root, new_record, record_op};
use crate::store::{MemStore, ObjectStore, PackStore};
use crate::tree::Kind;

/// Directories the ops may create (parents first).
pub const DIRS: [&str; 4] = ["a", "b", "a/c", "b/c"];
/// Non-directory paths the ops may create.
pub const LEAVES: [&str; 10] = [
    "x", "y", "a/x", "a/y", "a/z", "b/x", "b/y", "a/c/x", "a/c/y", "b/c/z",
];

/// One step of a test case. Paths are from [`DIRS`] / [`LEAVES`]; `k` picks a
/// saved checkpoint (modulo how many there are), `n` a session.
#[derive(Debug, Clone)]
pub enum Op {
    Write {
        path: &'static str,
        offset: u32,
        len: u32,
        seed: u8,
    },
    Truncate {
        path: &'static str,
        size: u32,
    },
    Mkdir {
        path: &'static str,
    },
    Rmdir {
        path: &'static str,
    },
    Unlink {
        path: &'static str,
    },
    Link {
        from: &'static str,
        to: &'static str,
    },
    Symlink {
        path: &'static str,
        seed: u8,
    },
    Rename {
        from: &'static str,
        to: &'static str,
    },
    Checkpoint,
    Checkout {
        k: u8,
    },
    Restore {
        k: u8,
        path: &'static str,
    },
    Fork {
        k: u8,
    },
    Switch {
        n: u8,
    },
    Flush,
    Reopen,
    Gc,
}

/// Bytes a write puts: varied so that blocks differ between seeds.
pub fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| seed.wrapping_add((k / 1000) as u8) ^ (k as u8))
        .collect()
}

/// The sessions of a test case with their models, the saved checkpoints, the store.
pub struct World {
    store: Arc<dyn ObjectStore>,
    packs: Option<(Arc<PackStore>, tempfile::TempDir)>,
    sessions: Vec<(Session, Model)>,
    cur: usize,
    saved: Vec<(Checkpoint, Model)>,
    /// Kernel references taken during the current op (forgotten at its end).
    held: RefCell<Vec<u64>>,
    autos: u32,
}

/// Most sessions a case forks (a further fork switches instead).
const MAX_SESSIONS: usize = 3;

impl World {
    /// A world over the in-memory store.
    pub fn mem() -> World {
        World::new(Arc::new(MemStore::default()), None)
    }

    /// A world over a pack store in a temporary directory (gc can run).
    pub fn packs() -> World {
        let dir = tempfile::tempdir().unwrap();
        let p = Arc::new(PackStore::open(dir.path()).unwrap());
        World::new(p.clone(), Some((p, dir)))
    }

    fn new(
        store: Arc<dyn ObjectStore>,
        packs: Option<(Arc<PackStore>, tempfile::TempDir)>,
    ) -> World {
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "m", root, 0, 1).unwrap();
        let s = Session::open(store.clone(), rec).unwrap();
        World {
            store,
            packs,
            sessions: vec![(s, Model::default())],
            cur: 0,
            saved: Vec::new(),
            held: RefCell::new(Vec::new()),
            autos: 0,
        }
    }

    /// Run a case: every op, a check after each, then flush, reopen and (with a
    /// pack store) gc, checking every session and checkpoint at the end.
    pub fn run(mut self, ops: &[Op]) {
        for (n, op) in ops.iter().enumerate() {
            self.apply(op);
            self.end_op();
            let (s, m) = &self.sessions[self.cur];
            self.check(s, m, &format!("after op {n} ({op:?})"));
            self.end_op();
        }
        for i in 0..self.sessions.len() {
            self.cur = i;
            self.apply(&Op::Reopen);
            let (s, m) = &self.sessions[i];
            self.check(s, m, &format!("session {i} reopened at the end"));
            self.end_op();
        }
        self.apply(&Op::Gc);
    }

    fn s(&self) -> &Session {
        &self.sessions[self.cur].0
    }

    fn m(&mut self) -> &mut Model {
        &mut self.sessions[self.cur].1
    }

    /// Forget the kernel references the op took (the kernel forgets eventually).
    fn end_op(&self) {
        let held = std::mem::take(&mut *self.held.borrow_mut());
        self.s().forget_many(&held);
    }

    /// Look `path` up from the root in session `s`, as the kernel would.
    fn find_in(&self, s: &Session, path: &str) -> Option<Stat> {
        let mut st = s.getattr(1).unwrap();
        for comp in path.split('/').filter(|c| !c.is_empty()) {
            st = s.lookup(st.ino, comp.as_bytes()).ok()?;
            self.held.borrow_mut().push(st.ino);
        }
        Some(st)
    }

    fn find(&self, path: &str) -> Option<Stat> {
        self.find_in(self.s(), path)
    }

    fn ino(&self, path: &str) -> u64 {
        self.find(path)
            .unwrap_or_else(|| panic!("{path:?} is not in the session"))
            .ino
    }

    fn hold(&self, st: Stat) -> u64 {
        self.held.borrow_mut().push(st.ino);
        st.ino
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Write {
                path,
                offset,
                len,
                seed,
            } => {
                let m = &self.sessions[self.cur].1;
                if !m.is_dir(parent(path)) {
                    return;
                }
                let data = bytes(seed, len as usize);
                let id = match m.get(path) {
                    Some(Node::File(id)) => {
                        let id = *id;
                        let ino = self.ino(path);
                        self.s().write(ino, offset as u64, &data).unwrap();
                        id
                    }
                    None => {
                        let p = self.ino(parent(path));
                        let st = self.s().create_node(
                            p,
                            leaf(path).as_bytes(),
                            NewNode::File,
                            0o644,
                            0,
                            0,
                        );
                        let ino = self.hold(st.unwrap());
                        self.s().write(ino, offset as u64, &data).unwrap();
                        let m = self.m();
                        let id = m.new_file(Vec::new());
                        m.paths.insert(path.into(), Node::File(id));
                        id
                    }
                    _ => return,
                };
                self.m().write(id, offset as usize, &data);
            }
            Op::Truncate { path, size } => {
                if let Some(Node::File(id)) = self.sessions[self.cur].1.get(path).cloned() {
                    let ino = self.ino(path);
                    let a = SetAttr {
                        size: Some(size as u64),
                        ..SetAttr::default()
                    };
                    self.s().setattr(ino, a).unwrap();
                    self.m()
                        .files
                        .get_mut(&id)
                        .unwrap()
                        .resize(size as usize, 0);
                }
            }
            Op::Mkdir { path } => {
                let m = &self.sessions[self.cur].1;
                if m.is_dir(parent(path)) && m.get(path).is_none() {
                    let p = self.ino(parent(path));
                    let st =
                        self.s()
                            .create_node(p, leaf(path).as_bytes(), NewNode::Dir, 0o755, 0, 0);
                    self.hold(st.unwrap());
                    self.m().paths.insert(path.into(), Node::Dir);
                }
            }
            Op::Rmdir { path } => {
                let m = &self.sessions[self.cur].1;
                if m.get(path) != Some(&Node::Dir) {
                    return;
                }
                let full = m.has_children(path);
                let p = self.ino(parent(path));
                let r = self.s().remove(p, leaf(path).as_bytes(), true);
                if full {
                    assert!(
                        matches!(r, Err(Error::Posix(libc::ENOTEMPTY))),
                        "rmdir {path}: {r:?}"
                    );
                } else {
                    r.unwrap();
                    self.m().remove_tree(path);
                }
            }
            Op::Unlink { path } => {
                let m = &self.sessions[self.cur].1;
                if matches!(m.get(path), Some(Node::File(_) | Node::Symlink(_))) {
                    let p = self.ino(parent(path));
                    self.s().remove(p, leaf(path).as_bytes(), false).unwrap();
                    self.m().remove_tree(path);
                }
            }
            Op::Link { from, to } => {
                let m = &self.sessions[self.cur].1;
                if let Some(Node::File(id)) = m.get(from).cloned()
                    && m.get(to).is_none()
                    && m.is_dir(parent(to))
                {
                    let ino = self.ino(from);
                    let p = self.ino(parent(to));
                    let st = self.s().link(ino, p, leaf(to).as_bytes()).unwrap();
                    self.hold(st);
                    self.m().paths.insert(to.into(), Node::File(id));
                }
            }
            Op::Symlink { path, seed } => {
                let m = &self.sessions[self.cur].1;
                if m.get(path).is_none() && m.is_dir(parent(path)) {
                    let target = format!("../t{seed}").into_bytes();
                    let p = self.ino(parent(path));
                    let st = self.s().create_node(
                        p,
                        leaf(path).as_bytes(),
                        NewNode::Symlink(&target),
                        0o777,
                        0,
                        0,
                    );
                    self.hold(st.unwrap());
                    self.m().paths.insert(path.into(), Node::Symlink(target));
                }
            }
            Op::Rename { from, to } => {
                let m = &self.sessions[self.cur].1;
                if matches!(m.get(from), Some(Node::File(_) | Node::Symlink(_)))
                    && m.is_dir(parent(to))
                {
                    let (p, q) = (self.ino(parent(from)), self.ino(parent(to)));
                    self.s()
                        .rename(p, leaf(from).as_bytes(), q, leaf(to).as_bytes(), 0)
                        .unwrap();
                    self.m().rename(from, to);
                }
            }
            Op::Checkpoint => {
                let c = self.s().checkpoint("model", "manual", None).unwrap();
                let m = self.sessions[self.cur].1.clone();
                self.saved.push((c, m));
            }
            Op::Checkout { k } => {
                let Some((c, target)) = self.pick(k) else {
                    return;
                };
                let root = c.root;
                self.save_and_graft("before-checkout", root, None);
                self.s().commit_checkout(c.id, root).unwrap();
                *self.m() = target;
            }
            Op::Restore { k, path } => self.restore(k, path),
            Op::Fork { k } => {
                let Some((c, target)) = self.pick(k) else {
                    return;
                };
                if self.sessions.len() >= MAX_SESSIONS {
                    return self.apply(&Op::Switch { n: k });
                }
                let name = format!("f{}", self.sessions.len());
                let (bytes, inodes) = target.usage();
                let mut rec = new_record(&name, c.root, bytes, inodes).unwrap();
                rec.head = Some(c.id);
                self.store.commit(vec![record_op(&rec)]).unwrap();
                let s = Session::open(self.store.clone(), rec).unwrap();
                self.end_op();
                self.sessions.push((s, target));
                self.cur = self.sessions.len() - 1;
            }
            Op::Switch { n } => {
                self.end_op();
                self.cur = n as usize % self.sessions.len();
            }
            Op::Flush => {
                self.s().flush().unwrap();
            }
            Op::Reopen => {
                self.end_op();
                self.s().flush().unwrap();
                let s = Session::open(self.store.clone(), self.s().record()).unwrap();
                self.sessions[self.cur].0 = s;
            }
            Op::Gc => self.gc(),
        }
    }

    fn pick(&self, k: u8) -> Option<(Checkpoint, Model)> {
        if self.saved.is_empty() {
            return None;
        }
        Some(self.saved[k as usize % self.saved.len()].clone())
    }

    /// What `src/ops` does around a checkout or restore: save pending changes as a
    /// checkpoint under an `auto/...` ref, then graft under the generation guard.
    fn save_and_graft(&mut self, kind: &str, root: NodeId, paths: Option<&[Vec<u8>]>) {
        let s = &self.sessions[self.cur].0;
        let generation = s.generation();
        if s.has_changes().unwrap() || s.record().head.is_none() {
            self.autos += 1;
            let name = format!("auto/{kind}-{}", self.autos);
            let c = s
                .checkpoint(&format!("auto: before {kind}"), kind, Some(&name))
                .unwrap();
            let m = self.sessions[self.cur].1.clone();
            self.saved.push((c, m));
        }
        let (_inval, r) = self.s().graft(root, paths, Some(generation));
        r.unwrap();
    }

    fn restore(&mut self, k: u8, path: &'static str) {
        let Some((c, saved)) = self.pick(k) else {
            return;
        };
        let root = c.root;
        let paths = [path.as_bytes().to_vec()];
        let only = (!path.is_empty()).then_some(&paths[..]);
        self.save_and_graft("before-restore", root, only);
        self.s().flush().unwrap();
        let top = self.m().restore(&saved, path);
        // Inside the restored region the links are the checkpoint's; a restored file
        // may stay the live inode that outside paths name too (when that inode is
        // unchanged since the checkpoint): then the contents must agree.
        let scan = self.scan(self.s());
        let m = &self.sessions[self.cur].1;
        let mut outside: HashMap<u64, &str> = HashMap::new();
        for (p, st) in &scan {
            if st.kind != Kind::Dir && !under(p, &top) {
                outside.entry(st.ino).or_insert(p);
            }
        }
        let mut pairs = Vec::new();
        let mut inside = Vec::new();
        for (p, st) in scan.iter().filter(|(p, _)| under(p, &top)) {
            if let Some(Node::File(id)) = m.get(p) {
                inside.push((p.as_str(), *id, st.ino));
                if let Some(o) = outside.get(&st.ino) {
                    let Some(Node::File(oid)) = m.get(o) else {
                        panic!(
                            "restore {path}: {p} shares an inode with {o}, not a file in the model"
                        )
                    };
                    assert!(
                        m.files[id] == m.files[oid],
                        "restore {path}: {p} is linked to {o}, whose bytes differ from the checkpoint's"
                    );
                    pairs.push((p.clone(), o.to_string()));
                }
            }
        }
        check_links(
            inside.into_iter(),
            &format!("region {top:?} restored from a checkpoint"),
        );
        self.m().adopt(&top, &pairs);
    }

    fn gc(&mut self) {
        let Some((packs, _)) = &self.packs else {
            return;
        };
        let live = Sessions(&self.sessions);
        crate::gc::gc(&**packs, &live, None, false, &mut |_, _, _| {}).unwrap();
        for (i, (s, m)) in self.sessions.iter().enumerate() {
            self.check(s, m, &format!("session {i} after gc"));
            s.forget_many(&std::mem::take(&mut *self.held.borrow_mut()));
        }
        for (c, m) in &self.saved {
            let (bytes, inodes) = m.usage();
            let rec = new_record("check", c.root, bytes, inodes).unwrap();
            let s = Session::open(self.store.clone(), rec).unwrap();
            self.check(
                &s,
                m,
                &format!("checkpoint {} ({}) after gc", c.id.short(), c.message),
            );
            self.held.borrow_mut().clear();
        }
    }

    /// Every path of session `s` with its attributes (lookups held until `end_op`).
    fn scan(&self, s: &Session) -> BTreeMap<String, Stat> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(String::new(), 1u64)];
        while let Some((dir, ino)) = stack.pop() {
            for (_, e, _) in s.readdir_page(ino, 0, usize::MAX, false).unwrap() {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let name = String::from_utf8(e.name).unwrap();
                let path = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                let st = s.lookup(ino, name.as_bytes()).unwrap();
                self.held.borrow_mut().push(st.ino);
                assert_eq!(st.ino, e.ino, "{path}: readdir and lookup disagree");
                if st.kind == Kind::Dir {
                    stack.push((path.clone(), st.ino));
                }
                out.insert(path, st);
            }
        }
        out
    }

    /// Session `s` holds exactly model `m` (see module docs).
    fn check(&self, s: &Session, m: &Model, when: &str) {
        s.lock().check_link_index();
        let scan = self.scan(s);
        let got: Vec<&String> = scan.keys().collect();
        let want: Vec<&String> = m.paths.keys().collect();
        assert_eq!(got, want, "{when}: paths differ (session, model)");
        let mut refs: HashMap<u64, u32> = HashMap::new();
        let mut files = Vec::new();
        for (p, st) in &scan {
            match &m.paths[p] {
                Node::Dir => {
                    assert_eq!(st.kind, Kind::Dir, "{when}: kind of {p}");
                    let subdirs = scan
                        .iter()
                        .filter(|(q, d)| d.kind == Kind::Dir && parent(q) == p)
                        .count() as u32;
                    assert_eq!(st.attr.nlink, 2 + subdirs, "{when}: nlink of directory {p}");
                }
                Node::Symlink(t) => {
                    assert_eq!(st.kind, Kind::Symlink, "{when}: kind of {p}");
                    assert_eq!(&s.readlink(st.ino).unwrap(), t, "{when}: target of {p}");
                }
                Node::File(id) => {
                    assert_eq!(st.kind, Kind::File, "{when}: kind of {p}");
                    let want = &m.files[id];
                    assert_eq!(st.attr.size, want.len() as u64, "{when}: size of {p}");
                    let got = s.read(st.ino, 0, want.len() as u32 + 10).unwrap();
                    assert!(got == *want, "{when}: bytes of {p} differ");
                    *refs.entry(st.ino).or_default() += 1;
                    files.push((p.as_str(), *id, st.ino));
                }
            }
        }
        check_links(files.into_iter(), when);
        for (p, st) in &scan {
            if let Some(n) = refs.get(&st.ino) {
                assert_eq!(st.attr.nlink, *n, "{when}: nlink of {p} (inode {})", st.ino);
            }
        }
        assert_eq!(s.usage(), m.usage(), "{when}: usage (bytes, inodes)");
    }
}

/// Paths share a model file id exactly when they share an inode.
fn check_links<'a>(files: impl Iterator<Item = (&'a str, u64, u64)>, when: &str) {
    let mut ino_of: HashMap<u64, (u64, &str)> = HashMap::new();
    let mut id_of: HashMap<u64, (u64, &str)> = HashMap::new();
    for (p, id, ino) in files {
        let (i, q) = *ino_of.entry(id).or_insert((ino, p));
        assert_eq!(
            i, ino,
            "{when}: {p} and {q} are hard links in the model, separate inodes in the session"
        );
        let (d, q) = *id_of.entry(ino).or_insert((id, p));
        assert_eq!(
            d, id,
            "{when}: {p} and {q} are separate files in the model, one inode in the session"
        );
    }
}

/// The live sessions as gc roots.
struct Sessions<'a>(&'a [(Session, Model)]);

impl crate::gc::Live for Sessions<'_> {
    fn barrier(&self) {
        // One thread: every put has returned and is published.
    }
    fn live_ids(&self) -> Vec<(String, Vec<NodeId>, Vec<ChunkId>)> {
        self.0
            .iter()
            .map(|(s, _)| {
                let (n, c) = s.live_ids();
                (s.name().to_string(), n, c)
            })
            .collect()
    }
}
