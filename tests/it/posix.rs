//! POSIX semantics of a mounted session, one behaviour per test, each on a fresh mount.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::harness::{Mount, pattern, sh};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
/// The store's block size (files are stored in 64 KiB blocks).
const BLOCK: u64 = 64 * KIB;

// ---------------------------------------------------------------- helpers

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The errno of an expected failure.
fn err_of<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e
            .raw_os_error()
            .unwrap_or_else(|| panic!("error without errno: {e}")),
    }
}

/// Turn a libc `-1 + errno` return into an `io::Result`.
fn cvt<T: Copy + PartialEq + From<i8>>(rc: T) -> io::Result<T> {
    if rc == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn errname(e: i32) -> String {
    format!("{} ({e})", io::Error::from_raw_os_error(e))
}

#[track_caller]
fn assert_errno<T: std::fmt::Debug>(r: io::Result<T>, want: i32, what: &str) {
    let got = err_of(r);
    assert_eq!(
        got,
        want,
        "{what}: expected {}, got {}",
        errname(want),
        errname(got)
    );
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> io::Result<()> {
    let (a, b) = (cpath(from), cpath(to));
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    cvt(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    })
    .map(|_| ())
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn setx(p: &Path, name: &str, val: &[u8], flags: i32) -> io::Result<()> {
    let (p, n) = (cpath(p), cstr(name));
    // SAFETY: valid C strings; `val` is a live buffer of `val.len()` bytes.
    cvt(unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            val.as_ptr().cast(),
            val.len(),
            flags,
        )
    })
    .map(|_| ())
}

/// getxattr with a buffer of `size` bytes (0 = size query); returns the bytes (or the size).
fn getx_raw(p: &Path, name: &str, size: usize) -> io::Result<(isize, Vec<u8>)> {
    let (p, n) = (cpath(p), cstr(name));
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    // SAFETY: `ptr` is null with size 0 or points to `size` writable bytes.
    let r = cvt(unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), ptr, size) })?;
    buf.truncate(r.max(0) as usize);
    Ok((r, buf))
}

fn getx(p: &Path, name: &str) -> io::Result<Vec<u8>> {
    getx_raw(p, name, 64 * 1024).map(|(_, v)| v)
}

fn listx(p: &Path) -> Vec<String> {
    let c = cpath(p);
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: `buf` has `buf.len()` writable bytes.
    let n = cvt(unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
        .expect("listxattr");
    let mut v: Vec<String> = buf[..n as usize]
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    v.sort();
    v
}

fn removex(p: &Path, name: &str) -> io::Result<()> {
    let (p, n) = (cpath(p), cstr(name));
    // SAFETY: valid C strings.
    cvt(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(|_| ())
}

fn statvfs(p: &Path) -> libc::statvfs {
    let c = cpath(p);
    // SAFETY: zeroed statvfs is a valid out-buffer; `c` is a valid path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
    cvt(unsafe { libc::statvfs(c.as_ptr(), &mut s) }).expect("statvfs");
    s
}

fn read_at(f: &File, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, off).unwrap();
    buf
}

#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i}: got {:#04x}, want {:#04x}",
            got[i], want[i]
        );
    }
}

// ---------------------------------------------------------------- data

#[test]
fn create_read_write_overwrite() {
    let m = Mount::new();
    let p = m.p("f.txt");
    fs::write(&p, b"hello world\n").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"hello world\n");
    assert_eq!(fs::metadata(&p).unwrap().len(), 12);

    // Overwrite in place, shorter, without truncation.
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.write_at(b"HELLO", 0).unwrap();
    drop(f);
    assert_eq!(fs::read(&p).unwrap(), b"HELLO world\n");

    // Overwrite with O_TRUNC.
    fs::write(&p, b"bye").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&fs::read(&p).unwrap()),
        "bye",
        "content after open(O_WRONLY|O_TRUNC) + write"
    );
    assert_eq!(fs::metadata(&p).unwrap().len(), 3);

    // O_EXCL on an existing name fails.
    let r = OpenOptions::new().write(true).create_new(true).open(&p);
    assert_errno(r, libc::EEXIST, "O_CREAT|O_EXCL on existing file");

    m.remount();
    assert_eq!(
        String::from_utf8_lossy(&fs::read(&p).unwrap()),
        "bye",
        "content after O_TRUNC rewrite + remount"
    );
}

#[test]
fn partial_overwrite_across_block_boundary() {
    let m = Mount::new();
    let p = m.p("blocks.bin");
    let mut model = pattern(3 * BLOCK as usize + 777, 1);
    fs::write(&p, &model).unwrap();

    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    // Writes at odd offsets, straddling block boundaries, and one extending the file.
    let writes: [(u64, usize, u64); 5] = [
        (BLOCK - 333, 1001, 2),
        (2 * BLOCK - 1, 3, 3),
        (7, 13, 4),
        (BLOCK + 12345, 2 * BLOCK as usize, 5), // spans 3 blocks, extends the file
        (3 * BLOCK + 1, 1, 6),
    ];
    for (off, len, seed) in writes {
        let data = pattern(len, seed);
        f.write_all_at(&data, off).unwrap();
        let end = off as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&data);
    }
    // Through the open handle, and through a fresh open.
    assert_bytes(&read_at(&f, 0, model.len()), &model, "pread after writes");
    drop(f);
    assert_bytes(&fs::read(&p).unwrap(), &model, "read after close");
    assert_eq!(fs::metadata(&p).unwrap().len(), model.len() as u64);

    m.remount();
    assert_bytes(&fs::read(&p).unwrap(), &model, "read after remount");
}

// ---------------------------------------------------------------- attributes

