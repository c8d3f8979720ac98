//! `remote_trust`: the user confirms what a session pulled from a remote named
//! as its origin and eviction policy (kept aside in the info's
//! `meta.remote_origin` by `pull::session`), so `promote` writes to that
//! repository, `continue --project` finds the session and the policy applies.
//!
//! Invariants: user role only; one compare-and-swap of the info record; a
//! session with nothing to trust is `not_found` and nothing changes.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::lifecycle::REMOTE_ORIGIN;
use crate::lifecycle::{Origin, Policy, manage};
use crate::session;
use crate::store::ObjectStore;

pub fn run(store: &dyn ObjectStore, name: &str) -> Result<Value> {
    session::validate_session_name(name)?;
    let mut adopted: Option<(Value, Option<Origin>)> = None;
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
        if let Some(p) = v.get("policy").filter(|p| !p.is_null()) {
            i.policy = serde_json::from_value::<Policy>(p.clone()).map_err(bad)?;
        }
        i.origin = origin.clone();
        adopted = Some((v, origin));
        Ok(true)
    })?;
    let (v, origin) = adopted.expect("update ran the closure");
    Ok(json!({
        "session": name,
        "remote": v["remote"],
        "origin": origin.map(|o| o.path),
        "policy": v["policy"],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::SessionInfo;
    use crate::store::MemStore;

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
        assert_eq!(v["origin"], json!("/srv/repo"));
        let got = crate::lifecycle::load(&s, "p").unwrap().unwrap();
        assert_eq!(got.origin, Some(o));
        assert_eq!(got.policy, pol);
        assert!(!got.meta.contains_key(REMOTE_ORIGIN));
        assert!(matches!(run(&s, "p"), Err(Error::NotFound(_))));
    }
}
