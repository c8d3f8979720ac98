//! The daemon's channel to the kernel's caches of one mount.
//!
//! Owns: entry and inode invalidations and epoch increments
//! (`FUSE_NOTIFY_INC_EPOCH`, Linux 6.16+), each one notification (a
//! `fuse_out_header` with unique 0 and the code, then its struct) written to a
//! duplicate of the mount's `/dev/fuse` descriptor.
//!
//! Why an epoch: an entry invalidation needs the parent directory's lock in the
//! kernel, so it cannot be sent while a graft holds the session's write gate
//! (requests waiting on the gate hold those locks). Between the tree swap and the
//! invalidations the kernel would still resolve replaced paths to the inodes the
//! graft took out of the tree, and with no OPEN requests (`FUSE_NO_OPEN_SUPPORT`) a
//! write through such a path would land in an orphan. An epoch increment takes no
//! lock: sent under the gate, right after the swap, it makes every cached entry of
//! the mount stale at once, so the next path walk looks each name up again.
//!
//! [`KernelMount`] is the real [`crate::host::Mount`] ops reach the kernel through:
//! `syncfs` through the mount's identity ([`crate::fs::outside`]), invalidations
//! and epochs through this channel.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use zerocopy::IntoBytes;

use super::devpool::wire;
use super::outside::MountRef;
use super::ring::abi::{self, notify};
use crate::host::Mount;

/// Invalidations and epoch increments for one mount. Cheap to clone.
#[derive(Clone)]
pub struct KernelCache {
    dev: Arc<OwnedFd>,
    /// Cleared once the kernel refused an epoch increment (older kernels).
    epochs: Arc<AtomicBool>,
}

impl KernelCache {
    /// Over a duplicate of the mount's `/dev/fuse` descriptor.
    pub fn new(dev: OwnedFd) -> KernelCache {
        KernelCache {
            dev: Arc::new(dev),
            epochs: Arc::new(AtomicBool::new(true)),
        }
    }

    /// One notification: `fuse_out_header` (unique 0, the code as its error),
    /// then `parts`.
    fn notify(&self, code: i32, parts: &[&[u8]]) -> io::Result<()> {
        let body: usize = parts.iter().map(|p| p.len()).sum();
        let out = abi::OutHeader {
            len: (size_of::<abi::OutHeader>() + body) as u32,
            error: code,
            unique: 0,
        };
        match parts {
            [] => wire::send(self.dev.as_fd(), &[out.as_bytes()]),
            [a] => wire::send(self.dev.as_fd(), &[out.as_bytes(), a]),
            [a, b, c] => wire::send(self.dev.as_fd(), &[out.as_bytes(), a, b, c]),
            _ => Err(io::Error::other("a notification of unexpected shape")),
        }
    }

    /// Forget the entry `name` of directory `parent`.
    pub fn inval_entry(&self, parent: u64, name: &[u8]) -> io::Result<()> {
        let a = abi::NotifyInvalEntry {
            parent,
            namelen: name.len() as u32,
            flags: 0,
        };
        self.notify(notify::INVAL_ENTRY, &[a.as_bytes(), name, &[0]])
    }

    /// Forget the attributes and cached pages of `ino`.
    pub fn inval_inode(&self, ino: u64) -> io::Result<()> {
        self.inval_range(ino, 0, 0)
    }

    /// Forget the attributes of `ino` and its cached pages from `off` for `len`
    /// bytes (0: to the end); a negative `off` drops only the attributes (it takes
    /// no page-cache lock: safe inside a request).
    pub(crate) fn inval_range(&self, ino: u64, off: i64, len: i64) -> io::Result<()> {
        let a = abi::NotifyInvalInode { ino, off, len };
        self.notify(notify::INVAL_INODE, &[a.as_bytes()])
    }

    /// Make every entry the kernel cached for this mount stale at once. Returns
    /// false when the kernel does not know the notification (before Linux 6.16);
    /// then only the per-entry invalidations sent afterwards apply.
    pub fn inc_epoch(&self) -> bool {
        if !self.epochs.load(Ordering::Relaxed) {
            return false;
        }
        let Err(e) = self.notify(notify::INC_EPOCH, &[]) else {
            return true;
        };
        if self.epochs.swap(false, Ordering::Relaxed) {
            log::warn!(
                "the kernel refused FUSE_NOTIFY_INC_EPOCH ({e}); a path opened between a checkout's tree swap \
                 and its invalidations can still reach a replaced inode"
            );
        }
        false
    }
}

/// A real mount: `syncfs` through the mount's identity (see
/// [`crate::fs::outside`]), invalidations through its `/dev/fuse` channel.
pub struct KernelMount {
    mount: Arc<MountRef>,
    kernel: KernelCache,
}

impl KernelMount {
    /// The mount `mount`, whose kernel caches `kernel` reaches.
    pub fn new(mount: Arc<MountRef>, kernel: KernelCache) -> KernelMount {
        KernelMount { mount, kernel }
    }
}

impl Mount for KernelMount {
    fn path(&self) -> &Path {
        self.mount.path()
    }
    fn syncfs(&self) -> io::Result<()> {
        self.mount.syncfs()
    }
    fn inval_entry(&self, parent: u64, name: &[u8]) -> io::Result<()> {
        self.kernel.inval_entry(parent, name)
    }
    fn inval_inode(&self, ino: u64) -> io::Result<()> {
        self.kernel.inval_inode(ino)
    }
    fn inc_epoch(&self) -> bool {
        self.kernel.inc_epoch()
    }
    fn entry(&self) -> Option<crate::hostdir::Entry> {
        self.mount
            .entry()
            .inspect_err(|e| log::warn!("{}: {e}", self.mount.path().display()))
            .ok()
    }
}
