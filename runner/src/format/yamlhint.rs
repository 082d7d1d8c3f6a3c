//! What a YAML parser's error means for the author: the parser says where it
//! gave up in its own terms ("found character that cannot start any token",
//! "mapping values are not allowed in this context"); the usual causes are
//! a tab, or a line indented under a key that already has a value. These
//! are told in the author's terms, with the line to change.

/// A better message for a YAML error at `line`/`col` (1-based, within
/// `text`) whose parser message is `raw`, and a hint; None when the cause
/// is not one of those known. `file_line` gives a line of `text` as the
/// file numbers it (a step block starts below its fence).
pub fn explain(
    text: &str,
    line: usize,
    col: usize,
    raw: &str,
    file_line: &dyn Fn(usize) -> usize,
) -> Option<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.get(line.checked_sub(1)?).copied().unwrap_or("");
    if let Some(tab) = tab_in_indent(&lines, line) {
        return Some((
            format!(
                "a tab indents line {}: YAML indents with spaces only",
                file_line(tab)
            ),
            "replace the tab with spaces (two per level, as the lines around it)".into(),
        ));
    }
    if raw.starts_with("mapping values are not allowed") {
        return over_indented(&lines, line).or_else(|| colon_in_value(at, col));
    }
    None
}

/// `key: a: b`: a second `: ` on the line, past the key's own.
fn colon_in_value(line: &str, col: usize) -> Option<(String, String)> {
    let key = key_of(line)?;
    let colon = line.find(':')?;
    if col <= colon + 1 {
        return None;
    }
    Some((
        format!("the value of `{key}` has a `: ` in it, which YAML reads as another key"),
        format!("quote the value: `{key}: '{}'`", line[colon + 1..].trim()),
    ))
}

/// The line (1-based) whose indentation has a tab: the error's line or,
/// as the scanner may stop a line later, the one before it.
fn tab_in_indent(lines: &[&str], line: usize) -> Option<usize> {
    [line, line.saturating_sub(1)]
        .into_iter()
        .filter(|&n| n >= 1)
        .find(|&n| {
            lines.get(n - 1).is_some_and(|l| {
                l.chars()
                    .take_while(|c| c.is_whitespace())
                    .any(|c| c == '\t')
            })
        })
}

/// `key:` at the start of a line (after its indentation and a `- `).
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start().trim_start_matches("- ").trim_start();
    let (k, _) = t.split_once(':')?;
    let k = k.trim();
    (!k.is_empty() && !k.contains(' ') && !k.starts_with(['{', '[', '\'', '"', '#'])).then_some(k)
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A `key:` line indented more than the key above it, which already has a
/// value on its line: YAML cannot put a key inside a plain value.
fn over_indented(lines: &[&str], line: usize) -> Option<(String, String)> {
    let here = *lines.get(line.checked_sub(1)?)?;
    let key = key_of(here)?;
    let above = lines[..line - 1]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
    let parent = key_of(above)?;
    let value = above.split_once(':')?.1.trim();
    if indent(here) <= indent(above) || value.is_empty() || value.starts_with(['|', '>']) {
        return None;
    }
    Some((
        format!(
            "`{key}:` is indented under `{parent}:`, which already has a value (`{value}`)"
        ),
        format!(
            "did you mean to indent `{key}:` as `{parent}:` is ({} spaces)? A key inside `{parent}:` needs `{parent}:` alone on its line",
            indent(above)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::explain;

    #[test]
    fn a_tab_is_named_with_its_line() {
        let (msg, hint) = explain(
            "action: core.set\ninputs:\n\tx: 1\n",
            3,
            1,
            "found character that cannot start any token",
            &|n| n + 10,
        )
        .unwrap();
        assert_eq!(msg, "a tab indents line 13: YAML indents with spaces only");
        assert!(hint.contains("spaces"), "{hint}");
    }

    #[test]
    fn a_key_indented_under_a_value_says_which() {
        let (msg, hint) = explain(
            "action: core.set\n  inputs:\n  x: 1\n",
            2,
            9,
            "mapping values are not allowed in this context",
            &|n| n,
        )
        .unwrap();
        assert_eq!(
            msg,
            "`inputs:` is indented under `action:`, which already has a value (`core.set`)"
        );
        assert!(hint.starts_with("did you mean to indent `inputs:` as `action:` is (0 spaces)?"));
        let (msg, _) = explain(
            "inputs:\n  x: 1\n   y: 2\n",
            3,
            5,
            "mapping values are not allowed in this context",
            &|n| n,
        )
        .unwrap();
        assert_eq!(
            msg,
            "`y:` is indented under `x:`, which already has a value (`1`)"
        );
    }

    #[test]
    fn a_colon_inside_a_plain_value_asks_for_quotes() {
        let (msg, hint) = explain(
            "message: note: this\n",
            1,
            14,
            "mapping values are not allowed in this context",
            &|n| n,
        )
        .unwrap();
        assert_eq!(
            msg,
            "the value of `message` has a `: ` in it, which YAML reads as another key"
        );
        assert_eq!(hint, "quote the value: `message: 'note: this'`");
    }

    #[test]
    fn other_errors_keep_the_parsers_words() {
        assert!(explain(
            "a: [1, 2\n",
            2,
            1,
            "did not find expected ',' or ']'",
            &|n| n
        )
        .is_none());
    }
}
