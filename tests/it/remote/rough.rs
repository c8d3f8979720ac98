//! Rough edges of the remote tier found by trying it as a new user (issue 25):
//! credentials reach a daemon started without them (handed over by `remote add`),
//! errors are one short line naming the endpoint and the cause, and push shows
//! progress on a stderr that is not a terminal.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use super::S3Server;
use crate::harness::{TEST_AWS_ENV, daemon_log, pattern, tf_env, write_synced};

fn ok_json(o: &Output, what: &str, store: &Path) -> Value {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        daemon_log(store)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn err_json(o: &Output) -> Value {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A store whose daemon was started with no AWS variables and an empty HOME
/// (no credentials file): session `s` mounted at the returned mountpoint.
struct NoCreds {
    tmp: tempfile::TempDir,
    store: PathBuf,
    mp: PathBuf,
}

impl NoCreds {
    fn start() -> NoCreds {
        let tmp = tempfile::Builder::new()
            .prefix("tf-test-")
            .tempdir()
            .unwrap();
        let (store, mp) = (tmp.path().join("store"), tmp.path().join("mnt"));
        std::fs::create_dir_all(&mp).unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let n = NoCreds { tmp, store, mp };
        let o = n.run(&["mount", n.mp.to_str().unwrap(), "--session", "s"], &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        n
    }

    /// The CLI with HOME at the empty home, no AWS variables but `set`.
    fn run(&self, args: &[&str], set: &[(&str, &str)]) -> Output {
        let home = self.tmp.path().join("home");
        let mut env = vec![("HOME", home.to_str().unwrap())];
        env.extend_from_slice(set);
        tf_env(&self.store, args, &env, &[])
    }
}

impl Drop for NoCreds {
    fn drop(&mut self) {
        let _ = self.run(&["umount", self.mp.to_str().unwrap()], &[]);
    }
}

#[test]
fn remote_add_hands_credentials_to_a_daemon_started_without_them() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let n = NoCreds::start();
    let url = s3.url("handover");
    let add = [
        "--json",
        "remote",
        "add",
        "origin",
        &url,
        "--endpoint",
        &s3.endpoint,
    ];
    // None anywhere: the message says how to provide them.
    let e = err_json(&n.run(&add, &[]));
    let msg = e["error"]["message"].as_str().unwrap();
    assert_eq!(e["error"]["code"], "remote", "{e}");
    assert!(
        msg.contains("export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
            && msg.contains("treefork remote add origin")
            && msg.contains(&format!(
                "write {}",
                n.tmp.path().join("home/.aws/credentials").display()
            )),
        "{msg}"
    );
    // Exported in the CLI's environment: on an explicit socket (which may be an
    // agent's) they are not sent, so the daemon still has none.
    let sock = treefork::control::find_mount(&n.mp)
        .unwrap()
        .socket
        .unwrap();
    let mut explicit = vec!["--socket", sock.to_str().unwrap()];
    explicit.extend_from_slice(&add);
    let e = err_json(&n.run(&explicit, &TEST_AWS_ENV));
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no credentials"),
        "{e}"
    );
    // To the store's own daemon: handed over, the add succeeds.
    let v = ok_json(&n.run(&add, &TEST_AWS_ENV), "remote add", &n.store);
    assert_eq!(v["updated"], false, "{v}");
    // Push works with no variables in the CLI's environment: the daemon has them.
    write_synced(&n.mp.join("f.bin"), &pattern(1 << 20, 3));
    let v = ok_json(
        &n.run(&["--json", "push", "origin", "s"], &[]),
        "push",
        &n.store,
    );
    assert!(v["objects"].as_u64().unwrap() > 0, "{v}");
    // The same add again refreshes them (`updated`); another place is a conflict.
    let v = ok_json(&n.run(&add, &TEST_AWS_ENV), "remote add again", &n.store);
    assert_eq!(v["updated"], true, "{v}");
    let other = s3.url("elsewhere");
    let e = err_json(&n.run(
        &[
            "--json",
            "remote",
            "add",
            "origin",
            &other,
            "--endpoint",
            &s3.endpoint,
        ],
        &TEST_AWS_ENV,
    ));
    assert_eq!(e["error"]["code"], "conflict", "{e}");
    // Never written anywhere: not in the daemon log, not in the store.
    let secret = TEST_AWS_ENV[1].1;
    assert!(!daemon_log(&n.store).contains(secret));
    for f in walk(&n.store) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "secret stored in {}",
            f.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
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
fn an_unreachable_endpoint_is_one_short_line() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = format!("http://127.0.0.1:{port}");
    let n = NoCreds::start();
    let o = n.run(
        &[
            "remote",
            "add",
            "down",
            "s3://treefork-test/x",
            "--endpoint",
            &endpoint,
        ],
        &TEST_AWS_ENV,
    );
    assert_eq!(o.status.code(), Some(8));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "remote down: cannot reach {endpoint}: connection refused"
        )),
        "{err}"
    );
    assert!(
        !err.contains("retries") && !err.contains("Generic"),
        "{err}"
    );
    // The whole chain is in the daemon log.
    let log = daemon_log(&n.store);
    assert!(log.contains("retries") || log.contains("error"), "{log}");
}

#[test]
fn push_prints_progress_lines_when_stderr_is_not_a_terminal() {
    let Some(s3) = S3Server::start_or_skip() else {
        return;
    };
    let n = NoCreds::start();
    let url = s3.url("progress");
    let add = ["remote", "add", "origin", &url, "--endpoint", &s3.endpoint];
    let o = n.run(&add, &TEST_AWS_ENV);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for i in 0..4 {
        write_synced(&n.mp.join(format!("f{i}.bin")), &pattern(1 << 20, i));
    }
    // Output captured: stderr is a pipe, not a terminal.
    let o = n.run(&["push", "origin", "s"], &[(treefork_progress_env(), "0")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("push: upload "))
        .collect();
    assert!(!lines.is_empty(), "no progress lines: {err}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" objects, ") && l.contains('/')),
        "{err}"
    );
    // With the default interval a quick push prints none; `--json` never does.
    for args in [
        &["push", "origin", "s"][..],
        &["--json", "push", "origin", "s"][..],
    ] {
        write_synced(&n.mp.join("g.bin"), &pattern(1 << 16, 9));
        let o = n.run(args, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("push: upload"), "{args:?}: {err}");
    }
}

fn treefork_progress_env() -> &'static str {
    "TREEFORK_PROGRESS_INTERVAL_MS"
}
