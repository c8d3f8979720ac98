//! Argument definitions shared by every command: the top-level parser, the global
//! options, flag groups used by more than one command, and the command registry.
//!
//! Each command's own arguments live next to its code (`cli/<group>.rs`) as a
//! `#[derive(clap::Args)]` struct whose doc comment is its `--help` summary; the
//! registry below names each of them once. A flag used by several commands is
//! defined here once (a flattened group such as [`AgentArgs`] or a help text
//! constant such as [`REF_HELP`]), so the commands cannot drift apart.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::{Ctx, Outcome, Result, Run, config, daemon, mount, refs, snapshot, store};

/// The `treefork` command line.
#[derive(Parser)]
#[command(
    name = "treefork",
    version,
    about = "Copy-on-write workspaces for agent sessions, over FUSE"
)]
pub struct Cli {
    /// Options every command accepts (before or after the subcommand).
    #[command(flatten)]
    pub globals: Globals,
    /// The command to run.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Options every command accepts.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Globals {
    /// Store directory [default: $TREEFORK_STORE, else $XDG_DATA_HOME/treefork, else ~/.local/share/treefork]
    #[arg(long, global = true, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Act on the workspace containing PATH [default: the current directory].
    #[arg(short = 'C', global = true, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// Talk only to this control socket (e.g. a session's agent socket) instead of
    /// the one registered for the workspace [default: $TREEFORK_SOCKET].
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// The agent socket of a new mount (`mount`, `fork`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AgentArgs {
    /// Also serve the session's control ops on an agent socket at PATH, where
    /// only additive operations are allowed (no branch deletion, unmount, settings).
    #[arg(long, value_name = "PATH")]
    pub agent_socket: Option<PathBuf>,
    /// Let this uid (besides yours and root) use the agent socket; it owns the file.
    #[arg(long, value_name = "UID", requires = "agent_socket")]
    pub agent_uid: Option<u32>,
}

/// Help of every argument naming a checkpoint (`REF`).
pub const REF_HELP: &str = "Checkpoint id, branch, HEAD or HEAD~N";

/// Declares the subcommands: one line each, `Variant(group::Args)` (the variant
/// name, in kebab case, is the command's name). Generates the [`Cmd`] enum clap
/// parses and its dispatch to [`Run::run`].
macro_rules! commands {
    ($($(#[$attr:meta])* $variant:ident($args:ty),)*) => {
        /// Every subcommand (see the registry in `cli/args.rs`).
        #[derive(Subcommand)]
        pub enum Cmd {
            $($(#[$attr])* #[allow(missing_docs)] $variant($args),)*
        }

        impl Cmd {
            /// Run the parsed command.
            pub fn run(&self, cx: &Ctx) -> Result<Outcome> {
                match self {
                    $(Cmd::$variant(c) => Run::run(c, cx),)*
                }
            }
        }
    };
}

// The registry: `--help` lists the commands in this order.
commands! {
    Mount(mount::Mount),
    Umount(mount::Umount),
    Sessions(mount::Sessions),
    Checkpoint(snapshot::Checkpoint),
    Log(snapshot::Log),
    Status(snapshot::Status),
    Branch(refs::Branch),
    Branches(refs::Branches),
    Checkout(refs::Checkout),
    Fork(refs::Fork),
    Diff(snapshot::Diff),
    Restore(refs::Restore),
    Config(config::Config),
    Gc(store::Gc),
    Fsck(store::Fsck),
    Session(store::Session),
    #[command(hide = true)] Daemon(daemon::Daemon),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn definitions_are_consistent() {
        // Duplicate flags, dangling `requires`/`conflicts_with` ids, bad defaults.
        Cli::command().debug_assert();
    }

    #[test]
    fn shared_flags_parse_in_every_command_that_has_them() {
        for args in [
            &[
                "treefork",
                "mount",
                "/m",
                "--agent-socket",
                "/s",
                "--agent-uid",
                "7",
            ][..],
            &[
                "treefork",
                "fork",
                "n",
                "--mount",
                "/m",
                "--agent-socket",
                "/s",
                "--agent-uid",
                "7",
            ],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let agent = match &cli.cmd {
                Cmd::Mount(m) => m.agent(),
                Cmd::Fork(f) => f.agent(),
                _ => unreachable!(),
            };
            assert_eq!(agent.agent_uid, Some(7));
        }
        // --agent-uid needs --agent-socket.
        assert!(Cli::try_parse_from(["treefork", "mount", "/m", "--agent-uid", "7"]).is_err());
        // Global options after the subcommand.
        let cli = Cli::try_parse_from(["treefork", "gc", "--json", "--store", "/s"]).unwrap();
        assert!(cli.globals.json);
        assert_eq!(
            cli.globals.store.as_deref(),
            Some(std::path::Path::new("/s"))
        );
    }
}
