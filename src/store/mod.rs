//! The content-addressed object store and the metadata store beneath it.
//!
//! Owns: object bytes (file chunks and tree nodes) and the metadata database that
//! indexes them, behind two traits:
//! - [`ObjectStore`] (`objects.rs`): what every layer above uses — put, get, commit
//!   (objects durable, then metadata ops applied atomically), metadata reads; and
//!   [`Packs`], what gc and fsck need beneath it (index, packs, gc guard);
//! - [`MetaStore`] (`metastore.rs`): atomic, durable key-value batches, implemented
//!   for the sled database ([`crate::meta::MetaDb`]) and in memory ([`MemMeta`]).
//!
//! Implementations: [`PackStore`] (`packstore.rs` + `maintain.rs`; opened by
//! `open.rs`) keeps objects in append-only packs (`pack.rs`) indexed in a
//! [`MetaStore`]; [`MemStore`] (`memstore.rs`) is the in-memory twin for tests.
//! Read fds of packs are bounded (`fds.rs`), decoded objects cached (`cache.rs`),
//! and appends stop short of the free-space reserve (`space.rs`).
//!
//! Deltas: [`ObjectStore::put_based`] may store an object as a delta of an earlier
//! version (pack codec 2). Invariants: a delta's base is stored whole (reads take at
//! most two records); a put guards the base's id before looking it up (so a
//! concurrent gc keeps it or the object is stored whole); a sweep keeps the base of
//! every kept, guarded or pending delta.
//!
//! Every `get` verifies the object's hash; a mismatch is [`Error::Corrupt`] (EIO).

pub mod cache;
#[cfg(test)]
mod defect_tests;
pub mod fds;
mod maintain;
pub mod memstore;
pub mod metastore;
pub mod objects;
mod open;
pub mod pack;
pub mod packstore;
pub mod rebuild;
pub mod space;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};
pub use memstore::MemStore;
pub use metastore::{MemMeta, MetaStore};
pub use objects::{Fallback, FetchedObject, Loc, ObjectStore, Packs};
pub use open::{STORE_FILE, STORE_FORMAT, STORE_VERSION, check_descriptor};
pub use pack::{Codec, Kind};
pub use packstore::PackStore;
pub use rebuild::RebuildReport;

/// Objects smaller than this are always stored whole (a delta would not pay for
/// its base id and the second read).
pub const DELTA_MIN: usize = 256;
/// Packs are rotated once they exceed this size.
pub const PACK_TARGET_SIZE: u64 = 64 << 20;

/// The number of a pack file name (`pack-NNNNNNNN.tfp`).
fn pack_number(name: &std::ffi::OsStr) -> Option<u32> {
    name.to_str()?
        .strip_prefix("pack-")?
        .strip_suffix(".tfp")?
        .parse()
        .ok()
}

/// (total, free, available) bytes of the filesystem holding `path`.
pub fn statvfs_bytes(path: &Path) -> Option<(u64, u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data, for which all-zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `s` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let f = s.f_frsize;
    Some((s.f_blocks * f, s.f_bfree * f, s.f_bavail * f))
}

/// Read a whole pack file (for scanning).
pub fn read_pack(path: &Path) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut v))
        .map_err(|e| Error::io(path, e))?;
    Ok(v)
}
