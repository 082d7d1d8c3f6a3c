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
