//! `remote_trust`: the user confirms what a session pulled from a remote named
//! as its origin and eviction policy (kept aside in the info's
//! `meta.remote_origin` by `pull::session`), so `promote` writes to that
//! repository, `continue --project` finds the session and the policy applies.
//!
//! Invariants: user role only; one compare-and-swap of the info record; a
//! session with nothing to trust is `not_found` and nothing changes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lifecycle::REMOTE_ORIGIN;
use crate::lifecycle::{Origin, Policy, manage};
use crate::session;
use crate::store::ObjectStore;

/// The answer to `remote_trust`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Trusted {
    /// The local session.
    pub session: String,
    /// The remote it was pulled from.
    pub remote: Option<String>,
    /// The origin path adopted (`null`: the remote named none).
    pub origin: Option<std::path::PathBuf>,
    /// The eviction policy adopted (`null`: the remote named none; the
    /// session's own is kept).
    pub policy: Option<Policy>,
}

/// Trust what session `name` of `store` pulled from a remote.
pub fn run(store: &dyn ObjectStore, name: &str) -> Result<Trusted> {
    session::validate_session_name(name)?;
    let mut adopted: Option<(Value, Option<Origin>, Option<Policy>)> = None;
    manage::update(store, name, &mut |i| {
        let Some(v) = i.meta.remove(REMOTE_ORIGIN) else {
            return Err(Error::NotFound(format!(
                "session {name} has no origin from a remote to trust"
            )));
        };
        let bad = |e: serde_json::Error| {
            Error::corrupt(format!("session {name}'s {REMOTE_ORIGIN}"), e.to_string())
        };
        let origin: Option<Origin> = serde_json::from_value(v["origin"].clone()).map_err(bad)?;
        let mut policy = None;
        if let Some(p) = v.get("policy").filter(|p| !p.is_null()) {
            let p = serde_json::from_value::<Policy>(p.clone()).map_err(bad)?;
            i.policy = p.clone();
            policy = Some(p);
        }
        i.origin = origin.clone();
        adopted = Some((v, origin, policy));
        Ok(true)
    })?;
    let (v, origin, policy) = adopted.expect("update ran the closure");
    Ok(Trusted {
        session: name.to_string(),
        remote: v["remote"].as_str().map(str::to_string),
        origin: origin.map(|o| o.path),
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::SessionInfo;
    use crate::store::MemStore;
    use serde_json::json;

    #[test]
    fn trust_adopts_the_remote_origin_once() {
        let s = MemStore::default();
        let mut i = SessionInfo::new("p", None);
        let o = Origin {
            path: "/srv/repo".into(),
            git: true,
            branch: Some("main".into()),
            baseline: None,
            baseline_root: "0".repeat(64),
            promoted: Vec::new(),
        };
        let pol = Policy {
            evict_to: Some("origin".into()),
            ..Policy::default()
        };
        i.meta.insert(
            REMOTE_ORIGIN.into(),
            json!({"remote": "origin", "session": "p", "origin": o, "policy": pol}),
        );
        s.commit(vec![i.op()]).unwrap();
        let v = run(&s, "p").unwrap();
        assert_eq!(v.origin, Some("/srv/repo".into()));
        let got = crate::lifecycle::load(&s, "p").unwrap().unwrap();
        assert_eq!(got.origin, Some(o));
        assert_eq!(got.policy, pol);
        assert!(!got.meta.contains_key(REMOTE_ORIGIN));
        assert!(matches!(run(&s, "p"), Err(Error::NotFound(_))));
    }
}
