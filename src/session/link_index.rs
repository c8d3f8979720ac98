//! The link index: for each hard-linked inode, the loaded directories whose
//! entries name it, so finding every name of a hard-linked file costs its own
//! directories, not a scan of the whole table (`Session::take_touched` does that
//! for each touched hard-linked file at every flush; `git` makes every loose object
//! a hard link for a moment: link(tmp, obj) + unlink(tmp), then fsync).
//!
//! Owns: `State::link_dirs`, (link ino, directory) → how many of the directory's
//! loaded entries name that ino.
//!
//! Invariant (checked by [`State::check_link_index`] in the model tests): the map
//! holds exactly, for every directory in the table with loaded entries and every
//! entry of it naming an inode in the table flagged `hardlink`, the count of such
//! entries. So every change of a directory's entries goes through
//! [`State::insert_entry`] / [`State::remove_entry`] (or calls
//! [`State::index_link`] / [`State::unindex_dir`] itself: directory loads and
//! unloads, an inode becoming hard-linked, an inode leaving the table).

use super::inode::{Data, State};
use crate::error::Result;

impl State {
    /// Insert (or replace) `name` → `ino` in loaded directory `dir`, keeping the
    /// link index. Returns the ino the name named before.
    pub(crate) fn insert_entry(
        &mut self,
        dir: u64,
        name: Vec<u8>,
        ino: u64,
    ) -> Result<Option<u64>> {
        let old = self.entries_mut(dir)?.insert(name, ino);
        if old != Some(ino) {
            if let Some(o) = old {
                self.unindex_link(o, dir);
            }
            self.index_link(ino, dir);
        }
        Ok(old)
    }

    /// Remove `name` from loaded directory `dir`, keeping the link index. Returns
    /// the ino it named.
    pub(crate) fn remove_entry(&mut self, dir: u64, name: &[u8]) -> Result<Option<u64>> {
        let old = self.entries_mut(dir)?.remove(name);
        if let Some(o) = old {
            self.unindex_link(o, dir);
        }
        Ok(old)
    }

    /// One more entry of loaded directory `dir` names `ino` (counted if `ino` is
    /// hard-linked).
    pub(crate) fn index_link(&mut self, ino: u64, dir: u64) {
        if self.inodes.get(&ino).is_some_and(|i| i.hardlink) {
            *self.link_dirs.entry((ino, dir)).or_default() += 1;
        }
    }

    /// One entry of `dir` naming `ino` is gone.
    fn unindex_link(&mut self, ino: u64, dir: u64) {
        if let Some(n) = self.link_dirs.get_mut(&(ino, dir)) {
            *n -= 1;
            if *n == 0 {
                self.link_dirs.remove(&(ino, dir));
            }
        }
    }

    /// Directory `dir`'s loaded entries are going away (unloaded, or the directory
    /// leaves the table): forget what they counted.
    pub(crate) fn unindex_dir(&mut self, dir: u64) {
        if self.link_dirs.is_empty() {
            return;
        }
        let kids: Vec<u64> = match self.inodes.get(&dir).map(|i| &i.data) {
            Some(Data::Dir(d)) => match &d.entries {
                Some(e) => e.values().copied().collect(),
                None => return,
            },
            _ => return,
        };
        for k in kids {
            self.link_dirs.remove(&(k, dir));
        }
    }

    /// Inode `ino` leaves the table: forget its entries and, for a directory,
    /// those of its loaded entries.
    pub(crate) fn unindex_ino(&mut self, ino: u64) {
        self.unindex_dir(ino);
        let keys: Vec<(u64, u64)> = self
            .link_dirs
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.link_dirs.remove(&k);
        }
    }

    /// Hard-linked file `ino` is down to one name. When the index knows that name
    /// (one entry of one loaded directory), the inode leaves the link table and that
    /// directory holds its record again: the link table (carried by the root node and
    /// re-encoded at every flush that changes it) does not keep every file that was
    /// ever hard-linked. `git` makes every loose object a hard link for a moment
    /// (link(tmp, obj) + unlink(tmp)); without this, each of a `git add`'s flushes
    /// re-encoded a table of every object added so far.
    pub(crate) fn unlink_to_one(&mut self, ino: u64) {
        let mut dirs = self.link_dirs.range((ino, 0)..=(ino, u64::MAX));
        let (Some((&(_, dir), &1)), None) = (dirs.next(), dirs.next()) else {
            return;
        };
        let Some(i) = self.inodes.get_mut(&ino) else {
            return;
        };
        if !i.hardlink || i.attr.nlink != 1 || matches!(i.data, Data::Dir(_)) {
            return;
        }
        let bound = i.record_bound();
        i.hardlink = false;
        i.parent = dir;
        self.link_dirs.remove(&(ino, dir));
        self.link_bytes = self.link_bytes.saturating_sub(bound);
        self.links.remove(&ino);
        self.links_dirty = true;
        // Its entry changes from a link-table reference to the record itself.
        self.mark_dir_changed(dir);
        self.mark_dirty(ino);
    }

    /// The loaded directories whose entries name hard-linked inode `ino` (what a
    /// scan of every loaded directory of the table finds).
    pub(crate) fn link_dirs_of(&self, ino: u64) -> impl Iterator<Item = u64> + '_ {
        self.link_dirs
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(&(_, d), _)| d)
    }

    /// The index as a full scan of the table computes it (tests).
    #[cfg(test)]
    pub(crate) fn scan_link_dirs(&self) -> std::collections::BTreeMap<(u64, u64), u32> {
        let mut m = std::collections::BTreeMap::new();
        for (&d, di) in &self.inodes {
            if let Data::Dir(dd) = &di.data
                && let Some(e) = &dd.entries
            {
                for v in e.values() {
                    if self.inodes.get(v).is_some_and(|i| i.hardlink) {
                        *m.entry((*v, d)).or_default() += 1;
                    }
                }
            }
        }
        m
    }

    /// Panic unless the index is exactly what a scan finds (tests).
    #[cfg(test)]
    pub(crate) fn check_link_index(&self) {
        assert_eq!(
            self.link_dirs,
            self.scan_link_dirs(),
            "link index differs from a scan"
        );
    }
}

#[cfg(test)]
#[path = "link_index_tests.rs"]
mod tests;
