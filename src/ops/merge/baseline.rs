//! The new baseline a rebase records on the session's info record (read-guarded
//! ops in the batch of the rebase's checkpoint, or of its `--continue`).

use crate::error::{Error, Result};
use crate::lifecycle;
use crate::merge::Stop;
use crate::meta::{self, MetaOp};
use crate::ops::Target;

/// The ops recording the new baseline of a rebase (`m.onto`) on the session's
/// info record, guarded by its old bytes.
pub(crate) fn ops(t: &Target, m: &Stop) -> Result<Vec<MetaOp>> {
    let Some((commit, root)) = &m.onto else {
        return Ok(Vec::new());
    };
    let store = t.session.store();
    let key = meta::info_key(t.session.name());
    let old = store.meta_get(&key)?;
    let Some(bytes) = &old else {
        return Err(Error::NotFound(format!(
            "session {}: no info record",
            t.session.name()
        )));
    };
    let mut info = lifecycle::SessionInfo::decode(t.session.name(), bytes)?;
    let Some(o) = info.origin.as_mut() else {
        return Err(Error::Invalid("the session lost its origin".into()));
    };
    o.baseline = Some(commit.clone());
    o.baseline_root = root.to_hex();
    Ok(vec![MetaOp::Expect(key, old), info.op()])
}
