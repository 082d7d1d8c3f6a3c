//! `validate --online`: what only the MCP servers a workflow declares can
//! say — which tools they have and the arguments each takes. Servers are
//! started only here (and by runs), never by plain `validate`.

use crate::diag::{did_you_mean, Diagnostic};
use crate::engine::with_env;
use crate::format::model::{ActionStep, Workflow};
use marktoflow_steps::core::action::{Call, Capabilities};
use marktoflow_steps::core::mcp::{self, ServerConfig};
use serde::Serialize;
use serde_json::Value;

/// One declared MCP server, as reached.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// The tool's name in the workflow.
    pub tool: String,
    /// The command line or URL.
    pub server: String,
    /// Its tools (those `allowed` when it lists some), with their arguments.
    pub tools: Vec<ToolReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    pub name: String,
    pub arguments: Vec<String>,
    pub required: Vec<String>,
}

/// Starts each MCP server `wf` declares and checks every step that calls
/// one: the tool exists, the argument names are the tool's, the required
/// ones are given. The servers stay in `caps.mcp` for the caller to stop.
pub async fn check_mcp(wf: &Workflow, caps: &Capabilities) -> (Vec<Diagnostic>, Vec<ServerReport>) {
    let mut diags = Vec::new();
    let mut reports: Vec<ServerReport> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for ActionStep {
        step,
        action,
        resolved,
        inputs,
    } in wf.actions()
    {
        let Some(tool) = resolved.tool.as_ref().filter(|t| t.sdk == "mcp") else {
            continue;
        };
        if failed.contains(&tool.name) {
            continue;
        }
        let tool = with_env(tool, &caps.env);
        let at = Some(step.field_pos(&["action"]));
        let Ok(config) = ServerConfig::from_options(&tool.options) else {
            // Said when the file was loaded.
            continue;
        };
        let call = Call::outside_a_run(action, &resolved.method, Some(&tool), caps);
        let listed = async {
            let session = call.mcp_session(&tool.name, &config).await?;
            session.tools().await.map(<[_]>::to_vec)
        };
        let listed = match listed.await {
            Ok(t) => t,
            Err(e) => {
                let message = format!("tool `{}`: {e}", tool.name);
                diags.push(Diagnostic::error(&wf.source, at, message));
                failed.push(tool.name.clone());
                continue;
            }
        };
        if !reports.iter().any(|r| r.tool == tool.name) {
            reports.push(ServerReport {
                tool: tool.name.clone(),
                server: config.describe(),
                tools: listed
                    .iter()
                    .filter(|t| config.allows(&t.name))
                    .map(|t| ToolReport {
                        name: t.name.to_string(),
                        arguments: mcp::argument_names(t)
                            .unwrap_or_default()
                            .into_iter()
                            .map(str::to_string)
                            .collect(),
                        required: mcp::required_arguments(t)
                            .into_iter()
                            .map(str::to_string)
                            .collect(),
                    })
                    .collect(),
            });
        }
        let Some(found) = listed.iter().find(|t| t.name == resolved.method) else {
            let names: Vec<&str> = listed
                .iter()
                .map(|t| t.name.as_ref())
                .filter(|n| config.allows(n))
                .collect();
            let mut d = Diagnostic::error(
                &wf.source,
                at,
                format!(
                    "`{action}`: the MCP server of `{}` has no tool `{}`",
                    tool.name, resolved.method
                ),
            );
            d.hints.push(match did_you_mean(&resolved.method, &names) {
                Some(c) => format!("did you mean `{}.{c}`?", tool.name),
                None => format!("its tools: {}", names.join(", ")),
            });
            diags.push(d);
            continue;
        };
        // Inputs that are one template (`inputs: "{{ args }}"`) are known
        // only when the step runs.
        let Value::Object(given) = inputs else {
            continue;
        };
        let mut inputs_path = step.path.clone();
        inputs_path.push("inputs".into());
        if let Some(known) = mcp::argument_names(found) {
            for k in given.keys().filter(|k| !known.contains(&k.as_str())) {
                let mut d = Diagnostic::error(
                    &wf.source,
                    Some(step.spans.key_pos_in(&inputs_path, k)),
                    format!("`{action}` has no argument `{k}`"),
                );
                d.hints.push(match did_you_mean(k, &known) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!("its arguments: {}", known.join(", ")),
                });
                diags.push(d);
            }
        }
        for r in mcp::required_arguments(found) {
            if !given.contains_key(r) {
                diags.push(Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["inputs"])),
                    format!("`{action}` needs argument `{r}`"),
                ));
            }
        }
    }
    (diags, reports)
}
