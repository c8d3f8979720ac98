//! What `cherry_pick` and `revert` share: both are one checkpoint brought into the
//! session by a three-way merge (`ops::merge::start`), stopping on conflicts as
//! `merge` does, with the same request fields, role rule and handler; only the
//! verb's name, its docs and the library call differ.
//!
//! Owns: [`pick_verb!`], which declares such a verb's request type (serde + JSON
//! Schema) and its `Verb` and `Handler` impls. Invariant: the type it declares is
//! exactly what a hand-written one would be (its own name and docs, the same
//! fields, renames and defaults), so each verb's wire form and schema are its own.

/// Declare a verb that brings one checkpoint in through a merge: `$V` (with its
/// docs) named `$name` on the wire, served by `$run(target, call, request)`.
macro_rules! pick_verb {
    ($(#[$doc:meta])* $V:ident, $name:literal, $run:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $V {
            /// The ref to bring in (required unless `continue` or `abort`).
            #[serde(rename = "ref", default)]
            pub target: Option<String>,
            /// The checkpoint's message (default: says what was brought in).
            #[serde(default)]
            pub message: Option<String>,
            /// Only report what would change and conflict.
            #[serde(default)]
            pub dry_run: bool,
            /// Finish the one stopped on conflicts, once they are resolved.
            #[serde(default, rename = "continue")]
            pub cont: bool,
            /// Put the workspace back as it was before the stopped one.
            #[serde(default)]
            pub abort: bool,
        }

        impl Verb for $V {
            const NAME: &'static str = $name;
            const KIND: Kind = Kind::Session;
            const AGENT: Agent = Agent::Yes;
            const RECORDS: bool = true;
            type Response = ops::merge::MergeAnswer;

            fn agent_may(&self) -> bool {
                // Refs resolve in the agent's view; the session's own workspace changes.
                let $V {
                    target: _,
                    message: _,
                    dry_run: _,
                    cont: _,
                    abort: _,
                } = self;
                true
            }
        }

        impl Handler for $V {
            fn before_lock(&self, t: &ops::Target) -> Result<()> {
                // A message appended before this request is written with the state
                // before it (the writer's queue drains first).
                ops::messages::wait(t)
            }

            fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
                let $V {
                    target,
                    message,
                    dry_run,
                    cont,
                    abort,
                } = self;
                let req = crate::ops::merge::start::MergeRequest {
                    target,
                    also: Vec::new(),
                    message,
                    dry_run,
                    cont,
                    abort,
                };
                $run(&cx.target(), &cx.call, &req)
            }
        }
    };
}

pub(super) use pick_verb;
