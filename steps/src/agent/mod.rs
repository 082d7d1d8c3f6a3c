//! `agent.run` / `agent.generate` / `agent.chat`: LLM providers over HTTP. (stub)
use crate::action::{Action, ActionError, Call, ToolConfig};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct AgentOverrides {
    pub agent: Option<String>,
    pub model: Option<String>,
}

pub struct AgentHub {
    pub overrides: AgentOverrides,
}

impl AgentHub {
    pub fn new(overrides: AgentOverrides) -> Self {
        AgentHub { overrides }
    }
    pub fn preflight(
        &self,
        _tool: &ToolConfig,
        _step_model: Option<&str>,
        _env: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        Ok(String::new())
    }
}

pub struct AgentAction;

#[async_trait]
impl Action for AgentAction {
    fn methods(&self) -> &'static [&'static str] {
        &["run", "generate", "chat"]
    }
    async fn call(&self, _call: &Call<'_>, _inputs: Value) -> Result<Value, ActionError> {
        Err(ActionError::failed("not yet"))
    }
}
