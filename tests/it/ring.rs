//! FUSE over io_uring (`mount --transport uring`): the transport in use, a POSIX
//! workload over the ring, mount/unmount cycles under load without hangs or leaked
//! threads, and the typed refusal when the kernel's switch is off.
//!
//! The kernel's switch (`/sys/module/fuse/parameters/enable_uring`) is global:
//! these tests turn it on while they run (and restore it after the last of them),
//! under one lock, since one test turns it off. A kernel without FUSE over io_uring
//! prints a loud `RING UNAVAILABLE:` line and passes, unless
//! `TREEFORK_REQUIRE_RING=1` (CI's machines have it).

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::harness::{Mount, tf, tf_ok, umount_ok};

const SWITCH: &str = "/sys/module/fuse/parameters/enable_uring";

/// The switch turned on for the guard's life (restored as it was when dropped).
struct RingOn {
    before: String,
    _lock: MutexGuard<'static, ()>,
}

static SWITCH_LOCK: Mutex<()> = Mutex::new(());

impl RingOn {
    /// `None` (after the loud line) when this kernel has no ring.
    fn get(test: &str) -> Option<RingOn> {
        let lock = SWITCH_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let Ok(before) = fs::read_to_string(SWITCH) else {
            eprintln!(
                "RING UNAVAILABLE: {SWITCH} does not exist (kernel without CONFIG_FUSE_IO_URING); {test} skipped"
            );
            assert!(
                std::env::var("TREEFORK_REQUIRE_RING").as_deref() != Ok("1"),
                "TREEFORK_REQUIRE_RING=1 and this kernel has no FUSE over io_uring"
            );
            return None;
        };
        set_switch("Y");
        Some(RingOn {
            before: before.trim().to_string(),
            _lock: lock,
        })
    }
}

impl Drop for RingOn {
    fn drop(&mut self) {
        set_switch(&self.before);
    }
}

fn set_switch(v: &str) {
    fs::write(SWITCH, v).unwrap_or_else(|e| panic!("cannot write {SWITCH} (root?): {e}"));
}

/// A fresh store with session `s` mounted over the ring.
fn ring_mount() -> Mount {
    Mount::with_options("s", &["--transport", "uring"])
}

