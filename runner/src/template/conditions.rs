//! Conditions (`if`, `while`, `filter`, `conditions:`): real expressions,
//! with the JavaScript operators the peer's users write translated.
//!
//! Accepted forms (see [`Templates::eval_condition`]):
//! - an expression: `search_results.found`, `x > 3 and not y`,
//!   `a.count >= b.min`, `first.status == 'completed'`;
//! - one `{{ expr }}` (the seed's `'{{ search_results.found }}'`): the
//!   expression is evaluated;
//! - a template mixing text and tags (`"{{ a }}-{{ b }}"`): it is rendered
//!   and the text is tested ([`is_truthy_text`]).
//!
//! Outside string literals `===`→`==`, `!==`→`!=`, `&&`→`and`, `||`→`or`,
//! `!x`→`not x`, and `null`/`undefined`→`none`.

use minijinja::Value;

use super::js_ops::truthy;
use super::rewrite::Translated;
use super::values::{is_truthy_text, to_json};
use super::{has_tags, limits, prepare_expression, single_expression, TemplateError, Templates};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Space,
    Str,
    Num,
    Ident,
    Op,
    Open,
    Close,
    Comma,
    Colon,
}

#[derive(Debug, Clone)]
pub(crate) struct Tok {
    pub kind: Kind,
    pub text: String,
    /// Source offset of the token's first byte.
    pub start: usize,
    /// Copied from the source (bytes map one to one) or generated.
    verbatim: bool,
    /// `none`/`None`/`null`/`undefined` used as a literal.
    null: bool,
}

/// Splits an expression into tokens (strings, numbers, names, operators,
/// brackets, whitespace) with their source offsets.
pub(crate) fn tokenize(src: &str) -> Vec<Tok> {
    const OPS: [&str; 10] = ["===", "!==", "==", "!=", "<=", ">=", "&&", "||", "**", "//"];
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        let kind = if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            Kind::Space
        } else if c == b'\'' || c == b'"' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            Kind::Str
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            Kind::Num
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            Kind::Ident
        } else if let Some(op) = OPS.iter().find(|op| src[i..].starts_with(**op)) {
            i += op.len();
            Kind::Op
        } else {
            i += src[i..].chars().next().map_or(1, char::len_utf8);
            match c {
                b'(' | b'[' | b'{' => Kind::Open,
                b')' | b']' | b'}' => Kind::Close,
                b',' => Kind::Comma,
                b':' => Kind::Colon,
                _ => Kind::Op,
            }
        };
        toks.push(Tok {
            kind,
            text: src[start..i].to_string(),
            start,
            verbatim: true,
            null: false,
        });
    }
    toks
}

fn word(text: &str, start: usize) -> Tok {
    Tok {
        kind: Kind::Ident,
        text: text.to_string(),
        start,
        verbatim: false,
        null: false,
    }
}

fn punct(text: &str, kind: Kind, start: usize) -> Tok {
    Tok {
        kind,
        text: text.to_string(),
        start,
        verbatim: false,
        null: false,
    }
}

fn is_comparison(t: &Tok) -> bool {
    t.kind == Kind::Op
        && matches!(
            t.text.as_str(),
            "==" | "!=" | "===" | "!==" | "<" | ">" | "<=" | ">="
        )
}

/// Tokens that end an operand of a comparison.
fn is_boundary(t: &Tok) -> bool {
    matches!(t.kind, Kind::Comma | Kind::Colon)
        || is_comparison(t)
        || (t.kind == Kind::Ident
            && matches!(t.text.as_str(), "and" | "or" | "not" | "if" | "else" | "in"))
}

fn prev_sig(toks: &[Tok], i: usize) -> Option<usize> {
    (0..i).rev().find(|&j| toks[j].kind != Kind::Space)
}

fn next_sig(toks: &[Tok], i: usize) -> Option<usize> {
    (i + 1..toks.len()).find(|&j| toks[j].kind != Kind::Space)
}

/// First token of the operand that ends just before token `end`.
fn operand_start(toks: &[Tok], end: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut first = None;
    for j in (0..end).rev() {
        let t = &toks[j];
        match t.kind {
            Kind::Space => continue,
            Kind::Close => depth += 1,
            Kind::Open if depth == 0 => break,
            Kind::Open => depth -= 1,
            _ if depth == 0 && is_boundary(t) => break,
            _ => {}
        }
        first = Some(j);
    }
    first
}

