//! The verb table's tests: wire round trips, old clients and daemons, role
//! rules, and the parser on hostile bytes.

use proptest::prelude::*;

use super::*;
use crate::control::{encode_request, parse_request};

fn p(line: &[u8]) -> Request {
    parse_request(line).unwrap()
}

#[test]
fn every_name_routes_to_its_verb() {
    for name in NAMES {
        let line = format!(r#"{{"v":1,"op":"{name}"}}"#);
        match parse_request::<Request>(line.as_bytes()) {
            Ok(op) => assert_eq!(op.name(), *name),
            // Missing required arguments: the verb was found.
            Err(e) => assert_eq!(e.code, "bad_request", "{name}: {}", e.message),
        }
    }
    let mut sorted = NAMES.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), NAMES.len(), "a name is in the table twice");
}

#[test]
fn schemas_are_objects() {
    for s in schemas() {
        assert_eq!(
            s.request.as_value()["type"],
            "object",
            "{}: request schema",
            s.name
        );
    }
}

#[test]
fn round_trip() {
    let op = Request::Mount(Mount {
        session: "a".into(),
        mountpoint: "/m".into(),
        from: None,
        agent_socket: None,
        agent_uid: None,
        task: None,
        ttl_idle: None,
        ttl_absolute: None,
        until_promote: None,
        manual: None,
        from_remote: None,
        evict_to: None,
        transport: None,
    });
    let line = encode_request(&op, None);
    assert_eq!(p(line.trim_ascii_end()), op);
}

