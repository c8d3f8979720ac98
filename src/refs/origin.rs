//! Where a session came from ([`Origin`]): a typed field of its record
//! (`SessionRecord::origin`), written only by the daemon when it makes the session
//! (`ops::spawn::Spawn::set`), never by a request.
//!
//! Owns: the origins (fork, continue, experiment run, bisect candidate) and what
//! each says of its source, and the reading of the untyped form that records of
//! format version 2 and older kept in `meta` (`meta.experiment`, `meta.bisect`),
//! which [`from_legacy_meta`] turns into the typed one when such a record decodes.
//!
//! Invariants: an origin is trusted only because no request can write it: a
//! record of the current version never gets an origin from its `meta` (that is
//! request- and feature-defined data), only one of version 2 or older, written by
//! a daemon that put those keys there itself. A session is an experiment's fork
//! or a bisect's candidate only when its origin says so *and* its name is that
//! fork's canonical name (the callers check both: a record copied under another
//! name is not one).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::id::CheckpointId;

/// Where a session came from (see the module docs).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// `fork` of `source`.
    Fork { source: String },
    /// `continue` of `source`'s conversation.
    Continue { source: String },
    /// A run of an experiment of `source`.
    Experiment(ExperimentRun),
    /// A candidate of a bisect of `source`.
    Bisect(BisectCandidate),
}

impl Origin {
    /// The session this one was made from.
    pub fn source(&self) -> &str {
        match self {
            Origin::Fork { source } | Origin::Continue { source } => source,
            Origin::Experiment(r) => &r.source,
            Origin::Bisect(b) => &b.source,
        }
    }

    /// The session whose lineage this one joins (its agent sees this one's
    /// history): the source of a fork, an experiment run or a bisect candidate; a
    /// continued session starts its own.
    pub fn lineage(&self) -> Option<&str> {
        match self {
            Origin::Continue { .. } => None,
            _ => Some(self.source()),
        }
    }

    /// The experiment run this is, if it is one.
    pub fn experiment(&self) -> Option<&ExperimentRun> {
        match self {
            Origin::Experiment(r) => Some(r),
            _ => None,
        }
    }

    /// The bisect candidate this is, if it is one.
    pub fn bisect(&self) -> Option<&BisectCandidate> {
        match self {
            Origin::Bisect(b) => Some(b),
            _ => None,
        }
    }
}

/// A run's fork: experiment `id` of `source`, run `run` of `runs`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ExperimentRun {
    pub id: String,
    pub source: String,
    pub run: u32,
    pub runs: u32,
    /// The checkpoint every run starts from.
    pub base: CheckpointId,
    /// The runs' directory, relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The host directory the forks were mounted in.
    pub dir: PathBuf,
    /// The run's label, command and environment as the request gave them (the
    /// command is the request's JSON: `command::wire::RunCommand` is above this
    /// layer).
    #[serde(default)]
    pub label: String,
    pub command: Value,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A bisect's candidate: bisect `id` of `source`, fork `n`, at `checkpoint`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BisectCandidate {
    pub id: String,
    pub source: String,
    pub n: u32,
    pub checkpoint: CheckpointId,
    #[serde(default)]
    pub cwd: Option<String>,
    /// The host directory the candidates were mounted in.
    pub dir: PathBuf,
}

/// The origin that a record of format version 2 or older kept in its `meta`
/// (`experiment` or `bisect`), taken out of it; `None` (and `meta` untouched)
/// when there is none or it does not read as one (then it is just data).
pub fn from_legacy_meta(meta: &mut Map<String, Value>) -> Option<Origin> {
    let run = meta
        .get("experiment")
        .and_then(|v| serde_json::from_value::<ExperimentRun>(v.clone()).ok());
    if let Some(r) = run {
        meta.remove("experiment");
        return Some(Origin::Experiment(r));
    }
    let cand = meta
        .get("bisect")
        .and_then(|v| serde_json::from_value::<BisectCandidate>(v.clone()).ok());
    if let Some(b) = cand {
        meta.remove("bisect");
        return Some(Origin::Bisect(b));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn legacy_meta_becomes_typed_and_other_meta_stays() {
        let base = "ab".repeat(32);
        let mut m = json!({
            "experiment": {"id": "7f", "source": "s", "run": 2, "runs": 3, "base": base,
                           "cwd": null, "dir": "/w/s.experiments", "label": "2",
                           "command": "true", "env": {}},
            "agent_of": "s",
        })
        .as_object()
        .unwrap()
        .clone();
        let o = from_legacy_meta(&mut m).unwrap();
        assert_eq!(o.source(), "s");
        assert_eq!(o.experiment().unwrap().run, 2);
        assert_eq!(o.lineage(), Some("s"));
        assert!(!m.contains_key("experiment") && m.contains_key("agent_of"));
        // A bisect candidate, and a key that is not one stays data.
        let mut b = json!({"bisect": {"id": "1", "source": "s", "n": 1, "checkpoint": base,
                                      "dir": "/w/s.bisect"}})
        .as_object()
        .unwrap()
        .clone();
        assert_eq!(from_legacy_meta(&mut b).unwrap().bisect().unwrap().n, 1);
        let mut junk = json!({"experiment": {"id": 1}})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(from_legacy_meta(&mut junk), None);
        assert!(junk.contains_key("experiment"));
    }

    #[test]
    fn origin_round_trips_tagged() {
        let o = Origin::Fork { source: "a".into() };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v, json!({"kind": "fork", "source": "a"}));
        assert_eq!(serde_json::from_value::<Origin>(v).unwrap(), o);
        assert_eq!(Origin::Continue { source: "a".into() }.lineage(), None);
    }
}
