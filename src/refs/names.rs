//! Branch namespaces: every session has its own branch names (issue 39 item 6),
//! like git worktrees that do not share `refs/heads`, or jj workspaces.
//!
//! Owns: how a session's branch is stored (the full name `SESSION:BRANCH`, key
//! `r/SESSION:BRANCH`: `:` is refused in branch names, so it cannot be forged),
//! what a name a user or agent writes means ([`candidates`], [`find`]), how a
//! stored name is shown to a session ([`display`]), and the refusals when a new
//! name is taken or would be ambiguous ([`refuse_taken`]).
//!
//! Names as written, in a session S, are tried in this order (the first that
//! exists, and is visible to the caller, wins):
//! 1. `NAME`: S's own branch (`S:NAME`);
//! 2. `NAME`: a store-wide branch (`r/NAME`, made before branches were per
//!    session: old stores keep working unchanged, every session sees them);
//! 3. `REMOTE/NAME` where REMOTE is a configured remote: its tracking ref
//!    (resolved by `spec`, not here);
//! 4. `SESSION/BRANCH`: session SESSION's branch BRANCH (`SESSION:BRANCH`;
//!    session names have no `/`, so the first component is the session).
//!
//! Invariant keeping this unambiguous: a new branch is refused when its first
//! `/`-component names a session or a remote ([`refuse_taken`]), so in practice
//! `A/B` means one thing; when an older branch `A/B` of S predates session `A`,
//! S's own branch wins (rule 1), which is what S's user wrote it for.

use crate::error::{Error, Result};
use crate::meta;
use crate::store::ObjectStore;

use super::{RefRecord, get_ref};

/// Between the owning session and the branch name in a stored name.
pub const OWNER_SEP: char = ':';

/// The stored name of `session`'s branch `branch`.
pub fn owned(session: &str, branch: &str) -> String {
    format!("{session}{OWNER_SEP}{branch}")
}

/// A stored name split into its owner (`None`: a store-wide branch) and the
/// branch name as its owner writes it.
pub fn split(full: &str) -> (Option<&str>, &str) {
    match full.split_once(OWNER_SEP) {
        Some((s, b)) => (Some(s), b),
        None => (None, full),
    }
}

/// The branch part of a stored name (what its owner writes).
pub fn short(full: &str) -> &str {
    split(full).1
}

/// A stored name as session `asking` writes it: its own branches by their name,
/// another session's as `SESSION/BRANCH`, store-wide ones as they are. Without a
/// session, every owned name is qualified.
pub fn display(full: &str, asking: Option<&str>) -> String {
    match split(full) {
        (Some(s), b) if Some(s) == asking => b.to_string(),
        (Some(s), b) => format!("{s}/{b}"),
        (None, b) => b.to_string(),
    }
}

/// The stored names `name` (as written in session `asking`) may mean, in the
/// order they are tried; `qualified` is rule 4's (tried after remotes).
pub fn candidates(asking: Option<&str>, name: &str) -> (Vec<String>, Option<String>) {
    let mut first = Vec::new();
    if name.contains(OWNER_SEP) {
        return (first, None);
    }
    if let Some(s) = asking {
        first.push(owned(s, name));
    }
    first.push(name.to_string());
    let qualified = name
        .split_once('/')
        .filter(|(s, b)| !s.is_empty() && !b.is_empty())
        .filter(|(s, _)| crate::refs::session_record::validate_session_name(s).is_ok())
        .map(|(s, b)| owned(s, b));
    (first, qualified)
}

/// The branch `name` (as written in session `asking`) names, by rules 1, 2 and 4
/// (no remotes): its stored name and record. `visible` filters what the caller
/// may see (a hidden branch is skipped exactly as a missing one).
pub fn find(
    store: &dyn ObjectStore,
    asking: Option<&str>,
    name: &str,
    visible: &dyn Fn(&str) -> Result<bool>,
) -> Result<Option<(String, RefRecord)>> {
    let (first, qualified) = candidates(asking, name);
    for full in first.into_iter().chain(qualified) {
        // Asked whether or not it exists (the same work for hidden and missing).
        let seen = visible(&full)?;
        if let Some(r) = get_ref(store, &full)?
            && seen
        {
            return Ok(Some((full, r)));
        }
    }
    Ok(None)
}

