//! `exec`: run a command in the workspace and record it in the session's history.
//!
//! The command runs here, as this process's child (the caller's environment; cwd:
//! the caller's when inside the workspace, else the workspace root), its output
//! passed through unchanged and captured (`treefork::command::runner`). The daemon is told
//! before (`exec_begin`: it saves the before state and starts watching writers)
//! and after (`exec_output` chunks, then `exec_end`). `treefork exec` exits with
//! the command's status (128 + N when killed by signal N, 127 when the program is
//! missing); it prints nothing of its own but errors and warnings on stderr, so it
//! ends the process itself instead of returning an outcome to print.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::plumbing::DaemonError;
use super::plumbing::runner::{self, DEFAULT_CAPTURE_LIMIT, RunResult, Spec};
use super::prelude::*;
use treefork::ops::exec::MAX_CAPTURE;

/// Run a command in the workspace and record it (before/after states, changed
/// paths, exit status, output). While another recorded command or an agent's tool
/// call runs in the session, the command runs unrecorded (that record holds its
/// changes) and a note says so.
#[derive(clap::Args)]
pub struct Exec {
    /// Stop the command and everything it started (its process group) after S
    /// seconds.
    #[arg(long, value_name = "S", value_parser = super::values::seconds)]
    timeout: Option<Duration>,
    /// Bytes of each of stdout and stderr kept in the record (at most 4 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_CAPTURE_LIMIT, value_parser = capture_limit)]
    capture_limit: usize,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// A `--capture-limit`: at most [`MAX_CAPTURE`] bytes.
fn capture_limit(s: &str) -> std::result::Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= MAX_CAPTURE => Ok(n),
        _ => Err(format!("expected at most {MAX_CAPTURE} bytes, not {s:?}")),
    }
}

impl Exec {
    /// The command's directory and its path relative to the workspace root.
    fn cwd(&self, cx: &Ctx) -> Result<(PathBuf, String)> {
        let root = cx.workspace_root()?;
        let here = std::env::current_dir().ok();
        let inside = here.and_then(|h| {
            let rel = h.strip_prefix(&root).ok()?.to_str()?.to_string();
            Some((h, rel))
        });
        Ok(inside.unwrap_or((root, String::new())))
    }
}

impl Run for Exec {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let (dir, rel) = self.cwd(cx)?;
        let argv: Vec<String> = self
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        // Processes the command leaves behind stay in this process's tree (the
        // daemon tells the command's writers from others by the parent chain).
        runner::become_subreaper();
        let begun: Result<Reply<Answer<treefork::verbs::ExecBegin>>> =
            cx.session(Request::ExecBegin(treefork::verbs::ExecBegin {
                argv,
                cwd: rel,
            }));
        // Busy: another exec or an agent's tool call is being recorded, and its
        // record holds this command's changes: run it unrecorded.
        let n = match begun {
            Ok(b) => Some(b.body.exec),
            Err(e)
                if e.downcast_ref::<DaemonError>()
                    .is_some_and(|d| d.is(&treefork::Error::Busy(String::new()))) =>
            {
                eprintln!("treefork: note: not recorded on its own: {e}");
                None
            }
            Err(e) => return Err(e),
        };
        let spec = Spec::new(self.command.clone())
            .cwd(dir)
            .capture_limit(self.capture_limit)
            .timeout(self.timeout);
        let r = runner::run(&spec);
        if let Some(e) = &r.error {
            eprintln!("treefork: error: {e}");
        }
        if r.timed_out {
            eprintln!(
                "treefork: exec: stopped after the {}s timeout",
                self.timeout.unwrap_or_default().as_secs_f64()
            );
        }
        if let Some(n) = n
            && let Err(e) = record(cx, n, &r)
        {
            eprintln!("treefork: warning: exec {n} was not recorded: {e:#}");
        }
        let _ = io::stdout().flush();
        std::process::exit(r.status());
    }
}

/// Send the captured output and the outcome of exec `n`.
fn record(cx: &Ctx, n: u64, r: &RunResult) -> Result<()> {
    for op in super::plumbing::exec_report(n, r) {
        let _: Reply<Ignored> = cx.session(op)?;
    }
    Ok(())
}
