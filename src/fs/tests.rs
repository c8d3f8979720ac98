//! The transport-neutral core without a mount: a `TreeforkFs` over a session on a
//! `MemStore`, its answers read as a transport would read them (listings through
//! sinks collecting into vectors).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::request::{
    DirPlusSink, DirSink, FOPEN_CACHE_DIR, FOPEN_KEEP_CACHE, Kind, Looked, Opened, Req, SetTime,
    SetattrIn, Stat, Xattr,
};
use super::{Negotiated, TTL, TreeforkFs};
use crate::error::Error;
use crate::session::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};
use crate::tree::Timespec;

const ME: Req = Req {
    uid: 0,
    gid: 0,
    pid: 0,
};

fn core() -> Arc<TreeforkFs> {
    let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
    let root = empty_root(&*store, 0, 0).unwrap();
    let rec = create_record(&*store, "fs", root, 0, 1).unwrap();
    let session = Arc::new(Session::open(store, rec).unwrap());
    TreeforkFs::new(session, Arc::new(OnceLock::new()))
}

fn errno<T: std::fmt::Debug>(r: Result<T, Error>) -> i32 {
    r.unwrap_err().errno()
}

/// A readdir buffer holding at most `room` entries.
struct Names {
    room: usize,
    got: Vec<(u64, u64, Kind, Vec<u8>)>,
}

impl DirSink for Names {
    fn add(&mut self, ino: u64, cookie: u64, kind: Kind, name: &[u8]) -> bool {
        if self.got.len() == self.room {
            return true;
        }
        self.got.push((ino, cookie, kind, name.to_vec()));
        false
    }
}

/// A readdirplus buffer holding at most `room` entries.
struct Plus {
    room: usize,
    got: Vec<(u64, Vec<u8>, Stat, Duration)>,
}

impl DirPlusSink for Plus {
    fn add(&mut self, cookie: u64, name: &[u8], stat: &Stat, ttl: Duration) -> bool {
        if self.got.len() == self.room {
            return true;
        }
        self.got.push((cookie, name.to_vec(), *stat, ttl));
        false
    }
}

#[test]
fn a_miss_is_a_negative_entry_and_a_hit_an_entry() {
    let fs = core();
    assert!(matches!(
        fs.lookup(&ME, 1, b"nope").unwrap(),
        Looked::Negative
    ));
    let neg = Looked::Negative.entry();
    assert_eq!((neg.ino, neg.kind), (0, Kind::File));
    let s = fs.mkdir(&ME, 1, b"d", 0o755).unwrap();
    match fs.lookup(&ME, 1, b"d").unwrap() {
        Looked::Found(f) => assert_eq!((f.ino, f.kind), (s.ino, Kind::Dir)),
        Looked::Negative => panic!("d exists"),
    }
    // Another error stays an error.
    let f = fs.create(&ME, 1, b"f", 0o644, 0).unwrap().stat.ino;
    assert_eq!(errno(fs.lookup(&ME, f, b"x")), libc::ENOTDIR);
}

#[test]
fn readdir_fills_the_sink_until_full_and_resumes_from_the_cookie() {
    let fs = core();
    for n in ["a", "b", "c"] {
        fs.create(&ME, 1, n.as_bytes(), 0o644, 0).unwrap();
    }
    let mut first = Names {
        room: 3,
        got: Vec::new(),
    };
    fs.readdir(&ME, 1, 0, 0, &mut first).unwrap();
    let names: Vec<&[u8]> = first.got.iter().map(|e| &e.3[..]).collect();
    assert_eq!(names, [&b"."[..], b"..", b"a"]);
    assert_eq!(first.got[0].2, Kind::Dir);
    let mut rest = Names {
        room: 100,
        got: Vec::new(),
    };
    fs.readdir(&ME, 1, 0, first.got[2].1, &mut rest).unwrap();
    let names: Vec<&[u8]> = rest.got.iter().map(|e| &e.3[..]).collect();
    assert_eq!(names, [&b"b"[..], b"c"]);
    assert!(rest.got.iter().all(|e| e.2 == Kind::File));
}

#[test]
fn readdirplus_sends_dots_without_an_entry_and_gives_back_what_did_not_fit() {
    let fs = core();
    let a = fs.create(&ME, 1, b"a", 0o644, 0).unwrap().stat.ino;
    let b = fs.create(&ME, 1, b"b", 0o644, 0).unwrap().stat.ino;
    let lookups = |ino| fs.session.lock().get(ino).unwrap().lookups;
    let (la, lb) = (lookups(a), lookups(b));
    let mut sink = Plus {
        room: 3,
        got: Vec::new(),
    };
    fs.readdirplus(&ME, 1, 0, 0, &mut sink).unwrap();
    let dots = &sink.got[..2];
    assert!(dots.iter().all(|e| e.2.ino == 0 && e.3 == Duration::ZERO));
    assert_eq!(
        (&sink.got[2].1[..], sink.got[2].2.ino, sink.got[2].3),
        (&b"a"[..], a, TTL)
    );
    // `a` was sent (one reference more); `b` did not fit (its reference given back).
    assert_eq!((lookups(a), lookups(b)), (la + 1, lb));
}