/// [`find`] for an op that needs the branch: `not_found` naming it otherwise.
pub fn find_required(
    store: &dyn ObjectStore,
    asking: Option<&str>,
    name: &str,
    visible: &dyn Fn(&str) -> Result<bool>,
) -> Result<(String, RefRecord)> {
    find(store, asking, name, visible)?
        .ok_or_else(|| Error::NotFound(format!("no branch named {name:?}")))
}

/// Refuse `name` as a new branch of session `session` (stored as `full`, which
/// is `session:name` unless a rename keeps another owner): taken in that
/// namespace, or by a store-wide branch (both name the owner), or its first
/// `/`-component is a session's or a remote's name (`A/B` must keep meaning
/// session A's branch B, or remote A's ref B). `except` is a stored name that
/// may be taken (the branch being renamed).
pub fn refuse_taken(
    store: &dyn ObjectStore,
    session: &str,
    name: &str,
    except: Option<&str>,
) -> Result<()> {
    let full = owned(session, name);
    if except != Some(&full[..]) && get_ref(store, &full)?.is_some() {
        return Err(Error::Conflict(format!(
            "branch {name:?} already exists in session {session}"
        )));
    }
    if except != Some(name) && get_ref(store, name)?.is_some() {
        return Err(Error::Conflict(format!(
            "branch {name:?} already exists as a store-wide branch (made before branches \
             were per session, seen by every session): use another name, or \
             `treefork branch -m {name} NEW` to rename it"
        )));
    }
    let first = name.split('/').next().unwrap_or(name);
    if name.contains('/')
        && first != session
        && store.meta_get(&meta::session_key(first))?.is_some()
    {
        return Err(Error::Invalid(format!(
            "invalid branch name {name:?}: {first:?} is a session (its branches are named \
             {first}/BRANCH)"
        )));
    }
    // As `remote_names::refuse_branch_clash` (which is above this module: it
    // reads stored names through it).
    if store.meta_get(&meta::remote_key(first))?.is_some() {
        return Err(Error::Invalid(format!(
            "invalid branch name {name:?}: {first:?} is a remote (its branches are named {first}/NAME)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stored_names_and_their_display() {
        assert_eq!(owned("s1", "main"), "s1:main");
        assert_eq!(split("s1:feature/x"), (Some("s1"), "feature/x"));
        assert_eq!(split("legacy/x"), (None, "legacy/x"));
        assert_eq!(display("s1:main", Some("s1")), "main");
        assert_eq!(display("s1:main", Some("s2")), "s1/main");
        assert_eq!(display("s1:main", None), "s1/main");
        assert_eq!(display("main", Some("s2")), "main");
    }

    #[test]
    fn candidates_in_order() {
        assert_eq!(
            candidates(Some("s1"), "main"),
            (vec!["s1:main".to_string(), "main".to_string()], None)
        );
        assert_eq!(
            candidates(Some("s1"), "other/main"),
            (
                vec!["s1:other/main".to_string(), "other/main".to_string()],
                Some("other:main".to_string())
            )
        );
        assert_eq!(
            candidates(None, "s2/feature/x"),
            (
                vec!["s2/feature/x".to_string()],
                Some("s2:feature/x".to_string())
            )
        );
        // A stored name cannot be written directly.
        assert_eq!(candidates(Some("s1"), "s2:main"), (vec![], None));
        // Not a session name: no rule 4.
        assert_eq!(candidates(None, ".x/y").1, None);
    }

    proptest! {
        #[test]
        fn display_resolves_back(session in "[a-z][a-z0-9-]{0,8}", other in "[a-z][a-z0-9-]{0,8}",
                                 branch in "[a-z][a-z0-9]{0,6}(/[a-z][a-z0-9]{0,6}){0,2}") {
            // What a session is shown for a stored name is a name that means it.
            for full in [owned(&session, &branch), owned(&other, &branch), branch.clone()] {
                let shown = display(&full, Some(&session));
                let (first, q) = candidates(Some(&session), &shown);
                prop_assert!(first.contains(&full) || q.as_ref() == Some(&full), "{full} shown as {shown}");
            }
        }

        #[test]
        fn split_inverts_owned(session in "[A-Za-z0-9._-]{1,64}", branch in "[^:]{1,40}") {
            let full = owned(&session, &branch);
            prop_assert_eq!(split(&full), (Some(&session[..]), &branch[..]));
        }
    }
}
