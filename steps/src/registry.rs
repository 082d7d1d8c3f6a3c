//! Which action answers `tool.method`, decided when the workflow is loaded.

use crate::agent::AgentAction;
use crate::builtin::{CoreAction, FileAction, HttpAction, WorkflowAction};
use crate::core::catalog::Spec;
use crate::core::{
    action::Action,
    tool::{canonical_sdk, ToolConfig},
};
use crate::memory::MemoryAction;
use crate::retrieval::answer::AnswerAction;
use crate::retrieval::context::ContextAction;
use crate::retrieval::kb::KbAction;
use crate::retrieval::query::QueryAction;
use crate::retrieval::rank::RankAction;
use crate::script::ScriptAction;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What kind of work an action does (decides default retries and preflight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Calls an LLM provider.
    Agent,
    /// Runs JavaScript.
    Script,
    /// Pure, in-process.
    Builtin,
    /// Reaches other machines (`http.*`): not called by `--dry-run`.
    Network,
    /// Runs a program: an external script tool (`sdk: script` with a path),
    /// or calls an MCP server (`sdk: mcp`).
    Process,
}

/// The peer's service integrations, which we do not ship: sdk → what it
/// reaches, for the message that says so.
pub const PEER_SERVICES: &[(&str, &str)] = &[
    ("@slack/web-api", "Slack"),
    ("discord", "Discord"),
    ("telegram", "Telegram"),
    ("whatsapp", "WhatsApp"),
    ("google-gmail", "Gmail"),
    (
        "@microsoft/microsoft-graph-client",
        "Outlook (Microsoft Graph)",
    ),
    ("teams", "Microsoft Teams"),
    ("jira.js", "Jira"),
    ("jira-client", "Jira"),
    ("linear", "Linear"),
    ("asana", "Asana"),
    ("trello", "Trello"),
    ("monday", "monday.com"),
    ("notion", "Notion"),
    ("confluence", "Confluence"),
    ("@octokit/rest", "GitHub"),
    ("gitlab", "GitLab"),
    ("pagerduty", "PagerDuty"),
    ("@pagerduty/pdjs", "PagerDuty"),
    ("sentry", "Sentry"),
    ("airtable", "Airtable"),
    ("supabase", "Supabase"),
    ("pg", "PostgreSQL"),
    ("mysql2", "MySQL"),
    ("stripe", "Stripe"),
    ("@shopify/shopify-api", "Shopify"),
    ("twilio", "Twilio"),
    ("@sendgrid/mail", "SendGrid"),
    ("@mailchimp/mailchimp_marketing", "Mailchimp"),
    ("node-zendesk", "Zendesk"),
    ("intercom", "Intercom"),
    ("calendly", "Calendly"),
    ("hubspot", "HubSpot"),
    ("salesforce", "Salesforce"),
    ("dropbox", "Dropbox"),
    ("@aws-sdk/client-s3", "Amazon S3"),
    ("google-sheets", "Google Sheets"),
    ("google-calendar", "Google Calendar"),
    ("google-drive", "Google Drive"),
    ("google-docs", "Google Docs"),
    ("rss", "RSS feeds"),
    ("playwright", "a browser (Playwright)"),
    ("opencode", "the OpenCode agent"),
    ("github-copilot", "the GitHub Copilot agent"),
    ("@github/copilot-sdk", "the GitHub Copilot agent"),
    ("codex", "the Codex agent"),
    ("@openai/codex-sdk", "the Codex agent"),
    ("gemini-cli", "the Gemini CLI agent"),
    ("google-gemini-cli", "the Gemini CLI agent"),
    ("@google/gemini-cli", "the Gemini CLI agent"),
    ("qwen-code", "the Qwen Code agent"),
    ("@qwen-code/sdk", "the Qwen Code agent"),
];

/// The AI tool a workflow may use without declaring it.
pub const IMPLICIT_AGENT: &str = "agent";

/// Tools every workflow has without declaring them.
pub const IMPLICIT_TOOLS: &[&str] = &[
    "core", "workflow", "script", "file", "http", "kb", "rank", "context", "query", "memory",
    "answer",
];

#[derive(Clone)]
pub struct Resolved {
    pub tool_name: String,
    pub method: String,
    pub kind: ActionKind,
    pub action: Arc<dyn Action>,
    /// The declared tool, when there is one.
    pub tool: Option<ToolConfig>,
    /// The method's contract: its inputs and the engine traits it asks for.
    pub spec: &'static Spec,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("tool_name", &self.tool_name)
            .field("method", &self.method)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Why an action name does not resolve; `hint` is a "did you mean" or advice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ResolveError {
    pub message: String,
    pub hint: Option<String>,
    /// The tool whose sdk marktoflow does not provide, when that is why.
    pub unsupported_tool: Option<String>,
}

pub struct Registry {
    by_sdk: BTreeMap<&'static str, (ActionKind, Arc<dyn Action>)>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::standard()
    }
}

