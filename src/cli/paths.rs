//! Paths given on the command line, made absolute (mountpoints, sockets) or
//! relative to a workspace root (restore).

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

/// Absolute form of a path given on the command line (not resolved).
pub fn absolute_arg(p: &Option<PathBuf>) -> Result<Option<PathBuf>> {
    p.as_ref()
        .map(|p| std::path::absolute(p).with_context(|| format!("bad path {}", p.display())))
        .transpose()
}

/// Canonical path of the mountpoint `p`, without requiring it to be reachable
/// (a stale mount answers ENOTCONN: then its parent is resolved instead).
pub fn mountpoint(p: &Path) -> Result<PathBuf> {
    match p.canonicalize() {
        Ok(c) => Ok(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("mountpoint {} does not exist", p.display())
        }
        Err(_) => {
            let abs = std::path::absolute(p)?;
            let parent = abs
                .parent()
                .ok_or_else(|| anyhow!("bad path {}", p.display()))?;
            Ok(parent
                .canonicalize()?
                .join(abs.file_name().unwrap_or_default()))
        }
    }
}

/// `path` (relative to the current directory) as a path relative to the workspace
/// root `ws`: `..` is resolved lexically, and a path outside the workspace is refused
/// (the daemon refuses `..`, absolute paths and paths through symbolic links).
pub fn workspace_relative(ws: &Path, path: &Path) -> Result<String> {
    let abs = std::path::absolute(path)?;
    let mut norm = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                norm.pop();
            }
            Component::CurDir => {}
            other => norm.push(other),
        }
    }
    let rel = norm.strip_prefix(ws).map_err(|_| {
        anyhow!(
            "{} is outside the workspace {}",
            path.display(),
            ws.display()
        )
    })?;
    let rel = rel
        .to_str()
        .ok_or_else(|| anyhow!("{} is not valid UTF-8", path.display()))?;
    Ok(rel.to_string())
}

/// A path argument naming something in the workspace `ws`, like git's: relative
/// to the current directory when that is inside the workspace, else to the
/// workspace root; absolute paths must lie inside the workspace. Returns the
/// workspace-relative form and the absolute path it stands for.
pub fn in_workspace(ws: &Path, path: &Path) -> Result<(String, PathBuf)> {
    let cwd = std::env::current_dir()?;
    let abs = if path.is_absolute() || cwd.starts_with(ws) {
        std::path::absolute(path)?
    } else {
        ws.join(path)
    };
    let rel = workspace_relative(ws, &abs)?;
    Ok((rel, abs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_relative_resolves_dots_and_refuses_escapes() {
        let ws = Path::new("/w/mnt");
        assert_eq!(
            workspace_relative(ws, Path::new("/w/mnt/a/../b/./c")).unwrap(),
            "b/c"
        );
        assert_eq!(workspace_relative(ws, Path::new("/w/mnt")).unwrap(), "");
        let e = workspace_relative(ws, Path::new("/w/mnt/../other")).unwrap_err();
        assert!(e.to_string().contains("outside the workspace"), "{e}");
        assert!(workspace_relative(ws, Path::new("/w/mntx")).is_err());
    }
}
