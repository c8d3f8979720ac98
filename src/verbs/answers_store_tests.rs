//! The typed answers of the store-wide and remote verbs: each serializes to the
//! fields its verb has always answered (no more, no fewer), reads back, tolerates
//! a field a newer daemon adds, and has every field described in its schema.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::*;
use crate::control::Verb;

/// `r` as JSON has exactly the keys `want`; it reads back to the same JSON,
/// also with an unknown field added; its schema describes every key.
fn check<T: Serialize + DeserializeOwned + JsonSchema>(r: &T, want: &[&str]) -> Value {
    let v = serde_json::to_value(r).unwrap();
    let mut got: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = want.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "{v}");
    let back: T = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    let mut newer = v.clone();
    newer["a_field_from_a_newer_daemon"] = json!(1);
    let back: T = serde_json::from_value(newer).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), v);
    let schema = schemars::schema_for!(T).to_value();
    for k in &want {
        let p = &schema["properties"][k];
        assert!(p.is_object(), "{k} is not in the schema: {schema}");
        assert!(
            p["description"].is_string() || p["$ref"].is_string() || p["allOf"].is_array(),
            "{k} has no description: {p}"
        );
    }
    v
}

type R<V> = <V as Verb>::Response;

#[test]
fn ping_answers_pid_store_and_a_bound_socket_s_workspace() {
    let mut p = ping::Pong {
        pid: 7,
        store: "/s".into(),
        session: None,
        mountpoint: None,
        role: None,
    };
    check::<R<Ping>>(&p, &["pid", "store"]);
    p.session = Some("a".into());
    p.mountpoint = Some("/m".into());
    p.role = Some("agent".into());
    let v = check::<R<Ping>>(&p, &["pid", "store", "session", "mountpoint", "role"]);
    assert_eq!(v["mountpoint"], "/m");
}

#[test]
fn umount_shutdown_and_session_rm() {
    let u = umount::Unmounted {
        mountpoint: "/m".into(),
        daemon_exiting: true,
    };
    check::<R<Umount>>(&u, &["mountpoint", "daemon_exiting"]);
    // An older daemon did not say whether it exits.
    let old: R<Umount> = serde_json::from_value(json!({"mountpoint": "/m"})).unwrap();
    assert!(!old.daemon_exiting);
    assert_eq!(
        serde_json::to_value(shutdown::Stopping {}).unwrap(),
        json!({})
    );
    let mut r = session_rm::SessionRemoved {
        removed: "a".into(),
        forks_removed: vec![],
    };
    check::<R<SessionRm>>(&r, &["removed"]);
    r.forks_removed = vec!["a-x1-1".into()];
    check::<R<SessionRm>>(&r, &["removed", "forks_removed"]);
}

#[test]
fn mount_answers_optional_fields_only_when_there_are_some() {
    let mut m = mount::Mounted {
        session: "a".into(),
        mountpoint: "/m".into(),
        agent_socket: None,
        skipped: None,
        untrusted_origin: None,
    };
    check::<R<Mount>>(&m, &["session", "mountpoint"]);
    m.agent_socket = Some("/m.agent".into());
    m.skipped = Some(2);
    m.untrusted_origin = Some("/srv/repo".into());
    let all = [
        "session",
        "mountpoint",
        "agent_socket",
        "skipped",
        "untrusted_origin",
    ];
    assert_eq!(check::<R<Mount>>(&m, &all)["skipped"], 2);
}