#[test]
fn chmod_and_ctime() {
    let m = Mount::new();
    let p = m.p("f");
    fs::write(&p, b"x").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    let before = fs::metadata(&p).unwrap();
    assert_eq!(before.mode() & 0o7777, 0o600);
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::set_permissions(&p, fs::Permissions::from_mode(0o4751)).unwrap();
    let after = fs::metadata(&p).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o4751);
    assert!(after.is_file());
    assert!(
        (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
        "ctime did not advance on chmod: {}.{} -> {}.{}",
        before.ctime(),
        before.ctime_nsec(),
        after.ctime(),
        after.ctime_nsec()
    );
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec()),
        "chmod must not change mtime"
    );
    m.remount();
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o4751);
}

#[test]
fn chown() {
    let m = Mount::new();
    let p = m.p("f");
    fs::write(&p, b"x").unwrap();
    fs::create_dir(m.p("d")).unwrap();
    std::os::unix::fs::chown(&p, Some(1234), Some(1234)).unwrap();
    std::os::unix::fs::chown(m.p("d"), Some(1234), None).unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 1234));
    let md = fs::metadata(m.p("d")).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 0));
    m.remount();
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 1234));
}

#[test]
fn truncate_shrink_then_grow_reads_zeros() {
    let m = Mount::new();
    let p = m.p("t");
    let data = pattern(100_000, 7);
    fs::write(&p, &data).unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    f.set_len(70_001).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 70_001);
    f.set_len(200_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 200_000);
    let mut want = data[..70_001].to_vec();
    want.resize(200_000, 0);
    assert_bytes(
        &read_at(&f, 0, 200_000),
        &want,
        "after shrink+grow (same fd)",
    );
    drop(f);
    // Shrink via truncate(2) on the path, within the first block.
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(10).unwrap();
    f.set_len(BLOCK + 5).unwrap();
    drop(f);
    let mut want2 = data[..10].to_vec();
    want2.resize(BLOCK as usize + 5, 0);
    assert_bytes(&fs::read(&p).unwrap(), &want2, "after second shrink+grow");
    m.remount();
    assert_bytes(&fs::read(&p).unwrap(), &want2, "after remount");
}

#[test]
fn utimensat_nanoseconds() {
    let m = Mount::new();
    let p = m.p("f");
    fs::write(&p, b"data").unwrap();
    let times = [
        libc::timespec {
            tv_sec: 1_000_000_001,
            tv_nsec: 123_456_789,
        },
        libc::timespec {
            tv_sec: 1_234_567_890,
            tv_nsec: 987_654_321,
        },
    ];
    let c = cpath(&p);
    // SAFETY: valid path and a two-element timespec array.
    cvt(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) }).unwrap();
    let check = |when: &str| {
        let md = fs::metadata(&p).unwrap();
        assert_eq!(
            (md.atime(), md.atime_nsec()),
            (1_000_000_001, 123_456_789),
            "atime {when}"
        );
        assert_eq!(
            (md.mtime(), md.mtime_nsec()),
            (1_234_567_890, 987_654_321),
            "mtime {when}"
        );
    };
    check("after utimensat");
    m.remount();
    check("after remount");
}

// ---------------------------------------------------------------- directories

#[test]
fn mkdir_rmdir_unlink_errors() {
    let m = Mount::new();
    let d = m.p("d");
    fs::create_dir(&d).unwrap();
    assert!(fs::metadata(&d).unwrap().is_dir());
    assert_errno(fs::create_dir(&d), libc::EEXIST, "mkdir existing");
    fs::write(d.join("f"), b"x").unwrap();
    assert_errno(fs::remove_dir(&d), libc::ENOTEMPTY, "rmdir non-empty dir");
    assert_errno(
        fs::remove_dir(d.join("f")),
        libc::ENOTDIR,
        "rmdir on a file",
    );
    assert_errno(
        fs::create_dir(d.join("f/x")),
        libc::ENOTDIR,
        "mkdir under a file",
    );
    assert_errno(fs::remove_file(&d), libc::EISDIR, "unlink on a dir");
    assert_errno(
        fs::remove_dir(m.p("missing")),
        libc::ENOENT,
        "rmdir missing",
    );
    fs::remove_file(d.join("f")).unwrap();
    fs::remove_dir(&d).unwrap();
    assert_errno(fs::metadata(&d), libc::ENOENT, "stat removed dir");
    assert!(
        names(&m.mp).is_empty(),
        "root not empty: {:?}",
        names(&m.mp)
    );
}

#[test]
fn dir_nlink_counts_subdirs() {
    let m = Mount::new();
    let nl = |p: &Path| fs::metadata(p).unwrap().nlink();
    let root0 = nl(&m.mp);
    assert_eq!(root0, 2, "empty root nlink");
    let d = m.p("d");
    fs::create_dir(&d).unwrap();
    assert_eq!(nl(&d), 2);
    assert_eq!(nl(&m.mp), 3, "root after mkdir d");
    for s in ["a", "b", "c"] {
        fs::create_dir(d.join(s)).unwrap();
    }
    fs::write(d.join("file"), b"").unwrap();
    assert_eq!(nl(&d), 5, "2 + 3 subdirs (files do not count)");
    fs::remove_dir(d.join("a")).unwrap();
    assert_eq!(nl(&d), 4, "after rmdir");
    // Moving a subdir out updates both parents.
    fs::rename(d.join("b"), m.p("b")).unwrap();
    assert_eq!(nl(&d), 3, "after moving a subdir out");
    assert_eq!(nl(&m.mp), 4, "root after gaining a subdir");
    m.remount();
    assert_eq!(nl(&d), 3, "after remount");
    assert_eq!(nl(&m.mp), 4, "root after remount");
}

// ---------------------------------------------------------------- rename

