//! The kernel ABI of FUSE over io_uring: the `fuse_*` structs and constants of
//! include/uapi/linux/fuse.h (protocol 7.42+) that the ring transport reads and
//! writes, declared in the kernel's layout.
//!
//! Invariants: every struct is `#[repr(C)]` with explicit padding fields, so it has
//! no implicit padding and derives zerocopy's `FromBytes`/`IntoBytes`: reading one
//! from the kernel's bytes and writing one back are bounds-checked copies, never
//! pointer casts. Each size is pinned by a test against the kernel's. Integers are
//! in the machine's byte order (the kernel's own), not a wire order.
//!
//! Only what a request or reply of the ops treefork serves needs is here, and what
//! only /dev/fuse carries (INIT, FORGET, INTERRUPT, notifications), which the
//! shared /dev/fuse pool (`fs::devpool`) and the kernel channel (`fs::kernel`) use.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Every ABI struct derives the same four traits.
macro_rules! abi {
    ($($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* })*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
            pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        )*
    };
}

// ---- io_uring framing (fuse.h, "FUSE over io-uring") ----

/// `FUSE_IO_URING_CMD_REGISTER`: hand an entry's buffers to the kernel.
pub const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: answer the entry's request, re-arm it.
pub const CMD_COMMIT_AND_FETCH: u32 = 2;
/// `FUSE_URING_IN_OUT_HEADER_SZ`: room for `fuse_in_header` / `fuse_out_header`.
pub const IN_OUT_SZ: usize = 128;
/// `FUSE_URING_OP_IN_OUT_SZ`: room for an opcode's fixed argument.
pub const OP_IN_SZ: usize = 128;
/// `struct fuse_uring_req_header`: in_out, op_in, then `fuse_uring_ent_in_out`.
pub const REQ_HEADER_SZ: usize = IN_OUT_SZ + OP_IN_SZ + size_of::<EntInOut>();
/// Offset of `ring_ent_in_out` in `fuse_uring_req_header`.
pub const ENT_IN_OUT_OFF: usize = IN_OUT_SZ + OP_IN_SZ;

