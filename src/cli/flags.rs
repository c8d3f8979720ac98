//! Options and flag groups used by more than one command: the global options
//! ([`Globals`]), the agent-socket flags of new mounts ([`AgentArgs`]) and the help
//! of ref arguments ([`REF_HELP`]). Defined once here so the commands cannot drift
//! apart; this module imports nothing of the CLI.

use std::path::PathBuf;

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
    /// Free text recorded with the operation in the session's log (why it was done).
    #[arg(long, global = true, value_name = "TEXT")]
    pub explanation: Option<String>,
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
pub const REF_HELP: &str =
    "Checkpoint id (prefix), branch, HEAD/@, @{-N}, exec@N (tool@N), each with ~N or ^N suffixes";
