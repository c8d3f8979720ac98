//! The CLI's side of the rounds (`treefork::command::bisect::drive`): forks
//! made and removed by the daemon with `bisect_begin` / `bisect_end` on the
//! session's socket (so it works on an agent socket too), the result recorded by
//! the final `bisect_end`, a line per step on a terminal's stderr.

use super::super::prelude::*;
use treefork::command::bisect::{Bisected, ForkAt, Forks, Step};
use treefork::verbs::{BisectBegin, BisectEnd};

/// The bisect's forks, through the session's control socket.
pub struct CliForks<'a> {
    /// The invocation's context.
    pub cx: &'a Ctx,
    /// The bisect id, once the daemon chose it.
    pub id: Option<String>,
    /// The caller's place relative to the workspace root (stored in the forks).
    pub cwd: Option<String>,
    /// `--forks-dir` (absolute).
    pub forks_dir: Option<std::path::PathBuf>,
}

impl CliForks<'_> {
    fn end(&self, req: BisectEnd) -> Result<treefork::ops::bisect::end::BisectEnded> {
        let r: Reply<Answer<BisectEnd>> = self.cx.session(Request::BisectEnd(req))?;
        Ok(r.body)
    }

    fn id(&self) -> String {
        self.id.clone().unwrap_or_default()
    }
}

impl Forks for CliForks<'_> {
    type Error = anyhow::Error;

    fn begin(&mut self, points: &[(u32, String)]) -> Result<Vec<ForkAt>> {
        let op = Request::BisectBegin(BisectBegin {
            id: self.id.clone(),
            checkpoints: points.iter().map(|(_, c)| c.clone()).collect(),
            numbers: Some(points.iter().map(|(n, _)| *n).collect()),
            cwd: self.cwd.clone(),
            forks_dir: self.forks_dir.clone(),
        });
        let r: Reply<Answer<BisectBegin>> = self.cx.session(op)?;
        let b = r.body;
        self.id = Some(b.id);
        Ok(b.forks
            .into_iter()
            .map(|f| ForkAt {
                n: f.n,
                session: f.session,
                mountpoint: f.mountpoint,
            })
            .collect())
    }

    fn remove(&mut self, forks: &[String]) -> Result<Vec<(String, String)>> {
        let e = self.end(BisectEnd {
            id: self.id(),
            remove: treefork::ops::bisect::end::Remove::Names(forks.to_vec()),
            result: None,
            abort: false,
        })?;
        Ok(e.errors.into_iter().map(|c| (c.fork, c.error)).collect())
    }

    fn finish(&mut self, doc: &Bisected) -> Result<()> {
        if self.id.is_none() {
            return Ok(());
        }
        self.end(BisectEnd {
            id: self.id(),
            remove: Default::default(),
            result: Some(Box::new(doc.clone())),
            abort: false,
        })?;
        Ok(())
    }

    fn abort(&mut self) {
        if self.id.is_some() {
            let _ = self.end(BisectEnd {
                id: self.id(),
                remove: Default::default(),
                result: None,
                abort: true,
            });
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