#[test]
fn rename_plain() {
    let m = Mount::new();
    fs::write(m.p("a"), b"content-a").unwrap();
    fs::rename(m.p("a"), m.p("b")).unwrap();
    assert_errno(
        fs::metadata(m.p("a")),
        libc::ENOENT,
        "old name after rename",
    );
    assert_eq!(fs::read(m.p("b")).unwrap(), b"content-a");
    assert_eq!(names(&m.mp), ["b"]);
    assert_errno(
        fs::rename(m.p("a"), m.p("c")),
        libc::ENOENT,
        "rename missing",
    );
}

#[test]
fn rename_across_directories() {
    let m = Mount::new();
    fs::create_dir_all(m.p("d1/sub/deep")).unwrap();
    fs::create_dir(m.p("d2")).unwrap();
    fs::write(m.p("d1/f"), b"file").unwrap();
    fs::write(m.p("d1/sub/deep/g"), b"deep file").unwrap();
    fs::rename(m.p("d1/f"), m.p("d2/f2")).unwrap();
    fs::rename(m.p("d1/sub"), m.p("d2/sub")).unwrap();
    assert_eq!(names(&m.p("d1")), Vec::<String>::new());
    assert_eq!(names(&m.p("d2")), ["f2", "sub"]);
    assert_eq!(fs::read(m.p("d2/f2")).unwrap(), b"file");
    assert_eq!(fs::read(m.p("d2/sub/deep/g")).unwrap(), b"deep file");
    m.remount();
    assert_eq!(names(&m.p("d1")), Vec::<String>::new());
    assert_eq!(fs::read(m.p("d2/sub/deep/g")).unwrap(), b"deep file");
}

#[test]
fn rename_over_existing_file() {
    let m = Mount::new();
    fs::write(m.p("src"), b"new content").unwrap();
    fs::write(m.p("dst"), pattern(200_000, 9)).unwrap();
    let src_ino = fs::metadata(m.p("src")).unwrap().ino();
    // An fd open on the replaced file keeps seeing the old data.
    let old = File::open(m.p("dst")).unwrap();
    fs::rename(m.p("src"), m.p("dst")).unwrap();
    assert_eq!(fs::read(m.p("dst")).unwrap(), b"new content");
    assert_eq!(fs::metadata(m.p("dst")).unwrap().ino(), src_ino);
    assert_eq!(fs::metadata(m.p("dst")).unwrap().len(), 11);
    assert_eq!(names(&m.mp), ["dst"]);
    assert_bytes(
        &read_at(&old, 0, 200_000),
        &pattern(200_000, 9),
        "replaced file via old fd",
    );
    drop(old);
    m.remount();
    assert_eq!(fs::read(m.p("dst")).unwrap(), b"new content");
}

#[test]
fn rename_dirs_over_dirs_and_type_mismatches() {
    let m = Mount::new();
    fs::create_dir(m.p("a")).unwrap();
    fs::write(m.p("a/inside"), b"i").unwrap();
    fs::create_dir(m.p("empty")).unwrap();
    fs::create_dir(m.p("full")).unwrap();
    fs::write(m.p("full/x"), b"x").unwrap();
    fs::write(m.p("file"), b"f").unwrap();

    assert_errno(
        fs::rename(m.p("a"), m.p("full")),
        libc::ENOTEMPTY,
        "dir onto non-empty dir",
    );
    assert_errno(
        fs::rename(m.p("file"), m.p("empty")),
        libc::EISDIR,
        "file onto dir",
    );
    assert_errno(
        fs::rename(m.p("a"), m.p("file")),
        libc::ENOTDIR,
        "dir onto file",
    );
    // Nothing changed by the failures.
    assert_eq!(fs::read(m.p("full/x")).unwrap(), b"x");
    assert_eq!(fs::read(m.p("a/inside")).unwrap(), b"i");

    fs::rename(m.p("a"), m.p("empty")).unwrap();
    assert_eq!(fs::read(m.p("empty/inside")).unwrap(), b"i");
    assert_eq!(names(&m.mp), ["empty", "file", "full"]);
    assert_eq!(
        fs::metadata(&m.mp).unwrap().nlink(),
        4,
        "root nlink after dir replaced dir"
    );
}

#[test]
fn rename_dir_into_own_subdir_is_einval() {
    let m = Mount::new();
    fs::create_dir_all(m.p("a/b/c")).unwrap();
    assert_errno(
        fs::rename(m.p("a"), m.p("a/b/c/a")),
        libc::EINVAL,
        "a -> a/b/c/a",
    );
    assert_errno(fs::rename(m.p("a"), m.p("a/x")), libc::EINVAL, "a -> a/x");
    assert!(fs::metadata(m.p("a/b/c")).unwrap().is_dir());
}

#[test]
fn rename_noreplace() {
    let m = Mount::new();
    fs::write(m.p("a"), b"A").unwrap();
    fs::write(m.p("b"), b"B").unwrap();
    assert_errno(
        renameat2(&m.p("a"), &m.p("b"), libc::RENAME_NOREPLACE),
        libc::EEXIST,
        "RENAME_NOREPLACE onto existing",
    );
    assert_eq!(fs::read(m.p("a")).unwrap(), b"A");
    assert_eq!(fs::read(m.p("b")).unwrap(), b"B");
    renameat2(&m.p("a"), &m.p("c"), libc::RENAME_NOREPLACE).unwrap();
    assert_eq!(names(&m.mp), ["b", "c"]);
    assert_eq!(fs::read(m.p("c")).unwrap(), b"A");
}

