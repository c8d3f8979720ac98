//! Control protocol: versioned newline-delimited JSON over Unix sockets.
//!
//! Owns: [`protocol`] (ops, parsing, framing, versions), [`roles`] (roles, rate
//! bound, connection cap, who a mount is for), [`registry`] (runtime directory,
//! socket paths, mount records), [`client`] (the CLI's side) and `exec_report` (the
//! requests that report a command a client ran). Everything is
//! re-exported here, so callers write `control::Op`, `control::find_mount`, ...
//! See docs/protocol.md.

pub mod client;
pub mod protocol;
pub mod registry;
pub mod roles;

mod b64;
mod exec_report;
pub use b64::{b64_decode, b64_encode};
pub use client::Client;
pub use exec_report::{EXEC_CHUNK, exec_report};
pub use protocol::*;
pub use registry::*;
pub use roles::*;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::{Duration, Instant};

    #[test]
    fn round_trip() {
        let op = Op::Mount {
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
        };
        let line = encode_request(&op);
        assert_eq!(parse_request(line.trim_ascii_end()).unwrap(), op);
    }

    #[test]
    fn errors_are_precise() {
        let cases: [(&[u8], &str); 6] = [
            (b"{", "bad_request"),
            (br#"{"v":2,"op":"ping"}"#, "unsupported_version"),
            (br#"{"v":1,"op":"dance"}"#, "unknown_op"),
            (br#"{"op":"ping"}"#, "bad_request"),
            (br#"{"v":1,"op":"umount"}"#, "bad_request"),
            (br#"[1]"#, "bad_request"),
        ];
        for (line, code) in cases {
            let e = parse_request(line).unwrap_err();
            assert_eq!(e.code, code, "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(parse_request(br#"{"v":1,"op":"ping"}"#).unwrap(), Op::Ping);
    }

    #[test]
    fn old_clients_and_old_daemons_interoperate() {
        // An old client's mount (no agent fields) parses.
        let op = parse_request(br#"{"v":1,"op":"mount","session":"a","mountpoint":"/m"}"#).unwrap();
        assert!(matches!(
            op,
            Op::Mount {
                agent_socket: None,
                agent_uid: None,
                ..
            }
        ));
        // A new client without agent fields sends none (old daemons deny unknown fields).
        let line = encode_request(&op);
        assert!(!String::from_utf8_lossy(&line).contains("agent"));
        let op = parse_request(
            br#"{"v":1,"op":"fork","name":"f","mountpoint":"/m","agent_socket":"/a.sock","agent_uid":7}"#,
        )
        .unwrap();
        assert!(matches!(
            op,
            Op::Fork {
                agent_uid: Some(7),
                ..
            }
        ));
    }

    #[test]
    fn diff_stream_is_opt_in() {
        // Old clients (no `stream`) get the whole patch in the response.
        let op = parse_request(br#"{"v":1,"op":"diff","mode":"patch"}"#).unwrap();
        assert!(matches!(op, Op::Diff { stream: false, .. }));
        // Not streaming: the field is not sent (old daemons deny unknown fields).
        assert!(!String::from_utf8_lossy(&encode_request(&op)).contains("stream"));
        let op = parse_request(br#"{"v":1,"op":"diff","mode":"patch","stream":true}"#).unwrap();
        assert!(matches!(op, Op::Diff { stream: true, .. }));
        assert_eq!(
            parse_request(encode_request(&op).trim_ascii_end()).unwrap(),
            op
        );
    }

    #[test]
    fn roles() {
        let p = |s: &str| parse_request(s.as_bytes()).unwrap();
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
            assert!(Role::Agent.allows(&p(l)), "agent refused {l}");
            assert!(Role::User.allows(&p(l)), "user refused {l}");
        }
        for l in destructive {
            assert!(!Role::Agent.allows(&p(l)), "agent allowed {l}");
            assert!(Role::User.allows(&p(l)), "user refused {l}");
            let e = Role::Agent.refusal(&p(l));
            assert_eq!(e.code(), "forbidden");
            assert!(
                e.to_string().contains("not allowed on an agent socket"),
                "{e}"
            );
        }
        assert!(
            Role::Agent
                .refusal(&p(destructive[0]))
                .to_string()
                .starts_with("branch_delete is not allowed")
        );
    }

    #[test]
    fn rate_limit_bucket() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(3.0, 10.0);
        r.last = t0;
        assert!((0..3).all(|_| r.allow_at(t0)));
        assert!(!r.allow_at(t0));
        // 100 ms refills one token; never more than the burst.
        assert!(r.allow_at(t0 + Duration::from_millis(100)));
        assert!(!r.allow_at(t0 + Duration::from_millis(100)));
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| r.allow_at(later)).count(), 3);
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_request(&bytes);
        }

        #[test]
        fn parser_never_panics_on_jsonish(s in r#"\{"v":1,"op":"[a-z_]{0,8}"(,"[a-z]{1,10}":("[^"]{0,10}"|[0-9]{1,5}|null|\[\]))*\}"#) {
            let _ = parse_request(s.as_bytes());
        }
    }
}
