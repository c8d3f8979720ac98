//! Failures: the one place an error becomes an exit status and, with `--json`, an
//! error document.
//!
//! Every error is classified by its **code**, never by its message: the protocol
//! code of a daemon refusal ([`DaemonError`], which `plumbing` raises and
//! re-exports), [`treefork::Error::code`] of a
//! library error, or the code of a [`Failure`] the CLI raises itself (`usage`,
//! `damaged`, ...). The first coded error in the chain, outermost first, decides;
//! an error with no code is `error`. [`status_of`] maps a code to the exit status
//! (the table in docs/protocol.md, "Exit statuses"); an [`Exit`] carries a status
//! of its own (a child's signal, the daemon's store-locked status) and overrides it.
//!
//! With `--json` a failure prints one document on stdout, the protocol's own error
//! response: `{"ok":false,"error":{"code":..,"message":..,...detail}}` (detail
//! fields such as `paths` of `BASELINE_CONFLICT` kept), whether the daemon or the
//! CLI answered. A failure of a result already printed as its document (`fsck`
//! finding damage: [`Reported`]) adds no second document.

use serde_json::{Value, json};

use super::Exit;

/// Success.
pub const OK: i32 = 0;
/// Any failure without a more specific status.
pub const FAILURE: i32 = 1;
/// The command line (or a value in it) is invalid: clap's usage errors and
/// `invalid` refusals.
pub const USAGE: i32 = 2;
/// `promote` refused: the durable repository drifted (`BASELINE_CONFLICT`).
pub const BASELINE_CONFLICT: i32 = 3;
/// A named thing does not exist (session, ref, store, workspace).
pub const NOT_FOUND: i32 = 4;
/// Conflicts with the current state, or busy / locked / shutting down / rate
/// limited: retrying later may succeed.
pub const CONFLICT: i32 = 5;
/// The caller's role does not allow the request.
pub const FORBIDDEN: i32 = 6;
/// The store is damaged (`fsck` found problems, or an object is corrupt or
/// missing).
pub const DAMAGED: i32 = 7;
/// A remote could not be used (unreachable, refused): retrying once it is back
/// may succeed.
pub const REMOTE: i32 = 8;
/// A push was refused as non-fast-forward (the remote ref moved or is not an
/// ancestor); pull first, or push `--force`.
pub const NON_FAST_FORWARD: i32 = 9;
/// A quota of the store (`treefork limits`) would be exceeded; nothing was
/// changed.
pub const QUOTA: i32 = 10;

/// A merge, cherry-pick or rebase stopped on conflicts (or `--continue` found
/// some unresolved): resolve them, then `--continue`.
pub const MERGE_CONFLICT: i32 = 11;

/// `bisect run`: the command already fails at the good end, so the range is
/// wrong (nothing in it can be the first bad one); choose another `--good`.
pub const GOOD_END_FAILS: i32 = 12;

/// stdout was closed by its reader (128 + SIGPIPE, what a shell tool killed by
/// the signal reports); nothing is printed.
pub const BROKEN_PIPE: i32 = 141;

/// Whether `e` is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit status of a failure with error code `code`.
pub fn status_of(code: &str) -> i32 {
    match code {
        "usage" | "invalid" => USAGE,
        "BASELINE_CONFLICT" => BASELINE_CONFLICT,
        "not_found" => NOT_FOUND,
        "conflict" | "busy" | "locked" | "shutting_down" | "rate_limited" => CONFLICT,
        "forbidden" => FORBIDDEN,
        "damaged" | "corrupt" | "missing_object" => DAMAGED,
        "remote" => REMOTE,
        "non_fast_forward" => NON_FAST_FORWARD,
        "quota" => QUOTA,
        "merge_conflict" => MERGE_CONFLICT,
        "good_end_fails" => GOOD_END_FAILS,
        _ => FAILURE,
    }
}

/// A failed call: the daemon's error code and message.
#[derive(Debug)]
pub struct DaemonError {
    /// The protocol's error code (`Error::code`), e.g. `shutting_down`.
    pub code: String,
    /// The daemon's message (what the user sees).
    pub message: String,
    /// The whole `error` object (code, message and any detail fields, e.g. the
    /// `paths` of `BASELINE_CONFLICT`).
    pub error: Value,
}

impl DaemonError {
    /// Whether the daemon answered with the code of `kind`.
    pub fn is(&self, kind: &treefork::Error) -> bool {
        self.code == kind.code()
    }
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DaemonError {}

/// An error the CLI raises itself, with a protocol-style code.
#[derive(Debug)]
pub struct Failure {
    /// The code (`usage`, `not_found`, `damaged`, ...).
    pub code: &'static str,
    /// What the user sees.
    pub message: String,
}

impl Failure {
    /// A failure with `code`, as an `anyhow` error.
    pub fn coded(code: &'static str, message: impl Into<String>) -> anyhow::Error {
        Failure {
            code,
            message: message.into(),
        }
        .into()
    }

    /// A usage error (exit [`USAGE`]).
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        Failure::coded("usage", message)
    }

