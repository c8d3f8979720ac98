//! `undo`, `redo`, `op log`, `op restore`: the session's operation log.

use super::prelude::*;
// What `undo`, `redo` and `op restore` answer (`Answer<Undo>`; a trait impl
// cannot name it through the verb).
use treefork::ops::undo::Moved;

/// Which part of the state to move.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum WhatArg {
    /// The workspace's files only.
    Files,
    /// HEAD and branches only.
    Refs,
}

fn what(w: Option<WhatArg>) -> Option<String> {
    w.map(|w| match w {
        WhatArg::Files => "files".into(),
        WhatArg::Refs => "refs".into(),
    })
}

/// Undo the session's last operation (a checkpoint, checkout, restore, branch
/// change, exec, ...): what it changed goes back. Pending changes are saved first,
/// so an undo can itself be undone (`redo`).
#[derive(clap::Args)]
pub struct Undo {
    /// Only the workspace's files, or only HEAD and branches.
    #[arg(long, value_enum)]
    what: Option<WhatArg>,
}

/// Redo what the last undo undid.
#[derive(clap::Args)]
pub struct Redo {
    /// Only the workspace's files, or only HEAD and branches.
    #[arg(long, value_enum)]
    what: Option<WhatArg>,
}

impl Human for Moved {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "operation {}: {}", self.op, self.summary)?;
        for n in &self.notes {
            writeln!(out, "note: {n}")?;
        }
        Ok(())
    }
}

/// The newest operation's number, so the request is refused if another client
/// acts first (of two concurrent undos exactly one wins).
fn newest(cx: &Ctx) -> Result<Option<u64>> {
    let r: Reply<Answer<treefork::verbs::OpLog>> =
        cx.session(Request::OpLog(treefork::verbs::OpLog { limit: Some(1) }))?;
    Ok(r.body.operations.first().map(|o| o.record.seq))
}

impl Run for Undo {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let if_last = newest(cx)?;
        let r: Reply<Moved> = cx.session(Request::Undo(treefork::verbs::Undo {
            what: what(self.what),
            if_last,
        }))?;
        Ok(r.into())
    }
}

impl Run for Redo {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let if_last = newest(cx)?;
        let r: Reply<Moved> = cx.session(Request::Redo(treefork::verbs::Redo {
            what: what(self.what),
            if_last,
        }))?;
        Ok(r.into())
    }
}

/// The operation log: list it, or return to the state after one operation.
#[derive(clap::Args)]
pub struct OpCmd {
    #[command(subcommand)]
    cmd: OpSub,
}

#[derive(clap::Subcommand)]
enum OpSub {
    /// The session's operations, newest first.
    Log {
        /// At most N.
        #[arg(short = 'n', long = "max-count", value_name = "N")]
        limit: Option<usize>,
    },
    /// Return to the state right after operation OP (saving pending changes first).
    Restore {
        /// Operation number (from `op log`).
        op: u64,
        /// Only the workspace's files, or only HEAD and branches.
        #[arg(long, value_enum)]
        what: Option<WhatArg>,
    },
}

impl Human for treefork::ops::oplog_list::OpLogAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for o in &self.operations {
            let a = &o.record.actor;
            let who = match a.pid {
                Some(p) => format!("{} pid {p}", a.role),
                None => a.role.clone(),
            };
            writeln!(
                out,
                "{:>5}  {}  {:<16}  {}",
                o.record.seq,
                super::output::fmt_time(o.time),
                who,
                o.summary
            )?;
            if let Some(e) = &o.record.explanation {
                writeln!(out, "       why: {e}")?;
            }
        }
        Ok(())
    }
}

impl Run for OpCmd {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            OpSub::Log { limit } => {
                let r: Reply<Answer<treefork::verbs::OpLog>> =
                    cx.session(Request::OpLog(treefork::verbs::OpLog { limit: *limit }))?;
                Ok(r.into())
            }
            OpSub::Restore { op, what: w } => {
                let r: Reply<Moved> =
                    cx.session(Request::OpRestore(treefork::verbs::OpRestore {
                        seq: *op,
                        what: what(*w),
                    }))?;
                Ok(r.into())
            }
        }
    }
}
