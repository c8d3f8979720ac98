//! The top-level parser and the command registry.
//!
//! Each command's own arguments live next to its code (`cli/<group>.rs`) as a
//! `#[derive(clap::Args)]` struct whose doc comment is its `--help` summary; the
//! registry below names each of them once. Options and flag groups used by more
//! than one command are in `cli/flags.rs` (imported by the commands, so this
//! registry, which imports the commands, is never imported back). The commands
//! that need the whole command line (`completions`, `man`, `mount-helper`, marked
//! `[with the definition]`) get it from here at run time, as a
//! [`Definition`](super::definition::Definition).

use clap::{CommandFactory, Parser, Subcommand};

use super::r#continue;
use super::definition::{Definition, RunWith};
use super::flags::Globals;
use super::{
    Ctx, Outcome, Result, Run, agent, bisect, completions, config, daemon, exec, experiment,
    history, hydrate, man, mcp, merge, messages, mount, mount_helper, promote, pull, push, refs,
    remote, rewind, schema, show, snapshot, store, timeline, trim, ui, undo,
};

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

/// Declares the subcommands: one line each, `Variant(group::Args)` (the variant
/// name, in kebab case, is the command's name). Generates the [`Cmd`] enum clap
/// parses and its dispatch to [`Run::run`], or to [`RunWith::run`] with the whole
/// definition for a line marked `[with the definition]`.
macro_rules! commands {
    ($($(#[$attr:meta])* $variant:ident($args:ty) $([with the $def:ident])?,)*) => {
        /// Every subcommand (see the registry in `cli/args.rs`).
        #[derive(Subcommand)]
        pub enum Cmd {
            $($(#[$attr])* #[allow(missing_docs)] $variant($args),)*
        }

        impl Cmd {
            /// Run the parsed command.
            pub fn run(&self, cx: &Ctx) -> Result<Outcome> {
                match self {
                    $(Cmd::$variant(c) => dispatch!(c, cx $(, $def)?),)*
                }
            }
        }
    };
}

/// One command's run: [`Run::run`], or [`RunWith::run`] given [`Whole`].
macro_rules! dispatch {
    ($c:expr, $cx:expr) => {
        Run::run($c, $cx)
    };
    ($c:expr, $cx:expr, definition) => {
        RunWith::run($c, $cx, &Whole)
    };
}

impl Run for Cmd {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        Cmd::run(self, cx)
    }
}

/// The registry as the [`Definition`] of the whole command line.
struct Whole;

impl Definition for Whole {
    fn command(&self) -> clap::Command {
        Cli::command()
    }

    fn parse(&self, argv: &[String]) -> std::result::Result<(Globals, Box<dyn Run>), clap::Error> {
        let cli = Cli::try_parse_from(argv)?;
        Ok((cli.globals, Box::new(cli.cmd)))
    }
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
    Show(show::Show),
    Restore(refs::Restore),
    Merge(merge::Merge),
    CherryPick(merge::CherryPick),
    Rebase(merge::Rebase),
    Revert(merge::Revert),
    Promote(promote::Promote),
    Undo(undo::Undo),
    Redo(undo::Redo),
    Op(undo::OpCmd),
    Timeline(timeline::Timeline),
    Note(timeline::Note),
    Config(config::Config),
    Limits(config::Limits),
    Exec(exec::Exec),
    History(history::History),
    Experiment(experiment::Experiment),
    Bisect(bisect::Bisect),
    Messages(messages::Messages),
    Rewind(rewind::Rewind),
    Continue(r#continue::Continue),
    Hook(agent::hook::Hook),
    Agent(agent::Agent),
    Mcp(mcp::Mcp),
    Ui(ui::Ui),
    Push(push::Push),
    Pull(pull::Pull),
    Hydrate(hydrate::Hydrate),
    Gc(store::Gc),
    Fsck(store::Fsck),
    Session(store::Session),
    Store(trim::Store),
    Remote(remote::Remote),
    Completions(completions::Completions) [with the definition],
    Man(man::Man) [with the definition],
    MountHelper(mount_helper::MountHelper) [with the definition],
    #[command(hide = true)] Daemon(daemon::Daemon),
    #[command(hide = true)] Schema(schema::Schema),
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

    /// What `mount-helper` makes of mount(8) options parses as a real command line
    /// (moved from `mount_helper`'s tests, which cannot import this registry).
    #[test]
    fn mount_helper_options_parse_as_a_command_line() {
        let opts = ["rw,store=/var/s,task=fix it,agent_uid=7,agent_socket=/a.sock,noauto,x-systemd.automount,manual".to_string()];
        let a = mount_helper::translate("s1", "/mnt/w", &opts, false).unwrap();
        let mut full = vec!["treefork".to_string()];
        full.extend(a);
        Cli::try_parse_from(full).unwrap();
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
