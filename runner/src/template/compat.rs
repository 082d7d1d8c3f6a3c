//! Nunjucks syntax the peer's workflows use that minijinja lacks, rewritten
//! before compiling (error positions are mapped back):
//!
//! - `{% elseif c %}` is `{% elif c %}`;
//! - `{% for k, v in obj %}` over a map iterates its `[key, value]` pairs
//!   (minijinja, like Jinja, would need `obj | items`); over a list it is
//!   unchanged.
//!
//! Nothing inside `{% raw %}…{% endraw %}` is touched.

use minijinja::value::ValueKind;
use minijinja::{Error, Value};

use super::conditions::{tokenize, Kind};
use super::regexp;
use super::rewrite::{apply, Edit, Translated};
use super::values::list;

/// Name of the global function wrapped around `for k, v in …` iterables.
pub(crate) const PAIRS_FN: &str = "__nunjucks_pairs";

/// `__nunjucks_pairs(x)`: the `[key, value]` pairs of a map; anything else unchanged.
pub(crate) fn pairs(v: Value) -> Result<Value, Error> {
    if v.kind() != ValueKind::Map {
        return Ok(v);
    }
    let pairs = super::values::map_pairs(&v)?;
    Ok(list(
        pairs
            .into_iter()
            .map(|(k, item)| list(vec![k, item]))
            .collect(),
    ))
}

/// Where a `{% … %}` tag's keyword and content are.
struct Tag {
    /// Offset of the keyword (`for`, `elseif`, …).
    kw_start: usize,
    kw: String,
    /// Content after the keyword, up to the closing `%}` (and its `-`/`+`).
    content: std::ops::Range<usize>,
    /// Offset just past the closing `%}`.
    end: usize,
}

