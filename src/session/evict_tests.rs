//! Eviction of forgotten clean inodes (issue 12, D9) on the in-memory store: the
//! table stays bounded, evicted inodes come back unchanged, and nothing the kernel
//! holds, nothing unflushed and no hard link is lost.

use std::sync::Arc;

use super::posix::NewNode;
use super::{Session, Stat, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};
use crate::tree::Kind;

fn session() -> (Arc<dyn ObjectStore>, Session) {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "ev", root, 0, 1).unwrap();
    let s = Session::open(store.clone(), rec).unwrap();
    (store, s)
}

fn mk(s: &Session, parent: u64, name: &str, node: NewNode<'_>) -> u64 {
    s.create_node(parent, name.as_bytes(), node, 0o644, 1000, 1000)
        .unwrap()
        .ino
}

/// Content of file number `n`: sizes from empty through inline to several blocks.
fn content(n: usize) -> Vec<u8> {
    let len = match n % 5 {
        0 => 0,
        1 => 10,
        2 => 3000,
        3 => 70_000,
        _ => 200_000,
    };
    (0..len).map(|i| (i * 7 + n) as u8).collect()
}

fn read_all(s: &Session, ino: u64) -> Vec<u8> {
    let size = s.getattr(ino).unwrap().attr.size;
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let d = s.read(ino, out.len() as u64, 1 << 20).unwrap();
        assert!(!d.is_empty());
        out.extend(d);
    }
    out
}

/// Look up + forget 100,000 files (100 directories of 1,000): with forgets alone
/// the table stays far below the tree's size, and once swept it holds the root
/// only. Without eviction it kept all 100,101 inodes (checked: fails with the sweep
/// disabled).
#[test]
fn forgetting_100k_files_bounds_the_table() {
    let (_store, s) = session();
    let (dirs, per) = (100usize, 1000usize);
    let mut dir_inos = Vec::new();
    for d in 0..dirs {
        let dino = mk(&s, 1, &format!("d{d:03}"), NewNode::Dir);
        for f in 0..per {
            let ino = mk(&s, dino, &format!("f{f:04}"), NewNode::File);
            if f % 100 == 0 {
                s.write(ino, 0, format!("{d}/{f}").as_bytes()).unwrap();
            }
            s.forget(ino, 1);
        }
        dir_inos.push(dino);
    }
    s.flush().unwrap();
    for &d in &dir_inos {
        s.forget(d, 1);
    }
    // Read every file once through lookups, as `cat` of each path would.
    let mut peak = 0;
    for d in 0..dirs {
        let dino = s.lookup(1, format!("d{d:03}").as_bytes()).unwrap().ino;
        for f in 0..per {
            let st = s.lookup(dino, format!("f{f:04}").as_bytes()).unwrap();
            let data = s.read(st.ino, 0, 100).unwrap();
            if f % 100 == 0 {
                assert_eq!(data, format!("{d}/{f}").as_bytes());
            }
            s.forget(st.ino, 1);
        }
        s.forget(dino, 1);
        peak = peak.max(s.live_inodes());
    }
    let total = dirs * per + dirs + 1;
    assert!(
        peak < total / 4,
        "the table grew to {peak} of {total} inodes while reading once"
    );
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 1, "only the root stays");
    // Everything still reads back.
    let dino = s.lookup(1, b"d042").unwrap().ino;
    let f = s.lookup(dino, b"f0300").unwrap().ino;
    assert_eq!(s.read(f, 0, 100).unwrap(), b"42/300");
}

fn stat_eq(a: &Stat, b: &Stat) {
    assert_eq!(
        (a.ino, a.kind, a.attr, a.blocks),
        (b.ino, b.kind, b.attr, b.blocks)
    );
}

