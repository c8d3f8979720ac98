//! `hydrate`: fetch everything a session needs from its remote, for offline use.

use super::output::human_bytes;
use super::prelude::*;

/// Fetch every object a session needs (workspace and history) from a remote,
/// so it keeps working with the remote gone.
#[derive(clap::Args)]
pub struct Hydrate {
    /// The session (default: the workspace's, else the only mounted one).
    #[arg(long)]
    session: Option<String>,
    /// The remote (default: the session's upstream, else the only configured one).
    #[arg(long)]
    remote: Option<String>,
}

type Hydrated = treefork::remote::pull::hydrate::HydrateReport;

impl Human for Hydrated {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "hydrated session {} from {}: {} objects ({}) in {:.1}s",
            self.session,
            self.remote,
            self.objects,
            human_bytes(self.bytes as f64),
            self.seconds
        )?;
        if self.missing > 0 {
            writeln!(out, "warning: {} objects are on no remote", self.missing)?;
        }
        Ok(())
    }
}

impl Run for Hydrate {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let session = self.session.clone().or_else(|| cx.current_session());
        let op = Request::Hydrate(treefork::verbs::Hydrate {
            session,
            remote: self.remote.clone(),
        });
        let r: Reply<Hydrated> = cx.store_op(op, true)?;
        Ok(r.into())
    }
}
