//! Issue 38 defect 4: the web UI's token and cookie reach another uid. An agent
//! (uid 65534) that got hold of the session cookie (browsers send it to every
//! port of 127.0.0.1) or the URL must get nothing: the server answers only
//! connections from its own uid, the token works once and is not the cookie, and
//! `--open` puts the token in no argv.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::Mount;
use crate::hostile::as_agent;
use crate::ui::{Ui, csrf_of, http, set_cookie};

/// A fake `xdg-open` first on `PATH`: it writes its pid and its arguments (one a
/// line) to `argv`, then sleeps, keeping its argv visible in /proc. Killed on drop.
pub(crate) struct FakeOpener {
    dir: tempfile::TempDir,
}

impl FakeOpener {
    pub fn new() -> FakeOpener {
        let dir = tempfile::Builder::new()
            .prefix("tf-open-")
            .tempdir()
            .unwrap();
        let rec = dir.path().join("argv");
        let script = format!(
            "#!/bin/sh\n{{ echo $$; printf '%s\\n' \"$@\"; }} > {}.tmp\nmv {0}.tmp {0}\nsleep 60\n",
            rec.display()
        );
        let exe = dir.path().join("xdg-open");
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeOpener { dir }
    }

    /// `PATH` with the fake first.
    pub fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The fake's pid and arguments, once it ran (10 s at most).
    pub fn wait_call(&self) -> (i32, Vec<String>) {
        let rec = self.dir.path().join("argv");
        let start = Instant::now();
        while !rec.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "xdg-open was not run"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&rec).unwrap();
        let mut lines = text.lines();
        let pid = lines.next().unwrap().parse().unwrap();
        (pid, lines.map(String::from).collect())
    }
}

