//! Recorded commands as a client runs them: what a command to run is and how a
//! client runs one, below both the control protocol and its clients.
//!
//! Owns: [`wire`], the experiment's run types that the protocol carries
//! ([`RunSpec`], [`RunCommand`], [`RunResult`]: what a run is and what it did,
//! checked and bounded before the daemon stores them), and [`runner`], the process
//! runner (spawn, tee or capture with caps, timeout over the process group, signal
//! forwarding) that `treefork exec`, `treefork experiment` and the MCP server's
//! `exec` and `experiment` tools use, and [`bisect`], the bisect both the CLI's
//! `bisect run` and the MCP `bisect` tool run (what the bisect verbs carry, the
//! client's loop over the daemon's search, the result document), [`place`],
//! where a run sees its fork (at the workspace's own path, through a private mount
//! namespace, or at the fork's mountpoint), [`watch`], the runs in flight (what
//! a client shows as a sign of life), and [`shell`],
//! a recorded argv as a person reads it (shell-quoted).
//!
//! Invariants: the daemon never runs a command (it records what a client reports);
//! nothing here names the protocol's requests (`crate::control` imports this
//! module, never the reverse) nor a client (the CLI and the MCP server import it,
//! and neither imports the other for it).

pub mod bisect;
pub mod place;
pub mod runner;
pub mod shell;
pub mod watch;
pub mod wire;

pub use wire::{RunCommand, RunResult, RunSpec};
