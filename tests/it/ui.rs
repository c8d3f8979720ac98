//! `treefork ui` in a real browser: Debian's chromium, headless, driven over the
//! DevTools protocol (`headless_chrome`), against a real daemon whose sessions
//! `scripts/ui-sessions.sh` made (commands, a failing one, a note, messages, a
//! branch, a fork, an experiment, a promote conflict). Every page must load
//! without a console error and show the facts asserted on its DOM; the timeline
//! must follow a command run while it is open; the Checkpoint button must make a
//! checkpoint. Screenshots go to `target/ui-screenshots/` (CI keeps them as
//! artefacts). Also: the server's guards, with plain HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::Value;

use crate::harness::{bin, daemon_log, tf, tf_ok};

/// The sessions of `scripts/ui-sessions.sh`, mounted; unmounted on drop.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::Builder::new().prefix("tf-ui-").tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ui-sessions.sh");
        let o = Command::new("bash")
            .arg(&script)
            .arg(dir.path())
            .arg(bin())
            .env_remove("TREEFORK_STORE")
            .env_remove("TREEFORK_SOCKET")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ui-sessions.sh failed: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            daemon_log(&dir.path().join("store"))
        );
        Scene { dir }
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for mp in ["fork", "ws"] {
            let _ = tf(
                &self.store(),
                &["umount", self.dir.path().join(mp).to_str().unwrap()],
            );
        }
    }
}

/// A running `treefork ui --port 0`; killed on drop.
pub(crate) struct Ui {
    pub child: Child,
    _stdout: BufReader<std::process::ChildStdout>,
    pub url: String,
    pub port: u16,
    pub token: String,
}

impl Ui {
    pub fn start(store: &Path) -> Ui {
        Self::start_with(store, &[], &[])
    }

