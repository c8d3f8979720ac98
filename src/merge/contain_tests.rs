//! The containment check on in-memory trees: the two attacks of issue 38 are
//! refused, whole-tree swaps and the agent's own directories are not, the merge
//! engine never gives a path one side's owner with the other side's mode, and on
//! random trees the check (which skips equal subtrees by id) answers exactly as a
//! plain reading of the rules over every path does.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::{check, writable};
use crate::diff::Tree;
use crate::dirs::load_dir;
use crate::error::Error;
use crate::id::NodeId;
use crate::merge::{Theirs, merge, tree_changes};
use crate::session::posix::{NewNode, SetAttr};
use crate::session::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};
use crate::tree::{Kind, Record};

const A: u32 = 65534;

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "t", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

/// One path of a tree: a directory, or a file with these bytes; its owner (and
/// group, the same number) and permission bits.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    data: Option<&'static [u8]>,
    uid: u32,
    perm: u32,
}

fn dir(uid: u32, perm: u32) -> Node {
    Node {
        data: None,
        uid,
        perm,
    }
}

fn file(uid: u32, perm: u32, data: &'static [u8]) -> Node {
    Node {
        data: Some(data),
        uid,
        perm,
    }
}

type Spec = BTreeMap<&'static str, Node>;

fn split(p: &str) -> (&str, &str) {
    p.rsplit_once('/').unwrap_or(("", p))
}

fn ino(s: &Session, path: &str) -> u64 {
    let mut ino = 1;
    for c in path.split('/').filter(|c| !c.is_empty()) {
        ino = s.lookup(ino, c.as_bytes()).unwrap().ino;
    }
    ino
}

fn set(s: &Session, ino: u64, uid: u32, perm: u32) {
    s.setattr(
        ino,
        SetAttr {
            mode: Some(perm),
            uid: Some(uid),
            gid: Some(uid),
            ..SetAttr::default()
        },
    )
    .unwrap();
}

/// Put `n` at `path` of the private session `s` (its parent exists).
fn put(s: &Session, path: &str, n: &Node) {
    if path.is_empty() {
        return set(s, 1, n.uid, n.perm);
    }
    let (parent, name) = split(path);
    let p = ino(s, parent);
    let kind = if n.data.is_some() {
        NewNode::File
    } else {
        NewNode::Dir
    };
    let st = s
        .create_node(p, name.as_bytes(), kind, n.perm, n.uid, n.uid)
        .unwrap();
    if let Some(d) = n.data {
        s.write(st.ino, 0, d).unwrap();
    }
    set(s, st.ino, n.uid, n.perm);
}

/// The tree of `spec` (paths in order, so parents come first).
fn tree(s: &Session, spec: &Spec) -> NodeId {
    let empty = empty_root(&**s.store(), 0, 0).unwrap();
    s.build_beside(empty, &mut |w| {
        for (p, n) in spec {
            put(w, p, n);
        }
        Ok(())
    })
    .unwrap()
}

/// `from` with the paths of `spec` grafted from `source` (as `restore SOURCE
/// PATH...` does).
fn grafted(s: &Session, from: NodeId, source: NodeId, paths: &[&str]) -> NodeId {
    let paths: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
    s.build_beside(from, &mut |w| w.graft(source, Some(&paths), None).1)
        .unwrap()
}

fn refusal(r: crate::error::Result<()>) -> String {
    match r {
        Err(Error::Forbidden(m)) => m,
        other => panic!("not refused: {other:?}"),
    }
}

/// Root's workspace at C0 and the agent's at C1 (after `chown -R`, with the hook).
fn c0_c1(s: &Session) -> (NodeId, NodeId) {
    let c0: Spec = [
        ("", dir(0, 0o755)),
        (".git", dir(0, 0o755)),
        (".git/HEAD", file(0, 0o644, b"ref: refs/heads/main\n")),
        (".git/hooks", dir(0, 0o755)),
        ("work.txt", file(0, 0o644, b"work\n")),
    ]
    .into();
    let mut c1 = c0.clone();
    for n in c1.values_mut() {
        n.uid = A;
    }
    c1.insert(
        ".git/hooks/reference-transaction",
        file(A, 0o755, b"#!/bin/sh\n"),
    );
    (tree(s, &c0), tree(s, &c1))
}

