//! The locked-down control surface: agent sockets (additive operations only), peer
//! uids, the request rate bound and connection cap, path arguments that must stay
//! inside the workspace, imports that never follow symlinks, one daemon per store.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Mount, bin, daemon_log, tf, tf_ok};

/// Run the CLI against an explicit socket (as an agent runtime does), in `dir`.
pub(crate) fn on_socket(sock: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--json")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .expect("run treefork")
}

fn on_socket_ok(m: &Mount, sock: &Path, args: &[&str]) -> Value {
    let o = on_socket(sock, &m.mp, args);
    assert!(
        o.status.success(),
        "treefork --socket {} {args:?} failed: {}\n{}",
        sock.display(),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}: {:?}", o.stdout))
}

fn on_socket_err(sock: &Path, dir: &Path, args: &[&str]) -> String {
    let o = on_socket(sock, dir, args);
    assert!(
        !o.status.success(),
        "treefork --socket {} {args:?} unexpectedly succeeded: {}",
        sock.display(),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The user's CLI, acting on the workspace of `m`.
fn user_ok(m: &Mount, args: &[&str]) -> Value {
    let mut full = vec!["--json", "-C", m.mp.to_str().unwrap()];
    full.extend_from_slice(args);
    serde_json::from_str(&tf_ok(&m.store, &full)).unwrap()
}

/// One request line on a raw connection; returns the response (events skipped).
fn request(r: &mut BufReader<UnixStream>, req: &Value) -> Value {
    let mut line = serde_json::to_vec(req).unwrap();
    line.push(b'\n');
    r.get_mut().write_all(&line).unwrap();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert!(!l.is_empty(), "connection closed after {req}");
        let v: Value = serde_json::from_str(&l).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
}

fn connect(sock: &Path) -> BufReader<UnixStream> {
    let s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    BufReader::new(s)
}

fn code(v: &Value) -> &str {
    assert_eq!(v["ok"], false, "{v}");
    v["error"]["code"].as_str().unwrap()
}

fn user_socket(m: &Mount) -> PathBuf {
    treefork::control::find_mount(&m.mp)
        .expect("mount registered")
        .socket
        .expect("session socket recorded")
}

/// Unmounts a fork (or any extra mount) at the end of a test, even a failed one.
struct Unmount(PathBuf, PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        if !tf(&self.0, &["umount", self.1.to_str().unwrap()])
            .status
            .success()
        {
            treefork::daemon::detach(&self.1);
        }
    }
}

/// A mount of session `s` with an agent socket in its temporary directory.
fn agent_mount(extra: &[&str]) -> (Mount, PathBuf, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let mut args = vec!["--agent-socket", sock.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Mount::with_options("s", &args), sock, dir)
}

#[test]
fn agent_socket_allows_additive_ops() {
    let (m, sock, _dir) = agent_mount(&[]);
    let rec = treefork::control::find_mount(&m.mp).unwrap();
    assert_eq!(rec.agent_socket.as_deref(), Some(sock.as_path()));
    let md = fs::symlink_metadata(&sock).unwrap();
    assert!(md.file_type().is_socket());
    assert_eq!((md.mode() & 0o777, md.uid()), (0o600, 0));

    let v = on_socket_ok(&m, &sock, &["log"]);
    assert_eq!(v["checkpoints"], json!([]));
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/a.txt"), "one\n").unwrap();
    let c1 = on_socket_ok(&m, &sock, &["checkpoint", "-m", "by the agent"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    fs::write(m.p("d/a.txt"), "two\n").unwrap();
    fs::write(m.p("b.txt"), "new\n").unwrap();

    // TREEFORK_SOCKET is what an agent runtime sets.
    let o = Command::new(bin())
        .args(["--json", "status"])
        .env("TREEFORK_SOCKET", &sock)
        .env_remove("TREEFORK_STORE")
        .current_dir(&m.mp)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["changes"],
        json!([{"path": "b.txt", "change": "added"}, {"path": "d/a.txt", "change": "modified"}])
    );
    let v = on_socket_ok(&m, &sock, &["diff", "--stat"]);
    assert_eq!(v["entries"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        on_socket_ok(&m, &sock, &["log"])["checkpoints"][0]["message"],
        "by the agent"
    );
    let v = on_socket_ok(&m, &sock, &["branch", "agent-b"]);
    assert_eq!(v["branch"], "agent-b");
    let v = on_socket_ok(&m, &sock, &["branches"]);
    assert!(
        v["branches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["name"] == "agent-b"),
        "{v}"
    );
    let v = on_socket_ok(&m, &sock, &["config"]);
    assert!(v["config"]["auto_checkpoint_ops"].is_number(), "{v}");
    fs::write(m.p("c.txt"), "pending\n").unwrap();
    let v = on_socket_ok(&m, &sock, &["checkout", &c1]);
    assert_eq!(fs::read_to_string(m.p("d/a.txt")).unwrap(), "one\n");
    assert!(!m.p("b.txt").exists());
    // Nothing was lost: the pending changes were saved first.
    let saved = v["saved"]["ref"].as_str().expect("pending changes saved");
    assert!(saved.starts_with("auto/before-checkout-"), "{v}");
    // Restore with a path relative to the current directory (inside the workspace).
    fs::write(m.p("e.txt"), "pending\n").unwrap();
    let o = on_socket(&sock, &m.p("d"), &["restore", "agent-b", "a.txt"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(fs::read_to_string(m.p("d/a.txt")).unwrap(), "two\n");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["saved"]["ref"].is_string(), "restore saved first: {v}");
    let e = on_socket_err(&sock, &m.p("d"), &["restore", "agent-b", "../../x"]);
    assert!(e.contains("outside the workspace"), "{e}");

    // A fork (without sockets of its own).
    let fmp = m.tmp.path().join("fork");
    fs::create_dir(&fmp).unwrap();
    let v = on_socket_ok(
        &m,
        &sock,
        &[
            "fork",
            "f",
            "--from",
            "agent-b",
            "--mount",
            fmp.to_str().unwrap(),
        ],
    );
    let _fork = Unmount(m.store.clone(), fmp.clone());
    assert_eq!(v["session"], "f");
    assert_eq!(fs::read_to_string(fmp.join("b.txt")).unwrap(), "new\n");

    // The user socket still does everything.
    let user = user_ok(&m, &["status"]);
    assert!(user["changes"].is_array());
    drop(_fork);

    // The agent socket goes away with the mount.
    m.umount();
    assert!(!sock.exists(), "agent socket left behind");
    // It is part of the session: a plain remount serves it again
    // (tests/it/agent_socket.rs).
    m.mount();
    let md = fs::symlink_metadata(&sock).unwrap();
    assert!(
        md.file_type().is_socket(),
        "a plain remount serves it again"
    );
}

#[test]
fn agent_socket_refuses_destructive_ops() {
    let (m, sock, _dir) = agent_mount(&[]);
    fs::write(m.p("f"), "x").unwrap();
    let b = user_ok(&m, &["branch", "keep"])["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    let other = m.tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    let other_s = other.to_str().unwrap();
    let mp = m.mp.to_str().unwrap();
    for (args, what) in [
        (&["branch", "-d", "keep"][..], "branch_delete"),
        (&["config", "auto_checkpoint_ops=5"], "config with \"set\""),
        (&["umount", mp], "umount"),
        (&["sessions"], "sessions"),
        (&["gc"], "gc"),
        (&["gc", "--dry-run"], "gc"),
        (&["fsck"], "fsck"),
        (&["session", "rm", "s"], "session_rm"),
        (&["mount", other_s, "--session", "x"], "mount"),
        (
            &[
                "fork",
                "g",
                "--mount",
                other_s,
                "--agent-socket",
                "/tmp/x.sock",
            ],
            "fork with agent_socket",
        ),
    ] {
        let e = on_socket_err(&sock, &m.mp, args);
        assert!(
            e.contains(what)
                && e.contains(
                    "is not allowed on an agent socket (agent role: additive operations only)"
                ),
            "{args:?}: {e}"
        );
    }
    // An existing branch is never moved: refused as existing, still where it was.
    fs::write(m.p("f"), "y").unwrap();
    let e = on_socket_err(&sock, &m.mp, &["branch", "keep"]);
    assert!(e.contains("already exists"), "{e}");
    let list = user_ok(&m, &["branches"]);
    let keep = list["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "keep")
        .expect("branch kept");
    assert_eq!(keep["checkpoint"], b.as_str());
    assert!(!treefork::daemon::is_mountpoint(&other));
    assert!(treefork::daemon::is_mountpoint(&m.mp));

    // Raw protocol: the exact refusal, and the connection stays usable.
    let mut c = connect(&sock);
    for req in [
        json!({"v": 1, "op": "branch_delete", "name": "keep"}),
        json!({"v": 1, "op": "shutdown"}),
        json!({"v": 1, "op": "config", "set": {"auto_checkpoint_ops": 1}}),
    ] {
        let v = request(&mut c, &req);
        assert_eq!(code(&v), "forbidden", "{v}");
        let op = req["op"].as_str().unwrap();
        if op != "config" {
            assert_eq!(
                v["error"]["message"],
                format!(
                    "{op} is not allowed on an agent socket (agent role: additive operations only)"
                )
            );
        }
    }
    let v = request(&mut c, &json!({"v": 1, "op": "ping"}));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["role"], "agent");
    assert_eq!(v["mountpoint"], mp);
    // The daemon did not shut down; the user socket has every right.
    let mut u = connect(&user_socket(&m));
    assert_eq!(request(&mut u, &json!({"v":1,"op":"ping"}))["role"], "user");
    let v = user_ok(&m, &["config", "auto_checkpoint_ops=5"]);
    assert_eq!(v["config"]["auto_checkpoint_ops"], 5);
    user_ok(&m, &["branch", "-d", "keep"]);
    assert_eq!(user_ok(&m, &["sessions"])["sessions"][0]["name"], "s");
}

#[test]
fn agent_socket_path_is_checked() {
    let m = Mount::new();
    m.umount();
    let plain = m.tmp.path().join("precious");
    fs::write(&plain, "keep me").unwrap();
    let o = tf(
        &m.store,
        &[
            "mount",
            m.mp.to_str().unwrap(),
            "--session",
            "s",
            "--agent-socket",
            plain.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("exists and is not a socket"), "{e}");
    assert_eq!(fs::read_to_string(&plain).unwrap(), "keep me");
    assert!(!treefork::daemon::is_mountpoint(&m.mp));
    // A symlink there is not followed either.
    let link = m.tmp.path().join("link.sock");
    std::os::unix::fs::symlink(&plain, &link).unwrap();
    let o = tf(
        &m.store,
        &[
            "mount",
            m.mp.to_str().unwrap(),
            "--agent-socket",
            link.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert_eq!(fs::read_to_string(&plain).unwrap(), "keep me");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    m.mount();
}

/// Run the CLI as uid/gid 65534 (no groups) against `sock`.
fn cli_as_nobody(sock: &Path, args: &[&str]) -> Output {
    // The build tree may sit under a directory uid 65534 cannot search (a clone in
    // a 0700 temp dir): run a copy from an open directory.
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("treefork");
    fs::copy(bin(), &exe).unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new(&exe);
    cmd.arg("--json")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .current_dir("/")
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .env("HOME", "/nonexistent");
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("spawn treefork as nobody")
}

#[test]
fn agent_socket_serves_only_its_uid() {
    // Without --agent-uid: uid 65534 is refused by the peer check even when the file
    // permissions let it connect (a hard link in an open directory, mode opened).
    let (m, sock, _dir) = agent_mount(&[]);
    let open_dir = tempfile::tempdir().unwrap();
    fs::set_permissions(open_dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let link = open_dir.path().join("a.sock");
    fs::hard_link(&sock, &link).unwrap();
    fs::set_permissions(&link, fs::Permissions::from_mode(0o777)).unwrap();
    let o = cli_as_nobody(&link, &["status"]);
    fs::set_permissions(&link, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!o.status.success(), "uid 65534 was served");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("may use this socket"),
        "uid 65534 not refused by the peer check: {e}"
    );
    drop(m);

    // With --agent-uid 65534: the socket is its own (0600) and it is served.
    let (m, sock, _dir) = agent_mount(&["--agent-uid", "65534"]);
    let md = fs::metadata(&sock).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o777), (65534, 0o600));
    fs::set_permissions(sock.parent().unwrap(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(m.p("f"), "x").unwrap();
    let o = cli_as_nobody(&sock, &["status"]);
    assert!(
        o.status.success(),
        "uid 65534 refused: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["changes"], json!([{"path": "f", "change": "added"}]));
    // Still an agent: no destructive ops for it.
    let o = cli_as_nobody(&sock, &["umount", m.mp.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not allowed on an agent socket"));
    assert!(treefork::daemon::is_mountpoint(&m.mp));
    // It forks only onto a directory it owns (the daemon runs as root here).
    let theirs = m.tmp.path().join("root-owned");
    fs::create_dir(&theirs).unwrap();
    let o = cli_as_nobody(&sock, &["fork", "f1", "--mount", theirs.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("must be a directory owned by uid 65534"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!treefork::daemon::is_mountpoint(&theirs));
    let own = m.tmp.path().join("agent-owned");
    fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
    let o = cli_as_nobody(&sock, &["fork", "f2", "--mount", own.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(treefork::daemon::is_mountpoint(&own));
    tf_ok(&m.store, &["umount", own.to_str().unwrap()]);
}

#[test]
fn request_rate_and_connections_are_bounded() {
    let m = Mount::new();
    let sock = user_socket(&m);
    // 5,000 pings as fast as possible on one connection.
    let flood = UnixStream::connect(&sock).unwrap();
    flood
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut w = flood.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let batch = b"{\"v\":1,\"op\":\"ping\"}\n".repeat(5000);
        w.write_all(&batch).unwrap();
    });
    // Meanwhile another client is served.
    let mut other = connect(&sock);
    assert_eq!(request(&mut other, &json!({"v":1,"op":"ping"}))["ok"], true);
    let mut r = BufReader::new(flood);
    let (mut ok, mut limited) = (0, 0);
    for _ in 0..5000 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["ok"] == true {
            ok += 1;
        } else {
            assert_eq!(code(&v), "rate_limited", "{v}");
            limited += 1;
        }
    }
    writer.join().unwrap();
    assert!(limited > 0, "no request was rate limited ({ok} ok)");
    assert!(ok >= 200, "the burst was not served: {ok} ok");
    // The flooding connection is still open and recovers after a pause.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(request(&mut r, &json!({"v":1,"op":"ping"}))["ok"], true);
    assert_eq!(
        request(&mut other, &json!({"v":1,"op":"status"}))["ok"],
        true
    );
    drop(r);
    drop(other);

    // At most 64 connections per socket; the next gets `busy` and is closed.
    std::thread::sleep(Duration::from_millis(500));
    let mut held: Vec<_> = (0..treefork::control::MAX_CONNECTIONS)
        .map(|_| connect(&sock))
        .collect();
    // Every held connection is being served.
    for c in held.iter_mut() {
        assert_eq!(request(c, &json!({"v":1,"op":"ping"}))["ok"], true);
    }
    let mut extra = connect(&sock);
    let mut l = String::new();
    extra.read_line(&mut l).unwrap();
    let v: Value = serde_json::from_str(&l).unwrap();
    assert_eq!(code(&v), "busy", "{v}");
    let mut rest = Vec::new();
    let _ = extra.read_to_end(&mut rest);
    assert!(rest.is_empty());
    // The store socket is another socket: not affected.
    assert!(treefork::daemon::ping(&m.store.canonicalize().unwrap()).is_some());
    held.truncate(10);
    let start = Instant::now();
    loop {
        let mut c = connect(&sock);
        let v = request(&mut c, &json!({"v":1,"op":"ping"}));
        if v["ok"] == true {
            break;
        }
        assert_eq!(code(&v), "busy");
        assert!(start.elapsed() < Duration::from_secs(10), "slots not freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    assert!(user_ok(&m, &["status"])["changes"].is_array());
}

#[test]
fn restore_paths_stay_inside_and_never_follow_symlinks() {
    let m = Mount::new();
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("d/f"), "1").unwrap();
    let c1 = user_ok(&m, &["checkpoint"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::os::unix::fs::symlink("d", m.p("link")).unwrap();
    fs::write(m.p("d/f"), "2").unwrap();

    // CLI: a path through a symlink in the working tree.
    let o = tf(
        &m.store,
        &[
            "-C",
            m.mp.to_str().unwrap(),
            "restore",
            &c1,
            m.p("link/f").to_str().unwrap(),
        ],
    );
    assert!(!o.status.success(), "restore through a symlink succeeded");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("\"link/f\" goes through the symbolic link \"link\""),
        "{e}"
    );
    assert_eq!(fs::read_to_string(m.p("d/f")).unwrap(), "2");

    // Protocol: every bad path is `invalid`, names the path, and changes nothing.
    let mut c = connect(&user_socket(&m));
    for (path, says) in [
        ("/etc/passwd", "must be relative"),
        ("d/../../x", "no '..'"),
        ("d/../f", "no '..'"),
        ("d/\u{0}f", "NUL"),
        ("link/f", "symbolic link \"link\""),
        ("./link/./f", "symbolic link \"link\""),
    ] {
        let v = request(
            &mut c,
            &json!({"v":1,"op":"restore","ref": c1,"paths":[path]}),
        );
        assert_eq!(code(&v), "invalid", "{path}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{path}: {msg}");
    }
    assert_eq!(fs::read_to_string(m.p("d/f")).unwrap(), "2");
    assert!(
        fs::symlink_metadata(m.p("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A symlink on the target side is not followed either.
    let c2 = user_ok(&m, &["checkpoint"])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    fs::remove_file(m.p("link")).unwrap();
    fs::create_dir(m.p("link")).unwrap();
    fs::write(m.p("link/f"), "mine").unwrap();
    let v = request(
        &mut c,
        &json!({"v":1,"op":"restore","ref": c2,"paths":["link/f"]}),
    );
    assert_eq!(code(&v), "invalid", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains(&c2), "{v}");
    assert_eq!(fs::read_to_string(m.p("link/f")).unwrap(), "mine");

    // The link itself can be restored.
    let v = request(
        &mut c,
        &json!({"v":1,"op":"restore","ref": c2,"paths":["link"]}),
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(fs::read_link(m.p("link")).unwrap(), Path::new("d"));
    assert_eq!(fs::read_to_string(m.p("d/f")).unwrap(), "2");
}

#[test]
fn import_never_follows_symlinks_or_imports_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("a"), "hello").unwrap();
    let sl = |target: &str, name: &str| std::os::unix::fs::symlink(target, src.join(name)).unwrap();
    sl("/etc/passwd", "passwd");
    sl("/etc", "etc");
    sl("loop2", "loop1");
    sl("loop1", "loop2");
    sl(".", "self");
    sl("../..", "d/up");
    let c = |p: &Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(
        // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
        unsafe { libc::mkfifo(c(&src.join("fifo")).as_ptr(), 0o644) },
        0
    );
    let dev = libc::makedev(1, 3);
    assert_eq!(
        // SAFETY: every pointer argument is a valid NUL-terminated C string or live buffer owned by this function; fds are open.
        unsafe { libc::mknod(c(&src.join("null")).as_ptr(), libc::S_IFCHR | 0o666, dev) },
        0
    );
    let _listener = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();

    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();
    let out = tf_ok(
        &store,
        &[
            "--json",
            "mount",
            mp.to_str().unwrap(),
            "--session",
            "imp",
            "--from",
            src.to_str().unwrap(),
        ],
    );
    let _g = Unmount(store.clone(), mp.clone());
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skipped"], 2, "{v}");
    let link = |n: &str| fs::read_link(mp.join(n)).unwrap();
    assert_eq!(link("passwd"), Path::new("/etc/passwd"));
    assert_eq!(link("etc"), Path::new("/etc"));
    assert_eq!(link("loop1"), Path::new("loop2"));
    assert_eq!(link("loop2"), Path::new("loop1"));
    assert_eq!(link("self"), Path::new("."));
    assert_eq!(link("d/up"), Path::new("../.."));
    assert!(
        fs::symlink_metadata(mp.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(!mp.join("null").exists() && fs::symlink_metadata(mp.join("null")).is_err());
    assert!(fs::symlink_metadata(mp.join("sock")).is_err());
    let mut names: Vec<String> = fs::read_dir(&mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["a", "d", "etc", "fifo", "loop1", "loop2", "passwd", "self"]
    );
    // Only the one regular file's bytes were read into the store.
    let s = tf_ok(&store, &["sessions", "--json"]);
    let v: Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["sessions"][0]["bytes"], 5, "{v}");
    assert_eq!(fs::read_to_string(mp.join("a")).unwrap(), "hello");
    // The imported directory was not modified.
    assert_eq!(
        fs::read_link(src.join("passwd")).unwrap(),
        Path::new("/etc/passwd")
    );
}

#[test]
fn one_daemon_per_store_and_one_mount_per_session() {
    let m = Mount::new();
    fs::write(m.p("f"), "x").unwrap();
    let other = m.tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    let o = tf(
        &m.store,
        &["mount", other.to_str().unwrap(), "--session", "s"],
    );
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("session s is already mounted at"), "{e}");
    assert!(!treefork::daemon::is_mountpoint(&other));

    let pid = m.daemon_pid();
    let o = tf(&m.store, &["daemon"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!("in use by another treefork daemon (pid {pid})")),
        "{e}"
    );
    // The first daemon still serves files and its control sockets.
    assert_eq!(m.daemon_pid(), pid);
    assert_eq!(fs::read_to_string(m.p("f")).unwrap(), "x");
    let v = user_ok(&m, &["status"]);
    assert_eq!(v["changes"], json!([{"path": "f", "change": "added"}]));
    assert!(treefork::daemon::ping(&m.store.canonicalize().unwrap()).is_some());
}

#[test]
fn user_fork_can_serve_an_agent_socket() {
    let m = Mount::new();
    fs::write(m.p("f"), "x").unwrap();
    let fmp = m.tmp.path().join("fork");
    fs::create_dir(&fmp).unwrap();
    let sock = m.tmp.path().join("fork-agent.sock");
    let v = user_ok(
        &m,
        &[
            "fork",
            "g",
            "--mount",
            fmp.to_str().unwrap(),
            "--agent-socket",
            sock.to_str().unwrap(),
        ],
    );
    let guard = Unmount(m.store.clone(), fmp.clone());
    assert_eq!(v["agent_socket"], sock.to_str().unwrap());
    assert!(v["checkpoint"].is_string(), "{v}");
    let mut c = connect(&sock);
    let v = request(&mut c, &json!({"v":1,"op":"ping"}));
    assert_eq!(
        (v["role"].as_str(), v["session"].as_str()),
        (Some("agent"), Some("g"))
    );
    assert_eq!(v["mountpoint"], fmp.to_str().unwrap());
    let v = request(&mut c, &json!({"v":1,"op":"status"}));
    assert_eq!(v["changes"], json!([]), "{v}");
    let v = request(&mut c, &json!({"v":1,"op":"umount","mountpoint": fmp}));
    assert_eq!(code(&v), "forbidden");
    drop(c);
    drop(guard);
    assert!(!sock.exists(), "agent socket of the fork left behind");
}
