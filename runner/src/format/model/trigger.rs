//! Trigger kinds: what each reads and how it is listed, in one place (a
//! new kind is a new variant, and the compiler finds every `match` that
//! must learn it).

use serde_json::{Map, Value};

/// What starts a workflow's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerKind {
    /// Started by hand (the CLI, the console, the API): nothing to serve.
    Manual,
    /// A request to `path` (`serve`).
    Webhook,
    /// A cron schedule (`serve`).
    Schedule,
    /// An event of another system: kept as written, not started here.
    Event,
    /// Files changing under a folder (`serve`).
    FileWatch,
    /// A tool of `marktoflow mcp` / `serve --mcp`.
    Mcp,
}

impl TriggerKind {
    pub const ALL: &'static [TriggerKind] = &[
        TriggerKind::Manual,
        TriggerKind::Webhook,
        TriggerKind::Schedule,
        TriggerKind::Event,
        TriggerKind::FileWatch,
        TriggerKind::Mcp,
    ];

    /// The `type:` it is written as.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Manual => "manual",
            TriggerKind::Webhook => "webhook",
            TriggerKind::Schedule => "schedule",
            TriggerKind::Event => "event",
            TriggerKind::FileWatch => "file_watch",
            TriggerKind::Mcp => "mcp",
        }
    }

    pub fn parse(s: &str) -> Option<TriggerKind> {
        TriggerKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    /// Every `type:` name, for messages and the schema.
    pub fn names() -> Vec<&'static str> {
        TriggerKind::ALL.iter().map(|k| k.as_str()).collect()
    }

    /// The keys a trigger of this kind reads besides the common ones
    /// (`type`, `enabled`, `name`, …); None: anything is kept as written.
    pub fn own_keys(self) -> Option<&'static [&'static str]> {
        match self {
            TriggerKind::Webhook => Some(&[
                "path",
                "method",
                "secret",
                "token_env",
                "inputMapping",
                "input_mapping",
                "response",
                "max_concurrent",
                "provider",
                "events",
            ]),
            TriggerKind::Schedule => {
                Some(&["cron", "schedule", "inputs", "max_concurrent", "timezone"])
            }
            TriggerKind::FileWatch => {
                Some(&["path", "paths", "debounce", "input", "max_concurrent"])
            }
            TriggerKind::Mcp => Some(&["max_concurrent"]),
            TriggerKind::Manual | TriggerKind::Event => None,
        }
    }

    /// How a list shows a trigger of this kind with `fields`:
    /// `webhook POST /lifeos/query`, `schedule 0 9 * * *`, `mcp notes.search`.
    pub fn describe(self, fields: &Map<String, Value>) -> String {
        let field = |k: &str| fields.get(k).and_then(Value::as_str).map(str::to_string);
        let detail = match self {
            TriggerKind::Webhook => {
                let method = field("method").unwrap_or_else(|| "POST".into());
                field("path").map(|p| format!("{} {p}", method.to_ascii_uppercase()))
            }
            TriggerKind::Schedule => field("cron").or_else(|| field("schedule")),
            TriggerKind::FileWatch => field("path").or_else(|| {
                fields.get("paths").and_then(Value::as_array).map(|p| {
                    p.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
            }),
            TriggerKind::Mcp => field("name"),
            TriggerKind::Manual | TriggerKind::Event => None,
        };
        match detail {
            Some(d) => format!("{} {d}", self.as_str()),
            None => self.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for TriggerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_reads_back_and_lists_itself() {
        for k in TriggerKind::ALL {
            assert_eq!(TriggerKind::parse(k.as_str()), Some(*k));
        }
        assert_eq!(TriggerKind::parse("cron"), None);
        let f = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            TriggerKind::Webhook.describe(&f(json!({"path": "/q", "method": "put"}))),
            "webhook PUT /q"
        );
        assert_eq!(
            TriggerKind::FileWatch.describe(&f(json!({"paths": ["a", "b"]}))),
            "file_watch a, b"
        );
        assert_eq!(TriggerKind::Manual.describe(&Map::new()), "manual");
    }
}
