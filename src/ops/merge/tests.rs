//! `--continue` of a stop whose stored conflicts do not decode (on the in-memory
//! host, through the verb table).

use serde_json::Value;

use crate::error::{Error, Result};
use crate::ops::memhost::{self, MemHost};
use crate::verbs::{self, Op};

const SESSION: &str = "m";

fn serve(host: &MemHost, op: Op) -> Result<Value> {
    let actor = crate::oplog::Actor::peer("user", 0, 1);
    verbs::run(
        host,
        crate::control::MountFor::User,
        &actor,
        None,
        Some(SESSION),
        op,
        &mut |_| {},
    )
}

fn checkpoint(host: &MemHost) -> String {
    let a = serve(
        host,
        Op::Checkpoint(verbs::Checkpoint {
            message: "c".into(),
            trigger: "manual".into(),
            meta: serde_json::Map::new(),
        }),
    )
    .unwrap();
    a["checkpoint"]["id"].as_str().unwrap().to_string()
}

fn checkout(host: &MemHost, spec: &str) {
    serve(
        host,
        Op::Checkout(verbs::Checkout {
            target: Some(spec.into()),
            create: None,
        }),
    )
    .unwrap();
}

fn merge(host: &MemHost, target: Option<&str>, cont: bool, abort: bool) -> Result<Value> {
    serve(
        host,
        Op::Merge(verbs::Merge {
            target: target.map(str::to_string),
            also: Vec::new(),
            message: None,
            dry_run: false,
            cont,
            abort,
        }),
    )
}

/// A session stopped on a `content` conflict in `f` (markers in the file).
fn stopped() -> MemHost {
    let host = MemHost::new();
    let t = host.create(SESSION).unwrap();
    let s = t.session.clone();
    memhost::write_file(&s, "f", b"one\ntwo\nthree\n").unwrap();
    let base = checkpoint(&host);
    memhost::write_file(&s, "f", b"one\nOURS\nthree\n").unwrap();
    let ours = checkpoint(&host);
    checkout(&host, &base);
    memhost::write_file(&s, "f", b"one\nTHEIRS\nthree\n").unwrap();
    let theirs = checkpoint(&host);
    checkout(&host, &ours);
    let a = merge(&host, Some(&theirs), false, false).unwrap();
    assert_eq!(a["status"], "merge_conflict", "{a}");
    assert_eq!(a["conflicts"][0]["kind"], "content", "{a}");
    host
}

/// Before, a stored conflict that did not decode was dropped: `--continue`
/// found nothing unresolved and took the checkpoint with the markers left in
/// the file. It is `Error::Corrupt` naming the session and the key, and
/// nothing is committed; `--abort` (which reads no conflict) still goes back.
#[test]
fn continue_with_an_undecodable_conflict_is_corrupt() {
    let host = stopped();
    let t = crate::ops::Host::target(&host, Some(SESSION)).unwrap();
    // Unresolved: the markers are there.
    let a = merge(&host, None, true, false).unwrap();
    assert_eq!(a["status"], "merge_conflict", "{a}");
    // Damage the stored conflict.
    let mut tx = t.session.txn();
    tx.edit(&mut |rec| {
        let m = rec.merging.as_mut().expect("stopped");
        m.conflicts[0] = serde_json::json!({"path": "f", "kind": "no_such_kind"});
    });
    tx.try_commit(Vec::new()).unwrap();
    drop(tx);
    let head = t.session.record().head;
    match merge(&host, None, true, false) {
        Err(Error::Corrupt { what, reason }) => {
            assert!(what.contains("session m") && what.contains("s/m"), "{what}");
            assert!(reason.contains("conflict 0"), "{reason}");
        }
        other => panic!("--continue over a damaged stop: {other:?}"),
    }
    let rec = t.session.record();
    assert!(rec.merging.is_some(), "the stop stays");
    assert_eq!(rec.head, head, "no checkpoint taken");
    let a = merge(&host, None, false, true).unwrap();
    assert_eq!(a["status"], "aborted", "{a}");
    assert!(t.session.record().merging.is_none());
    assert_eq!(
        memhost::files(&t.session).unwrap()["f"],
        b"one\nOURS\nthree\n".to_vec()
    );
}
