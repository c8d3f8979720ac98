//! Races the daemon must win: an agent swapping its fork's mountpoint for a symlink,
//! two creations of one name (forks, branches), a mount of a session while it is
//! being unmounted, unmount against gc.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Mount, daemon_log, pattern, tf, tf_ok};

/// Send one raw request on `sock` as uid/gid 65534 (an agent); the response.
fn agent_request(sock: &Path, req: &Value) -> Value {
    let script = r#"
import socket, json, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
for line in s.makefile():
    v = json.loads(line)
    if "event" not in v:
        print(line.strip())
        break
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(sock)
        .arg(req.to_string())
        .current_dir("/");
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
    let o = cmd.output().expect("run python3 as uid 65534");
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no response ({e}): {} {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// A mount of session `s` with an agent socket usable by uid 65534.
fn agent_mount() -> (Mount, PathBuf, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options(
        "s",
        &[
            "--agent-socket",
            sock.to_str().unwrap(),
            "--agent-uid",
            "65534",
        ],
    );
    fs::set_permissions(m.tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    (m, sock, dir)
}

/// The per-mount and superblock options of the mount at `p` (from mountinfo).
fn mount_options(p: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = p.to_str()?;
    info.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(4) == Some(&want)).then(|| {
            let sb = f.iter().skip_while(|x| **x != "-").nth(3).unwrap_or(&"");
            format!("{},{}", f[5], sb)
        })
    })
}

fn unmount_if_mounted(store: &Path, p: &Path) {
    if treefork::daemon::is_mountpoint(p)
        && !tf(store, &["umount", p.to_str().unwrap()]).status.success()
    {
        treefork::daemon::detach(p);
    }
}

#[test]
fn agent_fork_never_mounts_through_a_swapped_symlink() {
    let (m, sock, _d) = agent_mount();
    fs::write(m.p("f"), "x").unwrap();
    let home = m.tmp.path().join("agent-home");
    fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let victim = m.tmp.path().join("victim");
    fs::create_dir(&victim).unwrap();
    let _guards = [
        Detach(victim.clone()),
        Detach(home.join("ws")),
        Detach(home.join("ws.real")),
    ];
    let ws = home.join("ws");
    let real = home.join("ws.real");
    let mut mounted_ok = 0;
    for i in 0..24 {
        fs::create_dir(&ws).unwrap();
        std::os::unix::fs::chown(&ws, Some(65534), Some(65534)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, ws, real, victim) = (stop.clone(), ws.clone(), real.clone(), victim.clone());
            std::thread::spawn(move || {
                // What the agent does: its directory becomes a symlink and back.
                while !stop.load(Ordering::Relaxed) {
                    if fs::rename(&ws, &real).is_err() {
                        break; // mounted (EBUSY): stop swapping
                    }
                    // The daemon may have created the missing mountpoint meanwhile
                    // (EEXIST): the round is decided, stop swapping.
                    if std::os::unix::fs::symlink(&victim, &ws).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(300 + (i % 4) * 200));
                    fs::remove_file(&ws).unwrap();
                    if fs::rename(&real, &ws).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(300));
                }
            })
        };
        let v = agent_request(
            &sock,
            &serde_json::json!({"v":1,"op":"fork","name": format!("f{i}"),"mountpoint": ws}),
        );
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(
            !treefork::daemon::is_mountpoint(&victim),
            "round {i}: the agent's fork was mounted on {}: {v}\n{}",
            victim.display(),
            daemon_log(&m.store)
        );
        if v["ok"] == true {
            mounted_ok += 1;
            let at = if treefork::daemon::is_mountpoint(&ws) {
                &ws
            } else {
                &real
            };
            let opts = mount_options(at).expect("fork mounted");
            assert!(
                opts.split(',').any(|o| o == "nosuid") && opts.split(',').any(|o| o == "nodev"),
                "agent mount without nosuid,nodev: {opts}"
            );
            if at == &ws {
                tf_ok(&m.store, &["umount", at.to_str().unwrap()]);
            } else {
                // Mounted on the agent's own directory, which the agent then
                // renamed: the daemon cannot find it by the path it was given.
                assert!(treefork::daemon::detach(at));
            }
        } else {
            let msg = v["error"]["message"].as_str().unwrap_or("");
            // Refused: the path is a symlink, or not the agent's, or it was
            // renamed away at the instant the daemon opened it (ENOENT).
            assert!(
                msg.contains("symbolic link")
                    || msg.contains("owned by uid 65534")
                    || msg.contains("No such file or directory"),
                "round {i}: unexpected refusal: {v}"
            );
        }
        if ws.is_symlink() {
            fs::remove_file(&ws).unwrap();
        }
        if real.exists() {
            unmount_if_mounted(&m.store, &real);
            fs::remove_dir(&real).unwrap();
        }
        unmount_if_mounted(&m.store, &ws);
        let _ = fs::remove_dir(&ws);
    }
    eprintln!("{mounted_ok} of 24 forks mounted (the rest refused)");
}