#[test]
fn rename_exchange() {
    let m = Mount::new();
    fs::write(m.p("a"), b"AAAA").unwrap();
    fs::write(m.p("b"), b"BB").unwrap();
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/child"), b"child").unwrap();
    let ino_a = fs::metadata(m.p("a")).unwrap().ino();

    renameat2(&m.p("a"), &m.p("b"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(m.p("a")).unwrap(), b"BB");
    assert_eq!(fs::read(m.p("b")).unwrap(), b"AAAA");
    assert_eq!(fs::metadata(m.p("b")).unwrap().ino(), ino_a);

    // file <-> dir
    renameat2(&m.p("b"), &m.p("d"), libc::RENAME_EXCHANGE).unwrap();
    assert!(fs::metadata(m.p("b")).unwrap().is_dir());
    assert_eq!(fs::read(m.p("b/child")).unwrap(), b"child");
    assert!(fs::metadata(m.p("d")).unwrap().is_file());
    assert_eq!(fs::read(m.p("d")).unwrap(), b"AAAA");

    assert_errno(
        renameat2(&m.p("a"), &m.p("missing"), libc::RENAME_EXCHANGE),
        libc::ENOENT,
        "RENAME_EXCHANGE with missing target",
    );
    m.remount();
    assert_eq!(fs::read(m.p("a")).unwrap(), b"BB");
    assert_eq!(fs::read(m.p("b/child")).unwrap(), b"child");
    assert_eq!(fs::read(m.p("d")).unwrap(), b"AAAA");
}

// ---------------------------------------------------------------- links

#[test]
fn hard_links() {
    let m = Mount::new();
    fs::create_dir(m.p("sub")).unwrap();
    fs::write(m.p("a"), b"original").unwrap();
    fs::hard_link(m.p("a"), m.p("sub/b")).unwrap();
    let (ma, mb) = (
        fs::metadata(m.p("a")).unwrap(),
        fs::metadata(m.p("sub/b")).unwrap(),
    );
    assert_eq!(ma.ino(), mb.ino(), "links share the inode number");
    assert_eq!((ma.nlink(), mb.nlink()), (2, 2));
    let ino = ma.ino();

    // Write via one name, read via the other.
    OpenOptions::new()
        .write(true)
        .open(m.p("sub/b"))
        .unwrap()
        .write_all_at(b"CHANGED", 0)
        .unwrap();
    assert_eq!(fs::read(m.p("a")).unwrap(), b"CHANGEDl");
    OpenOptions::new()
        .append(true)
        .open(m.p("a"))
        .unwrap()
        .write_all(b"+tail")
        .unwrap();
    assert_eq!(fs::read(m.p("sub/b")).unwrap(), b"CHANGEDl+tail");

    fs::remove_file(m.p("a")).unwrap();
    let mb = fs::metadata(m.p("sub/b")).unwrap();
    assert_eq!(mb.nlink(), 1);
    assert_eq!(fs::read(m.p("sub/b")).unwrap(), b"CHANGEDl+tail");

    fs::hard_link(m.p("sub/b"), m.p("c")).unwrap();
    m.remount();
    let (mb, mc) = (
        fs::metadata(m.p("sub/b")).unwrap(),
        fs::metadata(m.p("c")).unwrap(),
    );
    assert_eq!((mb.ino(), mc.ino()), (ino, ino), "ino after remount");
    assert_eq!((mb.nlink(), mc.nlink()), (2, 2), "nlink after remount");
    assert_eq!(fs::read(m.p("c")).unwrap(), b"CHANGEDl+tail");
    // Still one inode after remount: a write through one name shows through the other.
    OpenOptions::new()
        .write(true)
        .open(m.p("c"))
        .unwrap()
        .write_all_at(b"X", 0)
        .unwrap();
    assert_eq!(fs::read(m.p("sub/b")).unwrap(), b"XHANGEDl+tail");

    assert_errno(
        fs::hard_link(m.p("sub"), m.p("dirlink")),
        libc::EPERM,
        "link to a directory",
    );
    assert_errno(
        fs::hard_link(m.p("c"), m.p("sub/b")),
        libc::EEXIST,
        "link onto existing name",
    );
}

#[test]
fn symlinks() {
    let m = Mount::new();
    fs::write(m.p("target.txt"), b"via link").unwrap();
    std::os::unix::fs::symlink("target.txt", m.p("l")).unwrap();
    std::os::unix::fs::symlink("no/such/place", m.p("dangling")).unwrap();
    let check = || {
        assert_eq!(fs::read_link(m.p("l")).unwrap(), Path::new("target.txt"));
        assert_eq!(fs::read(m.p("l")).unwrap(), b"via link");
        let lm = fs::symlink_metadata(m.p("l")).unwrap();
        assert!(lm.file_type().is_symlink());
        assert_eq!(lm.mode() & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(lm.len(), "target.txt".len() as u64, "symlink st_size");
        assert!(
            fs::metadata(m.p("l")).unwrap().is_file(),
            "stat follows the link"
        );

        assert_eq!(
            fs::read_link(m.p("dangling")).unwrap(),
            Path::new("no/such/place")
        );
        assert!(
            fs::symlink_metadata(m.p("dangling"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_errno(
            fs::metadata(m.p("dangling")),
            libc::ENOENT,
            "stat dangling symlink",
        );
        assert_errno(
            fs::read_link(m.p("target.txt")),
            libc::EINVAL,
            "readlink on a file",
        );
    };
    check();
    m.remount();
    check();
}

// ---------------------------------------------------------------- special files

#[test]
fn mknod_fifo_pipes_data() {
    let m = Mount::new();
    let p = m.p("fifo");
    let c = cpath(&p);
    // SAFETY: valid path.
    cvt(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }).unwrap();
    assert!(fs::metadata(&p).unwrap().file_type().is_fifo());
    let data = pattern(300_000, 11); // bigger than a pipe buffer
    let wdata = data.clone();
    let wp = p.clone();
    let writer = std::thread::spawn(move || {
        let mut w = OpenOptions::new().write(true).open(&wp).unwrap();
        w.write_all(&wdata).unwrap();
    });
    let mut got = Vec::new();
    File::open(&p).unwrap().read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    assert_bytes(&got, &data, "data through the fifo");
    m.remount();
    assert!(
        fs::metadata(&p).unwrap().file_type().is_fifo(),
        "fifo after remount"
    );
}

#[test]
fn mknod_unix_socket() {
    let m = Mount::new();
    let p = m.p("sock");
    let listener = UnixListener::bind(&p).unwrap();
    assert!(fs::metadata(&p).unwrap().file_type().is_socket());
    let cp = p.clone();
    let client = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&cp).unwrap();
        s.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        buf
    });
    let (mut conn, _) = listener.accept().unwrap();
    let mut buf = [0u8; 4];
    conn.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    conn.write_all(b"pong").unwrap();
    assert_eq!(&client.join().unwrap(), b"pong");
}

#[test]
fn mknod_char_device() {
    let m = Mount::new();
    let p = m.p("null");
    let c = cpath(&p);
    let dev = libc::makedev(1, 3);
    // SAFETY: valid path.
    cvt(unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, dev) }).unwrap();
    let check = || {
        let md = fs::symlink_metadata(&p).unwrap();
        assert!(md.file_type().is_char_device());
        assert_eq!(md.rdev(), dev, "st_rdev");
        assert_eq!((libc::major(md.rdev()), libc::minor(md.rdev())), (1, 3));
        assert_eq!(md.mode() & 0o7777, 0o644); // umask 022 never widens 0644
    };
    check();
    m.remount();
    check();
}

