//! `diff`: differences between two states (refs, or `WORKING`), and what `status`
//! and `diff` show ([`filter`]): the workspace's ignored paths and `.git` left out
//! (or listed, marked), only the chosen paths when some are named.
//!
//! The two roots are resolved under the session's op lock (`WORKING` flushes the
//! live tree). The walk and the per-file work (line counts, patches) read only
//! stored objects named by those two root ids and run after the op lock is
//! released, so a client that reads a streamed patch slowly holds up nothing but its
//! own connection.
//!
//! Memory: with `stream` the daemon holds one file's patch at a time (sent as a
//! `{"event":"patch","path":..,"text":..}` line as soon as it is made) plus the entry
//! list; without it, the whole patch text (older clients). A file larger than
//! [`diff::PATCH_LIMIT`] is never loaded: its patch is a one-line notice.

use std::sync::MutexGuard;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::views::PathChange;
use super::{Target, side_root, working_root_or_saved};
use crate::diff::{self, DiffEntry, Filter, Ignores};
use crate::error::{Error, Result};
use crate::store::ObjectStore;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    NameStatus,
    Stat,
    Patch,
}

impl Mode {
    fn parse(mode: Option<&str>) -> Result<Mode> {
        match mode.unwrap_or("name-status") {
            "name-status" => Ok(Mode::NameStatus),
            "stat" => Ok(Mode::Stat),
            "patch" => Ok(Mode::Patch),
            other => Err(Error::Invalid(format!(
                "unknown diff mode {other:?} (name-status, stat, patch)"
            ))),
        }
    }
}

/// The answer to `diff`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffAnswer {
    /// The old side's root node (hex).
    pub a: String,
    /// The new side's root node (hex).
    pub b: String,
    /// Every changed path, in path order (ignored ones left out unless asked for,
    /// then marked; only the chosen paths when some were named).
    pub entries: Vec<DiffEntryView>,
    /// The whole unified diff (`patch` mode without `stream`); `null` otherwise.
    pub patch: Option<String>,
    /// The store is full: the `WORKING` side is the session's last save, as
    /// this message says (with what to do). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_full: Option<String>,
}

/// One changed path of a diff, with its line counts in `stat` mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffEntryView {
    /// The path and how it changed.
    #[serde(flatten)]
    pub change: PathChange,
    /// `stat`: lines added (absent for binary files and in other modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<u64>,
    /// `stat`: lines removed (absent for binary files and in other modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
    /// `stat`: `true` for a binary file (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<bool>,
}

/// What `status` and `diff` show: ignored paths (and `.git`) left out, or with
/// `ignored` listed and marked; only `paths` (workspace-relative, checked like
/// `restore`'s) when any are named.
pub(crate) fn filter(ignored: bool, paths: &[String]) -> Result<Filter> {
    Ok(Filter {
        paths: paths
            .iter()
            .map(|p| super::restore::clean_path(p))
            .collect::<Result<_>>()?,
        ignores: if ignored {
            Ignores::Mark
        } else {
            Ignores::Hide
        },
    })
}

/// A `diff` request, as the op reads it.
pub(crate) struct Ask<'a> {
    /// Old side (default HEAD, else the session's base).
    pub a: Option<&'a str>,
    /// New side (default `WORKING`).
    pub b: Option<&'a str>,
    /// `name-status` (default), `stat` or `patch`.
    pub mode: Option<&'a str>,
    /// Send each patch as an event.
    pub stream: bool,
    /// Which paths are shown ([`filter`]).
    pub filter: Filter,
}

/// `diff` of side `a` (default HEAD, else the session's base) against side `b`
/// (default `WORKING`) in `mode` (`name-status`, `stat` or `patch`), limited by
/// the filter; with `stream`, each patch goes out as an event. The op lock is
/// released once both sides are fixed ids.
pub(crate) fn run(
    t: &Target,
    op_lock: MutexGuard<'_, ()>,
    ask: &Ask,
    events: &mut dyn FnMut(Value),
) -> Result<DiffAnswer> {
    let s = &t.session;
    let store = s.store().clone();
    let (mode, stream) = (Mode::parse(ask.mode)?, ask.stream);
    // The live side of a full store is its last save (read-only: said so).
    let mut store_full = None;
    let mut side = |spec: &str| {
        if spec != "WORKING" {
            return side_root(t, spec);
        }
        let (root, full) = working_root_or_saved(t)?;
        store_full = store_full.take().or(full);
        Ok(root)
    };
    let ra = match ask.a {
        Some(spec) => side(spec)?,
        None if s.record().head.is_some() => side("HEAD")?,
        None => s.base_root(),
    };
    let rb = side(ask.b.unwrap_or("WORKING"))?;
    // Both sides are fixed ids now: the rest reads stored objects only.
    drop(op_lock);
    let mut out = Output {
        store: &*store,
        mode,
        stream,
        events,
        list: Vec::new(),
        text: String::new(),
    };
    let mut failed = None;
    diff::diff_walk_filtered(&*store, ra, rb, &ask.filter, &mut |e| match out.entry(&e) {
        Ok(()) => true,
        Err(err) => {
            failed = Some(err);
            false
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let patch = (mode == Mode::Patch && !stream).then_some(out.text);
    Ok(DiffAnswer {
        a: ra.to_hex(),
        b: rb.to_hex(),
        entries: out.list,
        patch,
        store_full,
    })
}

/// What a diff has produced so far.
struct Output<'a> {
    store: &'a dyn ObjectStore,
    mode: Mode,
    stream: bool,
    events: &'a mut dyn FnMut(Value),
    list: Vec<DiffEntryView>,
    /// The whole patch (patch mode without `stream`).
    text: String,
}

impl Output<'_> {
    /// Report one changed path: its list entry, and its patch (sent at once when
    /// streaming, else appended).
    fn entry(&mut self, e: &DiffEntry) -> Result<()> {
        let mut v = DiffEntryView {
            change: PathChange::from(e),
            added: None,
            removed: None,
            binary: None,
        };
        match self.mode {
            Mode::NameStatus => {}
            Mode::Stat => match diff::line_counts(self.store, e)? {
                Some((add, del)) => {
                    v.added = Some(add as u64);
                    v.removed = Some(del as u64);
                }
                None => v.binary = Some(true),
            },
            Mode::Patch => {
                let p = diff::patch(self.store, e)?;
                if !self.stream {
                    self.text.push_str(&p);
                } else if !p.is_empty() {
                    (self.events)(json!({"event": "patch", "path": e.path_str(), "text": p}));
                }
            }
        }
        self.list.push(v);
        Ok(())
    }
}
