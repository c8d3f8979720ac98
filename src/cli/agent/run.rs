//! `treefork agent run claude|codex [ARGS]`: mount a session of the current
//! directory's tree (a new one from a copy of it, or the session left by an
//! earlier run), start the runtime in the mount with the session's agent socket
//! (`TREEFORK_SOCKET`: its hooks and treefork commands reach the session in the
//! agent role), and unmount when it exits.
//!
//! Invariants: the mount, and the unmount, go through this binary's own `mount`
//! and `umount` (one way to mount); the runtime gets SIGINT as in a terminal while
//! this process waits for it, so the unmount still runs; the exit status is the
//! runtime's.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use serde_json::{Value, json};

use super::super::prelude::*;
use super::entries;
use super::payload::Runtime;

/// Mount a session of this directory's tree and run an agent runtime in it
/// (Claude Code with treefork's hooks; Codex with those `agent install codex
/// --user` put in place); unmount at exit.
#[derive(clap::Args)]
pub struct AgentRun {
    /// The runtime.
    #[arg(value_enum)]
    runtime: Runtime,
    /// Session name [default: DIRNAME-RUNTIME]; an existing one is mounted as it
    /// was left.
    #[arg(long)]
    session: Option<String>,
    /// Where to mount [default: DIR.RUNTIME beside the directory].
    #[arg(long = "mount", value_name = "DIR")]
    mountpoint: Option<PathBuf>,
    /// Leave the workspace mounted when the runtime exits.
    #[arg(long)]
    keep_mounted: bool,
    /// Arguments for the runtime (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

/// `prog` on PATH, absolute: resolved here, before the runtime's chdir into the
/// workspace, and never through a relative PATH entry (that would run a file of
/// the agent's tree).
fn on_path(prog: &str) -> Result<PathBuf> {
    find_on(&std::env::var_os("PATH").unwrap_or_default(), prog)
}

/// `prog` in the absolute entries of the PATH value `path`.
fn find_on(path: &std::ffi::OsStr, prog: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(prog))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| anyhow!("{prog} is not on PATH (absolute entries only): install it first"))
}

impl AgentRun {
    /// This binary with the invocation's `--store`.
    fn tf(cx: &Ctx) -> Result<Command> {
        let mut c =
            Command::new(std::env::current_exe().context("cannot find the treefork binary")?);
        if let Some(s) = &cx.globals().store {
            c.arg("--store").arg(s);
        }
        c.env_remove("TREEFORK_SOCKET");
        Ok(c)
    }

    fn session_exists(cx: &Ctx, name: &str) -> Result<bool> {
        let o = Self::tf(cx)?.args(["--json", "sessions"]).output()?;
        if !o.status.success() {
            return Ok(false); // no store yet
        }
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        Ok(v["sessions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == name)))
    }

    /// The runtime's command: Claude Code gets treefork's hooks through
    /// `--settings` (nothing written); Codex reads its own installed hooks.
    fn runtime(&self, exe: &str) -> Result<Command> {
        match self.runtime {
            Runtime::Claude => {
                let cmd = entries::command(exe, Runtime::Claude, false);
                let mut doc = json!({});
                let mut es = entries::entries(Runtime::Claude);
                es.extend(entries::worktree_entries());
                let groups: Vec<_> = es
                    .into_iter()
                    .map(|e| {
                        let g = entries::group(&e, &cmd, None);
                        (e, g)
                    })
                    .collect();
                entries::merge(&mut doc, &groups).map_err(|e| anyhow!(e))?;
                let mut c = Command::new(on_path("claude")?);
                c.arg("--settings").arg(doc.to_string());
                Ok(c)
            }
            Runtime::Codex => {
                let home = match std::env::var_os("CODEX_HOME") {
                    Some(h) => PathBuf::from(h),
                    None => {
                        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".codex")
                    }
                };
                let hooks = std::fs::read_to_string(home.join("hooks.json")).unwrap_or_default();
                if !hooks.lines().any(|l| l.contains(" hook --runtime codex")) {
                    bail!(
                        "Codex has no treefork hooks in {}: run `treefork agent install codex --user` first",
                        home.join("hooks.json").display()
                    );
                }
                Ok(Command::new(on_path("codex")?))
            }
            Runtime::Gemini => {
                bail!("agent run takes claude or codex (for Gemini CLI: agent install gemini)")
            }
        }
    }
}

impl Run for AgentRun {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let here = std::env::current_dir()?.canonicalize()?;
        if treefork::control::find_mount(&here).is_some() {
            bail!(
                "{} is inside a treefork workspace already: run the runtime there directly (its hooks record to that session)",
                here.display()
            );
        }
        let base = here.file_name().and_then(|n| n.to_str()).unwrap_or("work");
        let rt = self.runtime.name();
        let session = match &self.session {
            Some(s) => s.clone(),
            None => super::safe_name(&format!("{base}-{rt}")),
        };
        let mp = match &self.mountpoint {
            Some(m) => std::path::absolute(m)?,
            None => here.with_file_name(format!("{base}.{rt}")),
        };
        std::fs::create_dir_all(&mp).with_context(|| format!("cannot create {}", mp.display()))?;
        let sock = treefork::control::runtime_dir()?.join(format!("agent-{session}.sock"));
        let exe = std::env::current_exe()?;
        let exe = exe
            .to_str()
            .ok_or_else(|| anyhow!("the treefork binary's path is not UTF-8"))?;
        let mut runtime = self.runtime(exe)?;
        let mut mount = Self::tf(cx)?;
        mount.arg("mount").arg(&mp).args(["--session", &session]);
        mount.arg("--agent-socket").arg(&sock);
        if !Self::session_exists(cx, &session)? {
            mount.arg("--from").arg(&here);
        }
        let st = mount.status().context("cannot run treefork mount")?;
        if !st.success() {
            bail!("treefork mount {} failed", mp.display());
        }
        eprintln!(
            "treefork: session {session} at {} ({rt} runs there)",
            mp.display()
        );
        runtime
            .args(&self.args)
            .current_dir(&mp)
            .env("TREEFORK_SOCKET", &sock);
        // SAFETY: between fork and exec only signal(2), async-signal-safe.
        unsafe {
            runtime.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
            libc::signal(libc::SIGINT, libc::SIG_IGN);
        }
        let status = runtime.status();
        // SAFETY: restoring the default disposition.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
        if !self.keep_mounted {
            let u = Self::tf(cx)?.arg("umount").arg(&mp).status();
            if !u.is_ok_and(|s| s.success()) {
                eprintln!(
                    "treefork: warning: {} is still mounted: `treefork umount {}`",
                    mp.display(),
                    mp.display()
                );
            }
        }
        let status = status.with_context(|| format!("cannot run {rt} (is it on PATH?)"))?;
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        if code != 0 {
            return Err(super::super::Exit {
                status: code,
                error: anyhow!("{rt} exited with status {code}"),
            }
            .into());
        }
        Ok(Outcome::Silent)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_relative_path_entry_is_never_searched() {
        let dir = tempfile::tempdir().unwrap();
        let sh = dir.path().join("sh");
        std::fs::write(&sh, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&sh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let abs = dir.path().as_os_str().to_owned();
        assert_eq!(super::find_on(&abs, "sh").unwrap(), sh);
        assert!(super::find_on(std::ffi::OsStr::new("./nowhere:."), "sh").is_err());
    }

    #[test]
    fn session_names_are_made_safe() {
        assert_eq!(super::super::safe_name("my repo-claude"), "my-repo-claude");
        assert_eq!(super::super::safe_name(".hidden-codex"), "hidden-codex");
    }
}
