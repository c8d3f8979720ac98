//! Rules for the open parts of checkpoint and session records: trigger names and
//! `meta` maps.
//!
//! Triggers are an open set. Every trigger name is checked for syntax
//! (`[a-z][a-z0-9_-]{0,31}`), so it is safe to print and to use as a key or a file
//! name. The known triggers ([`KNOWN_TRIGGERS`]) keep one extra rule: those the
//! daemon sets for its own operations (saves before a checkout or restore, forks,
//! and the coming exec, experiment, promote, message and evict records) are
//! reserved, and a client's checkpoint request may not use them, so a record with
//! such a trigger was always made by the daemon. Any other well-formed name may be
//! requested.
//!
//! A `meta` map is request- or feature-defined data: at most [`MAX_META_KEYS`]
//! keys of the form `[A-Za-z][A-Za-z0-9_.-]{0,63}`, any JSON values, at most
//! [`MAX_META_BYTES`] of JSON in all.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Longest trigger name.
pub const MAX_TRIGGER_LEN: usize = 32;
/// Most keys in a `meta` map.
pub const MAX_META_KEYS: usize = 64;
/// Longest `meta` key.
pub const MAX_META_KEY_LEN: usize = 64;
/// Largest `meta` map, as JSON.
pub const MAX_META_BYTES: usize = 64 << 10;

/// A trigger with a meaning treefork knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerRule {
    /// Name.
    pub name: &'static str,
    /// Whether a client's checkpoint request may use it (otherwise only the daemon
    /// sets it).
    pub requestable: bool,
}

const fn rule(name: &'static str, requestable: bool) -> TriggerRule {
    TriggerRule { name, requestable }
}

/// The known triggers. Names not listed here are accepted when well-formed.
pub const KNOWN_TRIGGERS: &[TriggerRule] = &[
    rule("manual", true),
    rule("auto", true),
    rule("before-risky", true),
    rule("milestone", true),
    rule("before-checkout", false),
    rule("before-restore", false),
    rule("fork", false),
    rule("exec", false),
    rule("before-exec", false),
    rule("git-commit", false),
    rule("experiment", false),
    rule("promote", false),
    rule("message", false),
    rule("evict", false),
    rule("merge", false),
    rule("cherry-pick", false),
    rule("revert", false),
    rule("rebase", false),
];

/// Check a trigger name's syntax: `[a-z][a-z0-9_-]{0,31}`.
pub fn validate_trigger(name: &str) -> Result<()> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= MAX_TRIGGER_LEN
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid trigger {name:?}: use 1-{MAX_TRIGGER_LEN} characters from [a-z0-9_-], starting with a letter"
        )))
    }
}

/// Check a trigger a client asked for: well-formed and not reserved for the daemon.
pub fn validate_requested_trigger(name: &str) -> Result<()> {
    validate_trigger(name)?;
    match KNOWN_TRIGGERS.iter().find(|r| r.name == name) {
        Some(r) if !r.requestable => Err(Error::Invalid(format!(
            "trigger {name:?} is reserved for checkpoints the daemon takes itself (requestable: {})",
            KNOWN_TRIGGERS
                .iter()
                .filter(|r| r.requestable)
                .map(|r| r.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        _ => Ok(()),
    }
}

/// Check a `meta` map (see the module docs).
pub fn validate_meta(meta: &Map<String, Value>) -> Result<()> {
    if meta.len() > MAX_META_KEYS {
        return Err(Error::Invalid(format!(
            "meta has {} keys (at most {MAX_META_KEYS})",
            meta.len()
        )));
    }
    for k in meta.keys() {
        let b = k.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= MAX_META_KEY_LEN
            && b[0].is_ascii_alphabetic()
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-');
        if !ok {
            return Err(Error::Invalid(format!(
                "invalid meta key {k:?}: use 1-{MAX_META_KEY_LEN} characters from [A-Za-z0-9_.-], starting with a letter"
            )));
        }
    }
    let n = serde_json::to_vec(meta)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if n > MAX_META_BYTES {
        return Err(Error::Invalid(format!(
            "meta is {n} bytes of JSON (at most {MAX_META_BYTES})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn triggers() {
        for ok in [
            "manual",
            "auto",
            "exec",
            "a",
            "deploy-2",
            "x_y",
            &"a".repeat(32),
        ] {
            validate_trigger(ok).unwrap();
        }
        for bad in [
            "",
            "Manual",
            "1x",
            "-x",
            "a b",
            "a/b",
            "é",
            "a\n",
            &"a".repeat(33),
        ] {
            assert!(validate_trigger(bad).is_err(), "{bad:?}");
        }
        // Requests: the documented ones and any new well-formed name; not the
        // daemon's own, not malformed ones.
        for ok in ["manual", "auto", "before-risky", "milestone", "deploy"] {
            validate_requested_trigger(ok).unwrap();
        }
        for bad in ["fork", "before-checkout", "exec", "evict", "promote", "Bad"] {
            assert!(validate_requested_trigger(bad).is_err(), "{bad:?}");
        }
        for r in KNOWN_TRIGGERS {
            validate_trigger(r.name).unwrap();
        }
    }

    #[test]
    fn meta_maps() {
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        validate_meta(&Map::new()).unwrap();
        validate_meta(&m(json!({"exec.cmd": ["ls", "-l"], "n": 1, "A_b-c": null}))).unwrap();
        for bad in [
            json!({"": 1}),
            json!({"1x": 1}),
            json!({"a b": 1}),
            json!({"a/b": 1}),
        ] {
            assert!(validate_meta(&m(bad.clone())).is_err(), "{bad}");
        }
        let many: Map<String, Value> = (0..65).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(validate_meta(&many).is_err());
        let big = m(json!({"k": "x".repeat(MAX_META_BYTES)}));
        assert!(validate_meta(&big).is_err());
    }
}
