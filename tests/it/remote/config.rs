//! `remote add|list|rm` against a real S3 server (SeaweedFS), through the CLI and
//! the daemon (or offline), and what SeaweedFS does with our client's
//! conditional writes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use treefork::remote::client::{Put, PutIf};

use super::S3Server;
use crate::harness::{Mount, TEST_AWS_ENV, daemon_log, tf, tf_env, tf_ok, umount_ok, ws};

fn json_ok(store: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    serde_json::from_str(&tf_ok(store, &full)).unwrap()
}

/// The `--json` error document and exit status of a command that must fail.
fn json_err(o: Output) -> (Value, i32) {
    assert!(
        !o.status.success(),
        "unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON error document ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (v, o.status.code().unwrap_or(-1))
}

fn add_args<'a>(name: &'a str, url: &'a str, endpoint: &'a str) -> Vec<&'a str> {
    vec!["--json", "remote", "add", name, url, "--endpoint", endpoint]
}

fn names(list: &Value) -> Vec<String> {
    list["remotes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// A store with no daemon (created by a mount, then unmounted).
fn offline_store() -> (Mount, std::path::PathBuf) {
    let m = Mount::new();
    umount_ok(&m.store, &m.mp);
    crate::harness::wait_daemon_gone(&m.store);
    let store = m.store.clone();
    (m, store)
}

#[test]
fn seaweedfs_honours_conditional_writes_and_returns_etags() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let c = s3.client("cw");
    assert!(
        c.get("k", treefork::remote::client::Body::Ref)
            .unwrap()
            .is_none()
    );
    let Put::Written(e1) = c.put("k", b"one".to_vec(), PutIf::Absent).unwrap() else {
        panic!("first create refused")
    };
    let e1 = e1.expect("ETag on PUT");
    assert_eq!(
        c.put("k", b"two".to_vec(), PutIf::Absent).unwrap(),
        Put::Exists
    );
    assert_eq!(
        c.put("k", b"two".to_vec(), PutIf::Matches("\"nope\"".into()))
            .unwrap(),
        Put::Moved
    );
    let g = c
        .get("k", treefork::remote::client::Body::Ref)
        .unwrap()
        .unwrap();
    assert_eq!(g.bytes, b"one");
    assert_eq!(g.etag.as_deref(), Some(e1.as_str()), "GET ETag = PUT ETag");
    assert_eq!(
        c.head("k").unwrap().unwrap().etag.as_deref(),
        Some(e1.as_str())
    );
    let Put::Written(e2) = c
        .put("k", b"three".to_vec(), PutIf::Matches(e1.clone()))
        .unwrap()
    else {
        panic!("If-Match with the current ETag refused")
    };
    assert_ne!(e2.as_deref(), Some(e1.as_str()));
    // The old ETag no longer matches.
    assert_eq!(
        c.put("k", b"four".to_vec(), PutIf::Matches(e1)).unwrap(),
        Put::Moved
    );
    // A conditional update of a missing key is Moved, not an error.
    assert_eq!(
        c.put("gone", b"x".to_vec(), PutIf::Matches("\"x\"".into()))
            .unwrap(),
        Put::Moved
    );
    assert_eq!(c.get_range("k", 1..4).unwrap(), b"hre");
    c.put("d/a", vec![1], PutIf::Always).unwrap();
    c.put("d/b/c", vec![2], PutIf::Always).unwrap();
    let mut keys: Vec<String> = c.list("d").unwrap().into_iter().map(|m| m.key).collect();
    keys.sort();
    assert_eq!(keys, ["d/a", "d/b/c"]);
    c.delete("d/a").unwrap();
    c.delete("d/a").unwrap();
    assert!(c.head("d/a").unwrap().is_none());
    // Another prefix sees nothing of this one.
    assert!(s3.client("other").list("d").unwrap().is_empty());
}

#[test]
fn remote_add_list_rm_through_the_daemon() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let m = Mount::new();
    let url = s3.url("team/a");
    let o = tf(&m.store, &add_args("origin", &url, &s3.endpoint));
    assert!(
        o.status.success(),
        "{}\n{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&m.store),
        s3.log()
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["conditional_writes"], true, "{v}");
    assert_eq!(v["remote"]["bucket"], s3.bucket.as_str());
    assert_eq!(v["remote"]["prefix"], "team/a");
    assert_eq!(v["remote"]["region"], "us-east-1");
    // The descriptor is on the server, under the prefix; the probe key is gone.
    let c = s3.client("team/a");
    let d: Value = serde_json::from_slice(
        &c.get(
            "treefork-remote.json",
            treefork::remote::client::Body::Descriptor,
        )
        .unwrap()
        .unwrap()
        .bytes,
    )
    .unwrap();
    assert_eq!(d["format"], "treefork-remote");
    assert_eq!(d["version"], 1);
    assert!(c.list("probe").unwrap().is_empty());

    // Human output of list.
    let human = tf_ok(&m.store, &["remote", "list"]);
    assert!(
        human.contains("origin") && human.contains(&url) && human.contains(&s3.endpoint),
        "{human}"
    );
    // A second remote on another prefix of the same bucket; list is by name.
    let o = tf(
        &m.store,
        &add_args("backup", &s3.url("team/b"), &s3.endpoint),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = json_ok(&m.store, &["remote", "list"]);
    assert_eq!(names(&list), ["backup", "origin"]);

    // The same name again: conflict; the existing config is unchanged.
    let (e, status) = json_err(tf(
        &m.store,
        &add_args("origin", &s3.url("elsewhere"), &s3.endpoint),
    ));
    assert_eq!(e["error"]["code"], "conflict", "{e}");
    assert_eq!(status, 5, "{e}");
    let list = json_ok(&m.store, &["remote", "list"]);
    assert_eq!(list["remotes"][1]["prefix"], "team/a");

    // Branch names: none may start with a remote's name, and no remote may be
    // named like a branch's first component.
    let o = ws(&m, &["branch", "origin/x"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is a remote"), "{e}");
    let o = ws(&m, &["branch", "team/x"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (e, _) = json_err(tf(&m.store, &add_args("team", &url, &s3.endpoint)));
    assert_eq!(e["error"]["code"], "invalid", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local branch \"team/x\" of session s"),
        "{e}"
    );
    // Nor like a session (`s/BRANCH` names session s's branches).
    let (e, _) = json_err(tf(&m.store, &add_args("s", &url, &s3.endpoint)));
    assert_eq!(e["error"]["code"], "invalid", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session's name"),
        "{e}"
    );

    // Bad arguments are refused before any network use.
    for (args, what) in [
        (add_args("x", "gs://b/p", &s3.endpoint), "not supported"),
        (add_args("x", "s3://B/p", &s3.endpoint), "bucket"),
        (add_args("x", &url, "ftp://h"), "endpoint"),
        (add_args("1x", &url, &s3.endpoint), "remote name"),
    ] {
        let (e, _) = json_err(tf(&m.store, &args));
        assert_eq!(e["error"]["code"], "invalid", "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(what),
            "{e}"
        );
    }

    // rm drops the config and the cache directory; the remote's objects stay.
    std::fs::create_dir_all(m.store.join("remotes/origin/idx")).unwrap();
    let rm = json_ok(&m.store, &["remote", "rm", "origin"]);
    assert_eq!(rm["removed"], "origin");
    assert!(!m.store.join("remotes/origin").exists());
    assert_eq!(names(&json_ok(&m.store, &["remote", "list"])), ["backup"]);
    assert!(
        c.get(
            "treefork-remote.json",
            treefork::remote::client::Body::Descriptor
        )
        .unwrap()
        .is_some()
    );
    let (e, status) = json_err(tf(&m.store, &["--json", "remote", "rm", "origin"]));
    assert_eq!(e["error"]["code"], "not_found", "{e}");
    assert_eq!(status, 4);
    // Now origin/x is a fine branch name again; and re-adding finds the
    // existing descriptor.
    let o = ws(&m, &["branch", "origin/x"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (e, _) = json_err(tf(&m.store, &add_args("origin", &url, &s3.endpoint)));
    assert_eq!(e["error"]["code"], "invalid", "{e}");
    let v = json_ok(
        &m.store,
        &["remote", "add", "origin2", &url, "--endpoint", &s3.endpoint],
    );
    assert_eq!(v["descriptor_created"], false, "{v}");
}

#[test]
fn remote_add_refuses_another_format_at_the_prefix_and_stores_nothing() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let (_tmp, store) = offline_store();
    s3.client("old")
        .put(
            "treefork-remote.json",
            br#"{"format":"treefork-remote","version":7,"created":1}"#.to_vec(),
            PutIf::Always,
        )
        .unwrap();
    let (e, status) = json_err(tf(
        &store,
        &add_args("origin", &s3.url("old"), &s3.endpoint),
    ));
    assert_eq!(e["error"]["code"], "invalid", "{e}");
    assert_eq!(status, 2);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("version 7"), "{msg}");
    assert!(names(&json_ok(&store, &["remote", "list"])).is_empty());
    // --single-writer on a server that honours conditions: stored, conditional.
    let v = json_ok(
        &store,
        &[
            "remote",
            "add",
            "solo",
            &s3.url("solo"),
            "--endpoint",
            &s3.endpoint,
            "--single-writer",
            "--region",
            "eu-west-1",
        ],
    );
    assert_eq!(v["remote"]["single_writer"], true);
    assert_eq!(v["remote"]["region"], "eu-west-1");
    assert_eq!(v["conditional_writes"], true);
}

#[test]
fn unreachable_endpoint_is_a_remote_error_and_stores_nothing() {
    let (_tmp, store) = offline_store();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let t = std::time::Instant::now();
    let (e, status) = json_err(tf(&store, &add_args("origin", "s3://bkt/p", &endpoint)));
    assert_eq!(e["error"]["code"], "remote", "{e}");
    assert_eq!(status, 8);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("remote origin:"), "{msg}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "took {:?}",
        t.elapsed()
    );
    assert!(names(&json_ok(&store, &["remote", "list"])).is_empty());
}

#[test]
fn credentials_from_a_credentials_file_and_a_clear_message_without_any() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let (m, store) = offline_store();
    let tmp = &m.tmp;
    let url = s3.url("creds");
    let args = add_args("origin", &url, &s3.endpoint);
    let no_env = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
    // None anywhere: a `remote` error saying where they were looked for.
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (e, status) = json_err(tf_env(
        &store,
        &args,
        &[("HOME", home.to_str().unwrap())],
        &no_env,
    ));
    assert_eq!(e["error"]["code"], "remote", "{e}");
    assert_eq!(status, 8);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("origin")
            && msg.contains("AWS_ACCESS_KEY_ID")
            && msg.contains(&home.join(".aws/credentials").display().to_string()),
        "{msg}"
    );
    // A credentials file with the test identity in a named profile.
    let file = tmp.path().join("aws-credentials");
    std::fs::write(
        &file,
        format!(
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[profile ci]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            TEST_AWS_ENV[0].1, TEST_AWS_ENV[1].1
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = tf_env(
        &store,
        &args,
        &[("AWS_SHARED_CREDENTIALS_FILE", f), ("AWS_PROFILE", "ci")],
        &no_env,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The default profile's wrong key: the server refuses, a `remote` error.
    let o = tf_env(
        &store,
        &add_args("other", &s3.url("creds2"), &s3.endpoint),
        &[("AWS_SHARED_CREDENTIALS_FILE", f)],
        &no_env,
    );
    let (e, _) = json_err(o);
    assert_eq!(e["error"]["code"], "remote", "{e}");
}

#[test]
fn no_secret_reaches_the_daemon_log_the_store_or_json_output() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let secret = TEST_AWS_ENV[1].1;
    let m = Mount::new();
    let mut outputs = Vec::new();
    let url = s3.url("secret");
    for args in [
        add_args("origin", &url, &s3.endpoint),
        vec!["--json", "remote", "list"],
        vec!["remote", "list"],
        // Failures too: a conflict, and an unreachable server.
        add_args("origin", &url, &s3.endpoint),
        add_args("down", &url, "http://127.0.0.1:9"),
    ] {
        let o = tf(&m.store, &args);
        outputs.push(String::from_utf8_lossy(&o.stdout).into_owned());
        outputs.push(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    m.umount();
    crate::harness::wait_daemon_gone(&m.store);
    for o in &outputs {
        assert!(!o.contains(secret), "secret in output: {o}");
    }
    assert!(!daemon_log(&m.store).contains(secret));
    let mut files = 0;
    for f in walk(&m.store) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        files += 1;
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "secret stored in {}",
            f.display()
        );
    }
    assert!(files > 3, "walked {files} files");
    // The config is there (the grep above looked at a store that has it).
    let list = json_ok(&m.store, &["remote", "list"]);
    assert_eq!(names(&list), ["origin"]);
    assert!(list.to_string().find(secret).is_none());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn agent_socket_cannot_configure_remotes() {
    let dir = tempfile::Builder::new()
        .prefix("tf-agent-")
        .tempdir()
        .unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let s = UnixStream::connect(&sock).unwrap();
    let mut r = BufReader::new(s);
    for req in [
        json!({"v": 1, "op": "remote_add", "name": "o", "url": "s3://bkt/p",
               "endpoint": "http://127.0.0.1:9"}),
        json!({"v": 1, "op": "remote_list"}),
        json!({"v": 1, "op": "remote_rm", "name": "o"}),
    ] {
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        r.get_mut().write_all(&line).unwrap();
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(v["error"]["code"], "forbidden", "{v}");
        let op = req["op"].as_str().unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{op} is not allowed on an agent socket")),
            "{v}"
        );
    }
    // The user's socket serves it (nothing configured).
    assert!(names(&json_ok(&m.store, &["remote", "list"])).is_empty());
}

#[test]
fn server_down_then_back_with_its_data() {
    let Some(mut s3) = S3Server::start_or_skip() else {
        return;
    };
    let (_m, store) = offline_store();
    let url = s3.url("dn");
    s3.stop();
    assert!(!s3.running());
    let (e, status) = json_err(tf(&store, &add_args("origin", &url, &s3.endpoint)));
    assert_eq!(e["error"]["code"], "remote", "{e}");
    assert_eq!(status, 8);
    assert!(names(&json_ok(&store, &["remote", "list"])).is_empty());
    s3.restart();
    assert!(s3.running());
    json_ok(
        &store,
        &["remote", "add", "origin", &url, "--endpoint", &s3.endpoint],
    );
    // Killed hard and restarted on the same directory and port: the data is there.
    s3.kill();
    s3.restart();
    let d = s3
        .client("dn")
        .get(
            "treefork-remote.json",
            treefork::remote::client::Body::Descriptor,
        )
        .unwrap();
    assert!(d.is_some(), "{}", s3.log());
}
