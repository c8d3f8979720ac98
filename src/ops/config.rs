//! `config`: show (and with `set`, change) the session's settings; a change is
//! committed in one batch with its (inert) operation record (`super::txn`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Target;
use super::record::{self, Call};
use super::txn::{self, Log};
use crate::error::{Error, Result};
use crate::session::SessionConfig;

/// The answer to `config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigAnswer {
    /// The session's settings (after the change, if any).
    pub config: SessionConfig,
}

pub(crate) fn run(
    t: &Target,
    call: &Call,
    set: Option<serde_json::Map<String, Value>>,
) -> Result<ConfigAnswer> {
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
        if !cfg.forks_dir.is_empty() {
            let p = std::path::Path::new(&cfg.forks_dir);
            super::forkdir::check_forks_base(p, "setting forks_dir")?;
        }
        let new = cfg.clone();
        let old = s.record().config;
        let txn = txn::Transaction::begin(t, "config");
        let mut tx = s.txn();
        let root = tx.flush()?;
        tx.edit(&mut |rec| rec.config = new.clone());
        // Settings are not part of a view: the record is inert (undo skips it) and
        // keeps the old and new values for the reader.
        let v = record::view_of(tx.before(), root);
        txn.commit(&mut tx, Log::Next, &mut |_, _| {
            let mut op = call.op("config", v.clone(), v.clone());
            op.inert = true;
            op.meta
                .insert("config".into(), json!({"old": old, "new": new}));
            Ok((op, Vec::new()))
        })?;
    }
    Ok(ConfigAnswer { config: cfg })
}
