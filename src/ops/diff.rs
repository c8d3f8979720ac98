//! `diff`: differences between two states (refs, or `WORKING`).

use serde_json::{Value, json};

use super::{Target, side_root};
use crate::diff;
use crate::error::{Error, Result};

pub(super) fn run(
    t: &Target,
    a: Option<&str>,
    b: Option<&str>,
    mode: Option<String>,
) -> Result<Value> {
    let s = &t.session;
    let store = s.store().clone();
    let mode = mode.unwrap_or_else(|| "name-status".into());
    if !["name-status", "stat", "patch"].contains(&mode.as_str()) {
        return Err(Error::Invalid(format!(
            "unknown diff mode {mode:?} (name-status, stat, patch)"
        )));
    }
    let ra = match a {
        Some(spec) => side_root(t, spec)?,
        None if s.record().head.is_some() => side_root(t, "HEAD")?,
        None => s.base_root()?,
    };
    let rb = side_root(t, b.unwrap_or("WORKING"))?;
    let entries = diff::diff_roots(&*store, ra, rb)?;
    let mut list = Vec::new();
    let mut text = String::new();
    for e in &entries {
        let mut v = json!({"path": e.path_str(), "change": e.change});
        if mode == "stat" {
            match diff::line_counts(&*store, e)? {
                Some((add, del)) => {
                    v["added"] = json!(add);
                    v["removed"] = json!(del);
                }
                None => v["binary"] = json!(true),
            }
        }
        if mode == "patch" {
            text.push_str(&diff::patch(&*store, e)?);
        }
        list.push(v);
    }
    let patch = (mode == "patch").then_some(text);
    Ok(json!({"a": ra.to_hex(), "b": rb.to_hex(), "entries": list, "patch": patch}))
}
