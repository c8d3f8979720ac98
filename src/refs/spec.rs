//! Ref specs: the syntax users and agents name states with, parsed into a small
//! AST ([`parse`], a pure function that never panics) and resolved to a checkpoint
//! ([`resolve_in`]) against a [`RefContext`] (what only a session knows: its HEAD,
//! its previous checkouts, its exec records).
//!
//! Grammar (see docs/design.md, "Ref syntax"):
//!
//! ```text
//! spec    = base suffix*
//! base    = "HEAD" | "@" | "@{-" N "}" | "exec@" N | "tool@" N | NAME
//! suffix  = "~" [N] | "^" [N]          ; "~" = "~1", "^" = "^1", "^0" = itself
//! NAME    = a branch name (the session's own, a store-wide one, REMOTE/NAME,
//!           SESSION/BRANCH: in that order, see `super::names`), else a full
//!           checkpoint id or a unique prefix (>= 4 hex)
//! ```
//!
//! Invariants: a base never contains `~` or `^` (branch names refuse them, see
//! [`super::validate_ref_name`], which also refuses `@`, `@{` and `exec@<digits>`
//! so no branch can shadow the other bases); a spec is at most [`MAX_SPEC`] bytes,
//! so the suffix list is bounded; numbers are `u64` (larger ones are refused,
//! never wrapped). `~N` follows first parents; `^N` picks the N-th parent.

use std::fmt;

use super::{AMBIGUOUS_SHOWN, Checkpoint, get_ref, load, pick_prefix, resolve_prefix};
use crate::error::{Error, Result};
use crate::id::CheckpointId;
use crate::store::ObjectStore;

/// Longest ref spec accepted, in bytes.
pub const MAX_SPEC: usize = 1024;

/// What a ref may be (appended to "unknown ref" errors).
pub const REF_FORMS: &str = "a ref is HEAD (or @), a branch name (SESSION/BRANCH for another \
     session's, REMOTE/NAME for a remote's), a checkpoint id or a unique \
     prefix of at least 4 hex digits, @{-N} (the N-th previous checkout) or exec@N or tool@N (the state \
     after exec N), followed by any of ~N, ~, ^N, ^";

/// Where a spec starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// `HEAD` or `@`.
    Head,
    /// `@{-N}`: the N-th previous checkout (N >= 1).
    Previous(u64),
    /// `exec@N`: the state after exec number N.
    Exec(u64),
    /// A branch name, else a checkpoint id or unique id prefix.
    Name(String),
}

/// A step from the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suffix {
    /// `~N`: N first parents back.
    Ancestor(u64),
    /// `^N`: the N-th parent (`^0`: the checkpoint itself).
    Parent(u64),
}

/// A parsed ref spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefSpec {
    /// Where it starts.
    pub base: Base,
    /// Steps from there, in order.
    pub suffixes: Vec<Suffix>,
}

impl fmt::Display for Base {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Base::Head => f.write_str("HEAD"),
            Base::Previous(n) => write!(f, "@{{-{n}}}"),
            Base::Exec(n) => write!(f, "exec@{n}"),
            Base::Name(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Suffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Suffix::Ancestor(n) => write!(f, "~{n}"),
            Suffix::Parent(n) => write!(f, "^{n}"),
        }
    }
}

