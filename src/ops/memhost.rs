//! An in-memory [`Host`] for tests of ops: sessions on a [`MemStore`], opened
//! in-process and "mounted" in a map, each with a [`MemMount`] that records what
//! ops asked of the kernel (`syncfs`, invalidations, epoch increments) instead of
//! asking a kernel. Ops run through [`super::run`] exactly as the daemon runs
//! them; writes to a workspace go through the [`Session`] calls the FUSE layer
//! makes (create, write, truncate, unlink).
//!
//! What it does not cover: kernel cache coherence (whether the kernel really
//! forgets what a graft replaced), a real `syncfs` pushing dirty pages, mountpoint
//! checks and the control sockets — the integration tests (`tests/it`) cover
//! those on real mounts.
//!
//! Invariants: a session name is owned by at most one of a live claim and the
//! mount map (as in the daemon's mount table); an unmounted session is flushed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Host, Mount, Scope, Target};
use crate::control::{AgentSocket, MountFor};
use crate::error::{Error, Result};
use crate::session::posix::{NewNode, SetAttr};
use crate::session::{self, Session, SessionRecord};
use crate::store::{MemStore, ObjectStore};

/// One thing an op asked of the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelCall {
    /// `syncfs(2)` of the mount.
    Syncfs,
    /// Forget entry `name` of directory `parent`.
    InvalEntry(u64, Vec<u8>),
    /// Forget inode `ino`'s attributes and pages.
    InvalInode(u64),
    /// Make every cached entry stale.
    IncEpoch,
}

/// The in-memory twin of `fs::KernelMount`: answers every call with success
/// and records it.
pub(crate) struct MemMount {
    path: PathBuf,
    calls: Mutex<Vec<KernelCall>>,
}

impl MemMount {
    fn push(&self, c: KernelCall) {
        self.calls.lock().unwrap().push(c);
    }

    /// What was asked since the last `take`, oldest first.
    pub(crate) fn take(&self) -> Vec<KernelCall> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Mount for MemMount {
    fn path(&self) -> &Path {
        &self.path
    }
    fn syncfs(&self) -> std::io::Result<()> {
        self.push(KernelCall::Syncfs);
        Ok(())
    }
    fn inval_entry(&self, parent: u64, name: &[u8]) -> std::io::Result<()> {
        self.push(KernelCall::InvalEntry(parent, name.to_vec()));
        Ok(())
    }
    fn inval_inode(&self, ino: u64) -> std::io::Result<()> {
        self.push(KernelCall::InvalInode(ino));
        Ok(())
    }
    fn inc_epoch(&self) -> bool {
        self.push(KernelCall::IncEpoch);
        true
    }
    fn entry(&self) -> Option<crate::hostdir::Entry> {
        None
    }
}

/// A mounted session of the in-memory host.
struct Live {
    target: Target,
    mount: Arc<MemMount>,
}

/// The in-memory host (see the module docs).
pub(crate) struct MemHost {
    store: Arc<dyn ObjectStore>,
    live: Mutex<BTreeMap<String, Live>>,
    claims: Mutex<BTreeSet<String>>,
    names: Mutex<()>,
}

/// A session name owned until dropped or mounted.
pub(crate) struct MemClaim<'a> {
    host: &'a MemHost,
    name: String,
}

impl Drop for MemClaim<'_> {
    fn drop(&mut self) {
        self.host.claims.lock().unwrap().remove(&self.name);
    }
}

impl MemHost {
    /// A host over an empty in-memory store.
    pub(crate) fn new() -> MemHost {
        MemHost::over(Arc::new(MemStore::default()))
    }

    /// A host over `store` (e.g. a [`MemStore::logging`] one, or the prefix of
    /// one a crash left).
    pub(crate) fn over(store: Arc<dyn ObjectStore>) -> MemHost {
        MemHost {
            store,
            live: Mutex::new(BTreeMap::new()),
            claims: Mutex::new(BTreeSet::new()),
            names: Mutex::new(()),
        }
    }

    /// Create an empty session `name` and mount it (as `treefork mount` of a new
    /// session does: the record and its info in one commit).
    pub(crate) fn create(&self, name: &str) -> Result<Target> {
        let mut claim = self.claim(name)?;
        let root = session::empty_root(&*self.store, 0, 0)?;
        let rec = session::new_record(name, root, 0, 1)?;
        let mut info = crate::lifecycle::SessionInfo::new(name, None);
        self.store
            .commit(vec![session::record_op(&rec), info.op()])?;
        self.mount_claimed(&mut claim, mountpoint_of(name), rec, None)?;
        self.target(Some(name))
    }

    /// The recording mount of live session `name`.
    pub(crate) fn mount_of(&self, name: &str) -> Arc<MemMount> {
        self.live.lock().unwrap()[name].mount.clone()
    }

    fn live_map(&self) -> MutexGuard<'_, BTreeMap<String, Live>> {
        self.live.lock().unwrap()
    }
}

fn mountpoint_of(name: &str) -> PathBuf {
    Path::new("/memhost").join(name)
}