#[test]
fn a_graft_into_a_directory_the_agent_cannot_write_is_refused() {
    let s = session();
    let store = s.store().clone();
    let (c0, c1) = c0_c1(&s);
    // Attack (a): root's tree, then the hook alone from C1.
    let r = grafted(&s, c0, c1, &[".git/hooks/reference-transaction"]);
    let m = refusal(check(&*store, A, "restore", c0, r, &[c1]));
    assert!(
        m.contains("\".git/hooks\"")
            && m.contains("uid 0")
            && m.contains("agent (uid 65534) cannot write")
            && m.contains("reference-transaction"),
        "{m}"
    );
    // The agent's whole hooks directory in root's `.git` is no better.
    let r = grafted(&s, c0, c1, &[".git/hooks"]);
    let m = refusal(check(&*store, A, "restore", c0, r, &[c1]));
    assert!(m.contains("directory \".git\" is owned by uid 0"), "{m}");
    // Into the agent's own tree, root's file and the agent's hook are fine.
    let r = grafted(&s, c1, c0, &["work.txt", ".git/hooks"]);
    check(&*store, A, "restore", c1, r, &[c0]).unwrap();
    // Whole-tree results: ours, or a source.
    check(&*store, A, "restore", c0, c0, &[c1]).unwrap();
    check(&*store, A, "restore", c0, c1, &[c1]).unwrap();
    // The same graft is the user's to make: the check is for agents only, and
    // root as the agent may write root's directories.
    check(
        &*store,
        0,
        "restore",
        c0,
        grafted(&s, c0, c1, &[".git"]),
        &[c1],
    )
    .unwrap();
}

#[test]
fn owner_of_one_side_with_the_mode_of_the_other_is_refused() {
    let s = session();
    let store = s.store().clone();
    let (c0, c1) = c0_c1(&s);
    // Attack (b) as the merge used to build it: root's `.git` with theirs' 0777.
    let wide = s
        .build_beside(c1, &mut |w| {
            set(w, ino(w, ".git"), A, 0o777);
            Ok(())
        })
        .unwrap();
    let mixed = s
        .build_beside(c0, &mut |w| {
            set(w, ino(w, ".git"), 0, 0o777);
            Ok(())
        })
        .unwrap();
    let m = refusal(check(&*store, A, "merge", c0, mixed, &[wide, c0]));
    assert!(
        m.contains("\".git\"")
            && m.contains("owned by uid 0")
            && m.contains("mode 777")
            && m.contains("agent (uid 65534) cannot write"),
        "{m}"
    );
    // What the merge builds now: theirs' attributes whole, in root's listing of
    // the workspace root (which no tree has): refused at the root.
    let changes = tree_changes(&*store, c0, wide).unwrap();
    let merged = merge(&s, c0, &changes, Theirs::Tree(wide)).unwrap();
    let git = Tree::load(&*store, merged.root)
        .unwrap()
        .lookup(&*store, b".git")
        .unwrap()
        .unwrap();
    assert_eq!((git.attr.uid, git.attr.perm & 0o7777), (A, 0o777));
    let m = refusal(check(&*store, A, "merge", c0, merged.root, &[wide, c0]));
    assert!(m.contains("directory \".\" is owned by uid 0"), "{m}");
    // Into a workspace root the agent owns, the same merge is allowed.
    let mine = s
        .build_beside(c0, &mut |w| {
            set(w, 1, A, 0o755);
            Ok(())
        })
        .unwrap();
    let merged = merge(&s, mine, &changes, Theirs::Tree(wide)).unwrap();
    check(&*store, A, "merge", mine, merged.root, &[wide, c0]).unwrap();
}