fn parse_tag(src: &str, open: usize) -> Option<Tag> {
    let b = src.as_bytes();
    let mut i = open + 2;
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let kw_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let kw = src[kw_start..i].to_string();
    let content_start = i;
    while i + 1 < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'%' if b[i + 1] == b'}' => {
                let content_end = if i > content_start && matches!(b[i - 1], b'-' | b'+') {
                    i - 1
                } else {
                    i
                };
                return Some(Tag {
                    kw_start,
                    kw,
                    content: content_start..content_end,
                    end: i + 2,
                });
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// For `for a, b in EXPR [if …] [recursive]`: the byte range of `EXPR`
/// when there are two or more loop variables.
fn pairs_target(src: &str, content: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
    let base = content.start;
    let toks = tokenize(&src[content]);
    let mut depth = 0usize;
    let mut in_at = None;
    let mut commas = 0;
    for (j, t) in toks.iter().enumerate() {
        match t.kind {
            Kind::Open => depth += 1,
            Kind::Close => depth = depth.saturating_sub(1),
            Kind::Comma if depth == 0 => commas += 1,
            Kind::Ident if depth == 0 && t.text == "in" => {
                in_at = Some(j);
                break;
            }
            _ => {}
        }
    }
    let in_at = in_at?;
    if commas == 0 {
        return None;
    }
    let mut first = None;
    let mut last = None;
    depth = 0;
    for t in &toks[in_at + 1..] {
        match t.kind {
            Kind::Space => continue,
            Kind::Open => depth += 1,
            Kind::Close => depth = depth.saturating_sub(1),
            Kind::Ident if depth == 0 && (t.text == "if" || t.text == "recursive") => break,
            _ => {}
        }
        first.get_or_insert(t.start);
        last = Some(t.start + t.text.len());
    }
    Some(base + first?..base + last?)
}

/// Rewrites Nunjucks-only syntax (see the module docs); `None` if there is
/// nothing to rewrite.
pub(crate) fn nunjucks_compat(src: &str) -> Option<Translated> {
    let lengths = src.contains(".length");
    let comments = src.contains("{#");
    let regexps = src.contains("r/");
    if !src.contains("elseif") && !src.contains("for") && !lengths && !comments && !regexps {
        return None;
    }
    let mut literals: Vec<Edit> = Vec::new();
    // (offset, bytes removed, text inserted)
    let mut edits: Vec<(usize, usize, &'static str)> = Vec::new();
    let mut i = 0;
    let mut in_raw = false;
    while let Some(p) = src[i..].find("{%") {
        let open = i + p;
        let Some(tag) = parse_tag(src, open) else {
            break;
        };
        i = tag.end;
        if regexps && !in_raw && tag.kw != "raw" {
            literals.extend(regexp::literal_edits(src, tag.content.clone()));
        }
        match tag.kw.as_str() {
            "raw" => in_raw = true,
            "endraw" => in_raw = false,
            _ if in_raw => {}
            _ if lengths => {
                edits.extend(length_edits(src, tag.kw_start..tag.content.end));
                match tag.kw.as_str() {
                    "elseif" => edits.push((tag.kw_start, 6, "elif")),
                    "for" => {
                        if let Some(target) = pairs_target(src, tag.content.clone()) {
                            edits.push((target.start, 0, "__nunjucks_pairs("));
                            edits.push((target.end, 0, ")"));
                        }
                    }
                    _ => {}
                }
            }
            "elseif" => edits.push((tag.kw_start, 6, "elif")),
            "for" => {
                if let Some(target) = pairs_target(src, tag.content) {
                    edits.push((target.start, 0, "__nunjucks_pairs("));
                    edits.push((target.end, 0, ")"));
                }
            }
            _ => {}
        }
    }
    let raw = RawBlocks::of(src);
    if lengths {
        edits.extend(expression_length_edits(src, &raw));
    }
    if comments {
        edits.extend(comment_edits(src, &raw));
    }
    if regexps {
        literals.extend(expressions(src, &raw).flat_map(|range| regexp::literal_edits(src, range)));
    }
    apply(
        src,
        edits
            .into_iter()
            .map(|(at, removed, text)| Edit::new(at, removed, text))
            .chain(literals)
            .collect(),
    )
}

/// `x.length` as JavaScript reads it (a string's or list's length, a
/// mapping's `length`): `x|__js_length` in the expression `range` of `src`.
/// Not a call (`.length(`), not a name of its own (`.lengths`).
fn length_edits(src: &str, range: std::ops::Range<usize>) -> Vec<(usize, usize, &'static str)> {
    let toks = tokenize(&src[range.clone()]);
    let mut out = Vec::new();
    for i in 1..toks.len().saturating_sub(1) {
        let (before, dot, name) = (&toks[i - 1], &toks[i], &toks[i + 1]);
        let follows = matches!(before.kind, Kind::Ident | Kind::Close | Kind::Str);
        let called = toks[i + 2..]
            .iter()
            .find(|t| t.kind != Kind::Space)
            .is_some_and(|t| t.text == "(");
        if dot.text == "."
            && name.kind == Kind::Ident
            && name.text == "length"
            && follows
            && !called
        {
            out.push((range.start + dot.start, ".length".len(), LENGTH_FILTER));
        }
    }
    out
}

/// The filter `.length` becomes (see [`js_length`]).
const LENGTH_FILTER: &str = "|__js_length";

/// `x.length`: a text's length (in UTF-16 units, as JavaScript counts), a
/// list's, a mapping's `length` field; undefined otherwise.
pub(crate) fn js_length(v: Value) -> Value {
    match v.kind() {
        ValueKind::String => Value::from(v.as_str().unwrap_or_default().encode_utf16().count()),
        ValueKind::Seq | ValueKind::Iterable => Value::from(v.len().unwrap_or(0)),
        ValueKind::Map => v.get_attr("length").unwrap_or_default(),
        _ => Value::UNDEFINED,
    }
}

/// Where `{% raw %}` … `{% endraw %}` blocks are in a text, found once (a
/// search per tag would make preparing a template quadratic in its tags).
pub(crate) struct RawBlocks(Vec<std::ops::Range<usize>>);

impl RawBlocks {
    pub(crate) fn of(src: &str) -> Self {
        let mut blocks = Vec::new();
        if !src.contains("raw") {
            return RawBlocks(blocks);
        }
        let mut i = 0;
        while let Some(p) = src[i..].find("{%") {
            let open = i + p;
            let Some(tag) = parse_tag(src, open) else {
                break;
            };
            i = tag.end;
            if tag.kw == "raw" {
                let end = src[i..].find("endraw").map_or(src.len(), |q| i + q);
                blocks.push(open..end);
                i = end;
            }
        }
        RawBlocks(blocks)
    }

    /// Whether offset `at` is inside one of the blocks.
    pub(crate) fn contains(&self, at: usize) -> bool {
        let after = self.0.partition_point(|b| b.start < at);
        after > 0 && self.0[after - 1].contains(&at)
    }
}

/// A `{# … #}` comment leaves the whitespace around it as an expression
/// does, as in Nunjucks (whose `trimBlocks`/`lstripBlocks` are for block
/// tags only): a line holding only a comment keeps its line break. So it
/// becomes an expression that prints nothing; a comment with its own
/// whitespace control (`{#-`, `-#}`) is left to it.
fn comment_edits(src: &str, raw: &RawBlocks) -> Vec<(usize, usize, &'static str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = src[i..].find("{#") {
        let open = i + p;
        let Some(q) = src[open + 2..].find("#}") else {
            break;
        };
        let end = open + 2 + q + 2;
        let body = &src[open + 2..end - 2];
        let controlled = body.starts_with(['-', '+']) || body.ends_with(['-', '+']);
        if !controlled && !raw.contains(open) {
            out.push((open, end - open, "{{ '' }}"));
        }
        i = end;
    }
    out
}

/// [`length_edits`] for every `{{ … }}` of `src` (outside `{% raw %}`).
fn expression_length_edits(src: &str, raw: &RawBlocks) -> Vec<(usize, usize, &'static str)> {
    expressions(src, raw)
        .flat_map(|range| length_edits(src, range))
        .collect()
}

/// The insides of the `{{ … }}` outside raw blocks.
fn expressions<'a>(
    src: &'a str,
    raw: &'a RawBlocks,
) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
    let mut i = 0;
    std::iter::from_fn(move || loop {
        let open = i + src[i..].find("{{")? + 2;
        let close = open + src[open..].find("}}")?;
        i = close + 2;
        if !raw.contains(open) {
            return Some(open..close);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::Templates;
    use super::*;
    use serde_json::json;

    fn render(src: &str) -> String {
        let vars = json!({"obj": {"b": 2, "a": 1}, "pairs": [["x", 1], ["y", 2]], "n": 2});
        let ctx = Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        );
        Templates::new()
            .render_str(src, &ctx)
            .unwrap_or_else(|e| panic!("{src}: {e:?}"))
    }

    #[test]
    fn rewrites() {
        let t = |s: &str| nunjucks_compat(s).map(|t| t.text);
        assert_eq!(
            t("{% if a %}1{%- elseif b -%}2{% endif %}").unwrap(),
            "{% if a %}1{%- elif b -%}2{% endif %}"
        );
        assert_eq!(
            t("{% for k, v in data.map if v %}").unwrap(),
            "{% for k, v in __nunjucks_pairs(data.map) if v %}"
        );
        assert_eq!(
            t("{%- for k, v in obj | dictsort -%}").unwrap(),
            "{%- for k, v in __nunjucks_pairs(obj | dictsort) -%}"
        );
        assert_eq!(t("{% for x in items %}"), None);
        assert_eq!(t("{% raw %}{% elseif %}{% endraw %}"), None);
        assert_eq!(t("for fun"), None);
        assert_eq!(
            t("{% set s = '%}' %}{% elseif x %}").unwrap(),
            "{% set s = '%}' %}{% elif x %}"
        );
    }

    #[test]
    fn renders_like_nunjucks() {
        assert_eq!(
            render("{% if n == 1 %}one{% elseif n == 2 %}two{% else %}many{% endif %}"),
            "two"
        );
        assert_eq!(
            render("{% for k, v in obj %}{{ k }}={{ v }};{% endfor %}"),
            "b=2;a=1;"
        );
        assert_eq!(
            render("{% for k, v in pairs %}{{ k }}={{ v }};{% endfor %}"),
            "x=1;y=2;"
        );
        assert_eq!(render("{% for k in obj %}{{ k }}{% endfor %}"), "ba");
        assert_eq!(render("{% raw %}{% elseif %}{% endraw %}"), "{% elseif %}");
    }

    #[test]
    fn positions_after_a_rewrite_point_into_the_source() {
        let vars = json!({"obj": {"a": 1}});
        let ctx = Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        );
        let src = "{% for k, v in obj %}{{ v | nope }}{% endfor %}";
        let e = Templates::new().render_str(src, &ctx).unwrap_err();
        assert_eq!((e.line, e.col), (Some(1), Some(29)), "{e:?}");
    }
}
