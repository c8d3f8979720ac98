//! Fuzz targets of the records kept in the metadata store (checkpoints, refs, sessions,
//! operations, messages) and of every key parser.

use super::*;

/// First byte selects: checkpoint record, branch ref record.
pub(super) fn checkpoint_record(bytes: &[u8]) {
    use crate::refs::{Checkpoint, RefRecord};
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("checkpoint", b, |b| Checkpoint::decode("fuzz", b));
        if let Ok(c) = Checkpoint::decode("fuzz", b) {
            // What later code relies on once a record decoded.
            let _ = c.id_matches();
        }
    } else {
        json_round_trip("ref", b, |b| RefRecord::decode("fuzz", b));
    }
}

pub(super) fn checkpoint_record_seeds() -> Vec<Vec<u8>> {
    let hex = |b: u8| crate::id::hex(&[b; 32]);
    let v2 = serde_json::json!({
        "version": 2, "id": hex(1), "session": "s", "root": hex(2),
        "parents": [hex(3), hex(4)], "time_ns": 1_700_000_000_000_000_000i128,
        "message": "m", "trigger": "manual", "files_changed": 3,
        "meta": {"k": [1, "x", {"y": null}]}, "usage": {"bytes": 10, "inodes": 2},
    });
    let v1 = serde_json::json!({
        "version": 1, "id": hex(1), "session": "s", "root": hex(2), "parent": hex(3),
        "time_ns": 5, "message": "", "trigger": "auto", "files_changed": 0,
    });
    let refrec = serde_json::json!({"checkpoint": hex(1), "created": 7});
    [(0u8, v2), (0, v1), (1, refrec)]
        .into_iter()
        .map(|(b, v)| {
            let mut out = vec![b];
            out.extend_from_slice(&serde_json::to_vec(&v).unwrap());
            out
        })
        .collect()
}

/// First byte selects: session record, session info record.
pub(super) fn session_record(bytes: &[u8]) {
    use crate::lifecycle::SessionInfo;
    use crate::refs::session_record::SessionRecord;
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("session record", b, |b| SessionRecord::decode("fuzz", b));
        if let Ok(rec) = SessionRecord::decode("fuzz", b) {
            // A stopped merge's conflicts (`merge::stop`): decoded whole or
            // Corrupt; what decodes is stored and read back as itself.
            match crate::merge::stop::of(&rec) {
                Ok(None) => {}
                Ok(Some(s)) => {
                    let again = crate::merge::stop::decode("fuzz", &crate::merge::stop::encode(&s));
                    assert_eq!(again.ok().as_ref(), Some(&s), "stop round trip");
                }
                Err(crate::error::Error::Corrupt { .. }) => {}
                Err(e) => panic!("stop: not Corrupt: {e:?}"),
            }
        }
    } else {
        json_round_trip("session info", b, |b| SessionInfo::decode("fuzz", b));
    }
}

pub(super) fn session_record_seeds() -> Vec<Vec<u8>> {
    let hex = crate::id::hex(&[9; 32]);
    let rec = serde_json::json!({
        "version": 2, "name": "s", "root": hex, "base": hex, "created": 1, "updated": 2,
        "bytes": 3, "inodes": 4, "head": hex, "branch": "main",
        "config": {"auto_checkpoint_ops": 5, "auto_checkpoint_idle_secs": 0,
                   "last_checkpoint": 3},
        "meta": {"a": 1},
    });
    let stopped = serde_json::json!({
        "version": 2, "name": "s", "root": hex, "base": hex, "created": 1, "updated": 2,
        "head": hex,
        "merging": {"op": "merge", "theirs": "main", "theirs_id": hex, "before": hex,
                    "before_root": hex, "message": "merge main",
                    "conflicts": [{"path": "a", "kind": "content", "detail": "both"},
                                  {"path": "b", "kind": "binary", "theirs_at": "b~theirs",
                                   "detail": "binary"}]},
    });
    let info = crate::lifecycle::SessionInfo::decode(
        "s",
        br#"{"version":1,"id":"00ff","session":"s","created":1,"updated":2,"last_access":3}"#,
    )
    .expect("a minimal info record");
    vec![
        [vec![0], serde_json::to_vec(&rec).unwrap()].concat(),
        [vec![0], serde_json::to_vec(&stopped).unwrap()].concat(),
        [vec![1], serde_json::to_vec(&info).unwrap()].concat(),
    ]
}