#[test]
fn session_lifecycle_answers() {
    let e = session_extend::Extended {
        session: "a".into(),
        policy: crate::lifecycle::Policy::default(),
    };
    let v = check::<R<SessionExtend>>(&e, &["session", "policy"]);
    assert_eq!(v["policy"]["idle_ttl_secs"], 4 * 3600);
    let mut d = session_discard::Discarded {
        session: "a".into(),
        discarded: true,
        unmounted: None,
        forks_removed: vec![],
    };
    // `unmounted` is null, not absent, when the session was not mounted.
    let v = check::<R<SessionDiscard>>(&d, &["session", "discarded", "unmounted"]);
    assert!(v["unmounted"].is_null());
    d.unmounted = Some(PathBuf::from("/m"));
    check::<R<SessionDiscard>>(&d, &["session", "discarded", "unmounted"]);
    let s = session_sweep::Swept {
        evicted: vec![session_sweep::SweptEvicted {
            session: "a".into(),
            reason: "idle".into(),
            checkpoint: None,
        }],
        busy: vec![session_sweep::SweptBusy {
            session: "b".into(),
            reason: "idle".into(),
            blocked: "busy".into(),
        }],
        expired: vec![session_sweep::SweptExpired {
            session: "c".into(),
            reason: "idle".into(),
        }],
        forks_removed: vec![],
    };
    let v = check::<R<SessionSweep>>(&s, &["evicted", "busy", "expired"]);
    assert_eq!(
        v["evicted"][0],
        json!({"session": "a", "reason": "idle", "checkpoint": null})
    );
    assert_eq!(
        v["busy"][0],
        json!({"session": "b", "reason": "idle", "blocked": "busy"})
    );
    assert_eq!(v["expired"][0], json!({"session": "c", "reason": "idle"}));
}

#[test]
fn session_show_and_sessions_rows() {
    let info = crate::lifecycle::SessionInfo::new("a", None);
    let shown = crate::lifecycle::manage::SessionShown {
        info,
        touched: 3,
        mounted: false,
        mountpoint: None,
        transport: None,
        age: 1,
        idle: 1,
        expires: None,
        agent_socket: None,
        remote_only: None,
    };
    let keys = [
        "info",
        "touched",
        "mounted",
        "mountpoint",
        "transport",
        "age",
        "idle",
        "expires",
        "agent_socket",
    ];
    let v = check::<R<SessionShow>>(&shown, &keys);
    assert_eq!(v["info"]["state"], "active");
    let row = sessions::SessionRow {
        name: "a".into(),
        state: "stopped".into(),
        mountpoint: None,
        bytes: 10,
        inodes: 2,
        live_inodes: None,
        transport: None,
        updated: 5,
        root: "00".into(),
        parent: Some("p".into()),
        life: crate::lifecycle::manage::LifeColumns {
            lifecycle: crate::lifecycle::State::Active,
            task: None,
            age: 1,
            idle: 1,
            touched: 0,
            evict_blocked: None,
        },
    };
    let list = sessions::SessionList {
        sessions: vec![row.clone()],
    };
    check::<R<Sessions>>(&list, &["sessions"]);
    let row = serde_json::to_value(&row).unwrap();
    let mut got: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    got.sort_unstable();
    assert_eq!(
        got,
        [
            "age",
            "bytes",
            "evict_blocked",
            "idle",
            "inodes",
            "lifecycle",
            "live_inodes",
            "mountpoint",
            "name",
            "parent",
            "root",
            "state",
            "task",
            "touched",
            "transport",
            "updated"
        ]
    );
}

#[test]
fn limits_answer_every_limit_and_ignore_a_newer_daemon_s() {
    let l = crate::quota::LimitsShown {
        limits: crate::quota::Limits::default(),
        memory: Some(crate::quota::memory(&crate::store::MemStore::default(), 1)),
    };
    let v = check::<R<Limits>>(&l, &["limits", "memory"]);
    assert_eq!(v["limits"]["fork_depth"], 16);
    let mut newer = v.clone();
    newer["limits"]["a_newer_limit"] = json!(3);
    let back: R<Limits> = serde_json::from_value(newer).unwrap();
    assert_eq!(back.limits, crate::quota::Limits::default());
}

#[test]
fn gc_and_fsck_answers() {
    let c = gc::Collected {
        gc: crate::gc::GcReport::default(),
        operations_pruned: 1,
        discarded_removed: 2,
        auto_refs_dropped: 3,
    };
    let keys = [
        "gc",
        "operations_pruned",
        "discarded_removed",
        "auto_refs_dropped",
    ];
    let v = check::<R<Gc>>(&c, &keys);
    assert_eq!(v["gc"]["objects_reclaimed"], 0);
    let mut r = crate::fsck::FsckReport::default();
    assert!(fsck::Checked::new(r.clone()).clean);
    r.problems.push(crate::reach::Problem {
        owner: "session a".into(),
        path: "/f".into(),
        object: None,
        error: "gone".into(),
    });
    let v = check::<R<Fsck>>(&fsck::Checked::new(r), &["fsck", "clean"]);
    assert_eq!(v["clean"], false);
    assert_eq!(v["fsck"]["problems"][0]["owner"], "session a");
}