impl Drop for FakeOpener {
    fn drop(&mut self) {
        if let Ok(t) = std::fs::read_to_string(self.dir.path().join("argv"))
            && let Some(Ok(pid)) = t.lines().next().map(str::parse::<i32>)
        {
            // SAFETY: kill with a pid and a signal number.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The URL a page written by `ui --open` redirects to (its meta refresh).
pub(crate) fn redirect_target(html: &str) -> String {
    html.split("content=\"0;url=")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no meta refresh in {html}"))
        .replace("&amp;", "&")
}

/// Send `request` to the UI from a python3 process, as [`super::AGENT_UID`] when
/// `agent`; the status and the whole answer.
fn http_from(port: u16, request: &str, agent: bool) -> (u16, String) {
    const SEND: &str = "import socket, sys\n\
        s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
        s.sendall(sys.stdin.buffer.read())\n\
        while True:\n    b = s.recv(65536)\n    if not b: break\n    sys.stdout.buffer.write(b)\n";
    let mut c = Command::new("/usr/bin/python3");
    c.args(["-c", SEND, &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if agent {
        as_agent(&mut c);
    }
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {out:?}"));
    (status, out)
}

/// The user's exchange of the token: the `Cookie:` header line it earned.
fn exchange(ui: &Ui) -> String {
    let (st, r) = http(
        ui.port,
        &format!(
            "GET /?token={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            ui.token, ui.port
        ),
    );
    // (303: before issue 38, the answer was a redirect.)
    assert!(st == 200 || st == 303, "{r}");
    format!("Cookie: {}\r\n", set_cookie(&r))
}

fn get(port: u16, path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n")
}

#[test]
fn ui_refuses_another_uid_holding_the_session_cookie() {
    let m = Mount::new();
    let ui = Ui::start(&m.store);
    let cookie = exchange(&ui);
    let (st, page) = http_from(ui.port, &get(ui.port, "/", &cookie), false);
    assert_eq!(st, 200, "the user's own request: {page}");
    let body = r#"{"op":"sessions"}"#;
    let list = format!(
        "POST /api/call HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n{cookie}X-Treefork-Csrf: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        csrf_of(&page),
        body.len(),
        p = ui.port,
    );
    let (st, answer) = http_from(ui.port, &list, true);
    assert_eq!(st, 403, "the agent with the user's cookie: {answer}");
    assert!(answer.contains("uid 65534"), "{answer}");
    assert!(!answer.contains("\"s\""), "{answer}");
    let (st, answer) = http_from(ui.port, &get(ui.port, "/", &cookie), true);
    assert_eq!(st, 403, "{answer}");
    // The same request from the user's uid works.
    let (st, answer) = http_from(ui.port, &list, false);
    assert_eq!(st, 200, "{answer}");
    assert!(answer.contains("\"s\""), "{answer}");
}

#[test]
fn ui_token_works_once_and_the_cookie_is_not_the_token() {
    let m = Mount::new();
    let ui = Ui::start(&m.store);
    let cookie = exchange(&ui);
    let value = cookie.trim_end().rsplit('=').next().unwrap();
    assert_ne!(value, ui.token, "the session cookie is the token");
    assert!(!value.contains(&ui.token) && !ui.token.contains(value));
    assert_eq!(value.len(), 32, "128 bits in hex: {value}");
    assert!(value.bytes().all(|b| b.is_ascii_hexdigit()), "{value}");
    let again = get(ui.port, &format!("/?token={}", ui.token), "");
    let (st, r) = http(ui.port, &again);
    assert_eq!(st, 403, "the second use of the link: {r}");
    assert!(r.contains("used already"), "{r}");
    assert!(!r.to_ascii_lowercase().contains("set-cookie"), "{r}");
    // The token as a cookie is nothing; the session cookie works.
    let as_cookie = format!("Cookie: treefork_ui_{}={}\r\n", ui.port, ui.token);
    assert_eq!(http(ui.port, &get(ui.port, "/", &as_cookie)).0, 401);
    assert_eq!(http(ui.port, &get(ui.port, "/", &cookie)).0, 200);
}

/// Every /proc/PID/cmdline uid 65534 can read that contains `needle`.
fn cmdlines_with(needle: &str) -> String {
    const SCAN: &str = "import os, sys\n\
        n = sys.stdin.buffer.read()\n\
        for p in os.listdir('/proc'):\n\
        \x20   if not p.isdigit(): continue\n\
        \x20   try:\n\
        \x20       c = open('/proc/%s/cmdline' % p, 'rb').read()\n\
        \x20   except OSError:\n\
        \x20       continue\n\
        \x20   if n in c: print(p, c.replace(b'\\0', b' ').decode(errors='replace'))\n\
        print('scanned')\n";
    let mut c = Command::new("/usr/bin/python3");
    c.args(["-c", SCAN])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    as_agent(&mut c);
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(needle.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.strip_suffix("scanned\n")
        .unwrap_or_else(|| panic!("the scan did not finish: {out}"))
        .to_string()
}

#[test]
fn ui_open_puts_the_token_in_no_argv() {
    let m = Mount::new();
    let opener = FakeOpener::new();
    let runtime = tempfile::Builder::new()
        .prefix("tf-run-")
        .tempdir()
        .unwrap();
    // A runtime directory is private (else the UI falls back to the temp dir).
    std::fs::set_permissions(runtime.path(), PermissionsExt::from_mode(0o700)).unwrap();
    let path = opener.path_var();
    let mut ui = Ui::start_with(
        &m.store,
        &["--open"],
        &[
            ("PATH", &path),
            ("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap()),
        ],
    );
    let (_, argv) = opener.wait_call();
    let found = cmdlines_with(&ui.token);
    assert_eq!(found, "", "the token in a command line the agent reads");
    assert_eq!(argv.len(), 1, "{argv:?}");
    assert!(!argv[0].contains(&ui.token), "{argv:?}");
    let file = argv[0]
        .strip_prefix("file://")
        .unwrap_or_else(|| panic!("not a file URL: {argv:?}"));
    let file = Path::new(file);
    let dir = file.parent().unwrap();
    assert_eq!(dir.parent(), Some(runtime.path()), "{file:?}");
    let meta = |p: &Path| std::fs::symlink_metadata(p).unwrap();
    assert_eq!(meta(file).mode() & 0o7777, 0o600, "{file:?}");
    assert_eq!(meta(dir).mode() & 0o7777, 0o700, "{dir:?}");
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_eq!((meta(file).uid(), meta(dir).uid()), (me, me));
    // It redirects to the URL, which works once.
    let url = redirect_target(&std::fs::read_to_string(file).unwrap());
    assert_eq!(url, ui.url);
    let use_it = get(ui.port, &format!("/?token={}", ui.token), "");
    assert_eq!(http(ui.port, &use_it).0, 200);
    assert_eq!(http(ui.port, &use_it).0, 403);
    // Stopped, the UI removes the file and its directory.
    // SAFETY: kill with a pid and a signal number.
    unsafe { libc::kill(ui.child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    while ui.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "ui did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!dir.exists(), "{dir:?} left behind");
}
