//! The CLI's side of the loop (`treefork::command::bisect::drive`): the bisect
//! verbs on the session's socket through the typed call (`Ctx::send`), so it
//! works on an agent socket too; a line per step on a terminal's stderr.

use super::super::prelude::*;
use treefork::command::bisect::{Bisected, Daemon, Reported, SearchSpec, Step, Stepped};
use treefork::verbs::{BisectBegin, BisectEnd, BisectStep};

/// The bisect verbs, through the session's control socket.
pub struct CliDaemon<'a> {
    /// The invocation's context.
    pub cx: &'a Ctx,
    /// The caller's place relative to the workspace root (stored in the forks).
    pub cwd: Option<String>,
    /// `--forks-dir` (absolute).
    pub forks_dir: Option<std::path::PathBuf>,
}

fn end(id: &str, abort: bool) -> BisectEnd {
    BisectEnd {
        id: id.to_string(),
        remove: Default::default(),
        result: None,
        abort,
    }
}

impl Daemon for CliDaemon<'_> {
    type Error = anyhow::Error;

    fn begin(&mut self, spec: &SearchSpec) -> Result<Stepped> {
        let b = self.cx.send(&BisectBegin {
            id: None,
            checkpoints: Vec::new(),
            numbers: None,
            cwd: self.cwd.clone(),
            forks_dir: self.forks_dir.clone(),
            search: Some(spec.clone()),
        })?;
        b.search
            .map(|s| *s)
            .ok_or_else(|| anyhow!("the daemon began bisect {} without its search", b.id))
    }

    fn step(&mut self, id: &str, results: Vec<Reported>) -> Result<Stepped> {
        let id = id.to_string();
        self.cx.send(&BisectStep { id, results })
    }

    fn finish(&mut self, id: &str) -> Result<Bisected> {
        let e = self.cx.send(&end(id, false))?;
        e.result
            .map(|r| *r)
            .ok_or_else(|| anyhow!("bisect {id}: the daemon recorded no result"))
    }

    fn abort(&mut self, id: &str) {
        if let Err(e) = self.cx.send(&end(id, true)) {
            eprintln!("treefork: bisect {id}: cannot remove its forks: {e:#}");
        }
    }

    fn progress(&mut self, _round: usize, steps: &[Step]) {
        use std::io::IsTerminal;
        if self.cx.json() || !io::stderr().is_terminal() {
            return;
        }
        for s in steps {
            eprintln!(
                "bisect: round {} {} {} ({})",
                s.round,
                s.short,
                if s.failed { "bad" } else { "good" },
                s.exit_text()
            );
        }
    }
}