/// The transport `session show` names for a mounted session.
fn transport(m: &Mount, session: &str) -> String {
    let out = tf_ok(&m.store, &["session", "show", session, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["transport"].as_str().unwrap_or("null").to_string()
}

#[test]
fn ring_mount_names_its_transport() {
    let Some(_on) = RingOn::get("ring_mount_names_its_transport") else {
        return;
    };
    let m = ring_mount();
    assert_eq!(transport(&m, "s"), "uring");
    let list: serde_json::Value =
        serde_json::from_str(&tf_ok(&m.store, &["sessions", "--json"])).unwrap();
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "s")
        .unwrap()
        .clone();
    assert_eq!(row["transport"], "uring");
    // A second session of the same daemon over /dev/fuse.
    let mp2 = m.tmp.path().join("dev");
    fs::create_dir_all(&mp2).unwrap();
    let mp2s = mp2.to_str().unwrap();
    tf_ok(
        &m.store,
        &["mount", mp2s, "--session", "d", "--transport", "dev"],
    );
    assert_eq!(transport(&m, "d"), "dev");
    umount_ok(&m.store, &mp2);
}

#[test]
fn ring_refused_names_the_switch() {
    let Some(_on) = RingOn::get("ring_refused_names_the_switch") else {
        return;
    };
    set_switch("N");
    let tmp = tempfile::Builder::new()
        .prefix("tf-test-")
        .tempdir()
        .unwrap();
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    fs::create_dir_all(&mp).unwrap();
    let mps = mp.to_str().unwrap();
    let o = tf(
        &store,
        &[
            "--json",
            "mount",
            mps,
            "--session",
            "s",
            "--transport",
            "uring",
        ],
    );
    assert!(!o.status.success(), "mount over a disabled ring succeeded");
    let err = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ring_unavailable"), "{err}");
    assert!(err.contains(SWITCH), "{err}");
    assert!(crate::harness::fuse_mounts_under(tmp.path()).is_empty());
    // `auto` falls back to /dev/fuse.
    let o = tf(
        &store,
        &["mount", mps, "--session", "s", "--transport", "auto"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = Mount::at(tmp, store, mp, "s");
    assert_eq!(transport(&m, "s"), "dev");
}

/// xattr helpers (libc; the test crate has no xattr dependency).
fn setx(p: &Path, name: &str, val: &[u8]) -> std::io::Result<()> {
    let (p, n) = (cstr(p.to_str().unwrap()), cstr(name));
    // SAFETY: valid C strings; `val` is a live buffer of `val.len()` bytes.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), val.as_ptr().cast(), val.len(), 0) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getx(p: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let (p, n) = (cstr(p.to_str().unwrap()), cstr(name));
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` has `buf.len()` writable bytes.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn cstr(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).unwrap()
}

#[test]
fn ring_serves_a_posix_workload() {
    let Some(_on) = RingOn::get("ring_serves_a_posix_workload") else {
        return;
    };
    let m = ring_mount();
    assert_eq!(transport(&m, "s"), "uring");
    let mp = &m.mp;
    // Write and read back: small, and large enough to go to the worker pool.
    let small = b"hello over the ring\n".to_vec();
    fs::write(mp.join("small"), &small).unwrap();
    let big = crate::harness::pattern(3 << 20, 7);
    fs::write(mp.join("big"), &big).unwrap();
    let f = fs::OpenOptions::new()
        .append(true)
        .open(mp.join("big"))
        .unwrap();
    f.sync_all().unwrap();
    drop(f);
    // Drop the page cache so the reads reach the daemon.
    fs::write("/proc/sys/vm/drop_caches", "1").unwrap();
    assert_eq!(fs::read(mp.join("small")).unwrap(), small);
    assert!(
        fs::read(mp.join("big")).unwrap() == big,
        "big file read back differs"
    );
    // Rename, unlink.
    fs::rename(mp.join("small"), mp.join("renamed")).unwrap();
    assert!(!mp.join("small").exists());
    assert_eq!(fs::read(mp.join("renamed")).unwrap(), small);
    // A directory of 1,000 names, listed.
    fs::create_dir(mp.join("d")).unwrap();
    for i in 0..1000 {
        fs::write(mp.join(format!("d/name-{i:04}")), i.to_string()).unwrap();
    }
    let mut names: Vec<String> = fs::read_dir(mp.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let want: Vec<String> = (0..1000).map(|i| format!("name-{i:04}")).collect();
    assert_eq!(names, want);
    assert_eq!(fs::read_to_string(mp.join("d/name-0777")).unwrap(), "777");
    for i in (0..1000).step_by(2) {
        fs::remove_file(mp.join(format!("d/name-{i:04}"))).unwrap();
    }
    assert_eq!(fs::read_dir(mp.join("d")).unwrap().count(), 500);
    // Extended attributes.
    setx(&mp.join("renamed"), "user.color", b"blue").unwrap();
    assert_eq!(getx(&mp.join("renamed"), "user.color").unwrap(), b"blue");
    assert_eq!(
        getx(&mp.join("renamed"), "user.none")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENODATA)
    );
    // Symlink and hard link.
    std::os::unix::fs::symlink("renamed", mp.join("ln")).unwrap();
    assert_eq!(fs::read_link(mp.join("ln")).unwrap(), Path::new("renamed"));
    assert_eq!(fs::read(mp.join("ln")).unwrap(), small);
    fs::hard_link(mp.join("renamed"), mp.join("hard")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(mp.join("hard")).unwrap().nlink(), 2);
    fs::remove_file(mp.join("renamed")).unwrap();
    assert_eq!(fs::read(mp.join("hard")).unwrap(), small);
    // Truncate, fsync.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(mp.join("big"))
        .unwrap();
    f.set_len(4096).unwrap();
    f.sync_all().unwrap();
    drop(f);
    assert_eq!(fs::metadata(mp.join("big")).unwrap().len(), 4096);
    assert!(fs::read(mp.join("big")).unwrap() == big[..4096]);
    // Errors travel too.
    assert_eq!(
        fs::remove_dir(mp.join("d")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        fs::read(mp.join("missing")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    // Everything survives a remount.
    m.umount();
    m.mount_with(&["--transport", "uring"]);
    assert_eq!(fs::read(mp.join("hard")).unwrap(), small);
    assert_eq!(fs::read_dir(mp.join("d")).unwrap().count(), 500);
    assert_eq!(getx(&mp.join("hard"), "user.color").unwrap(), b"blue");
}

/// Threads of process `pid`.
fn threads(pid: i32) -> usize {
    fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

/// A process that keeps sending LOOKUPs and GETATTRs into `mp` without holding
/// anything open there (so an unmount is never busy because of it).
fn reader(mp: &Path) -> Child {
    let script = "import os,sys\nm=sys.argv[1]\ni=0\nwhile True:\n    i+=1\n    try:\n        os.access(m+'/miss'+str(i),0); os.stat(m+'/f')\n    except OSError:\n        pass\n";
    Command::new("python3")
        .args(["-c", script, mp.to_str().unwrap()])
        .current_dir("/")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3")
}

#[test]
fn ring_mount_cycles_under_load_leak_no_thread() {
    let Some(_on) = RingOn::get("ring_mount_cycles_under_load_leak_no_thread") else {
        return;
    };
    // An anchor session keeps the daemon alive across the cycles.
    let anchor = Mount::with_options("anchor", &["--transport", "dev"]);
    let pid = anchor.daemon_pid();
    let mp = anchor.tmp.path().join("cyc");
    fs::create_dir_all(&mp).unwrap();
    let mps = mp.to_str().unwrap().to_string();
    let cycle = |i: usize| {
        tf_ok(
            &anchor.store,
            &["mount", &mps, "--session", "c", "--transport", "uring"],
        );
        if i == 0 {
            fs::write(mp.join("f"), b"x").unwrap();
        }
        let mut r = reader(&mp);
        std::thread::sleep(Duration::from_millis(20));
        umount_ok(&anchor.store, &mp);
        let _ = r.kill();
        let _ = r.wait();
    };
    cycle(0);
    let baseline = threads(pid);
    let t0 = Instant::now();
    for i in 1..=100 {
        let t = Instant::now();
        cycle(i);
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "cycle {i} took {:?}",
            t.elapsed()
        );
    }
    assert!(
        t0.elapsed() < Duration::from_secs(300),
        "100 cycles took {:?}",
        t0.elapsed()
    );
    // Threads end as their mounts go; give the last ones a moment.
    let t = Instant::now();
    while threads(pid) > baseline && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        threads(pid) <= baseline,
        "daemon threads {} after 100 ring mounts, {baseline} before",
        threads(pid)
    );
    assert!(!crate::harness::daemon_log(&anchor.store).contains("left running"));
}
