//! `treefork mcp`: a stdio MCP server bridged to one session's control socket.
//!
//! Owns the MCP face of a session: [`tools`] (what a tool is, role filtering),
//! [`table`] (every tool, one `tool!` entry naming its verb in the verb table,
//! whence its role rule and schemas), [`schemas`] (the tools' own input types and
//! output schemas), [`calls`] (tools that are one control request), [`run`]
//! (`exec` and `experiment`, which run commands here through the process runner
//! the CLI uses too, `treefork::command::runner`; nothing here imports the CLI), [`bridge`] (typed requests on the socket through `control::Client`,
//! and errors as the protocol's error objects) and [`server`] (`rmcp`'s handler:
//! list, call, progress).
//!
//! Invariants: every tool call becomes control requests on the one socket the
//! server was started with, so that socket's role applies to each (an agent
//! socket refuses what the agent may not do, whatever the client sends);
//! `tools/list` shows only what that role allows; stdout carries nothing but the
//! MCP stream (commands run with output captured and stdin from /dev/null; logs
//! go to stderr). See docs/protocol.md, "MCP".

mod bisect;
mod bridge;
mod calls;
mod run;
mod schemas;
mod server;
mod table;
mod tools;

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use rmcp::ServiceExt;

/// Serve MCP on stdin/stdout for the session behind `socket` until the client
/// closes the stream.
pub fn serve(socket: &Path) -> Result<()> {
    let bridge =
        bridge::Bridge::connect(socket).map_err(|e| anyhow!("{} ({})", e.message(), e.code()))?;
    // Processes `exec` leaves behind stay in this process's tree (the daemon tells
    // the command's writers from others by the parent chain).
    treefork::command::runner::become_subreaper();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let service = server::Server::new(bridge)
            .serve(rmcp::transport::stdio())
            .await
            .context("MCP initialization failed")?;
        service.waiting().await.context("MCP service")?;
        Ok(())
    })
}
