//! The merge engine on a `MemStore`: for random flat trees base / ours / theirs,
//! a path one side left alone takes the other side's version, equal changes are
//! no conflict, and only paths both sides changed differently conflict.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::{ConflictKind, Theirs, merge, merge_within, tree_changes};
use crate::diff::{Tree, read_file};
use crate::id::NodeId;
use crate::session::posix::NewNode;
use crate::session::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};

type Files = BTreeMap<String, Vec<u8>>;

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "t", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

fn tree_of(s: &Session, files: &Files) -> NodeId {
    let empty = empty_root(&**s.store(), 0, 0).unwrap();
    s.build_beside(empty, &mut |w| {
        for (name, data) in files {
            let ino = w
                .create_node(1, name.as_bytes(), NewNode::File, 0o644, 0, 0)?
                .ino;
            w.write(ino, 0, data)?;
        }
        Ok(())
    })
    .unwrap()
}

fn files_of(s: &Session, root: NodeId) -> Files {
    let store = s.store();
    let t = Tree::load(&**store, root).unwrap();
    let mut out = Files::new();
    for i in 0..4 {
        let name = format!("f{i}");
        if let Some(r) = t.lookup(&**store, name.as_bytes()).unwrap() {
            out.insert(name, read_file(&**store, &r, u64::MAX).unwrap());
        }
    }
    out
}

fn version() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        Just(None),
        Just(Some(b"one\n".to_vec())),
        Just(Some(b"two\n".to_vec())),
        Just(Some(b"three\n".to_vec())),
    ]
}

fn files(vs: &[Option<Vec<u8>>]) -> Files {
    vs.iter()
        .enumerate()
        .filter_map(|(i, v)| v.clone().map(|d| (format!("f{i}"), d)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn one_sided_changes_are_taken_and_only_real_clashes_conflict(
        b in proptest::collection::vec(version(), 4),
        o in proptest::collection::vec(version(), 4),
        t in proptest::collection::vec(version(), 4),
    ) {
        let s = session();
        let (bf, of, tf) = (files(&b), files(&o), files(&t));
        let (br, or, tr) = (tree_of(&s, &bf), tree_of(&s, &of), tree_of(&s, &tf));
        let changes = tree_changes(&**s.store(), br, tr).unwrap();
        let m = merge(&s, or, &changes, Theirs::Tree(tr)).unwrap();
        let got = files_of(&s, m.root);
        for i in 0..4 {
            let p = format!("f{i}");
            let (bv, ov, tv, gv) = (bf.get(&p), of.get(&p), tf.get(&p), got.get(&p));
            let conflicted = m.conflicts.iter().any(|c| c.path == p);
            if ov == bv {
                prop_assert_eq!(gv, tv, "{}: ours unchanged takes theirs", p);
                prop_assert!(!conflicted);
            } else if tv == bv || ov == tv {
                prop_assert_eq!(gv, ov, "{}: theirs unchanged (or equal) keeps ours", p);
                prop_assert!(!conflicted);
            } else {
                prop_assert!(conflicted, "{}: both changed differently: {:?}", p, m.conflicts);
            }
        }
    }
}

#[test]
fn disjoint_line_edits_merge_and_overlaps_conflict() {
    let s = session();
    let base: Files = [("f0".to_string(), b"a\nb\nc\nd\ne\n".to_vec())].into();
    let ours: Files = [("f0".to_string(), b"A\nb\nc\nd\ne\n".to_vec())].into();
    let theirs: Files = [("f0".to_string(), b"a\nb\nc\nd\nE\n".to_vec())].into();
    let (br, or, tr) = (tree_of(&s, &base), tree_of(&s, &ours), tree_of(&s, &theirs));
    let changes = tree_changes(&**s.store(), br, tr).unwrap();
    let m = merge(&s, or, &changes, Theirs::Tree(tr)).unwrap();
    assert!(m.conflicts.is_empty());
    assert_eq!(files_of(&s, m.root)["f0"], b"A\nb\nc\nd\nE\n");
    let theirs: Files = [("f0".to_string(), b"X\nb\nc\nd\ne\n".to_vec())].into();
    let tr = tree_of(&s, &theirs);
    let changes = tree_changes(&**s.store(), br, tr).unwrap();
    let m = merge(&s, or, &changes, Theirs::Tree(tr)).unwrap();
    assert_eq!(m.conflicts.len(), 1);
    assert_eq!(m.conflicts[0].kind, super::ConflictKind::Content);
    let text = String::from_utf8(files_of(&s, m.root)["f0"].clone()).unwrap();
    assert!(
        text.contains("<<<<<<< ours\nA\n") && text.contains(">>>>>>> theirs"),
        "{text}"
    );
}

/// A tree built by `f` on an empty private session.
fn built(s: &Session, f: &mut dyn FnMut(&Session) -> crate::error::Result<()>) -> NodeId {
    let empty = empty_root(&**s.store(), 0, 0).unwrap();
    s.build_beside(empty, f).unwrap()
}

fn file(w: &Session, name: &str, data: &[u8], perm: u32) -> crate::error::Result<()> {
    let ino = w
        .create_node(1, name.as_bytes(), NewNode::File, perm, 0, 0)?
        .ino;
    w.write(ino, 0, data)?;
    Ok(())
}

#[test]
fn kinds_modes_links_and_directories() {
    let s = session();
    let base = built(&s, &mut |w| {
        file(w, "mode", b"x\n", 0o644)?;
        file(w, "clash", b"c\n", 0o644)?;
        w.create_node(1, b"link", NewNode::Symlink(b"a"), 0o777, 0, 0)?;
        w.create_node(1, b"gone", NewNode::Dir, 0o755, 0, 0)?;
        Ok(())
    });
    // Ours: `clash` became a directory, the link points elsewhere.
    let ours = built(&s, &mut |w| {
        file(w, "mode", b"x\n", 0o644)?;
        let d = w.create_node(1, b"clash", NewNode::Dir, 0o755, 0, 0)?.ino;
        let ino = w.create_node(d, b"in", NewNode::File, 0o644, 0, 0)?.ino;
        w.write(ino, 0, b"i\n")?;
        w.create_node(1, b"link", NewNode::Symlink(b"ours"), 0o777, 0, 0)?;
        w.create_node(1, b"gone", NewNode::Dir, 0o755, 0, 0)?;
        Ok(())
    });
    // Theirs: `mode` executable, `clash` edited, the link elsewhere, `gone` gone,
    // a new directory with a file.
    let theirs = built(&s, &mut |w| {
        file(w, "mode", b"x\n", 0o755)?;
        file(w, "clash", b"c2\n", 0o644)?;
        w.create_node(1, b"link", NewNode::Symlink(b"theirs"), 0o777, 0, 0)?;
        let d = w.create_node(1, b"new", NewNode::Dir, 0o755, 0, 0)?.ino;
        let ino = w.create_node(d, b"f", NewNode::File, 0o644, 0, 0)?.ino;
        w.write(ino, 0, b"n\n")?;
        Ok(())
    });
    let changes = tree_changes(&**s.store(), base, theirs).unwrap();
    let m = merge(&s, ours, &changes, Theirs::Tree(theirs)).unwrap();
    let store = s.store();
    let t = Tree::load(&**store, m.root).unwrap();
    let at = |p: &str| t.lookup(&**store, p.as_bytes()).unwrap();
    assert_eq!(
        at("mode").unwrap().attr.perm & 0o777,
        0o755,
        "theirs' mode taken"
    );
    assert_eq!(
        at("clash").unwrap().kind,
        crate::tree::Kind::Dir,
        "ours kept"
    );
    assert_eq!(
        read_file(&**store, &at("clash~theirs").unwrap(), 99).unwrap(),
        b"c2\n"
    );
    assert_eq!(
        at("link").unwrap().content,
        crate::tree::Content::Bytes(b"ours".to_vec())
    );
    assert!(
        at("gone").is_none(),
        "an empty directory theirs deleted goes"
    );
    assert_eq!(
        read_file(&**store, &at("new/f").unwrap(), 99).unwrap(),
        b"n\n"
    );
    let kinds: Vec<(&str, super::ConflictKind)> = m
        .conflicts
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("clash", super::ConflictKind::Kind),
            ("link", super::ConflictKind::Kind)
        ]
    );
}

