//! [`Mount`]: what ops ask of the kernel and of the mount a session is served on —
//! `syncfs` (so what programs wrote reaches the session), entry and inode
//! invalidations and epoch increments (so the kernel forgets what a graft
//! replaced), the mountpoint's path (for messages) and its directory as an entry
//! of its parent's kept descriptor (to remove it after the unmount).
//!
//! `fs::KernelMount` is the real one (the daemon's identified mount and its kernel
//! cache channel); the in-memory host of the tests (`ops::memhost`) has a twin
//! that records what it was asked. Ops reach the kernel only through this trait.

use std::io;
use std::path::Path;

/// The kernel side of one mounted session, as ops see it.
pub trait Mount: Send + Sync {
    /// Where the session is mounted (for messages).
    fn path(&self) -> &Path;
    /// Push the kernel's dirty pages of the mount to the daemon (`syncfs(2)`).
    fn syncfs(&self) -> io::Result<()>;
    /// Forget the entry `name` of directory `parent`.
    fn inval_entry(&self, parent: u64, name: &[u8]) -> io::Result<()>;
    /// Forget the attributes and cached pages of `ino`.
    fn inval_inode(&self, ino: u64) -> io::Result<()>;
    /// Make every entry the kernel cached for the mount stale at once; false when
    /// the kernel does not know how (then only per-entry invalidations apply).
    fn inc_epoch(&self) -> bool;
    /// The mountpoint as an entry of its parent directory, reached through the
    /// parent's descriptor kept since the mount was made (to remove the directory
    /// once the mount is gone, never by path); `None` when the mount has no
    /// directory of the host.
    fn entry(&self) -> Option<crate::hostdir::Entry>;
}
