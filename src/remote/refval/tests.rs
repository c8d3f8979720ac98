use super::*;
use proptest::prelude::*;
use serde_json::json;

fn hx(b: u8) -> String {
    crate::id::hex(&[b; 32])
}

fn session_json() -> Value {
    json!({
        "version": 1, "kind": "session", "session": "s1",
        "record": {"version": 1, "name": "s1", "root": hx(1), "base": hx(1),
                   "created": 1, "updated": 2, "head": hx(2), "branch": "team/main"},
        "info": null, "conversation": {"visible": true},
        "logs": [hx(3), hx(4)], "op_seq": 5, "message_seq": 2, "transcript_seq": 0,
        "time": 10
    })
}

#[test]
fn branch_and_session_round_trip() {
    let b = RefValue::Branch(BranchRef::new(&crate::id::CheckpointId([7; 32]), 42));
    assert_eq!(decode(&encode(&b)).unwrap(), b);
    assert_eq!(b.checkpoint(), Some(hx(7).as_str()));
    let s = decode(&serde_json::to_vec(&session_json()).unwrap()).unwrap();
    let RefValue::Session(ref sr) = s else {
        panic!()
    };
    assert_eq!(sr.logs.len(), 2);
    assert_eq!(s.checkpoint(), Some(hx(2).as_str()));
    assert_eq!(sr.session_record().unwrap().root.to_hex(), hx(1));
    assert_eq!(decode(&encode(&s)).unwrap(), s);
}

/// Each hostile or malformed field is refused as Corrupt.
#[test]
fn bad_values_are_refused() {
    let mut cases: Vec<Value> = vec![
        json!({"version": 2, "kind": "branch", "checkpoint": hx(1), "time": 1}),
        json!({"version": 1, "kind": "tag", "checkpoint": hx(1), "time": 1}),
        json!({"version": 1, "kind": "branch", "checkpoint": hx(0xab).to_uppercase(), "time": 1}),
        json!({"version": 1, "kind": "branch", "checkpoint": "abc", "time": 1}),
        json!({"version": 1, "kind": "branch", "time": 1}),
        json!([1, 2]),
    ];
    let edits: Vec<(&str, Value)> = vec![
        ("session", json!("../etc")),
        ("session", json!("")),
        ("logs", json!(["zz"])),
        ("record", json!("x")),
        ("info", json!(3)),
    ];
    for (k, v) in edits {
        let mut s = session_json();
        s[k] = v;
        cases.push(s);
    }
    for (k, v) in [
        ("root", json!("nope")),
        ("base", json!(null)),
        ("head", json!(5)),
        ("branch", json!("a b")),
    ] {
        let mut s = session_json();
        s["record"][k] = v;
        cases.push(s);
    }
    for c in cases {
        let r = decode(&serde_json::to_vec(&c).unwrap());
        assert!(matches!(r, Err(Error::Corrupt { .. })), "{c}: {r:?}");
    }
    assert!(decode(b"not json").is_err());
}

#[test]
fn gc_objects_and_descriptor() {
    let c = GcCondemned {
        version: 1,
        time: 5,
        packs: vec![hx(1)],
        logs: vec![hx(2)],
        checkpoints: vec![],
    };
    assert_eq!(GcCondemned::decode(&c.encode()).unwrap(), c);
    let mut bad = c.clone();
    bad.logs.push("x".into());
    assert!(GcCondemned::decode(&bad.encode()).is_err());
    let l = GcLock {
        owner: "tok".into(),
        pid: 3,
        host: "h".into(),
        started: 1,
        expires: 2,
    };
    assert_eq!(GcLock::decode(&l.encode()).unwrap(), l);
    let d = Descriptor::new(9);
    assert_eq!(Descriptor::decode(&d.encode()).unwrap(), d);
    let other = br#"{"format":"treefork-remote","version":2,"created":1}"#;
    assert!(matches!(Descriptor::decode(other), Err(Error::Invalid(_))));
    assert!(matches!(Descriptor::decode(b"{}"), Err(Error::Invalid(_))));
}

proptest! {
    #[test]
    fn decoders_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..200), s in ".{0,80}") {
        let _ = decode(&raw);
        let _ = decode(s.as_bytes());
        let _ = GcCondemned::decode(&raw);
        let _ = GcLock::decode(&raw);
        let _ = Descriptor::decode(&raw);
    }

    /// Whatever a session ref carries in its free-form fields, a value that decodes
    /// re-encodes to an equal value.
    #[test]
    fn session_round_trip(op in any::<u64>(), t in any::<i64>(), logs in proptest::collection::vec(any::<[u8; 32]>(), 0..4)) {
        let mut s = session_json();
        s["op_seq"] = json!(op);
        s["time"] = json!(t);
        s["logs"] = json!(logs.iter().map(|l| crate::id::hex(l)).collect::<Vec<_>>());
        let v = decode(&serde_json::to_vec(&s).unwrap()).unwrap();
        prop_assert_eq!(decode(&encode(&v)).unwrap(), v);
    }
}
