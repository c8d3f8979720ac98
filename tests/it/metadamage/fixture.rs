//! The fixture store, built once per test run (the expensive part) and copied
//! (`cp -a`) by each variant; removed at process exit.
//!
//! Built through the CLI on real mounts: session `s1` (files, a symlink, named
//! checkpoints, two execs — one printing ~340 KB — messages, branch
//! `feature-x`), session `s2` (files, a checkpoint, an exec, a message, branch
//! `s2-line`), fork `f1` of `s1` (its own file, checkpoint and message), remote
//! `origin` on a real S3 server with `s1` and `feature-x` pushed. Then, store
//! offline, `meta/` is copied aside (for the rolled-back variant g), and more
//! happens: an exec, messages, a checkpoint, a branch `late`, and a last change
//! written and fsync'd but not checkpointed. Finally the facts are recorded.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::facts::{self, Facts};
use crate::harness::{pattern, sh, tf, tf_ok, umount_ok, wait_daemon_gone, write_synced};
use crate::remote::S3Server;

/// The sessions of the fixture.
pub const SESSIONS: [&str; 3] = ["s1", "s2", "f1"];

/// A text the big exec prints: 20000 numbered lines (340000 bytes).
pub const BIG_OUTPUT_CMD: &str = "seq -f 'out-line-%07g' 1 20000";

/// One line of the big exec's output (to find its journal record).
pub const BIG_OUTPUT_PROBE: &[u8] = b"out-line-0012345\nout-line-0012346\n";

/// The built fixture.
pub struct Fixture {
    /// The store (offline, every session unmounted, the daemon gone).
    pub store: PathBuf,
    /// `meta/` as it was before the fixture's last steps (variant g).
    pub rollback_meta: PathBuf,
    /// Everything the CLI showed of the finished store.
    pub facts: Facts,
    /// The session, exec number and operation number of the big output.
    pub big_exec: (String, u64, u64),
    /// The tracking refs the facts resolve (`origin/NAME`; empty without S3).
    pub tracking: Vec<String>,
}

