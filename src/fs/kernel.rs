//! The daemon's channel to the kernel's caches of one mount.
//!
//! Owns: entry and inode invalidations (through fuser's notifier) and epoch
//! increments (`FUSE_NOTIFY_INC_EPOCH`, Linux 6.16+), which fuser 0.18 does not
//! offer: that notification is a bare 16-byte `fuse_out_header` written to a
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
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::outside::MountRef;
use crate::host::Mount;

/// `FUSE_NOTIFY_INC_EPOCH` (include/uapi/linux/fuse.h, protocol 7.44).
const FUSE_NOTIFY_INC_EPOCH: i32 = 8;

/// Invalidations and epoch increments for one mount. Cheap to clone.
#[derive(Clone)]
pub struct KernelCache {
    notifier: fuser::Notifier,
    dev: Arc<OwnedFd>,
    /// Cleared once the kernel refused an epoch increment (older kernels).
    epochs: Arc<AtomicBool>,
}

impl KernelCache {
    /// From fuser's notifier and a duplicate of the mount's `/dev/fuse` descriptor.
    pub fn new(notifier: fuser::Notifier, dev: OwnedFd) -> KernelCache {
        KernelCache {
            notifier,
            dev: Arc::new(dev),
            epochs: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Forget the entry `name` of directory `parent`.
    pub fn inval_entry(&self, parent: u64, name: &[u8]) -> io::Result<()> {
        self.notifier
            .inval_entry(fuser::INodeNo(parent), std::ffi::OsStr::from_bytes(name))
    }

    /// Forget the attributes and cached pages of `ino`.
    pub fn inval_inode(&self, ino: u64) -> io::Result<()> {
        self.notifier.inval_inode(fuser::INodeNo(ino), 0, 0)
    }

    /// Make every entry the kernel cached for this mount stale at once. Returns
    /// false when the kernel does not know the notification (before Linux 6.16);
    /// then only the per-entry invalidations sent afterwards apply.
    pub fn inc_epoch(&self) -> bool {
        if !self.epochs.load(Ordering::Relaxed) {
            return false;
        }
        // struct fuse_out_header { u32 len; i32 error (the notify code); u64 unique = 0 }
        let mut msg = [0u8; 16];
        msg[0..4].copy_from_slice(&16u32.to_ne_bytes());
        msg[4..8].copy_from_slice(&FUSE_NOTIFY_INC_EPOCH.to_ne_bytes());
        // SAFETY: `msg` is a live 16-byte buffer; the fd is an open /dev/fuse
        // descriptor owned by `self.dev`.
        let n = unsafe { libc::write(self.dev.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        if n == msg.len() as isize {
            return true;
        }
        let e = io::Error::last_os_error();
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
