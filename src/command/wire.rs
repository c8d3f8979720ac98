//! The experiment's run types, shared by the protocol (`crate::verbs::ExperimentBegin`, `ExperimentEnd`), the
//! daemon's experiment ops (`crate::ops::experiment`) and every client that runs
//! the commands (the CLI, the MCP server): what each run is ([`RunSpec`]) and what
//! it did ([`RunResult`]).
//!
//! The daemon never runs a command: it creates, records and removes the forks. The
//! CLI runs the commands (as the caller, in the forks) and reports each result, so
//! everything here that came from a client is checked ([`check_spec`],
//! [`check_result`]) before it is stored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest run label.
pub const MAX_LABEL: usize = 256;
/// Most bytes of captured output a result may carry per stream (the CLI caps what
/// it sends to this, and to what fits a request line).
pub const MAX_OUTPUT: usize = 64 << 10;
/// Most environment variables per run.
pub const MAX_ENV: usize = 64;

/// A run's command: an argument vector, or a string for `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RunCommand {
    /// Run directly.
    Argv(Vec<String>),
    /// Run by `sh -c`.
    Shell(String),
}

/// One run of an experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// What the run is called in tables (`1`, `K=A`, ...).
    #[serde(default)]
    pub label: String,
    /// What it runs.
    pub command: RunCommand,
    /// Environment variables set for it (over the caller's).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Most characters of a default label taken from a command.
const LABEL_CHARS: usize = 60;

/// Give every run without a label (empty) one, so that no two runs share a
/// label: its command (cut to 60 characters), else, when commands are alike, its
/// environment (`K=V K2=V2`), else ` (run N)` added. Given labels are kept; a
/// default one that collides with another label gets ` (run N)`.
pub fn label_runs(specs: &mut [RunSpec]) {
    let cut = |c: &RunCommand| {
        let text = match c {
            RunCommand::Shell(s) => s.clone(),
            RunCommand::Argv(v) => crate::command::shell::quoted(v),
        };
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > LABEL_CHARS {
            let head: String = one_line.chars().take(LABEL_CHARS - 1).collect();
            format!("{head}…")
        } else {
            one_line
        }
    };
    let given: Vec<bool> = specs.iter().map(|s| !s.label.is_empty()).collect();
    let commands: Vec<String> = specs.iter().map(|s| cut(&s.command)).collect();
    for i in 0..specs.len() {
        if given[i] {
            continue;
        }
        let alike = commands.iter().filter(|c| **c == commands[i]).count() > 1;
        specs[i].label = if alike && !specs[i].env.is_empty() {
            let kv: Vec<String> = specs[i]
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let kv = kv.join(" ");
            kv.chars().take(MAX_LABEL / 2).collect()
        } else {
            commands[i].clone()
        };
    }
    let before: Vec<String> = specs.iter().map(|s| s.label.clone()).collect();
    for i in 0..specs.len() {
        let dup = (0..before.len()).any(|j| j != i && before[j] == before[i]);
        if dup && !given[i] {
            specs[i].label = format!("{} (run {})", specs[i].label, i + 1);
        }
    }
}

/// What one run did (sent by the CLI with `experiment_end`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    /// Run number (from 1).
    pub run: u32,
    /// Exit code, when it exited.
    #[serde(default)]
    pub exit: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Why it could not start (then nothing else is meaningful).
    #[serde(default)]
    pub error: Option<String>,
    /// Killed by its timeout.
    #[serde(default)]
    pub timed_out: bool,
    /// Stopped because the experiment was interrupted.
    #[serde(default)]
    pub interrupted: bool,
    /// Wall time (ms).
    #[serde(default)]
    pub duration_ms: u64,
    /// Captured standard output (lossy UTF-8, at most [`MAX_OUTPUT`] bytes).
    #[serde(default)]
    pub stdout: String,
    /// Captured standard error (idem).
    #[serde(default)]
    pub stderr: String,
    /// Bytes the run wrote to standard output in all.
    #[serde(default)]
    pub stdout_len: u64,
    /// Bytes it wrote to standard error in all.
    #[serde(default)]
    pub stderr_len: u64,
    /// Whether `stdout` or `stderr` was cut.
    #[serde(default)]
    pub truncated: bool,
    /// The number `--score CMD` printed.
    #[serde(default)]
    pub score: Option<f64>,
    /// Why there is no score although one was asked for.
    #[serde(default)]
    pub score_error: Option<String>,
    /// What the score command wrote to standard output (lossy UTF-8, capped as
    /// `stdout`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub score_stdout: String,
    /// What it wrote to standard error (idem).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub score_stderr: String,
    /// The fork's state after the command and before the score command (a
    /// checkpoint of the fork, hex): the run's own changes are counted to it,
    /// what the score command wrote apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_checkpoint: Option<String>,
}

