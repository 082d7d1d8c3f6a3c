//! A tool's own values — its `auth:` and `options:`, `${VAR}`s filled in —
//! and the templates of a declaration that name them (`{auth.host}`).

use crate::core::action::Call;
use serde_json::{Map, Value};

/// The tool's `auth:` and `options:` values (their `${VAR}`s filled in).
pub struct ToolValues {
    auth: Map<String, Value>,
    options: Map<String, Value>,
}

impl ToolValues {
    pub fn of(call: &Call<'_>) -> ToolValues {
        match call.tool {
            Some(t) => ToolValues {
                auth: t.auth.clone(),
                options: t.options.clone(),
            },
            None => ToolValues {
                auth: Map::new(),
                options: Map::new(),
            },
        }
    }

    pub fn get(&self, key: &str) -> Option<String> {
        let (map, k) = match key.split_once('.') {
            Some(("auth", k)) => (&self.auth, k),
            Some(("options", k)) => (&self.options, k),
            _ => (&self.auth, key),
        };
        match map.get(k)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// `text` with its `{auth.KEY}`/`{options.KEY}` filled in (`{KEY|default}`:
    /// the default when the tool has no such value).
    pub fn fill(&self, text: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let Some(end) = rest[i..].find('}') else {
                out.push_str(&rest[i..]);
                return Ok(out);
            };
            let (key, default) = match rest[i + 1..i + end].split_once('|') {
                Some((k, d)) => (k, Some(d)),
                None => (&rest[i + 1..i + end], None),
            };
            let v = self
                .get(key)
                .or_else(|| default.map(str::to_string))
                .ok_or_else(|| {
                    format!(
                        "the tool needs `{key}` (set it under the tool's `{}`)",
                        key.split('.').next().unwrap_or("auth")
                    )
                })?;
            out.push_str(v.trim_end_matches('/'));
            rest = &rest[i + end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Every auth value long enough to be worth hiding, but where the
    /// service is (`host`): messages name it.
    pub fn secrets(&self) -> Vec<String> {
        self.auth
            .iter()
            .filter(|(k, _)| k.as_str() != "host")
            .filter_map(|(_, v)| v.as_str())
            .filter(|s| s.len() >= 4)
            .map(str::to_string)
            .collect()
    }
}