// ---------------------------------------------------------------- readdir

#[test]
fn readdir_100k_entries() {
    let m = Mount::new();
    let d = m.p("big");
    fs::create_dir(&d).unwrap();
    const N: usize = 100_000;
    for i in 0..N {
        File::create(d.join(format!("f{i:06}"))).unwrap();
    }
    let mut seen = HashSet::with_capacity(N);
    let mut count = 0usize;
    for e in fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(seen.insert(name.clone()), "duplicate entry {name}");
        count += 1;
    }
    assert_eq!(count, N, "entries returned by readdir");
    for i in 0..N {
        assert!(
            seen.contains(&format!("f{i:06}")),
            "f{i:06} missing from readdir"
        );
    }
}

#[test]
fn readdir_stable_while_deleting() {
    let m = Mount::new();
    let d = m.p("d");
    fs::create_dir(&d).unwrap();
    const N: usize = 5_000;
    for i in 0..N {
        File::create(d.join(format!("entry-with-a-longish-name-{i:05}"))).unwrap();
    }
    // Delete every entry right after it is returned: entries not yet returned still
    // exist, so every name must come back exactly once.
    let mut seen = HashSet::new();
    for e in fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name();
        assert!(
            seen.insert(name.clone()),
            "duplicate entry {name:?} while deleting"
        );
        fs::remove_file(d.join(&name)).unwrap();
    }
    assert_eq!(seen.len(), N, "names returned while deleting");
    assert!(
        names(&d).is_empty(),
        "directory not empty after deleting everything"
    );
}

// ---------------------------------------------------------------- xattrs

