//! `checkout`: make the live mount show a ref's tree, saving pending changes first.

use serde_json::{Value, json};

use super::{Target, ckpt_json, save_and_graft, saved_json};
use crate::error::Result;

pub(super) fn run(t: &Target, spec: &str) -> Result<Value> {
    let s = &t.session;
    let c = super::refctx::resolve(t, spec)?;
    let root = c.root_id()?;
    let t0 = std::time::Instant::now();
    // HEAD is committed under the write gate, right after the tree swap: a write
    // (and its flush) may only come after it, never be overwritten by it.
    let (saved, n) = save_and_graft(
        t,
        "before-checkout",
        &format!("checkout of {spec}"),
        root,
        None,
        &mut || s.commit_checkout(&c.id, root).map(drop),
    )?;
    log::debug!(
        "checkout {spec}: sync+save+graft+commit, {n} invalidations, total {:?}",
        t0.elapsed()
    );
    Ok(json!({
        "checkpoint": ckpt_json(&c),
        "saved": saved_json(saved),
    }))
}
