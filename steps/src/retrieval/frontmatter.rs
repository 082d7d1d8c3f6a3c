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
