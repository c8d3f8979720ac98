//! treefork: copy-on-write workspaces over FUSE, backed by a content-addressed store.
//!
//! Layers, dependencies pointing down only:
//! `daemon` (process, mount table, sockets; implements `verbs::Server` and
//! `host::Host`) → `fs` (FUSE translation, the ring, the daemon's `fs::KernelMount`)
//! → `verbs` (the verb table: one file per verb, routing, schemas) → `remote` (the
//! remote tier) and `ops` (the session operations' library), which both reach the
//! daemon through `host` (`Host`, `Target`, `Mount`; `ops` re-exports them) →
//! `control` (protocol framing, the `Verb` trait, roles, registry, client) →
//! `command` (what a recorded command is — the experiment's `RunSpec` and
//! `RunResult` — and the process runner every client uses) → `merge` → `session`
//! (live inode table) → the side modules (`lifecycle`, `reach`/`gc`/`fsck`, which
//! take what a remote holds from their caller, `messages`, `visibility`, `quota`) →
//! `refs` (checkpoints, branches, session records, remote names, tracking refs) and
//! `oplog` → `tree` (immutable Merkle nodes) → `store` (packs + index) → `meta`
//! (sled) → `mount_id` → `id`/`error`/`clock` → `transport` (a leaf: the ring's
//! names `error` carries). The binary's `cli` is the top and may start `mcp`; `mcp`
//! never imports `cli`. `scripts/layers.py --check` reads the layer table of
//! docs/design.md ("Layers") and lists any import that runs back up it, any file it
//! does not place, and any circle among files.

pub mod budget;
pub mod child;
pub mod clock;
pub mod command;
pub mod control;
pub mod daemon;
pub mod diff;
pub mod dirs;
pub mod durable;
pub mod error;
pub mod failpoint;
pub mod fdlimit;
pub mod files;
pub mod fs;
pub mod fsck;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod gc;
pub mod gitignore;
pub mod host;
pub mod hostdir;
pub mod id;
pub mod import;
pub mod lifecycle;
pub mod lock;
pub mod merge;
pub mod messages;
pub mod meta;
pub mod mount_id;
pub mod oplog;
pub mod ops;
pub mod quota;
pub mod reach;
pub mod refs;
pub mod remote;
pub mod session;
pub mod store;
pub mod transport;
pub mod tree;
pub mod verbs;
pub mod visibility;

pub use error::{Error, Result};
