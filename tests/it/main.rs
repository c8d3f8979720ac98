//! Integration tests: every test mounts a real treefork (no mocks) through the CLI.
//! One binary with submodules, so the crate is linked once.

mod harness;

mod bisect;
mod blockmap;
mod checkout_writes;
mod cli;
mod cliconv;
mod consistency;
mod crash;
mod deep;
mod diffstream;
mod enospc;
mod evict;
mod eviction;
mod exec;
mod experiment;
mod gcrace;
mod graftfail;
mod hostile;
mod lifecycle;
mod maintenance;
mod mcp;
mod merge;
mod messages;
mod metadamage;
mod newuser;
mod persistence;
mod posix;
mod powercut;
mod programs;
mod promote;
mod races;
mod records;
mod refspec;
mod remote;
mod ring;
mod robustness;
mod security;
mod selfwait;
mod snapshots;
mod stale;
mod touched;
mod txn;
mod undo;
mod upgrade;