#[test]
fn xattrs() {
    let m = Mount::new();
    let p = m.p("f");
    fs::write(&p, b"x").unwrap();
    let big = pattern(3000, 5);
    setx(&p, "user.one", b"value-1", 0).unwrap();
    setx(&p, "trusted.two", b"", 0).unwrap();
    setx(&p, "security.three", &big, 0).unwrap();
    fs::create_dir(m.p("d")).unwrap();
    setx(&m.p("d"), "user.ondir", b"dirval", 0).unwrap();

    assert_eq!(getx(&p, "user.one").unwrap(), b"value-1");
    assert_eq!(getx(&p, "trusted.two").unwrap(), b"");
    assert_eq!(getx(&p, "security.three").unwrap(), big);
    assert_eq!(getx(&m.p("d"), "user.ondir").unwrap(), b"dirval");
    assert_eq!(listx(&p), ["security.three", "trusted.two", "user.one"]);

    // Size query and too-small buffer.
    assert_eq!(getx_raw(&p, "security.three", 0).unwrap().0, 3000);
    assert_errno(
        getx_raw(&p, "security.three", 100),
        libc::ERANGE,
        "getxattr small buffer",
    );
    let c = cpath(&p);
    // SAFETY: null buffer with size 0 is the documented size query.
    let need = unsafe { libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    assert_eq!(
        need as usize,
        "security.three\0trusted.two\0user.one\0".len()
    );
    let mut small = [0u8; 4];
    // SAFETY: `small` has 4 writable bytes.
    let r = cvt(unsafe { libc::listxattr(c.as_ptr(), small.as_mut_ptr().cast(), small.len()) });
    assert_errno(r, libc::ERANGE, "listxattr small buffer");

    // Flags and missing names.
    assert_errno(
        setx(&p, "user.one", b"v", libc::XATTR_CREATE),
        libc::EEXIST,
        "XATTR_CREATE existing",
    );
    assert_errno(
        setx(&p, "user.none", b"v", libc::XATTR_REPLACE),
        libc::ENODATA,
        "XATTR_REPLACE missing",
    );
    assert_errno(getx(&p, "user.none"), libc::ENODATA, "getxattr missing");
    assert_errno(
        removex(&p, "user.none"),
        libc::ENODATA,
        "removexattr missing",
    );
    setx(&p, "user.one", b"replaced", libc::XATTR_REPLACE).unwrap();
    setx(&p, "user.new", b"created", libc::XATTR_CREATE).unwrap();
    assert_eq!(getx(&p, "user.one").unwrap(), b"replaced");

    removex(&p, "trusted.two").unwrap();
    assert_errno(
        getx(&p, "trusted.two"),
        libc::ENODATA,
        "getxattr after remove",
    );

    let check = || {
        assert_eq!(listx(&p), ["security.three", "user.new", "user.one"]);
        assert_eq!(getx(&p, "user.one").unwrap(), b"replaced");
        assert_eq!(getx(&p, "user.new").unwrap(), b"created");
        assert_eq!(getx(&p, "security.three").unwrap(), big);
        assert_eq!(getx(&m.p("d"), "user.ondir").unwrap(), b"dirval");
    };
    check();
    m.remount();
    check();
}

// ---------------------------------------------------------------- statfs

#[test]
fn statfs_matches_store_filesystem() {
    let m = Mount::new();
    let mnt = statvfs(&m.mp);
    let store = statvfs(&m.store);
    let mnt_avail = mnt.f_bavail as u128 * mnt.f_frsize as u128;
    let store_avail = store.f_bavail as u128 * store.f_frsize as u128;
    assert!(mnt.f_bavail > 0, "f_bavail is 0");
    assert!(mnt.f_blocks >= mnt.f_bavail, "f_blocks < f_bavail");
    let diff = mnt_avail.abs_diff(store_avail);
    assert!(
        diff * 10 <= store_avail,
        "available bytes: mount {mnt_avail}, store fs {store_avail} (differ > 10 %)"
    );
}

// ---------------------------------------------------------------- permissions

/// Run `cat path` as uid/gid 65534 with no supplementary groups.
fn cat_as_nobody(path: &Path) -> std::process::Output {
    let mut cmd = Command::new("cat");
    cmd.arg(path);
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("spawn cat as nobody")
}

#[test]
fn permissions_enforced_for_other_uid() {
    let m = Mount::new();
    // The temp dir and mount root must be traversable for the other uid.
    fs::set_permissions(m.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&m.mp, fs::Permissions::from_mode(0o755)).unwrap();
    let secret = m.p("secret");
    let public = m.p("public");
    fs::write(&secret, b"top secret\n").unwrap();
    fs::write(&public, b"public data\n").unwrap();
    for (p, mode) in [(&secret, 0o600), (&public, 0o644)] {
        std::os::unix::fs::chown(p, Some(1234), Some(1234)).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    let o = cat_as_nobody(&secret);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "uid 65534 read a 0600 file of uid 1234: {:?}",
        o.stdout
    );
    assert!(o.stdout.is_empty());
    assert!(
        err.contains("Permission denied"),
        "unexpected stderr: {err}"
    );

    let o = cat_as_nobody(&public);
    assert!(
        o.status.success(),
        "uid 65534 could not read a 0644 file: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout, b"public data\n");
}

// ---------------------------------------------------------------- fallocate / holes

fn fallocate(f: &File, mode: i32, off: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an owned fd.
    cvt(unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) }).map(|_| ())
}

#[test]
fn fallocate_modes() {
    let m = Mount::new();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("fa"))
        .unwrap();
    fallocate(&f, 0, 0, 300_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 300_000, "mode 0 extends size");
    assert!(read_at(&f, 0, 300_000).iter().all(|b| *b == 0));
    // KEEP_SIZE does not extend.
    fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 0, 400_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 300_000, "KEEP_SIZE keeps size");

    let data = pattern(300_000, 3);
    f.write_all_at(&data, 0).unwrap();
    let (hs, hl) = (1000u64, 200_000u64); // partial + whole blocks
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        hs,
        hl,
    )
    .unwrap();
    assert_eq!(
        f.metadata().unwrap().len(),
        300_000,
        "punch hole keeps size"
    );
    let mut want = data.clone();
    want[hs as usize..(hs + hl) as usize].fill(0);
    assert_bytes(&read_at(&f, 0, 300_000), &want, "after punch hole");
    drop(f);
    assert_bytes(
        &fs::read(m.p("fa")).unwrap(),
        &want,
        "after punch hole (reopen)",
    );

    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.p("fa"))
        .unwrap();
    assert_errno(
        fallocate(&f, libc::FALLOC_FL_COLLAPSE_RANGE, 0, BLOCK),
        libc::EOPNOTSUPP,
        "FALLOC_FL_COLLAPSE_RANGE",
    );
    assert_errno(
        fallocate(&f, libc::FALLOC_FL_INSERT_RANGE, 0, BLOCK),
        libc::EOPNOTSUPP,
        "FALLOC_FL_INSERT_RANGE",
    );
    assert_eq!(f.metadata().unwrap().len(), 300_000);
    drop(f);
    m.remount();
    assert_bytes(&fs::read(m.p("fa")).unwrap(), &want, "after remount");
}

fn lseek(f: &File, off: i64, whence: i32) -> io::Result<i64> {
    // SAFETY: plain syscall on an owned fd.
    cvt(unsafe { libc::lseek(f.as_raw_fd(), off, whence) })
}

