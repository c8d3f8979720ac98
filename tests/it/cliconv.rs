//! CLI conventions (issue 15 §4): `--json` error documents and exit statuses,
//! one JSON shape whoever answered, completions, the man page, and the
//! `mount.fuse.treefork` helper under a real mount(8).

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::{Mount, bin, tf, tf_ok};

/// A failed run's exit status and its one `--json` error document, checked: the
/// whole stdout is one document `{"ok":false,"error":{"code","message"}}` and
/// stderr is one `treefork: error:` line.
fn json_failure(o: &Output) -> (i32, Value) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!o.status.success(), "expected failure: {out}");
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {out:?}"));
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(err.contains("error"), "{err}");
    (o.status.code().unwrap(), v["error"].clone())
}

/// Run `args` with and without `--json`: the same exit status; with it, an
/// error document of `code`; without, nothing on stdout. Returns the status.
fn fails_with(store: &Path, args: &[&str], code: &str) -> i32 {
    let mut full = args.to_vec();
    full.push("--json");
    let (status, error) = json_failure(&tf(store, &full));
    assert_eq!(error["code"], code, "{args:?}: {error}");
    let human = tf(store, args);
    assert_eq!(human.status.code(), Some(status), "{args:?}: human status");
    assert!(human.stdout.is_empty(), "{args:?}: human stdout");
    let e = String::from_utf8_lossy(&human.stderr);
    assert!(e.starts_with("treefork: error: ") || code == "usage", "{e}");
    status
}

#[test]
fn failures_have_distinct_statuses_and_one_json_shape() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("agent.sock");
    let m = Mount::with_options("s", &["--agent-socket", sock.to_str().unwrap()]);
    let (st, mp, sock) = (&m.store, m.mp.to_str().unwrap(), sock.to_str().unwrap());
    fs::write(m.p("f"), b"x").unwrap();
    tf_ok(st, &["-C", mp, "branch", "b1"]);
    let statuses = [
        // clap refuses the command line.
        fails_with(st, &["no-such-command"], "usage"),
        fails_with(st, &["-C", mp, "log", "--no-such-flag"], "usage"),
        // The daemon: unknown ref; a branch that exists; an agent deleting a branch.
        fails_with(st, &["-C", mp, "checkout", "nosuch"], "not_found"),
        fails_with(st, &["-C", mp, "branch", "b1"], "conflict"),
        fails_with(st, &["--socket", sock, "branch", "-d", "b1"], "forbidden"),
    ];
    assert_eq!(statuses, [2, 2, 4, 5, 6]);
    // The CLI: outside any workspace; a store that is not there.
    assert_eq!(fails_with(st, &["-C", "/", "status"], "not_found"), 4);
    let missing = dir.path().join("nostore");
    assert_eq!(fails_with(&missing, &["gc"], "not_found"), 4);
    // A mount of a session mounted elsewhere: conflict, from the daemon.
    let other = dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let other = other.to_str().unwrap();
    assert_eq!(
        fails_with(st, &["mount", other, "--session", "s"], "conflict"),
        5
    );
    // Results still print one document with `ok`.
    let v: Value = serde_json::from_str(&tf_ok(st, &["-C", mp, "branches", "--json"])).unwrap();
    assert_eq!(v["ok"], true, "{v}");
}

/// Command lines clap refuses, and bad values in them, whatever the command:
/// exit 2, one `treefork: error:` line on stderr (no usage or tip lines), the
/// nearest name suggested; with `--json` a `usage` document. No daemon needed:
/// nothing is sent.
#[test]
fn usage_errors_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path();
    let one_line = |args: &[&str]| -> String {
        assert_eq!(fails_with(st, args, "usage"), 2, "{args:?}");
        let e = String::from_utf8_lossy(&tf(st, args).stderr).into_owned();
        assert!(e.starts_with("treefork: error: "), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        e
    };
    let e = one_line(&["checkpoint", "--foo"]);
    assert!(
        e.contains("'--foo'") && e.contains("(see 'treefork checkpoint --help')"),
        "{e}"
    );
    let e = one_line(&["chekpoint"]);
    assert!(e.contains("did you mean 'checkpoint'?"), "{e}");
    // A bad value is a usage error wherever it is parsed (it used to be exit 1
    // for `timeline --since`, parsed by the CLI, and 2 for the TTLs, parsed by
    // the daemon).
    for args in [
        &["timeline", "--since", "5x"][..],
        &["session", "extend", "s", "--ttl-idle", "5x"],
        &["mount", "/nonexistent", "--ttl-absolute", "5x"],
        &["exec", "--timeout", "0", "true"],
        &["config", "novalue"],
    ] {
        let e = one_line(args);
        assert!(e.contains("invalid value '"), "{args:?}: {e}");
    }
    // Help is not an error.
    let o = tf(st, &["checkpoint", "--help"]);
    assert!(o.status.success() && !o.stdout.is_empty());
}