/// The canonical form: `parse(&spec.to_string()) == Ok(spec)`.
impl fmt::Display for RefSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base)?;
        for s in &self.suffixes {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// A number in a spec (digits only; too large is an error, never a wrap).
fn number(spec: &str, digits: &str) -> Result<u64> {
    digits.parse().map_err(|_| {
        Error::Invalid(format!(
            "bad ref {spec:?}: {digits:?} is not a number below 2^64"
        ))
    })
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn parse_base(spec: &str, base: &str) -> Result<Base> {
    let bad = |why: &str| Err(Error::Invalid(format!("bad ref {spec:?}: {why}")));
    match base {
        "" => return bad("no base before ~ or ^ (e.g. HEAD~1)"),
        "HEAD" | "@" => return Ok(Base::Head),
        _ => {}
    }
    if let Some(rest) = base.strip_prefix("@{") {
        let Some(n) = rest.strip_prefix('-').and_then(|r| r.strip_suffix('}')) else {
            return bad("only @{-N} (the N-th previous checkout) is supported");
        };
        if !all_digits(n) {
            return bad("@{-N} needs a number N >= 1");
        }
        return match number(spec, n)? {
            0 => bad("@{-N} needs N >= 1 (@{-0} would be HEAD: write HEAD)"),
            n => Ok(Base::Previous(n)),
        };
    }
    if let Some(n) = exec_digits(base) {
        return Ok(Base::Exec(number(spec, n)?));
    }
    if base.contains("@{") {
        return bad("NAME@{...} (reflog syntax) is not supported; @{-N} stands alone");
    }
    Ok(Base::Name(base.to_string()))
}

/// The digits of `exec@N` or its alias `tool@N` (an agent runtime's tool call is
/// recorded as an exec), if `s` is one of them.
pub fn exec_digits(s: &str) -> Option<&str> {
    s.strip_prefix("exec@")
        .or_else(|| s.strip_prefix("tool@"))
        .filter(|n| all_digits(n))
}

/// The exec number `s` names (`exec@N`, `tool@N`), if it is such a ref.
pub fn exec_ref(s: &str) -> Option<u64> {
    exec_digits(s)?.parse().ok()
}

/// Parse a ref spec. Pure; never panics on any input.
pub fn parse(spec: &str) -> Result<RefSpec> {
    let (base, suffixes) = parse_spanned(spec)?;
    Ok(RefSpec {
        base,
        suffixes: suffixes.into_iter().map(|(s, _)| s).collect(),
    })
}

/// [`parse`], keeping where each suffix ends in `spec` (errors quote the spec as
/// written up to the suffix that failed).
fn parse_spanned(spec: &str) -> Result<(Base, Vec<(Suffix, usize)>)> {
    if spec.len() > MAX_SPEC {
        return Err(Error::Invalid(format!(
            "ref spec longer than {MAX_SPEC} bytes"
        )));
    }
    let cut = spec.find(['~', '^']).unwrap_or(spec.len());
    let base = parse_base(spec, &spec[..cut])?;
    let mut suffixes = Vec::new();
    let mut at = cut;
    while at < spec.len() {
        let rest = &spec[at..];
        let op = match rest.as_bytes()[0] {
            b'~' => Suffix::Ancestor,
            b'^' => Suffix::Parent,
            _ => {
                return Err(Error::Invalid(format!(
                    "bad ref {spec:?}: unexpected {rest:?} after {:?} (suffixes are ~N, ~, ^N, ^)",
                    &spec[..at]
                )));
            }
        };
        let after = &rest[1..];
        let len = after.bytes().take_while(u8::is_ascii_digit).count();
        let n = match len {
            0 => 1,
            _ => number(spec, &after[..len])?,
        };
        at += 1 + len;
        suffixes.push((op(n), at));
    }
    Ok((base, suffixes))
}

/// What a caller may see when it may not see the whole store (an agent socket:
/// see `crate::visibility`). A branch or checkpoint it does not see resolves
/// exactly as one that does not exist: same error, same message, and an id prefix
/// is matched against visible ids only (no oracle through ambiguity).
pub trait Visibility {
    /// Whether the branch `name` is visible.
    fn branch(&self, name: &str) -> Result<bool>;
    /// Whether checkpoint `id` is visible.
    fn checkpoint(&self, id: &CheckpointId) -> Result<bool>;
    /// Visible checkpoints whose id starts with the lowercase hex digits `lower`,
    /// in id order, at most `max`.
    fn with_prefix(&self, lower: &str, max: usize) -> Result<Vec<CheckpointId>>;
}

/// What resolving needs from a session (the lead implements it from the session's
/// operation log).
pub trait RefContext {
    /// What the caller may see: `None` (the default) for the whole store. When
    /// given, every name and id resolves through it, and remote tracking refs
    /// (`REMOTE/NAME`) are not resolved at all.
    fn visibility(&self) -> Option<&dyn Visibility> {
        None
    }
    /// The session whose branch namespace plain names are looked up in first
    /// (`super::names`); `None`: store-wide and `SESSION/BRANCH` names only.
    fn session(&self) -> Option<&str> {
        None
    }
    /// The session's HEAD checkpoint, None before its first checkpoint.
    fn head(&self) -> Option<CheckpointId>;
    /// What the N-th previous checkout (N >= 1) checked out.
    fn previous_checkout(&self, n: u64) -> Result<CheckpointId>;
    /// The checkpoint holding the state after exec number N.
    fn exec_state(&self, n: u64) -> Result<CheckpointId>;
}

/// A context that knows only a HEAD (no session log): `@{-N}` and `exec@N` are
/// refused with a clear message.
pub struct HeadOnly(pub Option<CheckpointId>);

impl RefContext for HeadOnly {
    fn head(&self) -> Option<CheckpointId> {
        self.0
    }
    fn previous_checkout(&self, n: u64) -> Result<CheckpointId> {
        Err(Error::Invalid(format!(
            "@{{-{n}}} needs a session (its record of checkouts); none is given here"
        )))
    }
    fn exec_state(&self, n: u64) -> Result<CheckpointId> {
        Err(Error::Invalid(format!(
            "exec@{n} needs a session (its exec history); none is given here"
        )))
    }
}

/// Load the checkpoint named by `hex` (a remote tracking ref's).
fn load_hex(store: &dyn ObjectStore, what: &str, hex: &str) -> Result<Checkpoint> {
    let id = CheckpointId::from_hex(hex)
        .ok_or_else(|| Error::corrupt(what.to_string(), format!("bad checkpoint id {hex:?}")))?;
    load(store, &id)
}

fn resolve_base(
    store: &dyn ObjectStore,
    cx: &dyn RefContext,
    spec: &str,
    base: &Base,
) -> Result<Checkpoint> {
    match base {
        Base::Head => {
            let head = cx.head().ok_or_else(|| {
                Error::NotFound("this session has no checkpoint yet (HEAD is unset)".into())
            })?;
            load(store, &head)
        }
        Base::Previous(n) => load(store, &cx.previous_checkout(*n)?),
        Base::Exec(n) => load(store, &cx.exec_state(*n)?),
        Base::Name(name) => resolve_name(store, cx.visibility(), cx.session(), spec, name),
    }
}

/// A branch name (the session's own, then a store-wide one), else (without a
/// visibility) a remote tracking ref, else another session's branch
/// (`SESSION/BRANCH`), else a full checkpoint id or a unique id prefix; with a
/// visibility, only what it sees.
fn resolve_name(
    store: &dyn ObjectStore,
    vis: Option<&dyn Visibility>,
    session: Option<&str>,
    spec: &str,
    name: &str,
) -> Result<Checkpoint> {
    // With a visibility, asked whether or not the branch exists (the same work
    // either way: no timing difference between hidden and missing).
    let seen = |full: &str| vis.map_or(Ok(true), |v| v.branch(full));
    let (first, qualified) = super::names::candidates(session, name);
    for full in &first {
        let visible = seen(full)?;
        if let Some(r) = get_ref(store, full)?
            && visible
        {
            return load(store, &r.checkpoint);
        }
    }
    if vis.is_none()
        && let Some(hex) = remote_ref(store, spec, name)?
    {
        return load_hex(store, &format!("remote ref {name}"), &hex);
    }
    if let Some(full) = &qualified {
        let visible = seen(full)?;
        if let Some(r) = get_ref(store, full)?
            && visible
        {
            return load(store, &r.checkpoint);
        }
    }
    if name.len() >= 4 && name.len() <= 64 && name.bytes().all(|c| c.is_ascii_hexdigit()) {
        let lower = name.to_ascii_lowercase();
        if let Some(id) = CheckpointId::from_hex(&lower) {
            if let Some(v) = vis
                && !v.checkpoint(&id)?
            {
                return Err(super::unknown_checkpoint(&id));
            }
            return load(store, &id);
        }
        return match vis {
            None => resolve_prefix(store, name, &lower),
            Some(v) => pick_prefix(store, name, v.with_prefix(&lower, AMBIGUOUS_SHOWN + 1)?),
        };
    }
    Err(Error::NotFound(format!(
        "unknown ref {spec:?}: {name:?} is not a branch or checkpoint id ({REF_FORMS})"
    )))
}

/// `REMOTE/NAME` where REMOTE is a configured remote: the checkpoint its tracking
/// ref names (a remote branch first, then a remote session's HEAD). `None` when
/// the first component is not a configured remote (local rules go on).
fn remote_ref(store: &dyn ObjectStore, spec: &str, name: &str) -> Result<Option<String>> {
    use crate::refs::tracking::{self, TrackKind};
    let Some((remote, rest)) = name.split_once('/') else {
        return Ok(None);
    };
    if rest.is_empty() || store.meta_get(&crate::meta::remote_key(remote))?.is_none() {
        return Ok(None);
    }
    for kind in [TrackKind::Branch, TrackKind::Session] {
        if let Some(t) = tracking::get(store, remote, kind, rest)? {
            return match t.checkpoint {
                Some(hex) => Ok(Some(hex)),
                None => Err(Error::NotFound(format!(
                    "{spec:?}: remote {} {rest:?} of {remote} has no checkpoint yet",
                    kind.as_str()
                ))),
            };
        }
    }
    Err(Error::NotFound(format!(
        "unknown ref {spec:?}: remote {remote} has no branch or session {rest:?} that this \
         store has seen (run `treefork pull {remote}` first)"
    )))
}

/// One suffix applied to `c`; `upto` is the spec through this suffix (for errors).
fn step(store: &dyn ObjectStore, c: Checkpoint, s: Suffix, upto: &str) -> Result<Checkpoint> {
    match s {
        Suffix::Parent(0) => Ok(c),
        Suffix::Parent(n) => {
            let have = c.parents.len() as u64;
            if n > have {
                let parents = match have {
                    0 => "no parents".to_string(),
                    1 => "1 parent".to_string(),
                    k => format!("{k} parents"),
                };
                return Err(Error::NotFound(format!(
                    "{upto}: checkpoint {} has {parents}",
                    c.id.short()
                )));
            }
            load(store, &c.parents[n as usize - 1])
        }
        Suffix::Ancestor(n) => {
            let mut c = c;
            for i in 0..n {
                let Some(p) = c.parent() else {
                    let a = if i == 1 { "ancestor" } else { "ancestors" };
                    return Err(Error::NotFound(format!("{upto}: history has only {i} {a}")));
                };
                c = load(store, &p)?;
            }
            Ok(c)
        }
    }
}

/// Resolve a ref spec to a checkpoint in the context of a session.
pub fn resolve_in(store: &dyn ObjectStore, cx: &dyn RefContext, spec: &str) -> Result<Checkpoint> {
    let (base, suffixes) = parse_spanned(spec)?;
    let mut c = resolve_base(store, cx, spec, &base)?;
    for (s, end) in suffixes {
        c = step(store, c, s, &spec[..end])?;
    }
    Ok(c)
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
