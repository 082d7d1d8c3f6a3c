//! `sdk: mcp` tools: `<tool>.<name>` calls tool `name` of the declared MCP
//! server with the step's inputs as its arguments (the session itself is
//! [`crate::core::mcp`]).

use crate::core::catalog::{closest, spec, Spec, WAITS};
use crate::core::mcp::{argument_names, required_arguments, result_value, ServerConfig};
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
};
use async_trait::async_trait;
use serde_json::{Map, Value};

/// The contract of every MCP tool call: the tool's own arguments.
pub static MCP_SPEC: Spec = spec(
    "mcp",
    "<tool>",
    "Calls the named tool of the MCP server the tool declares (`command:` for stdio, `url:` for Streamable HTTP) with the inputs as its arguments.",
)
.open()
.returns("the tool's `structuredContent`; else its text (parsed when it is a JSON object or list); else `{content}`")
.traits(WAITS);

pub struct McpAction;

#[async_trait]
impl Action for McpAction {
    fn specs(&self) -> &'static [Spec] {
        std::slice::from_ref(&MCP_SPEC)
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let tool = call.tool.ok_or_else(|| {
            ActionError::Input(format!("`{}` needs a declared MCP tool", call.action))
        })?;
        let config = ServerConfig::from_options(&tool.options)
            .map_err(|e| ActionError::Input(format!("tool `{}`: {e}", tool.name)))?;
        let arguments = match inputs {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(ActionError::Input(format!(
                    "the inputs of `{}` are the MCP tool's arguments: a mapping, got {}",
                    call.action,
                    type_name(&other)
                )))
            }
        };
        if !config.allows(call.method) {
            return Err(ActionError::Input(format!(
                "`{}`: tool `{}` is not in the `allowed` list of `{}` ({})",
                call.action,
                call.method,
                tool.name,
                config.allowed.as_deref().unwrap_or_default().join(", ")
            )));
        }
        let session = call.mcp_session(&tool.name, &config).await?;
        check_call(call, &tool.name, &config, &session, &arguments).await?;
        let result = session
            .call(call.method, arguments, &call.caps.cancel)
            .await?;
        result_value(&result).map_err(|text| {
            ActionError::failed(format!("MCP tool `{}` failed: {text}", call.action))
        })
    }
}

/// Refuses a call that names a tool or arguments the server does not
/// have, before it is sent.
async fn check_call(
    call: &Call<'_>,
    name: &str,
    config: &ServerConfig,
    session: &crate::core::mcp::Session,
    arguments: &Map<String, Value>,
) -> Result<(), ActionError> {
    let method = call.method;
    let tools = session.tools().await?;
    let Some(tool) = tools.iter().find(|t| t.name == method) else {
        let names: Vec<&str> = tools
            .iter()
            .map(|t| t.name.as_ref())
            .filter(|n| config.allows(n))
            .collect();
        return Err(ActionError::Input(format!(
            "`{}`: the MCP server of `{name}` has no tool `{method}`; {}",
            call.action,
            match closest(method, names.iter().copied()) {
                Some(c) => format!("did you mean `{name}.{c}`?"),
                None => format!("its tools: {}", names.join(", ")),
            }
        )));
    };
    if let Some(known) = argument_names(tool) {
        if let Some(unknown) = arguments.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ActionError::Input(format!(
                "`{}` has no argument `{unknown}`; {}",
                call.action,
                match closest(unknown, known.iter().copied()) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!("its arguments: {}", known.join(", ")),
                }
            )));
        }
    }
    if let Some(missing) = required_arguments(tool)
        .into_iter()
        .find(|r| !arguments.contains_key(*r))
    {
        return Err(ActionError::Input(format!(
            "`{}` needs argument `{missing}`",
            call.action
        )));
    }
    Ok(())
}
