//! `merge`, `cherry-pick` and `rebase` on real mounts with the real CLI: clean
//! merges of a fork, conflicts stopped and resolved (`--continue`) or given up
//! (`--abort`), undo, and a rebase onto a moved git repository whose conflict is
//! resolved by an exec'd command and then promoted.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::harness::{Mount, fork_beside, git, tf, write_synced, ws, ws_in, ws_in_ok, ws_ok};
use crate::lifecycle::git_repo;

fn j(m: &Mount, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ws_ok(m, &a)).unwrap()
}

/// `--json` run that may fail: (exit status, document on stdout).
fn jr(m: &Mount, args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let o = ws(m, &a);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code().unwrap_or(-1), v)
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

fn lines(n: usize, change: &[(usize, &str)]) -> String {
    (0..n)
        .map(|i| {
            let l = change
                .iter()
                .find(|(k, _)| *k == i)
                .map_or(format!("line {i}"), |(_, s)| s.to_string());
            l + "\n"
        })
        .collect()
}

#[test]
fn merge_of_a_fork_takes_both_sides_and_records_two_parents() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), lines(10, &[]).as_bytes());
    write_synced(&m.p("b.txt"), b"bee\n");
    write_synced(&m.p("same.txt"), b"x\n");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let f = fork_beside(&m, "f");
    write_synced(&f.join("a.txt"), lines(10, &[(8, "theirs 8")]).as_bytes());
    write_synced(&f.join("new.txt"), b"new\n");
    write_synced(&f.join("d/x"), b"in a new dir\n");
    write_synced(&f.join("same.txt"), b"both\n");
    fs::remove_file(f.join("b.txt")).unwrap();
    ws_in_ok(&m, &f, &["checkpoint", "-m", "theirs"]);
    write_synced(&m.p("a.txt"), lines(10, &[(1, "ours 1")]).as_bytes());
    write_synced(&m.p("same.txt"), b"both\n");
    write_synced(&m.p("mine.txt"), b"mine\n");
    ws_ok(&m, &["checkpoint", "-m", "ours"]);

    let a = j(&m, &["merge", "f", "--dry-run"]);
    assert_eq!(a["status"], "planned", "{a}");
    assert_eq!(
        read(&m.p("a.txt")),
        lines(10, &[(1, "ours 1")]),
        "a dry run changes nothing"
    );

    let a = j(&m, &["merge", "f"]);
    assert_eq!(a["status"], "merged", "{a}");
    assert_eq!(a["conflicts"], Value::Array(vec![]));
    assert_eq!(
        read(&m.p("a.txt")),
        lines(10, &[(1, "ours 1"), (8, "theirs 8")])
    );
    assert_eq!(read(&m.p("new.txt")), "new\n");
    assert_eq!(read(&m.p("d/x")), "in a new dir\n");
    assert_eq!(
        read(&m.p("same.txt")),
        "both\n",
        "the same change on both sides"
    );
    assert_eq!(read(&m.p("mine.txt")), "mine\n");
    assert!(!m.p("b.txt").exists(), "theirs deleted b.txt");
    let cp = a["checkpoint"].as_str().unwrap().to_string();
    let shown = j(&m, &["show", &cp]);
    let parents = shown["checkpoint"]["parents"]
        .as_array()
        .or(shown["parents"].as_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        parents.len(),
        2,
        "a merge checkpoint has two parents: {shown}"
    );
    // Theirs is now in HEAD's history.
    let again = j(&m, &["merge", "f"]);
    assert_eq!(again["status"], "up_to_date", "{again}");

    // One undo puts the workspace back.
    ws_ok(&m, &["undo"]);
    assert_eq!(read(&m.p("a.txt")), lines(10, &[(1, "ours 1")]));
    assert!(m.p("b.txt").exists() && !m.p("new.txt").exists());
}

