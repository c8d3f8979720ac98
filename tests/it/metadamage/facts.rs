//! What the CLI shows of a store, recorded as JSON values by name (a "fact"), and
//! the comparison of two recordings.
//!
//! Per session (all mounted at once under a scratch directory): the hash of every
//! file, directory and symlink of its workspace, `log`, `op log`, `history` and
//! `history show N` of each exec, `messages`, `branches`, `status`; per store:
//! `sessions` (without the lifecycle clocks), `remote`, and the checkpoint each
//! remote tracking ref names (`show REMOTE/NAME`). A command that fails is
//! recorded as its error (so a comparison names it instead of panicking).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{tf, tf_ok, umount_ok, wait_daemon_gone};

/// Facts by name.
pub type Facts = BTreeMap<String, Value>;

/// The key of `history show N` of session `s` (what variant h may lose).
pub fn exec_output_key(s: &str, n: u64) -> String {
    format!("{s}/history show {n}")
}

/// `treefork --json ARGS` on `store`: its JSON answer, or its failure as a string.
pub fn cli(store: &Path, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let o = tf(store, &a);
    if !o.status.success() {
        return json!(format!(
            "FAILED {:?} (exit {:?}): {}",
            args,
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        json!(format!(
            "NOT JSON {args:?} ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        ))
    })
}

/// [`cli`] in the workspace mounted at `mp`.
pub fn ws_cli(store: &Path, mp: &Path, args: &[&str]) -> Value {
    let mut a = vec!["-C", mp.to_str().unwrap()];
    a.extend_from_slice(args);
    cli(store, &a)
}

/// Every entry under `root` by relative path: a file's blake3, `dir`, or a
/// symlink's target.
pub fn tree_hashes(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, format!("-> {}", t.display()));
            } else if ft.is_dir() {
                out.insert(rel, "dir".into());
                walk(root, &p, out);
            } else {
                let bytes =
                    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
                out.insert(rel, blake3::hash(&bytes).to_hex().to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Where two [`tree_hashes`] differ, readably: counts and the first paths
/// missing, extra and changed (empty when equal).
pub fn tree_diff(want: &BTreeMap<String, String>, got: &BTreeMap<String, String>) -> String {
    if want == got {
        return String::new();
    }
    let first = |v: Vec<&String>| {
        let n = v.len();
        let shown: Vec<&String> = v.into_iter().take(8).collect();
        format!("{n} {shown:?}")
    };
    let missing = first(want.keys().filter(|k| !got.contains_key(*k)).collect());
    let extra = first(got.keys().filter(|k| !want.contains_key(*k)).collect());
    let changed = first(
        want.iter()
            .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
            .map(|(k, _)| k)
            .collect(),
    );
    format!(
        "{} entries wanted, {} seen; missing {missing}; extra {extra}; changed {changed}",
        want.len(),
        got.len()
    )
}

/// The exec numbers a `history` answer lists.
fn exec_numbers(history: &Value) -> Vec<u64> {
    history["execs"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["n"].as_u64()).collect())
        .unwrap_or_default()
}

/// `sessions` without what changes by itself (lifecycle clocks, live counts).
fn sessions_fact(store: &Path) -> Value {
    let v = cli(store, &["sessions"]);
    let Some(rows) = v["sessions"].as_array() else {
        return v;
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r["name"], "state": r["state"], "bytes": r["bytes"],
                "inodes": r["inodes"], "updated": r["updated"], "root": r["root"],
            })
        })
        .collect();
    json!(rows)
}

/// Mount each of `sessions` of `store` under `scratch` (all at once), record
/// every fact, unmount all and wait until the daemon is gone. `tracking` names
/// the remote refs to resolve (`REMOTE/NAME`, through the first session).
pub fn record(store: &Path, scratch: &Path, sessions: &[&str], tracking: &[String]) -> Facts {
    let mut f = Facts::new();
    f.insert("sessions".into(), sessions_fact(store));
    f.insert("remote".into(), cli(store, &["remote", "list"]));
    let mps: Vec<PathBuf> = sessions
        .iter()
        .map(|s| {
            let mp = scratch.join(format!("facts-{s}"));
            std::fs::create_dir_all(&mp).unwrap();
            tf_ok(store, &["mount", mp.to_str().unwrap(), "--session", s]);
            mp
        })
        .collect();
    for (s, mp) in sessions.iter().zip(&mps) {
        f.insert(format!("{s}/files"), json!(tree_hashes(mp)));
        for (name, args) in [
            ("log", &["log"][..]),
            ("op log", &["op", "log"]),
            ("messages", &["messages"]),
            ("branches", &["branches"]),
            ("status", &["status"]),
        ] {
            f.insert(format!("{s}/{name}"), ws_cli(store, mp, args));
        }
        let history = ws_cli(store, mp, &["history"]);
        for n in exec_numbers(&history) {
            let v = ws_cli(store, mp, &["history", "show", &n.to_string()]);
            f.insert(exec_output_key(s, n), v);
        }
        f.insert(format!("{s}/history"), history);
    }
    for t in tracking {
        f.insert(format!("show {t}"), ws_cli(store, &mps[0], &["show", t]));
    }
    for mp in &mps {
        umount_ok(store, mp);
    }
    wait_daemon_gone(store);
    f
}

/// Every fact of `got` that differs from `want`, as readable lines (both sides
/// cut to a readable length), the keys in `except` left out.
pub fn differences(want: &Facts, got: &Facts, except: &[String]) -> Vec<String> {
    let cut = |v: Option<&Value>| {
        let s = v.map_or("<absent>".to_string(), |v| v.to_string());
        if s.len() > 1500 {
            let head: String = s.chars().take(1500).collect();
            format!("{head}... ({} chars)", s.len())
        } else {
            s
        }
    };
    let keys: std::collections::BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    keys.into_iter()
        .filter(|k| !except.contains(k) && want.get(*k) != got.get(*k))
        .map(|k| {
            format!(
                "  {k}:\n    want {}\n    got  {}",
                cut(want.get(k)),
                cut(got.get(k))
            )
        })
        .collect()
}

/// Panic naming every fact of `got` that differs from `want`, the keys in
/// `except` left out.
pub fn assert_same(what: &str, want: &Facts, got: &Facts, except: &[String]) {
    let diffs = differences(want, got, except);
    assert!(
        diffs.is_empty(),
        "{what}: {} fact(s) differ from the fixture's:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// `facts` without what one lost journal record held: the exec `n` of session
/// `s` (operation `seq`): its `history` line, its `op log` entry and its
/// `history show`.
pub fn without_exec(facts: &Facts, s: &str, n: u64, seq: u64) -> Facts {
    let mut f = facts.clone();
    f.remove(&exec_output_key(s, n));
    if let Some(Value::Array(a)) = f
        .get_mut(&format!("{s}/history"))
        .and_then(|h| h.get_mut("execs"))
    {
        a.retain(|e| e["n"].as_u64() != Some(n));
    }
    if let Some(Value::Array(a)) = f
        .get_mut(&format!("{s}/op log"))
        .and_then(|h| h.get_mut("operations"))
    {
        a.retain(|o| o["seq"].as_u64() != Some(seq));
    }
    f
}
