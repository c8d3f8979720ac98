//! `config`: show (and with `set`, change) the session's settings.

use serde_json::{Value, json};

use super::Target;
use super::record::{self, Call};
use crate::error::{Error, Result};
use crate::id::NodeId;
use crate::session::SessionRecord;

pub(crate) fn run(
    t: &Target,
    call: &Call,
    set: Option<serde_json::Map<String, Value>>,
) -> Result<Value> {
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
        super::messages::check_setting(&cfg.auto_checkpoint_on)?;
        let new = cfg.clone();
        let old = s.record().config;
        let mut view = None;
        let mut extra = |rec: &mut SessionRecord, root: NodeId| -> Result<Vec<_>> {
            rec.config = new.clone();
            view = Some(record::view_of(rec, root));
            Ok(vec![])
        };
        s.flush_with(Some(&mut extra))?;
        // Settings are not part of a view: the record is inert (undo skips it) and
        // keeps the old and new values for the reader.
        let v = view.expect("flushed");
        let mut op = call.op("config", v.clone(), v);
        op.inert = true;
        op.meta
            .insert("config".into(), json!({"old": old, "new": new}));
        let _ = record::append(t, op);
    }
    Ok(json!({"config": cfg}))
}