impl Registry {
    /// Every action marktoflow ships.
    pub fn standard() -> Self {
        let mut by_sdk: BTreeMap<&'static str, (ActionKind, Arc<dyn Action>)> = BTreeMap::new();
        by_sdk.insert("core", (ActionKind::Builtin, Arc::new(CoreAction)));
        by_sdk.insert("workflow", (ActionKind::Builtin, Arc::new(WorkflowAction)));
        by_sdk.insert("script", (ActionKind::Script, Arc::new(ScriptAction)));
        by_sdk.insert("file", (ActionKind::Builtin, Arc::new(FileAction)));
        by_sdk.insert("http", (ActionKind::Network, Arc::new(HttpAction)));
        by_sdk.insert("kb", (ActionKind::Builtin, Arc::new(KbAction)));
        by_sdk.insert("rank", (ActionKind::Builtin, Arc::new(RankAction)));
        by_sdk.insert("context", (ActionKind::Builtin, Arc::new(ContextAction)));
        by_sdk.insert("query", (ActionKind::Builtin, Arc::new(QueryAction)));
        by_sdk.insert("answer", (ActionKind::Builtin, Arc::new(AnswerAction)));
        by_sdk.insert("memory", (ActionKind::Builtin, Arc::new(MemoryAction)));
        by_sdk.insert(
            "mcp",
            (ActionKind::Process, Arc::new(crate::mcp::McpAction)),
        );
        let agent: Arc<dyn Action> = Arc::new(AgentAction);
        for (sdk, _) in crate::agent::SDKS {
            by_sdk.insert(sdk, (ActionKind::Agent, agent.clone()));
        }
        // Service integrations, declared as data (bundled and the project's).
        for service in crate::integrations::services() {
            let act: Arc<dyn Action> = Arc::new(crate::integrations::IntegrationAction {
                service: service.clone(),
            });
            for sdk in &service.sdks {
                by_sdk.insert(sdk, (ActionKind::Network, act.clone()));
            }
        }
        Registry { by_sdk }
    }

    /// Every action's contract, once per tool family (the agent providers
    /// share one), sorted by name.
    pub fn catalog(&self) -> Vec<&'static Spec> {
        let mut seen = std::collections::BTreeMap::new();
        for (_, act) in self.by_sdk.values() {
            for s in act.specs() {
                seen.insert(s.name(), s);
            }
        }
        seen.into_values().collect()
    }

    /// One action's contract by `tool.method` (`agent.*` for the providers).
    pub fn spec(&self, name: &str) -> Option<&'static Spec> {
        self.catalog().into_iter().find(|s| s.name() == name)
    }

    pub fn knows_sdk(&self, sdk: &str) -> bool {
        self.by_sdk.contains_key(canonical_sdk(sdk))
    }

    pub fn sdks(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.by_sdk.keys().copied()
    }

    /// Resolves `tool.method` against the declared tools.
    pub fn resolve(&self, action: &str, tools: &[ToolConfig]) -> Result<Resolved, ResolveError> {
        let Some((tool_name, method)) = action.split_once('.') else {
            return Err(ResolveError {
                message: format!(
                    "invalid action `{action}`: expected `tool.method`, e.g. `core.set`"
                ),
                hint: None,
                unsupported_tool: None,
            });
        };
        let declared = tools.iter().find(|t| t.name == tool_name);
        let sdk = match declared {
            Some(t) => canonical_sdk(t.sdk.as_str()),
            None if IMPLICIT_TOOLS.contains(&tool_name) => tool_name,
            // The provider of an undeclared `agent` is chosen when it runs
            // (`--agent`, a key in the environment, else the local model);
            // every provider sdk has the same action.
            None if tool_name == IMPLICIT_AGENT => "anthropic",
            // The peer calls a user integration by its sdk name (tool
            // `weather` with `sdk: weather-api`, action `weather-api.get`).
            None if tools.iter().any(|t| {
                t.sdk == tool_name && !self.by_sdk.contains_key(canonical_sdk(&t.sdk))
            }) =>
            {
                return Err(user_module(
                    &format!("`{action}` calls `{tool_name}`"),
                    tool_name,
                ));
            }
            None => {
                let names: Vec<&str> = tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .chain(IMPLICIT_TOOLS.iter().copied())
                    .collect();
                return Err(ResolveError {
                    message: format!("unknown tool `{tool_name}` in action `{action}`"),
                    hint: Some(match closest(tool_name, &names) {
                        Some(c) => format!("did you mean `{c}.{method}`?"),
                        None => format!(
                            "declare it in the frontmatter: `tools: {{ {tool_name}: {{ sdk: ... }} }}`"
                        ),
                    }),
                    unsupported_tool: None,
                });
            }
        };
        if let Some(t) = declared.filter(|_| sdk == "mcp") {
            // Any name: the server says which tools it has, when it runs.
            return Ok(Resolved {
                tool_name: tool_name.to_string(),
                method: method.to_string(),
                kind: ActionKind::Process,
                action: Arc::new(crate::mcp::McpAction),
                tool: Some(t.clone()),
                spec: &crate::mcp::MCP_SPEC,
            });
        }
        if let Some(t) = declared.filter(|_| sdk == "script") {
            if crate::script::external::external_path(&t.options).is_some() {
                return Ok(Resolved {
                    tool_name: tool_name.to_string(),
                    method: method.to_string(),
                    kind: ActionKind::Process,
                    action: Arc::new(crate::script::external::ExternalToolAction),
                    tool: Some(t.clone()),
                    spec: &crate::script::external::EXTERNAL_SPEC,
                });
            }
        }
        let Some((kind, act)) = self.by_sdk.get(sdk) else {
            return Err(unsupported_sdk(tool_name, sdk, self.by_sdk.keys().copied()));
        };
        let Some(spec) = act.specs().iter().find(|s| s.method == method) else {
            let methods: Vec<&str> = act.specs().iter().map(|s| s.method).collect();
            return Err(ResolveError {
                message: format!(
                    "unknown action `{action}`: tool `{tool_name}` has no method `{method}`"
                ),
                hint: Some(match closest(method, &methods) {
                    Some(c) => format!("did you mean `{tool_name}.{c}`?"),
                    None => format!("`{tool_name}` methods: {}", methods.join(", ")),
                }),
                unsupported_tool: None,
            });
        };
        Ok(Resolved {
            tool_name: tool_name.to_string(),
            method: method.to_string(),
            kind: *kind,
            action: act.clone(),
            tool: declared.cloned(),
            spec,
        })
    }
}