#[test]
fn the_merge_takes_attributes_as_a_unit() {
    let s = session();
    let store = s.store().clone();
    let spec =
        |git: Node, f: Node| -> Spec { [("", dir(A, 0o755)), ("g", git), ("g/f", f)].into() };
    let base = tree(&s, &spec(dir(A, 0o755), file(A, 0o644, b"a\nb\nc\n")));
    // Ours changed the owners, theirs the modes (and the file's last line).
    let ours = tree(&s, &spec(dir(0, 0o755), file(0, 0o644, b"A\nb\nc\n")));
    let theirs = tree(&s, &spec(dir(A, 0o777), file(A, 0o666, b"a\nb\nC\n")));
    let changes = tree_changes(&*store, base, theirs).unwrap();
    let m = merge(&s, ours, &changes, Theirs::Tree(theirs)).unwrap();
    let t = Tree::load(&*store, m.root).unwrap();
    let at = |p: &[u8]| {
        let r = t.lookup(&*store, p).unwrap().unwrap();
        (r.attr.uid, r.attr.perm & 0o7777)
    };
    assert_eq!(at(b"g"), (0, 0o755), "ours' directory, whole");
    assert_eq!(at(b"g/f"), (0, 0o644), "ours' file attributes, whole");
    let kinds: Vec<_> = m
        .conflicts
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("g", super::super::ConflictKind::Mode),
            ("g/f", super::super::ConflictKind::Mode)
        ]
    );
    // Only theirs changed the attributes: theirs', whole.
    let ours = tree(&s, &spec(dir(A, 0o755), file(A, 0o644, b"A\nb\nc\n")));
    let theirs = tree(&s, &spec(dir(0, 0o777), file(0, 0o666, b"a\nb\nC\n")));
    let changes = tree_changes(&*store, base, theirs).unwrap();
    let m = merge(&s, ours, &changes, Theirs::Tree(theirs)).unwrap();
    let t = Tree::load(&*store, m.root).unwrap();
    let at = |p: &[u8]| {
        let r = t.lookup(&*store, p).unwrap().unwrap();
        (r.attr.uid, r.attr.perm & 0o7777)
    };
    assert_eq!(at(b"g"), (0, 0o777));
    assert_eq!(at(b"g/f"), (0, 0o666));
    assert!(m.conflicts.is_empty(), "{:?}", m.conflicts);
}

#[test]
fn sticky_and_world_writable_directories() {
    let rec = |uid: u32, perm: u32| {
        let mut r = Record {
            kind: Kind::Dir,
            ino: 1,
            attr: Default::default(),
            xattrs: Vec::new(),
            content: crate::tree::Content::None,
        };
        r.attr.uid = uid;
        r.attr.perm = perm;
        r
    };
    let (mine, roots) = (rec(A, 0o500), rec(0, 0o644));
    assert!(
        writable(&rec(A, 0o555), A, &[]),
        "its own, whatever the mode"
    );
    assert!(!writable(&rec(0, 0o775), A, &[]), "group bits do not count");
    assert!(writable(&rec(0, 0o777), A, &[(Some(&roots), None)]));
    let tmp = rec(0, 0o1777);
    assert!(writable(&tmp, A, &[(None, Some(&mine))]));
    assert!(writable(&tmp, A, &[(Some(&mine), None)]));
    assert!(!writable(&tmp, A, &[(Some(&roots), Some(&mine))]));
    assert!(!writable(&tmp, A, &[(None, Some(&roots))]));
}

/// Every path of a tree (empty: the root) and its record, read whole.
fn flat(store: &dyn ObjectStore, root: NodeId) -> BTreeMap<Vec<u8>, Record> {
    let t = Tree::load(store, root).unwrap();
    let mut out = BTreeMap::new();
    let mut stack = vec![(Vec::new(), t.root.root.clone())];
    while let Some((path, r)) = stack.pop() {
        if let (Kind::Dir, crate::tree::Content::Node(id)) = (r.kind, &r.content) {
            for (name, e) in &load_dir(store, Some(*id)).unwrap().entries {
                let mut p = path.clone();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(name);
                stack.push((p, t.resolve(e).unwrap()));
            }
        }
        out.insert(path, r);
    }
    out
}

