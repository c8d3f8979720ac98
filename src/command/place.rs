//! Where a run of an experiment or a bisect sees its fork: at the workspace's own
//! absolute path ([`RunAt::Workspace`], the default) or at the fork's mountpoint
//! ([`RunAt::Fork`]). Client side only (the CLI, the MCP server): the daemon never
//! runs anything.
//!
//! At the workspace's path, the run's child enters a private mount namespace
//! between fork and exec ([`enter`]): `unshare(CLONE_NEWNS)`, `/` made
//! `MS_REC|MS_PRIVATE` (nothing propagates back to the host), the fork
//! bind-mounted (`MS_BIND|MS_REC`) over the workspace's mountpoint, then `chdir`
//! to `<workspace>/<caller's relative dir>` (std's `current_dir` runs before
//! `pre_exec`, so it is not used). `PWD` is set to that path. So programs see the
//! very path the workspace has: no dot-directory, same depth and basename,
//! absolute paths stored in the tree (venv shebangs, build caches) point into
//! the fork. The host's view is untouched: the workspace stays mounted there.
//!
//! Not root: the child also unshares a user namespace mapping the caller's uid
//! and gid to themselves (`setgroups` denied first), and checks that `getuid()` /
//! `getgid()` are unchanged. Whether the kernel allows this is probed once per
//! process ([`Placement::resolve`]); when it does not, runs see their forks at the
//! fork's mountpoint, with one line on stderr saying why.
//!
//! Invariants: only async-signal-safe calls between fork and exec (the paths and
//! the map lines are prepared before: [`Prepared`]); the namespace lives only as
//! long as the run's processes: the runner kills what the run left in its process
//! group when it ends (a namespace holds a copy of every mount, and a leftover
//! process in it would keep FUSE sessions alive).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a run sees its fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunAt {
    /// At the workspace's own path (a private mount namespace per run).
    #[default]
    Workspace,
    /// At the fork's mountpoint (`<parent>/<name>.experiments/<fork>`).
    Fork,
}

impl RunAt {
    /// `workspace` or `fork`.
    pub fn parse(s: &str) -> Option<RunAt> {
        match s {
            "workspace" => Some(RunAt::Workspace),
            "fork" => Some(RunAt::Fork),
            _ => None,
        }
    }
}

/// The fork of a run bound over the workspace's mountpoint.
#[derive(Debug, Clone)]
pub struct Bind {
    /// The fork's mountpoint (on the host).
    pub fork: PathBuf,
    /// The workspace's mountpoint (what the run sees).
    pub workspace: PathBuf,
    /// Where the run starts: `workspace` joined with the caller's relative dir.
    pub dir: PathBuf,
}

/// How the runs of one experiment or bisect are placed (resolved once).
#[derive(Debug, Clone)]
pub struct Placement {
    /// Where runs see their forks (after the probe: `Fork` when namespaces are
    /// not available).
    pub run_at: RunAt,
    /// The workspace's mountpoint.
    pub workspace: PathBuf,
}

/// Whether this process may make the namespaces (`Ok(userns)`), probed once.
static PROBE: OnceLock<Result<bool, String>> = OnceLock::new();

impl Placement {
    /// The placement for `asked` in the workspace at `workspace`: at the
    /// workspace's path when the kernel lets this process make a private mount
    /// namespace, else at the fork's, with a note on stderr saying why.
    pub fn resolve(asked: RunAt, workspace: &Path) -> Placement {
        let mut run_at = asked;
        if asked == RunAt::Workspace
            && let Err(why) = PROBE.get_or_init(|| probe(workspace))
        {
            eprintln!(
                "treefork: note: runs see their forks at the forks' own paths, not at {} \
                 ({why}; --run-at fork says so explicitly)",
                workspace.display()
            );
            run_at = RunAt::Fork;
        }
        Placement {
            run_at,
            workspace: workspace.to_path_buf(),
        }
    }

    /// Where a run in the fork mounted at `fork` starts, at the caller's
    /// relative place `rel` (its cwd and `PWD`), and the bind when it sees the
    /// fork at the workspace's path (`runner::Spec::placed` applies both).
    pub fn start(&self, fork: &Path, rel: &str) -> (PathBuf, Option<Bind>) {
        // `join("")` would add a trailing slash (and `pwd` would print it).
        let under = |base: &Path| {
            if rel.is_empty() {
                base.to_path_buf()
            } else {
                base.join(rel)
            }
        };
        match self.run_at {
            RunAt::Fork => (under(fork), None),
            RunAt::Workspace => {
                let dir = under(&self.workspace);
                let b = Bind {
                    fork: fork.to_path_buf(),
                    workspace: self.workspace.clone(),
                    dir: dir.clone(),
                };
                (dir, Some(b))
            }
        }
    }
}