/// Why tool `tool_name`'s sdk cannot be used, with what to do instead.
pub fn unsupported_sdk<'a>(
    tool_name: &str,
    sdk: &str,
    known: impl Iterator<Item = &'a str>,
) -> ResolveError {
    if let Some((_, what)) = PEER_SERVICES.iter().find(|(s, _)| *s == sdk) {
        return ResolveError {
            message: format!(
                "tool `{tool_name}` uses sdk `{sdk}` ({what}), an integration of the TypeScript marktoflow that this runner does not ship"
            ),
            hint: Some(
                "declare the service as an integration (a YAML file in `.marktoflow/integrations/`: docs/reference.md, \"Writing an integration\"), or call its REST API with `http.request` (the token from the environment: `headers: {Authorization: 'Bearer {{ env.TOKEN }}'}`); docs/compatibility.md lists every integration".into(),
            ),
            unsupported_tool: Some(tool_name.to_string()),
        };
    }
    if sdk.starts_with("@modelcontextprotocol/") {
        return ResolveError {
            message: format!(
                "tool `{tool_name}` uses sdk `{sdk}`, an MCP server as a JavaScript module, which this runner does not load"
            ),
            hint: Some(format!(
                "run it as an MCP server instead: `{tool_name}: {{sdk: mcp, command: npx, args: [-y, {sdk}]}}` (docs/reference.md, MCP servers as tools)"
            )),
            unsupported_tool: Some(tool_name.to_string()),
        };
    }
    let known: Vec<&str> = known.collect();
    if closest(sdk, &known).is_none() {
        return ResolveError {
            unsupported_tool: Some(tool_name.to_string()),
            ..user_module(&format!("tool `{tool_name}` uses sdk `{sdk}`"), sdk)
        };
    }
    ResolveError {
        message: format!("tool `{tool_name}` uses sdk `{sdk}`, which marktoflow does not provide"),
        hint: Some(match closest(sdk, &known) {
            Some(c) => format!("did you mean sdk `{c}`?"),
            None => format!("supported sdks: {}", known.join(", ")),
        }),
        unsupported_tool: Some(tool_name.to_string()),
    }
}

