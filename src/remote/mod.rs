//! The remote tier: sessions, branches and their objects on S3-compatible object
//! storage (see docs/design.md, "Remote tier").
//!
//! Owns: the client over `object_store` (`client`, its failures described by
//! `fault`); the rest of the tier is built
//! on it (layout, formats, push, pull, lazy hydration, remote gc). Remotes are
//! configured in `config` (`y/` records), credentialed by `creds`, probed by
//! `probe`, opened through the per-process `registry`; tracking refs (`q/`) and
//! the remote name rules are below, in `crate::refs::{tracking, remote_names}`;
//! the remote ops served by the daemon are dispatched by `serve`.

pub mod client;
pub mod config;
pub mod creds;
pub mod evict;
pub mod fault;
pub mod gc;
pub mod held;
pub mod index;
pub mod layout;
pub mod lazy;
pub mod packidx;
pub mod probe;
pub mod pull;
pub mod push;
pub mod refval;
pub mod registry;
pub mod segment;
pub mod serve;
pub mod trim;

pub use config::RemoteConfig;
pub use registry::{Remote, cache_dir, list, open};
