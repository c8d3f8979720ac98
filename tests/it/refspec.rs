//! Ref syntax (`HEAD~N`, `REF^`, `@~`, id prefixes with suffixes), `log [REF]
//! [--oneline] [-n N] [-- PATH]` and `show REF` / `show REF:PATH` on real mounts,
//! through the CLI and the session socket.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::{Mount, daemon_log, pattern, tf, write_synced, ws, ws_ok};

fn wsj(m: &Mount, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = ws_ok(m, &full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{out}"))
}

fn ws_err(m: &Mount, args: &[&str]) -> String {
    let o = ws(m, args);
    assert!(
        !o.status.success(),
        "treefork {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn checkpoint(m: &Mount, msg: &str) -> String {
    wsj(m, &["checkpoint", "-m", msg])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The checkpoint id `show --json SPEC` resolves to.
fn shown_id(m: &Mount, spec: &str) -> String {
    wsj(m, &["show", spec])["checkpoint"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("show {spec}: no id"))
        .to_string()
}

/// `show SPEC` raw stdout (bytes).
fn show_bytes(m: &Mount, spec: &str) -> Vec<u8> {
    let o = ws(m, &["show", spec]);
    assert!(
        o.status.success(),
        "show {spec} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store)
    );
    o.stdout
}

/// `treefork --store S [--json] args...` with the mount as current directory (paths
/// given to `log -- PATH` are relative to it).
fn in_mount(m: &Mount, dir: &Path, args: &[&str]) -> Output {
    Command::new(crate::harness::bin())
        .arg("--store")
        .arg(&m.store)
        .args(args)
        .current_dir(dir)
        .env_remove("TREEFORK_STORE")
        .output()
        .unwrap()
}

fn log_ids(m: &Mount, args: &[&str]) -> Vec<String> {
    let mut full = vec!["--json", "log"];
    full.extend_from_slice(args);
    let o = in_mount(m, &m.mp, &full);
    assert!(
        o.status.success(),
        "log {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// Send one raw request on the session socket; the final response.
fn raw(m: &Mount, line: &str) -> Value {
    let rec = treefork::control::find_mount(&m.mp).expect("mount registered");
    let mut s = UnixStream::connect(rec.socket.expect("session socket")).unwrap();
    s.write_all(line.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "connection closed");
        let v: Value = serde_json::from_str(&l).unwrap();
        if v.get("event").is_none() {
            return v;
        }
    }
}

#[test]
fn ref_suffixes_resolve_on_a_mount() {
    let m = Mount::new();
    let mut c = Vec::new();
    for i in 1..=3 {
        fs::write(m.p("f"), i.to_string()).unwrap();
        c.push(checkpoint(&m, &format!("c{i}")));
    }
    ws_ok(&m, &["branch", "main"]);
    assert_eq!(shown_id(&m, "HEAD"), c[2]);
    assert_eq!(shown_id(&m, "HEAD~2"), c[0]);
    assert_eq!(shown_id(&m, "HEAD~"), c[1]);
    assert_eq!(shown_id(&m, "main^"), c[1]);
    assert_eq!(shown_id(&m, "main^0"), c[2]);
    assert_eq!(shown_id(&m, "@~"), c[1]);
    assert_eq!(shown_id(&m, "@^^"), c[0]);
    assert_eq!(shown_id(&m, &format!("{}~1", &c[2][..8])), c[1]);
    // Errors name the problem.
    let e = ws_err(&m, &["show", "HEAD~5"]);
    assert!(e.contains("HEAD~5: history has only 2 ancestors"), "{e}");
    let e = ws_err(&m, &["show", "main^2"]);
    assert!(
        e.contains(&format!("main^2: checkpoint {} has 1 parent", &c[2][..12])),
        "{e}"
    );
    let e = ws_err(&m, &["show", "nope~1"]);
    assert!(e.contains("unknown ref") && e.contains("@{-N}"), "{e}");
    let e = ws_err(&m, &["show", "HEAD~x"]);
    assert!(e.contains("bad ref"), "{e}");
    // Branch names that would shadow ref syntax are refused.
    for bad in ["@", "exec@3", "a@{1}"] {
        let e = ws_err(&m, &["branch", bad]);
        assert!(e.contains("invalid branch name"), "{bad}: {e}");
    }
    // Every command takes the same syntax: checkout, diff, restore, branch, log.
    ws_ok(&m, &["checkout", "@~2"]);
    assert_eq!(fs::read_to_string(m.p("f")).unwrap(), "1");
    let d = wsj(&m, &["diff", "main~2", "main^"]);
    assert_eq!(d["entries"][0]["path"], "f", "{d}");
    ws_ok(&m, &["restore", "main^"]);
    assert_eq!(fs::read_to_string(m.p("f")).unwrap(), "2");
    ws_ok(&m, &["branch", "old", "main~~"]);
    assert_eq!(shown_id(&m, "old"), c[0]);
    assert_eq!(log_ids(&m, &["main~1"]), vec![c[1].clone(), c[0].clone()]);
}

#[test]
fn show_path_gives_bytes_at_that_state() {
    let m = Mount::new();
    fs::create_dir_all(m.p("dir/sub")).unwrap();
    fs::write(m.p("a.txt"), b"old text\n").unwrap();
    fs::write(m.p("dir/x"), b"x").unwrap();
    std::os::unix::fs::symlink("dir", m.p("link")).unwrap();
    let big = pattern(5 << 20, 7);
    write_synced(&m.p("big"), &big);
    // A sparse file: a hole, data, a hole to the end.
    {
        let f = fs::File::create(m.p("sparse")).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, b"in the middle", 3 << 20).unwrap();
        f.set_len(5 << 20).unwrap();
        f.sync_all().unwrap();
    }
    let sparse = fs::read(m.p("sparse")).unwrap();
    let c1 = checkpoint(&m, "one");
    fs::write(m.p("a.txt"), b"new text\n").unwrap();
    write_synced(&m.p("big"), b"small now");
    fs::remove_file(m.p("dir/x")).unwrap();
    checkpoint(&m, "two");

    assert_eq!(show_bytes(&m, "HEAD~1:a.txt"), b"old text\n");
    assert_eq!(show_bytes(&m, "HEAD:a.txt"), b"new text\n");
    assert_eq!(
        show_bytes(&m, &format!("{}:./a.txt", &c1[..10])),
        b"old text\n"
    );
    assert!(show_bytes(&m, "HEAD~1:big") == big, "5 MiB file differs");
    assert_eq!(show_bytes(&m, "HEAD:big"), b"small now");
    assert!(
        show_bytes(&m, "HEAD:sparse") == sparse,
        "sparse file differs"
    );
    // --json: size and blake3 of the bytes.
    let v = wsj(&m, &["show", "HEAD~1:big"]);
    assert_eq!(v["size"], big.len() as u64);
    assert_eq!(v["blake3"], blake3::hash(&big).to_hex().to_string());
    assert_eq!(v["binary"], true);
    assert_eq!(wsj(&m, &["show", "HEAD:a.txt"])["text"], "new text\n");
    // A symlink prints its target; a path through one is refused.
    assert_eq!(show_bytes(&m, "HEAD:link"), b"dir");
    let e = ws_err(&m, &["show", "HEAD:link/x"]);
    assert!(e.contains("symbolic link"), "{e}");
    // A directory lists its entries.
    let out = String::from_utf8(show_bytes(&m, "HEAD~1:dir")).unwrap();
    assert_eq!(out, "sub/\nx\n");
    let root = String::from_utf8(show_bytes(&m, "HEAD:")).unwrap();
    assert!(
        root.contains("dir/\n") && root.contains("a.txt\n"),
        "{root}"
    );
    // A path deleted since: not_found now, there before.
    assert_eq!(show_bytes(&m, "HEAD~1:dir/x"), b"x");
    let e = ws_err(&m, &["show", "HEAD:dir/x"]);
    assert!(e.contains("does not exist"), "{e}");
    let v = raw(&m, r#"{"v":1,"op":"show","ref":"HEAD","path":"dir/x"}"#);
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    // Hostile paths.
    for p in ["../etc/passwd", "/etc/passwd", "dir/../../x"] {
        let e = ws_err(&m, &["show", &format!("HEAD:{p}")]);
        assert!(e.contains("workspace"), "{p}: {e}");
    }
    let v = raw(&m, r#"{"v":1,"op":"show","ref":"HEAD","path":"a\u0000b"}"#);
    assert_eq!(v["error"]["code"], "invalid", "{v}");
}

#[test]
fn show_ref_lists_metadata_and_changes() {
    let m = Mount::new();
    fs::write(m.p("a"), "1").unwrap();
    fs::write(m.p("b"), "1").unwrap();
    let c1 = checkpoint(&m, "first");
    fs::write(m.p("a"), "2").unwrap();
    fs::remove_file(m.p("b")).unwrap();
    fs::write(m.p("c"), "1").unwrap();
    let c2 = checkpoint(&m, "second");
    let out = String::from_utf8(show_bytes(&m, "HEAD")).unwrap();
    assert!(
        out.starts_with(&format!("checkpoint {c2}\nparent     {c1}\n")),
        "{out}"
    );
    assert!(
        out.contains("second") && out.ends_with("M\ta\nD\tb\nA\tc\n"),
        "{out}"
    );
    let v = wsj(&m, &["show", "HEAD~1"]);
    assert_eq!(v["checkpoint"]["id"], c1.as_str());
    assert_eq!(v["changes"], Value::Null, "first checkpoint: {v}");
}

#[test]
fn log_filters_by_path_and_prints_oneline() {
    let m = Mount::new();
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("a"), "1").unwrap();
    fs::write(m.p("b"), "1").unwrap();
    let c1 = checkpoint(&m, "add a and b");
    fs::write(m.p("a"), "2").unwrap();
    let c2 = checkpoint(&m, "change a");
    fs::write(m.p("b"), "2").unwrap();
    let c3 = checkpoint(&m, "change b");
    fs::write(m.p("d/x"), "1").unwrap();
    let c4 = checkpoint(&m, "add d/x");
    fs::write(m.p("d/x"), "2").unwrap();
    let c5 = checkpoint(&m, "change d/x");
    fs::set_permissions(
        m.p("a"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let c6 = checkpoint(&m, "chmod a");

    assert_eq!(
        log_ids(&m, &["--", "a"]),
        vec![c6.clone(), c2.clone(), c1.clone()]
    );
    assert_eq!(log_ids(&m, &["--", "b"]), vec![c3.clone(), c1.clone()]);
    // d itself was created (empty) in c1.
    assert_eq!(
        log_ids(&m, &["--", "d"]),
        vec![c5.clone(), c4.clone(), c1.clone()]
    );
    assert_eq!(log_ids(&m, &["--", "d/x"]), vec![c5.clone(), c4.clone()]);
    assert_eq!(log_ids(&m, &["--", "nothing"]), Vec::<String>::new());
    assert_eq!(log_ids(&m, &["-n", "1", "--", "a"]), vec![c6.clone()]);
    assert_eq!(
        log_ids(&m, &["HEAD~2", "--", "a"]),
        vec![c2.clone(), c1.clone()]
    );
    // Relative to the current directory.
    let o = in_mount(&m, &m.p("d"), &["--json", "log", "--", "x"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["checkpoints"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(log_ids(&m, &["-n", "2"]), vec![c6.clone(), c5.clone()]);
    // --oneline: short id and message.
    let out = ws_ok(&m, &["log", "--oneline", "-n", "3", "HEAD~1"]);
    let want = format!(
        "{} change d/x\n{} add d/x\n{} change b\n",
        &c5[..12],
        &c4[..12],
        &c3[..12]
    );
    assert_eq!(out, want);
    // A file changed through a hard link elsewhere: its directory's node is the
    // same, the hard-link table differs; the directory is still reported changed.
    fs::create_dir(m.p("h1")).unwrap();
    fs::create_dir(m.p("h2")).unwrap();
    fs::write(m.p("h1/f"), "1").unwrap();
    fs::hard_link(m.p("h1/f"), m.p("h2/f")).unwrap();
    let c7 = checkpoint(&m, "hard link");
    fs::write(m.p("h2/f"), "2").unwrap();
    let c8 = checkpoint(&m, "write through the other link");
    assert_eq!(log_ids(&m, &["--", "h1"]), vec![c8.clone(), c7.clone()]);
    assert_eq!(log_ids(&m, &["--", "h1/f"]), vec![c8.clone(), c7.clone()]);
    assert_eq!(log_ids(&m, &["-n", "1", "--", "a"]), vec![c6.clone()]);
    // An old-style request (no from/path) still works.
    let v = raw(&m, r#"{"v":1,"op":"log","limit":2}"#);
    assert_eq!(v["checkpoints"].as_array().unwrap().len(), 2, "{v}");
    let v = raw(&m, r#"{"v":1,"op":"log","path":"../x"}"#);
    assert_eq!(v["error"]["code"], "invalid", "{v}");
}

#[test]
fn agent_socket_may_show() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    fs::write(m.p("a"), "agent reads this").unwrap();
    checkpoint(&m, "one");
    let o = tf(
        &m.store,
        &["--socket", sock.to_str().unwrap(), "show", "HEAD:a"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, b"agent reads this");
    let o = tf(
        &m.store,
        &["--socket", sock.to_str().unwrap(), "log", "--oneline", "@"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
