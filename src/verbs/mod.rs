//! The verb table: every verb the control sockets serve, named once.
//!
//! A verb is one file here: its request type (serde + JSON Schema), its response
//! type, its role rule ([`Verb::agent_may`], exhaustive over the fields), how it is
//! served ([`Kind`]), whether it records an operation, and its handler
//! ([`Handler`]), which calls the library (`ops`, `remote`, or the daemon through
//! [`Server`]). The [`table!`] below generates from one line per verb the request
//! enum [`Request`] (the wire form: `{"op": NAME, ...fields}`), the names, the role
//! check, the routing ([`run`]) and the list of schemas ([`schemas`]).
//!
//! What a new verb costs: its file here, its line in the table and its `mod` line,
//! its CLI file
//! (`src/cli/`), its Python method (`clients/python`), and an MCP tool entry if
//! agents should call it as a tool.
//!
//! Layering: `daemon` → `verbs` → `remote::serve`, `ops` → `control`. The daemon
//! implements [`Server`] (what store-wide verbs ask of it); nothing here imports
//! `daemon`.
//!
//! Invariants: every session verb ([`Kind::Session`], [`Kind::Unlocked`]) runs on
//! a target resolved for the caller's scope (an agent socket sees its session's
//! lineage: `crate::visibility`), touches the session's access clock and pins its
//! roots until the answer is sent; [`Kind::Session`] verbs run under the session's
//! op lock; every successful session answer carries `branch_moved` when someone
//! else moved the session's branch (never detached silently).

mod prelude {
    pub(super) use super::{Cx, Handler, Server};
    pub(super) use crate::control::{Agent, Kind, Verb};
    pub(super) use crate::error::Result;
    pub(super) use crate::ops;
    pub(super) use schemars::JsonSchema;
    pub(super) use serde::{Deserialize, Serialize};
    pub(super) use serde_json::Value;
}

// The verbs, one file each (declared here, outside the table, so rustfmt and
// every tool that follows `mod` see them).
pub mod bisect_begin;
pub mod bisect_end;
pub mod bisect_step;
pub mod branch;
pub mod branch_delete;
pub mod branch_rename;
pub mod branch_share;
pub mod branches;
pub mod checkout;
pub mod checkpoint;
pub mod cherry_pick;
pub mod config;
pub mod continue_;
pub mod diff;
pub mod exec_begin;
pub mod exec_end;
pub mod exec_output;
pub mod experiment_adopt;
pub mod experiment_begin;
pub mod experiment_end;
pub mod experiment_show;
pub mod fork;
pub mod fsck;
pub mod gc;
pub mod history;
pub mod history_show;
pub mod hydrate;
pub mod limits;
pub mod log;
pub mod merge;
pub mod message_append;
pub mod message_flush;
pub mod messages;
pub mod mount;
pub mod note;
pub mod op_log;
pub mod op_restore;
pub mod ping;
pub mod promote;
pub mod pull;
pub mod push;
pub mod rebase;
pub mod redo;
pub mod remote_add;
pub mod remote_gc;
pub mod remote_list;
pub mod remote_rm;
pub mod remote_trust;
pub mod restore;
pub mod revert;
pub mod rewind;
pub mod session_discard;
pub mod session_extend;
pub mod session_meta_update;
pub mod session_rm;
pub mod session_show;
pub mod session_sweep;
pub mod sessions;
pub mod show;
pub mod shutdown;
pub mod status;
pub mod store_trim;
pub mod timeline;
pub mod tool_begin;
pub mod tool_end;
pub mod tool_settle;
pub mod umount;
pub mod undo;

#[cfg(test)]
mod answers_moves_tests;
#[cfg(test)]
mod answers_store_tests;
#[cfg(test)]
mod answers_tests;
#[cfg(test)]
mod answers_work_tests;
#[cfg(test)]
mod model_tests;
mod pick;
mod report;
mod serve;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::control::{MountFor, Role, Verb};
use crate::error::{Error, Result};
use crate::oplog::Actor;

pub use report::{EXEC_CHUNK, exec_report};
pub(crate) use serve::{Cx, Handler, Server, needs_daemon};

