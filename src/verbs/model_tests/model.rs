//! The reference model of a session's refs and operation log: what `checkpoint`,
//! `branch`, `checkout`, `undo`, `redo` and `op restore` should leave, written
//! from the rules in the module docs of `ops::undo` and `oplog::stack`, not from
//! their code.
//!
//! Workspaces and checkpoints are named by the ids the real session gave them
//! (a root id learned by flushing after each write, a checkpoint id learned from
//! the answer that made it); the model keeps what each one holds.

use std::collections::{BTreeMap, HashMap};

/// A file at the workspace root: the write that made it (every write's content
/// names it, so two writes never make equal files) and its bytes.
pub(super) type Entries = BTreeMap<String, (u64, Vec<u8>)>;

/// HEAD, its branch, the workspace and the branches an operation touched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct View {
    pub head: Option<String>,
    pub branch: Option<String>,
    pub ws: String,
    pub branches: BTreeMap<String, Option<String>>,
}

/// An operation record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rec {
    pub before: View,
    pub after: View,
    pub undoes: Option<u64>,
    pub redoes: Option<u64>,
    pub inert: bool,
}

/// Which parts of a view an undo, redo or op restore moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum What {
    All,
    Files,
    Refs,
}

impl What {
    pub(super) fn wire(self) -> Option<String> {
        match self {
            What::All => None,
            What::Files => Some("files".into()),
            What::Refs => Some("refs".into()),
        }
    }
}

/// The parts of a view to set, and what each branch to move must still hold.
#[derive(Debug, Default)]
pub(super) struct Goal {
    head: Option<(Option<String>, Option<String>)>,
    branches: BTreeMap<String, Option<String>>,
    ws: Option<String>,
    expect: BTreeMap<String, Option<String>>,
}

impl Goal {
    /// Back from `from` to `to`: the parts that differ.
    fn revert(from: &View, to: &View, what: What) -> Goal {
        let mut g = Goal::default();
        if what != What::Files && (from.head != to.head || from.branch != to.branch) {
            g.head = Some((to.head.clone(), to.branch.clone()));
        }
        if what != What::Files {
            for b in from.branches.keys().chain(to.branches.keys()) {
                let f = from.branches.get(b).cloned().flatten();
                let t = to.branches.get(b).cloned().flatten();
                if f != t {
                    g.branches.insert(b.clone(), t);
                    g.expect.insert(b.clone(), f);
                }
            }
        }
        if what != What::Refs && from.ws != to.ws {
            g.ws = Some(to.ws.clone());
        }
        g
    }
}

/// The fork: a second live session, which checks out and checkpoints but never
/// writes.
#[derive(Debug, Clone)]
pub(super) struct Other {
    pub head: Option<String>,
    pub branch: Option<String>,
    /// Its files (those of the checkpoint it last checked out).
    pub entries: Entries,
}

/// The model of a session (and of its fork, once made).
#[derive(Debug, Default)]
pub(super) struct Model {
    /// What each workspace root holds.
    pub trees: HashMap<String, Entries>,
    /// The root of each checkpoint.
    pub ckpt_root: HashMap<String, String>,
    /// Checkpoints in the order they were made.
    pub ckpts: Vec<String>,
    pub ws: String,
    pub base: String,
    pub head: Option<String>,
    pub branch: Option<String>,
    pub branches: BTreeMap<String, String>,
    /// Records, `log[seq - 1]`.
    pub log: Vec<Rec>,
    /// The undo stack (done operations) and the redo stack (undos).
    pub done: Vec<u64>,
    pub undone: Vec<u64>,
    pub other: Option<Other>,
}

/// What a model step predicts for a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Done; a record was appended.
    Recorded,
    /// Refused as `conflict`, nothing changed.
    Conflict,
    /// Refused as `not found`, nothing changed.
    NotFound,
}

impl Model {
    /// A new empty session whose workspace and base are `root`.
    pub(super) fn new(root: &str) -> Model {
        let mut m = Model {
            ws: root.into(),
            base: root.into(),
            ..Model::default()
        };
        m.trees.insert(root.into(), Entries::new());
        m
    }

    /// What the workspace holds.
    pub(super) fn files(&self) -> BTreeMap<String, Vec<u8>> {
        self.trees[&self.ws]
            .iter()
            .map(|(k, (_, v))| (k.clone(), v.clone()))
            .collect()
    }

    /// Whether the workspace differs from HEAD's tree in any file.
    pub(super) fn has_changes(&self) -> bool {
        self.trees[&self.ws] != self.trees[&self.base]
    }

    /// The workspace is now `root`, holding `entries` (after a write). A root
    /// seen before must hold the same.
    pub(super) fn learn_ws(&mut self, root: String, entries: Entries) {
        if let Some(known) = self.trees.get(&root) {
            assert_eq!(known, &entries, "root {root} seen before with other files");
        }
        self.trees.insert(root.clone(), entries);
        self.ws = root;
    }

