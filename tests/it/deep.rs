//! A tree 10,000 directories deep, made by an agent with one `mkdir -p` (issue 12,
//! D2): every operation that walks the tree (flush, checkpoint, diff, checkout,
//! restore, fork, unmount + remount, import, gc, fsck) completes, the daemon stays
//! alive, and the data reads back. Paths exceed PATH_MAX, so the tree is built and
//! read with `*at` calls from directory descriptors.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::harness::*;

const DEPTH: usize = 10_000;

fn open_dir(dir: Option<&OwnedFd>, name: &str) -> std::io::Result<OwnedFd> {
    let c = CString::new(name).unwrap();
    let d = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
    let fd = unsafe {
        libc::openat(
            d,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by a successful open and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdir -p d/d/.../d` (`depth` levels) under `top`, a file `f` with `data` at
/// the bottom, fsync'd (the flush).
fn build(top: &Path, depth: usize, data: &[u8]) {
    let mut cur = open_dir(None, top.to_str().unwrap()).unwrap();
    for _ in 0..depth {
        // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
        let r = unsafe { libc::mkdirat(cur.as_raw_fd(), c"d".as_ptr(), 0o755) };
        assert_eq!(r, 0, "mkdirat: {}", std::io::Error::last_os_error());
        cur = open_dir(Some(&cur), "d").unwrap();
    }
    // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
    let fd = unsafe {
        libc::openat(
            cur.as_raw_fd(),
            c"f".as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        )
    };
    assert!(fd >= 0);
    // SAFETY: fd was just returned by a successful open and is owned by nothing else.
    let f = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the buffer pointer and length describe a live, owned buffer; the fd is open.
    let n = unsafe { libc::write(f.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    assert_eq!(n as usize, data.len());
    // SAFETY: the fd is open and owned.
    assert_eq!(unsafe { libc::fsync(f.as_raw_fd()) }, 0, "fsync");
}

/// The bytes of `d/.../d/f` `depth` levels under `top` (None: absent).
fn read_bottom(top: &Path, depth: usize) -> Option<Vec<u8>> {
    let mut cur = open_dir(None, top.to_str().unwrap()).unwrap();
    for _ in 0..depth {
        cur = open_dir(Some(&cur), "d").ok()?;
    }
    // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
    let fd = unsafe {
        libc::openat(
            cur.as_raw_fd(),
            c"f".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just returned by a successful open and is owned by nothing else.
    let f = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut buf = vec![0u8; 4096];
    // SAFETY: the buffer pointer and length describe a live, owned buffer; the fd is open.
    let n = unsafe { libc::read(f.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    buf.truncate(n.max(0) as usize);
    Some(buf)
}

fn alive(m: &Mount) {
    let pid = m.daemon_pid();
    assert_eq!(
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, 0) },
        0,
        "daemon died\n{}",
        daemon_log(&m.store)
    );
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap()
}

#[test]
fn ten_thousand_levels_survive_every_walk() {
    let m = Mount::new();
    let mp = m.mp.to_str().unwrap().to_string();
    ws_ok(&m, &["checkpoint", "-m", "empty"]);
    build(&m.mp, DEPTH, b"bottom");
    alive(&m);
    let deep = json(&ws_ok(&m, &["--json", "checkpoint", "-m", "deep"]));
    let deep = deep["checkpoint"]["id"].as_str().unwrap().to_string();
    alive(&m);
    // diff of the whole chain against the empty checkpoint.
    let d = json(&ws_ok(&m, &["--json", "diff", "HEAD~1", "HEAD"]));
    assert!(
        d.to_string().matches("\"added\"").count() > DEPTH,
        "{}",
        &d.to_string()[..200]
    );
    // checkout away (everything removed) and back (everything inserted).
    ws_ok(&m, &["checkout", "HEAD~1"]);
    assert!(read_bottom(&m.mp, DEPTH).is_none());
    ws_ok(&m, &["checkout", &deep]);
    assert_eq!(read_bottom(&m.mp, DEPTH).unwrap(), b"bottom");
    alive(&m);
    // restore of the top directory after a deep change.
    build(&m.mp.join("d"), 0, b"x");
    ws_ok(&m, &["restore", &deep, m.p("d").to_str().unwrap()]);
    assert_eq!(read_bottom(&m.mp, DEPTH).unwrap(), b"bottom");
    // fork, and unmount + remount.
    let fork = m.tmp.path().join("fork");
    std::fs::create_dir(&fork).unwrap();
    tf_ok(
        &m.store,
        &["-C", &mp, "fork", "f", "--mount", fork.to_str().unwrap()],
    );
    assert_eq!(read_bottom(&fork, DEPTH).unwrap(), b"bottom");
    crate::harness::umount_ok(&m.store, &fork);
    m.remount();
    assert_eq!(read_bottom(&m.mp, DEPTH).unwrap(), b"bottom");
    // import: a host directory that deep, through mount --from.
    let host = m.tmp.path().join("host");
    std::fs::create_dir(&host).unwrap();
    build(&host, DEPTH, b"host");
    let imp = m.tmp.path().join("imp");
    std::fs::create_dir(&imp).unwrap();
    tf_ok(
        &m.store,
        &[
            "mount",
            imp.to_str().unwrap(),
            "--session",
            "imp",
            "--from",
            host.to_str().unwrap(),
        ],
    );
    assert_eq!(read_bottom(&imp, DEPTH).unwrap(), b"host");
    tf_ok(&m.store, &["umount", imp.to_str().unwrap()]);
    // gc and fsck walk every tree.
    tf_ok(&m.store, &["gc"]);
    tf_ok(&m.store, &["fsck"]);
    alive(&m);
    assert_eq!(read_bottom(&m.mp, DEPTH).unwrap(), b"bottom");
}