#[test]
fn xattr_answers_the_size_the_value_or_erange() {
    let fs = core();
    let f = fs.create(&ME, 1, b"f", 0o644, 0).unwrap().stat.ino;
    fs.setxattr(&ME, f, b"user.k", b"value", 0, 0).unwrap();
    assert_eq!(fs.getxattr(&ME, f, b"user.k", 0).unwrap(), Xattr::Size(5));
    assert_eq!(errno(fs.getxattr(&ME, f, b"user.k", 4)), libc::ERANGE);
    assert_eq!(
        fs.getxattr(&ME, f, b"user.k", 5).unwrap(),
        Xattr::Data(b"value".to_vec())
    );
    assert_eq!(fs.listxattr(&ME, f, 0).unwrap(), Xattr::Size(7));
    assert_eq!(errno(fs.listxattr(&ME, f, 6)), libc::ERANGE);
    assert_eq!(
        fs.listxattr(&ME, f, 64).unwrap(),
        Xattr::Data(b"user.k\0".to_vec())
    );
    fs.removexattr(&ME, f, b"user.k").unwrap();
    assert_eq!(fs.listxattr(&ME, f, 0).unwrap(), Xattr::Size(0));
}

#[test]
fn open_and_opendir_follow_what_init_settled() {
    let fs = core();
    let f = fs.create(&ME, 1, b"f", 0o644, 0).unwrap();
    assert_eq!((f.fh, f.open_flags), (0, FOPEN_KEEP_CACHE));
    let ino = f.stat.ino;
    assert_eq!(
        fs.open(&ME, ino, libc::O_RDWR).unwrap(),
        Opened {
            fh: 0,
            open_flags: FOPEN_KEEP_CACHE
        }
    );
    assert_eq!(
        fs.opendir(&ME, 1, 0).unwrap().open_flags,
        FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE
    );
    assert_eq!(errno(fs.opendir(&ME, ino, 0)), libc::ENOTDIR);
    fs.negotiated(Negotiated {
        no_open: true,
        no_opendir: true,
        over_io_uring: false,
    });
    assert_eq!(errno(fs.open(&ME, ino, 0)), libc::ENOSYS);
    assert_eq!(errno(fs.opendir(&ME, 1, 0)), libc::ENOSYS);
}

#[test]
fn setattr_sets_given_times_and_resolves_now() {
    let fs = core();
    let ino = fs.create(&ME, 1, b"f", 0o644, 0).unwrap().stat.ino;
    let t = Timespec { sec: 1000, nsec: 5 };
    let before = Timespec::now();
    let a = SetattrIn {
        size: Some(3),
        atime: Some(SetTime::Now),
        mtime: Some(SetTime::At(t)),
        ..Default::default()
    };
    let s = fs.setattr(&ME, ino, &a).unwrap();
    assert_eq!((s.attr.size, s.attr.mtime), (3, t));
    assert!(s.attr.atime >= before && s.attr.atime <= Timespec::now());
    assert_eq!(fs.getattr(&ME, ino, None).unwrap().attr.mtime, t);
}

#[test]
fn write_read_and_the_rest_answer_plain_values() {
    let fs = core();
    let ino = fs.create(&ME, 1, b"f", 0o644, 0).unwrap().stat.ino;
    assert_eq!(fs.write(&ME, ino, 0, 0, b"hello", 0).unwrap(), 5);
    assert_eq!(fs.read(&ME, ino, 0, 1, 10).unwrap(), b"ello");
    assert_eq!(errno(fs.flush(&ME, ino, 0, 0)), libc::ENOSYS);
    assert_eq!(
        errno(fs.lseek(&ME, ino, 0, -1, libc::SEEK_DATA)),
        libc::ENXIO
    );
    assert_eq!(errno(fs.ioctl(&ME, ino, 0, 0, 0, &[], 0)), libc::ENOTTY);
    let st = fs.statfs(&ME, 1).unwrap();
    assert_eq!((st.bsize, st.namelen, st.frsize), (4096, 255, 4096));
    let l = fs.symlink(&ME, 1, b"l", b"f").unwrap();
    assert_eq!(fs.readlink(&ME, l.ino).unwrap(), b"f");
    assert_eq!(
        errno(fs.mknod(&ME, 1, b"d", libc::S_IFDIR | 0o755, 0)),
        libc::EINVAL
    );
    fs.rename(&ME, 1, b"l", 1, b"m", 0).unwrap();
    fs.unlink(&ME, 1, b"m").unwrap();
    fs.fsync(&ME, ino, 0, false).unwrap();
}

/// A panic in an operation (the debug hook) is answered EIO and the core keeps
/// serving.
#[cfg(debug_assertions)]
#[test]
fn a_panic_is_eio_and_the_core_keeps_serving() {
    let fs = core();
    let ino = fs.create(&ME, 1, b"f", 0o644, 0).unwrap().stat.ino;
    let hook = crate::session::posix::DEBUG_PANIC_XATTR;
    let r = fs.setxattr(&ME, ino, hook, b"x", 0, 0);
    assert_eq!(errno(r), libc::EIO);
    assert_eq!(fs.getattr(&ME, ino, None).unwrap().ino, ino);
}