    fn view(&self) -> View {
        View {
            head: self.head.clone(),
            branch: self.branch.clone(),
            ws: self.ws.clone(),
            branches: BTreeMap::new(),
        }
    }

    fn append(&mut self, before: View, after: View, undoes: Option<u64>, redoes: Option<u64>) {
        let seq = self.log.len() as u64 + 1;
        let inert = before == after && undoes.is_none() && redoes.is_none();
        self.log.push(Rec {
            before,
            after,
            undoes,
            redoes,
            inert,
        });
        if inert {
            return;
        }
        if let Some(t) = undoes {
            remove(&mut self.done, t);
            self.undone.push(seq);
        } else if let Some(u) = redoes {
            remove(&mut self.undone, u);
            self.done.push(seq);
        } else {
            self.done.push(seq);
            self.undone.clear();
        }
    }

    /// A new checkpoint `id` of the workspace, HEAD (and its branch) moving to it.
    fn advance(&mut self, id: &str) {
        self.ckpt_root.insert(id.into(), self.ws.clone());
        self.ckpts.push(id.into());
        self.head = Some(id.into());
        self.base = self.ws.clone();
        if let Some(b) = &self.branch {
            self.branches.insert(b.clone(), id.into());
        }
    }

    /// `checkpoint`, which made checkpoint `id`.
    pub(super) fn checkpoint(&mut self, id: &str) {
        let mut before = self.view();
        if let Some(b) = &self.branch {
            before
                .branches
                .insert(b.clone(), self.branches.get(b).cloned());
        }
        self.advance(id);
        let mut after = self.view();
        if let Some(b) = &self.branch {
            after.branches.insert(b.clone(), Some(id.into()));
        }
        self.append(before, after, None, None);
    }

    /// Whether `branch` makes a checkpoint of the workspace first.
    pub(super) fn branch_checkpoints(&self) -> bool {
        self.head.is_none() || self.has_changes()
    }

    /// `branch NAME` from HEAD; `fresh` names the checkpoint it made first (when
    /// [`Model::branch_checkpoints`]).
    pub(super) fn branch(&mut self, name: &str, fresh: Option<&str>) -> Outcome {
        if self.branches.contains_key(name) {
            return Outcome::Conflict;
        }
        let touched: Vec<String> = std::iter::once(name.to_string())
            .chain(self.branch.clone())
            .collect();
        let before = self.view_touching(&touched);
        if let Some(id) = fresh {
            self.advance(id);
        }
        let at = self.head.clone().expect("HEAD after a fresh checkpoint");
        self.branches.insert(name.into(), at);
        let after = self.view_touching(&touched);
        self.append(before, after, None, None);
        Outcome::Recorded
    }

    /// The workspace was grafted to `target` and the live tree now flushes to
    /// `live`: the target's files under the live inode counter (so not the
    /// target's id once the session allocated more inodes than it had).
    fn grafted(&mut self, target: &str, live: &str) {
        let entries = self.trees[target].clone();
        self.learn_ws(live.to_string(), entries);
    }

    /// `fork` from HEAD; `fresh` as for [`Model::branch`]. Records the branch
    /// HEAD is attached to as touched (the fresh checkpoint moves it).
    pub(super) fn fork(&mut self, fresh: Option<&str>) -> Outcome {
        if self.other.is_some() {
            return Outcome::Conflict;
        }
        let touched: Vec<String> = self.branch.iter().cloned().collect();
        let before = self.view_touching(&touched);
        if let Some(id) = fresh {
            self.advance(id);
        }
        let head = self.head.clone().expect("HEAD after a fresh checkpoint");
        self.other = Some(Other {
            entries: self.trees[&self.ckpt_root[&head]].clone(),
            head: Some(head),
            branch: None,
        });
        let after = self.view_touching(&touched);
        self.append(before, after, None, None);
        Outcome::Recorded
    }

    /// The view now, naming the values of the branches `touched`.
    fn view_touching(&self, touched: &[String]) -> View {
        let mut v = self.view();
        for b in touched {
            v.branches.insert(b.clone(), self.branches.get(b).cloned());
        }
        v
    }

    /// The branch the fork has checked out.
    fn held_by_other(&self) -> Option<&str> {
        self.other.as_ref().and_then(|o| o.branch.as_deref())
    }

    /// Whether `checkout NAME` in the main session attaches HEAD to `NAME`.
    pub(super) fn attaches(&self, name: &str) -> bool {
        self.held_by_other() != Some(name)
    }

