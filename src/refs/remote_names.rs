//! Remote names: what a remote may be called, whether one is configured, and the
//! rule keeping `REMOTE/NAME` unambiguous against local branch names.
//!
//! Owns: the name rules ([`validate_name`]), the existence check ([`exists`]: a
//! remote config record under `crate::meta::remote_key`, whose content is
//! `remote::config`'s) and the two clash checks ([`refuse_branch_clash`],
//! [`refuse_remote_clash`]). Here, below `ops` and `lifecycle`, so a branch
//! operation or a session setting can check a remote name without importing the
//! remote tier.
//! Invariant: no remote is named like the first `/`-component of a local branch, and
//! no branch is created whose first component is a remote's name.

use crate::error::{Error, Result};
use crate::meta;
use crate::store::ObjectStore;

/// Whether `name` is a configured remote's name.
pub fn exists(store: &dyn ObjectStore, name: &str) -> Result<bool> {
    Ok(store.meta_get(&meta::remote_key(name))?.is_some())
}

/// Names a remote may not have: ref-spec words and the daemon's branch namespace.
const RESERVED: [&str; 3] = ["HEAD", "WORKING", "auto"];

/// A remote name: `[A-Za-z][A-Za-z0-9_.-]{0,63}`, not `HEAD`, `WORKING` or
/// `auto` (the daemon's `auto/...` branches).
pub fn validate_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::Invalid(format!(
            "invalid remote name {name:?}: {why}"
        )))
    };
    let mut chars = name.chars();
    match chars.next() {
        None => return bad("empty"),
        Some(c) if !c.is_ascii_alphabetic() => return bad("must start with a letter"),
        Some(_) => {}
    }
    if name.len() > 64 {
        return bad("longer than 64 characters");
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        return bad("only letters, digits, '_', '.' and '-' are allowed");
    }
    if RESERVED.contains(&name) {
        return bad("reserved name");
    }
    Ok(())
}

/// Refuse a new branch whose first `/`-component names a configured remote
/// (`REMOTE/NAME` must keep meaning the remote's ref).
pub fn refuse_branch_clash(store: &dyn ObjectStore, branch: &str) -> Result<()> {
    let first = branch.split('/').next().unwrap_or(branch);
    if exists(store, first)? {
        return Err(Error::Invalid(format!(
            "invalid branch name {branch:?}: {first:?} is a remote (its branches are named {first}/NAME)"
        )));
    }
    Ok(())
}

/// Refuse a remote name that is the first `/`-component of a local branch (of
/// any session), or the name of a session (`NAME/BRANCH` would mean both).
pub fn refuse_remote_clash(store: &dyn ObjectStore, name: &str) -> Result<()> {
    if store.meta_get(&meta::session_key(name))?.is_some() {
        return Err(Error::Invalid(format!(
            "invalid remote name {name:?}: it is a session's name ({name}/BRANCH names its branches)"
        )));
    }
    let clash = crate::refs::list_refs(store)?
        .into_iter()
        .find(|(b, _)| crate::refs::names::short(b).split('/').next() == Some(name));
    if let Some((b, _)) = clash {
        let whose = match crate::refs::names::split(&b) {
            (Some(s), _) => format!(" of session {s}"),
            (None, _) => String::new(),
        };
        let b = crate::refs::names::short(&b);
        return Err(Error::Invalid(format!(
            "invalid remote name {name:?}: local branch {b:?}{whose} starts with it (rename or \
             delete the branch first)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["origin", "o", "Team-1.backup_2", &"a".repeat(64)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1origin",
            "-x",
            "a/b",
            "a b",
            "a\0",
            "HEAD",
            "auto",
            &"a".repeat(65),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
