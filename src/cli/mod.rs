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
//! - `plumbing`: the only way to the daemon or the store (sockets, workspace and
//!   store lookup, starting the daemon, offline store ops); other modules use the
//!   library only for types, constants and helpers that do no I/O;
//! - `runner`: running a command as a child process (`exec`, `experiment`, `bisect`);
//!   `ticker`: the sign of life of runs still going (`experiment`, `bisect`);
//! - `output`: the only place that chooses between output for people and `--json`;
//! - `failure`: the only place an error becomes an exit status and a `--json` error
//!   document (by its code); `usage`: a command line clap refused, as one line;
//! - `completions`, `man`, `mount_helper`: shell completion scripts, man pages and
//!   the mount(8) helper, all generated from / run through the same definition,
//!   which the registry hands them (`definition`: they do not import `args`);
//! - `paths`: command-line paths made absolute or workspace-relative;
//! - `values`: clap value parsers, so a bad value is a usage error (exit 2) before
//!   anything is sent.
//!
//! Invariants: no command prints its own result or looks at `--json` to decide how
//! (the `Human` impl of its result renders for people, the raw JSON is printed
//! verbatim); every error reaches [`main`] and is reported there alone: one line,
//! `treefork: error: …`, on stderr, with `--json` also one error document on
//! stdout, and the exit status of its error code (`failure`: the one mapping);
//! daemon refusals are matched by error code ([`plumbing::DaemonError::is`]),
//! never by message text.
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
//!            let r: Reply<Frobbed> = cx.session(Request::Frob { level: self.level })?;
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

mod agent;
pub mod args;
mod bisect;
mod completions;
mod config;
mod r#continue;
mod daemon;
mod definition;
mod exec;
mod experiment;
pub mod failure;
pub mod flags;
mod history;
mod hydrate;
mod lifecycle;
mod man;
mod mcp;
pub mod merge;
mod messages;
mod mount;
mod mount_helper;
pub mod output;
mod paths;
pub mod plumbing;
mod promote;
mod pull;
mod push;
mod refs;
mod remote;
mod remote_gc;
mod rewind;
mod schema;
mod show;
mod snapshot;
mod store;
mod ticker;
mod timeline;
mod trim;
mod ui;
mod undo;
mod usage;
mod values;

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
    pub use super::plumbing::{Ctx, Request};

    /// The answer type of verb `V` (what its reply parses as).
    pub type Answer<V> = <V as treefork::control::Verb>::Response;
}

/// A command: run it with the invocation's context and return what to print.
pub trait Run {
    /// Do the command's work.
    fn run(&self, cx: &Ctx) -> Result<Outcome>;
}

/// An error that ends the process with a given exit status, whatever its code
/// (any other error exits with the status of its code, see `failure`). Displays
/// as the error it carries.
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

/// The whole command line: parse the process arguments (a `mount.*` helper name
/// in argv[0] runs `mount-helper`), run, print; returns the exit status.
pub fn main() -> i32 {
    let argv = mount_helper::argv(std::env::args_os());
    let json = wants_json(&argv);
    let cli = match <args::Cli as clap::Parser>::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => return usage(e, &argv, json),
    };
    match run(cli) {
        Ok(()) => failure::OK,
        Err(e) => report(&e, json),
    }
}

/// Whether `--json` is among the arguments (before any `--`): known even when
/// the command line does not parse.
fn wants_json(argv: &[std::ffi::OsString]) -> bool {
    argv.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// A command line clap refused (or `--help`/`--version`): help and version on
/// their stream as clap writes them; a refusal as one line (`usage`), with
/// `--json` also a `usage` error document.
fn usage(e: clap::Error, argv: &[std::ffi::OsString], json: bool) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return e.exit_code();
    }
    let message = usage::line(&e, &<args::Cli as clap::CommandFactory>::command(), argv);
    eprintln!("treefork: error: {message}");
    if json {
        let doc = serde_json::json!({"ok": false, "error": {"code": "usage", "message": message}});
        output::emit_error(&doc);
    }
    failure::USAGE
}

/// Report a failed run (see the module's invariants); returns its exit status.
fn report(e: &anyhow::Error, json: bool) -> i32 {
    if failure::is_broken_pipe(e) {
        // The reader went away (`| head`): end quietly, as a shell tool does.
        return failure::BROKEN_PIPE;
    }
    eprintln!("treefork: error: {e:#}");
    let c = failure::classify(e);
    if json && !c.reported {
        output::emit_error(&c.document());
    }
    c.status
}

/// Run a parsed command line and print its result.
pub fn run(cli: args::Cli) -> Result<()> {
    if let Some(e) = &cli.globals.explanation {
        plumbing::set_explanation(e.clone());
    }
    let cx = Ctx::new(cli.globals);
    let outcome = cli.cmd.run(&cx)?;
    output::emit(outcome, cx.json())
}
