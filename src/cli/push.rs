//! `push`: send branches and sessions to a remote.

use super::output::human_bytes;
use super::prelude::*;

/// Send branches and sessions to a remote: what it lacks, then the refs by
/// compare-and-swap (exit 9 when a remote ref moved: pull, merge REMOTE/NAME, push; or --force).
#[derive(clap::Args)]
pub struct Push {
    /// The remote (default: the only configured one, else `origin`).
    remote: Option<String>,
    /// What to push: a branch, a session, or SRC:DST (a branch, session or
    /// checkpoint expression to remote branch DST); default: the current session.
    refs: Vec<String>,
    /// The session pushed by default and whose HEAD expressions resolve against
    /// (default: the workspace's, else the only mounted one).
    #[arg(long)]
    session: Option<String>,
    /// Overwrite remote refs that are not fast-forwards.
    #[arg(long)]
    force: bool,
}

type Pushed = treefork::remote::push::PushReport;

impl Human for Pushed {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for r in &self.refs {
            writeln!(
                out,
                "{:<10} {} {} -> {}/{} ({})",
                r.status,
                r.kind,
                r.src,
                self.remote,
                r.dst,
                super::output::moved(&r.old, &r.new)
            )?;
        }
        writeln!(
            out,
            "sent {} objects in {} packs ({}) in {:.1}s",
            self.objects,
            self.packs,
            human_bytes(self.bytes as f64),
            self.seconds
        )
    }
}

impl Run for Push {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let session = self.session.clone().or_else(|| cx.current_session());
        let op = Request::Push(treefork::verbs::Push {
            remote: self.remote.clone(),
            refs: self.refs.clone(),
            session,
            force: self.force,
        });
        let r: Reply<Pushed> = cx.store_op(op, true)?;
        Ok(r.into())
    }
}