#[test]
fn errors_are_precise() {
    let cases: [(&[u8], &str); 7] = [
        (b"{", "bad_request"),
        (br#"{"v":2,"op":"ping"}"#, "unsupported_version"),
        (br#"{"v":1,"op":"dance"}"#, "unknown_op"),
        (br#"{"op":"ping"}"#, "bad_request"),
        (br#"{"v":1,"op":"umount"}"#, "bad_request"),
        (br#"[1]"#, "bad_request"),
        (br#"{"v":1,"op":"ping","extra":1}"#, "bad_request"),
    ];
    for (line, code) in cases {
        let e = parse_request::<Request>(line).unwrap_err();
        assert_eq!(e.code, code, "{}", String::from_utf8_lossy(line));
    }
    assert_eq!(p(br#"{"v":1,"op":"ping"}"#), Request::Ping(Ping {}));
}

#[test]
fn old_clients_and_old_daemons_interoperate() {
    // An old client's mount (no agent fields) parses.
    let op = p(br#"{"v":1,"op":"mount","session":"a","mountpoint":"/m"}"#);
    assert!(matches!(
        op,
        Request::Mount(Mount {
            agent_socket: None,
            agent_uid: None,
            ..
        })
    ));
    // A new client without agent fields sends none (old daemons deny unknown fields).
    let line = encode_request(&op, None);
    assert!(!String::from_utf8_lossy(&line).contains("agent"));
    let op = p(
        br#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_socket":"/a.sock","agent_uid":7}"#,
    );
    assert!(matches!(
        op,
        Request::Fork(Fork {
            agent_uid: Some(7),
            ..
        })
    ));
}

#[test]
fn diff_stream_is_opt_in() {
    // Old clients (no `stream`) get the whole patch in the response.
    let op = p(br#"{"v":1,"op":"diff","mode":"patch"}"#);
    assert!(matches!(op, Request::Diff(Diff { stream: false, .. })));
    // Not streaming: the field is not sent (old daemons deny unknown fields).
    assert!(!String::from_utf8_lossy(&encode_request(&op, None)).contains("stream"));
    let op = p(br#"{"v":1,"op":"diff","mode":"patch","stream":true}"#);
    assert!(matches!(op, Request::Diff(Diff { stream: true, .. })));
    assert_eq!(p(encode_request(&op, None).trim_ascii_end()), op);
}

#[test]
fn roles() {
    let additive = [
        r#"{"v":1,"op":"ping"}"#,
        r#"{"v":1,"op":"checkpoint","message":"m"}"#,
        r#"{"v":1,"op":"log"}"#,
        r#"{"v":1,"op":"status"}"#,
        r#"{"v":1,"op":"diff","a":"HEAD~1"}"#,
        r#"{"v":1,"op":"diff","mode":"patch","stream":true}"#,
        r#"{"v":1,"op":"branch","name":"b"}"#,
        r#"{"v":1,"op":"branches"}"#,
        r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m"}"#,
        r#"{"v":1,"op":"checkout","ref":"HEAD~1"}"#,
        r#"{"v":1,"op":"restore","ref":"HEAD","paths":["a"]}"#,
        r#"{"v":1,"op":"config"}"#,
        r#"{"v":1,"op":"message_append","role":"user","content":"hi"}"#,
        r#"{"v":1,"op":"message_flush"}"#,
        r#"{"v":1,"op":"messages","limit":3}"#,
        r#"{"v":1,"op":"rewind","to":"x","what":"both"}"#,
        r#"{"v":1,"op":"session_meta_update","add_turns":1}"#,
        r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","from_message":"x"}"#,
    ];
    let destructive = [
        r#"{"v":1,"op":"branch_delete","name":"b"}"#,
        r#"{"v":1,"op":"umount","mountpoint":"/m"}"#,
        r#"{"v":1,"op":"mount","session":"s","mountpoint":"/m"}"#,
        r#"{"v":1,"op":"shutdown"}"#,
        r#"{"v":1,"op":"sessions"}"#,
        r#"{"v":1,"op":"config","set":{"auto_checkpoint_ops":1}}"#,
        r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_socket":"/a"}"#,
        r#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_uid":1}"#,
        r#"{"v":1,"op":"promote"}"#,
        r#"{"v":1,"op":"promote","strategy":"patch","dry_run":true}"#,
        r#"{"v":1,"op":"continue","project":"/p","name":"n","mountpoint":"/m"}"#,
    ];
    for l in additive {
        assert!(p(l.as_bytes()).allowed(Role::Agent), "agent refused {l}");
        assert!(p(l.as_bytes()).allowed(Role::User), "user refused {l}");
    }
    for l in destructive {
        assert!(!p(l.as_bytes()).allowed(Role::Agent), "agent allowed {l}");
        assert!(p(l.as_bytes()).allowed(Role::User), "user refused {l}");
        let e = p(l.as_bytes()).refusal();
        assert_eq!(e.code(), "forbidden");
        assert!(
            e.to_string().contains("not allowed on an agent socket"),
            "{e}"
        );
    }
    assert!(
        p(destructive[0].as_bytes())
            .refusal()
            .to_string()
            .starts_with("branch_delete is not allowed")
    );
}

#[test]
fn agent_constants_agree_with_the_rules() {
    use crate::control::Agent;
    // A verb an agent may never send refuses every request; one it may always
    // send allows the request with no arguments (where that parses).
    for s in schemas() {
        let line = format!(r#"{{"v":1,"op":"{}"}}"#, s.name);
        if let Ok(op) = parse_request::<Request>(line.as_bytes()) {
            match s.agent {
                Agent::No => assert!(!op.allowed(Role::Agent), "{}", s.name),
                Agent::Yes | Agent::Some => assert!(op.allowed(Role::Agent), "{}", s.name),
            }
        }
    }
}

proptest! {
    #[test]
    fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_request::<Request>(&bytes);
    }

    #[test]
    fn parser_never_panics_on_jsonish(s in r#"\{"v":1,"op":"[a-z_]{0,8}"(,"[a-z]{1,10}":("[^"]{0,10}"|[0-9]{1,5}|null|\[\]))*\}"#) {
        let _ = parse_request::<Request>(s.as_bytes());
    }
}
