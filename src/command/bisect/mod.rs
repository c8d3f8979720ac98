//! Bisect as a client runs it, shared by the CLI (`treefork bisect run`) and the
//! MCP server's `bisect` tool: the result document both print ([`doc`]:
//! [`Bisected`], also what `bisect_end` records), what the bisect verbs carry
//! ([`wire`]: the search a client starts, a fork, a run's outcome, what the daemon
//! asks next) and the client's loop ([`drive`]: ask the daemon, run the
//! candidates it names here, report), over a [`Daemon`] the client implements
//! with its own transport (`bisect_begin`, `bisect_step`, `bisect_end`).
//!
//! Invariants: the daemon never runs the command and the client never decides
//! the search (`ops::bisect::search` does); nothing here names a protocol
//! request (the clients do, in their [`Daemon`]).

pub mod doc;
pub mod drive;
#[cfg(test)]
mod drive_tests;
pub mod wire;

pub use doc::{Bisected, MAX_ARGV, MAX_STEPS, MAX_TEXT, Point, Step};
pub use drive::{Daemon, Plan, Stop, good_end_fails_message, run};
pub use wire::{BisectFork, Next, Outcome, Reported, SearchSpec, Stepped};
