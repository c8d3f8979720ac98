//! Writer watch: while a recorded command runs (`treefork exec`), the pid of each
//! mutating FUSE request is noted and classified once, as part of the command's
//! process tree or not, so the record can say when its change set may include
//! writes of other processes.
//!
//! Owns: the watch flag, the root pids of the watched tree, the classification of
//! each writer pid (`/proc/<pid>/stat` parent chain), an opaque slot where the
//! recorder (`ops::exec`) keeps its per-session state, and reading a small file of
//! the live tree for the daemon's own triggers ([`Session::read_live`]).
//!
//! Invariants:
//! - The hot path costs one relaxed atomic load while nothing is watched
//!   ([`WriterWatch::note`]).
//! - A pid is classified at most once per watch, while the writing process is
//!   blocked on its request (so it is alive to be looked at); at most
//!   [`MAX_WRITERS`] pids are kept, later ones are counted in `overflow`.
//! - Pid 0 (requests the kernel sends on its own, e.g. page writeback), kernel
//!   threads and the daemon's own threads are never counted as writers.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Session, relock};

/// Most writer pids kept per watch.
pub const MAX_WRITERS: usize = 1024;
/// Longest parent chain walked.
const MAX_DEPTH: usize = 128;
/// `PF_KTHREAD` in `/proc/<pid>/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// A process that wrote to the mount during a watch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Writer {
    /// Its pid (the thread id the request carried).
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`).
    pub comm: String,
}

#[derive(Default)]
struct Inner {
    roots: Vec<u32>,
    /// pid → `Some(writer)` for an outside writer, `None` for one of ours (or one
    /// never counted).
    seen: HashMap<u32, Option<Writer>>,
    overflow: u64,
}

/// See the module docs.
#[derive(Default)]
pub struct WriterWatch {
    active: AtomicBool,
    inner: Mutex<Inner>,
    /// The recorder's own state (owned by `ops::exec`, opaque here).
    pub slot: Mutex<Option<Box<dyn Any + Send>>>,
}

/// What a watch saw: outside writers and how many more were not kept.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Writers outside the watched process tree.
    pub others: Vec<Writer>,
    /// Outside writers beyond [`MAX_WRITERS`].
    pub overflow: u64,
}

impl WriterWatch {
    /// Start watching: writers whose parent chain reaches one of `roots` are the
    /// command's, any other is an outside writer. Forgets a previous watch.
    pub fn start(&self, roots: Vec<u32>) {
        let mut g = relock(self.inner.lock());
        *g = Inner {
            roots,
            ..Inner::default()
        };
        self.active.store(true, Ordering::SeqCst);
    }

    /// Add a root to the running watch (e.g. the command's pid once known).
    pub fn add_root(&self, pid: u32) {
        let mut g = relock(self.inner.lock());
        if !g.roots.contains(&pid) {
            g.roots.push(pid);
        }
    }

    /// Stop watching; returns the outside writers seen.
    pub fn stop(&self) -> Seen {
        self.active.store(false, Ordering::SeqCst);
        let g = std::mem::take(&mut *relock(self.inner.lock()));
        let mut others: Vec<Writer> = g.seen.into_values().flatten().collect();
        others.sort_by_key(|w| w.pid);
        Seen {
            others,
            overflow: g.overflow,
        }
    }

    /// Whether a watch is running.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Note that `pid` sent a mutating request (called by every mutating FUSE
    /// handler; one atomic load when nothing is watched).
    #[inline]
    pub fn note(&self, pid: u32) {
        if self.active.load(Ordering::Relaxed) {
            self.note_slow(pid);
        }
    }

    #[cold]
    fn note_slow(&self, pid: u32) {
        if pid == 0 {
            return;
        }
        let roots = {
            let g = relock(self.inner.lock());
            if !self.active.load(Ordering::Relaxed) || g.seen.contains_key(&pid) {
                return;
            }
            g.roots.clone()
        };
        // Unlocked: reading another process's /proc files can block (while that
        // process execs or holds its memory map, e.g. in a page fault on this very
        // mount), and with the lock held every other mutating request of the
        // session would wait behind it: the faulting process's own request among
        // them, a deadlock (seen in CI: a worker in `do_task_stat`, another on this
        // lock, the mount's writeback stuck).
        let w = classify(pid, &roots);
        let mut g = relock(self.inner.lock());
        if !self.active.load(Ordering::Relaxed) || g.seen.contains_key(&pid) {
            return;
        }
        if g.seen.len() >= MAX_WRITERS {
            if w.is_some() {
                g.overflow += 1;
            }
            return;
        }
        g.seen.insert(pid, w);
    }
}

impl Session {
    /// Whether the workspace root holds an entry `name` now (any kind), from the
    /// live table.
    pub fn root_has(&self, name: &[u8]) -> crate::error::Result<bool> {
        use crate::error::Error;
        match self.lock().child(&**self.store(), 1, name) {
            Ok(found) => Ok(found.is_some()),
            Err(Error::Posix(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The bytes (at most `max`) of the regular file at `path` (names from the
    /// root), read from the live table without taking kernel references (for the
    /// daemon's own look at the workspace, e.g. `.git/HEAD`). `None` when a name is
    /// missing or the file is not a regular file.
    pub fn read_live(&self, path: &[&[u8]], max: u32) -> crate::error::Result<Option<Vec<u8>>> {
        use crate::error::Error;
        let ino = {
            let mut st = self.lock();
            let mut ino = 1;
            for name in path {
                match st.child(&**self.store(), ino, name) {
                    Ok(Some(i)) => ino = i,
                    Ok(None) | Err(Error::Posix(_)) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            if st.get(ino)?.kind != crate::tree::Kind::File {
                return Ok(None);
            }
            ino
        };
        match self.read(ino, 0, max) {
            Ok(d) => Ok(Some(d)),
            Err(Error::Posix(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// `Some(writer)` when `pid` is an outside writer; `None` when it descends from a
/// root, is a kernel thread or a thread of this daemon, or cannot be looked at
/// (gone: a process blocked on our request cannot be, so this is a thread that
/// ended meanwhile).
fn classify(pid: u32, roots: &[u32]) -> Option<Writer> {
    let me = std::process::id();
    let first = Stat::read(pid)?;
    if first.kthread || first.tgid(pid) == Some(me) {
        return None;
    }
    let mut cur = pid;
    let mut st = first.clone();
    for _ in 0..MAX_DEPTH {
        if roots.contains(&cur) || roots.contains(&st.tgid(cur).unwrap_or(cur)) {
            return None;
        }
        if st.ppid == 0 || st.ppid == cur {
            break;
        }
        cur = st.ppid;
        match Stat::read(cur) {
            Some(s) => st = s,
            None => break,
        }
    }
    Some(Writer {
        pid,
        comm: first.comm,
    })
}

/// The fields of `/proc/<pid>/stat` the classification uses.
#[derive(Clone)]
struct Stat {
    comm: String,
    ppid: u32,
    kthread: bool,
}

impl Stat {
    fn read(pid: u32) -> Option<Stat> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Stat::parse(&s)
    }

    /// Parse a stat line: `pid (comm) state ppid pgrp session tty tpgid flags ...`
    /// (comm may hold spaces and parentheses: it ends at the last `)`).
    fn parse(s: &str) -> Option<Stat> {
        let open = s.find('(')?;
        let close = s.rfind(')')?;
        let comm = s.get(open + 1..close)?.to_string();
        let rest: Vec<&str> = s.get(close + 1..)?.split_whitespace().collect();
        let ppid = rest.get(1)?.parse().ok()?;
        let flags: u64 = rest.get(6)?.parse().ok()?;
        Some(Stat {
            comm,
            ppid,
            kthread: flags & PF_KTHREAD != 0,
        })
    }

    /// The thread group (process) id of thread `tid`.
    fn tgid(&self, tid: u32) -> Option<u32> {
        let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_names() {
        let s = Stat::parse("42 (a) b (c)) S 7 42 42 0 -1 4194560 1 2 3").unwrap();
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(s.ppid, 7);
        assert!(!s.kthread);
        let k = Stat::parse("2 (kthreadd) S 0 0 0 0 -1 2129984 0").unwrap();
        assert!(k.kthread);
        assert!(Stat::parse("garbage").is_none());
    }

    #[test]
    fn classifies_descendants_and_outsiders() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let cpid = child.id();
        // A child of a root is the command's; with another root it is an outsider.
        assert_eq!(classify(cpid, &[me]), None);
        let w = classify(cpid, &[1_999_999]).expect("outsider");
        assert_eq!(w.comm, "sleep");
        let watch = WriterWatch::default();
        watch.note(cpid); // inactive: nothing recorded
        watch.start(vec![1_999_999]);
        watch.note(cpid);
        watch.note(cpid);
        watch.note(0);
        let seen = watch.stop();
        assert_eq!(seen.others.len(), 1);
        assert_eq!(seen.others[0].pid, cpid);
        assert!(!watch.active());
        let _ = child.kill();
        let _ = child.wait();
    }
}
