//! The undo and redo stacks of a session, replayed from its operation log (a pure
//! function of the records, so it is property-tested alone).
//!
//! Semantics (an editor's undo, over whole views):
//! - every operation that is not inert and not an undo or redo is *done*: it goes
//!   on the undo stack and clears the redo stack;
//! - `undo` takes the top of the undo stack, T, returns to T's `before` view, and
//!   puts itself (the undo U) on the redo stack;
//! - `redo` takes the top of the redo stack, U, returns to U's `before` view (where
//!   the session was when U ran, pending changes included: an undo is undone
//!   exactly), and puts T back on the undo stack;
//! - inert operations (notes, operations that changed nothing) touch neither.
//!
//! Repeated undos walk back one operation at a time. Records older than the
//! retained log are not on either stack.

use super::Operation;

/// The stacks after replaying a log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stacks {
    /// Done operations, oldest first (undo takes the last).
    pub done: Vec<u64>,
    /// Undo operations that a redo would revert, oldest first (redo takes the last).
    pub undone: Vec<u64>,
}

/// A record as the replay needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Sequence number.
    pub seq: u64,
    /// For an undo: what it undid.
    pub undoes: Option<u64>,
    /// For a redo: the undo it reverted.
    pub redoes: Option<u64>,
    /// Skipped.
    pub inert: bool,
}

impl From<&Operation> for Step {
    fn from(o: &Operation) -> Step {
        Step {
            seq: o.seq,
            undoes: o.undoes,
            redoes: o.redoes,
            inert: o.inert,
        }
    }
}

impl Stacks {
    /// Replay `steps`, oldest first. Records that do not fit (an undo of something
    /// not on top, from a log trimmed by retention) are applied as well as they can
    /// be: the named entry is removed wherever it is.
    pub fn replay(steps: impl IntoIterator<Item = Step>) -> Stacks {
        Stacks::default().extend(steps)
    }

    /// Replay `steps` (newer than every step replayed so far) onto these stacks.
    pub fn extend(mut self, steps: impl IntoIterator<Item = Step>) -> Stacks {
        let s = &mut self;
        for st in steps {
            if st.inert {
                continue;
            }
            if let Some(t) = st.undoes {
                remove(&mut s.done, t);
                s.undone.push(st.seq);
            } else if let Some(u) = st.redoes {
                remove(&mut s.undone, u);
                // The undone operation goes back on the undo stack; its number is
                // found by the caller from U's record, so the redo itself stands in
                // for it here: undoing it returns to the view before the redo.
                s.done.push(st.seq);
            } else {
                s.done.push(st.seq);
                s.undone.clear();
            }
        }
        self
    }

    /// What `undo` would undo.
    pub fn undo_target(&self) -> Option<u64> {
        self.done.last().copied()
    }

    /// The undo a `redo` would revert.
    pub fn redo_target(&self) -> Option<u64> {
        self.undone.last().copied()
    }
}

fn remove(v: &mut Vec<u64>, x: u64) {
    if let Some(i) = v.iter().rposition(|&y| y == x) {
        v.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn op(seq: u64) -> Step {
        Step {
            seq,
            undoes: None,
            redoes: None,
            inert: false,
        }
    }

    /// Drive the stacks like the daemon does: an undo or redo record names the
    /// current target.
    fn drive(actions: &[u8]) -> (Vec<Step>, Vec<Option<u64>>) {
        let mut log: Vec<Step> = Vec::new();
        let mut views = Vec::new();
        for (i, a) in actions.iter().enumerate() {
            let seq = i as u64 + 1;
            let s = Stacks::replay(log.iter().copied());
            let step = match a % 4 {
                0 | 1 => op(seq),
                2 => match s.undo_target() {
                    Some(t) => Step {
                        undoes: Some(t),
                        ..op(seq)
                    },
                    None => continue,
                },
                _ => match s.redo_target() {
                    Some(u) => Step {
                        redoes: Some(u),
                        ..op(seq)
                    },
                    None => continue,
                },
            };
            log.push(step);
            views.push(Stacks::replay(log.iter().copied()).undo_target());
        }
        (log, views)
    }

    #[test]
    fn undo_walks_back_and_redo_forward() {
        let log = vec![op(1), op(2), op(3)];
        let s = Stacks::replay(log.clone());
        assert_eq!(s.undo_target(), Some(3));
        assert_eq!(s.redo_target(), None);
        let log = [
            log,
            vec![Step {
                undoes: Some(3),
                ..op(4)
            }],
        ]
        .concat();
        let s = Stacks::replay(log.clone());
        assert_eq!(s.undo_target(), Some(2));
        assert_eq!(s.redo_target(), Some(4));
        let log = [
            log,
            vec![Step {
                undoes: Some(2),
                ..op(5)
            }],
        ]
        .concat();
        let s = Stacks::replay(log.clone());
        assert_eq!((s.undo_target(), s.redo_target()), (Some(1), Some(5)));
        // Redo reverts the newest undo first.
        let log = [
            log,
            vec![Step {
                redoes: Some(5),
                ..op(6)
            }],
        ]
        .concat();
        let s = Stacks::replay(log.clone());
        assert_eq!((s.undo_target(), s.redo_target()), (Some(6), Some(4)));
        // A new operation clears the redo stack.
        let log = [log, vec![op(7)]].concat();
        let s = Stacks::replay(log);
        assert_eq!((s.undo_target(), s.redo_target()), (Some(7), None));
    }

    #[test]
    fn inert_records_are_skipped() {
        let s = Stacks::replay([
            op(1),
            Step {
                inert: true,
                ..op(2)
            },
        ]);
        assert_eq!(s.undo_target(), Some(1));
    }

    proptest! {
        /// Undo and redo counts balance: after any sequence, the undo stack holds
        /// the done operations minus the undone ones plus the redone ones, and
        /// every undo/redo record named the top of its stack.
        #[test]
        fn stacks_stay_consistent(actions in proptest::collection::vec(any::<u8>(), 0..60)) {
            let (log, _) = drive(&actions);
            let s = Stacks::replay(log.iter().copied());
            let plain = log.iter().filter(|l| l.undoes.is_none() && l.redoes.is_none()).count();
            prop_assert!(s.done.len() <= log.len());
            prop_assert!(s.undone.len() <= log.len());
            // Every number on a stack is a record of the log of the right kind.
            for d in &s.done {
                let r = log.iter().find(|l| l.seq == *d).unwrap();
                prop_assert!(r.undoes.is_none());
            }
            for u in &s.undone {
                let r = log.iter().find(|l| l.seq == *u).unwrap();
                prop_assert!(r.undoes.is_some());
            }
            // Undo as often as possible empties the undo stack in as many steps.
            let mut more = log.clone();
            let mut n = 0;
            let mut next = log.len() as u64 + 1;
            while let Some(t) = Stacks::replay(more.iter().copied()).undo_target() {
                more.push(Step { undoes: Some(t), ..op(next) });
                next += 1;
                n += 1;
                prop_assert!(n <= plain + log.len());
            }
            prop_assert_eq!(n, s.done.len());
        }
    }
}
