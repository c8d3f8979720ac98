//! `config`: show (and with `set`, change) the session's settings.

use serde_json::{Value, json};

use super::Target;
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::session::SessionRecord;

pub(super) fn run(t: &Target, set: Option<serde_json::Map<String, Value>>) -> Result<Value> {
    let s = &t.session;
    let mut cfg = s.record().config;
    if let Some(set) = set {
        let mut v = serde_json::to_value(&cfg).expect("config serializes");
        for (k, val) in set {
            if v.get(&k).is_none() {
                return Err(Error::Invalid(format!("unknown setting {k:?}")));
            }
            v[&k] = val;
        }
        cfg = serde_json::from_value(v).map_err(|e| Error::Invalid(format!("bad setting: {e}")))?;
        let new = cfg.clone();
        let mut extra = |rec: &mut SessionRecord, _: NodeId| -> Result<Vec<_>> {
            rec.config = new.clone();
            Ok(vec![])
        };
        s.flush_with(Some(&mut extra))?;
    }
    Ok(json!({"config": cfg}))
}
