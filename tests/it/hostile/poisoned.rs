//! The poisoned `.git` suite (issue 38): the agent plants every way git has of
//! running a program — hooks, `core.hooksPath`, `core.fsmonitor`, filter / diff /
//! merge drivers through `.gitattributes`, `include.path` / `includeIf`,
//! `core.sshCommand`, credential helpers, editors, pagers, alternates,
//! `core.worktree`, a `.git` that is a `gitdir:` file or a symbolic link — and
//! the user runs every verb that touches git or the workspace: promote with each
//! strategy, rebase, merge, checkout, restore, the git-commit trigger, a sweep.
//! No marker may be written by any process, and the user's repository changes
//! only by the promotes. Plus the environment canary: the daemon starts with a
//! secret variable and an inheritable descriptor, and no child it runs sees
//! either.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{AGENT_UID, Agent};
use crate::harness::{Mount, bin, daemon_log, git, tf, tf_ok, write_synced};
use crate::lifecycle::git_repo;

/// Every hook name git knows.
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// Where markers land: a directory every uid can write (a hook of any uid
/// could leave its mark).
struct Marks(tempfile::TempDir);

impl Marks {
    fn new() -> Marks {
        let d = tempfile::Builder::new()
            .prefix("tf-marks-")
            .tempdir()
            .unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        Marks(d)
    }

    /// A script that leaves marker `name` (the uid and the arguments it ran
    /// with), then makes itself a nuisance: 100 MB on stderr and a long sleep
    /// (what held the op lock and the daemon's memory in defect 3).
    fn script(&self, name: &str) -> String {
        format!(
            "#!/bin/sh\necho \"uid=$(id -u) gid=$(id -g) $0 $*\" >> '{}/{name}'\n\
             env >> '{}/{name}.env'\nhead -c 100000000 /dev/zero >&2\nsleep 30\n",
            self.0.path().display(),
            self.0.path().display()
        )
    }

    fn assert_none(&self, what: &str) {
        let found: Vec<String> = fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                format!(
                    "{}: {}",
                    e.file_name().to_string_lossy(),
                    fs::read_to_string(e.path()).unwrap_or_default()
                )
            })
            .collect();
        assert!(
            found.is_empty(),
            "{what}: a planted program ran: {found:#?}"
        );
    }
}

/// Write an executable script `path` (as root; made the agent's).
fn put_script(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(path, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
}

/// A session mounted from a fresh repository for the agent, the workspace all
/// the agent's (as after `chown -R`), and the repository's path.
fn agent_from_repo() -> (Agent, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = git_repo(dir.path());
    let a = Agent::with_options(&["--from", repo.to_str().unwrap()]);
    let o = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&a.m.mp)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (a, dir, repo)
}