/// An evicted inode looked up again has the same inode number, attributes, xattrs,
/// content and symlink target; a directory lists the same names in the same order.
#[test]
fn relookup_returns_the_same_inode() {
    let (_store, s) = session();
    let d = mk(&s, 1, "d", NewNode::Dir);
    let sub = mk(&s, d, "sub", NewNode::Dir);
    let mut files = Vec::new();
    for n in 0..20 {
        let ino = mk(
            &s,
            if n % 2 == 0 { d } else { sub },
            &format!("f{n}"),
            NewNode::File,
        );
        s.write(ino, 0, &content(n)).unwrap();
        files.push(ino);
    }
    s.setxattr(files[3], b"user.k", b"v", 0).unwrap();
    let l = mk(&s, d, "link", NewNode::Symlink(b"f0"));
    s.flush().unwrap();
    // Read everything (loads block maps), then record what the kernel saw.
    let mut seen = Vec::new();
    for (n, &ino) in files.iter().enumerate() {
        assert_eq!(read_all(&s, ino), content(n));
        seen.push(s.getattr(ino).unwrap());
    }
    let listing = |s: &Session, dir: u64| -> Vec<(u64, Vec<u8>, u64)> {
        s.readdir_page(dir, 0, 100, false)
            .unwrap()
            .into_iter()
            .map(|(c, e, _)| (c, e.name, e.ino))
            .collect()
    };
    let list_d = listing(&s, d);
    let (st_d, st_sub, st_l) = (
        s.getattr(d).unwrap(),
        s.getattr(sub).unwrap(),
        s.getattr(l).unwrap(),
    );
    for &ino in files.iter().chain([&l, &sub, &d]) {
        s.forget(ino, 1);
    }
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 1);
    assert!(s.getattr(files[0]).is_err(), "evicted");
    // Back, by path.
    stat_eq(&s.lookup(1, b"d").unwrap(), &st_d);
    stat_eq(&s.lookup(d, b"sub").unwrap(), &st_sub);
    stat_eq(&s.lookup(d, b"link").unwrap(), &st_l);
    assert_eq!(s.readlink(l).unwrap(), b"f0");
    for (n, &ino) in files.iter().enumerate() {
        let parent = if n % 2 == 0 { d } else { sub };
        let st = s.lookup(parent, format!("f{n}").as_bytes()).unwrap();
        stat_eq(&st, &seen[n]);
        assert_eq!(read_all(&s, ino), content(n), "file {n}");
    }
    assert_eq!(s.getxattr(files[3], b"user.k").unwrap(), b"v");
    assert_eq!(listing(&s, d), list_d);
    // And the tree is unchanged: nothing to write.
    let before = s.flush().unwrap();
    s.write(files[1], 0, b"x").unwrap();
    assert_ne!(s.flush().unwrap(), before);
}

/// Inodes the kernel still holds (looked up or open) and inodes with unflushed
/// changes stay, with their data; unflushed ones leave after the flush that stores
/// them, and held ones after their forget.
#[test]
fn held_and_dirty_inodes_stay() {
    let (_store, s) = session();
    let d = mk(&s, 1, "d", NewNode::Dir);
    let held = mk(&s, d, "held", NewNode::File);
    let dirty = mk(&s, d, "dirty", NewNode::File);
    let quiet = mk(&s, d, "quiet", NewNode::File);
    for (ino, text) in [(held, "held"), (dirty, "dirty"), (quiet, "quiet")] {
        s.write(ino, 0, text.as_bytes()).unwrap();
    }
    s.flush().unwrap();
    // `held` keeps its kernel reference (an open file has one); `dirty` changes
    // after the flush; both are otherwise forgotten like the rest.
    s.write(dirty, 5, b"-more").unwrap();
    s.forget(dirty, 1);
    s.forget(quiet, 1);
    s.forget(d, 1);
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 5, "nothing evicted while held or dirty");
    assert_eq!(s.read(held, 0, 10).unwrap(), b"held");
    assert_eq!(s.read(dirty, 0, 20).unwrap(), b"dirty-more");
    // The flush stores `dirty`: still held by `held`, nothing leaves.
    s.flush().unwrap();
    assert_eq!(s.live_inodes(), 5);
    // The last reference goes: the directory unloads, and then the root's entries.
    s.forget(held, 1);
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 1);
    assert_eq!(s.lookup(1, b"d").unwrap().ino, d);
    for (name, ino, text) in [
        ("held", held, "held"),
        ("dirty", dirty, "dirty-more"),
        ("quiet", quiet, "quiet"),
    ] {
        assert_eq!(s.lookup(d, name.as_bytes()).unwrap().ino, ino);
        assert_eq!(s.read(ino, 0, 20).unwrap(), text.as_bytes());
    }
}

/// A directory forgotten while it has unflushed changes is unloaded by the flush
/// that stores them (no further forget needed).
#[test]
fn flush_unloads_what_waited_for_it() {
    let (_store, s) = session();
    let d = mk(&s, 1, "d", NewNode::Dir);
    for n in 0..50 {
        let f = mk(&s, d, &format!("f{n}"), NewNode::File);
        s.write(f, 0, b"data").unwrap();
        s.forget(f, 1);
    }
    s.forget(d, 1);
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 52);
    s.flush().unwrap();
    assert_eq!(s.live_inodes(), 1);
    let d = s.lookup(1, b"d").unwrap().ino;
    let f = s.lookup(d, b"f7").unwrap().ino;
    assert_eq!(s.read(f, 0, 10).unwrap(), b"data");
}

