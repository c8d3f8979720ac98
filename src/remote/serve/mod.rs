//! The remote verbs' library (`remote_add`, `remote_list`, `remote_rm`,
//! `remote_trust`, `push`, `pull`, `hydrate`, `remote_gc`, `store_trim`): one
//! small file per verb, called by the verbs' handlers (`crate::verbs`) in the
//! daemon and, for those that need only the store, by the CLI when no daemon
//! serves the store. Each returns its verb's answer as a type (defined here, or
//! the report of the `remote` module it calls), never a `json!` value.
//!
//! `store_trim` needs the store's packs and the mounted sessions' live ids (gc's
//! protocol), which [`crate::host::Host`] does not give: the daemon calls
//! [`store_trim::run`] itself (beside `gc`), the CLI's offline path likewise.
//!
//! Invariants: every verb here is user-only (their `agent_may`); none carries or
//! answers credentials; network work happens outside the host's locks.

pub mod hydrate;
pub mod pull;
pub mod push;
pub mod remote_add;
pub mod remote_gc;
pub mod remote_list;
pub mod remote_rm;
pub mod remote_trust;
pub mod store_trim;