#[test]
fn remote_config_answers() {
    let cfg =
        crate::remote::RemoteConfig::new("origin", "s3://bkt/p", "http://127.0.0.1:9", None, false)
            .unwrap();
    let a = crate::remote::serve::remote_add::RemoteAdded {
        remote: cfg.clone(),
        conditional_writes: true,
        probe_failures: vec![],
        descriptor_created: true,
        updated: false,
    };
    let keys = [
        "remote",
        "conditional_writes",
        "probe_failures",
        "descriptor_created",
        "updated",
    ];
    let v = check::<R<RemoteAdd>>(&a, &keys);
    assert_eq!(v["remote"]["url"], "s3://bkt/p");
    let l = crate::remote::serve::remote_list::RemotesListed { remotes: vec![cfg] };
    check::<R<RemoteList>>(&l, &["remotes"]);
    let r = crate::remote::serve::remote_rm::RemoteRemoved {
        removed: "origin".into(),
        tracking_refs: 2,
    };
    check::<R<RemoteRm>>(&r, &["removed", "tracking_refs"]);
    let t = crate::remote::serve::remote_trust::Trusted {
        session: "a".into(),
        remote: Some("origin".into()),
        origin: None,
        policy: None,
    };
    // `origin` and `policy` are null, not absent, when the remote named none.
    let v = check::<R<RemoteTrust>>(&t, &["session", "remote", "origin", "policy"]);
    assert!(v["origin"].is_null() && v["policy"].is_null());
}

#[test]
fn remote_transfer_answers() {
    let p = crate::remote::push::PushReport {
        remote: "origin".into(),
        refs: vec![crate::remote::push::RefPushed {
            src: "main".into(),
            dst: "main".into(),
            kind: "branch".into(),
            old: None,
            new: Some("ab".into()),
            status: "created".into(),
        }],
        objects: 1,
        bytes: 2,
        packs: 1,
        checkpoints: 1,
        seconds: 0.5,
    };
    let keys = [
        "remote",
        "refs",
        "objects",
        "bytes",
        "packs",
        "checkpoints",
        "seconds",
    ];
    let v = check::<R<Push>>(&p, &keys);
    assert!(v["refs"][0]["old"].is_null());
    let p = crate::remote::pull::PullReport {
        remote: "origin".into(),
        refs: vec![],
        checkpoints: 1,
        nodes: 2,
        bytes: 3,
        seconds: 0.5,
    };
    let keys = ["remote", "refs", "checkpoints", "nodes", "bytes", "seconds"];
    check::<R<Pull>>(&p, &keys);
    let h = crate::remote::pull::hydrate::HydrateReport {
        session: "a".into(),
        remote: "origin".into(),
        objects: 1,
        bytes: 2,
        requests: 1,
        missing: 0,
        seconds: 0.5,
    };
    let keys = [
        "session", "remote", "objects", "bytes", "requests", "missing", "seconds",
    ];
    check::<R<Hydrate>>(&h, &keys);
}

#[test]
fn remote_gc_and_trim_answers() {
    let g = crate::remote::gc::GcReport::default();
    let v = check::<R<RemoteGc>>(
        &g,
        &[
            "remote",
            "dry_run",
            "phase",
            "refs",
            "packs_deleted",
            "bytes_deleted",
            "checkpoints_deleted",
            "logs_deleted",
            "orphans_deleted",
            "condemned",
            "condemned_bytes",
            "condemned_checkpoints",
            "condemned_logs",
            "resurrected",
            "wait_secs",
            "live_packs",
            "live_bytes",
            "dead_bytes_in_live_packs",
            "live_checkpoints",
            "live_objects",
            "unreadable",
            "nodes_read",
            "seconds",
        ],
    );
    assert_eq!(v["phase"], "");
    let t = crate::remote::trim::TrimReport::default();
    check::<R<StoreTrim>>(
        &t,
        &[
            "dry_run",
            "remotes",
            "objects",
            "bytes",
            "remote_verified",
            "not_on_remote",
            "kept_reachable",
            "sessions_kept",
            "packs_checked",
            "packs_failed",
            "packs_deleted",
            "packs_repacked",
            "store_before",
            "store_after",
            "seconds",
        ],
    );
}