#[test]
fn seek_data_and_hole() {
    let m = Mount::new();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("sparse"))
        .unwrap();
    let ten = 10 * MIB as i64;
    f.write_all_at(&pattern(4096, 1), 0).unwrap();
    f.write_all_at(&pattern(4096, 2), ten as u64).unwrap();
    f.sync_all().unwrap();
    let size = ten + 4096;
    assert_eq!(f.metadata().unwrap().len(), size as u64);

    assert_eq!(
        lseek(&f, 0, libc::SEEK_DATA).unwrap(),
        0,
        "SEEK_DATA from 0"
    );
    let hole = lseek(&f, 0, libc::SEEK_HOLE).unwrap();
    assert!(
        (4096..ten).contains(&hole),
        "SEEK_HOLE from 0 = {hole}, want in [4096, 10 MiB)"
    );
    let data = lseek(&f, hole, libc::SEEK_DATA).unwrap();
    assert!(
        data >= hole && data <= ten,
        "SEEK_DATA from hole {hole} = {data}, want in [{hole}, {ten}]"
    );
    assert_eq!(
        lseek(&f, ten, libc::SEEK_HOLE).unwrap(),
        size,
        "SEEK_HOLE in last data = EOF"
    );
    assert_errno(
        lseek(&f, size, libc::SEEK_DATA),
        libc::ENXIO,
        "SEEK_DATA at EOF",
    );
    assert_errno(
        lseek(&f, size + 100, libc::SEEK_DATA),
        libc::ENXIO,
        "SEEK_DATA past EOF",
    );
    assert_errno(
        lseek(&f, size + 100, libc::SEEK_HOLE),
        libc::ENXIO,
        "SEEK_HOLE past EOF",
    );
}

#[test]
fn sparse_file_takes_no_space() {
    let m = Mount::new();
    let p = m.p("sparse");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.write_all_at(b"Z", GIB).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let check = |when: &str| {
        let md = fs::metadata(&p).unwrap();
        assert_eq!(md.len(), GIB + 1, "size {when}");
        assert!(
            md.blocks() * 512 < MIB,
            "{when}: st_blocks = {} ({} bytes) for a 1-byte sparse file",
            md.blocks(),
            md.blocks() * 512
        );
        let f = File::open(&p).unwrap();
        assert_eq!(read_at(&f, GIB, 1), b"Z", "last byte {when}");
        assert!(
            read_at(&f, GIB / 2, 4096).iter().all(|b| *b == 0),
            "hole reads zeros {when}"
        );
    };
    check("before remount");
    m.remount();
    check("after remount");
}

#[test]
fn file_over_4gib() {
    let m = Mount::new();
    let p = m.p("huge");
    let data = pattern(MIB as usize, 42);
    let off = 5 * GIB;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.write_all_at(&data, off).unwrap();
    assert_bytes(&read_at(&f, off, data.len()), &data, "read back at 5 GiB");
    f.sync_all().unwrap();
    drop(f);
    let check = |when: &str| {
        assert_eq!(fs::metadata(&p).unwrap().len(), off + MIB, "size {when}");
        let f = File::open(&p).unwrap();
        assert_bytes(&read_at(&f, off, data.len()), &data, when);
        assert!(read_at(&f, 4 * GIB - 10, 20).iter().all(|b| *b == 0));
    };
    check("before remount");
    m.remount();
    check("after remount");
}

// ---------------------------------------------------------------- handles

#[test]
fn o_append_two_handles_interleave() {
    let m = Mount::new();
    let p = m.p("log");
    let open = || {
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&p)
            .unwrap()
    };
    let (mut a, mut b) = (open(), open());
    let mut want = String::new();
    for i in 0..500 {
        let ra = format!("A{i:05} first handle\n");
        let rb = format!("B{i:05} second\n");
        a.write_all(ra.as_bytes()).unwrap();
        b.write_all(rb.as_bytes()).unwrap();
        want.push_str(&ra);
        want.push_str(&rb);
    }
    drop((a, b));
    assert_eq!(fs::read_to_string(&p).unwrap(), want);
    m.remount();
    assert_eq!(fs::read_to_string(&p).unwrap(), want);
}

#[test]
fn open_unlinked_file_stays_usable() {
    let m = Mount::new();
    let p = m.p("tmpfile");
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    let first = pattern(100_000, 1);
    f.write_all(&first).unwrap();
    fs::remove_file(&p).unwrap();
    assert!(
        names(&m.mp).is_empty(),
        "name still listed: {:?}",
        names(&m.mp)
    );
    assert_errno(fs::metadata(&p), libc::ENOENT, "stat unlinked name");

    let second = pattern(150_000, 2);
    f.write_all(&second).unwrap();
    f.sync_all().unwrap();
    let md = f.metadata().unwrap();
    assert_eq!(md.nlink(), 0, "fstat nlink of an unlinked file");
    assert_eq!(md.len(), 250_000);
    let mut all = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut all).unwrap();
    let mut want = first.clone();
    want.extend_from_slice(&second);
    assert_bytes(&all, &want, "content of the unlinked file");
    // A new file with the same name is a different file.
    fs::write(&p, b"new").unwrap();
    assert_bytes(
        &read_at(&f, 0, 250_000),
        &want,
        "unlinked file after name reuse",
    );
    assert_eq!(fs::read(&p).unwrap(), b"new");
}

#[test]
fn flock_conflicts_between_descriptions() {
    let m = Mount::new();
    let p = m.p("lockme");
    fs::write(&p, b"x").unwrap();
    let a = File::open(&p).unwrap();
    let b = File::open(&p).unwrap();
    // SAFETY: plain syscalls on owned fds.
    unsafe {
        cvt(libc::flock(a.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)).unwrap();
        assert_errno(
            cvt(libc::flock(b.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)),
            libc::EWOULDBLOCK,
            "second LOCK_EX while held",
        );
        assert_errno(
            cvt(libc::flock(b.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB)),
            libc::EWOULDBLOCK,
            "LOCK_SH while LOCK_EX held",
        );
        cvt(libc::flock(a.as_raw_fd(), libc::LOCK_UN)).unwrap();
        cvt(libc::flock(b.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)).unwrap();
    }
}

