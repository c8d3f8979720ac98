//! Issue 38, defect 1 (second half): an agent's restore, checkout and merge never
//! put a file the agent wrote inside a directory another uid owns and the agent
//! could not write, and never give such a directory attributes no tree had
//! (owner from one side, mode from the other).
//!
//! The setup of every test: the workspace was root's when checkpoint C0 was taken
//! (root and `.git` owned by root, mode 0755); then the user chowned it to the
//! agent (`chown -R`), and the agent planted a hook and took C1. Attacks run as
//! uid 65534 on its agent socket; legitimate operations still work.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{AGENT_UID, Agent};
use crate::harness::write_synced;

/// The exit status of a `forbidden` refusal (`cli::failure::FORBIDDEN`).
const FORBIDDEN: i32 = 6;

/// The hook the agent plants.
const HOOK: &str = ".git/hooks/reference-transaction";

fn id(v: &Value) -> String {
    v["checkpoint"]["id"].as_str().unwrap().to_string()
}

/// Every path of the workspace: owner, group, mode and (files) bytes.
type Snapshot = BTreeMap<String, (u32, u32, u32, Vec<u8>)>;

fn snapshot(root: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let md = fs::symlink_metadata(&d).unwrap();
        let rel = d.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let bytes = if md.is_file() {
            fs::read(&d).unwrap()
        } else {
            Vec::new()
        };
        out.insert(rel, (md.uid(), md.gid(), md.mode(), bytes));
        if md.is_dir() {
            for e in fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

fn owner(p: &Path) -> (u32, u32) {
    let md = fs::symlink_metadata(p).unwrap();
    (md.uid(), md.mode() & 0o7777)
}

/// The invariant: no directory of the workspace owned by another uid than the
/// agent's is writable by others, and none holds an entry the agent owns unless
/// the directory is the agent's own or writable by it.
fn assert_contained(root: &Path) {
    for (path, (uid, _, mode, _)) in snapshot(root) {
        if mode & libc::S_IFMT != libc::S_IFDIR || uid == AGENT_UID {
            continue;
        }
        assert_eq!(
            mode & 0o002,
            0,
            "{path:?}: owned by uid {uid}, mode {:o}: writable by the agent",
            mode & 0o7777
        );
        for e in fs::read_dir(root.join(&path)).unwrap() {
            let e = e.unwrap();
            assert_ne!(
                fs::symlink_metadata(e.path()).unwrap().uid(),
                AGENT_UID,
                "{:?}: the agent's, inside {path:?} (uid {uid})",
                e.path()
            );
        }
    }
}

/// The session of the module docs: (agent, C0, C1).
fn setup() -> (Agent, String, String) {
    let a = Agent::new();
    let mp = a.m.mp.clone();
    // The workspace is root's when C0 is taken.
    std::os::unix::fs::chown(&mp, Some(0), Some(0)).unwrap();
    fs::create_dir_all(mp.join(".git/hooks")).unwrap();
    for d in [".git", ".git/hooks"] {
        fs::set_permissions(mp.join(d), fs::Permissions::from_mode(0o755)).unwrap();
    }
    write_synced(&mp.join(".git/HEAD"), b"ref: refs/heads/main\n");
    write_synced(&mp.join(".git/config"), b"[core]\n\tbare = false\n");
    write_synced(&mp.join("work.txt"), b"work\n");
    let c0 = id(&a.user_ok(&["checkpoint", "-m", "C0"]));
    // The user gives the workspace to the agent.
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&mp)
        .status()
        .unwrap();
    assert!(st.success());
    a.sh_ok(&format!(
        "printf '#!/bin/sh\\ntouch /tmp/tf-contain-hook-ran\\n' > {HOOK} && chmod 755 {HOOK}"
    ));
    let c1 = id(&a.cli_ok(&["checkpoint", "-m", "C1"]));
    (a, c0, c1)
}

fn assert_refused(a: &Agent, args: &[&str], dir: &str) {
    let before = snapshot(&a.m.mp);
    let head = a.user_ok(&["status"])["head"].clone();
    let (code, err) = a.cli_err(args);
    assert_eq!(code, FORBIDDEN, "{err}");
    assert!(
        err.contains(&format!("{dir:?}"))
            && err.contains("uid 0")
            && err.contains(&format!("agent (uid {AGENT_UID}) cannot write")),
        "{args:?}: {err}"
    );
    assert_eq!(snapshot(&a.m.mp), before, "{args:?} changed the workspace");
    assert_eq!(a.user_ok(&["status"])["head"], head, "{args:?} moved HEAD");
}

/// Attack (a): `restore C0` (the whole tree: root's again), then the agent's
/// hook grafted alone into root's `.git/hooks`.
#[test]
fn restore_of_a_path_into_a_directory_the_agent_cannot_write_is_refused() {
    let (a, c0, c1) = setup();
    let mp = a.m.mp.clone();
    // A whole-tree restore to an existing state is allowed.
    a.cli_ok(&["restore", &c0]);
    assert_eq!(owner(&mp.join(".git/hooks")), (0, 0o755));
    assert!(!mp.join(HOOK).exists());
    assert_refused(&a, &["restore", "--dry-run", &c1, HOOK], ".git/hooks");
    assert_refused(&a, &["restore", &c1, HOOK], ".git/hooks");
    assert!(!mp.join(HOOK).exists());
    assert_contained(&mp);
    // The same graft through a merge: ours has root's `.git/hooks` (a checkpoint
    // of the restored tree), theirs adds the hook to the agent's.
    a.cli_ok(&["checkpoint", "-m", "root's tree again"]);
    a.cli_ok(&["checkout", &c0]);
    a.cli_ok(&["restore", &c1]);
    a.sh_ok(&format!("rm {HOOK}"));
    a.cli_ok(&["checkpoint", "-m", "without the hook"]);
    let theirs = {
        a.sh_ok(&format!("echo again > {HOOK}"));
        id(&a.cli_ok(&["checkpoint", "-m", "hook again"]))
    };
    a.cli_ok(&["checkout", "HEAD~1"]);
    a.cli_ok(&["restore", &c0]);
    a.cli_ok(&["checkpoint", "-m", "root's tree on the agent's history"]);
    assert_refused(&a, &["merge", &theirs], ".git/hooks");
    assert!(!mp.join(HOOK).exists());
    a.assert_daemon_answers();
}

/// Attack (b): `checkout C0`, then a merge of a tree whose `.git` is the agent's
/// with mode 0777. Refused: the result would change the listing of root's
/// workspace root into one no tree has (before the merge took `.git`'s mode
/// alone and root's `.git` became `drwxrwxrwx root`). When both sides changed
/// `.git`'s attributes (ours its owner, theirs its mode), ours stays whole, with
/// a conflict.
#[test]
fn merge_never_gives_a_root_directory_the_other_side_s_mode() {
    let (a, c0, c1) = setup();
    let mp = a.m.mp.clone();
    a.sh_ok("chmod 0777 .git");
    let wide = id(&a.cli_ok(&["checkpoint", "-m", ".git 0777"]));
    a.cli_ok(&["checkout", &c0]);
    assert_eq!(owner(&mp.join(".git")), (0, 0o755));
    assert_refused(&a, &["merge", "--dry-run", &wide], ".");
    assert_refused(&a, &["merge", &wide], ".");
    assert_eq!(owner(&mp.join(".git")), (0, 0o755));
    assert_contained(&mp);
    // Ours (root's tree again, on top of C1) changed `.git`'s owner, theirs
    // (`wide`, on top of C1 too) its mode.
    a.cli_ok(&["checkout", &c1]);
    a.cli_ok(&["restore", &c0]);
    a.cli_ok(&["checkpoint", "-m", "root's tree on C1"]);
    let o = a.cli(&["merge", &wide]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "merge_conflict", "{v}");
    assert_eq!(v["conflicts"][0]["path"], ".git", "{v}");
    assert_eq!(v["conflicts"][0]["kind"], "mode", "{v}");
    assert_eq!(owner(&mp.join(".git")), (0, 0o755));
    assert_contained(&mp);
    a.assert_daemon_answers();
}

/// What an agent does in its own directories still works: restore of a path,
/// merge and cherry-pick of its own files.
#[test]
fn agent_operations_in_its_own_directories_still_work() {
    let (a, c0, c1) = setup();
    let mp = a.m.mp.clone();
    a.cli_ok(&["checkout", &c0]);
    a.cli_ok(&["checkout", &c1]);
    assert_eq!(owner(&mp.join(".git/hooks")).0, AGENT_UID);
    a.sh_ok(&format!("rm {HOOK}"));
    a.cli_ok(&["restore", &c1, HOOK]);
    assert!(mp.join(HOOK).exists());
    a.sh_ok("mkdir -p src && echo one > src/a.txt");
    let base = id(&a.cli_ok(&["checkpoint", "-m", "base"]));
    a.sh_ok("echo two > src/b.txt");
    let theirs = id(&a.cli_ok(&["checkpoint", "-m", "theirs"]));
    a.cli_ok(&["checkout", &base]);
    a.sh_ok("echo ours > src/c.txt");
    a.cli_ok(&["checkpoint", "-m", "ours"]);
    let v = a.cli_ok(&["merge", &theirs]);
    assert_eq!(v["status"], "merged", "{v}");
    assert!(mp.join("src/b.txt").exists() && mp.join("src/c.txt").exists());
    a.cli_ok(&["checkout", &base]);
    let v = a.cli_ok(&["cherry-pick", &theirs]);
    assert_eq!(v["status"], "merged", "{v}");
    assert_eq!(fs::read(mp.join("src/b.txt")).unwrap(), b"two\n");
    assert_contained(&mp);
}
