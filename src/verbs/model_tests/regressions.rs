//! Named cases of the model test: a short history, and each defect the model
//! test found (what failed before the fix is in each test's doc).

use super::memhost;
use super::model::What;
use super::{
    OTHER, Run, SESSION, Step, branch_op, checkout_op, checkpoint_op, fork_op, run, undo_op,
};
use crate::ops::Host;

#[test]
fn checkout_grafts_and_invalidates() {
    let mut r = Run::new();
    r.apply(&Step::Write { file: 0 });
    r.apply(&Step::Checkpoint);
    r.apply(&Step::Branch { name: 0 });
    r.apply(&Step::Write { file: 1 });
    r.apply(&Step::Checkpoint);
    r.apply(&Step::CheckoutBranch { name: 0 });
    r.apply(&Step::Undo(What::All));
    r.apply(&Step::Redo(What::Files));
    r.apply(&Step::OpRestore {
        nth: 1,
        what: What::All,
    });
}

/// A checkout that changes nothing (the checkpoint the workspace already shows,
/// no pending changes) is inert, so `undo` undoes the operation before it. It
/// was recorded with the checkpoint's root as the workspace after it, while the
/// live tree (the same files under a larger inode counter) flushes to another
/// id: the record claimed a workspace change, and the next `undo` undid nothing
/// visible.
#[test]
fn regression_checkout_that_changes_nothing_is_inert() {
    let r = Run::new();
    let s = r.target().session;
    memhost::write_file(&s, "f0", b"zero").unwrap();
    let c1 = r.request(checkpoint_op()).unwrap()["checkpoint"]["id"].clone();
    memhost::write_file(&s, "f1", b"one").unwrap();
    r.request(checkpoint_op()).unwrap();
    let c1 = c1.as_str().unwrap();
    let first = r.request(checkout_op(c1)).unwrap()["op"].as_u64().unwrap();
    let again = r.request(checkout_op(c1)).unwrap()["op"].as_u64().unwrap();
    let store = r.host.store();
    let o = crate::oplog::get(&*store, SESSION, again).unwrap();
    assert!(o.inert, "a checkout that changed nothing: {o:?}");
    let undo = r.request(undo_op(What::All)).unwrap();
    assert_eq!(undo["of"].as_u64(), Some(first), "undo after it: {undo}");
}

/// A fork with pending changes checkpoints them first, which moves the branch
/// HEAD is attached to; the fork's record says so, and `undo` moves the branch
/// back with HEAD still attached. The record left the branch out: undo moved
/// HEAD back alone, found the branch no longer naming it and detached HEAD,
/// leaving the branch at the checkpoint.
#[test]
fn regression_undo_of_a_fork_moves_the_attached_branch_back() {
    let r = Run::new();
    let s = r.target().session;
    memhost::write_file(&s, "f0", b"zero").unwrap();
    r.request(branch_op("b0")).unwrap();
    r.request(checkout_op("b0")).unwrap();
    let at = crate::refs::get_ref(&*r.host.store(), "m:b0")
        .unwrap()
        .unwrap();
    memhost::write_file(&s, "f0", b"pending").unwrap();
    r.request(fork_op(OTHER)).unwrap();
    r.request(undo_op(What::All)).unwrap();
    let rec = s.record();
    let now = crate::refs::get_ref(&*r.host.store(), "m:b0")
        .unwrap()
        .unwrap();
    assert_eq!(rec.branch.as_deref(), Some("m:b0"), "HEAD stays attached");
    assert_eq!(now.checkpoint, at.checkpoint, "b0 is back where it was");
    assert_eq!(rec.head, Some(at.checkpoint));
}

/// `undo` that returns HEAD to a branch the fork has checked out since leaves
/// HEAD detached (as `checkout` does): it attached it, so both sessions had the
/// branch checked out and each one's checkpoints moved it under the other.
#[test]
fn regression_undo_does_not_attach_a_branch_checked_out_elsewhere() {
    run(&[
        Step::Branch { name: 1 },
        Step::Write { file: 0 },
        Step::CheckoutBranch { name: 1 },
        Step::Fork,
        Step::CheckoutCheckpoint { nth: 0 },
        Step::OtherCheckout { name: 1 },
        Step::Undo(What::All),
    ]);
}

/// `revert HEAD` on an attached branch, then `undo` twice and `redo` twice: HEAD
/// stays attached and the branch follows it each time (issue 39). The revert's
/// record left out the branch its checkpoint moved: the first undo moved HEAD
/// back alone and detached it ("branch b0 no longer names ..."), and the second
/// was refused as if someone else had moved b0.
#[test]
fn regression_undo_of_a_revert_moves_the_attached_branch_back() {
    let r = Run::new();
    let s = r.target().session;
    let store = r.host.store();
    let at = |b: &str| {
        crate::refs::get_ref(&*store, b)
            .unwrap()
            .map(|r| r.checkpoint)
    };
    memhost::write_file(&s, "f0", b"zero").unwrap();
    r.request(checkpoint_op()).unwrap();
    r.request(branch_op("b0")).unwrap();
    r.request(checkout_op("b0")).unwrap();
    let one = s.record().head;
    memhost::write_file(&s, "f0", b"one").unwrap();
    r.request(checkpoint_op()).unwrap();
    let two = s.record().head;
    r.request(crate::verbs::Request::Revert(crate::verbs::Revert {
        target: Some("HEAD".into()),
        message: None,
        dry_run: false,
        cont: false,
        abort: false,
    }))
    .unwrap();
    let three = s.record().head;
    assert_ne!(three, two);
    // The session's own b0, by its stored name (`refs::names`).
    let b0 = crate::refs::names::owned(s.name(), "b0");
    let want = |head, what: &str| {
        let rec = s.record();
        assert_eq!(rec.branch.as_deref(), Some(&b0[..]), "{what}: attached");
        assert_eq!(rec.head, head, "{what}: HEAD");
        assert_eq!(at(&b0), head, "{what}: b0 follows HEAD");
    };
    r.request(undo_op(What::All)).unwrap();
    want(two, "undo of the revert");
    r.request(undo_op(What::All)).unwrap();
    want(one, "undo of the checkpoint");
    r.request(super::redo_op(What::All)).unwrap();
    want(two, "redo of the checkpoint");
    r.request(super::redo_op(What::All)).unwrap();
    want(three, "redo of the revert");
}
