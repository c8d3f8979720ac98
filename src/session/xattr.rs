//! Extended attributes of a session's inodes: set, get, list, remove. Each takes
//! the table lock once; sizes are bounded at the call (`XATTR_BYTES_MAX`,
//! `XATTR_COUNT_MAX`, and the link table's budget for hard-linked inodes), so no
//! record ever grows past what a flush can store.

use super::inode::xattr_bytes;
use super::{Session, xattr_cost};
use crate::error::{Error, Result, posix};
use crate::tree::Timespec;

/// Debug builds only: a `setxattr` of this name panics while holding the table
/// lock (to test that a panicking request answers EIO and the mount keeps serving).
pub const DEBUG_PANIC_XATTR: &[u8] = b"user.treefork.debug-panic";

/// xattr set flags.
pub const XATTR_CREATE: i32 = 1;
/// xattr set flags.
pub const XATTR_REPLACE: i32 = 2;

impl Session {
    /// Set an extended attribute.
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        #[cfg(debug_assertions)]
        if name == DEBUG_PANIC_XATTR {
            let mut st = self.lock();
            st.changed = true;
            panic!("debug panic hook ({DEBUG_PANIC_XATTR:?} on inode {ino})");
        }
        let _gate = self.gate_shared();
        check_xattr_name(name)?;
        if value.len() > 65536 {
            return posix(libc::E2BIG);
        }
        let mut st = self.lock();
        let linked = st.links.contains(&ino);
        let i = st.get(ino)?;
        let old = i.xattrs.get(name);
        let exists = old.is_some();
        if flags & XATTR_CREATE != 0 && exists {
            return posix(libc::EEXIST);
        }
        if flags & XATTR_REPLACE != 0 && !exists {
            return posix(libc::ENODATA);
        }
        // Bounded at the call, so no record ever grows past what a flush can store;
        // a replacement counts the difference.
        let before = xattr_bytes(&i.xattrs);
        let after = before - old.map_or(0, |v| xattr_cost(name, v)) + xattr_cost(name, value);
        let grow = after.saturating_sub(before) as u64;
        if grow > 0
            && (after > super::XATTR_BYTES_MAX
                || (!exists && i.xattrs.len() >= super::XATTR_COUNT_MAX)
                || (linked && st.link_bytes + grow > super::LINK_TABLE_MAX))
        {
            return posix(libc::ENOSPC);
        }
        if linked {
            st.link_bytes = (st.link_bytes + after as u64).saturating_sub(before as u64);
        }
        let i = st.get_mut(ino)?;
        i.xattrs.insert(name.to_vec(), value.to_vec());
        i.attr.ctime = Timespec::now();
        st.mark_dirty(ino);
        Ok(())
    }

    /// Get an extended attribute.
    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        let st = self.lock();
        st.get(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or(Error::Posix(libc::ENODATA))
    }

    /// List extended attribute names, NUL-terminated.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>> {
        let st = self.lock();
        let mut out = Vec::new();
        for k in st.get(ino)?.xattrs.keys() {
            out.extend_from_slice(k);
            out.push(0);
        }
        Ok(out)
    }

    /// Remove an extended attribute.
    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        let _gate = self.gate_shared();
        check_xattr_name(name)?;
        let mut st = self.lock();
        let linked = st.links.contains(&ino);
        let i = st.get_mut(ino)?;
        let Some(old) = i.xattrs.remove(name) else {
            return posix(libc::ENODATA);
        };
        i.attr.ctime = Timespec::now();
        if linked {
            st.link_bytes = st.link_bytes.saturating_sub(xattr_cost(name, &old) as u64);
        }
        st.mark_dirty(ino);
        Ok(())
    }
}

fn check_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return posix(libc::ERANGE);
    }
    let ok = [&b"user."[..], b"security.", b"trusted."]
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len());
    if !ok {
        return posix(libc::EOPNOTSUPP);
    }
    Ok(())
}
