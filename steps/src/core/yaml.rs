//! YAML is parsed from text that anyone may write (workflows, notes in a
//! knowledge base, files and request data); some shapes make YAML parsers
//! slow beyond reason: deeply nested flow collections (`[[[[...`) take time
//! quadratic in the depth, nested explicit keys (`? ? ? a`) exponential. They
//! are refused before parsing; nothing real needs them.

/// Deepest nesting of `[`/`{` accepted.
pub const MAX_FLOW_DEPTH: usize = 64;
/// Most explicit-key indicators (`? `) accepted in one text.
pub const MAX_EXPLICIT_KEYS: usize = 16;

/// Why a YAML text is refused, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct TooComplex {
    pub line: usize,
    pub what: String,
}

/// Checks `text` before it is parsed as YAML.
pub fn check(text: &str) -> Result<(), TooComplex> {
    let mut depth = 0usize;
    let mut explicit = 0usize;
    // Quotes may span lines in YAML; a quoted `[` is not nesting.
    let mut quote: Option<char> = None;
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let mut chars = line.chars().peekable();
        let mut at_token_start = true;
        while let Some(c) = chars.next() {
            if let Some(q) = quote {
                match (q, c) {
                    ('"', '\\') => {
                        chars.next();
                    }
                    ('\'', '\'') if chars.peek() == Some(&'\'') => {
                        chars.next();
                    }
                    (q, c) if q == c => quote = None,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' | '\'' if at_token_start || depth > 0 => quote = Some(c),
                '#' if at_token_start => break,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Err(TooComplex {
                            line: line_no,
                            what: format!(
                                "collections nested more than {MAX_FLOW_DEPTH} deep (`[` or `{{`)"
                            ),
                        });
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '?' if at_token_start && matches!(chars.peek(), None | Some(' ' | '\t')) => {
                    explicit += 1;
                    if explicit > MAX_EXPLICIT_KEYS {
                        return Err(TooComplex {
                            line: line_no,
                            what: format!("more than {MAX_EXPLICIT_KEYS} explicit keys (`? `)"),
                        });
                    }
                }
                _ => {}
            }
            at_token_start = matches!(c, ' ' | '\t' | '-' | '?' | ':' | ',' | '[' | '{');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn data_is_read_as_yaml_1_2_reads_it() {
        assert_eq!(
            super::read("mode: 0644\nratio: 1.0\nbits: 0b101\non: yes\n").unwrap(),
            serde_json::json!({"mode": 644, "ratio": 1, "bits": "0b101", "on": "yes"})
        );
        assert!(matches!(
            super::read(&"[".repeat(100)),
            Err(super::ReadError::TooComplex(_))
        ));
        assert!(matches!(
            super::read("a: [1"),
            Err(super::ReadError::Yaml(_))
        ));
    }

    use super::*;

    #[test]
    fn refuses_the_slow_shapes_and_nothing_ordinary() {
        for ok in [
            "a: [1, [2, [3]]]\nb: {c: {d: e}}\n",
            "q: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n",
            "q: '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'\n",
            "why: is this? fine\n# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
            "? a\n: b\n? c\n: d\n",
            "url: http://x/?a=1&b=[2]\n",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        let deep = format!("x: {}{}\n", "[".repeat(65), "]".repeat(65));
        assert_eq!(check(&deep).unwrap_err().line, 1);
        let keys = format!("a: 1\nx: {}a\n", "? ".repeat(17));
        let e = check(&keys).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("explicit keys"), "{e}");
    }
}

/// YAML → JSON, with non-string keys stringified and tags dropped; whole
/// floats are integers and infinities and NaN (which JSON lacks) null.
pub fn to_json(v: serde_yaml::Value) -> serde_json::Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => serde_json::Value::Null,
        Y::Bool(b) => serde_json::Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                serde_json::Value::from(i)
            } else if let Some(u) = n.as_u64() {
                serde_json::Value::from(u)
            } else {
                // One kind of number, as the peer's JavaScript has: `1.5e3`
                // is 1500, as an integer written so would be.
                n.as_f64()
                    .map_or(serde_json::Value::Null, super::js::number_value)
            }
        }
        Y::String(s) => serde_json::Value::String(s),
        Y::Sequence(items) => serde_json::Value::Array(items.into_iter().map(to_json).collect()),
        Y::Mapping(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let key = match to_json(k) {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, to_json(v));
            }
            serde_json::Value::Object(out)
        }
        Y::Tagged(t) => to_json(t.value),
    }
}

/// Why a data file's YAML cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    TooComplex(#[from] TooComplex),
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// A YAML text (a data file, a request) as JSON, read as the peer's `yaml`
/// package reads it: YAML 1.2's core schema for plain scalars (`0644` is
/// 644; see [`super::yamlpos`]), one kind of number (`1.0` is 1). Workflow
/// files are read the same way, with positions kept.
pub fn read(text: &str) -> Result<serde_json::Value, ReadError> {
    check(text)?;
    let mut value = to_json(serde_yaml::from_str::<serde_yaml::Value>(text)?);
    if let Some(node) = super::yamlpos::positions(text) {
        super::yamlpos::apply_core_schema(&mut value, &node);
    }
    Ok(value)
}