/// Last token of the operand that starts just after token `start`.
fn operand_end(toks: &[Tok], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut last = None;
    for (j, t) in toks.iter().enumerate().skip(start + 1) {
        match t.kind {
            Kind::Space => continue,
            Kind::Open => depth += 1,
            Kind::Close if depth == 0 => break,
            Kind::Close => depth -= 1,
            _ if depth == 0 && is_boundary(t) && !(last.is_none() && t.text == "not") => break,
            _ => {}
        }
        last = Some(j);
    }
    last
}

/// Rewrites `x == null` / `null != x` (and `none`, `undefined`) into
/// `(x) is nullish` / `(x) is not nullish`, so that a missing value equals
/// null as in JavaScript. Returns false when nothing was rewritten.
fn rewrite_null_comparisons(toks: &mut Vec<Tok>) -> bool {
    let mut changed = false;
    let mut k = 0;
    while k < toks.len() {
        let t = &toks[k];
        if !(t.kind == Kind::Op && matches!(t.text.as_str(), "==" | "!=" | "===" | "!==")) {
            k += 1;
            continue;
        }
        let negate = t.text.starts_with('!');
        let op_start = t.start;
        let ends_after = |toks: &[Tok], j: usize| {
            next_sig(toks, j).is_none_or(|n| toks[n].kind == Kind::Close || is_boundary(&toks[n]))
        };
        let starts_before = |toks: &[Tok], j: usize| {
            prev_sig(toks, j).is_none_or(|p| toks[p].kind == Kind::Open || is_boundary(&toks[p]))
        };
        // `operand op null`
        let right = next_sig(toks, k).filter(|&n| toks[n].null && ends_after(toks, n));
        let replace = if let (Some(n), Some(first)) = (right, operand_start(toks, k)) {
            Some((first, prev_sig(toks, k).unwrap_or(first), k, n))
        } else {
            // `null op operand`
            let left = prev_sig(toks, k).filter(|&p| toks[p].null && starts_before(toks, p));
            match (left, operand_end(toks, k)) {
                (Some(p), Some(last)) => Some((next_sig(toks, k).unwrap_or(last), last, p, last)),
                _ => None,
            }
        };
        let Some((first, last, from, to)) = replace else {
            k += 1;
            continue;
        };
        let operand: Vec<Tok> = toks[first..=last].to_vec();
        let mut new = vec![punct("(", Kind::Open, toks[first].start)];
        new.extend(operand);
        new.push(punct(")", Kind::Close, op_start));
        new.push(word("is", op_start));
        if negate {
            new.push(word("not", op_start));
        }
        new.push(word("nullish", op_start));
        let (from, to) = (from.min(first), to.max(last));
        let len = new.len();
        toks.splice(from..=to, new);
        k = from + len;
        changed = true;
    }
    changed
}

/// Translates JavaScript operators outside string literals: `===`→`==`,
/// `!==`→`!=`, `&&`→`and`, `||`→`or`, `!x`→`not x`, `null`/`undefined`→`none`;
/// comparisons with a null literal become `is nullish` tests (so a missing
/// value equals null). Returns `None` when nothing needs translating.
pub(crate) fn translate_js(src: &str) -> Option<Translated> {
    let maybe = [
        "&&",
        "||",
        "!",
        "null",
        "undefined",
        "none",
        "None",
        ".length",
    ]
    .iter()
    .any(|p| src.contains(p));
    if !maybe {
        return None;
    }
    let mut toks = tokenize(src);
    let mut changed = false;
    for i in 0..toks.len() {
        let after_dot = prev_sig(&toks, i).is_some_and(|p| toks[p].text == ".");
        let t = &mut toks[i];
        let replacement = match (t.kind, t.text.as_str()) {
            (Kind::Op, "&&") => Some(("and", Kind::Ident)),
            (Kind::Op, "||") => Some(("or", Kind::Ident)),
            (Kind::Op, "!") => Some(("not", Kind::Ident)),
            (Kind::Ident, "null" | "undefined") if !after_dot => Some(("none", Kind::Ident)),
            _ => None,
        };
        if let Some((text, kind)) = replacement {
            *t = Tok {
                kind,
                text: text.to_string(),
                start: t.start,
                verbatim: false,
                null: false,
            };
            changed = true;
        }
        if t.kind == Kind::Ident && !after_dot && matches!(t.text.as_str(), "none" | "None") {
            t.null = true;
        }
    }
    // `x.length` as JavaScript reads it (see `compat::js_length`).
    for i in 1..toks.len().saturating_sub(1) {
        let follows = matches!(toks[i - 1].kind, Kind::Ident | Kind::Close | Kind::Str);
        let called = next_sig(&toks, i + 1).is_some_and(|n| toks[n].text == "(");
        if toks[i].text == "." && toks[i + 1].text == "length" && follows && !called {
            toks[i] = punct("|", Kind::Op, toks[i].start);
            toks[i + 1] = word("__js_length", toks[i + 1].start);
            changed = true;
        }
    }
    changed |= rewrite_null_comparisons(&mut toks);
    if !changed {
        return None;
    }
    let mut text = String::with_capacity(src.len() + 16);
    let mut origin = Vec::with_capacity(src.len() + 16);
    for t in &toks {
        if t.verbatim {
            text.push_str(&t.text);
            origin.extend(t.start..t.start + t.text.len());
        } else {
            let padded = if t.kind == Kind::Ident {
                format!(" {} ", t.text)
            } else {
                t.text.clone()
            };
            text.push_str(&padded);
            origin.extend(std::iter::repeat_n(t.start, padded.len()));
        }
    }
    origin.push(src.len());
    Some(Translated { text, origin })
}

