//! `marktoflow schema`: a JSON Schema of the workflow format, built from the
//! same key tables the parser checks against, so the two cannot drift.
//! `docs/workflow.schema.json` is this output; a test fails when it is stale.

use crate::format::model::{
    InputType, TriggerKind, COMMON_KEYS, INPUT_KEYS, KINDS, META_KEYS, TOOL_KEYS, TOP_KEYS,
};
use marktoflow_steps::agent::SDKS;
use marktoflow_steps::core::mcp::SERVER_KEYS;
use marktoflow_steps::registry::IMPLICIT_TOOLS;
use serde_json::{json, Map, Value};

/// What each key holds, for editors' completion and hover text.
fn field(key: &str) -> Value {
    let (schema, doc): (Value, &str) = match key {
        "id" => (
            json!({"type": "string"}),
            "Step id, unique in the workflow; default: the heading's slug",
        ),
        "name" => (
            json!({"type": "string"}),
            "Display name; default: the heading above the block",
        ),
        "type" => (
            json!({"enum": KINDS.iter().map(|(k, _)| *k).filter(|k| *k != "action" && *k != "workflow").collect::<Vec<_>>()}),
            "Step type (inferred from the keys when absent)",
        ),
        "description" => (json!({"type": "string"}), "Free text"),
        "output_variable" | "outputVariable" => (
            json!({"type": "string"}),
            "Store the step's output under this variable",
        ),
        "conditions" => (
            json!({"type": "array", "items": {"type": "string"}}),
            "All must hold, else the step is skipped",
        ),
        "timeout" => (
            json!({"type": ["string", "number"]}),
            "`30s`, `2m`, or milliseconds",
        ),
        "error_handling" | "errorHandling" => (
            json!({"type": "object", "additionalProperties": false, "properties": {
                "action": {"enum": ["stop", "continue"]},
                "max_retries": {"type": "integer", "minimum": 0},
                "retry_delay_seconds": {"type": "number", "minimum": 0},
                "backoff": {"enum": ["exponential", "fixed"]},
                "max_delay_seconds": {"type": "number", "minimum": 0},
                "fallback_action": {"type": "string"}
            }}),
            "What to do when the step fails",
        ),
        "on_error" => (
            json!({"enum": ["stop", "continue"]}),
            "Short form of error_handling.action",
        ),
        "model" => (
            json!({"type": "string"}),
            "Model for agent steps (`haiku`, `sonnet`, `opus`, or a provider's id)",
        ),
        "agent" => (json!({"type": "string"}), "Reserved"),
        "action" => (
            json!({"type": "string", "pattern": "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_.]+$"}),
            "`tool.method`, e.g. `agent.run`, `script.execute`, `core.set`",
        ),
        "inputs" => (
            json!({"type": "object"}),
            "The action's inputs; strings are templates",
        ),
        "prompt" => (
            json!({}),
            "A wait's question to the person (a template); accepted for compatibility on actions",
        ),
        "message" => (json!({"type": "string"}), "A wait's question (as `prompt`)"),
        "title" => (json!({"type": "string"}), "A wait's heading (a template)"),
        "fields" => (
            json!({"type": "object", "additionalProperties": {"type": ["object", "string"]}}),
            "What the person fills in: name → {type, required, default, description, options, min, max, pattern}",
        ),
        "on_timeout" => (
            json!({"oneOf": [{"enum": ["fail", "continue"]}, {"type": "object", "properties": {"default": {"type": "object"}}, "required": ["default"], "additionalProperties": false}]}),
            "What an unanswered wait gives when its `timeout` passes",
        ),
        "approvals" => (
            json!({"type": "integer", "minimum": 1, "maximum": 100}),
            "Distinct approvals needed (`mode: approval`)",
        ),
        "approvers" => (
            json!({"type": "array", "items": {"type": "string"}}),
            "Who may answer (identities); default: anyone who can reach it",
        ),
        "requester" => (
            json!({"type": "string"}),
            "Who asked (a template): with `self_approval: false` they cannot answer",
        ),
        "self_approval" => (json!({"type": "boolean"}), "Whether the requester may answer"),
        "key" => (
            json!({"type": "string"}),
            "`mode: webhook`: the correlation key an event to `/events/{key}` carries",
        ),
        "secret" => (
            json!({"type": "string"}),
            "`mode: webhook`: the HMAC-SHA256 secret an event's body is signed with (`${VAR}`)",
        ),
        "token" => (
            json!({"type": "string"}),
            "`mode: webhook`: the bearer token an event carries (`${VAR}`)",
        ),
        "link_ttl" => (
            json!({"type": ["string", "number"]}),
            "How long the links to answer stay valid (default: the timeout, else 7 days)",
        ),
        "notify" | "on_approve" | "on_reject" => (
            json!({"type": "array", "items": {"$ref": "#/$defs/step"}}),
            "Steps run when the wait starts (`notify`, with `wait.link`) or after its decision",
        ),
        "prompt_inputs" | "permissions" => (json!({}), "Accepted for compatibility"),
        "code" => (
            json!({"type": "string"}),
            "JavaScript: the body of an async function",
        ),
        "condition" => (
            json!({"type": ["string", "boolean"]}),
            "An expression: `x > 3 and not y`, `'{{ found }}'`",
        ),
        "then" | "else" | "steps" | "default" | "try" | "catch" | "finally" => (
            json!({"type": "array", "items": {"$ref": "#/$defs/step"}}),
            "A list of steps",
        ),
        "expression" => (json!({}), "A template (map/reduce: the value per item)"),
        "cases" => (
            json!({"type": "object", "additionalProperties": {"type": "array", "items": {"$ref": "#/$defs/step"}}}),
            "Value → steps",
        ),
        "items" => (
            json!({"type": ["string", "array"]}),
            "A template giving a list, or a YAML list",
        ),
        "item_variable" => (
            json!({"type": "string"}),
            "Name of the current item (default `item`)",
        ),
        "index_variable" => (json!({"type": "string"}), "Name of the current index"),
        "max_concurrent" => (
            json!({"type": "integer", "minimum": 1}),
            "How many run at once",
        ),
        "max_iterations" => (
            json!({"type": "integer", "minimum": 1}),
            "Bound on passes (default 100)",
        ),
        "accumulator_variable" => (
            json!({"type": "string"}),
            "Name of the accumulator (default `accumulator`)",
        ),
        "initial_value" => (json!({}), "Starting accumulator"),
        "branches" => (
            json!({"type": "array", "items": {"type": "object", "additionalProperties": false,
                "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}},
                "required": ["steps"]}}),
            "Lanes that run at the same time",
        ),
        "duration" => (
            json!({"type": ["string", "number"]}),
            "`5s`, `2m`, or milliseconds",
        ),
        "mode" => (
            json!({"type": "string"}),
            "wait: `duration`, `form`, `approval` or `webhook`; merge: `append`, `match`, `diff`, `combine_by_field`",
        ),
        "workflow" => (
            json!({"type": "string"}),
            "Path of a sub-workflow, relative to this file",
        ),
        "use_subagent" | "subagent_config" => (json!({}), "Not supported"),
        _ => (json!({}), ""),
    };
    let mut s = schema;
    if let (Value::Object(m), false) = (&mut s, doc.is_empty()) {
        m.insert("description".into(), Value::String(doc.into()));
    }
    s
}

