//! Defect 3 of issue 21: memory and disk exhaustion through the conversation log
//! and forks, and the store's quotas (`treefork limits`).
//!
//! Every attack runs as uid 65534 on the agent socket; each asserts the bound
//! held, what was stored before is intact and the daemon still answers.

use std::fs;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::Agent;
use crate::harness::{daemon_log, tf_ok};

/// Exit status of a `quota` refusal (`cli::failure::QUOTA`).
const QUOTA_STATUS: i32 = 10;
/// Exit status of a `forbidden` refusal.
const FORBIDDEN_STATUS: i32 = 6;

/// Write `n` messages of `size` bytes of content each as JSONL into the agent's
/// home (readable by it); the file's path.
fn conversation_file(a: &Agent, n: usize, size: usize) -> String {
    let p = a.home.join(format!("conv-{n}-{size}.jsonl"));
    let mut text = String::new();
    for i in 0..n {
        let body = format!("{i:06}{}", "x".repeat(size - 6));
        text.push_str(&json!({"role": "user", "content": body}).to_string());
        text.push('\n');
    }
    fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// The agent imports `n` messages of `size` bytes and waits until they are durable.
fn fill(a: &Agent, n: usize, size: usize) {
    let f = conversation_file(a, n, size);
    a.cli_ok(&["messages", "import", &f]);
    a.cli_ok(&["messages", "flush"]);
    fs::remove_file(f).unwrap();
}

/// An empty directory owned by the agent in its home (a fork's mountpoint).
fn agent_dir(a: &Agent, name: &str) -> String {
    let d = a.home.join(name);
    fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(super::AGENT_UID), Some(super::AGENT_UID)).unwrap();
    d.to_str().unwrap().to_string()
}

/// Bytes used by the files under `dir`.
fn du(dir: &Path) -> u64 {
    let mut n = 0;
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let md = fs::symlink_metadata(e.path()).unwrap();
        if md.is_dir() {
            n += du(&e.path());
        } else {
            n += std::os::unix::fs::MetadataExt::blocks(&md) * 512;
        }
    }
    n
}

/// The error document of a failed `--json` run: (exit status, code).
fn refusal(o: &Output) -> (i32, String) {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no error document ({e}): {:?} {}",
            o.stdout,
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (
        o.status.code().unwrap_or(-1),
        v["error"]["code"].as_str().unwrap_or("").to_string(),
    )
}

/// `messages -n 1`, four at once, over 200 messages of ~900 KB: the daemon reads
/// the newest record (pages of bounded size), not the whole stream. Before the
/// fix each request loaded the whole log (~180 MB, held twice: raw and decoded).
#[test]
fn newest_message_does_not_load_the_log() {
    let a = Agent::new();
    fill(&a, 200, 900_000);
    a.reset_daemon_peak();
    let before = a.daemon_rss_kib();
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| sc.spawn(|| a.cli_ok(&["messages", "-n", "1"])))
            .collect();
        for h in hs {
            let v = h.join().unwrap();
            let list = v["messages"].as_array().unwrap();
            assert_eq!(list.len(), 1, "{}", &v.to_string()[..200]);
            assert!(list[0]["content"].as_str().unwrap().starts_with("000199"));
        }
    });
    let grew = a.daemon_peak_rss_kib().saturating_sub(before);
    assert!(
        grew < 100 << 10,
        "four `messages -n 1` grew the daemon by {grew} KiB (bound 100 MiB)"
    );
    // The whole conversation is still there, listed page by page.
    let all = a.cli_ok(&["messages"]);
    assert_eq!(all["messages"].as_array().unwrap().len(), 200);
    a.assert_daemon_answers();
}

