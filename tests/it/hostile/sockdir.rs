//! Defect 7 of issue 38: the remembered agent socket was bound and removed by path.
//!
//! The agent socket's path is remembered with the session and bound again by the
//! user's plain `mount`. An agent owning the socket's directory swaps it for a
//! symlink to a root-only directory: while mounted, so that root's unmount removes
//! a socket of that name there; while unmounted, so that root's next mount creates
//! the (agent-owned) socket there.

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command;

use super::{AGENT_UID, as_agent};
use crate::harness::{Mount, daemon_log, tf};

/// Run `script` with `/bin/sh -c` as the agent.
fn agent_sh(script: &str) {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(script);
    as_agent(&mut c);
    let o = c.output().unwrap();
    assert!(o.status.success(), "agent: {script}: {o:?}");
}

fn is_socket(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

#[test]
fn a_swapped_socket_directory_is_neither_bound_in_nor_cleaned() {
    let tmp = tempfile::Builder::new()
        .prefix("tf-hostile-")
        .tempdir()
        .unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let home = tmp.path().join("home");
    let run = home.join("run");
    for d in [&home, &run] {
        fs::create_dir(d).unwrap();
        std::os::unix::fs::chown(d, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    }
    let vault = tmp.path().join("vault");
    fs::create_dir(&vault).unwrap();
    fs::set_permissions(&vault, fs::Permissions::from_mode(0o700)).unwrap();
    let sock = run.join("agent.sock");
    let uid = AGENT_UID.to_string();
    let m = Mount::with_options(
        "s",
        &[
            "--agent-socket",
            sock.to_str().unwrap(),
            "--agent-uid",
            &uid,
        ],
    );
    assert!(is_socket(&sock));
    let (h, r, v) = (home.display(), run.display(), vault.display());
    let swap = format!("mv {r} {h}/run.old && ln -s {v} {r}");

    // While mounted: root's own socket of that name in the vault survives the
    // unmount; the agent socket goes, from where its directory went.
    let theirs = UnixListener::bind(vault.join("agent.sock")).unwrap();
    agent_sh(&swap);
    m.umount();
    assert!(
        is_socket(&vault.join("agent.sock")),
        "the unmount removed root's socket through the agent's symlink\n{}",
        daemon_log(&m.store)
    );
    assert!(!home.join("run.old/agent.sock").exists());
    drop(theirs);
    fs::remove_file(vault.join("agent.sock")).unwrap();

    // While unmounted: the user's plain mount binds nothing in the vault; it is
    // refused, saying why.
    let o = tf(
        &m.store,
        &["mount", m.mp.to_str().unwrap(), "--session", "s"],
    );
    assert!(
        !vault.join("agent.sock").exists(),
        "the remount bound the agent socket in the root-only directory"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "mounted through the symlink");
    assert!(err.contains("symbolic link"), "{err}");

    // The directory back: the remembered socket is served again.
    agent_sh(&format!("rm {r} && mv {h}/run.old {r}"));
    m.mount();
    assert!(is_socket(&sock), "{}", daemon_log(&m.store));
    m.umount();
    assert!(!sock.exists());
}
