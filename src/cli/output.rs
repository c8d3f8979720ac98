//! The output layer: the one place that decides between output for people and
//! `--json`, and the formatting helpers human output shares.
//!
//! A command returns an [`Outcome`]: usually a [`Reply`], the daemon's response
//! (or the equivalent built in this process) kept verbatim for `--json`, plus a
//! typed body that renders it for people through [`Human`]. [`emit`] prints one or
//! the other, then applies the body's verdict (a report can be printed and still
//! end the process with an error, as `fsck` does on damage). No command prints its
//! result itself.

use std::io::{self, IsTerminal, Write};
use std::process::Command;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;

use super::failure::Reported;
use serde_json::Value;

/// How a result renders for people.
pub trait Human {
    /// Write the human form to `out`.
    fn human(&self, out: &mut dyn Write) -> io::Result<()>;

    /// After the result is printed: an error to end the process with, if any.
    fn verdict(&self) -> Result<()> {
        Ok(())
    }
}

/// A result: the raw JSON document (printed verbatim with `--json`) and its typed
/// body (rendered for people).
pub struct Reply<T> {
    raw: Value,
    /// The typed view of the result.
    pub body: T,
}

impl<T: DeserializeOwned> Reply<T> {
    /// Type a JSON result (a daemon response, or one built in this process).
    pub fn parse(raw: Value) -> Result<Reply<T>> {
        let body = serde_json::from_value(raw.clone())
            .with_context(|| format!("unexpected reply from the daemon: {raw}"))?;
        Ok(Reply { raw, body })
    }
}

impl<T> Reply<T> {
    /// A result built in this process: `raw` for `--json`, `body` for people.
    pub fn new(raw: Value, body: T) -> Reply<T> {
        Reply { raw, body }
    }

    /// Add a field to the JSON form.
    pub fn with_field(mut self, key: &str, value: Value) -> Reply<T> {
        if let Some(o) = self.raw.as_object_mut() {
            o.insert(key.into(), value);
        }
        self
    }

    /// The same JSON with a different typed body (e.g. one that also knows the
    /// command's arguments).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Reply<U> {
        Reply {
            raw: self.raw,
            body: f(self.body),
        }
    }
}

/// A body for results whose content the human form does not use.
#[derive(serde::Deserialize)]
pub struct Ignored {}

/// What a command produced.
pub enum Outcome {
    /// Nothing to print (the daemon ran in this process).
    Silent,
    /// A result to print.
    Report(Box<dyn Report>),
}

/// A printable result (implemented by every [`Reply`] whose body is [`Human`]).
pub trait Report {
    /// The `--json` form.
    fn json(&self) -> &Value;
    /// The human form.
    fn human(&self, out: &mut dyn Write) -> io::Result<()>;
    /// See [`Human::verdict`].
    fn verdict(&self) -> Result<()>;
}

impl<T: Human> Report for Reply<T> {
    fn json(&self) -> &Value {
        &self.raw
    }
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        self.body.human(out)
    }
    fn verdict(&self) -> Result<()> {
        self.body.verdict()
    }
}

impl<T: Human + 'static> From<Reply<T>> for Outcome {
    fn from(r: Reply<T>) -> Outcome {
        Outcome::Report(Box::new(r))
    }
}

/// Print `outcome` on stdout, as one pretty JSON document when `json` (an object
/// with `"ok": true`, added when the result lacks it), else for people; then
/// return its verdict, as [`Reported`] (the result is printed: no error document
/// follows).
pub fn emit(outcome: Outcome, json: bool) -> Result<()> {
    let Outcome::Report(r) = outcome else {
        return Ok(());
    };
    let mut out = io::stdout().lock();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&document(r.json()))?
        )?;
    } else {
        r.human(&mut out)?;
    }
    out.flush()?;
    drop(out);
    r.verdict().map_err(|e| Reported(e).into())
}

/// The `--json` document of a result: the result, with `"ok": true` first when
/// it is an object that does not say.
fn document(raw: &Value) -> Value {
    match raw {
        Value::Object(o) if !o.contains_key("ok") => {
            let mut d = serde_json::Map::new();
            d.insert("ok".into(), Value::Bool(true));
            d.extend(o.clone());
            Value::Object(d)
        }
        other => other.clone(),
    }
}