/// Eight forks of a session with a ~40 MB conversation: each fork refers to the
/// conversation instead of copying it, so the store grows by far less than
/// 8 × 40 MB; each fork still lists the whole conversation. Before the fix every
/// fork copied it (the store grew by ~320 MB).
#[test]
fn forks_share_the_conversation() {
    let a = Agent::new();
    fill(&a, 50, 800_000);
    let conv = 50 * 800_000u64;
    let before = du(&a.m.store);
    let mut mps = Vec::new();
    for i in 0..8 {
        let mp = agent_dir(&a, &format!("fork{i}"));
        a.cli_ok(&["fork", &format!("f{i}"), "--mount", &mp]);
        mps.push(mp);
    }
    let grew = du(&a.m.store).saturating_sub(before);
    assert!(
        grew < conv,
        "8 forks grew the store by {grew} bytes (conversation: {conv} bytes)\n{}",
        daemon_log(&a.m.store)
    );
    for mp in [&mps[0], &mps[7]] {
        let v: Value = serde_json::from_str(&tf_ok(
            &a.m.store,
            &["--json", "-C", mp.as_str(), "messages", "-n", "2"],
        ))
        .unwrap();
        let list = v["messages"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1]["seq"], json!(50));
        assert!(list[1]["content"].as_str().unwrap().starts_with("000049"));
    }
    // A fork's own messages continue its conversation; the parent's are unchanged.
    let fork0 = mps[0].as_str();
    tf_ok(
        &a.m.store,
        &[
            "-C",
            fork0,
            "messages",
            "append",
            "--role",
            "user",
            "--content",
            "in fork",
            "--flush",
        ],
    );
    let v: Value = serde_json::from_str(&tf_ok(
        &a.m.store,
        &["--json", "-C", fork0, "messages", "-n", "1"],
    ))
    .unwrap();
    assert_eq!(v["messages"][0]["seq"], json!(51));
    assert_eq!(v["messages"][0]["content"], json!("in fork"));
    let v = a.cli_ok(&["messages", "-n", "1"]);
    assert!(
        v["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("000049")
    );
    a.assert_daemon_answers();
}

/// Each quota, exceeded by the agent: `quota` code and exit status 10, nothing
/// stored before is lost, the daemon answers. Only the user changes limits.
#[test]
fn quotas_refuse_and_keep_what_was_stored() {
    let a = Agent::new();
    // The agent may read the limits, not change them.
    let v = a.cli_ok(&["limits"]);
    assert_eq!(v["limits"]["message_count"], json!(100_000));
    let (st, _) = a.cli_err(&["limits", "message_count=1000000000"]);
    assert_eq!(st, FORBIDDEN_STATUS);
    a.user_ok(&[
        "limits",
        "message_count=5",
        "agent_sessions=2",
        "message_bytes=10000000",
    ]);

    // Message count.
    for i in 0..5 {
        let c = format!("m{i}");
        a.cli_ok(&[
            "messages",
            "append",
            "--role",
            "user",
            "--content",
            &c,
            "--flush",
        ]);
    }
    let o = a.cli(&[
        "messages",
        "append",
        "--role",
        "user",
        "--content",
        "m5",
        "--flush",
    ]);
    assert_eq!(refusal(&o), (QUOTA_STATUS, "quota".to_string()));
    let v = a.cli_ok(&["messages"]);
    let got: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["m0", "m1", "m2", "m3", "m4"]);

    // Message bytes: a fork starts with no bytes of its own (it shares its
    // parent's), so the limit applies to what each session stores itself.
    a.user_ok(&["limits", "message_count=100000", "message_bytes=1500000"]);
    let f = conversation_file(&a, 1, 900_000);
    a.cli_ok(&["messages", "import", &f]);
    a.cli_ok(&["messages", "flush"]);
    let o = a.cli(&["messages", "import", &f]);
    assert_eq!(refusal(&o), (QUOTA_STATUS, "quota".to_string()));
    let v = a.cli_ok(&["messages"]);
    assert_eq!(v["messages"].as_array().unwrap().len(), 6);

    // Sessions an agent creates.
    for i in 0..2 {
        let mp = agent_dir(&a, &format!("q{i}"));
        a.cli_ok(&["fork", &format!("q{i}"), "--mount", &mp]);
    }
    let mp = agent_dir(&a, "q2");
    let o = a.cli(&["fork", "q2", "--mount", &mp]);
    assert_eq!(refusal(&o), (QUOTA_STATUS, "quota".to_string()));
    // The user is not bound by it.
    let ump = a.m.tmp.path().join("user-fork");
    a.user_ok(&["fork", "u1", "--mount", ump.to_str().unwrap()]);

    // Operation records: the agent's ops that would record one are refused, the
    // user's are not.
    a.user_ok(&["limits", "op_records=0"]);
    fs::write(a.m.mp.join("work"), "w").unwrap();
    let o = a.cli(&["checkpoint", "-m", "agent"]);
    assert_eq!(refusal(&o), (QUOTA_STATUS, "quota".to_string()));
    a.user_ok(&["checkpoint", "-m", "user"]);
    assert!(a.m.mp.join("work").exists());

    // Experiment runs per experiment.
    a.user_ok(&["limits", "op_records=100000", "experiment_runs=1"]);
    let o = a.cli(&["experiment", "-c", "true", "-c", "true"]);
    assert_eq!(refusal(&o), (QUOTA_STATUS, "quota".to_string()));

    a.assert_daemon_answers();
    let v = a.cli_ok(&["messages", "-n", "1"]);
    assert_eq!(v["messages"].as_array().unwrap().len(), 1);
}
