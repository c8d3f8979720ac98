//! Integration tests: every test mounts a real treefork (no mocks) through the CLI.
//! One binary with submodules, so the crate is linked once.

mod harness;

mod blockmap;
mod cli;
mod consistency;
mod crash;
mod deep;
mod enospc;
mod maintenance;
mod persistence;
mod posix;
mod programs;
mod robustness;
mod security;
mod snapshots;
mod upgrade;
