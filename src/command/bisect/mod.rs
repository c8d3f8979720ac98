//! Bisect as a client runs it, shared by the CLI (`treefork bisect run`) and the
//! MCP server's `bisect` tool: the pure k-ary search ([`search`]), the result
//! document both print ([`doc`]: [`Bisected`], also what `bisect_end` records) and
//! the rounds ([`drive`]: per round, forks made by the daemon, the command run
//! here in each, the forks removed), over a [`Forks`] the client implements with
//! its own transport (`bisect_begin` / `bisect_end`).
//!
//! Invariants: the daemon never runs the command (it makes, removes and records);
//! nothing here names a protocol request (the clients do, in their [`Forks`]).

pub mod doc;
pub mod drive;
#[cfg(test)]
mod drive_tests;
pub mod search;

pub use doc::{Bisected, Point, Step};
pub use drive::{ForkAt, Forks, Plan, Stop, good_end_fails_message, run};
pub use search::{Found, search};
