//! Registry: the runtime directory (sockets, mount records) and the mount records
//! clients use to go from a path to the daemon and session serving it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The runtime directory for sockets: `$XDG_RUNTIME_DIR/treefork` or
/// `/tmp/treefork-<uid>`, created 0700 if absent. An existing one is used only if
/// it is a real directory (not a symlink) owned by our uid with mode 0700: in a
/// shared `/tmp` another user may have created it first, to plant sockets or mount
/// records.
pub fn runtime_dir() -> Result<PathBuf> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let base = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("treefork"),
        _ => PathBuf::from(format!("/tmp/treefork-{uid}")),
    };
    private_dir(&base, uid)?;
    Ok(base)
}

/// Create `dir` mode 0700 (its parent must exist) or check an existing one: a
/// directory, not a symlink, owned by `uid`, mode exactly 0700. `mkdir` either
/// creates it ours or fails with EEXIST, so nothing can slip in between.
pub fn private_dir(dir: &Path, uid: u32) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    let md = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    let mode = md.mode() & 0o7777;
    if !md.is_dir() || md.uid() != uid || mode != 0o700 {
        return Err(Error::Forbidden(format!(
            "runtime directory {} is unsafe: it must be a directory owned by uid {uid} with mode 0700, \
             but it is {} owned by uid {} with mode {mode:04o}; remove it (or set XDG_RUNTIME_DIR)",
            dir.display(),
            if md.file_type().is_symlink() {
                "a symlink"
            } else if md.is_dir() {
                "a directory"
            } else {
                "a file"
            },
            md.uid(),
        )));
    }
    Ok(())
}

/// The daemon socket of the store at `store` (an absolute, canonical path).
pub fn daemon_socket(store: &Path) -> Result<PathBuf> {
    let h = blake3::hash(store.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("d-{}.sock", &h.to_hex()[..16])))
}

/// What the daemon records about one of its mounts, for clients that start from a
/// path (`umount MOUNTPOINT`, and commands run inside a workspace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MountRecord {
    /// The mountpoint.
    pub mountpoint: PathBuf,
    /// The store serving it.
    pub store: PathBuf,
    /// The session mounted there.
    pub session: String,
    /// The session's control socket.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// The session's agent-role socket, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_socket: Option<PathBuf>,
    /// The id of the mount made there (from `statx` right after the mount): what
    /// identifies it as ours once its daemon died (see `daemon::mountpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_id: Option<crate::mount_id::MountId>,
}

/// The control socket of the session mounted at `mp`.
pub fn session_socket(mp: &Path) -> Result<PathBuf> {
    let h = blake3::hash(mp.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("s-{}.sock", &h.to_hex()[..16])))
}

fn mount_record_path(mp: &Path) -> Result<PathBuf> {
    let h = blake3::hash(mp.as_os_str().as_encoded_bytes());
    Ok(runtime_dir()?.join(format!("m-{}.json", &h.to_hex()[..16])))
}

/// Register a mount (daemon side): written to a temporary file and renamed into
/// place, so a reader sees the old record or the new one, never a torn one.
pub fn register_mount(rec: &MountRecord) -> Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let p = mount_record_path(&rec.mountpoint)?;
    let tmp = p.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let r = std::fs::write(&tmp, serde_json::to_vec(rec).expect("record serializes"))
        .and_then(|_| std::fs::rename(&tmp, &p));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&p, e));
    }
    Ok(())
}

/// Remove a mount registration (daemon side).
pub fn unregister_mount(mp: &Path) {
    if let Ok(p) = mount_record_path(mp) {
        let _ = std::fs::remove_file(p);
    }
}

/// The registered mount at `path` or at its closest registered ancestor.
pub fn find_mount(path: &Path) -> Option<MountRecord> {
    let mut cur = Some(path);
    while let Some(p) = cur {
        if let Ok(bytes) = std::fs::read(mount_record_path(p).ok()?)
            && let Ok(r) = serde_json::from_slice::<MountRecord>(&bytes)
            && r.mountpoint == p
        {
            return Some(r);
        }
        cur = p.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn runtime_dir_must_be_private_and_ours() {
        let d = tempfile::tempdir().unwrap();
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        let fresh = d.path().join("fresh");
        private_dir(&fresh, me).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        private_dir(&fresh, me).unwrap();

        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private_dir(&open, me).unwrap_err();
        assert!(e.to_string().contains("mode 0777"), "{e}");
        // Never "repaired": the planted directory stays as it was.
        assert_eq!(
            std::fs::metadata(&open).unwrap().permissions().mode() & 0o777,
            0o777
        );

        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(me + 1), None).unwrap();
        let e = private_dir(&theirs, me).unwrap_err();
        assert!(e.to_string().contains("owned by uid"), "{e}");

        let link = d.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let e = private_dir(&link, me).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
    }

    #[test]
    fn registry_writes_leave_no_temporaries() {
        // Exercises the real runtime directory of this uid (0700, ours).
        let d = tempfile::tempdir().unwrap();
        let rec = MountRecord {
            mountpoint: d.path().join("mp"),
            store: d.path().join("store"),
            session: "s".into(),
            socket: None,
            agent_socket: None,
            mount_id: None,
        };
        register_mount(&rec).unwrap();
        assert_eq!(find_mount(&rec.mountpoint.join("sub")), Some(rec.clone()));
        unregister_mount(&rec.mountpoint);
        assert_eq!(find_mount(&rec.mountpoint), None);
        let dir = runtime_dir().unwrap();
        let leftovers = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .count();
        assert_eq!(leftovers, 0);
    }
}
