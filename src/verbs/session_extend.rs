//! `session_extend`: change a session's eviction policy and restart its idle clock.

use super::prelude::*;

/// Change a session's eviction policy and restart its idle clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionExtend {
    /// Session name.
    pub name: String,
    /// New idle TTL (`never` clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_idle: Option<String>,
    /// New absolute TTL, from now (`never` clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_absolute: Option<String>,
    /// Push to this remote before evicting (`none` clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_to: Option<String>,
}

impl Verb for SessionExtend {
    const NAME: &'static str = "session_extend";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Extended;

    fn agent_may(&self) -> bool {
        // Lifecycle changes (eviction policy, discard, evicting) are the user's.
        let SessionExtend {
            name: _,
            ttl_idle: _,
            ttl_absolute: _,
            evict_to: _,
        } = self;
        false
    }
}

/// The answer to `session_extend`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Extended {
    /// The session.
    pub session: String,
    /// Its eviction policy now.
    pub policy: crate::lifecycle::Policy,
}

impl Handler for SessionExtend {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Extended> {
        let SessionExtend {
            name,
            ttl_idle,
            ttl_absolute,
            evict_to,
        } = self;
        let store = cx.host.store();
        let info =
            crate::lifecycle::manage::extend(&*store, &name, ttl_idle, ttl_absolute, evict_to)?;
        Ok(Extended {
            session: name,
            policy: info.policy,
        })
    }
}