/// An sdk that is neither ours nor a known integration of the peer: most
/// likely a user integration, a TypeScript module the peer loads from
/// `integrations/` (or `marktoflow.integrations.ts`, an npm package).
fn user_module(subject: &str, sdk: &str) -> ResolveError {
    ResolveError {
        message: format!(
            "{subject}, which is neither built in nor an integration of the TypeScript marktoflow: if it is a user integration (a TypeScript module such as `integrations/{sdk}.ts`), this runner does not load user modules"
        ),
        hint: Some(
            "call the service with `http.get`/`http.post` (or `http.request`), with a `script` step (JavaScript with `fetch`), or run the module as an MCP server (`sdk: mcp`); docs/compatibility.md, user integrations".into(),
        ),
        unsupported_tool: None,
    }
}

/// The candidate most like `name`, for "did you mean" hints.
pub fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    crate::core::catalog::closest(name, candidates.iter().copied())
}

/// The agent host runs take (`Capabilities::agents`): the providers as
/// `overrides` set them, agents' HTTP tools made by `http.*`. Families are
/// wired together here, above them all.
pub fn agent_hub(overrides: crate::agent::AgentOverrides) -> crate::agent::AgentHub {
    crate::agent::AgentHub::new(overrides).with_http(Arc::new(crate::builtin::HttpAction))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent_tool() -> Vec<ToolConfig> {
        vec![ToolConfig {
            name: "agent".into(),
            sdk: "claude-agent".into(),
            ..Default::default()
        }]
    }

    #[test]
    fn resolves_and_suggests() {
        let r = Registry::standard();
        let tools = agent_tool();
        assert_eq!(
            r.resolve("agent.run", &tools).unwrap().kind,
            ActionKind::Agent
        );
        assert_eq!(
            r.resolve("script.execute", &tools).unwrap().kind,
            ActionKind::Script
        );
        let e = r.resolve("core.sett", &tools).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `core.set`?"));
        let e = r.resolve("agnt.run", &tools).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `agent.run`?"));
        assert!(r.resolve("sleep", &tools).is_err());
    }

    #[test]
    fn every_peer_integration_has_its_replacement_documented() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/compatibility.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let table = &doc[doc
            .find("## Integrations")
            .expect("the integrations section")..];
        let missing: Vec<&str> = PEER_SERVICES
            .iter()
            .map(|(sdk, _)| *sdk)
            .filter(|sdk| !table.contains(&format!("`{sdk}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/compatibility.md misses {missing:?}"
        );
    }

    #[test]
    fn a_peer_integration_is_named_with_what_to_do_instead() {
        let tools = vec![ToolConfig {
            name: "tasks".into(),
            sdk: "asana".into(),
            ..Default::default()
        }];
        let e = Registry::standard()
            .resolve("tasks.createTask", &tools)
            .unwrap_err();
        assert!(e.message.contains("(Asana)"), "{e:?}");
        assert_eq!(e.unsupported_tool.as_deref(), Some("tasks"));
        assert!(e.hint.unwrap().contains("http.request"));
        // One the bundled integrations cover resolves to its method.
        let tools = vec![ToolConfig {
            name: "gh".into(),
            sdk: "@octokit/rest".into(),
            ..Default::default()
        }];
        let r = Registry::standard()
            .resolve("gh.pulls.list", &tools)
            .unwrap();
        assert_eq!(
            (r.kind, r.spec.name()),
            (ActionKind::Network, "github.pulls.list".to_string())
        );
        // HTTP client libraries are the built-in `http`.
        let tools = vec![ToolConfig {
            name: "api".into(),
            sdk: "axios".into(),
            ..Default::default()
        }];
        let r = Registry::standard().resolve("api.get", &tools).unwrap();
        assert_eq!(r.kind, ActionKind::Network);
    }

    /// What `Args` returns for an input not given is the declared default,
    /// so every default in the catalog must read as a value of its type
    /// (and text defaults as the text itself, which `str` returns as is).
    #[test]
    fn every_declared_default_is_a_value_of_its_type() {
        let mut seen = 0;
        for spec in Registry::standard().catalog() {
            for i in spec.inputs {
                let Some(d) = i.default else { continue };
                seen += 1;
                let what = format!("{}: input `{}`, default `{d}`", spec.name(), i.name);
                let v: serde_json::Value =
                    serde_yaml::from_str(d).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    i.types.iter().any(|t| t.accepts(&v)),
                    "{what}: not {:?}",
                    i.types
                );
                if let serde_json::Value::String(text) = &v {
                    assert_eq!(
                        text,
                        crate::core::args::default_text(d),
                        "{what}: text that YAML reads differently"
                    );
                    assert!(
                        i.values.is_empty() || i.values.contains(&text.as_str()),
                        "{what}: not one of {:?}",
                        i.values
                    );
                }
            }
        }
        assert!(seen > 50, "only {seen} defaults found");
    }
}