static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
static DIR: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_dir() {
    if let Some(d) = DIR.get() {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The fixture (built by the first caller; the others wait for it).
pub fn get() -> &'static Fixture {
    let r = FIXTURE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("tf-dmg-fixture-")
            .tempdir()
            .unwrap()
            .keep();
        DIR.set(dir.clone()).unwrap();
        // SAFETY: registers a plain function without arguments.
        unsafe { libc::atexit(remove_dir) };
        std::panic::catch_unwind(|| build(&dir)).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match r {
        Ok(f) => f,
        Err(e) => panic!("building the fixture failed: {e}"),
    }
}

/// `treefork -C MP ARGS` requiring success.
pub fn at(store: &Path, mp: &Path, args: &[&str]) -> String {
    let mut a = vec!["-C", mp.to_str().unwrap()];
    a.extend_from_slice(args);
    tf_ok(store, &a)
}

fn mount(store: &Path, mp: &Path, session: &str) {
    std::fs::create_dir_all(mp).unwrap();
    tf_ok(
        store,
        &["mount", mp.to_str().unwrap(), "--session", session],
    );
}

fn exec(store: &Path, mp: &Path, script: &str) -> serde_json::Value {
    let o = tf(
        store,
        &["-C", mp.to_str().unwrap(), "exec", "--", "sh", "-c", script],
    );
    assert!(
        o.status.success(),
        "exec {script:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let h = at(store, mp, &["--json", "history", "-n", "1"]);
    let h: serde_json::Value = serde_json::from_str(&h).unwrap();
    h["execs"][0].clone()
}

fn message(store: &Path, mp: &Path, role: &str, content: &str) {
    at(
        store,
        mp,
        &["messages", "append", "--role", role, "--content", content],
    );
}

fn build(dir: &Path) -> Fixture {
    let store = dir.join("store");
    let tmp = tempfile::Builder::new()
        .prefix("build-")
        .tempdir_in(dir)
        .unwrap();
    let mnt = tmp.path().to_path_buf();
    // Unmounts whatever a failing build leaves mounted under the scratch dir.
    let guard = crate::harness::Mount::at(tmp, store.clone(), mnt.join("s1"), "s1");
    let (mp1, mp2, mpf) = (mnt.join("s1"), mnt.join("s2"), mnt.join("f1"));

    // s1: a tree, a named checkpoint, execs (one with a big output), messages.
    mount(&store, &mp1, "s1");
    for i in 0..40u64 {
        let body = format!("s1 file {i}\n").repeat(1 + i as usize * 3);
        write_synced(
            &mp1.join(format!("src/m{}/f{i:02}.txt", i % 4)),
            body.as_bytes(),
        );
    }
    for i in 0..6u64 {
        write_synced(
            &mp1.join(format!("data/b{i}.bin")),
            &pattern(80_000, 100 + i),
        );
    }
    std::os::unix::fs::symlink("src/m0/f00.txt", mp1.join("link")).unwrap();
    std::fs::create_dir_all(mp1.join("empty")).unwrap();
    at(&store, &mp1, &["checkpoint", "-m", "s1: base tree"]);
    exec(&store, &mp1, "echo generated > gen.txt; rm src/m3/f03.txt");
    let big = exec(&store, &mp1, BIG_OUTPUT_CMD);
    assert!(big["stdout_bytes"].as_u64().unwrap() >= 300_000, "{big}");
    let big_n = big["n"].as_u64().unwrap();
    let big_seq = big["seq"].as_u64().unwrap();
    message(&store, &mp1, "user", r#""please build the thing""#);
    message(
        &store,
        &mp1,
        "assistant",
        r#"{"text":"built","tools":["exec","exec"]}"#,
    );
    at(&store, &mp1, &["messages", "flush"]);
    write_synced(&mp1.join("notes.md"), b"# notes\nafter the execs\n");
    at(&store, &mp1, &["checkpoint", "-m", "s1: after the execs"]);
    at(&store, &mp1, &["branch", "feature-x"]);

    // s2: its own tree, checkpoint, exec, message and branch.
    mount(&store, &mp2, "s2");
    for i in 0..20u64 {
        write_synced(
            &mp2.join(format!("lib/g{i:02}.rs")),
            &pattern(3_000 + i as usize * 500, 200 + i),
        );
    }
    at(&store, &mp2, &["checkpoint", "-m", "s2: first"]);
    exec(&store, &mp2, "echo s2 > s2.txt; echo to-stderr >&2");
    message(&store, &mp2, "user", r#""s2 question""#);
    at(&store, &mp2, &["messages", "flush"]);
    at(&store, &mp2, &["branch", "s2-line"]);

    // f1: a fork of s1 with work of its own.
    at(
        &store,
        &mp1,
        &["fork", "f1", "--mount", mpf.to_str().unwrap()],
    );
    write_synced(&mpf.join("fork-only.txt"), b"only in the fork\n");
    at(&store, &mpf, &["checkpoint", "-m", "f1: own work"]);
    message(&store, &mpf, "user", r#""fork question""#);
    at(&store, &mpf, &["messages", "flush"]);

    // A remote on a real S3 server: s1 and feature-x pushed (the server is
    // needed only here: tracking refs are read locally afterwards).
    let mut tracking = Vec::new();
    if let Some(s3) = S3Server::start_or_skip() {
        tf_ok(
            &store,
            &[
                "remote",
                "add",
                "origin",
                &s3.url("dmg"),
                "--endpoint",
                &s3.endpoint,
            ],
        );
        at(&store, &mp1, &["push", "origin"]);
        at(&store, &mp1, &["push", "origin", "feature-x"]);
        tracking = vec!["origin/s1".to_string(), "origin/feature-x".to_string()];
        drop(s3);
    }

    // Offline: the copy of meta/ variant g restores.
    for mp in [&mpf, &mp2, &mp1] {
        umount_ok(&store, mp);
    }
    wait_daemon_gone(&store);
    let rollback_meta = dir.join("meta.rollback");
    sh(
        dir,
        &format!(
            "cp -a {} {}",
            store.join("meta").display(),
            rollback_meta.display()
        ),
    );

    // The last steps: what only the journal holds in variant g.
    mount(&store, &mp1, "s1");
    mount(&store, &mp2, "s2");
    exec(&store, &mp1, "echo late > late.txt");
    message(&store, &mp1, "user", r#""one more thing""#);
    at(&store, &mp1, &["messages", "flush"]);
    at(&store, &mp1, &["checkpoint", "-m", "s1: late"]);
    at(&store, &mp1, &["branch", "late"]);
    message(&store, &mp2, "assistant", r#""s2 answer""#);
    at(&store, &mp2, &["messages", "flush"]);
    // Flushed, not checkpointed.
    write_synced(
        &mp1.join("flushed-only.txt"),
        b"flushed, never checkpointed\n",
    );
    write_synced(
        &mp1.join("src/m1/f01.txt"),
        b"rewritten after the last checkpoint\n",
    );
    sh(dir, "sync");
    umount_ok(&store, &mp2);
    umount_ok(&store, &mp1);
    wait_daemon_gone(&store);
    drop(guard);

    let scratch = tempfile::Builder::new()
        .prefix("facts-")
        .tempdir_in(dir)
        .unwrap();
    let facts = facts::record(&store, scratch.path(), &SESSIONS, &tracking);
    // Sanity: the fixture holds what the variants check.
    for k in [
        "s1/files",
        "s1/log",
        "s1/op log",
        "s1/messages",
        "s1/branches",
        "f1/files",
        "s2/history",
    ] {
        assert!(
            facts[k].is_object() || facts[k].is_array(),
            "fixture fact {k}: {}",
            facts[k]
        );
    }
    assert!(facts["s1/files"]["flushed-only.txt"].is_string());
    assert!(facts["f1/files"]["fork-only.txt"].is_string());
    for t in &tracking {
        assert!(
            facts[&format!("show {t}")].is_object(),
            "{}",
            facts[&format!("show {t}")]
        );
    }
    Fixture {
        store,
        rollback_meta,
        facts,
        big_exec: ("s1".into(), big_n, big_seq),
        tracking,
    }
}
