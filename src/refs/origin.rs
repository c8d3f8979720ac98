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
    #[serde(default)]
    pub runs: u32,
    /// The checkpoint every run starts from.
    pub base: CheckpointId,
    /// The runs' directory, relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The host directory the forks were mounted in (empty in records written
    /// before it was kept).
    #[serde(default)]
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
    /// The host directory the candidates were mounted in (empty in records
    /// written before it was kept).
    #[serde(default)]
    pub dir: PathBuf,
}

/// The origin that a record of format version 2 or older kept in its `meta`
/// (`experiment` or `bisect`), taken out of it; `None` (and `meta` untouched)
/// when there is none. One that does not read as an origin stays in `meta` and
/// is logged (warn): that record is no longer taken for a fork (`session rm`
/// removes it).
pub fn from_legacy_meta(name: &str, meta: &mut Map<String, Value>) -> Option<Origin> {
    fn read<T: serde::de::DeserializeOwned>(
        name: &str,
        meta: &Map<String, Value>,
        k: &str,
    ) -> Option<T> {
        let v = meta.get(k)?;
        match serde_json::from_value(v.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                log::warn!(
                    "session record {name}: meta.{k} of an older version does not read as its                      origin ({e}); the session is not taken for a fork of anything"
                );
                None
            }
        }
    }
    if let Some(r) = read::<ExperimentRun>(name, meta, "experiment") {
        meta.remove("experiment");
        return Some(Origin::Experiment(r));
    }
    if let Some(b) = read::<BisectCandidate>(name, meta, "bisect") {
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
        let o = from_legacy_meta("s-x7f-2", &mut m).unwrap();
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
        assert_eq!(
            from_legacy_meta("s-b1-1", &mut b)
                .unwrap()
                .bisect()
                .unwrap()
                .n,
            1
        );
        let mut junk = json!({"experiment": {"id": 1}})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(from_legacy_meta("j", &mut junk), None);
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