/// The lines of the uid/gid maps of an unprivileged caller.
#[derive(Debug)]
struct Maps {
    uid: u32,
    gid: u32,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// What the child needs, made before the fork.
#[derive(Debug)]
pub struct Prepared {
    fork: CString,
    workspace: CString,
    dir: Option<CString>,
    maps: Option<Maps>,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", p.display()),
        )
    })
}

/// Prepare `b` for [`enter`] (allocates: call before the fork).
pub fn prepare(b: &Bind) -> io::Result<Prepared> {
    Ok(Prepared {
        fork: cstr(&b.fork)?,
        workspace: cstr(&b.workspace)?,
        dir: Some(cstr(&b.dir)?),
        maps: maps(),
    })
}

/// The maps when this process is not root (`None`: root needs no user namespace).
fn maps() -> Option<Maps> {
    // SAFETY: getuid, geteuid and getgid take no arguments.
    let (uid, euid, gid) = unsafe { (libc::getuid(), libc::geteuid(), libc::getgid()) };
    (euid != 0).then(|| Maps {
        uid,
        gid,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
    })
}

/// Write `data` to the file `path` (async-signal-safe: open, write, close).
fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; flags only.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: writing from a slice we borrow, of its length; closing our fd.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let e = io::Error::last_os_error();
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    if n != data.len() as isize {
        return Err(e);
    }
    Ok(())
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// In the child, between fork and exec: the namespaces, the bind, the chdir.
/// Only async-signal-safe calls.
pub fn enter(p: &Prepared) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWNS;
    if p.maps.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(flags) })?;
    if let Some(m) = &p.maps {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &m.uid_map)?;
        write_file(c"/proc/self/gid_map", &m.gid_map)?;
        // SAFETY: getuid and getgid take no arguments.
        if unsafe { libc::getuid() != m.uid || libc::getgid() != m.gid } {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: NUL-terminated strings prepared before the fork, or null where
    // mount(2) allows it.
    unsafe {
        check(libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        check(libc::mount(
            p.fork.as_ptr(),
            p.workspace.as_ptr(),
            none,
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ))?;
        if let Some(d) = &p.dir {
            check(libc::chdir(d.as_ptr()))?;
        }
    }
    Ok(())
}

/// Can this process make the namespaces and bind the workspace over itself?
/// Tried in a forked child that only calls [`enter`] and `_exit`.
fn probe(workspace: &Path) -> Result<bool, String> {
    let ws = cstr(workspace).map_err(|e| e.to_string())?;
    let p = Prepared {
        fork: ws.clone(),
        workspace: ws,
        dir: None,
        maps: maps(),
    };
    let userns = p.maps.is_some();
    // SAFETY: the child calls only async-signal-safe functions, then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let code = match enter(&p) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(255).clamp(1, 255),
        };
        // SAFETY: _exit ends the child without running anything of the parent's.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child, into a local.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid || !libc::WIFEXITED(status) {
        return Err("the namespace probe did not exit".into());
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(userns),
        code => Err(format!(
            "{} is not allowed here: {}",
            if userns {
                "an unprivileged user and mount namespace"
            } else {
                "a private mount namespace"
            },
            io::Error::from_raw_os_error(code)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_at_names() {
        assert_eq!(RunAt::parse("workspace"), Some(RunAt::Workspace));
        assert_eq!(RunAt::parse("fork"), Some(RunAt::Fork));
        assert_eq!(RunAt::parse("Fork"), None);
        assert_eq!(RunAt::default(), RunAt::Workspace);
    }

    #[test]
    fn where_runs_start() {
        let p = Placement {
            run_at: RunAt::Fork,
            workspace: "/w/ws".into(),
        };
        let fork = Path::new("/w/ws.bisect/f");
        let (dir, b) = p.start(fork, "sub");
        assert_eq!(dir, Path::new("/w/ws.bisect/f/sub"));
        assert!(b.is_none());
        let p = Placement {
            run_at: RunAt::Workspace,
            ..p
        };
        let (dir, b) = p.start(fork, "sub");
        assert_eq!(dir, Path::new("/w/ws/sub"));
        let b = b.unwrap();
        assert_eq!((b.fork.as_path(), b.dir.as_path()), (fork, dir.as_path()));
        assert_eq!(p.start(fork, "").0, Path::new("/w/ws"));
    }
}
