//! treefork as a drop-in for agent runtimes (Claude Code, Codex, Gemini CLI):
//! `treefork hook`, the entry point their hooks call (`hook`, reading their
//! JSON through `payload`), and `treefork agent install`, which puts those hooks
//! and treefork's MCP server into a runtime's configuration (`install`; the
//! shared JSON shape in `entries`, Codex's TOML and hook trust in `codex`), and
//! `treefork agent run`, which mounts a session and runs the runtime in it (`run`).

mod codex;
mod entries;
pub mod hook;
mod install;
pub mod payload;
mod run;

use super::prelude::*;

/// A session name made of `s`: its letters, digits, `.`, `_` and `-`, others as
/// `-`, without leading or trailing `.` and `-` (`agent run`'s session, a
/// worktree's fork).
fn safe_name(s: &str) -> String {
    let n: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    n.trim_matches(|c| c == '.' || c == '-').to_string()
}

/// Wire treefork into an agent runtime (Claude Code, Codex, Gemini CLI).
#[derive(clap::Args)]
pub struct Agent {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Put treefork's hooks and MCP server into a runtime's configuration, beside
    /// what is there (reinstall replaces them; --uninstall removes them).
    Install(install::Install),
    /// Mount a session of this directory's tree, run the runtime in it with
    /// treefork's hooks, unmount at exit.
    Run(run::AgentRun),
}

impl Run for Agent {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            Sub::Install(i) => i.run(cx),
            Sub::Run(r) => r.run(cx),
        }
    }
}
