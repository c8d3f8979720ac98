//! The MCP server: `rmcp`'s [`ServerHandler`] over the tool table.
//!
//! `tools/list` answers the tools the socket's role may use; `tools/call` runs the
//! tool's bridge function on a blocking thread (they do socket I/O and run
//! processes) while an async task forwards its progress reports as
//! `notifications/progress` when the call carried a progress token; every
//! notification is sent before the result. Failures are tool results with
//! `isError` and `structuredContent: {"error": {code, message, ...}}` (the
//! protocol's error object verbatim) — never JSON-RPC errors, which clients hide
//! from the model; only an unknown tool name is a JSON-RPC error.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::bridge::{Bridge, ToolError};
use super::tools::{self, Call};

/// The server of one session socket.
pub struct Server {
    bridge: Arc<Bridge>,
}

impl Server {
    /// A server bridged to `bridge`'s socket.
    pub fn new(bridge: Bridge) -> Server {
        Server {
            bridge: Arc::new(bridge),
        }
    }
}

/// The tool result of an outcome.
pub fn result(outcome: Result<Value, ToolError>) -> CallToolResult {
    match outcome {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => {
            let mut r = CallToolResult::structured_error(json!({"error": e.error}));
            // The text form leads with the code, for clients that show text only.
            let text = format!("{}: {}\n{}", e.code(), e.message(), e.error);
            r.content = vec![ContentBlock::text(text)];
            r
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("treefork", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "treefork session at {} (role: {}). Checkpoint before risky steps; \
                 undo reverts the last operation; exec records a command with the files it changed.",
                self.bridge.root.display(),
                match self.bridge.role {
                    treefork::control::Role::User => "user",
                    treefork::control::Role::Agent => "agent",
                }
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let role = self.bridge.role;
        let list = super::table::TOOLS
            .iter()
            .filter(|t| t.visible(role))
            .map(tools::Tool::describe)
            .collect();
        Ok(ListToolsResult::with_all_items(list))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        super::table::find(name, self.bridge.role).map(tools::Tool::describe)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = super::table::find(&request.name, self.bridge.role) else {
            return Err(ErrorData::invalid_params(
                format!("no tool {:?} on this socket", request.name),
                None,
            ));
        };
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(f64, Option<f64>, String)>();
        let peer = context.peer.clone();
        let forward = tokio::spawn(async move {
            while let Some((p, total, msg)) = rx.recv().await {
                if let Some(t) = &token {
                    let mut n = ProgressNotificationParam::new(t.clone(), p).with_message(msg);
                    n.total = total;
                    let _ = peer.notify_progress(n).await;
                }
            }
        });
        let bridge = self.bridge.clone();
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let outcome = tokio::task::spawn_blocking(move || {
            let progress = move |p: f64, total: Option<f64>, msg: String| {
                let _ = tx.send((p, total, msg));
            };
            let cx = Call {
                bridge: &bridge,
                progress: &progress,
            };
            (tool.run)(&cx, args)
        })
        .await
        .unwrap_or_else(|e| {
            Err(ToolError::new(
                "io",
                format!("tool {} failed: {e}", tool.name),
            ))
        });
        let _ = forward.await;
        Ok(result(outcome).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_tool_results_with_the_protocol_code() {
        let e = ToolError {
            error: json!({"code": "BASELINE_CONFLICT", "message": "baseline conflict",
                "paths": [{"path": "a", "how": "unstaged"}]}),
        };
        let r = result(Err(e));
        assert_eq!(r.is_error, Some(true));
        let s = r.structured_content.unwrap();
        assert_eq!(s["error"]["code"], "BASELINE_CONFLICT");
        assert_eq!(s["error"]["paths"][0]["how"], "unstaged");
        let ok = result(Ok(json!({"x": 1})));
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, Some(json!({"x": 1})));
    }
}
