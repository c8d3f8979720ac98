//! `treefork promote`: real git repositories (`crate::lifecycle::git_repo`), real
//! mounts, the real CLI. Each test checks the durable repository with git itself.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::{Mount, daemon_log, git, git_raw, tf, write_synced, ws, ws_ok};
use crate::lifecycle::git_repo;

/// A repository (branch main, one commit: README, src/lib.rs) and a session `s`
/// mounted from it.
struct Setup {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    m: Mount,
    baseline: String,
}

fn setup() -> Setup {
    setup_with(&[])
}

fn setup_with(extra: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let baseline = git(&repo, &["rev-parse", "HEAD"]);
    let mut args = vec!["--from", repo.to_str().unwrap()];
    args.extend_from_slice(extra);
    let m = Mount::with_options("s", &args);
    Setup {
        _dir: dir,
        repo,
        m,
        baseline,
    }
}

/// [`setup`], with the daemon running git through a wrapper of ours (first on
/// its PATH) that runs `inject` once, right after the first git command that
/// writes promote's temporary index (`GIT_INDEX_FILE` set: after the drift check
/// read the branch head, before the branch is moved). The durable repository's
/// own hooks no longer run under promote (issue 38), so a race is injected
/// here. `inject` runs in the repository's top directory. Returns the setup and
/// the trigger file (gone once `inject` ran).
fn setup_injecting(inject: &str) -> (Setup, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let baseline = git(&repo, &["rev-parse", "HEAD"]);
    let wrap = dir.path().join("wrap");
    std::fs::create_dir(&wrap).unwrap();
    let trigger = dir.path().join("trigger");
    std::fs::write(&trigger, "").unwrap();
    let real = crate::harness::real_git();
    let script = format!(
        "#!/bin/sh\n'{real}' \"$@\"\nrc=$?\n\
         if [ -n \"$GIT_INDEX_FILE\" ] && rm '{trigger}' 2>/dev/null; then\n\
         (unset GIT_INDEX_FILE GIT_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_LITERAL_PATHSPECS\ncd '{repo}'\n{inject}\n)\nfi\nexit $rc\n",
        real = real.trim(),
        trigger = trigger.display(),
        repo = repo.display()
    );
    let w = wrap.join("git");
    std::fs::write(&w, script).unwrap();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("tf-test-")
        .tempdir()
        .unwrap();
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    let m = Mount::at(tmp, store, mp, "s");
    let path = format!(
        "{}:{}",
        wrap.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env: Vec<(&str, &str)> = crate::harness::TEST_AWS_ENV.to_vec();
    env.push(("PATH", &path));
    let o = crate::harness::tf_env(
        &m.store,
        &[
            "mount",
            m.mp.to_str().unwrap(),
            "--session",
            "s",
            "--from",
            repo.to_str().unwrap(),
        ],
        &env,
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        Setup {
            _dir: dir,
            repo,
            m,
            baseline,
        },
        trigger,
    )
}

/// `treefork promote ARGS` in the workspace, paths given relative to the
/// workspace root (made absolute).
fn promote(m: &Mount, paths: &[&str], args: &[&str]) -> Output {
    let abs: Vec<String> = paths
        .iter()
        .map(|p| m.p(p).to_str().unwrap().to_string())
        .collect();
    let mut full = vec!["promote"];
    full.extend(abs.iter().map(String::as_str));
    full.extend_from_slice(args);
    ws(m, &full)
}

fn promote_ok(m: &Mount, paths: &[&str], args: &[&str]) -> String {
    let o = promote(m, paths, args);
    assert!(
        o.status.success(),
        "promote {paths:?} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Everything a promote could write in the repository: refs, HEAD, index bytes,
/// work tree status, object count, and the bytes of every tracked file.
fn repo_state(repo: &Path) -> String {
    let index = std::fs::read(repo.join(".git/index")).unwrap();
    format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        git(repo, &["for-each-ref"]),
        git(repo, &["symbolic-ref", "HEAD"]),
        blake3::hash(&index).to_hex(),
        git(repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(repo, &["count-objects", "-v"]),
        sh_files(repo)
    )
}

fn sh_files(repo: &Path) -> String {
    let mut out = String::new();
    for f in git(repo, &["ls-files"]).lines() {
        let b = std::fs::read(repo.join(f)).unwrap_or_default();
        out.push_str(&format!("{f} {}\n", blake3::hash(&b).to_hex()));
    }
    out
}

#[test]
fn commit_lands_on_top_of_drift_elsewhere_and_touches_only_chosen_paths() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    // Agent work: a modified file, a new file, an ignored new file.
    write_synced(&m.p("src/lib.rs"), b"pub fn a() { /* agent */ }\n");
    write_synced(&m.p("src/new.rs"), b"pub fn new() {}\n");
    write_synced(&m.p("debug.log"), b"noise\n");
    // Drift elsewhere: a commit on another path, an unstaged change, an untracked file.
    std::fs::write(repo.join("other.txt"), "theirs\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    git(repo, &["add", "other.txt", ".gitignore"]);
    git(repo, &["commit", "-q", "-m", "drift"]);
    let drift_head = git(repo, &["rev-parse", "HEAD"]);
    std::fs::write(repo.join("README"), "local edit\n").unwrap();
    std::fs::write(repo.join("scratch.txt"), "mine\n").unwrap();

    let out = promote_ok(
        m,
        &["src/lib.rs", "src/new.rs", "debug.log"],
        &["--json", "-m", "agent work"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["strategy"], "commit");
    let head = git(repo, &["rev-parse", "HEAD"]);
    assert_eq!(v["sha"], head.as_str());
    assert_eq!(v["branch"], "main");
    // One new commit whose parent is the drifted head, holding exactly the change.
    assert_eq!(git(repo, &["rev-parse", "HEAD^"]), drift_head);
    assert_eq!(git(repo, &["log", "-1", "--format=%s"]), "agent work");
    assert_eq!(
        git(repo, &["show", "--name-status", "--format=", "HEAD"]),
        "M\tsrc/lib.rs\nA\tsrc/new.rs"
    );
    // The ignored untracked file was skipped, and reported.
    assert_eq!(v["skipped"][0]["path"], "debug.log");
    // The durable index and work tree follow for the chosen paths only.
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "pub fn a() { /* agent */ }\n"
    );
    assert_eq!(
        git(repo, &["status", "--porcelain"]),
        // (trimmed: " M README")
        "M README\n?? scratch.txt"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("README")).unwrap(),
        "local edit\n"
    );
    // Recorded: an operation of kind promote with the result.
    let ops = ws_ok(m, &["op", "log", "--json"]);
    assert!(ops.contains("\"promote\""), "{ops}");
    assert!(ops.contains(&head), "{ops}");
    // The info record: promoted, with sha, branch and paths.
    m.umount();
    let store = treefork::store::PackStore::open(&m.store).unwrap();
    let info = treefork::lifecycle::load(&store, "s").unwrap().unwrap();
    assert_eq!(info.state, treefork::lifecycle::State::Promoted);
    let p = info.promoted.unwrap();
    assert_eq!(p.sha.as_deref(), Some(head.as_str()));
    assert_eq!(p.branch.as_deref(), Some("main"));
    assert_eq!(p.paths, vec!["src/lib.rs", "src/new.rs"]);
}

/// Drift on a chosen path, made by `drift`, refuses with BASELINE_CONFLICT (exit 3,
/// JSON paths) and writes nothing.
fn conflict_case(drift: &dyn Fn(&Path), chosen: &str, how: &str) {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"pub fn a() { /* agent */ }\n");
    drift(repo);
    let before = repo_state(repo);
    let o = promote(m, &[chosen], &["--json"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{how}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["code"], "BASELINE_CONFLICT", "{v}");
    assert_eq!(v["error"]["paths"][0]["path"], "src/lib.rs", "{v}");
    assert_eq!(v["error"]["paths"][0]["how"], how, "{v}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("src/lib.rs ("));
    assert_eq!(repo_state(repo), before, "{how}: the repository changed");
    // The human form exits 3 too.
    assert_eq!(promote(m, &[chosen], &[]).status.code(), Some(3));
}

#[test]
fn drift_committed_on_a_chosen_path_is_a_baseline_conflict() {
    conflict_case(
        &|repo| {
            std::fs::write(repo.join("src/lib.rs"), "theirs\n").unwrap();
            git(repo, &["commit", "-q", "-am", "theirs"]);
        },
        "src/lib.rs",
        "committed",
    );
}

#[test]
fn drift_staged_on_a_chosen_directory_is_a_baseline_conflict() {
    conflict_case(
        &|repo| {
            std::fs::write(repo.join("src/lib.rs"), "staged\n").unwrap();
            git(repo, &["add", "src/lib.rs"]);
        },
        // A directory prefix of the drifted path overlaps it.
        "src",
        "staged",
    );
}

#[test]
fn drift_unstaged_on_a_chosen_path_is_a_baseline_conflict() {
    conflict_case(
        &|repo| std::fs::write(repo.join("src/lib.rs"), "unstaged\n").unwrap(),
        "src/lib.rs",
        "unstaged",
    );
}

#[test]
fn a_commit_landing_during_promote_fails_it_cleanly() {
    // Right after promote writes its temporary index (after the drift check read
    // the branch head, before the branch is moved), another file is committed on
    // main, once.
    let (s, hook) = setup_injecting(
        "echo landed > landed.txt\ngit add landed.txt\nGIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@e git commit -q -m landed",
    );
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    let o = promote(m, &["src/lib.rs"], &[]);
    assert!(!o.status.success(), "promote should fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("moved while promoting"), "{err}");
    // The landed commit stands; nothing of the promote is on the branch or in the
    // work tree.
    assert!(!hook.exists(), "the hook ran");
    assert_eq!(git(repo, &["log", "-1", "--format=%s"]), "landed");
    assert_eq!(git(repo, &["rev-list", "--count", "HEAD"]), "2");
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    // Run again: it lands on top of the new commit (drift on another path).
    promote_ok(m, &["src/lib.rs"], &[]);
    assert_eq!(git(repo, &["log", "-1", "--format=%P"]).len(), 40);
    assert_eq!(
        git(repo, &["log", "-2", "--format=%s"]).lines().nth(1),
        Some("landed")
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "agent\n"
    );
}

#[test]
fn an_edit_of_a_chosen_path_made_during_promote_is_never_overwritten() {
    // After the drift check, before the work tree is updated: the user edits the
    // very file being promoted (an unstaged edit).
    let (s, hook) = setup_injecting("echo mine > src/lib.rs");
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    let out = promote_ok(m, &["src/lib.rs"], &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(!hook.exists(), "the hook ran");
    // The commit landed; the user's edit is still in the work tree, and said so.
    assert_eq!(git(repo, &["show", "HEAD:src/lib.rs"]), "agent");
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "mine\n"
    );
    assert!(
        v["worktree_error"].as_str().unwrap().contains("src/lib.rs"),
        "{v}"
    );
}

#[test]
fn branch_strategy_makes_one_commit_on_the_baseline_and_leaves_the_work_tree() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    std::fs::write(repo.join("other.txt"), "x\n").unwrap();
    git(repo, &["add", "other.txt"]);
    git(repo, &["commit", "-q", "-m", "drift"]);
    let head = git(repo, &["rev-parse", "HEAD"]);
    let before = git(repo, &["status", "--porcelain"]);
    let out = promote_ok(m, &["src/lib.rs"], &["--strategy", "branch"]);
    assert!(out.contains("treefork/s"), "{out}");
    assert_eq!(git(repo, &["rev-parse", "treefork/s^"]), s.baseline);
    assert_eq!(
        git(repo, &["show", "--name-only", "--format=", "treefork/s"]),
        "src/lib.rs"
    );
    assert_eq!(git(repo, &["show", "treefork/s:src/lib.rs"]), "agent");
    // Work tree, index and current branch untouched.
    assert_eq!(git(repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(repo, &["status", "--porcelain"]), before);
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    // An existing branch is refused; --onto-head commits on the head.
    let o = promote(m, &["src/lib.rs"], &["--strategy", "branch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    promote_ok(
        m,
        &["src/lib.rs"],
        &["--strategy", "branch", "--branch", "agent/x", "--onto-head"],
    );
    assert_eq!(git(repo, &["rev-parse", "agent/x^"]), head);
}

/// Binary bytes, a symbolic link, an executable bit and a delete.
fn kinds_of_change(m: &Mount) -> Vec<u8> {
    let mut bin: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    bin[10] = 0;
    bin.extend_from_slice(&[0xff, 0xfe, 0x00]);
    write_synced(&m.p("data.bin"), &bin);
    std::os::unix::fs::symlink("src/lib.rs", m.p("link")).unwrap();
    write_synced(&m.p("run.sh"), b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(m.p("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_file(m.p("README")).unwrap();
    bin
}

#[test]
fn commit_handles_binary_symlink_mode_and_delete() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    let bin = kinds_of_change(m);
    promote_ok(m, &["data.bin", "link", "run.sh", "README"], &[]);
    let tree = git(repo, &["ls-tree", "HEAD"]);
    assert!(
        tree.contains("100755 blob") && tree.contains("\trun.sh"),
        "{tree}"
    );
    assert!(
        tree.contains("120000 blob") && tree.contains("\tlink"),
        "{tree}"
    );
    assert!(!tree.contains("README"), "{tree}");
    let o = git_raw(repo, &["cat-file", "blob", "HEAD:data.bin"]);
    assert_eq!(o.stdout, bin);
    assert_eq!(git(repo, &["cat-file", "blob", "HEAD:link"]), "src/lib.rs");
    // The work tree follows: link, executable, deleted file; status clean.
    assert_eq!(
        std::fs::read_link(repo.join("link")).unwrap(),
        Path::new("src/lib.rs")
    );
    let mode = std::fs::metadata(repo.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o100, 0);
    assert!(!repo.join("README").exists());
    assert_eq!(std::fs::read(repo.join("data.bin")).unwrap(), bin);
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
}

#[test]
fn patch_applies_to_a_clean_checkout_of_the_baseline() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    let bin = kinds_of_change(m);
    std::fs::set_permissions(m.p("src/lib.rs"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = repo_state(repo);
    let file = s._dir.path().join("out.patch");
    let said = promote_ok(
        m,
        &["data.bin", "link", "run.sh", "README", "src/lib.rs"],
        &["--strategy", "patch", "-o", file.to_str().unwrap()],
    );
    // It says what it did: wrote a patch, promoted nothing.
    assert!(!said.contains("promoted "), "{said}");
    assert!(said.contains("patch M "), "{said}");
    assert!(
        said.contains(&format!("wrote the patch to {}", file.display()))
            && said.contains("nothing was promoted"),
        "{said}"
    );
    // Stdout form: the same patch.
    let o = promote(
        m,
        &["data.bin", "link", "run.sh", "README", "src/lib.rs"],
        &["--strategy", "patch"],
    );
    assert!(o.status.success());
    let patch = std::fs::read(&file).unwrap();
    assert_eq!(o.stdout, patch);
    assert!(String::from_utf8_lossy(&patch).contains("GIT binary patch"));
    // The repository was not written (no object, ref or index change).
    assert_eq!(repo_state(repo), before);
    let clean = s._dir.path().join("clean");
    let o = Command::new("git")
        .args(["clone", "-q"])
        .arg(repo)
        .arg(&clean)
        .output()
        .unwrap();
    assert!(o.status.success());
    git(&clean, &["checkout", "-q", &s.baseline]);
    git(&clean, &["apply", "--check", file.to_str().unwrap()]);
    git(&clean, &["apply", file.to_str().unwrap()]);
    assert_eq!(std::fs::read(clean.join("data.bin")).unwrap(), bin);
    assert_eq!(
        std::fs::read_link(clean.join("link")).unwrap(),
        Path::new("src/lib.rs")
    );
    assert!(!clean.join("README").exists());
    let mode = std::fs::metadata(clean.join("src/lib.rs"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o100, 0);
}

#[test]
fn dry_run_reports_exactly_and_changes_nothing() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    write_synced(&m.p("new.txt"), b"12345");
    std::fs::remove_file(m.p("README")).unwrap();
    let before = repo_state(repo);
    let out = promote_ok(m, &["src", "new.txt", "README"], &["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["dry_run"], true);
    let changes: Vec<(String, String, String, u64)> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["change"].as_str().unwrap().to_string(),
                c["mode"].as_str().unwrap_or("-").to_string(),
                c["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("README".into(), "deleted".into(), "-".into(), 0),
            ("new.txt".into(), "added".into(), "100644".into(), 5),
            ("src/lib.rs".into(), "modified".into(), "100644".into(), 6),
        ]
    );
    assert_eq!(v["target"]["ref"], "refs/heads/main");
    assert_eq!(v["target"]["from"], s.baseline.as_str());
    let human = promote_ok(m, &["src", "new.txt", "README"], &["--dry-run"]);
    assert!(human.contains("would promote D"), "{human}");
    assert!(
        human.contains(&format!(
            "would move refs/heads/main from {}",
            &s.baseline[..12]
        )),
        "{human}"
    );
    assert_eq!(repo_state(repo), before);
    // A path not changed vs the baseline is a reported no-op.
    let out = promote_ok(m, &["src/lib.rs", "nothere"], &["--dry-run", "--json"]);
    assert!(out.contains("no change in the session"), "{out}");
}

#[test]
fn the_agent_socket_refuses_promote() {
    let s = setup();
    let m = &s.m;
    m.umount();
    let sock = m.tmp.path().join("agent.sock");
    m.mount_with(&["--agent-socket", sock.to_str().unwrap()]);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    let before = repo_state(&s.repo);
    let o = tf(
        &m.store,
        &["--socket", sock.to_str().unwrap(), "promote", "--dry-run"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("promote is not allowed on an agent socket"),
        "{err}"
    );
    assert_eq!(repo_state(&s.repo), before);
}

#[test]
fn a_session_without_a_git_baseline_offers_only_patch() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(plain.join("d")).unwrap();
    std::fs::write(plain.join("d/a.txt"), "one\n").unwrap();
    std::fs::write(plain.join("gone.txt"), "bye\n").unwrap();
    let m = Mount::with_options("p", &["--from", plain.to_str().unwrap()]);
    write_synced(&m.p("d/a.txt"), b"two\n");
    write_synced(&m.p("d/b.txt"), b"new\n");
    std::fs::remove_file(m.p("gone.txt")).unwrap();
    let o = promote(&m, &["d"], &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("only --strategy patch"), "{err}");
    let o = promote(&m, &["d"], &["--strategy", "branch"]);
    assert!(!o.status.success());
    let patch = promote_ok(&m, &["d", "gone.txt"], &["--strategy", "patch"]);
    let file = dir.path().join("p.patch");
    std::fs::write(&file, &patch).unwrap();
    // It applies to the plain directory as it was (git apply outside a repository).
    let o = Command::new("git")
        .args(["apply", "--check", file.to_str().unwrap()])
        .current_dir(&plain)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{patch}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new("git")
        .args(["apply", file.to_str().unwrap()])
        .current_dir(&plain)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(plain.join("d/a.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(plain.join("d/b.txt")).unwrap(),
        "new\n"
    );
    assert!(!plain.join("gone.txt").exists());
}

#[test]
fn the_agents_own_commits_do_not_leak_and_git_paths_are_refused() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    // The agent commits inside the workspace (its .git is the session's copy).
    git(
        &m.mp,
        &["commit", "-q", "-am", "agent commit inside the workspace"],
    );
    write_synced(&m.p("later.txt"), b"later\n");
    // .git paths are refused.
    let o = promote(m, &[".git/config"], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("inside .git"));
    // Promoting the whole tree takes file states vs the baseline, never .git.
    promote_ok(m, &[""], &["-m", "promoted"]);
    assert_eq!(
        git(repo, &["show", "--name-status", "--format=", "HEAD"]),
        "A\tlater.txt\nM\tsrc/lib.rs"
    );
    assert_eq!(git(repo, &["rev-parse", "HEAD^"]), s.baseline);
    let log = git(repo, &["log", "--format=%s"]);
    assert!(!log.contains("agent commit inside"), "{log}");
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
}

#[test]
fn files_over_the_size_limit_need_allow_large() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    let big = vec![7u8; (50 << 20) + 1];
    write_synced(&m.p("big.bin"), &big);
    let before = repo_state(repo);
    let o = promote(m, &["big.bin"], &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-large"));
    assert_eq!(repo_state(repo), before);
    promote_ok(m, &["big.bin"], &["--allow-large"]);
    assert_eq!(
        std::fs::metadata(repo.join("big.bin")).unwrap().len(),
        big.len() as u64
    );
}

#[test]
fn without_paths_promote_takes_the_touched_files() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    write_synced(&m.p("added.txt"), b"a\n");
    std::fs::remove_file(m.p("README")).unwrap();
    // An editor's temporary file, created and removed: touched, but in neither state.
    write_synced(&m.p(".lib.rs.swp"), b"x");
    std::fs::remove_file(m.p(".lib.rs.swp")).unwrap();
    let dry: serde_json::Value =
        serde_json::from_str(&promote_ok(m, &[], &["--dry-run", "--json"])).unwrap();
    assert_eq!(
        dry["transient"],
        serde_json::json!([".lib.rs.swp"]),
        "{dry}"
    );
    assert_eq!(dry["unchanged"], serde_json::json!([]), "{dry}");
    assert!(promote_ok(m, &[], &["--dry-run"]).contains("1 temporary file(s)"));
    promote_ok(m, &[], &[]);
    assert_eq!(
        git(repo, &["show", "--name-status", "--format=", "HEAD"]),
        "D\tREADME\nA\tadded.txt\nM\tsrc/lib.rs"
    );
}

/// Issue 23, defect 1: the session's own promote commit is not drift. A path
/// promoted once is promoted again (commit, then branch and patch strategies);
/// a change someone else commits to it afterwards still is drift.
#[test]
fn a_path_is_promoted_twice_and_only_others_commits_are_drift() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("README"), b"one\n");
    promote_ok(m, &["README"], &["-m", "one"]);
    assert_eq!(git(repo, &["show", "HEAD:README"]), "one");
    // Someone else commits elsewhere meanwhile: not in the way either.
    std::fs::write(repo.join("other.txt"), "theirs\n").unwrap();
    git(repo, &["add", "other.txt"]);
    git(repo, &["commit", "-q", "-m", "theirs elsewhere"]);
    write_synced(&m.p("README"), b"two\n");
    promote_ok(m, &["README"], &["-m", "two"]);
    assert_eq!(git(repo, &["show", "HEAD:README"]), "two");
    assert_eq!(git(repo, &["log", "-1", "--format=%s"]), "two");
    assert_eq!(git(repo, &["show", "HEAD:other.txt"]), "theirs");
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
    // The other strategies are not refused either.
    write_synced(&m.p("README"), b"three\n");
    promote_ok(
        m,
        &["README"],
        &["--strategy", "branch", "--branch", "agent/three"],
    );
    assert_eq!(git(repo, &["show", "agent/three:README"]), "three");
    let patch = promote_ok(m, &["README"], &["--strategy", "patch"]);
    assert!(patch.contains("+three"), "{patch}");
    // A commit of someone else's on the promoted path is drift again.
    std::fs::write(repo.join("README"), "theirs\n").unwrap();
    git(repo, &["commit", "-q", "-am", "theirs on README"]);
    let o = promote(m, &["README"], &["--json"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["paths"][0]["path"], "README", "{v}");
    assert_eq!(v["error"]["paths"][0]["how"], "committed", "{v}");
}

/// Issue 23, defect 4: until-promote evicts only once everything the session
/// changed is promoted (not after one path, not after a later change), the
/// promote says what will happen, and the eviction says why — in its checkpoint,
/// the session's info and an `umount` of the old mountpoint.
#[test]
fn until_promote_waits_for_everything_and_says_why() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    let sweep = || -> serde_json::Value {
        let out = crate::harness::tf_ok(&m.store, &["session", "sweep", "--json"]);
        serde_json::from_str(&out).unwrap()
    };
    let evicted = |v: &serde_json::Value| v["evicted"].as_array().map_or(0, |a| a.len());
    // A second session keeps the daemon running after the eviction.
    let keep = m.tmp.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    let kp = keep.to_str().unwrap();
    crate::harness::tf_ok(&m.store, &["mount", kp, "--session", "keep", "--manual"]);
    write_synced(&m.p("README"), b"mine\n");
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    let v: serde_json::Value =
        serde_json::from_str(&promote_ok(m, &["README"], &["--json", "-m", "readme"])).unwrap();
    let note = v["lifecycle"].as_str().unwrap_or_default();
    assert!(note.contains("not promoted yet (src/lib.rs)"), "{v}");
    assert_eq!(evicted(&sweep()), 0, "evicted with src/lib.rs unpromoted");
    let v: serde_json::Value =
        serde_json::from_str(&promote_ok(m, &["src/lib.rs"], &["--json", "-m", "lib"])).unwrap();
    let note = v["lifecycle"].as_str().unwrap_or_default();
    assert!(
        note.contains("everything the session changed is promoted"),
        "{v}"
    );
    // Changed after the promote: not evicted.
    write_synced(&m.p("later.txt"), b"later\n");
    assert_eq!(evicted(&sweep()), 0, "evicted with later.txt unpromoted");
    promote_ok(m, &["later.txt"], &["-m", "later"]);
    let v = sweep();
    assert_eq!(evicted(&v), 1, "{v}");
    assert_eq!(v["evicted"][0]["reason"], "promoted (until-promote)", "{v}");
    assert_eq!(git(repo, &["show", "HEAD:later.txt"]), "later");
    // The real reason, everywhere.
    let info: serde_json::Value = serde_json::from_str(&crate::harness::tf_ok(
        &m.store,
        &["session", "show", "s", "--json"],
    ))
    .unwrap();
    assert_eq!(
        info["info"]["evicted"]["why"], "promoted (until-promote)",
        "{info}"
    );
    let ckpt = info["info"]["evicted"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = crate::harness::tf_ok(&m.store, &["-C", kp, "--json", "show", &ckpt]);
    assert!(
        shown.contains("evicted: promoted (until-promote)"),
        "{shown}"
    );
    let o = tf(&m.store, &["umount", m.mp.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("session s was evicted") && err.contains("promoted (until-promote)"),
        "{err}"
    );
    assert!(err.contains("treefork mount"), "{err}");
    crate::harness::umount_ok(&m.store, &keep);
}

/// Issue 27, point 1: a dry run over a build directory's worth of ignored files
/// counts them per top directory instead of one line each; `--list-skipped`
/// lists them, and `--json` always carries every one.
#[test]
fn ignored_paths_are_summarised_per_top_directory() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    std::fs::write(repo.join(".gitignore"), "target/\n*.log\n").unwrap();
    git(repo, &["add", ".gitignore"]);
    git(repo, &["commit", "-q", "-m", "ignore build output"]);
    for i in 0..30 {
        write_synced(&m.p(&format!("target/debug/o{i}.o")), b"obj\n");
    }
    write_synced(&m.p("build.log"), b"log\n");
    write_synced(&m.p("src/lib.rs"), b"agent\n");
    let out = promote_ok(m, &[], &["--dry-run"]);
    assert!(
        out.contains("skipped 31 paths the repository ignores: target/ (30), build.log (1)"),
        "{out}"
    );
    assert_eq!(out.matches("skipped target/").count(), 0, "{out}");
    assert!(out.contains("src/lib.rs"), "{out}");
    let all = promote_ok(m, &[], &["--dry-run", "--list-skipped"]);
    assert_eq!(all.matches("skipped target/debug/").count(), 30, "{all}");
    let v: serde_json::Value =
        serde_json::from_str(&promote_ok(m, &[], &["--dry-run", "--json"])).unwrap();
    assert_eq!(v["skipped"].as_array().unwrap().len(), 31, "{v}");
}

/// After a commit promote the workspace's own git agrees with the durable
/// repository: its branch names the promote commit, `git status` there shows
/// only what was not promoted (issue 27, point 2); a branch with the agent's own
/// commits is left alone, and the answer says so.
#[test]
fn the_workspace_git_takes_the_promote_commit_in() {
    let s = setup();
    let (repo, m) = (&s.repo, &s.m);
    write_synced(&m.p("src/lib.rs"), b"pub fn a() { /* promoted */ }\n");
    write_synced(&m.p("README"), b"not promoted\n");
    let out = promote_ok(m, &["src/lib.rs"], &["-m", "one"]);
    assert!(out.contains("now names the promote commit"), "{out}");
    let durable = git(repo, &["rev-parse", "HEAD"]);
    assert_eq!(git(&m.mp, &["rev-parse", "HEAD"]), durable);
    assert_eq!(git(&m.mp, &["status", "--porcelain"]), "M README");
    // Built on the baseline: the session's baseline moved to the promote commit.
    let info: serde_json::Value =
        serde_json::from_str(&ws_ok(m, &["--json", "session", "show", "s"])).unwrap();
    assert_eq!(
        info["info"]["origin"]["baseline"],
        durable.as_str(),
        "{info}"
    );
    // The agent commits in the workspace; the next promote does not move its branch.
    git(&m.mp, &["commit", "-qam", "agent's own"]);
    let own = git(&m.mp, &["rev-parse", "HEAD"]);
    write_synced(&m.p("src/lib.rs"), b"pub fn a() { /* twice */ }\n");
    let out = promote_ok(m, &["src/lib.rs"], &["-m", "two"]);
    assert!(out.contains("has commits of its own"), "{out}");
    assert_eq!(git(&m.mp, &["rev-parse", "HEAD"]), own);
}
