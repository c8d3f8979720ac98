//! A mount survives its own bugs and noisy clients (issue 12, D7 and D11): a
//! panicking request answers EIO and the mount keeps serving; ioctls are answered
//! ENOTTY without a log line; chown drops set-user/group-id exactly as Linux does.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::harness::*;

/// The debug-build panic hook (`setxattr user.treefork.debug-panic`, see
/// `session::posix::DEBUG_PANIC_XATTR`) panics holding the table lock: the request
/// gets EIO, the panic is logged with the request, and reads, writes, creates and
/// fsync keep working (before: every later request panicked on the poisoned lock).
#[test]
fn a_panicking_request_answers_eio_and_the_mount_keeps_serving() {
    let m = Mount::new();
    write_synced(&m.p("a"), b"before");
    let path = std::ffi::CString::new(m.p("a").as_os_str().as_bytes()).unwrap();
    for round in 0..3 {
        // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
        let r = unsafe {
            libc::setxattr(
                path.as_ptr(),
                c"user.treefork.debug-panic".as_ptr(),
                b"x".as_ptr().cast(),
                1,
                0,
            )
        };
        let e = std::io::Error::last_os_error();
        assert_eq!(
            (r, e.raw_os_error()),
            (-1, Some(libc::EIO)),
            "round {round}"
        );
        assert_eq!(std::fs::read(m.p("a")).unwrap(), b"before");
        let name = format!("after{round}");
        write_synced(&m.p(&name), name.as_bytes());
        std::fs::create_dir(m.p(&format!("dir{round}"))).unwrap();
        assert_eq!(std::fs::read(m.p(&name)).unwrap(), name.as_bytes());
    }
    let log = daemon_log(&m.store);
    assert!(
        log.contains("setxattr") && log.contains("panicked"),
        "{log}"
    );
    // Everything written after the panics is durable and reads back.
    ws_ok(&m, &["checkpoint", "-m", "after panics"]);
    m.remount();
    assert_eq!(std::fs::read(m.p("after2")).unwrap(), b"after2");
    assert!(m.p("dir2").is_dir());
}

/// Python's open() asks isatty (an ioctl) of every file: answered ENOTTY, and the
/// daemon log stays quiet (it logged a multi-line WARN each time).
#[test]
fn ioctls_are_answered_enotty_quietly() {
    let m = Mount::new();
    write_synced(&m.p("f"), b"x");
    let f = std::fs::File::open(m.p("f")).unwrap();
    let mut buf = [0u8; 64];
    for _ in 0..20 {
        // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
        let r = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::TCGETS,
                buf.as_mut_ptr(),
            )
        };
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTTY)
        );
    }
    let log = daemon_log(&m.store);
    assert!(!log.contains("ioctl"), "{log}");
}

/// chown by an unprivileged owner (and by root) drops set-user-id / set-group-id
/// exactly as on the host: also chown(-1, -1), also set-group-id without group
/// execute when the caller is not in the file's group. Same script, host vs mount.
#[test]
fn chown_drops_suid_sgid_like_the_host() {
    assert!(Path::new("/usr/bin/setpriv").exists(), "setpriv needed");
    let m = Mount::new();
    let host = tempfile::tempdir().unwrap();
    let script = r#"
        set -e
        chmod 777 .
        as() { setpriv --reuid=65534 --regid=65534 --groups=65534,100 "$@"; }
        for f in j k l; do echo data > $f; chown 65534:0 $f; chmod 2545 $f; done
        as chgrp 100 j; chown 0 k; as chown 65534 l
        for f in a b c d e h; do as sh -c "echo data > $f"; done
        as chmod 6555 a b c d e; as chmod 6545 h
        as chgrp 100 a; as chgrp 65534 b; as perl -e 'chown(-1, -1, "c") or die'
        as chown 65534 d; as chgrp 100 e; as chgrp 100 h
        mkdir dd; chmod 6755 dd; as chgrp 100 dd 2>/dev/null || true
        stat -c '%n %a %g' j k l a b c d e h dd
    "#;
    let native = sh(host.path(), script);
    let ours = sh(&m.mp, script);
    assert_eq!(ours, native, "mount differs from the host");
    m.remount();
    assert_eq!(sh(&m.mp, "stat -c '%n %a %g' j k l a b c d e h dd"), native);
}