/// The keys of a JSON object, with the keys of its object members as `k.sub`.
fn shape(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (k, x) in v.as_object().expect("an object") {
        out.push(k.clone());
        if let Some(o) = x.as_object() {
            out.extend(o.keys().map(|s| format!("{k}.{s}")));
        }
    }
    out.sort();
    out
}

#[test]
fn gc_and_fsck_answer_one_shape_with_or_without_a_daemon() {
    let m = Mount::new();
    fs::write(m.p("f"), b"data").unwrap();
    let doc = |args: &[&str]| -> Value {
        let mut full = args.to_vec();
        full.push("--json");
        serde_json::from_str(&tf_ok(&m.store, &full)).unwrap()
    };
    let daemon: Vec<Value> = [&["gc"][..], &["gc", "--dry-run"], &["fsck"], &["sessions"]]
        .iter()
        .map(|a| doc(a))
        .collect();
    m.umount();
    assert!(
        treefork::daemon::ping(&m.store).is_none(),
        "a daemon still serves"
    );
    for (args, d) in [&["gc"][..], &["gc", "--dry-run"], &["fsck"], &["sessions"]]
        .iter()
        .zip(&daemon)
    {
        let offline = doc(args);
        assert_eq!(shape(&offline), shape(d), "{args:?}: {offline} vs {d}");
        assert_eq!(offline["ok"], true);
    }
    assert!(daemon[0]["operations_pruned"].is_u64(), "{}", daemon[0]);
}

#[test]
fn fsck_damage_exits_7_with_only_its_report() {
    let m = Mount::new();
    fs::write(m.p("f"), b"data").unwrap();
    m.umount();
    {
        // A branch naming a checkpoint that does not exist.
        use treefork::store::ObjectStore;
        let _lock = treefork::lock::StoreLock::acquire(&m.store).unwrap();
        let s = treefork::store::PackStore::open(&m.store).unwrap();
        let rec = format!(r#"{{"checkpoint":"{}","created":0}}"#, "ab".repeat(32));
        s.commit(vec![treefork::meta::MetaOp::Put(
            treefork::meta::ref_key("dangling"),
            rec.into_bytes(),
        )])
        .unwrap();
    }
    let o = tf(&m.store, &["fsck", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Exactly one document: the report, no error document after it.
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], false, "{v}");
    assert!(!v["fsck"]["problems"].as_array().unwrap().is_empty(), "{v}");
    let o = tf(&m.store, &["fsck"]);
    assert_eq!(o.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&o.stdout).contains("DAMAGED"));
}

