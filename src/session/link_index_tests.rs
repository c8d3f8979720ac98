//! The link index (`super`) on a `MemStore`: after every change it equals a scan
//! of the table, and the touched paths of a hard-linked file are all its names.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::session::posix::NewNode;
use crate::session::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};

fn session() -> Session {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "li", root, 0, 1).unwrap();
    Session::open(store, rec).unwrap()
}

fn mk(s: &Session, parent: u64, name: &str, node: NewNode<'_>) -> u64 {
    s.create_node(parent, name.as_bytes(), node, 0o644, 0, 0)
        .unwrap()
        .ino
}

/// The index entries of `ino`: (directory, count).
fn dirs(s: &Session, ino: u64) -> Vec<(u64, u32)> {
    let st = s.lock();
    st.check_link_index();
    st.link_dirs
        .range((ino, 0)..=(ino, u64::MAX))
        .map(|(&(_, d), &n)| (d, n))
        .collect()
}

/// The touched paths a flush would record after a write to `ino`.
fn names(s: &Session, ino: u64) -> Vec<String> {
    s.touch_ino(ino);
    let mut st = s.lock();
    let got = s.take_touched(&mut st);
    st.check_link_index();
    got.into_iter()
        .map(|p| String::from_utf8(p).unwrap())
        .collect()
}

