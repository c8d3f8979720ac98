//! `pull`: fetch refs, checkpoint records and tree nodes from a remote.

use super::output::human_bytes;
use super::prelude::*;

/// Fetch a remote's refs (all, or the named ones), their checkpoint records and
/// tree nodes; move a local branch (or an unmounted session) of the same name
/// when that is a fast-forward. File contents come on first read (or `hydrate`).
#[derive(clap::Args)]
pub struct Pull {
    /// The remote (default: the only configured one, else `origin`).
    remote: Option<String>,
    /// Remote branches or sessions to pull (default: all).
    refs: Vec<String>,
}

type Pulled = treefork::remote::pull::PullReport;

impl Human for Pulled {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for r in &self.refs {
            writeln!(
                out,
                "{:<13} {} {}/{} ({})",
                r.status,
                r.kind,
                self.remote,
                r.name,
                super::output::moved(&r.old, &r.new)
            )?;
            if let Some(n) = &r.next {
                writeln!(out, "  {n}")?;
            }
        }
        writeln!(
            out,
            "fetched {} checkpoints and {} tree nodes ({}) in {:.1}s",
            self.checkpoints,
            self.nodes,
            human_bytes(self.bytes as f64),
            self.seconds
        )
    }
}

impl Run for Pull {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let op = Request::Pull(treefork::verbs::Pull {
            remote: self.remote.clone(),
            refs: self.refs.clone(),
        });
        let r: Reply<Pulled> = cx.store_op(op, true)?;
        Ok(r.into())
    }
}
