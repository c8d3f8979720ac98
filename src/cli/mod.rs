//! The `treefork` command line: a thin client of the store daemon's control socket.
//!
//! Layout:
//! - `args`: the top-level parser, global options, shared flag groups, and the
//!   command registry (one line per command);
//! - one file per command group — `mount` (mount, umount, sessions), `snapshot`
//!   (checkpoint, log, status, diff), `refs` (branch, branches, checkout, restore,
//!   fork), `store` (gc, fsck, session rm), `config`, `daemon` — each command a
//!   `clap::Args` struct and a small [`Run`] impl that builds the request, sends it
//!   through the plumbing and returns a typed result;
//! - `plumbing`: the only module that calls into the treefork library (sockets,
//!   workspace and store lookup, starting the daemon, offline store ops);
//! - `output`: the only place that chooses between output for people and `--json`;
//! - `paths`: command-line paths made absolute or workspace-relative.
//!
//! Invariants: no command prints its own result or looks at `--json` to decide how
//! (the `Human` impl of its result renders for people, the raw JSON is printed
//! verbatim); every error reaches `main` as one line, `treefork: error: …`, with
//! exit status 1 (or an [`Exit`] status); daemon refusals are matched by error
//! code ([`plumbing::DaemonError::is`]), never by message text.
//!
//! # Adding a command
//!
//! 1. Write `cli/<name>.rs` (or add to a group file):
//!
//!    ```ignore
//!    use super::prelude::*;
//!
//!    /// Frobnicate the session (the first line is the `--help` summary).
//!    #[derive(clap::Args)]
//!    pub struct Frob {
//!        /// How hard.
//!        #[arg(long, default_value_t = 1)]
//!        level: u32,
//!    }
//!
//!    #[derive(Deserialize)]
//!    struct Frobbed {
//!        count: u64,
//!    }
//!
//!    impl Run for Frob {
//!        fn run(&self, cx: &Ctx) -> Result<Outcome> {
//!            let r: Reply<Frobbed> = cx.session(Op::Frob { level: self.level })?;
//!            Ok(r.into())
//!        }
//!    }
//!
//!    impl Human for Frobbed {
//!        fn human(&self, out: &mut dyn Write) -> io::Result<()> {
//!            writeln!(out, "frobbed {} files", self.count)
//!        }
//!    }
//!    ```
//! 2. Register it: `mod frob;` below and one line `Frob(frob::Frob),` in the
//!    `commands!` registry of `cli/args.rs`.
//!
//! `--json`, `--socket`, `-C`, `--store`, error reporting and exit status come for
//! free. A store-wide op uses `cx.store_op` (and, to work without a daemon, an arm
//! in `plumbing/offline.rs`).

pub mod args;
mod config;
mod daemon;
mod exec;
mod experiment;
pub mod flags;
mod history;
mod lifecycle;
mod mcp;
mod mount;
pub mod output;
mod paths;
pub mod plumbing;
mod promote;
mod refs;
#[allow(
    dead_code,
    reason = "the API serves exec and experiment; parts are used by experiment only"
)]
pub mod runner;
mod show;
mod snapshot;
mod store;
mod timeline;
mod undo;

pub use anyhow::Result;
pub use output::Outcome;
pub use plumbing::Ctx;

/// What every command file needs.
mod prelude {
    pub use std::io::{self, Write};

    pub use anyhow::{Result, anyhow, bail};
    pub use serde::Deserialize;

    pub use super::Run;
    pub use super::output::{Human, Ignored, Outcome, Reply};
    pub use super::plumbing::{Ctx, Op};
}

/// A command: run it with the invocation's context and return what to print.
pub trait Run {
    /// Do the command's work.
    fn run(&self, cx: &Ctx) -> Result<Outcome>;
}

/// An error that ends the process with a given exit status (any other error
/// exits 1). Displays as the error it carries.
#[derive(Debug)]
pub struct Exit {
    /// The exit status.
    pub status: i32,
    /// The error.
    pub error: anyhow::Error,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for Exit {}

/// Run a parsed command line and print its result.
pub fn run(cli: args::Cli) -> Result<()> {
    if let Some(e) = &cli.globals.explanation {
        treefork::control::set_explanation(e.clone());
    }
    let cx = Ctx::new(cli.globals);
    let outcome = cli.cmd.run(&cx)?;
    output::emit(outcome, cx.json())
}

/// The exit status for a failed run.
pub fn exit_status(e: &anyhow::Error) -> i32 {
    e.downcast_ref::<Exit>().map_or(1, |x| x.status)
}