abi! {
    /// `struct fuse_uring_ent_in_out`: per-entry bookkeeping the kernel fills
    /// (commit id, request payload size) and the server fills (reply payload size).
    pub struct EntInOut {
        pub flags: u64,
        /// The request's unique id: the `commit_id` of the COMMIT_AND_FETCH answering it.
        pub commit_id: u64,
        /// Bytes of the payload buffer in use (request, then reply).
        pub payload_sz: u32,
        pub padding: u32,
        pub reserved: u64,
    }

    /// `struct fuse_uring_cmd_req`: the 80-byte command area of a 128-byte SQE
    /// begins with it.
    pub struct UringCmdReq {
        pub flags: u64,
        pub commit_id: u64,
        pub qid: u16,
        pub padding: [u8; 6],
    }

    // ---- headers ----

    /// `struct fuse_in_header`.
    pub struct InHeader {
        pub len: u32,
        pub opcode: u32,
        pub unique: u64,
        pub nodeid: u64,
        pub uid: u32,
        pub gid: u32,
        pub pid: u32,
        pub total_extlen: u16,
        pub padding: u16,
    }

    /// `struct fuse_out_header`.
    pub struct OutHeader {
        pub len: u32,
        /// 0 or a negative errno.
        pub error: i32,
        pub unique: u64,
    }

    // ---- attributes and entries ----

    /// `struct fuse_attr`.
    pub struct Attr {
        pub ino: u64,
        pub size: u64,
        pub blocks: u64,
        pub atime: u64,
        pub mtime: u64,
        pub ctime: u64,
        pub atimensec: u32,
        pub mtimensec: u32,
        pub ctimensec: u32,
        pub mode: u32,
        pub nlink: u32,
        pub uid: u32,
        pub gid: u32,
        pub rdev: u32,
        pub blksize: u32,
        pub flags: u32,
    }

    /// `struct fuse_entry_out`.
    pub struct EntryOut {
        pub nodeid: u64,
        pub generation: u64,
        pub entry_valid: u64,
        pub attr_valid: u64,
        pub entry_valid_nsec: u32,
        pub attr_valid_nsec: u32,
        pub attr: Attr,
    }

    /// `struct fuse_attr_out`.
    pub struct AttrOut {
        pub attr_valid: u64,
        pub attr_valid_nsec: u32,
        pub dummy: u32,
        pub attr: Attr,
    }

    /// `struct fuse_getattr_in`.
    pub struct GetattrIn {
        pub getattr_flags: u32,
        pub dummy: u32,
        pub fh: u64,
    }

    /// `struct fuse_setattr_in`.
    pub struct SetattrIn {
        pub valid: u32,
        pub padding: u32,
        pub fh: u64,
        pub size: u64,
        pub lock_owner: u64,
        pub atime: u64,
        pub mtime: u64,
        pub ctime: u64,
        pub atimensec: u32,
        pub mtimensec: u32,
        pub ctimensec: u32,
        pub mode: u32,
        pub unused4: u32,
        pub uid: u32,
        pub gid: u32,
        pub unused5: u32,
    }

    // ---- namespace ----

    /// `struct fuse_mknod_in`.
    pub struct MknodIn {
        pub mode: u32,
        pub rdev: u32,
        pub umask: u32,
        pub padding: u32,
    }

    /// `struct fuse_mkdir_in`.
    pub struct MkdirIn {
        pub mode: u32,
        pub umask: u32,
    }

    /// `struct fuse_rename_in`.
    pub struct RenameIn {
        pub newdir: u64,
    }

    /// `struct fuse_rename2_in`.
    pub struct Rename2In {
        pub newdir: u64,
        pub flags: u32,
        pub padding: u32,
    }

    /// `struct fuse_link_in`.
    pub struct LinkIn {
        pub oldnodeid: u64,
    }

    // ---- open files ----

    /// `struct fuse_open_in`.
    pub struct OpenIn {
        pub flags: u32,
        pub open_flags: u32,
    }

    /// `struct fuse_create_in`.
    pub struct CreateIn {
        pub flags: u32,
        pub mode: u32,
        pub umask: u32,
        pub open_flags: u32,
    }

    /// `struct fuse_open_out`.
    pub struct OpenOut {
        pub fh: u64,
        pub open_flags: u32,
        pub backing_id: i32,
    }

    /// `struct fuse_release_in`.
    pub struct ReleaseIn {
        pub fh: u64,
        pub flags: u32,
        pub release_flags: u32,
        pub lock_owner: u64,
    }

    /// `struct fuse_flush_in`.
    pub struct FlushIn {
        pub fh: u64,
        pub unused: u32,
        pub padding: u32,
        pub lock_owner: u64,
    }

    /// `struct fuse_read_in` (also READDIR's and READDIRPLUS's argument).
    pub struct ReadIn {
        pub fh: u64,
        pub offset: u64,
        pub size: u32,
        pub read_flags: u32,
        pub lock_owner: u64,
        pub flags: u32,
        pub padding: u32,
    }

    /// `struct fuse_write_in`.
    pub struct WriteIn {
        pub fh: u64,
        pub offset: u64,
        pub size: u32,
        pub write_flags: u32,
        pub lock_owner: u64,
        pub flags: u32,
        pub padding: u32,
    }

    /// `struct fuse_write_out`.
    pub struct WriteOut {
        pub size: u32,
        pub padding: u32,
    }

    /// `struct fuse_fsync_in` (FSYNC and FSYNCDIR).
    pub struct FsyncIn {
        pub fh: u64,
        pub fsync_flags: u32,
        pub padding: u32,
    }

    /// `struct fuse_fallocate_in`.
    pub struct FallocateIn {
        pub fh: u64,
        pub offset: u64,
        pub length: u64,
        pub mode: u32,
        pub padding: u32,
    }

    /// `struct fuse_lseek_in`.
    pub struct LseekIn {
        pub fh: u64,
        pub offset: u64,
        pub whence: u32,
        pub padding: u32,
    }

    /// `struct fuse_lseek_out`.
    pub struct LseekOut {
        pub offset: u64,
    }

    // ---- extended attributes ----

    /// `struct fuse_setxattr_in` as sent without FUSE_SETXATTR_EXT
    /// (`FUSE_COMPAT_SETXATTR_IN_SIZE`, 8 bytes; treefork does not negotiate the
    /// extension, whose 16-byte form begins the same way).
    pub struct SetxattrIn {
        pub size: u32,
        pub flags: u32,
    }

    /// `struct fuse_getxattr_in` (GETXATTR and LISTXATTR).
    pub struct GetxattrIn {
        pub size: u32,
        pub padding: u32,
    }

    /// `struct fuse_access_in`.
    pub struct AccessIn {
        pub mask: u32,
        pub padding: u32,
    }

    /// `struct fuse_getxattr_out`: the size answer.
    pub struct GetxattrOut {
        pub size: u32,
        pub padding: u32,
    }

    // ---- statfs ----

    /// `struct fuse_kstatfs`.
    pub struct Kstatfs {
        pub blocks: u64,
        pub bfree: u64,
        pub bavail: u64,
        pub files: u64,
        pub ffree: u64,
        pub bsize: u32,
        pub namelen: u32,
        pub frsize: u32,
        pub padding: u32,
        pub spare: [u32; 6],
    }

    /// `struct fuse_statfs_out`.
    pub struct StatfsOut {
        pub st: Kstatfs,
    }

    // ---- listings ----

    /// `struct fuse_dirent` without its name (`name[]` follows, then zero padding
    /// to 8 bytes).
    pub struct Dirent {
        pub ino: u64,
        pub off: u64,
        pub namelen: u32,
        pub typ: u32,
    }

    /// `struct fuse_direntplus` without its name.
    pub struct DirentPlus {
        pub entry_out: EntryOut,
        pub dirent: Dirent,
    }
}