/// First byte selects: operation record, message record.
pub(super) fn log_records(bytes: &[u8]) {
    use crate::messages::Message;
    use crate::oplog::Operation;
    let Some((&which, b)) = bytes.split_first() else {
        return;
    };
    if which % 2 == 0 {
        json_round_trip("operation", b, |b| Operation::decode("fuzz", b));
        if let Ok(op) = Operation::decode("fuzz", b) {
            let _ = op.checkpoints().count();
        }
    } else {
        round_trip(
            "message",
            b,
            |b| Message::decode("fuzz", b),
            Message::encode,
        );
        if let Ok(m) = Message::decode("fuzz", b) {
            let _ = m.json();
        }
    }
}

pub(super) fn log_records_seeds() -> Vec<Vec<u8>> {
    let hex = crate::id::hex(&[4; 32]);
    let op = serde_json::json!({
        "version": 1, "session": "s", "seq": 2, "parent": 1, "time_ns": "1700000000000000000",
        "actor": {"role": "agent", "uid": 65534, "pid": 7}, "kind": "checkpoint",
        "request": {"op": "checkpoint"}, "explanation": "e",
        "before": {"head": null, "workspace": hex},
        "after": {"head": hex, "branch": "main", "workspace": hex,
                  "branches": {"main": hex, "gone": null}},
        "undoes": 1,
    });
    let msg = serde_json::json!({
        "version": 1, "id": "u-1", "seq": 1, "time_ns": "1700000000000000000",
        "role": "assistant", "content": {"text": "hi"}, "tool_calls": [{"id": "t"}],
        "meta": {"k": 1}, "op": 2, "checkpoint": hex, "workspace": hex,
    });
    vec![
        [vec![0], serde_json::to_vec(&op).unwrap()].concat(),
        [vec![1], serde_json::to_vec(&msg).unwrap()].concat(),
    ]
}

/// Metadata keys: every parser of a key's parts rebuilds the same key.
pub(super) fn meta_keys(k: &[u8]) {
    use crate::meta::keys::*;
    let parsed = op_parts(k).is_some()
        || attach_parts(k).is_some()
        || message_parts(k).is_some()
        || tracking_parts(k).is_some()
        || object_id(k).is_some()
        || checkpoint_id(k).is_some()
        || session_name(k).is_some()
        || ref_name(k).is_some()
        || lost_original(k).is_some()
        || touched_path(k).is_some()
        || bisect_parts(k).is_some();
    if parsed {
        accepted();
    }
    if let Some((s, n)) = op_parts(k) {
        assert_eq!(op_key(s, n), k);
    }
    if let Some((s, n, t)) = attach_parts(k) {
        assert_eq!(attach_key(s, n, t), k);
    }
    if let Some((s, t, n)) = message_parts(k) {
        assert_eq!(message_key(s, t, n), k);
    }
    if let Some((r, kind, n)) = tracking_parts(k) {
        assert_eq!(tracking_key(r, kind, n), k);
    }
    if let Some(id) = object_id(k) {
        assert_eq!(object_key(&id), k);
    }
    if let Some(id) = checkpoint_id(k) {
        assert_eq!(checkpoint_key(&id), k);
    }
    if let Some(n) = session_name(k) {
        assert_eq!(session_key(n), k);
    }
    if let Some(n) = ref_name(k) {
        assert_eq!(ref_key(n), k);
    }
    if let Some(n) = remote_name(k) {
        assert_eq!(remote_key(n), k);
    }
    if let Some(n) = info_session(k) {
        assert_eq!(info_key(n), k);
    }
    if let Some(p) = lost_original(k) {
        assert_eq!(lost_key(p), k);
    }
    if let Some((s, id)) = bisect_parts(k) {
        assert_eq!(bisect_key(s, id), k);
    }
    let _ = touched_path(k);
}

pub(super) fn meta_keys_seeds() -> Vec<Vec<u8>> {
    use crate::meta::keys::*;
    vec![
        op_key("s", 3),
        attach_key("s", 3, b'o'),
        message_key("s", b'm', 1),
        tracking_key("origin", TrackKind::Session, "a/b"),
        object_key(&crate::id::ObjectId([1; 32])),
        checkpoint_key(&crate::id::CheckpointId([2; 32])),
        session_key("s"),
        ref_key("main"),
        lost_key(b"o/xyz"),
        touched_key("s", b"dir/file"),
        bisect_key("s", "3fa2c1"),
    ]
}