/// Declares every verb: `module::Type` per line, in protocol order.
macro_rules! table {
    ($($m:ident :: $V:ident),* $(,)?) => {
        $(pub use $m::$V;)*

        /// A request's op and arguments: one variant per verb, each the verb's
        /// request type (the wire form `{"op": NAME, ...fields}`).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        pub enum Request {
            $(
                #[doc = concat!("`", stringify!($m), "`")]
                $V($V),
            )*
        }

        $(impl From<$V> for Request {
            fn from(v: $V) -> Request {
                Request::$V(v)
            }
        })*

        /// Every verb's wire name, in table order.
        pub const NAMES: &[&str] = &[$(<$V as Verb>::NAME),*];

        /// [`Verb::RECORDS`] of the verb named `name` (`None`: no such verb).
        pub fn records_of(name: &str) -> Option<bool> {
            $(if name == <$V as Verb>::NAME {
                return Some(<$V as Verb>::RECORDS);
            })*
            None
        }

        impl Request {
            /// The wire name (`"branch_delete"`, ...).
            pub fn name(&self) -> &'static str {
                match self {
                    $(Request::$V(_) => <$V as Verb>::NAME,)*
                }
            }

            /// Whether it appends an operation record when it succeeds
            /// ([`Verb::RECORDS`], checked by the crash model test).
            pub fn records(&self) -> bool {
                match self {
                    $(Request::$V(_) => <$V as Verb>::RECORDS,)*
                }
            }

            /// How the daemon serves it.
            pub fn kind(&self) -> crate::control::Kind {
                match self {
                    $(Request::$V(_) => <$V as Verb>::KIND,)*
                }
            }

            /// Whether `role` may send this request.
            pub fn allowed(&self, role: Role) -> bool {
                match (role, self) {
                    (Role::User, _) => true,
                    $((Role::Agent, Request::$V(r)) => r.agent_may(),)*
                }
            }

            /// The refusal of this request for `role`.
            pub fn refusal(&self) -> Error {
                let what = match self {
                    $(Request::$V(r) => r.refused_what(),)*
                };
                Error::Forbidden(format!(
                    "{what} is not allowed on an agent socket (agent role: additive operations only)"
                ))
            }

            fn dispatch<H: Server>(self, h: &H, call: serve::Call<'_>) -> Result<Value> {
                match self {
                    $(Request::$V(r) => serve::serve(h, call, r),)*
                }
            }
        }

        /// Every verb's name with its request and response JSON Schemas.
        pub fn schemas() -> Vec<VerbSchema> {
            vec![$(VerbSchema {
                name: <$V as Verb>::NAME,
                agent: <$V as Verb>::AGENT,
                request: schemars::schema_for!($V),
                response: schemars::schema_for!(<$V as Verb>::Response),
            }),*]
        }
    };
}

table! {
    ping::Ping,
    mount::Mount,
    umount::Umount,
    sessions::Sessions,
    limits::Limits,
    shutdown::Shutdown,
    checkpoint::Checkpoint,
    log::Log,
    status::Status,
    branch::Branch,
    branches::Branches,
    branch_delete::BranchDelete,
    checkout::Checkout,
    branch_share::BranchShare,
    branch_rename::BranchRename,
    undo::Undo,
    redo::Redo,
    op_restore::OpRestore,
    timeline::Timeline,
    note::Note,
    op_log::OpLog,
    fork::Fork,
    diff::Diff,
    restore::Restore,
    merge::Merge,
    cherry_pick::CherryPick,
    rebase::Rebase,
    revert::Revert,
    gc::Gc,
    fsck::Fsck,
    session_rm::SessionRm,
    session_show::SessionShow,
    session_extend::SessionExtend,
    session_discard::SessionDiscard,
    session_sweep::SessionSweep,
    show::Show,
    config::Config,
    experiment_begin::ExperimentBegin,
    experiment_end::ExperimentEnd,
    experiment_show::ExperimentShow,
    experiment_adopt::ExperimentAdopt,
    bisect_begin::BisectBegin,
    bisect_step::BisectStep,
    bisect_end::BisectEnd,
    exec_begin::ExecBegin,
    exec_output::ExecOutput,
    exec_end::ExecEnd,
    tool_begin::ToolBegin,
    tool_end::ToolEnd,
    tool_settle::ToolSettle,
    history::History,
    history_show::HistoryShow,
    promote::Promote,
    message_append::MessageAppend,
    message_flush::MessageFlush,
    messages::Messages,
    rewind::Rewind,
    continue_::Continue,
    session_meta_update::SessionMetaUpdate,
    remote_add::RemoteAdd,
    remote_list::RemoteList,
    remote_rm::RemoteRm,
    remote_trust::RemoteTrust,
    push::Push,
    pull::Pull,
    hydrate::Hydrate,
    remote_gc::RemoteGc,
    store_trim::StoreTrim,
}

/// One verb's schemas.
#[derive(Debug, Clone)]
pub struct VerbSchema {
    /// Wire name.
    pub name: &'static str,
    /// Whether an agent socket may send it.
    pub agent: crate::control::Agent,
    /// The request's JSON Schema (without the `op` field).
    pub request: schemars::Schema,
    /// The response's JSON Schema (without `ok`).
    pub response: schemars::Schema,
}

/// Run `op` for a caller `who` (`actor` names it in the operation log), aimed at
/// `session` when given (session sockets bind theirs). Event lines
/// (`{"event":...}`, sent before the response) go to `events`.
pub(crate) fn run<H: Server>(
    h: &H,
    who: MountFor,
    actor: &Actor,
    explanation: Option<&str>,
    session: Option<&str>,
    op: Request,
    events: &mut dyn FnMut(Value),
) -> Result<Value> {
    let call = serve::Call {
        who,
        actor,
        explanation,
        session,
        request: serde_json::to_value(&op).unwrap_or(Value::Null),
        events,
    };
    op.dispatch(h, call)
}