impl Host for MemHost {
    type Dir = PathBuf;
    type Claim<'a> = MemClaim<'a>;

    fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    fn target(&self, name: Option<&str>) -> Result<Target> {
        let live = self.live_map();
        let found = match name {
            Some(n) => live.get(n),
            None if live.len() == 1 => live.values().next(),
            None => return Err(Error::Invalid("which session?".into())),
        };
        found.map(|l| l.target.clone()).ok_or_else(|| {
            Error::NotFound(format!("session {} is not mounted", name.unwrap_or("?")))
        })
    }

    fn live(&self) -> Vec<Target> {
        self.live_map().values().map(|l| l.target.clone()).collect()
    }

    fn name_lock(&self) -> MutexGuard<'_, ()> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn claim(&self, name: &str) -> Result<MemClaim<'_>> {
        let mut claims = self.claims.lock().unwrap();
        if self.live_map().contains_key(name) || !claims.insert(name.to_string()) {
            return Err(Error::Conflict(format!("session {name} is in use")));
        }
        Ok(MemClaim {
            host: self,
            name: name.to_string(),
        })
    }

    fn open_mountpoint(&self, path: &Path, _who: MountFor) -> Result<PathBuf> {
        if self
            .live_map()
            .values()
            .any(|l| l.target.mountpoint == path)
        {
            return Err(Error::Conflict(format!(
                "{} is already a mountpoint",
                path.display()
            )));
        }
        Ok(path.to_path_buf())
    }

    fn mount_claimed(
        &self,
        claim: &mut MemClaim<'_>,
        dir: PathBuf,
        rec: SessionRecord,
        _agent: Option<AgentSocket>,
    ) -> Result<super::views::Mounted> {
        let name = claim.name.clone();
        let session = Arc::new(Session::open(self.store.clone(), rec)?);
        let mount = Arc::new(MemMount {
            path: dir.clone(),
            calls: Mutex::new(Vec::new()),
        });
        let target = Target {
            session,
            mountpoint: dir.clone(),
            mount: mount.clone(),
            last_auto_ms: Arc::new(AtomicU64::new(crate::clock::unix_ms())),
            transport: crate::transport::InUse::Dev,
            scope: Scope::All,
            agent_uid: None,
        };
        // The name passes from the claim to the mount map in one critical
        // section of the claims lock (as the daemon's table does).
        let mut claims = self.claims.lock().unwrap();
        self.live_map().insert(name.clone(), Live { target, mount });
        claims.remove(&name);
        Ok(super::views::Mounted {
            session: name,
            mountpoint: dir,
            agent_socket: None,
            skipped: None,
            untrusted_origin: None,
        })
    }

    fn unmount_session(&self, mp: &Path) -> Result<()> {
        let mut live = self.live_map();
        let name = live
            .iter()
            .find(|(_, l)| l.target.mountpoint == mp)
            .map(|(n, _)| n.clone())
            .ok_or_else(|| Error::NotFound(format!("{} is not mounted", mp.display())))?;
        live[&name].target.session.flush()?;
        live.remove(&name);
        Ok(())
    }

    fn remove_session(&self, name: &str) -> Result<()> {
        let _claim = self.claim(name)?;
        crate::lifecycle::retention::remove_session(&*self.store, name)
    }

    /// The in-memory store reads no remote.
    fn remotes_changed(&self) -> Result<()> {
        Ok(())
    }
}

/// The inode of the root directory of a session.
const ROOT: u64 = 1;

/// Write `data` as the whole content of file `name` at the workspace root of `s`
/// (created when missing), as a program writing through the mount would.
pub(crate) fn write_file(s: &Session, name: &str, data: &[u8]) -> Result<()> {
    let ino = match s.lookup(ROOT, name.as_bytes()) {
        Ok(st) => {
            let trunc = SetAttr {
                size: Some(0),
                ..SetAttr::default()
            };
            s.setattr(st.ino, trunc)?;
            st.ino
        }
        Err(_) => {
            s.create_node(ROOT, name.as_bytes(), NewNode::File, 0o644, 0, 0)?
                .ino
        }
    };
    s.write(ino, 0, data)?;
    Ok(())
}

/// Unlink file `name` at the workspace root of `s`.
pub(crate) fn remove_file(s: &Session, name: &str) -> Result<()> {
    s.remove(ROOT, name.as_bytes(), false)
}

/// Every regular file at the workspace root of `s` with its content, read through
/// the session as the kernel would (lookups from the root).
pub(crate) fn files(s: &Session) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut after = 0;
    loop {
        let page = s.readdir_page(ROOT, after, 64, false)?;
        let Some(last) = page.last() else { break };
        after = last.0;
        for (_, e, _) in page {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let st = s.lookup(ROOT, &e.name)?;
            let data = s.read(st.ino, 0, st.attr.size as u32 + 1)?;
            out.insert(String::from_utf8_lossy(&e.name).into_owned(), data);
        }
    }
    Ok(out)
}
