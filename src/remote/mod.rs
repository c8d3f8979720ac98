//! The remote tier: sessions, branches and their objects on S3-compatible object
//! storage (see docs/design.md, "Remote tier").
//!
//! Owns: the client over `object_store` (`client`); the rest of the tier is built
//! on it (layout, formats, push, pull, lazy hydration, remote gc).

pub mod client;
pub mod index;
pub mod layout;
pub mod packidx;
pub mod refval;
pub mod segment;
