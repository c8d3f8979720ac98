//! The rounds against a fake daemon: forks are temporary directories holding a
//! file `ok` up to the last good candidate; every round's forks are removed
//! before the next round begins, the result is recorded once, a failure aborts.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::*;

#[derive(Default)]
struct Fake {
    root: PathBuf,
    last_good: usize,
    live: BTreeMap<String, PathBuf>,
    made: usize,
    finished: Vec<Bisected>,
    aborted: bool,
    max_live: usize,
}

impl Forks for Fake {
    type Error = String;

    fn begin(&mut self, points: &[(u32, String)]) -> Result<Vec<ForkAt>, String> {
        let mut out = Vec::new();
        for (n, _) in points {
            let session = format!("s-bfake-{n}");
            let mountpoint = self.root.join(&session);
            std::fs::create_dir_all(&mountpoint).unwrap();
            if *n as usize <= self.last_good {
                std::fs::write(mountpoint.join("ok"), b"").unwrap();
            }
            self.live.insert(session.clone(), mountpoint.clone());
            out.push(ForkAt {
                n: *n,
                session,
                mountpoint,
            });
        }
        self.made += points.len();
        self.max_live = self.max_live.max(self.live.len());
        Ok(out)
    }

    fn remove(&mut self, forks: &[String]) -> Result<Vec<(String, String)>, String> {
        for f in forks {
            let mp = self.live.remove(f).ok_or(format!("{f} is not live"))?;
            std::fs::remove_dir_all(mp).unwrap();
        }
        Ok(Vec::new())
    }

    fn finish(&mut self, doc: &Bisected) -> Result<(), String> {
        self.finished.push(doc.clone());
        Ok(())
    }

    fn abort(&mut self) {
        self.aborted = true;
        let names: Vec<String> = self.live.keys().cloned().collect();
        let _ = self.remove(&names);
    }
}

fn candidates(n: usize) -> Vec<Point> {
    (0..n)
        .map(|i| Point {
            id: format!("{i:064x}"),
            short: format!("{i:012x}"),
            message: format!("cp {i}"),
            time: i as i64,
        })
        .collect()
}

fn plan(argv: &[&str], jobs: usize) -> Plan {
    Plan {
        argv: argv.iter().map(OsString::from).collect(),
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
fn rounds_remove_their_forks_and_the_result_is_recorded_once() {
    let tmp = tempfile::tempdir().unwrap();
    for jobs in [1, 3] {
        let mut f = Fake {
            root: tmp.path().into(),
            last_good: 6,
            ..Fake::default()
        };
        let cands = candidates(12);
        let doc = run(&mut f, &plan(&["test", "-f", "ok"], jobs), &cands).unwrap();
        assert_eq!(doc.first_bad.as_ref().unwrap().id, cands[7].id);
        assert_eq!(doc.last_good.as_ref().unwrap().id, cands[6].id);
        assert_eq!(f.finished, vec![doc.clone()]);
        assert!(f.live.is_empty() && !f.aborted);
        assert_eq!(f.made, doc.steps.len());
        assert!(f.max_live <= jobs.max(2), "{} forks at once", f.max_live);
        assert!(doc.steps.iter().all(|s| s.failed == (s.index > 6)));
        doc.check().unwrap();
    }
}

#[test]
fn a_command_that_cannot_start_aborts_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fake {
        root: tmp.path().into(),
        ..Fake::default()
    };
    let r = run(&mut f, &plan(&["/no/such/program-7f3a"], 2), &candidates(5));
    assert!(matches!(r, Err((Stop::CannotStart(_), _))));
    assert!(f.aborted && f.live.is_empty() && f.finished.is_empty());
}

#[test]
fn a_good_end_that_fails_aborts_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = Fake {
        root: tmp.path().into(),
        ..Fake::default()
    };
    let cands = candidates(6);
    let r = run(&mut f, &plan(&["false"], 2), &cands);
    let Err((Stop::GoodEndFails(good), steps)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(good.id, cands[0].id);
    assert!(!steps.is_empty());
    assert!(f.aborted && f.live.is_empty() && f.finished.is_empty());
    let m = good_end_fails_message(&good, "--good");
    assert!(
        m.contains("the range is wrong") && m.contains("treefork log"),
        "{m}"
    );
}