type Shallow = (Kind, u32, u32, u32, Option<crate::tree::Content>);

fn shallow(r: &Record) -> Shallow {
    let content = (r.kind != Kind::Dir).then(|| r.content.clone());
    (
        r.kind,
        r.attr.uid,
        r.attr.gid,
        r.attr.perm & 0o7777,
        content,
    )
}

fn parent_name(p: &[u8]) -> (&[u8], &[u8]) {
    match p.iter().rposition(|&b| b == b'/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (&p[..0], p),
    }
}

fn listing(t: &BTreeMap<Vec<u8>, Record>, dir: &[u8]) -> BTreeMap<Vec<u8>, Shallow> {
    if t.get(dir).is_none_or(|r| r.kind != Kind::Dir) {
        return BTreeMap::new();
    }
    t.iter()
        .filter_map(|(p, r)| {
            let (parent, name) = parent_name(p);
            (!p.is_empty() && parent == dir).then(|| (name.to_vec(), shallow(r)))
        })
        .collect()
}

/// The rules of the module docs read plainly, path by path, over whole trees.
fn plain(store: &dyn ObjectStore, ours: NodeId, result: NodeId, sources: &[NodeId]) -> bool {
    let (o, r) = (flat(store, ours), flat(store, result));
    let s: Vec<_> = sources.iter().map(|&x| flat(store, x)).collect();
    let attrs = |x: &Record| (x.kind, x.attr.uid, x.attr.gid, x.attr.perm & 0o7777);
    for (p, x) in &r {
        let m1 = x.attr.uid == A
            || o.get(p).is_some_and(|y| attrs(y) == attrs(x))
            || s.iter()
                .any(|t| t.get(p).is_some_and(|y| attrs(y) == attrs(x)));
        if !m1 {
            return false;
        }
        if x.kind != Kind::Dir {
            continue;
        }
        let (rl, ol) = (listing(&r, p), listing(&o, p));
        if rl == ol {
            continue;
        }
        let names: Vec<_> = rl
            .keys()
            .chain(ol.keys())
            .filter(|n| rl.get(*n) != ol.get(*n))
            .collect();
        let own = x.attr.uid == A;
        let other_w = x.attr.perm & 0o002 != 0;
        let sticky = x.attr.perm & 0o1000 != 0;
        let theirs_only = names
            .iter()
            .all(|n| rl.get(*n).is_none_or(|e| e.1 == A) && ol.get(*n).is_none_or(|e| e.1 == A));
        if own || other_w && (!sticky || theirs_only) {
            continue;
        }
        let whole = s
            .iter()
            .any(|t| t.get(p).is_some_and(|y| attrs(y) == attrs(x)) && listing(t, p) == rl);
        if !whole {
            return false;
        }
    }
    true
}