abi! {
    // ---- /dev/fuse only: INIT, forgets, notifications (never on the ring) ----

    /// `struct fuse_init_in` (protocol 7.36+; older kernels send the first 16 bytes).
    pub struct InitIn {
        pub major: u32,
        pub minor: u32,
        pub max_readahead: u32,
        pub flags: u32,
        pub flags2: u32,
        pub unused: [u32; 11],
    }

    /// `struct fuse_init_out`.
    pub struct InitOut {
        pub major: u32,
        pub minor: u32,
        pub max_readahead: u32,
        pub flags: u32,
        pub max_background: u16,
        pub congestion_threshold: u16,
        pub max_write: u32,
        pub time_gran: u32,
        pub max_pages: u16,
        pub map_alignment: u16,
        pub flags2: u32,
        pub max_stack_depth: u32,
        pub request_timeout: u16,
        pub unused: [u16; 11],
    }

    /// `struct fuse_forget_in`.
    pub struct ForgetIn {
        pub nlookup: u64,
    }

    /// `struct fuse_batch_forget_in`, followed by `count` [`ForgetOne`].
    pub struct BatchForgetIn {
        pub count: u32,
        pub dummy: u32,
    }

    /// `struct fuse_forget_one`.
    pub struct ForgetOne {
        pub nodeid: u64,
        pub nlookup: u64,
    }

    /// `struct fuse_notify_inval_inode_out`.
    pub struct NotifyInvalInode {
        pub ino: u64,
        pub off: i64,
        pub len: i64,
    }

    /// `struct fuse_notify_inval_entry_out`, followed by the name and a NUL.
    pub struct NotifyInvalEntry {
        pub parent: u64,
        pub namelen: u32,
        pub flags: u32,
    }
}