impl Templates {
    /// Evaluates a condition to a boolean.
    ///
    /// Names are looked up in `ctx`, where step metadata answers to bare step
    /// ids (`first.status == 'completed'`, as in the peer).
    ///
    /// - A bare expression (JavaScript operators accepted, see the module
    ///   docs) is evaluated; its value's truthiness decides, as in
    ///   JavaScript: empty text, `0`, NaN, `false`, none and undefined are
    ///   false, empty lists and maps true.
    /// - One `{{ expr }}` (after trimming) evaluates `expr` the same way,
    ///   except that a text result is judged like rendered text.
    /// - Any other template is rendered and the text decides: empty,
    ///   `false`, `0`, `null`, `none`, `undefined` (any case, trimmed) are false.
    ///
    /// An empty condition is an error.
    pub fn eval_condition(&self, cond: &str, ctx: &Value) -> Result<bool, TemplateError> {
        if cond.trim().is_empty() {
            return Err(TemplateError::new("empty condition"));
        }
        if let Some(range) = single_expression(cond) {
            // The value, then judged: text as rendered text, the rest as
            // JavaScript judges it.
            let v = self.eval_js_expr(cond, range.start, range.end, ctx, false)?;
            return Ok(match v.as_str() {
                Some(s) => is_truthy_text(s),
                None => truthy(&v),
            });
        }
        if has_tags(cond) {
            let text = self.render_str(cond, ctx)?;
            return Ok(is_truthy_text(&text));
        }
        let start = cond.len() - cond.trim_start().len();
        let end = cond.trim_end().len();
        Ok(truthy(&self.eval_js_expr(cond, start, end, ctx, true)?))
    }

    /// Evaluates `src[start..end]` as an expression after translating
    /// JavaScript operators (`boolean`: as a condition); error positions
    /// point into `src`.
    pub(crate) fn eval_js_expr(
        &self,
        src: &str,
        start: usize,
        end: usize,
        ctx: &Value,
        boolean: bool,
    ) -> Result<Value, TemplateError> {
        limits::check_expression(src, start..end)?;
        let prepared = prepare_expression(&src[start..end], boolean)?;
        self.eval_prepared(src, start, end, prepared, ctx)
    }

