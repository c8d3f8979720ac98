//! An agent socket is part of its session: a remount and a resume after eviction
//! serve it again, `session show` names it, and an agent on it still may only do
//! what an agent may (issue 25 rough edge).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Mount, tf_ok};
use crate::security::on_socket;

/// A checkpoint through the agent socket works (the socket is served).
fn agent_checkpoints(m: &Mount, sock: &Path, msg: &str) {
    std::fs::write(m.p("f.txt"), msg).unwrap();
    let o = on_socket(sock, &m.mp, &["checkpoint", "-m", msg]);
    assert!(
        o.status.success(),
        "checkpoint on the agent socket: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        crate::harness::daemon_log(&m.store)
    );
}

fn shown(m: &Mount) -> Value {
    serde_json::from_str(&tf_ok(&m.store, &["--json", "session", "show", "s"])).unwrap()
}

#[test]
fn a_remount_and_a_resume_after_eviction_serve_the_agent_socket_again() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    agent_checkpoints(&m, &sock, "one");
    assert_eq!(shown(&m)["agent_socket"], sock.to_str().unwrap());
    let human = tf_ok(&m.store, &["session", "show", "s"]);
    assert!(
        human.contains(&format!("agent    socket {}", sock.display())),
        "{human}"
    );

    // Unmounted: gone, but named as what the next mount serves.
    m.umount();
    assert!(!sock.exists(), "socket file left behind");
    let v = shown(&m);
    assert_eq!(v["mounted"], false);
    assert_eq!(v["agent_socket"], sock.to_str().unwrap(), "{v}");
    // A remount that names no agent socket serves it again.
    m.mount();
    let rec = treefork::control::find_mount(&m.mp).unwrap();
    assert_eq!(rec.agent_socket.as_deref(), Some(sock.as_path()));
    agent_checkpoints(&m, &sock, "two");
    // Still an agent socket: what an agent may not do is refused.
    let o = on_socket(&sock, &m.mp, &["session", "rm", "s"]);
    assert!(!o.status.success());

    // Evicted by a sweep, then resumed by a mount: served again.
    tf_ok(&m.store, &["session", "extend", "s", "--ttl-idle", "1s"]);
    std::thread::sleep(Duration::from_secs(3));
    let v: Value = serde_json::from_str(&tf_ok(&m.store, &["--json", "session", "sweep"])).unwrap();
    assert_eq!(v["evicted"][0]["session"], "s", "{v}");
    assert!(!treefork::daemon::is_mountpoint(&m.mp));
    m.mount();
    agent_checkpoints(&m, &sock, "three");
    // A mount naming another agent socket replaces it.
    m.umount();
    let other = dir.path().join("other.sock");
    tf_ok(
        &m.store,
        &[
            "mount",
            m.mp.to_str().unwrap(),
            "--session",
            "s",
            "--agent-socket",
            other.to_str().unwrap(),
        ],
    );
    agent_checkpoints(&m, &other, "four");
    assert!(!sock.exists());
    assert_eq!(shown(&m)["agent_socket"], other.to_str().unwrap());
}
