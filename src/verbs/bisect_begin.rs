//! `bisect_begin`: make and mount one fork per candidate checkpoint of a bisect
//! (names and mountpoints chosen by the daemon), recording nothing.
//!
//! The request is defined in `ops::bisect::begin` and re-exported here: the library takes it
//! whole (`ops` cannot name `verbs`).

use super::prelude::*;

pub use crate::ops::bisect::begin::BisectBegin;

impl Verb for BisectBegin {
    const NAME: &'static str = "bisect_begin";
    const KIND: Kind = Kind::Session;
    const AGENT: Agent = Agent::Yes;
    const RECORDS: bool = true;
    type Response = ops::bisect::begin::BisectBegun;

    fn agent_may(&self) -> bool {
        // A bisect adds forks of the agent's own session at checkpoints it can
        // see (names and mountpoints chosen by the daemon, the agent ownership
        // rule applied, the agent's session quota); its end removes only the
        // forks that bisect made and records one inert operation. The daemon
        // runs no command.
        let BisectBegin {
            id: _,
            checkpoints: _,
            numbers: _,
            cwd: _,
            forks_dir,
            search: _,
        } = self;
        // Where the forks are mounted on the host is the user's choice (the
        // request's `forks_dir` or the `forks_dir` setting), never an agent's.
        forks_dir.is_none()
    }

    fn refused_what(&self) -> String {
        format!("{} with \"forks_dir\"", Self::NAME)
    }
}

impl Handler for BisectBegin {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Self::Response> {
        let by_agent = cx.call.actor.is_agent();
        let t = cx.target();
        let lock = cx.lock();
        ops::bisect::begin(cx.host, &t, lock, cx.who, &self, by_agent)
    }
}