#[test]
fn fork_creates_a_missing_mountpoint_under_the_ownership_rule() {
    let (m, sock, _d) = agent_mount();
    fs::write(m.p("f"), "x").unwrap();
    // The user: any missing path, levels created.
    let deep = m.tmp.path().join("new/a/b");
    let o = tf(
        &m.store,
        &[
            "-C",
            m.mp.to_str().unwrap(),
            "fork",
            "u",
            "--mount",
            deep.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(fs::read_to_string(deep.join("f")).unwrap(), "x");
    tf_ok(&m.store, &["umount", deep.to_str().unwrap()]);
    // An agent: inside a directory it owns; the new directory is its own.
    let home = m.tmp.path().join("agent-home");
    fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let ws = home.join("ws");
    let v = agent_request(
        &sock,
        &serde_json::json!({"v":1,"op":"fork","name":"a","mountpoint": ws}),
    );
    assert_eq!(v["ok"], true, "{v}");
    assert!(treefork::daemon::is_mountpoint(&ws));
    tf_ok(&m.store, &["umount", ws.to_str().unwrap()]);
    assert_eq!(fs::metadata(&ws).unwrap().uid(), 65534);
    // ... never inside someone else's directory.
    let theirs = m.tmp.path().join("root-owned");
    fs::create_dir(&theirs).unwrap();
    let v = agent_request(
        &sock,
        &serde_json::json!({"v":1,"op":"fork","name":"b","mountpoint": theirs.join("ws")}),
    );
    assert_eq!(v["error"]["code"], "forbidden", "{v}");
    assert!(!theirs.join("ws").exists());
}

/// Run `f(i)` for i in 0..n on n threads at once; their results.
fn at_once<T: Send + 'static>(n: usize, f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let f = Arc::new(f);
    let gate = Arc::new(std::sync::Barrier::new(n));
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let (f, gate) = (f.clone(), gate.clone());
            std::thread::spawn(move || {
                gate.wait();
                f(i)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Detaches a path at the end of a test, even a failed one.
struct Detach(PathBuf);
impl Drop for Detach {
    fn drop(&mut self) {
        if treefork::daemon::is_mountpoint(&self.0) {
            treefork::daemon::detach(&self.0);
        }
    }
}

/// Two mounted sessions `a` and `b` of one store (forks from different sessions do
/// not share an op lock).
fn two_sessions() -> (Mount, PathBuf, Detach) {
    let m = Mount::with_session("a");
    let b = m.tmp.path().join("b");
    fs::create_dir(&b).unwrap();
    tf_ok(&m.store, &["mount", b.to_str().unwrap(), "--session", "b"]);
    fs::write(m.p("fa"), "a").unwrap();
    fs::write(b.join("fb"), "b").unwrap();
    (m, b.clone(), Detach(b))
}

#[test]
fn two_forks_of_one_name_one_wins_and_keeps_its_session() {
    let (m, b, _b) = two_sessions();
    let store = m.store.clone();
    let parents = [m.mp.clone(), b.clone()];
    for round in 0..6 {
        let name = format!("f{round}");
        let mps: Vec<PathBuf> = (0..2)
            .map(|i| m.tmp.path().join(format!("{name}-{i}")))
            .collect();
        let (store2, mps2, name2, parents2) =
            (store.clone(), mps.clone(), name.clone(), parents.clone());
        let outs = at_once(2, move |i| {
            tf(
                &store2,
                &[
                    "--json",
                    "-C",
                    parents2[i].to_str().unwrap(),
                    "fork",
                    &name2,
                    "--mount",
                    mps2[i].to_str().unwrap(),
                ],
            )
        });
        let won: Vec<usize> = (0..2).filter(|&i| outs[i].status.success()).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: {} forks of one name succeeded",
            won.len()
        );
        let w = won[0];
        let loser = String::from_utf8_lossy(&outs[1 - w].stderr).to_string();
        assert!(loser.contains(&name), "{loser}");
        assert!(!treefork::daemon::is_mountpoint(&mps[1 - w]));
        // The winner's session record is intact: listed, and mounted where it won.
        let v: Value = serde_json::from_str(&tf_ok(&store, &["--json", "sessions"])).unwrap();
        let rec = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap_or_else(|| panic!("round {round}: session {name} lost its record: {v}"));
        assert_eq!(rec["mountpoint"], mps[w].to_str().unwrap(), "{v}");
        let expect = if w == 0 { "fa" } else { "fb" };
        assert!(mps[w].join(expect).exists());
        tf_ok(&store, &["umount", mps[w].to_str().unwrap()]);
    }
    tf_ok(&store, &["umount", b.to_str().unwrap()]);
}

#[test]
fn branch_creation_races_have_one_winner() {
    // Branch names are per session: the race for a name is between clients of
    // ONE session (two at once on session a's workspace); another session taking
    // the same name is no race (it gets a branch of its own).
    let (m, b, _b) = two_sessions();
    let store = m.store.clone();
    let parents = [m.mp.clone(), m.mp.clone()];
    for round in 0..8 {
        let name = format!("x{round}");
        fs::write(m.p("fa"), format!("a{round}")).unwrap();
        tf_ok(
            &store,
            &["-C", m.mp.to_str().unwrap(), "checkpoint", "-m", &name],
        );
        let (store2, name2, parents2) = (store.clone(), name.clone(), parents.clone());
        let outs = at_once(2, move |i| {
            tf(
                &store2,
                &[
                    "--json",
                    "-C",
                    parents2[i].to_str().unwrap(),
                    "branch",
                    &name2,
                ],
            )
        });
        let won: Vec<usize> = (0..2).filter(|&i| outs[i].status.success()).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: both creations of branch {name} succeeded"
        );
        let w = won[0];
        let e = String::from_utf8_lossy(&outs[1 - w].stderr).to_string();
        assert!(e.contains("already exists in session a"), "{e}");
        // The branch is the winner's checkpoint.
        let v: Value = serde_json::from_slice(&outs[w].stdout).unwrap();
        let listed = |dir: &Path| -> Value {
            let l: Value = serde_json::from_str(&tf_ok(
                &store,
                &["--json", "-C", dir.to_str().unwrap(), "branches"],
            ))
            .unwrap();
            l["branches"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == name.as_str())
                .cloned()
                .unwrap_or(Value::Null)
        };
        assert_eq!(listed(&m.mp)["checkpoint"], v["checkpoint"]);
        // Session b takes the same name at its own HEAD: a branch of its own,
        // session a's unmoved.
        fs::write(b.join("fb"), format!("b{round}")).unwrap();
        let bc: Value = serde_json::from_str(&tf_ok(
            &store,
            &["--json", "-C", b.to_str().unwrap(), "checkpoint", "-m", "b"],
        ))
        .unwrap();
        tf_ok(&store, &["-C", b.to_str().unwrap(), "branch", &name]);
        assert_eq!(listed(&b)["checkpoint"], bc["checkpoint"]["id"]);
        assert_eq!(listed(&m.mp)["checkpoint"], v["checkpoint"]);
    }
    tf_ok(&store, &["umount", b.to_str().unwrap()]);
}

#[test]
fn mount_during_unmount_waits_for_the_last_flush() {
    let m = Mount::new();
    // Much unflushed data: the unmount's flushes take a while.
    let data = pattern(48 << 20, 7);
    fs::write(m.p("big"), &data).unwrap();
    let other = m.tmp.path().join("other");
    fs::create_dir(&other).unwrap();
    let _other = Detach(other.clone());
    let (store, mp, other2) = (m.store.clone(), m.mp.clone(), other.clone());
    let outs = at_once(2, move |i| {
        if i == 0 {
            tf(&store, &["umount", mp.to_str().unwrap()])
        } else {
            std::thread::sleep(Duration::from_millis(30));
            tf(
                &store,
                &["mount", other2.to_str().unwrap(), "--session", "s"],
            )
        }
    });
    assert!(
        outs[0].status.success(),
        "{}",
        String::from_utf8_lossy(&outs[0].stderr)
    );
    if outs[1].status.success() {
        // It waited: the session it mounted is the one the unmount finished.
        let got = fs::read(other.join("big")).unwrap_or_default();
        assert!(
            got == data,
            "mounted a stale record: {} of {} bytes",
            got.len(),
            data.len()
        );
        crate::harness::umount_ok(&m.store, &other);
    } else {
        let e = String::from_utf8_lossy(&outs[1].stderr);
        assert!(e.contains("being unmounted"), "{e}");
    }
    m.mount();
    assert!(fs::read(m.p("big")).unwrap() == data);
}

#[test]
fn unmount_under_writes_and_gc_loses_no_acknowledged_byte() {
    let m = Mount::new();
    for round in 0..4u64 {
        // Dead but still indexed: written, flushed, deleted, flushed (no gc yet).
        let files: Vec<Vec<u8>> = (0..4).map(|k| pattern(4 << 20, round * 10 + k)).collect();
        for (k, d) in files.iter().enumerate() {
            crate::harness::write_synced(&m.p(&format!("old{k}")), d);
        }
        for k in 0..files.len() {
            fs::remove_file(m.p(&format!("old{k}"))).unwrap();
        }
        tf_ok(&m.store, &["-C", m.mp.to_str().unwrap(), "status"]);
        // The same bytes again (they dedup against the dead objects), acknowledged
        // by write(2) and left for the unmount to flush, while gc runs in a loop.
        for (k, d) in files.iter().enumerate() {
            fs::write(m.p(&format!("new{k}")), d).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let gcs = {
            let (stop, store) = (stop.clone(), m.store.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = tf(&store, &["gc"]);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        m.umount();
        stop.store(true, Ordering::Relaxed);
        gcs.join().unwrap();
        m.mount();
        for (k, d) in files.iter().enumerate() {
            let got = fs::read(m.p(&format!("new{k}")));
            assert!(
                got.as_ref().is_ok_and(|g| g == d),
                "round {round}: new{k} lost after unmount under gc: {:?}\n{}",
                got.map(|g| g.len()),
                daemon_log(&m.store)
            );
        }
        for k in 0..files.len() {
            fs::remove_file(m.p(&format!("new{k}"))).unwrap();
        }
    }
}

#[test]
fn a_planted_runtime_dir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rt = d.path().join("treefork");
    fs::create_dir(&rt).unwrap();
    fs::set_permissions(&rt, fs::Permissions::from_mode(0o777)).unwrap();
    let store = d.path().join("store");
    let mp = d.path().join("mp");
    fs::create_dir(&mp).unwrap();
    let o = Command::new(crate::harness::bin())
        .arg("--store")
        .arg(&store)
        .arg("mount")
        .arg(&mp)
        .env("XDG_RUNTIME_DIR", d.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("runtime directory") && e.contains("0777"), "{e}");
    assert_eq!(
        fs::metadata(&rt).unwrap().permissions().mode() & 0o777,
        0o777
    );
}