/// Hard links survive eviction of the directories naming them: one inode, both
/// names, shared content and link count, also across a reopen.
#[test]
fn hard_links_survive() {
    let (store, s) = session();
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
    // Root and the hard-linked inode (its record lives in the link table).
    assert_eq!(s.live_inodes(), 2);
    let a = s.lookup(1, b"a").unwrap().ino;
    let b = s.lookup(1, b"b").unwrap().ino;
    let via_a = s.lookup(a, b"f").unwrap();
    let via_b = s.lookup(b, b"g").unwrap();
    assert_eq!(via_a.ino, f);
    assert_eq!(via_b.ino, f);
    assert_eq!(via_a.attr.nlink, 2);
    s.write(f, 6, b"!").unwrap();
    s.flush().unwrap();
    for ino in [f, f, a, b] {
        s.forget(ino, 1);
    }
    s.evict_forgotten();
    let b = s.lookup(1, b"b").unwrap().ino;
    let g = s.lookup(b, b"g").unwrap().ino;
    assert_eq!(s.read(g, 0, 20).unwrap(), b"shared!");
    drop(s);
    let rec = super::load_record(&*store, "ev").unwrap().unwrap();
    let s = Session::open(store, rec).unwrap();
    let a = s.lookup(1, b"a").unwrap().ino;
    let f2 = s.lookup(a, b"f").unwrap();
    assert_eq!((f2.ino, f2.attr.nlink), (f, 2));
    assert_eq!(s.read(f, 0, 20).unwrap(), b"shared!");
}

/// A file unlinked while open stays readable through an eviction of its former
/// directory, and is reaped at its last forget.
#[test]
fn open_unlinked_file_stays() {
    let (_store, s) = session();
    let d = mk(&s, 1, "d", NewNode::Dir);
    let f = mk(&s, d, "f", NewNode::File);
    s.write(f, 0, b"orphan").unwrap();
    s.flush().unwrap();
    s.remove(d, b"f", false).unwrap();
    s.flush().unwrap();
    s.forget(d, 1);
    s.evict_forgotten();
    assert_eq!(s.read(f, 0, 10).unwrap(), b"orphan");
    assert_eq!(s.live_inodes(), 2, "root and the orphan");
    s.forget(f, 1);
    assert_eq!(s.live_inodes(), 1);
}

/// A listing in progress in a directory the kernel holds survives an unload of its
/// entries: cookies come back the same when they were never disturbed, and a
/// directory whose cookies were disturbed by a change is not unloaded while held.
#[test]
fn listings_survive_unloads() {
    let (_store, s) = session();
    let d = mk(&s, 1, "d", NewNode::Dir);
    for n in 0..30 {
        let f = mk(&s, d, &format!("f{n:02}"), NewNode::File);
        s.forget(f, 1);
    }
    s.flush().unwrap();
    let names = |p: &[(u64, super::posix::DirEntry, Option<Stat>)]| -> Vec<Vec<u8>> {
        p.iter().map(|(_, e, _)| e.name.clone()).collect()
    };
    // `d` stays held (being listed); read half the listing, unload, read on.
    let first = s.readdir_page(d, 0, 17, false).unwrap();
    let cookie = first.last().unwrap().0;
    s.lock().evict.note_dir(d);
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 2, "entries of the held directory unloaded");
    let rest = s.readdir_page(d, cookie, 100, false).unwrap();
    let mut all = names(&first);
    all.extend(names(&rest));
    let mut want: Vec<Vec<u8>> = vec![b".".to_vec(), b"..".to_vec()];
    want.extend((0..30).map(|n| format!("f{n:02}").into_bytes()));
    assert_eq!(all, want);
    // A change after the listing numbered the names: held, it is not unloaded.
    let g = mk(&s, d, "a-new", NewNode::File);
    s.forget(g, 1);
    s.flush().unwrap();
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 33);
    // Forgotten by the kernel (no listing can be in progress): unloaded.
    s.forget(d, 1);
    s.evict_forgotten();
    assert_eq!(s.live_inodes(), 1);
}

/// A forgotten chain 10,000 directories deep unloads on a small stack (the sweep
/// does not recurse per level), and reads back.
#[test]
fn deep_chain_unloads_on_a_small_stack() {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let (_store, s) = session();
            let mut dir = 1;
            let mut chain = Vec::new();
            for _ in 0..10_000 {
                dir = mk(&s, dir, "d", NewNode::Dir);
                chain.push(dir);
            }
            let f = mk(&s, dir, "f", NewNode::File);
            s.write(f, 0, b"bottom").unwrap();
            s.flush().unwrap();
            s.forget(f, 1);
            for &d in chain.iter().rev() {
                s.forget(d, 1);
            }
            s.evict_forgotten();
            assert_eq!(s.live_inodes(), 1);
            let mut dir = 1;
            for &want in &chain {
                dir = s.lookup(dir, b"d").unwrap().ino;
                assert_eq!(dir, want);
            }
            let f2 = s.lookup(dir, b"f").unwrap();
            assert_eq!((f2.ino, f2.kind), (f, Kind::File));
            assert_eq!(s.read(f, 0, 10).unwrap(), b"bottom");
        })
        .unwrap()
        .join()
        .unwrap();
}