#[test]
fn link_unlink_rename_rmdir_keep_the_index() {
    let s = session();
    let a = mk(&s, 1, "a", NewNode::Dir);
    let b = mk(&s, 1, "b", NewNode::Dir);
    let c = mk(&s, a, "c", NewNode::Dir);
    let f = mk(&s, a, "f", NewNode::File);
    assert_eq!(dirs(&s, f), [], "single-linked: not indexed");
    assert_eq!(names(&s, f), ["a/f"]);

    // link: the first name is counted when the file becomes hard-linked.
    s.link(f, b, b"g").unwrap();
    assert_eq!(dirs(&s, f), [(a, 1), (b, 1)]);
    s.link(f, a, b"h").unwrap();
    assert_eq!(dirs(&s, f), [(a, 2), (b, 1)]);
    assert_eq!(names(&s, f), ["a/f", "a/h", "b/g"]);

    // unlink of one name.
    s.remove(a, b"h", false).unwrap();
    assert_eq!(dirs(&s, f), [(a, 1), (b, 1)]);
    assert_eq!(names(&s, f), ["a/f", "b/g"]);

    // rename to another directory.
    s.rename(b, b"g", c, b"g2", 0).unwrap();
    assert_eq!(dirs(&s, f), [(a, 1), (c, 1)]);
    assert_eq!(names(&s, f), ["a/c/g2", "a/f"]);

    // rename over a hard-linked name: down to one name, the file leaves the link
    // table and its directory holds it again (`unlink_to_one`).
    let y = mk(&s, 1, "y", NewNode::File);
    s.rename(1, b"y", a, b"f", 0).unwrap();
    assert_eq!(dirs(&s, f), []);
    assert!(!s.lock().links.contains(&f) && !s.lock().inodes[&f].hardlink);
    assert_eq!(s.lock().inodes[&f].parent, c);
    assert_eq!(names(&s, f), ["a/c/g2"]);
    assert_eq!(names(&s, y), ["a/f"]);
    // a single-linked name over another file.
    let x = mk(&s, b, "x", NewNode::File);
    s.rename(c, b"g2", b, b"x", 0).unwrap();
    assert_eq!(dirs(&s, f), []);
    assert_eq!(dirs(&s, x), []);
    assert_eq!(names(&s, f), ["b/x"]);

    // hard-linked again; exchange a hard-linked name with a single-linked one.
    s.link(f, c, b"k").unwrap();
    assert_eq!(dirs(&s, f), [(b, 1), (c, 1)]);
    s.rename(c, b"k", a, b"f", libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(dirs(&s, f), [(a, 1), (b, 1)]);
    assert_eq!(names(&s, f), ["a/f", "b/x"]);
    assert_eq!(names(&s, y), ["a/c/k"]);

    // rename of a parent directory: same index, names under the new path.
    // (The FUSE layer notes it first: that drops cached directory paths.)
    s.touch_rename(1, b"a", b, b"a2");
    s.rename(1, b"a", b, b"a2", 0).unwrap();
    let noted = s.take_touched(&mut s.lock());
    assert!(noted.contains(b"b/a2/f".as_slice()), "{noted:?}");
    assert_eq!(dirs(&s, f), [(a, 1), (b, 1)]);
    assert_eq!(names(&s, f), ["b/a2/f", "b/x"]);

    // rmdir of a directory that held a name of it.
    s.remove(c, b"k", false).unwrap();
    s.remove(a, b"c", true).unwrap();
    let d = mk(&s, 1, "d", NewNode::Dir);
    s.rename(a, b"f", d, b"f", 0).unwrap();
    s.remove(b, b"a2", true).unwrap();
    assert_eq!(dirs(&s, f), [(b, 1), (d, 1)]);
    assert_eq!(names(&s, f), ["b/x", "d/f"]);

    // the last names go: the inode leaves the link table at one name, then the table.
    s.remove(b, b"x", false).unwrap();
    assert_eq!(dirs(&s, f), []);
    assert_eq!(names(&s, f), ["d/f"]);
    s.remove(d, b"f", false).unwrap();
    s.forget(f, 10);
    assert!(!s.lock().inodes.contains_key(&f));
    assert_eq!(dirs(&s, f), []);
    assert!(names(&s, f).is_empty());
}

/// Unloading a directory drops its entries from the index; loading it again
/// counts them again (the link inode stays in the table throughout).
#[test]
fn unload_and_reload_keep_the_index() {
    let s = session();
    let a = mk(&s, 1, "a", NewNode::Dir);
    let b = mk(&s, 1, "b", NewNode::Dir);
    let f = mk(&s, a, "f", NewNode::File);
    s.write(f, 0, b"shared").unwrap();
    s.link(f, b, b"g").unwrap();
    s.flush().unwrap();
    for ino in [f, f, a, b] {
        s.forget(ino, 1);
    }
    s.evict_forgotten();
    assert!(s.lock().inodes.contains_key(&f), "link inodes stay");
    assert_eq!(dirs(&s, f), []);
    // Only loaded directories are named (as a scan of the table finds them).
    assert!(names(&s, f).is_empty());
    let b2 = s.lookup(1, b"b").unwrap().ino;
    assert_eq!(s.lookup(b2, b"g").unwrap().ino, f);
    assert_eq!(dirs(&s, f), [(b2, 1)]);
    assert_eq!(names(&s, f), ["b/g"]);
    let a2 = s.lookup(1, b"a").unwrap().ino;
    assert_eq!(s.lookup(a2, b"f").unwrap().ino, f);
    assert_eq!(dirs(&s, f), [(a2, 1), (b2, 1)]);
    assert_eq!(names(&s, f), ["a/f", "b/g"]);
}

/// git's loose objects: a temporary file, link(tmp, obj), unlink(tmp), fsync; the
/// touched paths are each object's final name and temporary name, however many.
#[test]
fn git_style_link_unlink_many() {
    let s = session();
    let objects = mk(&s, 1, "objects", NewNode::Dir);
    let fan: Vec<u64> = (0..4)
        .map(|i| mk(&s, objects, &format!("{i:02x}"), NewNode::Dir))
        .collect();
    let mut want = BTreeSet::new();
    for i in 0..200u64 {
        let tmp = format!("tmp_obj_{i}");
        s.touch_name(objects, tmp.as_bytes());
        let t = mk(&s, objects, &tmp, NewNode::File);
        s.touch_ino(t);
        s.write(t, 0, format!("blob {i}").as_bytes()).unwrap();
        let obj = format!("{i:038}");
        let dir = fan[(i % 4) as usize];
        s.touch_name(dir, obj.as_bytes());
        s.link(t, dir, obj.as_bytes()).unwrap();
        s.touch_name(objects, tmp.as_bytes());
        s.remove(objects, tmp.as_bytes(), false).unwrap();
        s.forget(t, 1);
        want.insert(format!("objects/{tmp}"));
        want.insert(format!("objects/{:02x}/{obj}", i % 4));
        if i % 10 == 9 {
            // What an fsync does: a flush, which takes the touched paths.
            let mut st = s.lock();
            for p in s.take_touched(&mut st) {
                assert!(want.remove(&String::from_utf8(p).unwrap()));
            }
            st.check_link_index();
            assert!(want.is_empty(), "{want:?}");
        }
    }
    let st = s.lock();
    // Each object is down to its one name: none stays in the link table.
    assert!(st.link_dirs.is_empty() && st.links.is_empty());
    assert_eq!(st.link_bytes, 0);
}