#[test]
fn fcntl_lock_conflicts_with_child_process() {
    assert!(
        Command::new("python3")
            .arg("-c")
            .arg("import fcntl")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this test needs python3"
    );
    let m = Mount::new();
    let p = m.p("lockme");
    fs::write(&p, b"0123456789").unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let set = |ty: i32| {
        // SAFETY: zeroed flock is valid; fields set below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = ty as _;
        fl.l_whence = libc::SEEK_SET as _;
        // SAFETY: F_SETLK with a valid flock struct on an owned fd.
        cvt(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) }).map(|_| ())
    };
    let child = || {
        let o = Command::new("python3")
            .arg("-c")
            .arg(
                "import fcntl, sys\n\
                 f = open(sys.argv[1], 'r+')\n\
                 try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n\
                 except OSError as e:\n    print('blocked', e.errno); sys.exit(3)\n\
                 print('locked')\n",
            )
            .arg(&p)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
    };
    set(libc::F_WRLCK).unwrap();
    let (code, out) = child();
    assert_eq!(code, Some(3), "child locked a range we hold: {out}");
    assert!(
        out == format!("blocked {}", libc::EAGAIN) || out == format!("blocked {}", libc::EACCES),
        "child output: {out}"
    );
    set(libc::F_UNLCK).unwrap();
    let (code, out) = child();
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "locked"),
        "child after unlock"
    );
}

// ---------------------------------------------------------------- mmap

#[test]
fn shared_mmap_writes_persist() {
    let m = Mount::new();
    let p = m.p("mapped");
    let len = MIB as usize;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.set_len(len as u64).unwrap();
    let data = pattern(len, 77);
    // SAFETY: mapping `len` bytes of a file of exactly that size; the mapping is used only
    // within this block and unmapped before the file is closed.
    unsafe {
        let ptr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "mmap: {}",
            io::Error::last_os_error()
        );
        std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.cast::<u8>(), len);
        cvt(libc::msync(ptr, len, libc::MS_SYNC)).expect("msync");
        cvt(libc::munmap(ptr, len)).expect("munmap");
    }
    drop(f);
    assert_bytes(&fs::read(&p).unwrap(), &data, "read() after msync+munmap");
    m.remount();
    assert_bytes(&fs::read(&p).unwrap(), &data, "read() after remount");
}

// ---------------------------------------------------------------- inode numbers and blocks

#[test]
fn inode_numbers_stable() {
    let m = Mount::new();
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("f"), b"x").unwrap();
    let ino_f = fs::metadata(m.p("f")).unwrap().ino();
    let ino_d = fs::metadata(m.p("d")).unwrap().ino();
    assert_ne!(ino_f, ino_d);
    fs::rename(m.p("f"), m.p("d/g")).unwrap();
    assert_eq!(
        fs::metadata(m.p("d/g")).unwrap().ino(),
        ino_f,
        "after rename"
    );
    fs::rename(m.p("d"), m.p("e")).unwrap();
    assert_eq!(
        fs::metadata(m.p("e")).unwrap().ino(),
        ino_d,
        "dir after rename"
    );
    // readdir's d_ino agrees with stat.
    // (a DirEntry keeps its directory open: drop it before remounting)
    let d_ino = fs::read_dir(m.p("e"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .ino();
    assert_eq!(d_ino, ino_f, "d_ino");
    m.remount();
    assert_eq!(
        fs::metadata(m.p("e/g")).unwrap().ino(),
        ino_f,
        "file after remount"
    );
    assert_eq!(
        fs::metadata(m.p("e")).unwrap().ino(),
        ino_d,
        "dir after remount"
    );
}

#[test]
fn st_blocks_of_random_file() {
    let m = Mount::new();
    let p = m.p("random");
    let mut f = File::create(&p).unwrap();
    f.write_all(&pattern(100_000, 1234)).unwrap();
    f.sync_all().unwrap();
    // Allocation in 4 KiB units, as ext4 reports it.
    let want = 100_000u64.div_ceil(4096) * 8;
    assert_eq!(f.metadata().unwrap().blocks(), want, "fstat st_blocks");
    drop(f);
    assert_eq!(fs::metadata(&p).unwrap().blocks(), want, "stat st_blocks");
}

/// Set-user-id / set-group-id are dropped exactly as on the host filesystem (the
/// daemon does it under FUSE_HANDLE_KILLPRIV_V2): by writes and truncation of an
/// unprivileged owner, by chown, and not by root's writes. The same script runs on
/// a host directory and on the mount; the modes it prints must agree.
#[test]
fn suid_sgid_dropped_like_the_host() {
    assert!(
        Path::new("/usr/bin/setpriv").exists(),
        "this test needs /usr/bin/setpriv"
    );
    let m = Mount::new();
    let host = tempfile::tempdir().unwrap();
    let script = r#"
        set -e
        as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
        show() { for f in "$@"; do stat -c '%n %a' "$f"; done; }
        for f in w t o r c cg g; do echo data > $f; chown 65534:65534 $f; done
        chmod 6755 w t o r c; chmod 2755 cg; chmod 2745 g
        chmod 0777 .
        as_nobody sh -c 'echo more >> w'         # unprivileged write
        as_nobody truncate -s 1 t                # unprivileged truncate
        as_nobody sh -c ': > o'                  # unprivileged open(O_TRUNC)
        echo root >> r                           # root's write keeps them
        chown 65534:0 c; chown 0:0 cg            # chown drops them
        as_nobody sh -c 'echo x >> g'            # sgid without group-exec stays
        show w t o r c cg g
        cat w; stat -c '%s' t
    "#;
    let native = sh(host.path(), script);
    let ours = sh(&m.mp, script);
    assert_eq!(ours, native, "mount differs from the host");
    // The kernel's cached attributes agree too after a remount (what was stored).
    m.remount();
    let again = sh(&m.mp, "stat -c '%n %a' w t o r c cg g");
    let want: String = native.lines().take(7).map(|l| format!("{l}\n")).collect();
    assert_eq!(again, want);
}