    /// `checkout SESSION/NAME` in the fork (whose branch must exist): branch
    /// names are per session, so the fork's HEAD is detached at it (it is the
    /// main session's to move).
    pub(super) fn other_checkout(&mut self, name: &str) {
        let id = self.branches[name].clone();
        let attach = None;
        let entries = self.trees[&self.ckpt_root[&id]].clone();
        let o = self.other.as_mut().expect("forked");
        o.head = Some(id);
        o.branch = attach;
        o.entries = entries;
    }

    /// `checkpoint` in the fork, which made checkpoint `id` of tree `root`.
    pub(super) fn other_checkpoint(&mut self, id: &str, root: &str) {
        let o = self.other.as_mut().expect("forked");
        o.head = Some(id.into());
        let (entries, branch) = (o.entries.clone(), o.branch.clone());
        if let Some(known) = self.trees.get(root) {
            assert_eq!(known, &entries, "root {root} seen before with other files");
        }
        self.trees.insert(root.into(), entries);
        self.ckpt_root.insert(id.into(), root.into());
        self.ckpts.push(id.into());
        if let Some(b) = branch {
            self.branches.insert(b, id.into());
        }
    }

    /// `checkout` of checkpoint `id`, attaching HEAD to `attach`; the live tree
    /// flushes to `live` after it.
    pub(super) fn checkout(&mut self, id: &str, attach: Option<&str>, live: &str) {
        let before = self.view();
        let root = self.ckpt_root[id].clone();
        self.grafted(&root, live);
        self.base = root;
        self.head = Some(id.into());
        self.branch = attach.map(str::to_string);
        let after = self.view();
        self.append(before, after, None, None);
    }

    /// `undo` (`redo: false`) or `redo` of `what` (`live`: as for `checkout`).
    pub(super) fn step(&mut self, redo: bool, what: What, live: &str) -> Outcome {
        let target = if redo {
            self.undone.last()
        } else {
            self.done.last()
        };
        let Some(&seq) = target else {
            return Outcome::NotFound;
        };
        let r = &self.log[seq as usize - 1];
        let goal = Goal::revert(&r.after, &r.before, what);
        let (undoes, redoes) = if redo {
            (None, Some(seq))
        } else {
            (Some(seq), None)
        };
        self.apply(goal, undoes, redoes, live)
    }

    /// `op restore SEQ` of `what` (`live`: as for `checkout`).
    pub(super) fn op_restore(&mut self, seq: u64, what: What, live: &str) -> Outcome {
        let v = self.log[seq as usize - 1].after.clone();
        let mut goal = Goal::default();
        if what != What::Files {
            goal.head = Some((v.head.clone(), v.branch.clone()));
            goal.branches = v.branches.clone();
        }
        if what != What::Refs {
            goal.ws = Some(v.ws.clone());
        }
        // Each branch must still hold what the session's newest record touching
        // it left (absent when none did).
        for b in goal.branches.keys() {
            let left = self
                .log
                .iter()
                .rev()
                .find_map(|r| r.after.branches.get(b).cloned())
                .flatten();
            goal.expect.insert(b.clone(), left);
        }
        self.apply(goal, None, None, live)
    }

    fn apply(
        &mut self,
        goal: Goal,
        undoes: Option<u64>,
        redoes: Option<u64>,
        live: &str,
    ) -> Outcome {
        for (b, want) in &goal.branches {
            let cur = self.branches.get(b).cloned();
            let moved = goal.expect.get(b).is_some_and(|left| left != &cur);
            if &cur != want && (moved || self.held_by_other() == Some(b)) {
                return Outcome::Conflict;
            }
        }
        let mut before = self.view();
        let (head, mut branch) = goal
            .head
            .clone()
            .unwrap_or((self.head.clone(), self.branch.clone()));
        if let (Some(b), Some(h)) = (&branch, &head) {
            let names = match goal.branches.get(b) {
                Some(v) => v.clone(),
                None => self.branches.get(b).cloned(),
            };
            // Not attached where the branch no longer names HEAD, nor where the
            // fork has it checked out (as `checkout` would not).
            if names.as_ref() != Some(h) || self.held_by_other() == Some(b) {
                branch = None;
            }
        }
        if let (Some(h), Some(_)) = (&head, &goal.head) {
            self.base = self.ckpt_root[h].clone();
        }
        self.head = head;
        self.branch = branch;
        if let Some(ws) = &goal.ws {
            self.grafted(ws, live);
        }
        let mut after = self.view();
        for (b, v) in &goal.branches {
            before
                .branches
                .insert(b.clone(), self.branches.get(b).cloned());
            match v {
                Some(c) => self.branches.insert(b.clone(), c.clone()),
                None => self.branches.remove(b),
            };
            after.branches.insert(b.clone(), v.clone());
        }
        self.append(before, after, undoes, redoes);
        Outcome::Recorded
    }
}

fn remove(v: &mut Vec<u64>, x: u64) {
    if let Some(i) = v.iter().rposition(|&y| y == x) {
        v.remove(i);
    }
}