    /// Evaluates an expression (JavaScript operators accepted) to JSON.
    pub fn eval_condition_value(
        &self,
        cond: &str,
        ctx: &Value,
    ) -> Result<serde_json::Value, TemplateError> {
        let start = cond.len() - cond.trim_start().len();
        let end = cond.trim_end().len().max(start);
        let v = self.eval_js_expr(cond, start, end, ctx, false)?;
        to_json(&v).map_err(|e| TemplateError::from_mj(&e, cond, cond, |o| start + o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
        let vars = json!({
            "search_results": {"found": true, "count": 3, "results": [{"path": "a.md"}]},
            "empty": {"found": false, "count": 0, "results": []},
            "a": {"count": 5},
            "b": {"min": 3},
            "x": 4,
            "y": false,
            "word": "false",
            "nothing": null,
        });
        Templates::context(
            &json!({"query": "q"}),
            vars.as_object().unwrap(),
            // `x` is also a variable: the variable wins
            &json!({"first": {"status": "completed"}, "x": {"status": "failed"}}),
            &json!({}),
        )
    }

    fn cond(s: &str) -> bool {
        Templates::new()
            .eval_condition(s, &ctx())
            .unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    #[test]
    fn translation() {
        let t = |s: &str| {
            let out = translate_js(s)
                .map(|t| t.text)
                .unwrap_or_else(|| s.to_string());
            out.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        // `===` and `!==` are left to `js_rewrite`, which keeps them strict.
        assert_eq!(
            t("a === 1 && !b || c !== 2"),
            "a === 1 and not b or c !== 2"
        );
        assert_eq!(t("a != b"), "a != b");
        assert_eq!(t("x == 'a && !b === null'"), "x == 'a && !b === null'");
        assert_eq!(t(r#"x == "it's \" && y""#), r#"x == "it's \" && y""#);
        assert_eq!(t("nullable && obj.null"), "nullable and obj.null");
        assert_eq!(t("a.b == null"), "(a.b) is nullish");
        assert_eq!(
            t("x > 1 && a.b[0] !== undefined"),
            "x > 1 and (a.b[0]) is not nullish"
        );
        assert_eq!(t("null == f(a, b) || y"), "(f(a, b)) is nullish or y");
        assert_eq!(t("(a | length) != none"), "((a | length)) is not nullish");
        assert_eq!(t("x == null ? 1 : 2"), "x == none ? 1 : 2");
        assert_eq!(t("[null, 1]"), "[ none , 1]");
        let tr = translate_js("a && b").unwrap();
        // the `b` of "a and b" maps back to offset 5
        assert_eq!(tr.source_offset(tr.text.rfind('b').unwrap()), 5);
    }

    #[test]
    fn bare_expressions() {
        assert!(cond("search_results.found"));
        assert!(!cond("empty.found"));
        assert!(cond("x > 3 and not y"));
        assert!(!cond("x > 4 and not y"));
        assert!(cond("a.count >= b.min"));
        assert!(!cond("b.min >= a.count"));
        assert!(cond("first.status == 'completed'"));
        assert!(!cond("first.status == 'failed'"));
        assert!(cond("steps.first.status == 'completed'"));
        assert!(cond("search_results.results"));
        // JavaScript's truthiness: an empty list is true, its length is not.
        assert!(cond("empty.results"));
        assert!(!cond("empty.results | length"));
        assert!(!cond("empty.results.length > 0"));
        assert!(!cond("missing_variable"));
        assert!(cond("'found' in search_results"));
    }

    #[test]
    fn js_operators() {
        assert!(cond("x === 4 && !y"));
        assert!(!cond("x !== 4 || y"));
        assert!(cond("nothing === null"));
        assert!(!cond("nothing !== null"));
        assert!(cond("missing == undefined"));
        assert!(cond("missing === null"));
        assert!(!cond("missing != null"));
        assert!(cond("nothing == none"));
        assert!(cond("null == search_results.missing"));
        assert!(cond("search_results.found !== null && x == 4"));
        assert!(!cond("search_results.found === null"));
        assert!(cond("!empty.found"));
        assert!(!cond("!search_results.found"));
        assert!(cond("x != 5"));
        // `==` is JavaScript's loose equality, `===` strict.
        assert!(cond("x == '4'"));
        assert!(!cond("x === '4'"));
        assert!(cond("x !== '4'"));
        assert!(cond("x === 4 && y == 0"));
    }

    #[test]
    fn single_expression_templates() {
        assert!(cond("{{ search_results.found }}"));
        assert!(!cond("{{ empty.found }}"));
        assert!(cond("  {{ x > 3 && !y }}  "));
        assert!(cond("{{ empty.results }}"));
        assert!(!cond("{{ empty.results | length > 0 }}"));
        // text results are judged like rendered text
        assert!(!cond("{{ word }}"));
        assert!(cond("{{ first.status }}"));
        assert!(!cond("{{ nothing }}"));
    }

    #[test]
    fn mixed_templates() {
        assert!(cond("{{ x }}-{{ y }}"));
        assert!(!cond("{% if y %}yes{% endif %}"));
        assert!(cond("{% if x %}yes{% endif %}"));
        assert!(!cond("{{ y }}{{ '' }}"));
        assert!(!cond("{{ '' }}{{ 0 }}"));
        assert!(!cond(" {% if false %}x{% endif %}None "));
    }

    #[test]
    fn condition_errors_have_positions() {
        let t = Templates::new();
        let e = t.eval_condition("x > ", &ctx()).unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("syntax error"), "{e:?}");
        let e = t.eval_condition("a && b ===", &ctx()).unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.col.is_some());
        let e = t.eval_condition("x | nosuchfilter", &ctx()).unwrap_err();
        assert!(e.message.contains("unknown filter"), "{e:?}");
        assert_eq!(e.col, Some(5));
        let e = t.eval_condition("   ", &ctx()).unwrap_err();
        assert_eq!(e.message, "empty condition");
    }

    #[test]
    fn condition_value() {
        let t = Templates::new();
        assert_eq!(
            t.eval_condition_value("x === 4 && 'yes'", &ctx()).unwrap(),
            json!("yes")
        );
    }
}
