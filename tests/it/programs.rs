//! Real programs working inside a mount: git, sqlite (WAL), tar, cargo.

use std::fs;
use std::path::Path;

use crate::harness::{Mount, pattern, sh};

/// Whether `tool` is on PATH; prints a skip message if not.
fn have(tool: &str) -> bool {
    let ok = std::process::Command::new("which")
        .arg(tool)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    // A test whose tool is missing fails: it never passes without running.
    assert!(ok, "this test needs {tool}, which is not installed");
    ok
}

const GIT_ENV: &str = "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; \
    G='git -c user.name=Test -c user.email=test@example.com -c init.defaultBranch=main'";

#[test]
fn git_repository() {
    assert!(have("git"));
    let m = Mount::new();
    sh(
        &m.mp,
        &format!(
            "{GIT_ENV}
            $G init -q repo
            cd repo
            for d in alpha beta gamma delta; do
                mkdir -p $d/nested/deeper
                for i in $(seq 1 100); do
                    echo \"file $d $i\" > $d/f$i.txt
                    printf 'nested %s %s\\n%0500d\\n' $d $i $i > $d/nested/n$i.txt
                done
                for i in $(seq 1 50); do
                    echo \"deep $d $i\" > $d/nested/deeper/d$i.txt
                done
            done
            test $(find . -path ./.git -prune -o -type f -print | wc -l) -eq 1000
            $G add -A
            $G commit -q -m initial"
        ),
    );
    let repo = m.p("repo");
    let status = sh(&repo, &format!("{GIT_ENV}; $G status --porcelain"));
    assert_eq!(status, "", "git status after commit");
    sh(&repo, &format!("{GIT_ENV}; $G gc -q; $G fsck --full"));
    let status = sh(&repo, &format!("{GIT_ENV}; $G status --porcelain"));
    assert_eq!(status, "", "git status after gc");
    let files = sh(&repo, &format!("{GIT_ENV}; $G ls-files | wc -l"));
    assert_eq!(files.trim(), "1000");

    m.remount();
    let status = sh(&repo, &format!("{GIT_ENV}; $G status --porcelain"));
    assert_eq!(status, "", "git status after remount");
    let log = sh(&repo, &format!("{GIT_ENV}; $G log --oneline | wc -l"));
    assert_eq!(log.trim(), "1", "commits after remount");
    sh(&repo, &format!("{GIT_ENV}; $G fsck --full"));
}

const SQLITE_CHECK: &str = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("PRAGMA journal_mode").fetchone()[0])
print(db.execute("PRAGMA integrity_check").fetchone()[0])
print(db.execute("SELECT count(*) FROM t").fetchone()[0])
print(db.execute("SELECT sum(id), sum(length(v)) FROM t").fetchone())
db.close()
"#;

#[test]
fn sqlite_wal() {
    assert!(have("python3"));
    let probe = std::process::Command::new("python3")
        .args(["-c", "import sqlite3"])
        .output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test needs python3's sqlite3 module"
    );
    let m = Mount::new();
    let create = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("PRAGMA journal_mode=WAL").fetchone()[0])
db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
db.commit()
for t in range(10):
    with db:
        db.executemany("INSERT INTO t(v) VALUES (?)",
                       [("row %d %s" % (t * 1000 + i, "x" * (i % 200)),) for i in range(1000)])
db.close()
"#;
    let out = sh(&m.mp, &format!("python3 -c '{create}' db.sqlite"));
    assert_eq!(out, "wal\n");
    let len_sum: usize = (0..10)
        .flat_map(|t| {
            (0..1000).map(move |i| format!("row {} {}", t * 1000 + i, "x".repeat(i % 200)).len())
        })
        .sum();
    let want = format!("wal\nok\n10000\n(50005000, {len_sum})\n");
    let check = |when: &str| {
        let got = sh(&m.mp, &format!("python3 -c '{SQLITE_CHECK}' db.sqlite"));
        assert_eq!(got, want, "sqlite check {when}");
    };
    check("before remount");
    m.remount();
    check("after remount");
}