/// Run `script` in bash; its stdout.
fn bash(script: &str) -> String {
    let o = Command::new("bash").arg("-c").arg(script).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn bash_completion_completes_commands_and_options() {
    // What bash offers after `words` (the last one being completed), called as
    // bash calls it: `_treefork COMMAND CURRENT PREVIOUS`.
    let complete = |words: &str| {
        let w: Vec<&str> = words.split(' ').collect();
        let quoted: Vec<String> = w.iter().map(|x| format!("'{x}'")).collect();
        let n = w.len() - 1;
        bash(&format!(
            "source <('{}' completions bash)\nCOMP_WORDS=({}); COMP_CWORD={n}\n_treefork treefork '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            bin(),
            quoted.join(" "),
            w[n],
            w[n - 1]
        ))
    };
    let out = complete("treefork mou");
    assert!(out.lines().any(|l| l == "mount"), "{out}");
    assert!(out.lines().any(|l| l == "mount-helper"), "{out}");
    let out = complete("treefork gc --dr");
    assert_eq!(out.trim(), "--dry-run");
    let out = complete("treefork completions ");
    for shell in ["bash", "zsh", "fish"] {
        assert!(out.lines().any(|l| l == shell), "{out}");
    }
    for shell in ["zsh", "fish"] {
        let o = Command::new(bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && s.contains("experiment"),
            "{shell}: {s}"
        );
    }
}

/// The commands `treefork --help` lists.
fn listed_commands() -> Vec<String> {
    let o = Command::new(bin()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let cmds: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(cmds.len() > 20, "{help}");
    cmds
}

#[test]
fn man_page_renders_and_lists_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("treefork.1");
    let o = Command::new(bin()).arg("man").output().unwrap();
    assert!(o.status.success());
    fs::write(&page, &o.stdout).unwrap();
    // nroff renders it without a warning (wide lines, no hyphenation; bold
    // overstrikes removed, so words stay whole).
    let r = Command::new("nroff")
        .args(["-man", "-ww", "-Tascii", "-rLL=250n", "-rHY=0"])
        .arg(&page)
        .output()
        .expect("nroff (groff-base, scripts/install-test-tools.sh)");
    assert!(r.status.success());
    assert!(
        r.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let mut text = String::new();
    for c in String::from_utf8_lossy(&r.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    for cmd in listed_commands() {
        // Every command is named in the page (as `treefork-CMD(1)`).
        let want = format!("treefork-{cmd}(1)");
        assert!(
            words.iter().any(|w| w.starts_with(&want)),
            "{cmd} missing:\n{text}"
        );
    }
    assert!(
        text.contains("Exit status") && text.contains("BASELINE_CONFLICT"),
        "{text}"
    );
    // --out-dir writes one page per command, each renderable.
    let dir = tmp.path().join("man1");
    let o = Command::new(bin())
        .args(["man", "--out-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    for cmd in listed_commands() {
        assert!(dir.join(format!("treefork-{cmd}.1")).exists(), "{cmd}");
    }
    let o = Command::new(bin())
        .args(["man", "session", "rm"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("treefork\\-session\\-rm"));
    // A command's SYNOPSIS names its options' values and its arguments.
    let o = Command::new(bin()).args(["man", "mount"]).output().unwrap();
    let page = tmp.path().join("treefork-mount.1");
    fs::write(&page, &o.stdout).unwrap();
    let r = Command::new("nroff")
        .args(["-man", "-ww", "-Tascii", "-rLL=400n", "-rHY=0"])
        .arg(&page)
        .output()
        .unwrap();
    // Overstrikes (bold, underline) removed, as above.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&r.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    let synopsis = text
        .split("SYNOPSIS")
        .nth(1)
        .and_then(|t| t.split("DESCRIPTION").next())
        .unwrap_or_else(|| panic!("no SYNOPSIS:\n{text}"));
    let synopsis = synopsis.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "treefork mount",
        "[--session SESSION]",
        "[--from DIR]",
        "<MOUNTPOINT>",
    ] {
        assert!(synopsis.contains(want), "{want} missing:\n{synopsis}");
    }
    assert!(
        !synopsis.contains("--store"),
        "global options on a command's page:\n{synopsis}"
    );
}

/// Real mount(8): `mount -t fuse.treefork` and an fstab line (`mount -T FILE`)
/// find /sbin/mount.fuse.treefork (a symlink to treefork, what
/// scripts/install-mount-helper.sh installs). mount(8) searches only /sbin for
/// helpers, so the script runs in a private mount namespace where an overlay puts
/// the helper beside the system's, leaving the machine's /sbin alone.
#[test]
fn mount_t_fuse_treefork_and_fstab_use_the_helper() {
    let tmp = tempfile::Builder::new()
        .prefix("tf-helper-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let helpers = t.join("sbin");
    fs::create_dir(&helpers).unwrap();
    std::os::unix::fs::symlink(bin(), helpers.join("mount.fuse.treefork")).unwrap();
    for d in ["m1", "m2"] {
        fs::create_dir(t.join(d)).unwrap();
    }
    let store = t.join("store");
    let (m1, m2) = (t.join("m1"), t.join("m2"));
    fs::write(
        t.join("fstab"),
        format!(
            "s1 {} fuse.treefork store={},noauto,x-systemd.automount 0 0\n",
            m2.display(),
            store.display()
        ),
    )
    .unwrap();
    let script = format!(
        r#"set -eu
mount -t overlay overlay -o lowerdir={helpers}:/usr/sbin /usr/sbin
mount -t fuse.treefork s1 {m1} -o store={store},task=from-mount
echo written-through-mount > {m1}/f
{bin} --store {store} -C {m1} status --json > {t}/status.json
{bin} --store {store} umount {m1}
if mount -t fuse.treefork s1 {m1} -o store={store},ro 2> {t}/ro.err; then exit 9; fi
mountpoint -q {m1} && exit 10
mount -T {t}/fstab {m2}
cat {m2}/f > {t}/read-back
{bin} --store {store} session show s1 --json > {t}/show.json
{bin} --store {store} umount {m2}
"#,
        helpers = helpers.display(),
        m1 = m1.display(),
        m2 = m2.display(),
        store = store.display(),
        bin = bin(),
        t = t.display(),
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env_remove("TREEFORK_STORE")
        .env_remove("TREEFORK_SOCKET")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "status {:?}: {}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr),
        crate::harness::daemon_log(&store)
    );
    // The session mounted by mount(8) was a real workspace: status saw the write,
    // and the fstab mount of the same session read it back.
    let status: Value = serde_json::from_slice(&fs::read(t.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["changes"][0]["path"], "f", "{status}");
    assert_eq!(
        fs::read_to_string(t.join("read-back")).unwrap(),
        "written-through-mount\n"
    );
    let show: Value = serde_json::from_slice(&fs::read(t.join("show.json")).unwrap()).unwrap();
    assert!(
        show.to_string().contains("from-mount"),
        "task= reached the session: {show}"
    );
    let ro = fs::read_to_string(t.join("ro.err")).unwrap();
    assert!(ro.contains("`ro`"), "{ro}");
}
