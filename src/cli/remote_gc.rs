//! `remote gc`: delete what no ref of a remote reaches (two phases with a grace
//! period; one gc at a time). Wired as a subcommand of `remote`.

use super::output::human_bytes;
use super::prelude::*;

/// Delete packs, checkpoint records and log segments no ref of the remote
/// reaches. A first run condemns them; a run at least --grace later deletes
/// those still unreachable (concurrent pushers stay safe meanwhile).
#[derive(clap::Args)]
pub struct RemoteGc {
    /// The remote (default: the only configured one, else origin).
    remote: Option<String>,
    /// Report what would be condemned or deleted; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Time between condemning and deleting: 30s, 15m, 24h, 7d, ...
    #[arg(long, default_value = "24h")]
    grace: String,
}

type Report = treefork::remote::gc::GcReport;

impl Human for Report {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let would = if self.dry_run {
            " (dry run: would)"
        } else {
            ""
        };
        writeln!(
            out,
            "remote gc of {} from {} ref(s){would}: {}",
            self.remote,
            self.refs,
            match self.phase.as_str() {
                "clean" => "nothing unreachable",
                "condemn" => "condemned what is unreachable (deleted by a run after the grace)",
                "delete" => "deleted what stayed unreachable through the grace",
                _ => "waiting for the grace period of the last condemnation",
            }
        )?;
        if self.packs_deleted + self.checkpoints_deleted + self.logs_deleted > 0 {
            writeln!(
                out,
                "deleted: {} pack(s) ({}), {} checkpoint record(s), {} log segment(s)",
                self.packs_deleted,
                human_bytes(self.bytes_deleted as f64),
                self.checkpoints_deleted,
                self.logs_deleted
            )?;
        }
        if self.condemned + self.condemned_checkpoints + self.condemned_logs > 0 {
            writeln!(
                out,
                "condemned: {} pack(s) ({}), {} checkpoint record(s), {} log segment(s){}",
                self.condemned,
                human_bytes(self.condemned_bytes as f64),
                self.condemned_checkpoints,
                self.condemned_logs,
                if self.phase == "wait" {
                    format!("; deletable in {}s", self.wait_secs)
                } else {
                    String::new()
                }
            )?;
        }
        writeln!(
            out,
            "live: {} pack(s) ({}, of which {} unreachable) in {:.1}s",
            self.live_packs,
            human_bytes(self.live_bytes as f64),
            human_bytes(self.dead_bytes_in_live_packs as f64),
            self.seconds
        )
    }
}

impl Run for RemoteGc {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let grace = treefork::lifecycle::parse_duration(&self.grace)?;
        let op = Request::RemoteGc(treefork::verbs::RemoteGc {
            remote: self.remote.clone(),
            dry_run: self.dry_run,
            grace_secs: Some(grace),
        });
        let r: Reply<Report> = cx.store_op(op, false)?;
        Ok(r.into())
    }
}
