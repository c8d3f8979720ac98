//! `store trim`: drop local copies of objects a remote holds (the `store`
//! command group; its other commands live at the top level: `gc`, `fsck`).

use super::output::human_bytes;
use super::prelude::*;

/// The local store as a cache of its remotes.
#[derive(clap::Args)]
pub struct Store {
    #[command(subcommand)]
    cmd: StoreCmd,
}

#[derive(clap::Subcommand)]
enum StoreCmd {
    Trim(Trim),
}

/// Drop local copies of objects a remote holds (each remote pack verified
/// present first) that no mounted session needs; they come back lazily when
/// read. Then reclaims the space (like `gc`).
#[derive(clap::Args)]
pub struct Trim {
    /// Also keep what sessions accessed within this duration reach (`30d`, `12h`).
    #[arg(long, value_name = "D", value_parser = super::values::duration)]
    older_than: Option<String>,
    /// Keep every session's current workspace (trim only history).
    #[arg(long)]
    keep_sessions: bool,
    /// Only report what would be dropped.
    #[arg(long)]
    dry_run: bool,
}

type Trimmed = treefork::remote::trim::TrimReport;

impl Human for Trimmed {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let b = |n: u64| human_bytes(n as f64);
        writeln!(
            out,
            "{}{} local copies dropped ({}), held by {}; store {} -> {} in {:.1}s",
            if self.dry_run { "dry run: " } else { "" },
            self.objects,
            b(self.bytes),
            self.remotes.join(", "),
            b(self.store_before),
            b(self.store_after),
            self.seconds
        )?;
        if !self.sessions_kept.is_empty() {
            writeln!(out, "kept: sessions {}", self.sessions_kept.join(", "))?;
        }
        if self.not_on_remote > 0 {
            writeln!(
                out,
                "{} objects are on no remote (kept; `push` to make them trimmable)",
                self.not_on_remote
            )?;
        }
        if self.packs_failed > 0 {
            writeln!(
                out,
                "warning: {} remote pack(s) missing or damaged: their objects were kept",
                self.packs_failed
            )?;
        }
        Ok(())
    }
}

impl Run for Store {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            StoreCmd::Trim(t) => {
                let op = Request::StoreTrim(treefork::verbs::StoreTrim {
                    older_than: t.older_than.clone(),
                    keep_sessions: t.keep_sessions,
                    dry_run: t.dry_run,
                });
                let r: Reply<Trimmed> = cx.store_op(op, true)?;
                Ok(r.into())
            }
        }
    }
}
