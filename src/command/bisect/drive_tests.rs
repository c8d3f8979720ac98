//! The client's loop against a fake daemon whose "search" tests every candidate
//! one round at a time: forks are temporary directories holding a file `ok` up to
//! the last good candidate; the outcomes reported are the command's; the result
//! is recorded once; a client failure aborts.

use std::ffi::OsString;
use std::path::PathBuf;

use super::*;

#[derive(Default)]
struct Fake {
    root: PathBuf,
    len: u32,
    last_good: u32,
    next: u32,
    reported: Vec<Reported>,
    finished: usize,
    aborted: bool,
    fail_step: bool,
}

fn point(i: u32) -> Point {
    Point {
        id: format!("{i:064x}"),
        short: format!("{i:012x}"),
        message: format!("cp {i}"),
        time: i as i64,
    }
}

impl Fake {
    fn doc(&self) -> Bisected {
        Bisected {
            command: vec!["test".into()],
            first_bad: Some(point(self.last_good + 1)),
            last_good: Some(point(self.last_good)),
            good: point(0),
            bad: point(self.len - 1),
            candidates: self.len as usize,
            jobs: 1,
            rounds: self.len as usize,
            wall_ms: 0,
            steps: Vec::new(),
        }
    }

    fn answer(&mut self) -> Stepped {
        let next = if self.next == self.len {
            Next::Found {
                result: Box::new(self.doc()),
            }
        } else {
            let n = self.next;
            let mountpoint = self.root.join(format!("s-bfake-{n}"));
            std::fs::create_dir_all(&mountpoint).unwrap();
            if n <= self.last_good {
                std::fs::write(mountpoint.join("ok"), b"").unwrap();
            }
            self.next += 1;
            Next::Test {
                round: n as usize + 1,
                forks: vec![BisectFork {
                    n,
                    checkpoint: point(n).id,
                    session: format!("s-bfake-{n}"),
                    mountpoint,
                }],
            }
        };
        Stepped {
            id: "fa4e".into(),
            candidates: self.len as usize,
            good: point(0),
            bad: point(self.len - 1),
            steps: Vec::new(),
            next,
        }
    }
}

impl Daemon for Fake {
    type Error = String;

    fn begin(&mut self, _spec: &SearchSpec) -> Result<Stepped, String> {
        Ok(self.answer())
    }

    fn step(&mut self, id: &str, results: Vec<Reported>) -> Result<Stepped, String> {
        assert_eq!(id, "fa4e");
        if self.fail_step {
            return Err("refused".into());
        }
        if let Some(e) = results.iter().find_map(|r| r.outcome.error.clone()) {
            let mut s = self.answer();
            s.next = Next::CannotStart { message: e };
            return Ok(s);
        }
        self.reported.extend(results);
        Ok(self.answer())
    }

    fn finish(&mut self, _id: &str) -> Result<Bisected, String> {
        self.finished += 1;
        Ok(self.doc())
    }

    fn abort(&mut self, _id: &str) {
        self.aborted = true;
    }
}

fn plan(argv: &[&str], jobs: usize) -> Plan {
    Plan {
        argv: argv.iter().map(OsString::from).collect(),
        good: None,
        bad: None,
        cwd: String::new(),
        timeout: None,
        jobs,
        keep: false,
        place: crate::command::place::Placement {
            run_at: crate::command::place::RunAt::Fork,
            workspace: PathBuf::from("/nonexistent"),
        },
        watch: Default::default(),
    }
}

#[test]
fn the_loop_reports_what_the_command_did_and_records_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fake {
        root: tmp.path().into(),
        len: 5,
        last_good: 2,
        ..Fake::default()
    };
    let doc = run(&mut f, &plan(&["test", "-f", "ok"], 2)).unwrap();
    assert_eq!(doc, f.doc());
    assert_eq!(f.finished, 1);
    assert!(!f.aborted);
    let verdicts: Vec<(u32, bool)> = f
        .reported
        .iter()
        .map(|r| (r.candidate, r.outcome.failed()))
        .collect();
    let want: Vec<(u32, bool)> = (0..5).map(|n| (n, n > 2)).collect();
    assert_eq!(verdicts, want);
}

#[test]
fn a_command_that_cannot_start_is_reported_and_ends_the_bisect() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fake {
        root: tmp.path().into(),
        len: 3,
        ..Fake::default()
    };
    let r = run(&mut f, &plan(&["/no/such/program-7f3a"], 1));
    assert!(matches!(r, Err(Stop::CannotStart(_))), "{r:?}");
    assert_eq!(f.finished, 0);
}

#[test]
fn a_refused_step_aborts_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fake {
        root: tmp.path().into(),
        len: 3,
        fail_step: true,
        ..Fake::default()
    };
    let r = run(&mut f, &plan(&["test", "-f", "ok"], 1));
    assert!(matches!(r, Err(Stop::Client(_))), "{r:?}");
    assert!(f.aborted && f.finished == 0);
    let m = good_end_fails_message(&point(0), "--good");
    assert!(
        m.contains("the range is wrong") && m.contains("treefork log"),
        "{m}"
    );
}