/// Check a run as requested: a label of at most [`MAX_LABEL`] bytes without
/// control characters, a non-empty command, a bounded environment of well-formed
/// names.
pub fn check_spec(i: usize, r: &RunSpec) -> Result<()> {
    let bad = |m: String| Err(Error::Invalid(format!("run {}: {m}", i + 1)));
    if r.label.len() > MAX_LABEL || r.label.chars().any(char::is_control) {
        return bad(format!(
            "label must be at most {MAX_LABEL} bytes without control characters"
        ));
    }
    match &r.command {
        RunCommand::Argv(v) if v.is_empty() || v[0].is_empty() => {
            return bad("empty command".into());
        }
        RunCommand::Shell(s) if s.trim().is_empty() => return bad("empty command".into()),
        _ => {}
    }
    if r.env.len() > MAX_ENV {
        return bad(format!("at most {MAX_ENV} environment variables"));
    }
    for k in r.env.keys() {
        let ok = !k.is_empty()
            && !k.as_bytes()[0].is_ascii_digit()
            && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        if !ok {
            return bad(format!("bad environment variable name {k:?}"));
        }
    }
    Ok(())
}

/// How much JSON all results of one `experiment_end` may take (the request limit is
/// 1 MiB; the rest is for the other fields).
pub const RESULTS_BUDGET: usize = 900 << 10;

/// Cut the captured outputs so every result fits the daemon's limits: at most
/// [`MAX_OUTPUT`] bytes a stream (on a character boundary, marking `truncated`), and
/// all of them within [`RESULTS_BUDGET`]. What every client reporting results calls.
pub fn fit_results(mut results: Vec<RunResult>) -> Vec<RunResult> {
    let mut cap = MAX_OUTPUT;
    loop {
        for r in results.iter_mut() {
            for s in [
                &mut r.stdout,
                &mut r.stderr,
                &mut r.score_stdout,
                &mut r.score_stderr,
            ] {
                if s.len() > cap {
                    let mut cut = cap;
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    s.truncate(cut);
                    r.truncated = true;
                }
            }
        }
        let size = serde_json::to_vec(&results).map_or(0, |v| v.len());
        if size <= RESULTS_BUDGET || cap == 0 {
            return results;
        }
        cap /= 2;
    }
}

/// Check a reported result: output within [`MAX_OUTPUT`], text fields bounded.
pub fn check_result(r: &RunResult) -> Result<()> {
    let bad = |m: &str| Err(Error::Invalid(format!("result of run {}: {m}", r.run)));
    let outputs = [&r.stdout, &r.stderr, &r.score_stdout, &r.score_stderr];
    if outputs.iter().any(|s| s.len() > MAX_OUTPUT) {
        return bad("captured output larger than the limit");
    }
    let long = |s: &Option<String>| s.as_ref().is_some_and(|s| s.len() > 4096);
    if long(&r.error) || long(&r.score_error) {
        return bad("error text longer than 4096 bytes");
    }
    if r.score.is_some_and(|s| !s.is_finite()) {
        return bad("score must be a finite number");
    }
    if let Some(c) = &r.run_checkpoint
        && (c.len() != 64 || !c.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return bad("run_checkpoint must be a checkpoint id (64 hex digits)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(label: &str, cmd: &str, env: &[(&str, &str)]) -> RunSpec {
        RunSpec {
            label: label.into(),
            command: RunCommand::Shell(cmd.into()),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn default_labels_tell_runs_apart() {
        let long = "x".repeat(80);
        let mut v = vec![
            spec("", "make test", &[("OPT", "1")]),
            spec("", "make test", &[("OPT", "2")]),
            spec("", &format!("{long} a"), &[]),
            spec("", &format!("{long} b"), &[]),
            spec("mine", "true", &[]),
            spec("", "true", &[]),
        ];
        label_runs(&mut v);
        let labels: Vec<&str> = v.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels[0], "OPT=1");
        assert_eq!(labels[1], "OPT=2");
        assert!(labels[2].ends_with("… (run 3)"), "{labels:?}");
        assert!(labels[3].ends_with("… (run 4)"), "{labels:?}");
        assert_eq!(labels[4], "mine");
        assert_eq!(labels[5], "true");
        let set: std::collections::BTreeSet<_> = labels.iter().collect();
        assert_eq!(set.len(), labels.len());
    }

    #[test]
    fn fit_keeps_results_within_the_request_budget() {
        let big = "é".repeat(MAX_OUTPUT);
        let rs: Vec<RunResult> = (1..=32)
            .map(|run| RunResult {
                run,
                stdout: big.clone(),
                stderr: "\u{1}".repeat(MAX_OUTPUT),
                ..RunResult::default()
            })
            .collect();
        let f = fit_results(rs);
        assert!(serde_json::to_vec(&f).unwrap().len() <= RESULTS_BUDGET);
        assert!(
            f.iter()
                .all(|r| r.truncated && r.stdout.len() <= MAX_OUTPUT)
        );
    }
}