/// Theirs' version written beside ours refers to theirs' stored content (the
/// same file node), and past the read budget a file both changed is not read: a
/// `binary` conflict naming the budget, theirs beside it by node id.
#[test]
fn theirs_beside_is_by_node_id_and_the_read_budget_holds() {
    let s = session();
    let text = |edit: &str| format!("{edit}\nb\nc\nd\ne\n").into_bytes();
    let tail = |edit: &str| format!("a\nb\nc\nd\n{edit}\n").into_bytes();
    let files = |f0: Vec<u8>, f1: Vec<u8>, bin: &[u8]| -> Files {
        [
            ("f0".to_string(), f0),
            ("f1".to_string(), f1),
            ("f2".to_string(), bin.to_vec()),
        ]
        .into()
    };
    let base = tree_of(&s, &files(text("a"), text("a"), b"\0base"));
    let ours = tree_of(&s, &files(text("A"), text("A"), b"\0ours"));
    let theirs = tree_of(&s, &files(tail("E"), tail("E"), b"\0theirs"));
    let changes = tree_changes(&**s.store(), base, theirs).unwrap();
    // Enough for f0 (10-byte texts: ours compared with theirs and with the base,
    // 40 bytes, then the three texts read, 30), not for f1's texts.
    let m = merge_within(&s, ours, &changes, Theirs::Tree(theirs), 100).unwrap();
    let kinds: Vec<(&str, ConflictKind)> = m
        .conflicts
        .iter()
        .map(|c| (c.path.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![("f1", ConflictKind::Binary), ("f2", ConflictKind::Binary)]
    );
    assert!(
        m.conflicts[0].detail.contains("read budget"),
        "{:?}",
        m.conflicts
    );
    let got = files_of(&s, m.root);
    assert_eq!(got["f0"], b"A\nb\nc\nd\nE\n", "f0 line-merged");
    assert_eq!(got["f1"], text("A"), "ours kept");
    let store = s.store();
    let (t, mine) = (
        Tree::load(&**store, theirs).unwrap(),
        Tree::load(&**store, m.root).unwrap(),
    );
    for (p, at) in [("f1", "f1~theirs"), ("f2", "f2~theirs")] {
        let theirs_rec = t.lookup(&**store, p.as_bytes()).unwrap().unwrap();
        let beside = mine.lookup(&**store, at.as_bytes()).unwrap().unwrap();
        assert_eq!(beside.content, theirs_rec.content, "{at}: theirs' node");
        assert_eq!(beside.attr.size, theirs_rec.attr.size);
    }
    // The whole budget: f1 line-merges too.
    let m = merge(&s, ours, &changes, Theirs::Tree(theirs)).unwrap();
    assert_eq!(m.conflicts.len(), 1, "{:?}", m.conflicts);
}