#[test]
fn a_conflict_stops_until_resolved_and_abort_restores_the_state_before() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), lines(10, &[]).as_bytes());
    write_synced(&m.p("img.bin"), b"\0\x01base");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let f = fork_beside(&m, "f");
    write_synced(&f.join("a.txt"), lines(10, &[(4, "theirs")]).as_bytes());
    write_synced(&f.join("img.bin"), b"\0\x01theirs");
    ws_in_ok(&m, &f, &["checkpoint", "-m", "theirs"]);
    write_synced(&m.p("a.txt"), lines(10, &[(4, "ours")]).as_bytes());
    write_synced(&m.p("img.bin"), b"\0\x01ours");
    write_synced(&m.p("pending.txt"), b"not checkpointed\n");

    let (code, a) = jr(&m, &["merge", "f"]);
    assert_eq!(code, 11, "a stop on conflicts exits 11: {a}");
    assert_eq!(a["status"], "merge_conflict");
    let kinds: Vec<(String, String)> = a["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().into(),
                c["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("a.txt".into(), "content".into()),
            ("img.bin".into(), "binary".into())
        ]
    );
    let text = read(&m.p("a.txt"));
    assert!(
        text.contains("<<<<<<< ours") && text.contains(">>>>>>> theirs"),
        "{text}"
    );
    assert_eq!(fs::read(m.p("img.bin")).unwrap(), b"\0\x01ours");
    assert_eq!(fs::read(m.p("img.bin~theirs")).unwrap(), b"\0\x01theirs");
    assert_eq!(read(&m.p("pending.txt")), "not checkpointed\n");

    // Another merge waits for this one.
    let o = ws(&m, &["cherry-pick", "f"]);
    assert_eq!(
        o.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // --continue refuses while markers and PATH~theirs remain.
    let (code, c) = jr(&m, &["merge", "--continue"]);
    assert_eq!(code, 11, "{c}");
    assert_eq!(c["conflicts"].as_array().unwrap().len(), 2, "{c}");

    // --abort: exactly the state before, pending changes included.
    let a = j(&m, &["merge", "--abort"]);
    assert_eq!(a["status"], "aborted", "{a}");
    assert_eq!(read(&m.p("a.txt")), lines(10, &[(4, "ours")]));
    assert_eq!(fs::read(m.p("img.bin")).unwrap(), b"\0\x01ours");
    assert!(!m.p("img.bin~theirs").exists());
    assert_eq!(read(&m.p("pending.txt")), "not checkpointed\n");
    let o = ws(&m, &["merge", "--continue"]);
    assert_eq!(o.status.code(), Some(2), "nothing stopped any more");

    // Again, resolved this time.
    let (code, _) = jr(&m, &["merge", "f"]);
    assert_eq!(code, 11);
    write_synced(&m.p("a.txt"), lines(10, &[(4, "resolved")]).as_bytes());
    fs::remove_file(m.p("img.bin~theirs")).unwrap();
    let c = j(&m, &["merge", "--continue"]);
    assert_eq!(c["status"], "merged", "{c}");
    let cp = c["checkpoint"].as_str().unwrap();
    let shown = j(&m, &["show", cp]);
    let parents = shown["checkpoint"]["parents"]
        .as_array()
        .or(shown["parents"].as_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(parents.len(), 2, "{shown}");
    let (code, again) = jr(&m, &["merge", "f"]);
    assert_eq!(again["status"], "up_to_date", "{code} {again} {shown}");
}

#[test]
fn cherry_pick_applies_one_checkpoint_only() {
    let m = Mount::new();
    write_synced(&m.p("a.txt"), b"a\n");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let f = fork_beside(&m, "f");
    write_synced(&f.join("one.txt"), b"one\n");
    ws_in_ok(&m, &f, &["checkpoint", "-m", "one"]);
    write_synced(&f.join("two.txt"), b"two\n");
    write_synced(&f.join("a.txt"), b"a from two\n");
    ws_in_ok(&m, &f, &["checkpoint", "-m", "two"]);
    let log = {
        let o = ws_in(&m, &f, &["--json", "log"]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let entries = log["checkpoints"]
        .as_array()
        .or(log.as_array())
        .cloned()
        .unwrap();
    let two = entries[0]["id"].as_str().unwrap().to_string();
    let a = j(&m, &["cherry-pick", &two]);
    assert_eq!(a["status"], "merged", "{a}");
    assert_eq!(read(&m.p("two.txt")), "two\n");
    assert_eq!(read(&m.p("a.txt")), "a from two\n");
    assert!(
        !m.p("one.txt").exists(),
        "only the picked checkpoint's changes"
    );
    let shown = j(&m, &["show", a["checkpoint"].as_str().unwrap()]);
    let parents = shown["checkpoint"]["parents"]
        .as_array()
        .or(shown["parents"].as_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(parents.len(), 1, "{shown}");
    assert_eq!(j(&m, &["cherry-pick", &two])["status"], "up_to_date");
}

#[test]
fn rebase_onto_the_moved_repository_then_promote() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    fs::write(repo.join("notes.txt"), lines(10, &[])).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "notes"]);
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    // The session's work.
    write_synced(&m.p("notes.txt"), lines(10, &[(1, "session 1")]).as_bytes());
    write_synced(&m.p("src/lib.rs"), b"pub fn a() { /* session */ }\n");
    write_synced(&m.p("added.txt"), b"by the session\n");
    // The repository moves on meanwhile.
    fs::write(repo.join("notes.txt"), lines(10, &[(8, "repo 8")])).unwrap();
    fs::write(repo.join("upstream.txt"), "upstream\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "upstream 1"]);
    fs::write(repo.join("src/lib.rs"), "pub fn a() { /* repo */ }\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "upstream 2"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);

    // Promote refuses (drift) and says rebase is the way forward.
    let o = ws(&m, &["promote", "-m", "x"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("treefork rebase"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Its dry run shows the plan, the drifted path marked, and the way forward.
    let dry = j(&m, &["promote", "--dry-run"]);
    let lib = dry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "src/lib.rs")
        .cloned();
    assert_eq!(lib.unwrap()["drifted"], "committed", "{dry}");
    assert!(
        dry["next"].as_str().unwrap().contains("treefork rebase"),
        "{dry}"
    );
    let plan = j(&m, &["rebase", "--dry-run"]);
    assert_eq!(plan["status"], "planned", "{plan}");
    assert_eq!(plan["conflicts"].as_array().unwrap().len(), 1, "{plan}");
    let (code, a) = jr(&m, &["rebase"]);
    assert_eq!(code, 11, "{a}");
    assert_eq!(a["conflicts"][0]["path"], "src/lib.rs");
    assert_eq!(
        read(&m.p("notes.txt")),
        lines(10, &[(1, "session 1"), (8, "repo 8")])
    );
    assert_eq!(read(&m.p("upstream.txt")), "upstream\n");
    assert_eq!(read(&m.p("added.txt")), "by the session\n");
    // Resolved by a recorded command.
    ws_ok(
        &m,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "printf 'pub fn a() { /* both */ }\\n' > src/lib.rs",
        ],
    );
    let c = j(&m, &["rebase", "--continue"]);
    assert_eq!(c["status"], "merged", "{c}");
    // The new baseline tree is kept by gc (promote reads it).
    crate::harness::tf_ok(&m.store, &["gc"]);

    // Promote now lands on the new head: only the session's work, no drift.
    ws_ok(&m, &["promote", "-m", "session work"]);
    assert_eq!(git(&repo, &["rev-parse", "HEAD~1"]), head);
    assert_eq!(
        git(&repo, &["show", "HEAD:src/lib.rs"]),
        "pub fn a() { /* both */ }"
    );
    let notes = git(&repo, &["show", "HEAD:notes.txt"]);
    assert!(
        notes.contains("session 1") && notes.contains("repo 8"),
        "{notes}"
    );
    assert_eq!(git(&repo, &["show", "HEAD:added.txt"]), "by the session");
    // The promote built on the baseline, so the baseline moved to its commit:
    // nothing is left to rebase.
    assert_eq!(j(&m, &["rebase"])["status"], "up_to_date");
}

#[test]
fn experiment_adopt_merge_combines_runs_and_octopus_merges() {
    let m = Mount::new();
    write_synced(&m.p("shared.txt"), lines(6, &[]).as_bytes());
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let x = j(
        &m,
        &[
            "experiment",
            "--keep",
            "-c",
            "echo one > one.txt; sed -i 's/line 0/run one/' shared.txt",
            "-c",
            "echo two > two.txt; sed -i 's/line 5/run two/' shared.txt",
        ],
    );
    assert_eq!(x["runs"].as_array().unwrap().len(), 2, "{x}");
    let a = j(&m, &["experiment", "adopt", "--merge", "1,2"]);
    assert_eq!(a["status"], "merged", "{a}");
    assert_eq!(read(&m.p("one.txt")), "one\n");
    assert_eq!(read(&m.p("two.txt")), "two\n");
    assert_eq!(
        read(&m.p("shared.txt")),
        lines(6, &[(0, "run one"), (5, "run two")])
    );
    let shown = j(&m, &["show", a["checkpoint"].as_str().unwrap()]);
    let parents = shown["checkpoint"]["parents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(parents.len(), 3, "HEAD and both runs: {shown}");
    ws_ok(&m, &["undo"]);
    assert!(!m.p("one.txt").exists() && !m.p("two.txt").exists());
}

#[test]
fn revert_of_one_exec_keeps_the_commands_after_it_and_history_says_so() {
    let m = Mount::new();
    write_synced(&m.p("code.txt"), lines(6, &[]).as_bytes());
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    ws_ok(
        &m,
        &["exec", "--", "sed", "-i", "s/line 1/edited 1/", "code.txt"],
    );
    ws_ok(&m, &["exec", "--", "sh", "-c", "echo ran > test.log"]);
    ws_ok(
        &m,
        &["exec", "--", "sed", "-i", "s/line 4/edited 4/", "code.txt"],
    );
    // Take out exec 1 alone: exec 2's log and exec 3's edit stay.
    let a = j(&m, &["revert", "exec@1"]);
    assert_eq!(a["status"], "merged", "{a}");
    assert_eq!(read(&m.p("code.txt")), lines(6, &[(4, "edited 4")]));
    assert_eq!(read(&m.p("test.log")), "ran\n");
    let h = j(&m, &["history"]);
    let execs = h["execs"].as_array().unwrap();
    let of = |n: u64| execs.iter().find(|e| e["n"] == n).unwrap().clone();
    assert_eq!(of(1)["reverted"], true, "{h}");
    assert!(
        of(2).get("reverted").is_none() && of(2).get("undone").is_none(),
        "{h}"
    );
    let human = ws_ok(&m, &["history"]);
    assert!(
        human
            .lines()
            .any(|l| l.contains("sed -i 's/line 1/") && l.ends_with("(reverted)")),
        "{human}"
    );
    // Undo the revert, then undo exec 3: history marks it undone.
    ws_ok(&m, &["undo"]);
    assert_eq!(
        read(&m.p("code.txt")),
        lines(6, &[(1, "edited 1"), (4, "edited 4")])
    );
    ws_ok(&m, &["undo"]);
    let h = j(&m, &["history"]);
    let execs = h["execs"].as_array().unwrap();
    let of = |n: u64| execs.iter().find(|e| e["n"] == n).unwrap().clone();
    assert_eq!(of(3)["undone"], true, "{h}");
    assert!(
        of(1).get("reverted").is_none(),
        "the revert was undone: {h}"
    );
    // A revert whose lines a later command changed too stops on the conflict.
    ws_ok(&m, &["redo"]);
    ws_ok(
        &m,
        &[
            "exec",
            "--",
            "sed",
            "-i",
            "s/edited 1/edited again/",
            "code.txt",
        ],
    );
    let (code, c) = jr(&m, &["revert", "exec@1"]);
    assert_eq!(code, 11, "{c}");
    assert_eq!(c["conflicts"][0]["path"], "code.txt");
    assert_eq!(j(&m, &["revert", "--abort"])["status"], "aborted");
    assert_eq!(
        read(&m.p("code.txt")),
        lines(6, &[(1, "edited again"), (4, "edited 4")])
    );
}

#[test]
fn bad_input_is_refused_by_code_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    write_synced(&m.p("a.txt"), b"a\n");
    ws_ok(&m, &["checkpoint", "-m", "base"]);
    let code = |args: &[&str]| ws(&m, args).status.code();
    assert_eq!(code(&["merge", "no-such-ref"]), Some(4));
    assert_eq!(code(&["cherry-pick", "no-such-ref"]), Some(4));
    assert_eq!(code(&["revert", "exec@999"]), Some(4));
    assert_eq!(code(&["merge", "--continue", "--abort"]), Some(2));
    assert_eq!(code(&["revert", "--continue"]), Some(2), "nothing stopped");
    let many: Vec<String> = (0..17).map(|_| "HEAD".to_string()).collect();
    let mut args = vec!["merge"];
    args.extend(many.iter().map(String::as_str));
    assert_eq!(code(&args), Some(2), "at most 16 refs");
    // No git baseline: nothing to rebase onto.
    let o = ws(&m, &["rebase"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no git baseline"));
    // An agent may not name the commit a rebase goes onto.
    let agent = |args: &[&str]| {
        Command::new(crate::harness::bin())
            .args(args)
            .env("TREEFORK_SOCKET", &sock)
            .env_remove("TREEFORK_STORE")
            .output()
            .unwrap()
    };
    let o = agent(&["rebase", "--onto", "main"]);
    assert_eq!(
        o.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        agent(&["merge", "HEAD"]).status.code(),
        Some(0),
        "additive for an agent"
    );
    assert_eq!(read(&m.p("a.txt")), "a\n");
}

/// The workspace's own git after a promote: clean, at the promoted commit, which
/// it holds with its tree and blobs.
fn workspace_git_holds(m: &Mount, repo: &Path) {
    let sha = git(repo, &["rev-parse", "HEAD"]);
    assert_eq!(git(&m.mp, &["status", "--porcelain"]), "", "git status");
    assert_eq!(git(&m.mp, &["log", "-1", "--format=%H"]), sha);
    for obj in [
        sha.clone(),
        format!("{sha}^{{tree}}"),
        format!("{sha}:src/lib.rs"),
    ] {
        let o = crate::harness::git_raw(&m.mp, &["cat-file", "-e", &obj]);
        assert!(o.status.success(), "cat-file -e {obj}");
    }
}

#[test]
fn rebase_then_promote_keeps_the_workspace_git_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let m = Mount::with_options(
        "s",
        &["--from", repo.to_str().unwrap(), "--no-until-promote"],
    );
    for round in 1..=2 {
        // Commit-less edits in the session, a commit upstream meanwhile.
        write_synced(
            &m.p("src/lib.rs"),
            format!("pub fn a() {{ {round} }}\n").as_bytes(),
        );
        write_synced(&m.p(&format!("new{round}.txt")), b"by the session\n");
        fs::write(repo.join("README"), format!("upstream {round}\n")).unwrap();
        git(
            &repo,
            &["commit", "-q", "-am", &format!("upstream {round}")],
        );
        let r = j(&m, &["rebase"]);
        assert_eq!(r["status"], "merged", "{r}");
        let o = ws(&m, &["promote", "-m", &format!("session {round}")]);
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{err}");
        assert!(
            !out.contains("commits of its own") && !err.contains("commits of its own"),
            "round {round}: {out}{err}"
        );
        assert_eq!(
            git(&repo, &["log", "-1", "--format=%s"]),
            format!("session {round}")
        );
        workspace_git_holds(&m, &repo);
    }
}

#[test]
fn rebase_conflict_markers_name_the_session_and_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let m = Mount::with_options("s", &["--from", repo.to_str().unwrap()]);
    write_synced(&m.p("src/lib.rs"), b"session\n");
    fs::write(repo.join("src/lib.rs"), "repository\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "upstream"]);
    let (code, a) = jr(&m, &["rebase"]);
    assert_eq!(code, 11, "{a}");
    let text = read(&m.p("src/lib.rs"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"<<<<<<< session (yours)"), "{text}");
    assert_eq!(lines.get(1), Some(&"session"), "{text}");
    assert_eq!(
        lines.last(),
        Some(&">>>>>>> repository (upstream)"),
        "{text}"
    );
    assert!(lines.contains(&"repository"), "{text}");
    let next = a["next"].as_str().unwrap();
    assert!(
        next.contains("session (yours)") && next.contains("repository (upstream)"),
        "{next}"
    );
    let help = String::from_utf8_lossy(&tf(&m.store, &["rebase", "--help"]).stdout).into_owned();
    assert!(help.contains("<<<<<<< session (yours)"), "{help}");
    ws_ok(&m, &["rebase", "--abort"]);
    assert_eq!(read(&m.p("src/lib.rs")), "session\n");
}
