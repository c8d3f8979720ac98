//! Not a verb: reporting a command a client ran (`crate::command::runner`) to the daemon as
//! exec `n`: the `exec_output` and `exec_end` requests, the same from every client
//! (`treefork exec`, the MCP server).

use super::Request;
use crate::command::runner::RunResult;
use crate::control::b64_encode;

/// Raw bytes per `exec_output` request (well under the 1 MiB request bound once
/// base64-encoded).
pub const EXEC_CHUNK: usize = 512 << 10;

/// The requests that report run `r` as exec `n`: its captured output in
/// `exec_output` chunks, then `exec_end` (what `treefork exec` and the MCP server send).
pub fn exec_report(n: u64, r: &RunResult) -> Vec<Request> {
    let mut ops = Vec::new();
    for (stream, bytes) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        for chunk in bytes.chunks(EXEC_CHUNK) {
            ops.push(Request::ExecOutput(crate::verbs::ExecOutput {
                exec: n,
                stream: stream.into(),
                data: b64_encode(chunk),
            }));
        }
    }
    ops.push(Request::ExecEnd(crate::verbs::ExecEnd {
        exec: n,
        exit_code: r.exit_code,
        signal: r.signal,
        error: r.error.clone(),
        pid: r.pid,
        duration_ms: r.duration.as_millis() as u64,
        stdout_truncated: r.stdout_truncated,
        stderr_truncated: r.stderr_truncated,
        timed_out: r.timed_out,
    }));
    ops
}
