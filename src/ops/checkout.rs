//! `checkout`: make the live mount show a ref's tree, saving pending changes first.

use serde_json::{Value, json};

use super::{Target, ckpt_json, save_and_graft, saved_json};
use crate::error::Result;
use crate::refs;

pub(super) fn run(t: &Target, spec: &str) -> Result<Value> {
    let s = &t.session;
    let head = s.record().head;
    let c = refs::resolve(&**s.store(), head.as_deref(), spec)?;
    let root = c.root_id()?;
    let t0 = std::time::Instant::now();
    let (saved, n) = save_and_graft(
        t,
        "before-checkout",
        &format!("checkout of {spec}"),
        root,
        None,
    )?;
    let t1 = t0.elapsed();
    // The tree is grafted and the kernel told: now commit HEAD.
    let r = s.commit_checkout(&c.id, root);
    log::debug!(
        "checkout {spec}: sync+save+graft {t1:?}, {n} invalidations, total {:?}",
        t0.elapsed()
    );
    r?;
    Ok(json!({
        "checkpoint": ckpt_json(&c),
        "saved": saved_json(saved),
    }))
}
