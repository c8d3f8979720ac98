//! `exec_begin` and `exec_output`: saving the before state, starting the writer
//! watch, and collecting the captured output.

use super::MAX_CAPTURE;
use super::answers::{Begun, OutputTaken};
use super::slot::{self, Running};
use crate::error::{Error, Result};
use crate::oplog::Actor;
use crate::ops::{Target, record, syncfs};
use crate::session::relock;

/// Most arguments recorded.
pub const MAX_ARGS: usize = 4096;
/// Longest recorded working directory.
pub const MAX_CWD: usize = 4096;

fn check(argv: &[String], cwd: &str) -> Result<()> {
    if argv.is_empty() {
        return Err(Error::Invalid("exec_begin needs a command (argv)".into()));
    }
    if argv.len() > MAX_ARGS {
        return Err(Error::Invalid(format!(
            "exec_begin: {} arguments (at most {MAX_ARGS})",
            argv.len()
        )));
    }
    if cwd.len() > MAX_CWD || cwd.contains('\0') || cwd.starts_with('/') {
        return Err(Error::Invalid(
            "exec_begin: cwd must be a path relative to the workspace root".into(),
        ));
    }
    Ok(())
}

/// Begin recording exec N of `argv` in `cwd` (relative to the workspace root) for
/// `actor`, who explains it with `explanation`: finalize a stale running exec, save
/// pending changes (the before checkpoint), start the watch. Refused (busy) while
/// another exec or an agent runtime's tool call is recorded: its record will hold
/// this command's changes (`treefork exec` then runs the command unrecorded).
pub(crate) fn begin(
    t: &Target,
    actor: &Actor,
    argv: Vec<String>,
    cwd: String,
    explanation: Option<String>,
) -> Result<Begun> {
    check(&argv, &cwd)?;
    clear_stale(t)?;
    start(t, actor, argv, cwd, explanation, None)
}

/// Refuse while a live exec runs; finalize one whose client is gone.
pub(super) fn clear_stale(t: &Target) -> Result<()> {
    let s = &t.session;
    let stale = slot::with(s, |sl| match &sl.running {
        Some(r) if r.client_alive() => Err(match &r.group {
            Some(g) => format!(
                "{} is being recorded as exec {} in this session; its record holds what this command changes",
                g.title(),
                r.n
            ),
            None => format!(
                "exec {} is still running in this session (one recorded command at a time); wait for it or run this one without `treefork exec`",
                r.n
            ),
        }),
        _ => Ok(sl.running.take()),
    });
    match stale {
        Err(msg) => Err(Error::Busy(msg)),
        Ok(Some(r)) => {
            let why = match &r.group {
                Some(g) => g.abandoned_why(),
                None => format!(
                    "abandoned: its client (pid {}) ended before it reported the command's end",
                    r.actor.pid.unwrap_or(0)
                ),
            };
            if let Err(e) = super::end::finish(t, r, super::end::Ending::abandoned(why)) {
                ::log::error!("session {}: finalizing an abandoned exec: {e}", s.name());
            }
            Ok(())
        }
        Ok(None) => Ok(()),
    }
}

/// Save the before state of a new exec (a checkpoint when anything is pending),
/// start the watch and make it the session's running exec.
pub(super) fn start(
    t: &Target,
    actor: &Actor,
    argv: Vec<String>,
    cwd: String,
    explanation: Option<String>,
    group: Option<super::calls::Group>,
) -> Result<Begun> {
    let s = &t.session;
    let n = slot::next_number(s)?;
    syncfs(&t.mount)?;
    // A tool call's writers descend from the runtime, not from the hook that
    // reported it.
    let root = group.as_ref().and_then(|g| g.client_pid()).or(actor.pid);
    let roots: Vec<u32> = root.into_iter().collect();
    let gate = relock(s.gate.write());
    let saved = (|| -> Result<(String, crate::id::NodeId, crate::oplog::View)> {
        let rec = s.record();
        let (ckpt, root) = match &rec.head {
            Some(h) if !s.has_changes()? => (h.to_hex(), s.base_root()),
            _ => {
                // Recorded as a checkpoint of the exec's caller, in its own batch
                // (the exec's record follows when it ends).
                let msg = format!("before exec {n}");
                let call = crate::ops::Call {
                    actor,
                    explanation: None,
                    request: serde_json::json!({
                        "op": "checkpoint", "trigger": "before-exec", "message": msg,
                    }),
                };
                let (c, _) = crate::ops::checkpoint::take(
                    s,
                    &call,
                    &crate::ops::checkpoint::Taking::new(&msg, "before-exec"),
                )?;
                (c.id.to_hex(), c.root)
            }
        };
        let mut before = record::view_of(&s.record(), root);
        if let Some(br) = before.branch.clone() {
            record::touch(&mut before, &**s.store(), &br)?;
        }
        Ok((ckpt, root, before))
    })();
    if saved.is_ok() {
        s.watch.start(roots);
    }
    drop(gate);
    let (before_ckpt, before_root, before) = saved?;
    let client_start = actor.pid.and_then(slot::start_time);
    let running = Running {
        n,
        argv,
        cwd,
        explanation,
        actor: actor.clone(),
        client_start,
        started: std::time::Instant::now(),
        before_ckpt: before_ckpt.clone(),
        before_root,
        before,
        out: [Vec::new(), Vec::new()],
        cut: [false, false],
        group,
    };
    slot::with(s, |sl| sl.running = Some(running));
    Ok(Begun {
        exec: n,
        before: before_ckpt,
    })
}

/// Append a chunk of captured output to running exec `n` (the daemon keeps at
/// most [`MAX_CAPTURE`] bytes of each stream).
pub(crate) fn output(t: &Target, n: u64, stream: &str, data: &str) -> Result<OutputTaken> {
    let i = match stream {
        "stdout" => 0,
        "stderr" => 1,
        other => {
            return Err(Error::Invalid(format!(
                "exec_output: stream must be stdout or stderr, not {other:?}"
            )));
        }
    };
    let bytes = crate::control::b64_decode(data)
        .ok_or_else(|| Error::Invalid("exec_output: data is not base64".into()))?;
    slot::with(&t.session, |sl| match sl.running.as_mut() {
        Some(r) if r.n == n => {
            let room = MAX_CAPTURE.saturating_sub(r.out[i].len());
            if bytes.len() > room {
                r.cut[i] = true;
            }
            r.out[i].extend_from_slice(&bytes[..bytes.len().min(room)]);
            Ok(OutputTaken {
                exec: n,
                bytes: r.out[i].len() as u64,
            })
        }
        _ => Err(slot::not_running(n)),
    })
}
