//! Durability primitives: every `fsync`/`fdatasync` treefork issues goes through here.
//!
//! Owns: syncing a file's data ([`sync_data`]), a file with its metadata
//! ([`sync_all`]) and a directory's entries ([`sync_dir`]), and the test-only switch
//! that turns them off.
//!
//! Invariant: nothing treefork acknowledges (fsync, checkpoint, branch, fork, any ref
//! or session record change) is acknowledged before every byte it rests on went
//! through one of these calls (see "Crash consistency" in docs/design.md).
//!
//! **Test only:** `TREEFORK_UNSAFE_NO_SYNC` makes the calls no-ops, so the power-cut
//! test (`tests/it/powercut/`) can show that it catches lost data. `1` or `all`:
//! every sync of this module; `meta`: only the metadata database's own syncs after
//! sled's flush ([`Scope::Meta`]), which leaves sled's `sync_file_range` alone — the
//! state before issue 12. Any other value keeps syncing on. Never set it outside
//! tests: acknowledged data is then lost on a power cut.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::OnceLock;

/// Name of the test-only environment switch (see the module docs).
pub const UNSAFE_NO_SYNC_ENV: &str = "TREEFORK_UNSAFE_NO_SYNC";

/// Which syncs a call belongs to, for the test-only switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Packs, the store descriptor, directories: off only with `all`.
    Store,
    /// The metadata database's files after sled's flush: off with `all` or `meta`.
    Meta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disabled {
    None,
    Meta,
    All,
}

fn parse(v: Option<&str>) -> Disabled {
    match v.map(str::trim) {
        Some("1") | Some("all") => Disabled::All,
        Some("meta") => Disabled::Meta,
        // Unset, empty, "0", or anything unknown: syncing stays on (the safe side).
        _ => Disabled::None,
    }
}

fn disabled() -> Disabled {
    static D: OnceLock<Disabled> = OnceLock::new();
    *D.get_or_init(|| {
        let v = std::env::var(UNSAFE_NO_SYNC_ENV).ok();
        let d = parse(v.as_deref());
        if d != Disabled::None {
            log::warn!(
                "{UNSAFE_NO_SYNC_ENV}={}: syncs are OFF ({d:?}); acknowledged data is lost on a power cut (test only)",
                v.unwrap_or_default()
            );
        }
        d
    })
}

/// Whether syncs of `scope` are switched off (test only).
pub fn skipped(scope: Scope) -> bool {
    match disabled() {
        Disabled::None => false,
        Disabled::All => true,
        Disabled::Meta => scope == Scope::Meta,
    }
}

/// `fdatasync`: the file's bytes and the metadata needed to read them (its size).
pub fn sync_data(f: &File, scope: Scope) -> io::Result<()> {
    if skipped(scope) {
        return Ok(());
    }
    f.sync_data()
}

/// `fsync`: the file's bytes and all its metadata.
pub fn sync_all(f: &File, scope: Scope) -> io::Result<()> {
    if skipped(scope) {
        return Ok(());
    }
    f.sync_all()
}

/// `fsync` of a directory: makes its entries (files created, renamed, removed in it)
/// durable.
pub fn sync_dir(dir: &Path, scope: Scope) -> io::Result<()> {
    if skipped(scope) {
        return Ok(());
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_values() {
        assert_eq!(parse(None), Disabled::None);
        assert_eq!(parse(Some("")), Disabled::None);
        assert_eq!(parse(Some("0")), Disabled::None);
        assert_eq!(parse(Some("meta")), Disabled::Meta);
        assert_eq!(parse(Some("1")), Disabled::All);
        assert_eq!(parse(Some("all")), Disabled::All);
        // Anything unknown keeps syncing on.
        assert_eq!(parse(Some("false")), Disabled::None);
    }
}
