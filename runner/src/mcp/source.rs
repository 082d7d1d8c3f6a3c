//! The MCP tools of `serve --mcp` as one of the server's trigger sources
//! (see [`crate::serve::triggers`]): listed with the others, and started by
//! offering them on `/mcp` (clients are told when the list changed).

use super::{McpServer, WorkflowTool};
use crate::format::model::{TriggerKind, Workflow};
use crate::serve::triggers::TriggerSource;
use crate::serve::ServerState;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The tools, and the server that offers them.
pub struct McpTools {
    pub tools: Vec<WorkflowTool>,
    pub server: McpServer,
}

impl TriggerSource for McpTools {
    fn kind(&self) -> TriggerKind {
        TriggerKind::Mcp
    }
    fn len(&self) -> usize {
        self.tools.len()
    }
    fn listing(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| {
                format!(
                    "  MCP tool `{}` at /mcp → {}",
                    t.name, t.workflow.source.name
                )
            })
            .collect()
    }
    fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool) {
        self.tools.retain(|t| keep(&t.workflow));
    }
    fn start(self: Box<Self>, _state: &Arc<ServerState>) -> Option<JoinHandle<()>> {
        // Offered at once; clients hear of the change after.
        let McpTools { tools, server } = *self;
        server
            .swap_tools(tools)
            .then(|| tokio::spawn(async move { server.tell_list_changed().await }))
    }
}
