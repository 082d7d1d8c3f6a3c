//! Small text helpers of the readers: key spellings, unquoted templates,
//! steps told by their keys, heading slugs.

use serde_json::{Map, Value};

/// `max_retries` → `maxRetries`.
pub fn camel_case(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `maxRetries` → `max_retries`; snake_case stays as it is.
pub(super) fn snake_case(k: &str) -> String {
    let mut out = String::with_capacity(k.len() + 4);
    for c in k.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Line and column (1-based) of the first plain YAML value that starts with
/// `{{` — `key: {{ x }}` or `- {{ x }}` — which YAML reads as a flow mapping.
/// Block scalars (`key: |`) are skipped.
pub(super) fn unquoted_template(text: &str) -> Option<(usize, usize)> {
    let mut block_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if let Some(b) = block_indent {
            if body.is_empty() || indent > b {
                continue;
            }
            block_indent = None;
        }
        if body.starts_with('#') {
            continue;
        }
        // The value part: after `- ` items and after the first `key: `.
        let mut rest = body;
        let mut at = indent;
        while let Some(r) = rest.strip_prefix("- ") {
            at += rest.len() - r.trim_start().len();
            rest = r.trim_start();
        }
        if !rest.starts_with(['"', '\'', '{', '[']) {
            if let Some(p) = rest.find(": ") {
                let value = rest[p + 2..].trim_start();
                at += rest.len() - value.len();
                rest = value;
            }
        }
        if rest.starts_with("{{") {
            return Some((i + 1, at + 1));
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            block_indent = Some(indent);
        }
    }
    None
}

pub(super) fn is_step(m: &Map<String, Value>) -> bool {
    m.contains_key("type") || infer_kind(m).is_some()
}

/// The peer's order of inference when `type` is absent.
pub(super) fn infer_kind(m: &Map<String, Value>) -> Option<&'static str> {
    // Either spelling, as the peer reads them (`maxIterations`).
    let has = |k: &str| m.contains_key(k) || m.contains_key(&camel_case(k));
    Some(if has("action") {
        "action"
    } else if has("workflow") {
        "workflow"
    } else if has("condition")
        && (has("then") || has("else") || has("steps"))
        && !has("max_iterations")
    {
        "if"
    } else if has("expression") && has("cases") {
        "switch"
    } else if has("items") && has("steps") {
        "for_each"
    } else if has("condition") && has("steps") {
        "while"
    } else if has("items") && has("expression") && has("accumulator_variable") {
        "reduce"
    } else if has("items") && has("expression") {
        "map"
    } else if has("items") && has("condition") {
        "filter"
    } else if has("branches") {
        "parallel"
    } else if has("try") {
        "try"
    } else {
        return None;
    })
}

pub(super) fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `Step 3: Search Knowledge Base` → `search_knowledge_base`.
pub fn slug(heading: &str) -> String {
    let h = heading.trim();
    let lower = h.to_ascii_lowercase();
    // Drop a leading "Step 3:" / "3." numbering.
    let rest = if let Some(r) = lower.strip_prefix("step") {
        let r = r.trim_start();
        let digits = r.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            r[digits..].trim_start_matches([':', '.', ')', '-', ' '])
        } else {
            lower.as_str()
        }
    } else {
        let digits = lower.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            lower[digits..].trim_start_matches([':', '.', ')', '-', ' '])
        } else {
            lower.as_str()
        }
    };
    let mut out = String::new();
    for c in rest.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_string()
}
