//! `gc`, `fsck`, `session rm`: store-wide maintenance, through the daemon when one
//! serves the store, else in this process.

use super::output::human_bytes;
use super::prelude::*;

/// Reclaim space: drop objects no session, branch or live checkpoint reaches,
/// rewrite packs that are mostly garbage. Safe while sessions are mounted.
#[derive(clap::Args)]
pub struct Gc {
    /// Only report what would be reclaimed.
    #[arg(long)]
    dry_run: bool,
}

type Collected = treefork::verbs::gc::Collected;

impl Human for Collected {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let g = &self.gc;
        let b = |n: u64| human_bytes(n as f64);
        writeln!(
            out,
            "{}{} of {} objects unreachable ({}), {} in unindexed records, {} checkpoint(s); packs: {} deleted, {} rewritten ({} copied); store {} -> {}",
            if g.dry_run { "dry run: " } else { "" },
            g.objects_reclaimed,
            g.objects_before,
            b(g.bytes_reclaimed),
            b(g.bytes_unindexed),
            g.checkpoints_reclaimed,
            g.packs_deleted,
            g.packs_repacked,
            b(g.bytes_copied),
            b(g.disk_before),
            b(g.disk_after),
        )
    }
}

impl Run for Gc {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let dry_run = self.dry_run;
        let r: Reply<Collected> =
            cx.store_op(Request::Gc(treefork::verbs::Gc { dry_run }), true)?;
        Ok(r.into())
    }
}

/// Verify every reachable object, the index and the records; exit 7 on damage.
#[derive(clap::Args)]
pub struct Fsck {
    /// Rebuild the index from the packs and move unusable records aside
    /// (store offline: unmount its sessions first). Never deletes data.
    #[arg(long)]
    repair: bool,
}

/// `fsck`'s answer, with whether a repair was asked for (for the verdict).
struct Checked {
    fsck: treefork::fsck::FsckReport,
    repair: bool,
}

/// A problem's line: `DAMAGED: OWNER[ path P][ object O]: ERROR`.
fn line(p: &treefork::reach::Problem) -> String {
    let object = p.object.clone().unwrap_or_default();
    format!(
        "DAMAGED: {}{}{}: {}",
        p.owner,
        if p.path.is_empty() {
            String::new()
        } else {
            format!(" path {}", p.path)
        },
        if object.is_empty() {
            String::new()
        } else {
            format!(" object {object}")
        },
        p.error
    )
}

/// The lines of a rebuilt metadata database: `rebuilt: ...`, then what came back,
/// what did not, and where the damaged copy went.
fn rebuilt(out: &mut dyn Write, b: &treefork::store::RebuildReport) -> io::Result<()> {
    writeln!(
        out,
        "rebuilt: the metadata database from {} (generation {}); it was damaged: {}",
        b.source, b.generation, b.reason
    )?;
    let back: Vec<String> = b
        .recovered
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    writeln!(out, "rebuilt: recovered {}", back.join(", "))?;
    for l in &b.lost {
        writeln!(out, "rebuilt: LOST {l}")?;
    }
    for m in &b.moved_aside {
        writeln!(out, "rebuilt: the damaged copy is kept in {m}")?;
    }
    Ok(())
}

impl Human for Checked {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let f = &self.fsck;
        writeln!(
            out,
            "{} packs, {} records, {} index entries; {} reachable objects verified ({}); {} unindexed records (garbage)",
            f.packs,
            f.records,
            f.index_entries,
            f.objects_verified,
            human_bytes(f.bytes_verified as f64),
            f.unindexed_records,
        )?;
        if f.remote_held > 0 {
            writeln!(
                out,
                "remote_held: {} reachable objects are not stored here but held by a remote (read lazily)",
                f.remote_held
            )?;
        }
        for t in &f.torn_tails {
            writeln!(out, "note: torn tail (crash leftover, harmless): {t}")?;
        }
        if let Some(b) = &f.rebuilt {
            rebuilt(out, b)?;
        }
        for r in &f.repaired {
            writeln!(out, "repaired: {r}")?;
        }
        for p in &f.problems {
            writeln!(out, "{}", line(p))?;
        }
        if f.problems.is_empty() {
            writeln!(out, "store is clean")?;
        }
        Ok(())
    }

    fn verdict(&self) -> Result<()> {
        let problems = self.fsck.problems.len();
        if problems > 0 {
            let how = if self.repair {
                " left after repair"
            } else {
                "; `treefork fsck --repair` rebuilds what can be rebuilt"
            };
            let message = format!("the store has {problems} problem(s){how}");
            return Err(super::failure::Failure::coded("damaged", message));
        }
        Ok(())
    }
}

impl Run for Fsck {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let repair = self.repair;
        let r: Reply<treefork::verbs::fsck::Checked> =
            cx.store_op(Request::Fsck(treefork::verbs::Fsck { repair }), true)?;
        Ok(r.map(|c| Checked {
            fsck: c.fsck,
            repair,
        })
        .into())
    }
}

/// Manage sessions.
#[derive(clap::Args)]
pub struct Session {
    #[command(subcommand)]
    cmd: SessionCmd,
}

#[derive(clap::Subcommand)]
enum SessionCmd {
    /// Delete a session (not mounted). Its checkpoints stay reachable through
    /// branches and forks that name them; the rest becomes reclaimable by `gc`.
    Rm {
        /// Session name.
        name: String,
    },
    /// A session's lifecycle: origin, state, policy, touched files, metrics.
    Show(super::lifecycle::Show),
    /// Change a session's TTLs and restart its idle clock.
    Extend(super::lifecycle::Extend),
    /// Unmount a session and mark it discarded (`gc` removes it after retention).
    Discard(super::lifecycle::Discard),
    /// Evict expired sessions now (print what was evicted and what is busy).
    Sweep(super::lifecycle::Sweep),
}

/// `removed session NAME`.
type Removed = treefork::verbs::session_rm::SessionRemoved;

impl Human for Removed {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let name = &self.removed;
        writeln!(
            out,
            "removed session {name} (run `treefork gc` to reclaim its space)"
        )?;
        for f in &self.forks_removed {
            writeln!(out, "removed its experiment fork {f}")?;
        }
        Ok(())
    }
}

impl Run for Session {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            SessionCmd::Rm { name } => {
                let op = Request::SessionRm(treefork::verbs::SessionRm { name: name.clone() });
                let r: Reply<Removed> = cx.store_op(op, true)?;
                Ok(r.into())
            }
            SessionCmd::Show(c) => c.run(cx),
            SessionCmd::Extend(c) => c.run(cx),
            SessionCmd::Discard(c) => c.run(cx),
            SessionCmd::Sweep(c) => c.run(cx),
        }
    }
}
