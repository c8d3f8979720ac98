//! `status` and `diff` follow the workspace's ignore files (root and nested
//! `.gitignore`, negation, directory patterns, `.git/info/exclude`), `--ignored`
//! lists ignored paths too (marked), `.git` never appears, and `diff` takes paths
//! (issue 39, item 5).

use std::path::Path;
use std::process::Command;

use crate::harness::*;

/// A session whose checkpoint holds the ignore files, then an `npm install`-like
/// tree of ignored and kept paths, and a real `git init`.
fn project() -> Mount {
    let m = Mount::new();
    sh(
        &m.mp,
        "printf 'node_modules/\\n*.log\\n!keep.log\\n' > .gitignore
         mkdir -p pkg && printf '!important.log\\ngen/\\n' > pkg/.gitignore
         echo one > pkg/lib.js",
    );
    ws_ok(&m, &["checkpoint", "-m", "ignore files"]);
    sh(
        &m.mp,
        "git init -q .
         mkdir -p .git/info && echo 'secret.txt' >> .git/info/exclude
         mkdir -p node_modules/a node_modules/b/c src pkg/gen
         echo x > node_modules/a/index.js; echo y > node_modules/b/c/x.js
         echo d > debug.log; echo k > keep.log; echo s > secret.txt
         echo i > pkg/important.log; echo o > pkg/other.log; echo g > pkg/gen/out.js
         echo two >> pkg/lib.js; echo m > src/main.js",
    );
    m
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

/// `treefork` with the current directory `dir` (inside the mount).
fn tf_in(m: &Mount, dir: &Path, args: &[&str]) -> String {
    let o = Command::new(bin())
        .arg("--store")
        .arg(&m.store)
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "treefork {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const KEPT: [&str; 5] = [
    "A keep.log",
    "A pkg/important.log",
    "M pkg/lib.js",
    "A src",
    "A src/main.js",
];

#[test]
fn status_and_diff_leave_ignored_paths_out() {
    let m = project();
    assert_eq!(lines(&ws_ok(&m, &["status"])), KEPT);
    let stat = ws_ok(&m, &["diff", "--stat"]);
    assert!(
        stat.ends_with(" 5 paths changed, 4 insertions(+), 0 deletions(-)\n"),
        "{stat}"
    );
    for gone in [
        "node_modules",
        "debug.log",
        "other.log",
        "gen",
        "secret",
        ".git",
    ] {
        assert!(!stat.contains(gone), "{gone} in\n{stat}");
    }
    let base = ws_ok(&m, &["diff", "baseline", "--name-status"]);
    assert!(
        base.contains("A\t.gitignore\n") && base.contains("A\tsrc/main.js\n"),
        "{base}"
    );
    assert!(
        !base.contains("node_modules") && !base.contains(".git/"),
        "{base}"
    );
    // The JSON answer carries no `ignored` field unless asked.
    let j: serde_json::Value = serde_json::from_str(&ws_ok(&m, &["--json", "status"])).unwrap();
    let changes = j["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 5, "{j}");
    assert!(changes.iter().all(|c| c.get("ignored").is_none()), "{j}");
    // Deleting an ignored tree is not a change to show either.
    ws_ok(&m, &["checkpoint", "-m", "installed"]);
    sh(&m.mp, "rm -rf node_modules debug.log pkg/gen");
    assert_eq!(ws_ok(&m, &["status"]), "");
    assert!(ws_ok(&m, &["diff"]).is_empty());
}

#[test]
fn ignored_lists_them_marked_but_never_git() {
    let m = project();
    let all = lines(&ws_ok(&m, &["status", "--ignored"]));
    for want in [
        "A debug.log (ignored)",
        "A node_modules (ignored)",
        "A node_modules/b/c/x.js (ignored)",
        "A pkg/gen (ignored)",
        "A pkg/gen/out.js (ignored)",
        "A pkg/other.log (ignored)",
        "A secret.txt (ignored)",
    ]
    .iter()
    .chain(KEPT.iter())
    {
        assert!(all.iter().any(|l| l == want), "{want} not in {all:#?}");
    }
    assert_eq!(all.len(), 7 + KEPT.len() + 4, "{all:#?}"); // + node_modules/{a,a/index.js,b,b/c}
    assert!(
        all.iter()
            .all(|l| !l.contains(".git/") && l != "A .git (ignored)"),
        "{all:#?}"
    );
    let d = ws_ok(&m, &["diff", "--ignored", "--name-status"]);
    assert!(d.contains("A\tnode_modules/a/index.js (ignored)\n"), "{d}");
    assert!(d.contains("A\tsrc/main.js\n") && !d.contains(".git"), "{d}");
    let j: serde_json::Value =
        serde_json::from_str(&ws_ok(&m, &["--json", "diff", "--ignored"])).unwrap();
    let e = j["entries"].as_array().unwrap();
    let by = |p: &str| e.iter().find(|x| x["path"] == p).cloned().unwrap();
    assert_eq!(by("debug.log")["ignored"], true, "{j}");
    assert!(by("keep.log").get("ignored").is_none(), "{j}");
}

#[test]
fn diff_takes_paths() {
    let m = project();
    let d = ws_ok(&m, &["diff", "--name-status", "--", "pkg", "src/main.js"]);
    assert_eq!(d, "A\tpkg/important.log\nM\tpkg/lib.js\nA\tsrc/main.js\n");
    // Without `--`: an existing path is a path; refs come first.
    let d = ws_ok(&m, &["diff", "HEAD", "--name-status", "src"]);
    assert_eq!(d, "A\tsrc\nA\tsrc/main.js\n");
    // Relative to the current directory inside the mount, like git.
    let d = tf_in(&m, &m.p("pkg"), &["diff", "--name-status", "lib.js"]);
    assert_eq!(d, "M\tpkg/lib.js\n");
    let d = tf_in(&m, &m.p("pkg"), &["diff", "--stat", "--", "."]);
    assert!(
        d.contains(" pkg/lib.js | 1 +\n") && !d.contains("src"),
        "{d}"
    );
    let p = tf_in(&m, &m.p("src"), &["diff", "-p", "--", "../pkg/lib.js"]);
    assert!(
        p.starts_with("diff --treefork a/pkg/lib.js b/pkg/lib.js\n") && p.contains("+two\n"),
        "{p}"
    );
    assert!(!p.contains("main.js"), "{p}");
    // An ignored path named explicitly is still left out unless --ignored.
    assert_eq!(ws_ok(&m, &["diff", "--", "node_modules"]), "");
    let d = ws_ok(&m, &["diff", "--ignored", "--", "node_modules/a"]);
    assert_eq!(
        d,
        "A\tnode_modules/a (ignored)\nA\tnode_modules/a/index.js (ignored)\n"
    );
    // A missing path after a path is a usage error, not a ref.
    let o = ws(&m, &["diff", "src", "nope"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nope: no such file or directory"), "{err}");
    let o = ws(&m, &["diff", "--", "../outside"]);
    assert!(
        !o.status.success(),
        "a path outside the workspace is refused"
    );
}
