//! Experiment forks left in the store after their experiment (the winner's, kept
//! until adopted; every fork with `keep`; those a crash left) follow their source
//! session: [`forks_of`] names them when the source is removed or discarded (the
//! caller removes them with it), [`stranded`] names those whose source is gone or
//! no longer active (discarded, expired), for the daemon's sweep.
//!
//! Invariants: a session counts as a fork of `S` only when its record's
//! origin (`refs::origin`, written by the daemon at `experiment_begin`, never by
//! a request) is a run of an experiment of `S` *and* its name is that experiment's fork name
//! (`S-xID-RUN`); mounted forks are the caller's to skip (removal refuses them).

use super::fork_name;
use crate::error::Result;
use crate::lifecycle::{self, State};
use crate::session::{self, SessionRecord};
use crate::store::ObjectStore;

/// The source session `rec` is an experiment fork of, if it is one.
fn source_of(rec: &SessionRecord) -> Option<&str> {
    let m = rec.origin.as_ref()?.experiment()?;
    (rec.name == fork_name(&m.source, &m.id, m.run)).then_some(&m.source)
}

/// The experiment forks of session `source` in the store, by name.
pub fn forks_of(store: &dyn ObjectStore, source: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = session::list_records(store)?
        .into_iter()
        .filter(|r| source_of(r) == Some(source))
        .map(|r| r.name)
        .collect();
    out.sort();
    Ok(out)
}

/// The experiment forks whose source session is gone, discarded or expired, by
/// name (with the reason).
pub fn stranded(store: &dyn ObjectStore) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for r in session::list_records(store)? {
        let Some(source) = source_of(&r) else {
            continue;
        };
        let why = if session::load_record(store, source)?.is_none() {
            format!("its source session {source} is gone")
        } else {
            match lifecycle::load(store, source)?.map(|i| i.state) {
                Some(State::Discarded) => format!("its source session {source} was discarded"),
                Some(State::Expired) => format!("its source session {source} expired"),
                _ => continue,
            }
        };
        out.push((r.name, why));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use serde_json::json;

    fn put(s: &MemStore, name: &str, meta: Option<serde_json::Value>) {
        let mut rec =
            crate::refs::session_record::new_record(name, crate::id::NodeId([0; 32]), 0, 0)
                .unwrap();
        if let Some(mut m) = meta {
            m["runs"] = json!(2);
            m["base"] = json!("00".repeat(32));
            m["dir"] = json!("/w");
            m["command"] = json!("true");
            let run = serde_json::from_value(m).unwrap();
            rec.origin = Some(crate::refs::origin::Origin::Experiment(run));
        }
        s.commit(vec![crate::refs::session_record::record_op(&rec)])
            .unwrap();
    }

    #[test]
    fn forks_follow_their_source() {
        let s = MemStore::default();
        put(&s, "s", None);
        put(
            &s,
            "s-xab12-2",
            Some(json!({"id": "ab12", "source": "s", "run": 2})),
        );
        // Claims to be a fork of s under another name: not one.
        put(
            &s,
            "mine",
            Some(json!({"id": "ab12", "source": "s", "run": 1})),
        );
        put(
            &s,
            "t-xcd-1",
            Some(json!({"id": "cd", "source": "t", "run": 1})),
        );
        assert_eq!(forks_of(&s, "s").unwrap(), ["s-xab12-2"]);
        // t is gone: its fork is stranded; s is active: its fork is not.
        let st = stranded(&s).unwrap();
        assert_eq!(st.len(), 1, "{st:?}");
        assert_eq!(st[0].0, "t-xcd-1");
        // s discarded: its fork is stranded too.
        manage_discard(&s, "s");
        let st: Vec<String> = stranded(&s).unwrap().into_iter().map(|p| p.0).collect();
        assert_eq!(st, ["s-xab12-2", "t-xcd-1"]);
    }

    fn manage_discard(s: &MemStore, name: &str) {
        crate::lifecycle::manage::discard(s, name).unwrap();
    }
}