    /// [`Ui::start`] with extra arguments and environment variables.
    pub fn start_with(store: &Path, extra: &[&str], env: &[(&str, &str)]) -> Ui {
        let mut child = Command::new(bin())
            .arg("--store")
            .arg(store)
            .args(["ui", "--port", "0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        let port = url["http://127.0.0.1:".len()..]
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let token = url.split("token=").nth(1).unwrap().to_string();
        Ui {
            child,
            _stdout: stdout,
            url,
            port,
            token,
        }
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's chromium; in CI it must be there (`scripts/install-test-tools.sh`).
fn chromium() -> Option<PathBuf> {
    for p in ["/usr/lib/chromium/chromium", "/usr/bin/chromium"] {
        if Path::new(p).exists() {
            return Some(PathBuf::from(p));
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium is not installed (apt-get install chromium)"
    );
    eprintln!("skipping: chromium is not installed");
    None
}

fn shots_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A browser tab that records console errors and uncaught exceptions.
struct Page {
    _browser: Browser,
    tab: Arc<Tab>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Page {
    fn open(chrome: PathBuf) -> Page {
        let opts = LaunchOptions::default_builder()
            .path(Some(chrome))
            .headless(true)
            .sandbox(false)
            .window_size(Some((1400, 1100)))
            .idle_browser_timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let browser = Browser::new(opts).unwrap();
        let tab = browser.new_tab().unwrap();
        tab.set_default_timeout(Duration::from_secs(20));
        tab.enable_log().unwrap();
        tab.enable_runtime().unwrap();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let e2 = errors.clone();
        tab.add_event_listener(Arc::new(move |ev: &Event| {
            let what = match ev {
                Event::RuntimeConsoleAPICalled(c) if format!("{:?}", c.params.Type) == "Error" => {
                    Some(format!("console.error: {:?}", c.params.args))
                }
                Event::RuntimeExceptionThrown(x) => {
                    Some(format!("exception: {:?}", x.params.exception_details))
                }
                Event::LogEntryAdded(l) if format!("{:?}", l.params.entry.level) == "Error" => {
                    Some(format!(
                        "log: {} {:?}",
                        l.params.entry.text, l.params.entry.url
                    ))
                }
                _ => None,
            };
            if let Some(w) = what {
                e2.lock().unwrap().push(w);
            }
        }))
        .unwrap();
        Page {
            _browser: browser,
            tab,
            errors,
        }
    }

    /// Evaluate `js` (an expression; a promise is awaited) as JSON.
    fn eval(&self, js: &str) -> Value {
        self.try_eval(js)
            .unwrap_or_else(|e| panic!("evaluate {js}: {e}"))
    }

    /// [`Page::eval`], an error when the page cannot evaluate now (navigating).
    fn try_eval(&self, js: &str) -> Result<Value, String> {
        let r = self
            .tab
            .evaluate(
                &format!("(async () => JSON.stringify(await ({js})))()"),
                true,
            )
            .map_err(|e| e.to_string())?;
        let s = r.value.and_then(|v| v.as_str().map(String::from));
        Ok(s.map(|s| serde_json::from_str(&s).unwrap())
            .unwrap_or(Value::Null))
    }

    /// Wait until `js` is truthy (20 s at most); evaluation errors while the page
    /// navigates are retried.
    fn wait(&self, what: &str, js: &str) {
        let start = Instant::now();
        loop {
            if self.try_eval(js).ok().and_then(|v| v.as_bool()) == Some(true) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what} ({js}); page: {}",
                self.eval("document.getElementById('main').innerText + ' | error: ' + document.getElementById('error').innerText")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Go to `hash` and wait for page `page` to finish rendering.
    fn visit(&self, hash: &str, page: &str) {
        let before = self.eval("Number(document.body.dataset.rendered || 0)");
        self.eval(&format!(
            "location.hash = {}",
            serde_json::to_string(hash).unwrap()
        ));
        self.wait(
            &format!("page {page}"),
            &format!(
                "document.body.dataset.page === '{page}' && Number(document.body.dataset.rendered) > {before}"
            ),
        );
    }

    fn text(&self, selector: &str) -> String {
        self.eval(&format!(
            "document.querySelector({})?.innerText ?? null",
            serde_json::to_string(selector).unwrap()
        ))
        .as_str()
        .unwrap_or_else(|| panic!("no element {selector}"))
        .to_string()
    }

    fn count(&self, selector: &str) -> u64 {
        self.eval(&format!(
            "document.querySelectorAll({}).length",
            serde_json::to_string(selector).unwrap()
        ))
        .as_u64()
        .unwrap()
    }

    fn shot(&self, name: &str) {
        let png = self
            .tab
            .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
            .unwrap();
        std::fs::write(shots_dir().join(format!("{name}.png")), png).unwrap();
    }

    fn no_errors(&self, page: &str) {
        let e = self.errors.lock().unwrap();
        assert!(e.is_empty(), "console errors on {page}: {e:#?}");
    }
}

#[test]
fn ui_pages_show_the_sessions_in_a_real_browser() {
    let Some(chrome) = chromium() else { return };
    let scene = Scene::new();
    let ui = Ui::start(&scene.store());
    let page = Page::open(chrome);
    page.tab.navigate_to(&ui.url).unwrap();
    page.tab.wait_until_navigated().unwrap();
    page.wait(
        "the sessions page",
        "document.body.dataset.page === 'sessions' && !!document.getElementById('sessions-table')",
    );
    // The token left the address bar (a session cookie replaced it).
    assert_eq!(page.eval("location.search"), Value::from(""));

    // Sessions: the two mounted ones and the experiment's winner fork, with the
    // fork lineage as a tree.
    let names = page.eval("[...document.querySelectorAll('#sessions-table tr[data-session]')].map(r => r.dataset.session)");
    let names: Vec<&str> = names
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fix-parser") && names.contains(&"fix-parser-alt"),
        "{names:?}"
    );
    assert!(
        page.text("tr[data-session=fix-parser] td.task")
            .contains("fix the parser")
    );
    assert!(
        page.text("tr[data-session='fix-parser-alt']")
            .contains("mounted")
    );
    assert_eq!(
        page.count("#lineage li[data-lineage=fix-parser] li[data-lineage=fix-parser-alt]"),
        1,
        "the fork is drawn under its parent"
    );
    page.shot("sessions");
    page.no_errors("sessions");

    // The timeline: both commands with their exit status, the note, the
    // messages, the fork, the experiment fanning out into its runs, the branch.
    page.visit("#/s/fix-parser", "timeline");
    let execs = page.eval("[...document.querySelectorAll('.event[data-kind=exec]')].map(e => [e.querySelector('code.cmd').innerText, e.querySelector('.exit').innerText])");
    let execs = execs.as_array().unwrap();
    assert_eq!(execs.len(), 2, "{execs:?}");
    assert!(
        execs.iter().any(|e| e[1] == "exit 1"),
        "the failing reproduction: {execs:?}"
    );
    assert!(
        execs
            .iter()
            .any(|e| e[1] == "exit 0" && e[0].as_str().unwrap().starts_with("python3 -c "))
    );
    assert!(page.text(".event[data-kind=note]").contains("no maxsplit"));
    assert_eq!(page.count(".event[data-kind=message]"), 3);
    assert!(
        page.text(".event[data-kind=fork]")
            .contains("fix-parser-alt")
    );
    assert_eq!(page.count(".event[data-kind=experiment] svg circle.run"), 3);
    assert_eq!(
        page.count(".event[data-kind=experiment] svg circle.run.winner"),
        1
    );
    assert!(
        page.text(".event[data-kind=checkpoint]")
            .contains("split once")
    );
    let tag =
        page.eval("document.querySelector('.event[data-kind=checkout] svg text')?.textContent");
    assert_eq!(
        tag,
        Value::from("work"),
        "the branch made by checkout -b is tagged"
    );
    page.shot("timeline");

    // Live: a command run now appears without a reload.
    let ws = scene.ws();
    tf_ok(
        &scene.store(),
        &[
            "-C",
            ws.to_str().unwrap(),
            "exec",
            "--",
            "touch",
            "live-file",
        ],
    );
    page.wait(
        "the new command on the open timeline",
        "[...document.querySelectorAll('.event[data-kind=exec] code.cmd')].some(c => c.innerText === 'touch live-file')",
    );
    // The Checkpoint button makes one (recorded as the UI's).
    page.eval("document.getElementById('do-checkpoint').click()");
    page.wait(
        "the checkpoint made from the page",
        "[...document.querySelectorAll('.event[data-kind=checkpoint]')].some(c => c.innerText.includes('from the web UI'))",
    );
    let log = tf_ok(&scene.store(), &["-C", ws.to_str().unwrap(), "log"]);
    assert!(log.contains("from the web UI"), "{log}");
    page.no_errors("timeline");

    // Diff, unified then side by side: the fix against the first version.
    let fix = checkpoint_id(&scene, "split once");
    page.visit(&format!("#/s/fix-parser/diff?a={fix}~&b={fix}"), "diff");
    page.shot("diff");
    assert!(page.count("#diff-files li[data-path='src/parse.py']") == 1);
    let added = page.eval("[...document.querySelectorAll('.file-diff[data-path=\"src/parse.py\"] tr.add td.code')].map(t => t.innerText)");
    assert!(added.to_string().contains("split(\\\"=\\\", 1)"), "{added}");
    page.eval("document.getElementById('view-split').click()");
    page.wait(
        "the side-by-side view",
        "!!document.querySelector('table.diff.split td.code.add')",
    );
    page.shot("diff");
    // What the session changed since it started (the `baseline` side).
    page.visit("#/s/fix-parser/diff?a=baseline&b=WORKING", "diff");
    assert_eq!(page.count("#diff-files li[data-path='src/parse.py']"), 1);
    assert_eq!(page.count("#diff-files li[data-path='live-file']"), 1);
    // A file at a ref.
    page.visit(
        &format!("#/s/fix-parser/file?ref={fix}&path=src/parse.py"),
        "file",
    );
    assert!(page.text("#file-text").contains("split(\"=\", 1)"));
    page.no_errors("diff and file");

    // The experiment: three runs, one failed, the winner marked, pairwise diffs.
    let id = page_experiment_id(&scene);
    page.visit(&format!("#/s/fix-parser/exp/{id}"), "experiment");
    assert_eq!(page.count("#runs tbody tr"), 3);
    assert_eq!(page.count("#runs tr.winner"), 1);
    assert!(page.text("#runs").contains("exit 1"));
    assert!(page.text("#winner").contains("run "));
    assert!(page.count(".pair") >= 2);
    page.shot("experiment");

    // Promote preview: the upstream commit on src/parse.py is a conflict.
    page.visit("#/s/fix-parser/promote", "promote");
    assert_eq!(
        page.count("#promote-changes tr.conflict[data-path='src/parse.py']"),
        1
    );
    assert!(page.text("#next").contains("BASELINE_CONFLICT"));
    page.shot("promote");
    page.no_errors("experiment and promote");

    // Issue 39: an operation's `--explanation` is on its row, and an
    // interrupted experiment says so (and by which signal) on its row and page
    // instead of "winner none, success rate 100 %".
    tf_ok(
        &scene.store(),
        &[
            "-C",
            ws.to_str().unwrap(),
            "--explanation",
            "see whether the parser builds",
            "exec",
            "--",
            "true",
        ],
    );
    interrupt_an_experiment(&scene);
    page.visit("#/s/fix-parser", "timeline");
    let why = page.eval(
        "[...document.querySelectorAll('.event[data-kind=exec] .why')].map(w => w.innerText)",
    );
    assert!(
        why.to_string()
            .contains("why: see whether the parser builds"),
        "{why}"
    );
    let row = page.text(".event[data-kind=experiment] .interrupted");
    assert_eq!(row, "interrupted by SIGINT");
    let id = page_experiment_id(&scene);
    page.visit(&format!("#/s/fix-parser/exp/{id}"), "experiment");
    let outcome = page.text("#winner");
    assert!(outcome.contains("interrupted by SIGINT"), "{outcome}");
    assert!(!page.text("#main").contains("success rate"));
    page.shot("interrupted");
    page.no_errors("explanation and interrupted experiment");
}

/// An experiment in the scene's workspace, stopped by SIGINT once its runs
/// are going.
fn interrupt_an_experiment(scene: &Scene) {
    let child = Command::new(bin())
        .arg("--store")
        .arg(scene.store())
        .args(["experiment", "-c", "sleep 43.5", "-c", "sleep 43.5"])
        .current_dir(scene.ws())
        .env_remove("TREEFORK_SOCKET")
        .env_remove("TREEFORK_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let running = || {
        let o = Command::new("pgrep")
            .args(["-c", "-f", "^sleep 43.5$"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "2"
    };
    while !running() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the runs never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGINT));
}

/// `ui --open`'s way in a real browser: the file handed to xdg-open redirects to
/// the token URL, whose answer sets the session cookie and moves on to `/`; the
/// strict cookie must be sent there although the first navigation came from a
/// `file://` page (another site).
#[test]
fn ui_open_file_leads_a_real_browser_to_the_page() {
    let Some(chrome) = chromium() else { return };
    let m = crate::harness::Mount::new();
    let opener = crate::hostile::ui::FakeOpener::new();
    let path = opener.path_var();
    let _ui = Ui::start_with(&m.store, &["--open"], &[("PATH", &path)]);
    let (_, argv) = opener.wait_call();
    assert_eq!(argv.len(), 1, "{argv:?}");
    assert!(argv[0].starts_with("file:///"), "{argv:?}");
    let page = Page::open(chrome);
    page.tab.navigate_to(&argv[0]).unwrap();
    page.wait(
        "the sessions page",
        "location.protocol === 'http:' && document.body.dataset.page === 'sessions' && !!document.querySelector('#sessions-table tr[data-session=s]')",
    );
    assert_eq!(page.eval("location.search"), Value::from(""));
    page.no_errors("sessions, through the --open file");
}

/// The id of the checkpoint of the scene's session with `message`, from the CLI.
fn checkpoint_id(scene: &Scene, message: &str) -> String {
    let out = tf_ok(
        &scene.store(),
        &["--json", "-C", scene.ws().to_str().unwrap(), "log"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let c = v["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["message"] == message);
    c.unwrap_or_else(|| panic!("no checkpoint {message:?} in {out}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The id of the scene's experiment, from the CLI.
fn page_experiment_id(scene: &Scene) -> String {
    let out = tf_ok(
        &scene.store(),
        &[
            "--json",
            "-C",
            scene.ws().to_str().unwrap(),
            "experiment",
            "show",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// One raw HTTP/1.1 request; the status and the whole answer.
pub(crate) fn http(port: u16, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out)
}

/// The CSRF secret a served page carries.
pub(crate) fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" content=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no CSRF secret in {page}"))
        .split('"')
        .next()
        .unwrap()
        .to_string()
}

/// The `name=value` of the answer's `Set-Cookie`.
pub(crate) fn set_cookie(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .unwrap_or_else(|| panic!("no Set-Cookie in {answer}"))
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

pub(crate) fn post(ui: &Ui, headers: &str, body: &str) -> (u16, String) {
    http(
        ui.port,
        &format!(
            "POST /api/call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            ui.port,
            body.len()
        ),
    )
}

#[test]
fn ui_refuses_requests_without_its_token_or_from_other_sites() {
    let scene = Scene::new();
    let ui = Ui::start(&scene.store());
    let get = |path: &str, extra: &str| {
        http(
            ui.port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{extra}Connection: close\r\n\r\n",
                ui.port
            ),
        )
    };
    assert_eq!(get("/", "").0, 401, "no cookie");
    assert_eq!(get("/?token=00", "").0, 401, "wrong token");
    let (st, r) = get(&format!("/?token={}", ui.token), "");
    assert_eq!(st, 200);
    assert!(r.contains("HttpOnly; SameSite=Strict"), "{r}");
    let cookie = format!("Cookie: {}\r\n", set_cookie(&r));
    let (st, page) = get("/", &cookie);
    assert_eq!(st, 200);
    assert!(page.contains("Content-Security-Policy") || page.contains("content-security-policy"));
    let csrf = csrf_of(&page);
    // DNS rebinding: another name for this address.
    let (st, _) = http(
        ui.port,
        &format!(
            "GET / HTTP/1.1\r\nHost: evil.example:{}\r\n{cookie}Connection: close\r\n\r\n",
            ui.port
        ),
    );
    assert_eq!(st, 403, "a foreign Host is refused");
    let sessions = r#"{"op":"sessions"}"#;
    assert_eq!(post(&ui, &cookie, sessions).0, 403, "no CSRF header");
    let csrf_h = format!("{cookie}X-Treefork-Csrf: {csrf}\r\n");
    let foreign = format!("{csrf_h}Origin: http://evil.example\r\n");
    assert_eq!(
        post(&ui, &foreign, sessions).0,
        403,
        "a cross-origin request"
    );
    let (st, body) = post(&ui, &csrf_h, sessions);
    assert_eq!(st, 200, "{body}");
    assert!(body.contains("fix-parser"));
    // Only the listed verbs pass: no unmount, no session removal, no real promote.
    for op in [
        r#"{"op":"umount","mountpoint":"/"}"#,
        r#"{"op":"session_rm","name":"fix-parser-alt"}"#,
        r#"{"op":"shutdown"}"#,
    ] {
        let (st, body) = post(&ui, &csrf_h, op);
        assert_eq!(st, 400, "{op}: {body}");
        assert!(body.contains("not available in the web UI"), "{body}");
    }
    let (st, body) = post(
        &ui,
        &csrf_h,
        r#"{"op":"promote","session":"fix-parser","dry_run":false}"#,
    );
    assert_eq!(st, 200);
    assert!(body.contains("\"dry_run\":true"), "{body}");
    // The two mutations work, and the log says they came from the UI.
    let (st, body) = post(
        &ui,
        &csrf_h,
        r#"{"op":"checkpoint","session":"fix-parser","message":"via http"}"#,
    );
    assert_eq!(st, 200, "{body}");
    let ops = tf_ok(
        &scene.store(),
        &["--json", "-C", scene.ws().to_str().unwrap(), "op", "log"],
    );
    assert!(ops.contains("from treefork ui"), "{ops}");
    // A daemon that is gone is a clear error, not a hang.
    drop(scene);
    let (_, body) = post(&ui, &csrf_h, sessions);
    assert!(body.contains("no treefork daemon is running"), "{body}");
}