/// `enum fuse_notify_code`: the notifications treefork sends.
pub mod notify {
    pub const INVAL_INODE: i32 = 2;
    pub const INVAL_ENTRY: i32 = 3;
    /// `FUSE_NOTIFY_INC_EPOCH` (protocol 7.44, Linux 6.16+).
    pub const INC_EPOCH: i32 = 8;
}

/// `enum fuse_opcode`: the opcodes treefork serves (INIT, FORGET, BATCH_FORGET
/// and INTERRUPT never come on the ring: the kernel sends them over /dev/fuse).
pub mod op {
    pub const LOOKUP: u32 = 1;
    /// /dev/fuse only.
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    /// /dev/fuse only.
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    /// /dev/fuse only.
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const IOCTL: u32 = 39;
    /// /dev/fuse only.
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
}

/// `FATTR_*`: which fields of a `fuse_setattr_in` are set.
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const CTIME: u32 = 1 << 10;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes of include/uapi/linux/fuse.h.
    #[test]
    fn sizes_match_the_kernel() {
        assert_eq!(size_of::<EntInOut>(), 32);
        assert_eq!(size_of::<InitIn>(), 64);
        assert_eq!(size_of::<InitOut>(), 64);
        assert_eq!(size_of::<ForgetIn>(), 8);
        assert_eq!(size_of::<BatchForgetIn>(), 8);
        assert_eq!(size_of::<ForgetOne>(), 16);
        assert_eq!(size_of::<NotifyInvalInode>(), 24);
        assert_eq!(size_of::<NotifyInvalEntry>(), 16);
        assert_eq!(REQ_HEADER_SZ, 288);
        assert_eq!(size_of::<UringCmdReq>(), 24);
        assert_eq!(size_of::<InHeader>(), 40);
        assert_eq!(size_of::<OutHeader>(), 16);
        assert_eq!(size_of::<Attr>(), 88);
        assert_eq!(size_of::<EntryOut>(), 128);
        assert_eq!(size_of::<AttrOut>(), 104);
        assert_eq!(size_of::<GetattrIn>(), 16);
        assert_eq!(size_of::<SetattrIn>(), 88);
        assert_eq!(size_of::<MknodIn>(), 16);
        assert_eq!(size_of::<MkdirIn>(), 8);
        assert_eq!(size_of::<RenameIn>(), 8);
        assert_eq!(size_of::<Rename2In>(), 16);
        assert_eq!(size_of::<LinkIn>(), 8);
        assert_eq!(size_of::<OpenIn>(), 8);
        assert_eq!(size_of::<CreateIn>(), 16);
        assert_eq!(size_of::<OpenOut>(), 16);
        assert_eq!(size_of::<ReleaseIn>(), 24);
        assert_eq!(size_of::<FlushIn>(), 24);
        assert_eq!(size_of::<ReadIn>(), 40);
        assert_eq!(size_of::<WriteIn>(), 40);
        assert_eq!(size_of::<WriteOut>(), 8);
        assert_eq!(size_of::<FsyncIn>(), 16);
        assert_eq!(size_of::<FallocateIn>(), 32);
        assert_eq!(size_of::<LseekIn>(), 24);
        assert_eq!(size_of::<LseekOut>(), 8);
        assert_eq!(size_of::<SetxattrIn>(), 8);
        assert_eq!(size_of::<GetxattrIn>(), 8);
        assert_eq!(size_of::<GetxattrOut>(), 8);
        assert_eq!(size_of::<AccessIn>(), 8);
        assert_eq!(size_of::<Kstatfs>(), 80);
        assert_eq!(size_of::<StatfsOut>(), 80);
        assert_eq!(size_of::<Dirent>(), 24);
        assert_eq!(size_of::<DirentPlus>(), 152);
    }

    /// The largest fixed argument fits the op_in area.
    #[test]
    fn fixed_arguments_fit_op_in() {
        assert!(size_of::<SetattrIn>() <= OP_IN_SZ);
        assert!(size_of::<InHeader>() <= IN_OUT_SZ);
    }
}
