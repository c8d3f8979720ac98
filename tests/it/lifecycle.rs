//! Session lifecycle: the info record made at creation (origin, baseline).

use std::process::Command;

use crate::harness::{Mount, tf_ok};

/// A real git repository with one commit on branch `main`; returns its path.
pub fn git_repo(dir: &std::path::Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("git is installed");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    repo
}

#[test]
fn import_of_a_git_work_tree_records_its_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = git_repo(tmp.path());
    let head = String::from_utf8(
        Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    // git keeps working inside the workspace.
    let o = Command::new("git")
        .arg("-C")
        .arg(&m.mp)
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("x"), "x").unwrap();
    let pmp = m.tmp.path().join("p");
    std::fs::create_dir(&pmp).unwrap();
    tf_ok(
        &m.store,
        &[
            "mount",
            pmp.to_str().unwrap(),
            "--session",
            "p",
            "--from",
            plain.to_str().unwrap(),
        ],
    );
    tf_ok(&m.store, &["umount", pmp.to_str().unwrap()]);
    m.umount();
    let store = treefork::store::PackStore::open(&m.store).unwrap();
    let info = treefork::lifecycle::load(&store, "s").unwrap().unwrap();
    let o = info.origin.unwrap();
    assert!(o.git);
    assert_eq!(o.path, repo.canonicalize().unwrap());
    assert_eq!(o.branch.as_deref(), Some("main"));
    assert_eq!(o.baseline.as_deref(), Some(head.trim()));
    let p = treefork::lifecycle::load(&store, "p").unwrap().unwrap();
    let po = p.origin.unwrap();
    assert!(!po.git && po.baseline.is_none());
}