/// A change the random composition makes to ours.
#[derive(Clone, Debug)]
enum Step {
    /// Graft the path from the source (restore).
    Graft(usize),
    /// Set the owner and mode of the path.
    Attr(usize, u32, u32),
    /// Write a file at the path (if its parent is there).
    Write(usize, &'static [u8]),
}

const DIRS: [&str; 3] = ["", "d", "d/e"];
const FILES: [&str; 4] = ["f", "d/f", "d/g", "d/e/f"];
const ALL: [&str; 7] = ["", "d", "d/e", "f", "d/f", "d/g", "d/e/f"];

fn node(is_dir: bool) -> impl Strategy<Value = Node> {
    let uid = prop_oneof![Just(0u32), Just(A)];
    if is_dir {
        (
            uid,
            prop_oneof![Just(0o755u32), Just(0o777), Just(0o1777), Just(0o700)],
        )
            .prop_map(|(uid, perm)| dir(uid, perm))
            .boxed()
    } else {
        (
            uid,
            prop_oneof![Just(0o644u32), Just(0o666)],
            prop_oneof![Just(&b"a"[..]), Just(&b"b"[..])],
        )
            .prop_map(|(uid, perm, d)| file(uid, perm, d))
            .boxed()
    }
}

/// A random tree over the paths above (a path only under a directory present).
fn spec() -> impl Strategy<Value = Spec> {
    let dirs = proptest::collection::vec((any::<bool>(), node(true)), DIRS.len());
    let files = proptest::collection::vec(proptest::option::of(node(false)), FILES.len());
    (dirs, files).prop_map(|(dirs, files)| {
        let mut out = Spec::new();
        for (p, (present, n)) in DIRS.iter().zip(dirs) {
            let parent_there = p.is_empty() || out.contains_key(split(p).0);
            if p.is_empty() || present && parent_there {
                out.insert(*p, n);
            }
        }
        for (p, n) in FILES.iter().zip(files) {
            if let Some(n) = n
                && out.contains_key(split(p).0)
            {
                out.insert(*p, n);
            }
        }
        out
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..ALL.len()).prop_map(Step::Graft),
        (
            0..ALL.len(),
            prop_oneof![Just(0u32), Just(A)],
            prop_oneof![Just(0o755u32), Just(0o777), Just(0o644)]
        )
            .prop_map(|(i, u, p)| Step::Attr(i, u, p)),
        (
            0..FILES.len(),
            prop_oneof![Just(&b"a"[..]), Just(&b"c"[..])]
        )
            .prop_map(|(i, d)| Step::Write(i, d)),
    ]
}

fn compose(s: &Session, ours: NodeId, source: NodeId, steps: &[Step]) -> NodeId {
    s.build_beside(ours, &mut |w| {
        for st in steps {
            match st {
                Step::Graft(i) => {
                    let p = vec![ALL[*i].as_bytes().to_vec()];
                    w.graft(source, Some(&p), None).1?;
                }
                Step::Attr(i, uid, perm) => {
                    if let Some(n) = lookup(w, ALL[*i]) {
                        set(w, n, *uid, *perm);
                    }
                }
                Step::Write(i, d) => {
                    let (parent, name) = split(FILES[*i]);
                    if let Some(p) = lookup(w, parent) {
                        if let Ok(st) = w.lookup(p, name.as_bytes()) {
                            if st.kind == Kind::Dir {
                                continue;
                            }
                            w.remove(p, name.as_bytes(), false)?;
                        }
                        let st = w.create_node(p, name.as_bytes(), NewNode::File, 0o644, 0, 0)?;
                        w.write(st.ino, 0, d)?;
                    }
                }
            }
        }
        Ok(())
    })
    .unwrap()
}

fn lookup(s: &Session, path: &str) -> Option<u64> {
    let mut ino = 1;
    for c in path.split('/').filter(|c| !c.is_empty()) {
        ino = s.lookup(ino, c.as_bytes()).ok()?.ino;
    }
    Some(ino)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The check, which skips equal subtrees by id, answers as the plain reading
    /// of the rules over every path; a whole-tree result is always allowed.
    #[test]
    fn the_check_answers_as_the_rules_read_plainly(
        o in spec(),
        src in spec(),
        steps in proptest::collection::vec(step(), 0..5),
    ) {
        let s = session();
        let store = s.store().clone();
        let (ours, source) = (tree(&s, &o), tree(&s, &src));
        let result = compose(&s, ours, source, &steps);
        let fast = check(&*store, A, "test", ours, result, &[source]);
        let want = plain(&*store, ours, result, &[source]);
        prop_assert_eq!(fast.is_ok(), want, "{:?}", fast);
        if let Err(e) = fast {
            prop_assert!(matches!(e, Error::Forbidden(_)), "{e:?}");
        }
        prop_assert!(check(&*store, A, "test", ours, ours, &[source]).is_ok());
        prop_assert!(check(&*store, A, "test", ours, source, &[source]).is_ok());
    }
}
