//! The whole command line, for the commands that describe it (`completions`, `man`:
//! its clap definition) or re-enter it (`mount-helper`: parse a command line and
//! run it).
//!
//! Those commands are in the registry (`args`), so they cannot import it without a
//! circle: the registry implements [`Definition`] and hands it to them when it runs
//! them ([`RunWith`]). Nothing here knows any command.

use super::flags::Globals;
use super::{Ctx, Outcome, Result, Run};

/// The whole command line (implemented by the registry, `args`).
pub trait Definition {
    /// Its clap definition: every command and option.
    fn command(&self) -> clap::Command;
    /// Parse a command line (`argv[0]` first) into its global options and its
    /// command.
    fn parse(&self, argv: &[String]) -> std::result::Result<(Globals, Box<dyn Run>), clap::Error>;
}

/// A command that needs the whole command line to run (the registry calls it
/// with its [`Definition`]).
pub trait RunWith {
    /// Do the command's work.
    fn run(&self, cx: &Ctx, cli: &dyn Definition) -> Result<Outcome>;
}
