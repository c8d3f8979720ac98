//! treefork: copy-on-write workspaces over FUSE, backed by a content-addressed store.
//!
//! Layers, dependencies pointing down only:
//! `daemon` (process, mount table, sockets) → `ops` (session operations, reaching
//! the daemon through `ops::Host`) → `control` (protocol, roles, registry, client)
//! and `fs` (FUSE translation) → `session`
//! (live inode table) → `tree` (immutable Merkle nodes) → `store` (packs + index)
//! → `meta` (sled) → `id`/`error`.

pub mod command;
pub mod control;
pub mod daemon;
pub mod diff;
pub mod dirs;
pub mod durable;
pub mod error;
pub mod failpoint;
pub mod files;
pub mod fs;
pub mod fsck;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod gc;
pub mod id;
pub mod import;
pub mod lifecycle;
pub mod lock;
pub mod messages;
pub mod meta;
pub mod oplog;
pub mod ops;
pub mod quota;
pub mod reach;
pub mod refs;
pub mod remote;
pub mod session;
pub mod store;
pub mod tree;
pub mod visibility;

pub use error::{Error, Result};