/// Build a varied source tree of more than 5,000 files under `root`.
fn make_tree(root: &Path) -> usize {
    let sizes = [
        0usize, 1, 17, 100, 511, 512, 513, 1000, 4095, 4096, 4097, 12345, 0, 3,
    ];
    let mut files = 0;
    for a in 0..12 {
        for b in 0..6 {
            let dir = root.join(format!("dir{a:02}/sub{b}/leaf"));
            fs::create_dir_all(&dir).unwrap();
            for i in 0..72 {
                let n = files;
                let size = if n % 997 == 0 {
                    65_537
                } else {
                    sizes[n % sizes.len()]
                };
                let target = if i % 2 == 0 {
                    dir.clone()
                } else {
                    dir.parent().unwrap().to_path_buf()
                };
                fs::write(
                    target.join(format!("file{i:03}.dat")),
                    pattern(size, n as u64),
                )
                .unwrap();
                files += 1;
            }
            std::os::unix::fs::symlink("file000.dat", dir.join("link-to-file")).unwrap();
            std::os::unix::fs::symlink("../../../nowhere", dir.join("dangling")).unwrap();
        }
        fs::create_dir_all(root.join(format!("dir{a:02}/empty-dir"))).unwrap();
    }
    for i in 0..5 {
        fs::write(
            root.join(format!("big{i}.bin")),
            pattern(200 * 1024, 1000 + i),
        )
        .unwrap();
        files += 1;
    }
    std::os::unix::fs::symlink("dir00/sub0", root.join("dirlink")).unwrap();
    files
}

/// Checksums of all regular files, plus a listing of names, types, modes, sizes and
/// symlink targets (directory sizes excluded: they are filesystem-specific).
fn tree_digest(dir: &Path) -> (String, String) {
    let sums = sh(dir, "find . -type f -print0 | sort -z | xargs -0 sha256sum");
    let listing = sh(
        dir,
        "find . \\( -type d -printf 'd %m %p\\n' \\) -o \\( -type f -printf 'f %m %s %p\\n' \\) \
         -o \\( -type l -printf 'l %p -> %l\\n' \\) | LC_ALL=C sort",
    );
    (sums, listing)
}

#[test]
fn tar_round_trip() {
    assert!(have("tar") && have("sha256sum"));
    let src_tmp = tempfile::Builder::new()
        .prefix("tf-tar-src-")
        .tempdir()
        .unwrap();
    let src = src_tmp.path().join("tree");
    fs::create_dir(&src).unwrap();
    let n = make_tree(&src);
    assert!(n > 5000, "source tree has only {n} files");
    let tarball = src_tmp.path().join("tree.tar");
    sh(
        src_tmp.path(),
        &format!("tar cf {} -C tree .", tarball.display()),
    );
    let want = tree_digest(&src);
    assert_eq!(want.0.lines().count(), n);

    let m = Mount::new();
    fs::create_dir(m.p("x")).unwrap();
    sh(&m.mp, &format!("tar xf {} -C x", tarball.display()));
    let got = tree_digest(&m.p("x"));
    assert!(got.0 == want.0, "sha256 listing differs after extract");
    assert!(got.1 == want.1, "tree listing differs after extract");
    m.remount();
    let got = tree_digest(&m.p("x"));
    assert!(got.0 == want.0, "sha256 listing differs after remount");
    assert!(got.1 == want.1, "tree listing differs after remount");
}

#[test]
fn cargo_build_hello() {
    assert!(have("cargo"));
    let m = Mount::new();
    sh(&m.mp, "cargo new --vcs none -q hello");
    let out = sh(
        &m.p("hello"),
        &format!(
            "export CARGO_TARGET_DIR={}; cargo build --offline -q; \"$CARGO_TARGET_DIR/debug/hello\"",
            m.p("target").display()
        ),
    );
    assert_eq!(out, "Hello, world!\n");
    assert!(m.p("target/debug/hello").is_file());
}