fn object(keys: &[&str], fields: impl Fn(&str) -> Value) -> Value {
    let props: Map<String, Value> = keys.iter().map(|k| (k.to_string(), fields(k))).collect();
    json!({"type": "object", "additionalProperties": false, "properties": props})
}

pub fn schema() -> Value {
    let mut step_keys: Vec<&str> = COMMON_KEYS.to_vec();
    for (_, keys) in KINDS {
        for k in keys.iter() {
            if !step_keys.contains(k) {
                step_keys.push(k);
            }
        }
    }
    // Each in camelCase too, as the peer spells them (the reader takes both).
    let camel: Vec<String> = step_keys
        .iter()
        .map(|k| crate::format::model::camel_case(k))
        .filter(|c| !step_keys.contains(&c.as_str()))
        .collect();
    let spelled: Vec<&str> = step_keys
        .iter()
        .copied()
        .chain(camel.iter().map(String::as_str))
        .collect();
    let mut step = object(&spelled, |k| {
        let snake = step_keys
            .iter()
            .find(|s| crate::format::model::camel_case(s) == k)
            .copied()
            .unwrap_or(k);
        field(snake)
    });
    // Each action's inputs, so editors complete and check `inputs:` keys.
    let catalog = marktoflow_steps::Registry::standard().catalog();
    let names: Vec<String> = catalog.iter().map(|s| s.name()).collect();
    step["properties"]["action"]["examples"] = json!(names);
    let per_action: Vec<Value> = catalog
        .iter()
        .map(|s| {
            json!({
                "if": {"properties": {"action": {"const": s.name()}}, "required": ["action"]},
                "then": {"properties": {"inputs": s.input_schema()}}
            })
        })
        .collect();
    step["allOf"] = json!(per_action);
    let input = object(INPUT_KEYS, |k| match k {
        "type" => json!({"enum": InputType::NAMES}),
        "required" => json!({"type": "boolean"}),
        "enum" => json!({"type": "array"}),
        "pattern" => {
            json!({"type": "string", "description": "A regular expression the whole value must match"})
        }
        "min" | "max" => {
            json!({"type": "number", "description": "Bounds numbers, string lengths and list lengths"})
        }
        "description" => json!({"type": "string"}),
        "tenant" => {
            json!({"type": "boolean", "description": "A server fills it with the tenant its caller's token grants"})
        }
        _ => json!({}),
    });
    let mut sdks: Vec<&str> = SDKS.iter().map(|(name, _)| *name).collect();
    sdks.extend(IMPLICIT_TOOLS.iter().copied());
    sdks.push("mcp");
    // An MCP server's keys sit beside `sdk: mcp`.
    let tool_keys: Vec<&str> = TOOL_KEYS.iter().chain(SERVER_KEYS).copied().collect();
    let tool = object(&tool_keys, |k| match k {
        "sdk" => json!({"type": "string", "examples": sdks}),
        "auth" | "options" => json!({"type": "object"}),
        "args" | "allowed" | "writes" => {
            json!({"type": "array", "items": {"type": "string"}, "description": "For `sdk: mcp`"})
        }
        "env" | "headers" => {
            json!({"type": "object", "additionalProperties": {"type": "string"}, "description": "For `sdk: mcp`"})
        }
        "timeout" => {
            json!({"type": ["number", "string"], "description": "For `sdk: mcp`: seconds to start"})
        }
        "command" | "url" | "cwd" => json!({"type": "string", "description": "For `sdk: mcp`"}),
        _ => json!({"type": "string"}),
    });
    let top = object(TOP_KEYS, |k| match k {
        "workflow" => object(META_KEYS, |m| match m {
            "tags" => json!({"type": "array", "items": {"type": "string"}}),
            _ => json!({"type": "string"}),
        }),
        "tools" => json!({"type": "object", "additionalProperties": {"$ref": "#/$defs/tool"}}),
        "inputs" => json!({"type": "object", "additionalProperties": {"$ref": "#/$defs/input"}}),
        "outputs" => {
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"type": {"type": "string"}, "description": {"type": "string"}}}})
        }
        "steps" => json!({"type": "array", "items": {"$ref": "#/$defs/step"}}),
        "triggers" => {
            json!({"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
                "type": {"enum": TriggerKind::names()},
                "path": {"type": "string"}, "method": {"type": "string"}, "cron": {"type": "string"},
                "inputs": {"type": "object"}, "config": {"type": "object"}, "enabled": {"type": "boolean"},
                "secret": {"type": "string", "description": "webhook: HMAC-SHA256 secret of the raw body"},
                "token_env": {"type": "string", "description": "webhook: environment variable holding a bearer token"},
                "response": {"enum": ["sync", "async"]},
                "inputMapping": {"type": "object", "additionalProperties": {"type": "string"}},
                "max_concurrent": {"type": "integer", "minimum": 1, "description": "runs of this workflow at once under `serve`"},
                "paths": {"type": "array", "items": {"type": "string"}, "description": "file_watch: globs"},
                "debounce": {"type": ["string", "number"], "description": "file_watch: quiet time before a run"},
                "input": {"type": "string", "description": "file_watch: the array input that receives the changed paths"}
            }}})
        }
        "timeout" => json!({"type": ["string", "number"]}),
        "concurrency" => json!({"oneOf": [
            {"type": "integer", "minimum": 1},
            {"type": "object", "additionalProperties": false, "properties": {
                "key": {"type": "string", "description": "Template over the inputs: runs with the same key share the limit"},
                "limit": {"type": "integer", "minimum": 1, "description": "Runs at once (default 1)"}
            }}
        ], "description": "Runs of this workflow executing at once, over every server and worker"}),
        "budget" => json!({"type": "object", "additionalProperties": false, "properties": {
            "tokens": {"type": "integer", "minimum": 1, "description": "The most tokens (in and out) one run's model calls may spend"},
            "cost_usd": {"type": "number", "exclusiveMinimum": 0, "description": "The most one run's model calls may cost, in US dollars"},
            "daily_tokens": {"type": "integer", "minimum": 1, "description": "The most tokens all of this workflow's runs may spend in a day (UTC), counted in the run store"},
            "daily_cost_usd": {"type": "number", "exclusiveMinimum": 0, "description": "The most all of this workflow's runs may cost in a day (UTC), in US dollars"},
            "prices": {"type": "object", "description": "Prices that override the built-in table, by model name or its beginning", "additionalProperties": {
                "type": "object", "additionalProperties": false, "required": ["input", "output"], "properties": {
                    "input": {"type": "number", "minimum": 0, "description": "US dollars per million input tokens"},
                    "output": {"type": "number", "minimum": 0, "description": "US dollars per million output tokens"}
                }}}
        }, "description": "What model calls may spend, and what they cost"}),
        "permissions" => json!({"type": "object", "additionalProperties": false, "properties": {
            "hosts": {"type": "array", "items": {"type": "string"}, "description": "Hosts http actions may call; `*.example.com` for subdomains"},
            "network": {"type": "array", "items": {"type": "string"}, "description": "Same as hosts"}
        }}),
        _ => json!({}),
    });
    let mut root = top;
    if let Value::Object(m) = &mut root {
        m.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        m.insert("title".into(), json!("marktoflow workflow frontmatter"));
        m.insert(
            "description".into(),
            json!("The YAML frontmatter of a marktoflow workflow. Each ```yaml step block in the body is one `#/$defs/step` or a list of them."),
        );
        m.insert(
            "$defs".into(),
            json!({"step": step, "input": input, "tool": tool}),
        );
        // Frontmatter keys we do not know are warnings, not errors.
        m.insert("additionalProperties".into(), json!(true));
    }
    root
}

pub fn schema_text() -> String {
    serde_json::to_string_pretty(&schema()).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/workflow.schema.json");
        let current = super::schema_text();
        if std::env::var_os("MARKTOFLOW_BLESS").is_some() {
            std::fs::write(path, &current).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(committed == current, "docs/workflow.schema.json is stale: run `marktoflow schema > docs/workflow.schema.json` (or MARKTOFLOW_BLESS=1 cargo test)");
    }
}
