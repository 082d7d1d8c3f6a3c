//! Bounds on a template's shape, checked on the author's text before
//! anything parses it. minijinja's parser limits nesting (brackets, blocks)
//! but reads a flat chain (`a.b.b.b…`, `a and a and …`, `x|f|f…`) into a
//! tree as deep as the chain is long, and everything after it (our rewrite,
//! minijinja's compiler, dropping the tree) recurses over that depth: a long
//! enough chain overflows the thread's stack and aborts the process. So one
//! tag may chain at most [`MAX_OPERATORS`] operators.

use std::ops::Range;

use super::{line_col, TemplateError};

/// The most operators (`.`, `[`, `(`, `|`, arithmetic, comparisons, `and`,
/// `or`, `not`, `is`, `in`, `if`) one `{{ … }}`, `{% … %}` or condition may
/// hold. Far above what a person writes; a fifth of what overflows a 2 MiB
/// stack.
pub const MAX_OPERATORS: usize = 1_000;

/// An error if one tag of `src` (a template) holds more than
/// [`MAX_OPERATORS`] operators, placed at the tag's start.
pub(crate) fn check_template(src: &str) -> Result<(), TemplateError> {
    let b = src.as_bytes();
    let mut i = 0;
    while let Some(p) = src[i..].find('{') {
        let open = i + p;
        let close: &[u8] = match b.get(open + 1) {
            Some(b'{') => b"}}",
            Some(b'%') => b"%}",
            Some(b'#') => {
                // A comment holds no code; it may hold `{{`.
                i = src[open + 2..]
                    .find("#}")
                    .map_or(b.len(), |q| open + 2 + q + 2);
                continue;
            }
            _ => {
                i = open + 1;
                continue;
            }
        };
        let end = tag_end(b, open + 2, close);
        check_tag(src, open + 2..end, open)?;
        i = (end + 2).min(b.len());
    }
    Ok(())
}

/// Where the string quoted at `open` ends (its closing quote, or the end
/// of the text), backslash escapes skipped.
fn closing_quote(b: &[u8], open: usize) -> usize {
    let q = b[open];
    let mut i = open + 1;
    while i < b.len() && b[i] != q {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    i
}

/// Where the tag whose content starts at `from` closes (at `close`, outside
/// quotes), or the end of the text.
fn tag_end(b: &[u8], from: usize, close: &[u8]) -> usize {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = closing_quote(b, i),
            _ if b[i..].starts_with(close) => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The same for the bare expression `src[range]` (positions in `src`).
pub(crate) fn check_expression(src: &str, range: Range<usize>) -> Result<(), TemplateError> {
    let at = range.start;
    check_tag(src, range, at)
}

/// The operators of an expression, outside its quoted strings (`==` counts
/// twice: an upper bound is what matters).
fn operators(expr: &str) -> usize {
    let b = expr.as_bytes();
    let mut count = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = closing_quote(b, i),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &expr[start..i];
                count += usize::from(matches!(word, "and" | "or" | "not" | "is" | "in" | "if"));
                continue;
            }
            c if b".[(|+-*/%~<>=!".contains(&c) => count += 1,
            _ => {}
        }
        i += 1;
    }
    count
}

fn check_tag(src: &str, range: Range<usize>, at: usize) -> Result<(), TemplateError> {
    let content = &src[range];
    // Cheap before tokenising: fewer bytes than the bound cannot exceed it.
    if content.len() <= MAX_OPERATORS {
        return Ok(());
    }
    let count = operators(content);
    if count <= MAX_OPERATORS {
        return Ok(());
    }
    let (line, col) = line_col(src, at);
    Err(TemplateError {
        message: format!(
            "this expression chains {count} operators; one tag may hold at most {MAX_OPERATORS}: \
             compute the value in steps (`{{% set %}}`) or in a script step"
        ),
        path: Vec::new(),
        line: Some(line),
        col: Some(col),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_chain_is_refused_where_its_tag_starts() {
        let chain = format!("x\n  {{{{ a{} }}}}", ".b".repeat(MAX_OPERATORS + 1));
        let e = check_template(&chain).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.line, e.col),
            (
                "this expression chains 1001 operators; one tag may hold at most 1000: compute the value in steps (`{% set %}`) or in a script step",
                Some(2),
                Some(3)
            )
        );
        let words = format!("a{}", " and a".repeat(MAX_OPERATORS + 1));
        assert!(check_expression(&words, 0..words.len()).is_err());
    }

    #[test]
    fn long_text_comments_and_literals_pass() {
        let text = "word. ".repeat(10_000);
        let comment = format!("{{# {} #}}", "a.b".repeat(2_000));
        let literal = format!("{{{{ [{}] }}}}", "'x', ".repeat(5_000));
        let chain = format!("{{{{ a{} }}}}", ".b".repeat(MAX_OPERATORS));
        for ok in [&text, &comment, &literal, &chain] {
            assert_eq!(check_template(ok), Ok(()));
        }
    }
}
