//! `--continue` of a stop whose stored conflicts do not decode (on the in-memory
//! host).

use super::start::{MergeRequest, cherry_pick};
use super::{MergeAnswer, Status};
use crate::error::{Error, Result};
use crate::merge::ConflictKind;
use crate::ops::Target;
use crate::ops::memhost::{self, MemHost};
use crate::ops::record::Call;

const SESSION: &str = "m";

/// `cherry-pick` of `target`, or its `--continue` / `--abort`.
fn pick(t: &Target, target: Option<&str>, cont: bool, abort: bool) -> Result<MergeAnswer> {
    let actor = crate::oplog::Actor::peer("user", 0, 1);
    let call = Call {
        actor: &actor,
        explanation: None,
        request: serde_json::json!({"op": "cherry_pick"}),
    };
    let req = MergeRequest {
        target: target.map(str::to_string),
        also: Vec::new(),
        message: None,
        dry_run: false,
        cont,
        abort,
    };
    cherry_pick(t, &call, &req)
}

/// A session stopped on a `content` conflict in `f` (markers in the file): a
/// cherry-pick of a change of line 2 onto pending changes of line 2.
fn stopped(host: &MemHost) -> Target {
    let t = host.create(SESSION).unwrap();
    let s = t.session.clone();
    memhost::write_file(&s, "f", b"one\ntwo\nthree\n").unwrap();
    s.checkpoint("base", "manual", None).unwrap();
    memhost::write_file(&s, "f", b"one\nTHEIRS\nthree\n").unwrap();
    let theirs = s.checkpoint("theirs", "manual", None).unwrap().id.to_hex();
    memhost::write_file(&s, "f", b"one\nOURS\nthree\n").unwrap();
    let a = pick(&t, Some(&theirs), false, false).unwrap();
    assert_eq!(a.status, Status::MergeConflict, "{a:?}");
    assert_eq!(a.conflicts[0].kind, ConflictKind::Content, "{a:?}");
    t
}

/// Before, a stored conflict that did not decode was dropped: `--continue`
/// found nothing unresolved and took the checkpoint with the markers left in
/// the file. It is `Error::Corrupt` naming the session and the key, and
/// nothing is committed; `--abort` (which reads no conflict) still goes back.
#[test]
fn continue_with_an_undecodable_conflict_is_corrupt() {
    let host = MemHost::new();
    let t = stopped(&host);
    // Unresolved: the markers are there.
    let a = pick(&t, None, true, false).unwrap();
    assert_eq!(a.status, Status::MergeConflict, "{a:?}");
    // Damage the stored conflict.
    let mut tx = t.session.txn();
    tx.edit(&mut |rec| {
        let m = rec.merging.as_mut().expect("stopped");
        m.conflicts[0] = serde_json::json!({"path": "f", "kind": "no_such_kind"});
    });
    tx.try_commit(Vec::new()).unwrap();
    drop(tx);
    let head = t.session.record().head;
    match pick(&t, None, true, false) {
        Err(Error::Corrupt { what, reason }) => {
            assert!(what.contains("session m") && what.contains("s/m"), "{what}");
            assert!(reason.contains("conflict 0"), "{reason}");
        }
        other => panic!("--continue over a damaged stop: {other:?}"),
    }
    let rec = t.session.record();
    assert!(rec.merging.is_some(), "the stop stays");
    assert_eq!(rec.head, head, "no checkpoint taken");
    let a = pick(&t, None, false, true).unwrap();
    assert_eq!(a.status, Status::Aborted, "{a:?}");
    assert!(t.session.record().merging.is_none());
    assert_eq!(
        memhost::files(&t.session).unwrap()["f"],
        b"one\nOURS\nthree\n".to_vec(),
        "the pending changes are back"
    );
}