/// Print a failure's `--json` error document on stdout.
pub fn emit_error(doc: &Value) {
    let mut out = io::stdout().lock();
    let text = serde_json::to_string_pretty(doc).unwrap_or_default();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// A progress bar on stderr drawn only on a terminal and never with `--json`
/// (hidden otherwise: updating it costs nothing). `template` is indicatif's.
pub fn progress_bar(template: &str, json: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::hidden();
    if io::stderr().is_terminal() && !json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
    }
    bar
}

/// Environment variable: milliseconds between two [`PlainProgress`] lines
/// (default [`PLAIN_PROGRESS_MS`]).
pub const PROGRESS_INTERVAL_ENV: &str = "TREEFORK_PROGRESS_INTERVAL_MS";
/// Default interval between two [`PlainProgress`] lines.
pub const PLAIN_PROGRESS_MS: u64 = 5000;

/// Progress where no bar is drawn (stderr is not a terminal): a plain line on
/// stderr at most every few seconds (`push: upload 120/800 objects, 35.0 MiB`),
/// the first one only once that long has passed (a quick op prints none).
pub struct PlainProgress {
    what: &'static str,
    every: std::time::Duration,
    next: std::time::Instant,
    on: bool,
}

impl PlainProgress {
    /// For op `what`; `on` when progress is wanted at all (not with `--json`).
    /// Silent on a terminal (the bar shows it).
    pub fn new(what: &'static str, on: bool) -> PlainProgress {
        let ms = std::env::var(PROGRESS_INTERVAL_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(PLAIN_PROGRESS_MS);
        let every = std::time::Duration::from_millis(ms);
        PlainProgress {
            what,
            every,
            next: std::time::Instant::now() + every,
            on: on && !io::stderr().is_terminal(),
        }
    }

    /// A progress event (`phase`, `done` of `total`, `bytes` moved when counted):
    /// print its line if the interval has passed.
    pub fn tick(&mut self, phase: Option<&str>, done: u64, total: u64, bytes: Option<u64>) {
        let now = std::time::Instant::now();
        if !self.on || now < self.next {
            return;
        }
        self.next = now + self.every;
        let phase = phase.map_or(String::new(), |ph| format!(" {ph}"));
        let size = match bytes {
            Some(b) => format!(" objects, {}", human_bytes(b as f64)),
            None => String::new(),
        };
        eprintln!("{}:{phase} {done}/{total}{size}", self.what);
    }
}

/// The short (12-character) form of an id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// A ref move `old..new` of two optional ids, short, `-` for none.
pub fn moved(old: &Option<String>, new: &Option<String>) -> String {
    let s = |c: &Option<String>| c.as_deref().map_or("-", short).to_string();
    format!("{}..{}", s(old), s(new))
}

/// A Unix time in local time, `YYYY-MM-DD HH:MM:SS` (the number itself if `date`
/// cannot format it).
pub fn fmt_time(secs: i64) -> String {
    let out = Command::new("date")
        .arg("-d")
        .arg(format!("@{secs}"))
        .arg("+%Y-%m-%d %H:%M:%S")
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => secs.to_string(),
    }
}

/// A byte count in binary units (`512 B`, `1.5 KiB`, ...).
pub fn human_bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut n = n;
    let mut u = 0;
    while n >= 1024.0 && u < units.len() - 1 {
        n /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n:.0} {}", units[u])
    } else {
        format!("{n:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(1023.0), "1023 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(10_000.0), "9.8 KiB");
        assert_eq!(
            human_bytes(1024.0 * 1024.0 * 1024.0 * 1024.0 * 2048.0),
            "2048.0 TiB"
        );
    }

    #[test]
    fn short_ids() {
        assert_eq!(short("0123456789abcdef"), "0123456789ab");
        assert_eq!(short("abc"), "abc");
    }

    struct Two;
    impl Human for Two {
        fn human(&self, out: &mut dyn Write) -> io::Result<()> {
            writeln!(out, "two")
        }
        fn verdict(&self) -> Result<()> {
            anyhow::bail!("bad")
        }
    }

    #[test]
    fn reply_keeps_raw_json_and_verdict() {
        let raw = serde_json::json!({"ok": true, "z": 1, "a": [1, 2]});
        let r: Reply<Ignored> = Reply::parse(raw.clone()).unwrap();
        let r = r.map(|_| Two);
        assert_eq!(r.json(), &raw);
        let mut buf = Vec::new();
        Report::human(&r, &mut buf).unwrap();
        assert_eq!(buf, b"two\n");
        assert!(Report::verdict(&r).is_err());
    }
}
