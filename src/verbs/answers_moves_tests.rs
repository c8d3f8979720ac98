//! The typed answers of the verbs that move the tree or a ref (checkout, restore,
//! undo/redo/op restore, the branch verbs, fork) pinned against the JSON they
//! answered before they were typed. Shared helpers are in `answers_tests`.

use serde_json::json;

use super::answers_tests::*;
use super::{OpRestore, Redo, Undo};
use crate::control::Verb;
use crate::diff::Change;
use crate::ops::views::{CheckpointView, Saved};

#[test]
fn checkout_answer() {
    let c = checkpoint(&["ef"]);
    let saved = Some((c.clone(), "auto/before-checkout-1".to_string()));
    let a = crate::ops::checkout::CheckedOut {
        checkpoint: CheckpointView::from(&c),
        branch: None,
        detached: true,
        saved: Saved::of(&saved),
        op: 7,
        notes: vec!["branch b is checked out in session s".into()],
    };
    // The old `json!` of `ops::checkout::run`.
    assert_eq!(
        wire(&a),
        json!({
            "checkpoint": old_ckpt_json(&c),
            "branch": None::<String>,
            "detached": true,
            "saved": {"checkpoint": c.id, "ref": "auto/before-checkout-1"},
            "op": Some(7),
            "notes": ["branch b is checked out in session s"],
        })
    );
    let a = crate::ops::checkout::CheckedOut {
        branch: Some("main".into()),
        detached: false,
        saved: None,
        notes: vec![],
        ..a
    };
    let v = wire(&a);
    assert_eq!(v["branch"], "main");
    assert!(
        v["saved"].is_null(),
        "null, not absent, without pending changes"
    );
    assert_eq!(v["notes"], json!([]));
}

#[test]
fn restore_answer_has_three_shapes() {
    use crate::ops::restore::Restored;
    let changes = vec![change("a", Change::Modified)];
    // A dry run: no `saved`, no `op`.
    let dry = Restored {
        dry_run: true,
        changes: changes.clone(),
        saved: None,
        op: None,
    };
    assert_eq!(
        wire(&dry),
        json!({"dry_run": true, "changes": [{"path": "a", "change": "modified"}]})
    );
    // Nothing to change: `saved: null`, no `op`.
    let nothing = Restored {
        dry_run: false,
        changes: vec![],
        saved: Some(None),
        op: None,
    };
    assert_eq!(
        wire(&nothing),
        json!({"dry_run": false, "changes": [], "saved": null})
    );
    // Restored: `saved` (null or not) and `op`.
    let c = checkpoint(&[]);
    let done = Restored {
        dry_run: false,
        changes,
        saved: Some(Saved::of(&Some((c.clone(), "auto/r".into())))),
        op: Some(3),
    };
    assert_eq!(
        wire(&done),
        json!({"dry_run": false, "changes": [{"path": "a", "change": "modified"}],
            "saved": {"checkpoint": c.id, "ref": "auto/r"}, "op": Some(3)})
    );
    let v = wire(&Restored {
        saved: Some(None),
        ..done
    });
    assert!(v["saved"].is_null() && v["op"] == 3);
}

#[test]
fn undo_answer() {
    let a = crate::ops::undo::Moved {
        op: 9,
        of: 8,
        summary: "undo of 8".into(),
        head: Some("ab".into()),
        branch: None,
        saved: None,
        notes: vec![],
    };
    assert_eq!(
        wire(&a),
        json!({"op": 9, "of": 8, "summary": "undo of 8", "head": "ab",
            "branch": null, "saved": null, "notes": []})
    );
    // One type for the three verbs.
    fn same<A: Verb<Response = crate::ops::undo::Moved>>() {}
    same::<Undo>();
    same::<Redo>();
    same::<OpRestore>();
}

#[test]
fn branch_answers() {
    use crate::ops::branch::{Deleted, Listed, Listing, Made, Renamed, Shared};
    let id = "ab".repeat(32);
    let made = Made {
        branch: "b".into(),
        checkpoint: id.clone(),
        op: 2,
    };
    assert_eq!(
        wire(&made),
        json!({"branch": "b", "checkpoint": id, "op": Some(2)})
    );
    let listed = Listed {
        branches: vec![
            Listing {
                name: "b".into(),
                checkpoint: id.clone(),
                created: 1_700_000_000,
                message: Some("m".into()),
                session: Some("s".into()),
                current: true,
                owner: Some("s".into()),
            },
            Listing {
                name: "gone".into(),
                checkpoint: "00".into(),
                created: 0,
                message: None,
                session: None,
                current: false,
                owner: None,
            },
        ],
    };
    assert_eq!(
        wire(&listed),
        json!({"branches": [
            {"name": "b", "checkpoint": id, "created": 1_700_000_000, "message": "m", "session": "s", "current": true, "owner": "s"},
            {"name": "gone", "checkpoint": "00", "created": 0, "message": null, "session": null, "current": false, "owner": null},
        ]})
    );
    let shared = Shared {
        branch: "b".into(),
        shared_with: "s2".into(),
    };
    assert_eq!(wire(&shared), json!({"branch": "b", "shared_with": "s2"}));
    let deleted = Deleted {
        deleted: "b".into(),
        op: None,
    };
    assert_eq!(wire(&deleted), json!({"deleted": "b", "op": null}));
    let deleted = Deleted {
        op: Some(4),
        ..deleted
    };
    assert_eq!(wire(&deleted), json!({"deleted": "b", "op": Some(4)}));
    let renamed = Renamed {
        renamed: "b".into(),
        to: "c".into(),
        checkpoint: id.clone(),
        op: 5,
    };
    assert_eq!(
        wire(&renamed),
        json!({"renamed": "b", "to": "c", "checkpoint": id, "op": Some(5)})
    );
}

#[test]
fn fork_answer_is_the_mount_answer_and_the_checkpoint() {
    let mut a = crate::ops::fork::Forked {
        mounted: crate::ops::views::Mounted {
            session: "f".into(),
            mountpoint: "/m/f".into(),
            agent_socket: None,
            skipped: None,
            untrusted_origin: None,
        },
        checkpoint: Some("ab".repeat(32)),
    };
    assert_eq!(
        wire(&a),
        json!({"session": "f", "mountpoint": "/m/f", "checkpoint": "ab".repeat(32)})
    );
    // A fork from a message written before the first checkpoint.
    a.checkpoint = None;
    a.mounted.agent_socket = Some("/m/f.agent".into());
    assert_eq!(
        wire(&a),
        json!({"session": "f", "mountpoint": "/m/f", "agent_socket": "/m/f.agent",
            "checkpoint": null})
    );
}
