//! A note's YAML frontmatter, read the one way every reader of notes
//! (the index, the graph) reads it.

use serde_json::{Map, Value};

/// YAML frontmatter (`---` … `---` at the very top) as a JSON map, and the rest.
/// Frontmatter that is not a YAML mapping is left in the body.
pub fn split(source: &str) -> (Map<String, Value>, &str) {
    let src = source.strip_prefix('\u{feff}').unwrap_or(source);
    let Some(rest) = src
        .strip_prefix("---\n")
        .or_else(|| src.strip_prefix("---\r\n"))
    else {
        return (Map::new(), src);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" || line.trim_end() == "..." {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            if crate::core::yaml::check(yaml).is_err() {
                // Read as text: a note is never refused for its frontmatter.
                return (Map::new(), src);
            }
            return match serde_yaml::from_str::<serde_json::Value>(yaml) {
                Ok(Value::Object(m)) => (m, body),
                Ok(Value::Null) => (Map::new(), body),
                _ => (Map::new(), src),
            };
        }
        offset += line.len();
    }
    (Map::new(), src)
}

/// The frontmatter field that makes a note a tenant's: searches and the
/// graph show it to that tenant only.
pub const TENANT_FIELD: &str = "tenant_id";

/// Whose a note is: its `tenant_id` (trimmed, lowercased, as filters
/// compare), or "" for a note every tenant shares. A `tenant_id` that is not
/// one text or number (a list, a mapping) makes the note nobody's: it is
/// hidden rather than guessed at.
pub fn tenant_of(meta: &Map<String, Value>) -> String {
    let field = meta
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(TENANT_FIELD))
        .map(|(_, v)| v);
    match field {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_lowercase(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => NOBODY.to_string(),
    }
}

/// Whether a note owned by `owner` (its [`tenant_of`]) may be seen by a
/// request for `tenant` (a [`tenant_key`]): the shared notes and the
/// tenant's own.
pub fn sees(tenant: &str, owner: &str) -> bool {
    owner.is_empty() || owner == tenant
}

/// The owner of a note whose `tenant_id` cannot be read: no tenant is named
/// so (a tenant given by a request is trimmed text without control
/// characters).
pub const NOBODY: &str = "\u{0}";

/// A requested tenant as notes are compared with it; `None` when it cannot
/// be one (control characters), which callers refuse.
pub fn tenant_key(requested: &str) -> Option<String> {
    let t = requested.trim();
    (!t.chars().any(char::is_control)).then(|| t.to_lowercase())
}