    /// A named thing is missing (exit [`NOT_FOUND`]).
    pub fn not_found(message: impl Into<String>) -> anyhow::Error {
        Failure::coded("not_found", message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The failure of a result that was already printed (with `--json`, as its
/// document): the process still fails with the error's status, and no error
/// document follows. Displays as the error it carries.
#[derive(Debug)]
pub struct Reported(pub anyhow::Error);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Reported {}

/// A failure, classified.
pub struct Classified {
    /// The exit status.
    pub status: i32,
    /// The `error` object: `code`, `message` (the whole one-line message) and any
    /// detail fields.
    pub error: Value,
    /// Whether the result was already printed (no error document).
    pub reported: bool,
}

impl Classified {
    /// The `--json` error document.
    pub fn document(&self) -> Value {
        json!({"ok": false, "error": self.error})
    }
}

/// Classify `e`: its code, status, error object.
pub fn classify(e: &anyhow::Error) -> Classified {
    let mut inner = e;
    let mut status = None;
    let mut reported = false;
    loop {
        if let Some(x) = inner.downcast_ref::<Exit>() {
            status = status.or(Some(x.status));
            inner = &x.error;
        } else if let Some(r) = inner.downcast_ref::<Reported>() {
            reported = true;
            inner = &r.0;
        } else {
            break;
        }
    }
    let mut error = coded(inner).unwrap_or_else(|| json!({"code": "error"}));
    if let Some(o) = error.as_object_mut() {
        o.insert("message".into(), Value::String(format!("{e:#}")));
    }
    let code = error["code"].as_str().unwrap_or("error");
    Classified {
        status: status.unwrap_or_else(|| status_of(code)),
        error,
        reported,
    }
}

/// The error object of the first coded error in `e`'s chain, outermost first.
fn coded(e: &anyhow::Error) -> Option<Value> {
    e.chain().find_map(|c| {
        if let Some(d) = c.downcast_ref::<DaemonError>() {
            let mut v = d.error.clone();
            if !v.is_object() {
                v = json!({});
            }
            v["code"] = Value::String(d.code.clone());
            return Some(v);
        }
        if let Some(t) = c.downcast_ref::<treefork::Error>() {
            let mut v = json!({"code": t.code()});
            if let (Some(o), Some(d)) = (v.as_object_mut(), t.detail()) {
                o.extend(d);
            }
            return Some(v);
        }
        if let Some(f) = c.downcast_ref::<Failure>() {
            return Some(json!({"code": f.code}));
        }
        if c.downcast_ref::<clap::Error>().is_some() {
            return Some(json!({"code": "usage"}));
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn codes_map_to_distinct_statuses() {
        let mut seen = std::collections::BTreeMap::new();
        for (code, want) in [
            ("usage", USAGE),
            ("BASELINE_CONFLICT", BASELINE_CONFLICT),
            ("not_found", NOT_FOUND),
            ("conflict", CONFLICT),
            ("forbidden", FORBIDDEN),
            ("damaged", DAMAGED),
            ("remote", REMOTE),
            ("non_fast_forward", NON_FAST_FORWARD),
            ("quota", QUOTA),
            ("merge_conflict", MERGE_CONFLICT),
            ("good_end_fails", GOOD_END_FAILS),
            ("io", FAILURE),
        ] {
            assert_eq!(status_of(code), want, "{code}");
            assert!(seen.insert(want, code).is_none(), "{code} shares {want}");
        }
        assert_eq!(status_of("invalid"), USAGE);
        assert_eq!(status_of("busy"), CONFLICT);
        assert_eq!(status_of("locked"), CONFLICT);
        assert_eq!(status_of("corrupt"), DAMAGED);
        assert_eq!(status_of("something new"), FAILURE);
    }

    #[test]
    fn library_errors_keep_code_and_detail_under_context() {
        let drift = treefork::Error::BaselineConflict {
            paths: vec![treefork::error::DriftedPath {
                path: "a".into(),
                how: treefork::error::Drift::Staged,
            }],
        };
        let e = Err::<(), _>(drift).context("promote").unwrap_err();
        let c = classify(&e);
        assert_eq!(c.status, BASELINE_CONFLICT);
        assert_eq!(c.error["code"], "BASELINE_CONFLICT");
        assert_eq!(c.error["paths"][0]["path"], "a");
        assert!(
            c.error["message"]
                .as_str()
                .unwrap()
                .starts_with("promote: ")
        );
        assert_eq!(c.document()["ok"], false);
    }

    #[test]
    fn daemon_errors_and_cli_failures_and_plain_errors() {
        let d: anyhow::Error = DaemonError {
            code: "forbidden".into(),
            message: "no".into(),
            error: json!({"code": "forbidden", "message": "no"}),
        }
        .into();
        let c = classify(&d);
        assert_eq!(
            (c.status, c.error["message"].as_str()),
            (FORBIDDEN, Some("no"))
        );
        let c = classify(&Failure::not_found("gone"));
        assert_eq!(
            (c.status, &c.error["code"]),
            (NOT_FOUND, &json!("not_found"))
        );
        let c = classify(&anyhow::anyhow!("plain"));
        assert_eq!((c.status, &c.error["code"]), (FAILURE, &json!("error")));
    }

    #[test]
    fn exit_overrides_and_reported_suppresses() {
        let e: anyhow::Error = Exit {
            status: 75,
            error: treefork::Error::Conflict("held".into()).into(),
        }
        .into();
        let c = classify(&e);
        assert_eq!((c.status, &c.error["code"]), (75, &json!("conflict")));
        assert!(!c.reported);
        let e: anyhow::Error = Reported(Failure::coded("damaged", "2 problems")).into();
        let c = classify(&e);
        assert_eq!((c.status, c.reported), (DAMAGED, true));
        assert_eq!(c.error["message"], "2 problems");
    }
}