/// Plant every vector in the workspace's `.git` (as the agent, in its own
/// workspace), the scripts in the agent's home.
fn plant(a: &Agent, marks: &Marks) {
    let home = &a.home;
    for h in HOOKS {
        put_script(
            &home.join("hooks").join(h),
            &marks.script(&format!("hook-{h}")),
        );
        put_script(
            &home.join("hooks2").join(h),
            &marks.script(&format!("hookspath-{h}")),
        );
    }
    for s in [
        "fsmonitor",
        "clean",
        "smudge",
        "process",
        "textconv",
        "diffext",
        "mergedrv",
        "ssh",
        "altrefs",
        "askpass",
        "cred",
        "editor",
        "pager",
        "gpg",
        "packhook",
        "incl",
    ] {
        put_script(&home.join(format!("bin/{s}")), &marks.script(s));
    }
    let b = |s: &str| home.join("bin").join(s).display().to_string();
    fs::write(
        home.join("extra.cfg"),
        format!(
            "[core]\n\tfsmonitor = {}\n\tpager = {}\n",
            b("incl"),
            b("incl")
        ),
    )
    .unwrap();
    // An alternate object directory of the agent's.
    let alt = home.join("alt");
    git(
        &home.clone(),
        &["init", "-q", "--bare", alt.to_str().unwrap()],
    );
    Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(home)
        .status()
        .unwrap();
    let cfg: Vec<(String, String)> = [
        ("core.hooksPath", home.join("hooks2").display().to_string()),
        ("core.fsmonitor", b("fsmonitor")),
        ("filter.evil.clean", b("clean")),
        ("filter.evil.smudge", b("smudge")),
        ("filter.evil.process", b("process")),
        ("filter.evil.required", "true".into()),
        ("diff.evil.textconv", b("textconv")),
        ("diff.external", b("diffext")),
        ("merge.evil.driver", b("mergedrv")),
        ("core.sshCommand", b("ssh")),
        ("core.alternateRefsCommand", b("altrefs")),
        ("core.askPass", b("askpass")),
        ("credential.helper", format!("!{}", b("cred"))),
        ("core.editor", b("editor")),
        ("sequence.editor", b("editor")),
        ("core.pager", b("pager")),
        ("gpg.program", b("gpg")),
        ("commit.gpgSign", "true".into()),
        ("uploadpack.packObjectsHook", b("packhook")),
        ("gc.auto", "1".into()),
        ("include.path", home.join("extra.cfg").display().to_string()),
        (
            "includeIf.gitdir:/.path",
            home.join("extra.cfg").display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut script = String::from("set -e\n");
    for h in HOOKS {
        script.push_str(&format!(
            "cp '{}' .git/hooks/{h}; chmod 755 .git/hooks/{h}\n",
            home.join("hooks").join(h).display()
        ));
    }
    for (k, v) in &cfg {
        script.push_str(&format!("git config --file .git/config '{k}' '{v}'\n"));
    }
    script.push_str(&format!(
        "mkdir -p .git/objects/info\necho '{}/objects' > .git/objects/info/alternates\n\
         printf '* filter=evil diff=evil merge=evil\\n' > .gitattributes\n",
        alt.display()
    ));
    a.sh_ok(&script);
}

/// The user's repository: every ref, its config and its hooks directory.
fn repo_refs(repo: &Path) -> Vec<String> {
    git(repo, &["for-each-ref", "--format=%(refname)"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn user(a: &Agent, args: &[&str]) -> std::process::Output {
    let mut full = vec!["-C", a.m.mp.to_str().unwrap()];
    full.extend_from_slice(args);
    tf(&a.m.store, &full)
}

fn user_ok(a: &Agent, args: &[&str]) -> String {
    let o = user(a, args);
    assert!(
        o.status.success(),
        "treefork {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&a.m.store)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every user verb that touches git or the workspace, on a poisoned `.git`: no
/// planted program runs, the workspace's repository still takes the promote
/// commit in (written through the session), and the user's repository changes
/// only by the promotes.
#[test]
fn no_planted_program_runs_whatever_the_user_does() {
    let (a, _dir, repo) = agent_from_repo();
    let marks = Marks::new();
    plant(&a, &marks);
    let config_before = fs::read(repo.join(".git/config")).unwrap();
    a.sh_ok("echo one > work.txt && echo mine > README");
    let c0 = user_ok(&a, &["checkpoint", "-m", "c0"]);
    assert!(!c0.is_empty());

    // promote --strategy commit: the workspace's git takes the commit in.
    let t = Instant::now();
    let out = user_ok(
        &a,
        &["promote", a.m.p("work.txt").to_str().unwrap(), "-m", "p1"],
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "promote took {:?}",
        t.elapsed()
    );
    assert!(out.contains("now names the promote commit"), "{out}");
    let head = git(&repo, &["rev-parse", "main"]);
    let ws_ref = fs::read_to_string(a.m.p(".git/refs/heads/main")).unwrap();
    assert_eq!(
        ws_ref.trim(),
        head,
        "the workspace's branch names the promote commit"
    );
    marks.assert_none("promote (commit)");
    // The user's status and log answer at once meanwhile and after.
    a.assert_daemon_answers();

    // The other strategies.
    a.sh_ok("echo two > other.txt");
    let out = user_ok(
        &a,
        &[
            "promote",
            a.m.p("other.txt").to_str().unwrap(),
            "--strategy",
            "branch",
            "--branch",
            "side",
            "-m",
            "p2",
        ],
    );
    assert!(!out.is_empty());
    let patch = a.m.tmp.path().join("p.patch");
    user_ok(
        &a,
        &[
            "promote",
            a.m.p("README").to_str().unwrap(),
            "--strategy",
            "patch",
            "-o",
            patch.to_str().unwrap(),
        ],
    );
    marks.assert_none("promote (branch, patch)");

    // The durable repository moves; rebase onto it.
    fs::write(repo.join("NEWS"), "upstream\n").unwrap();
    git(&repo, &["add", "NEWS"]);
    git(&repo, &["commit", "-qm", "upstream"]);
    user_ok(&a, &["rebase"]);
    marks.assert_none("rebase");

    // Merge, checkout, restore, undo.
    let o = user(&a, &["merge", "--dry-run", "HEAD~1"]);
    assert!(o.status.code().is_some());
    user_ok(&a, &["checkpoint", "-m", "c1"]);
    user_ok(
        &a,
        &["restore", "HEAD~1", a.m.p("work.txt").to_str().unwrap()],
    );
    user_ok(&a, &["undo"]);
    user_ok(&a, &["checkout", "HEAD~1"]);
    marks.assert_none("merge, checkout, restore, undo");

    // The git-commit trigger: the agent moves its HEAD's branch.
    a.sh_ok("cp .git/refs/heads/main .git/refs/heads/x && echo 'ref: refs/heads/x' > .git/HEAD");
    std::thread::sleep(Duration::from_millis(1500));
    tf_ok(&a.m.store, &["session", "sweep"]);
    marks.assert_none("the git-commit trigger and a sweep");

    // The user's repository: only the promotes' refs, its own config.
    let refs = repo_refs(&repo);
    assert_eq!(refs, ["refs/heads/main", "refs/heads/side"], "{refs:?}");
    assert_eq!(fs::read(repo.join(".git/config")).unwrap(), config_before);
    git(&repo, &["fsck", "--no-progress"]);
    a.assert_daemon_answers();
}

/// A `.git` that is a `gitdir:` file or a symbolic link to a repository of the
/// agent's (hooks and fsmonitor planted there): promote leaves it alone and
/// says so; nothing runs.
#[test]
fn a_git_file_or_link_elsewhere_is_left_alone() {
    let (a, _dir, repo) = agent_from_repo();
    let marks = Marks::new();
    let evil = a.home.join("evil.git");
    git(&a.home, &["init", "-q", "--bare", evil.to_str().unwrap()]);
    for h in HOOKS {
        put_script(
            &evil.join("hooks").join(h),
            &marks.script(&format!("evil-{h}")),
        );
    }
    put_script(&a.home.join("fsmon"), &marks.script("evil-fsmonitor"));
    git(
        &evil,
        &[
            "config",
            "core.fsmonitor",
            a.home.join("fsmon").to_str().unwrap(),
        ],
    );
    Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&a.home)
        .status()
        .unwrap();
    for (i, how) in ["file", "link"].iter().enumerate() {
        let plant = match *how {
            "file" => format!("rm -rf .git && echo 'gitdir: {}' > .git", evil.display()),
            _ => format!("rm -rf .git && ln -s '{}' .git", evil.display()),
        };
        a.sh_ok(&plant);
        a.sh_ok(&format!("echo {i} > work{i}.txt"));
        let out = user_ok(
            &a,
            &[
                "promote",
                a.m.p(&format!("work{i}.txt")).to_str().unwrap(),
                "-m",
                how,
            ],
        );
        assert!(out.contains("not a directory"), "{how}: {out}");
        marks.assert_none(how);
    }
    assert_eq!(repo_refs(&repo), ["refs/heads/main"]);
}

/// The canary: a daemon started with a secret in its environment (and the test
/// S3 secret, as the README's remote set-up does) and an inheritable descriptor
/// runs git with neither. A `git` of ours first on PATH records what every git
/// the daemon runs was given.
#[test]
fn no_child_of_the_daemon_sees_its_secrets_or_descriptors() {
    let tmp = tempfile::Builder::new()
        .prefix("tf-canary-")
        .tempdir()
        .unwrap();
    let repo = git_repo(tmp.path());
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();
    let seen = tmp.path().join("seen");
    fs::create_dir(&seen).unwrap();
    let wrap = tmp.path().join("wrap");
    let real_git = crate::harness::real_git();
    put_script(
        &wrap.join("git"),
        &format!(
            "#!/bin/sh\nenv > \"{s}/env.$$\"\nls /proc/self/fd > \"{s}/fd.$$\"\nexec '{g}' \"$@\"\n",
            s = seen.display(),
            g = real_git.trim()
        ),
    );
    fs::set_permissions(&seen, fs::Permissions::from_mode(0o1777)).unwrap();
    let path = format!(
        "{}:{}",
        wrap.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The first mount starts the daemon: fds 7 and 8 open without close-on-exec.
    let o = Command::new("/bin/sh")
        .arg("-c")
        .arg("exec 7</dev/null 8>>\"$SEEN/held\"; exec \"$TF\" --store \"$STORE\" mount \"$MP\" --session s --from \"$REPO\"")
        .env("SEEN", &seen)
        .env("TF", bin())
        .env("STORE", &store)
        .env("MP", &mp)
        .env("REPO", &repo)
        .env("PATH", &path)
        .env("TREEFORK_CANARY_SECRET", "canary-7f3e91")
        .envs(crate::harness::TEST_AWS_ENV.iter().copied())
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = Mount::at(tmp, store, mp, "s");
    write_synced(&m.p("work.txt"), b"canary\n");
    let p = m.p("work.txt");
    tf_ok(
        &m.store,
        &[
            "-C",
            m.mp.to_str().unwrap(),
            "promote",
            p.to_str().unwrap(),
            "-m",
            "c",
        ],
    );
    let mut runs = 0;
    for e in fs::read_dir(&seen).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let text = fs::read_to_string(e.path()).unwrap();
        if name.starts_with("env.") {
            runs += 1;
            assert!(
                !text.contains("canary-7f3e91"),
                "a child saw the canary: {text}"
            );
            assert!(
                !text.contains("tf-test-secret"),
                "a child saw the S3 secret: {text}"
            );
            assert!(!text.contains("AWS_"), "{text}");
        } else if name.starts_with("fd.") {
            let fds: Vec<&str> = text.split_whitespace().collect();
            // 0, 1, 2 and the one `ls` opened to list the directory.
            assert!(
                fds.iter().all(|f| ["0", "1", "2", "3"].contains(f)),
                "{name}: {fds:?}"
            );
        }
    }
    let names: Vec<String> = fs::read_dir(&seen)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        runs >= 3,
        "the daemon ran git through the wrapper ({runs} runs): {names:?}\n{}",
        daemon_log(&m.store)
    );
}
