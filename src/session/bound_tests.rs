//! Records a workspace can grow stay storable (issue 21, defect 2): the extended
//! attributes of one inode and the hard-link table are bounded at the call, and the
//! link table's running bound (`State::link_bytes`) follows every change.

use std::sync::Arc;

use super::posix::NewNode;
use super::{LINK_TABLE_MAX, Session, XATTR_BYTES_MAX, XATTR_COUNT_MAX, create_record, empty_root};
use crate::error::Error;
use crate::store::{MemStore, ObjectStore};

fn session() -> (Arc<dyn ObjectStore>, Session) {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "b", root, 0, 1).unwrap();
    let s = Session::open(store.clone(), rec).unwrap();
    (store, s)
}

fn file(s: &Session, name: &str) -> u64 {
    s.create_node(1, name.as_bytes(), NewNode::File, 0o644, 1000, 1000)
        .unwrap()
        .ino
}

fn enospc<T: std::fmt::Debug>(r: crate::error::Result<T>) {
    match r {
        Err(Error::Posix(e)) if e == libc::ENOSPC => {}
        r => panic!("expected ENOSPC, got {r:?}"),
    }
}

fn link_bytes(s: &Session) -> u64 {
    s.lock().link_bytes
}

/// Values up to the byte budget, then `ENOSPC`; a replacement counts the
/// difference; small attributes stop at the count cap; the session flushes.
#[test]
fn xattrs_of_one_inode_are_bounded_and_the_session_flushes() {
    let (_store, s) = session();
    let f = file(&s, "f");
    s.setxattr(f, b"user.a", &[1; 65536], 0).unwrap();
    s.setxattr(f, b"user.b", &[2; 30000], 0).unwrap();
    enospc(s.setxattr(f, b"user.c", &[3; 4000], 0));
    // Growing an existing value past the budget: refused; shrinking it: fine.
    enospc(s.setxattr(f, b"user.b", &[2; 40000], 0));
    s.setxattr(f, b"user.b", &[2; 10], 0).unwrap();
    s.setxattr(f, b"user.c", &[3; 4000], 0).unwrap();
    let total: usize = s
        .lock()
        .get(f)
        .unwrap()
        .xattrs
        .iter()
        .map(|(k, v)| k.len() + v.len() + 16)
        .sum();
    assert!(total <= XATTR_BYTES_MAX);
    let g = file(&s, "g");
    for i in 0..XATTR_COUNT_MAX {
        s.setxattr(g, format!("user.{i}").as_bytes(), b"", 0)
            .unwrap();
    }
    enospc(s.setxattr(g, b"user.one-more", b"", 0));
    s.removexattr(g, b"user.0").unwrap();
    s.setxattr(g, b"user.one-more", b"", 0).unwrap();
    s.flush().unwrap();
}

/// `link_bytes` is the sum of the link table's record bounds through link,
/// setxattr, removexattr and unlink, and returns to zero.
#[test]
fn the_link_table_bound_follows_every_change() {
    let (_store, s) = session();
    let f = file(&s, "f");
    s.setxattr(f, b"user.a", &[1; 1000], 0).unwrap();
    assert_eq!(link_bytes(&s), 0);
    s.link(f, 1, b"f2").unwrap();
    let bound = |s: &Session| s.lock().get(f).unwrap().record_bound();
    assert_eq!(link_bytes(&s), bound(&s));
    s.link(f, 1, b"f3").unwrap();
    assert_eq!(link_bytes(&s), bound(&s));
    s.setxattr(f, b"user.b", &[1; 5000], 0).unwrap();
    s.setxattr(f, b"user.a", &[1; 10], 0).unwrap();
    assert_eq!(link_bytes(&s), bound(&s));
    s.removexattr(f, b"user.b").unwrap();
    assert_eq!(link_bytes(&s), bound(&s));
    s.flush().unwrap();
    for n in ["f", "f2", "f3"] {
        s.remove(1, n.as_bytes(), false).unwrap();
    }
    assert_eq!(link_bytes(&s), 0);
}

/// Hard-linked inodes carrying full attribute budgets: the link that would take
/// the table past its budget is refused, and so is growing a linked record's
/// attributes; the session flushes (the root node is storable).
#[test]
fn the_link_table_is_bounded_and_the_session_flushes() {
    let (_store, s) = session();
    let mut n = 0;
    loop {
        let f = file(&s, &format!("f{n}"));
        s.setxattr(f, b"user.a", &[1; 65536], 0).unwrap();
        s.setxattr(f, b"user.b", &[2; 30000], 0).unwrap();
        match s.link(f, 1, format!("l{n}").as_bytes()) {
            Ok(_) => n += 1,
            Err(e) => {
                assert!(matches!(e, Error::Posix(libc::ENOSPC)), "{e:?}");
                break;
            }
        }
        assert!(n < 1000, "no bound on the link table");
    }
    assert!(link_bytes(&s) <= LINK_TABLE_MAX);
    assert!(link_bytes(&s) + 100_000 > LINK_TABLE_MAX, "{n} links");
    // A linked record may not grow past the table's budget either.
    let f = s.lookup(1, b"f0").unwrap().ino;
    s.removexattr(f, b"user.b").unwrap();
    let was = link_bytes(&s);
    s.lock().link_bytes = LINK_TABLE_MAX - 100;
    enospc(s.setxattr(f, b"user.b", &[2; 100], 0));
    s.setxattr(f, b"user.b", &[2; 10], 0).unwrap();
    assert_eq!(link_bytes(&s), LINK_TABLE_MAX - 100 + 32);
    s.lock().link_bytes = was + 32;
    s.flush().unwrap();
}
