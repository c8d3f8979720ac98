//! Git plumbing for promote: every command on the durable repository goes through
//! [`lifecycle::git::command`] (a hardened child: built environment, no inherited
//! descriptors, hooks and fsmonitor off, run as the repository's owner) and
//! [`crate::child::run`] (a deadline that kills its process group, capped output),
//! paths passed NUL-separated on stdin (never as options; literal pathspecs where
//! they are pathspecs: a path is never a glob); the private directory git writes its
//! temporary index and objects to is [`super::scratch::Scratch`].
//!
//! Invariant: nothing here writes to the durable repository except through the
//! commands the strategies choose.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::child::{self, Limits};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, Content, Kind, Record};

/// A git runner on one repository with extra environment (a temporary index or
/// object directory).
#[derive(Clone)]
pub(crate) struct Git {
    /// The repository's top directory (or a scratch bare repository).
    pub repo: PathBuf,
    env: Vec<(OsString, OsString)>,
    /// Hash files through the repository's filters and attributes (as `git add`);
    /// off for a scratch repository, which has none.
    filters: bool,
}

impl Git {
    /// Git on `repo`.
    pub fn new(repo: &Path) -> Git {
        Git {
            repo: repo.to_path_buf(),
            env: Vec::new(),
            filters: true,
        }
    }

    /// A scratch repository of ours: no filters.
    pub fn scratch(repo: &Path) -> Git {
        Git {
            filters: false,
            ..Git::new(repo)
        }
    }

    /// The same with `key=value` set.
    pub fn with(&self, key: &str, value: impl Into<OsString>) -> Git {
        let mut g = self.clone();
        g.env.push((key.into(), value.into()));
        g
    }

    fn command(&self, args: &[&str]) -> Result<Command> {
        let mut c = lifecycle::git::command(&self.repo)?;
        c.env("GIT_OPTIONAL_LOCKS", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args);
        Ok(c)
    }

    /// Run with `input` on stdin (fed while two threads read the output, so a
    /// chatty command cannot block on its output while we write); the raw output.
    /// Bounded: [`Limits::LISTING`] (a deadline and an output cap).
    pub fn run_in(&self, args: &[&str], input: &[u8]) -> Result<std::process::Output> {
        child::run(
            self.command(args)?,
            "git",
            Limits::LISTING,
            &mut child::input(input),
        )
    }

    /// Run with `input` on stdin and stdout capped at `max` bytes (more fails).
    pub fn run_capped(
        &self,
        args: &[&str],
        input: &[u8],
        max: usize,
    ) -> Result<std::process::Output> {
        let limits = Limits {
            max_stdout: max,
            ..Limits::LISTING
        };
        child::run(self.command(args)?, "git", limits, &mut child::input(input))
    }

    /// Run, requiring success; stdout.
    pub fn ok(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.ok_in(args, b"")
    }

    /// Run with `input` on stdin, requiring success; stdout.
    pub fn ok_in(&self, args: &[&str], input: &[u8]) -> Result<Vec<u8>> {
        let o = self.run_in(args, input)?;
        if !o.status.success() {
            return Err(self.failed(args, &o.stderr));
        }
        Ok(o.stdout)
    }

    /// Run, requiring success; stdout trimmed as text.
    pub fn line(&self, args: &[&str]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.ok(args)?).trim().to_string())
    }

    /// Stdout trimmed when it succeeds, `None` when git exits non-zero.
    pub fn try_line(&self, args: &[&str]) -> Result<Option<String>> {
        let o = self.run_in(args, b"")?;
        Ok(o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string()))
    }

    /// The error of a failed git command.
    pub fn failed(&self, args: &[&str], stderr: &[u8]) -> Error {
        Error::io(
            &self.repo,
            std::io::Error::other(format!(
                "git {} failed: {}",
                args.first().copied().unwrap_or(""),
                String::from_utf8_lossy(stderr).trim()
            )),
        )
    }

    /// Hash the content of `r` (a regular file's bytes, a symbolic link's target)
    /// as a blob for `path`, writing it to the object directory when `write`. The
    /// bytes are streamed from the store, never loaded whole.
    pub fn hash(
        &self,
        store: &dyn ObjectStore,
        r: &Record,
        path: &[u8],
        write: bool,
    ) -> Result<String> {
        let mut args = vec!["hash-object", "--stdin"];
        if write {
            args.push("-w");
        }
        // Filters and attributes apply as `git add` would apply them (a symbolic
        // link's target is never filtered).
        let p;
        if r.kind == Kind::File && self.filters {
            p = format!("--path={}", String::from_utf8_lossy(path));
            args.push(&p);
        } else {
            args.push("--no-filters");
        }
        let o = child::run(self.command(&args)?, "git", Limits::LISTING, &mut |stdin| {
            write_content(store, r, stdin)
        })?;
        if !o.status.success() {
            return Err(self.failed(&args, &o.stderr));
        }
        let out = o.stdout;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }
}

/// Write the content of `r` to `out`: a file's bytes (holes as zeros) or a link's
/// target.
fn write_content(store: &dyn ObjectStore, r: &Record, out: &mut dyn Write) -> Result<()> {
    let werr = |e| Error::io("git stdin", e);
    if r.kind == Kind::Symlink {
        if let Content::Bytes(b) = &r.content {
            out.write_all(b).map_err(werr)?;
        }
        return Ok(());
    }
    let size = r.attr.size;
    let Content::Node(id) = r.content else {
        return Ok(());
    };
    let loaded = crate::files::load(store, id)?;
    if let Some(d) = loaded.inline {
        return out
            .write_all(&d[..(size as usize).min(d.len())])
            .map_err(werr);
    }
    let zeros = vec![0u8; BLOCK_SIZE as usize];
    let mut pos = 0u64;
    let fill = |out: &mut dyn Write, from: u64, to: u64| -> Result<()> {
        let mut p = from;
        while p < to {
            let n = (to - p).min(BLOCK_SIZE) as usize;
            out.write_all(&zeros[..n]).map_err(werr)?;
            p += n as u64;
        }
        Ok(())
    };
    for (idx, c) in loaded.blocks {
        let start = idx * BLOCK_SIZE;
        if start >= size {
            break;
        }
        fill(out, pos, start)?;
        let data = store.get(ObjKind::Chunk, &c.into())?;
        let n = (data.len() as u64).min(size - start) as usize;
        out.write_all(&data[..n]).map_err(werr)?;
        pos = start + n as u64;
    }
    fill(out, pos, size)
}

/// NUL-separated paths (git's `-z` input).
pub(super) fn nul_list<'a>(paths: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p);
        out.push(0);
    }
    out
}

/// Split git's `-z` output.
pub(crate) fn split_nul(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    out.split(|&b| b == 0).filter(|p| !p.is_empty())
}
