//! A sign of life while runs go on (`experiment`, `bisect run`): which runs are
//! still going and for how long ([`treefork::command::watch::Watch`]). On a
//! terminal a live status line on stderr (indicatif), redrawn every 200 ms once a
//! run has gone on for a second; off a terminal a plain line on stderr every
//! interval (`runs still going: 2 (30s), 3 (30s)`; default 30 s,
//! `TREEFORK_PROGRESS_INTERVAL_MS`), the first only once that long has passed,
//! so fast runs print nothing. No status line with `--json` on a terminal; off a
//! terminal the lines go to stderr whatever the output format (stdout keeps the
//! document).

use std::io::{self, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use treefork::command::watch::Watch;

/// Default interval between two plain lines.
const PLAIN_EVERY_MS: u64 = 30_000;
/// A run shorter than this shows no status line on a terminal.
const QUIET: Duration = Duration::from_secs(1);

/// The ticker thread; stops (and clears its line) when dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// Watch `w`, lines prefixed with `what` (`experiment 3fa2c1`, `bisect`).
    pub fn start(what: String, w: Watch, json: bool) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let tty = io::stderr().is_terminal();
        if tty && json {
            return Ticker { stop, thread: None };
        }
        let every = Duration::from_millis(
            std::env::var(super::output::PROGRESS_INTERVAL_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(PLAIN_EVERY_MS),
        );
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            if tty {
                live(&what, &w, &s);
            } else {
                plain(&what, &w, &s, every);
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sleep up to `d` in small steps; false once stopped.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.load(Ordering::SeqCst)
}

fn live(what: &str, w: &Watch, stop: &AtomicBool) {
    let bar = super::output::progress_bar("{spinner} {msg}", false);
    while nap(stop, Duration::from_millis(200)) {
        let long = w.running().iter().any(|(_, d)| *d >= QUIET);
        match w.line().filter(|_| long) {
            Some(l) => {
                bar.set_message(format!("{what}: {l}"));
                bar.tick();
            }
            None => bar.set_message(""),
        }
    }
    bar.finish_and_clear();
}

fn plain(what: &str, w: &Watch, stop: &AtomicBool, every: Duration) {
    while nap(stop, every) {
        if let Some(l) = w.line() {
            eprintln!("{what}: {l}");
        }
    }
}
