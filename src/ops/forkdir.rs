//! Where the daemon makes the directories of the sessions an op makes for runs
//! (an experiment's forks, a bisect's candidates), and how it removes them; and
//! the `cwd` a request may give such runs.
//!
//! Invariants: the forks' directory is always `<base>/<workspace name>.<what>`,
//! one the daemon makes, with `base` the request's (user socket only), the
//! session's `forks_dir` setting, or the workspace's parent: absolute, only
//! normal components, bounded. Removal takes only empty directories, each by its
//! name in its parent opened without symbolic links
//! ([`crate::hostdir::remove_empty_dir`]), so nothing an agent planted or renamed
//! into the path is removed.

use std::path::{Component, Path, PathBuf};

use super::Target;
use crate::error::{Error, Result};

/// Longest `cwd`.
const MAX_CWD: usize = 4096;

/// A `cwd` from a request: relative, inside the workspace, without `..`.
pub(crate) fn check_cwd(cwd: Option<&str>) -> Result<()> {
    if let Some(cwd) = cwd {
        let p = Path::new(cwd);
        let ok = cwd.len() <= MAX_CWD
            && !cwd.contains('\0')
            && p.components().all(|c| matches!(c, Component::Normal(_)));
        if !ok {
            return Err(Error::Invalid(format!(
                "cwd {cwd:?} must be a relative path inside the workspace"
            )));
        }
    }
    Ok(())
}

/// Longest forks directory (asked or set).
const MAX_FORKS_DIR: usize = 4096;

/// `<base>/<name>.<what>` (`what`: `experiments`, `bisect`): where the forks of
/// the session `t` (mounted at `.../<name>`) go. `base` is `asked` (a request of
/// the user socket: agents may not choose), else the session's `forks_dir`
/// setting, else the workspace's parent. No component is added that starts with
/// a dot, so a program in a fork sees no dot-directory the workspace has not.
/// A chosen base must be absolute, without `.` or `..`.
pub(crate) fn forks_dir_for(t: &Target, asked: Option<&Path>, what: &str) -> Result<PathBuf> {
    let mp = &t.mountpoint;
    let set = t.session.record().config.forks_dir;
    let chosen = asked
        .map(|p| (p.to_path_buf(), "--forks-dir"))
        .or_else(|| (!set.is_empty()).then(|| (PathBuf::from(&set), "setting forks_dir")));
    let base = match chosen {
        Some((p, what)) => {
            check_forks_base(&p, what)?;
            p
        }
        None => mp.parent().map(Path::to_path_buf).ok_or_else(|| {
            Error::Invalid(format!(
                "the workspace at {} has no parent directory for its forks",
                mp.display()
            ))
        })?,
    };
    let Some(name) = mp.file_name() else {
        return Err(Error::Invalid(format!(
            "the workspace at {} has no name to name its forks' directory",
            mp.display()
        )));
    };
    let mut n = name.to_os_string();
    n.push(".");
    n.push(what);
    Ok(base.join(n))
}

/// A forks directory asked or set: absolute, only normal components, bounded.
pub(crate) fn check_forks_base(p: &Path, what: &str) -> Result<()> {
    let s = p.as_os_str();
    let ok = p.is_absolute()
        && s.len() <= MAX_FORKS_DIR
        && !s.as_encoded_bytes().contains(&0)
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "{what} {}: give an absolute directory without `.` or `..`",
            p.display()
        )))
    }
}

/// Remove the (empty) directories `names` of `dir`, then `dir` once empty, never
/// through a symbolic link.
pub(crate) fn remove_forks_dirs(dir: &Path, names: impl Iterator<Item = String>) {
    for n in names {
        remove_empty(&dir.join(n));
    }
    remove_empty(dir);
}

fn remove_empty(p: &Path) {
    if let Err(e) = crate::hostdir::remove_empty_dir(p) {
        log::warn!("cannot remove {}: {e}", p.display());
    }
}
