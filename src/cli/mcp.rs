//! `mcp`: serve the session's tools to an MCP client over stdin/stdout.

use super::prelude::*;

/// Serve the session's tools over MCP on stdin/stdout (for agent runtimes; pass
/// --socket with an agent socket to serve the agent role).
#[derive(clap::Args)]
pub struct Mcp {}

impl Run for Mcp {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let socket = cx.session_socket()?;
        crate::mcp::serve(&socket)?;
        Ok(Outcome::Silent)
    }
}
