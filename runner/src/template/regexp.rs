//! Nunjucks' regular-expression literals (`r/[0-9]+/g`), which its lexer
//! turns into a JavaScript `RegExp`. They are rewritten before compiling
//! into `__js_regexp('[0-9]+', 'g')`, a value that the string methods
//! (`replace`, `replaceAll`, `match`, `matchAll`, `split`, `search`), the
//! `replace` filter and its own `test` and `exec` read as JavaScript does.
//!
//! Patterns use Rust's regex syntax (see [`super::filters::js_regex`]): no
//! lookaround and no backreferences. A literal is a fresh value each time
//! it is evaluated, as in JavaScript, so `lastIndex` is always 0.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Error, ErrorKind, State, Value};
use regex::{Captures, Regex};

use super::filters::{js_regex, replace_js};
use super::rewrite::{apply, Edit, Translated};
use super::values::{list, room_for_items, text};

/// The global function a literal is rewritten to.
pub(crate) const REGEXP_FN: &str = "__js_regexp";

/// The flags Nunjucks' lexer reads after a literal's closing `/`.
const LITERAL_FLAGS: &[u8] = b"gimy";

/// A compiled `RegExp`.
#[derive(Debug)]
pub(crate) struct JsRegExp {
    source: String,
    flags: String,
    re: Regex,
}

impl JsRegExp {
    /// The `RegExp` a value holds, if it holds one.
    pub(crate) fn of(v: &Value) -> Option<Arc<JsRegExp>> {
        v.downcast_object::<JsRegExp>()
    }

    fn global(&self) -> bool {
        self.flags.contains('g')
    }

    /// `s.replace(re, repl)`, or `replaceAll` (which JavaScript refuses for
    /// a pattern without `g`).
    pub(crate) fn replace(&self, s: &str, repl: &str, all: bool) -> Result<String, Error> {
        if all && !self.global() {
            return Err(type_error(
                "replaceAll() must be given a global regular expression (add the `g` flag)",
            ));
        }
        let what = if all { "replaceAll()" } else { "replace()" };
        replace_js(&self.re, self.global(), s, repl, what)
    }

    /// `s.match(re)`: every match's text with `g`, else what `exec` gives;
    /// null when nothing matches.
    pub(crate) fn match_in(&self, s: &str) -> Result<Value, Error> {
        if !self.global() {
            return Ok(self.exec(s));
        }
        let all: Vec<Value> = self
            .re
            .find_iter(s)
            .map(|m| Value::from(m.as_str()))
            .collect();
        room_for_items("match()", all.len())?;
        Ok(if all.is_empty() {
            Value::from(())
        } else {
            list(all)
        })
    }

    /// `s.matchAll(re)` (as a list): each match as `exec` gives it.
    pub(crate) fn match_all(&self, s: &str) -> Result<Value, Error> {
        if !self.global() {
            return Err(type_error(
                "matchAll() must be given a global regular expression (add the `g` flag)",
            ));
        }
        let all: Vec<Value> = self
            .re
            .captures_iter(s)
            .map(|c| self.match_array(&c, s))
            .collect();
        room_for_items("matchAll()", all.len())?;
        Ok(list(all))
    }

    /// `s.search(re)`: the character index of the first match, or -1.
    pub(crate) fn search(&self, s: &str) -> Value {
        Value::from(
            self.re
                .find(s)
                .map_or(-1, |m| s[..m.start()].chars().count() as i64),
        )
    }

    /// `s.split(re, limit)`: the texts between matches, each followed by
    /// the match's groups, as ECMAScript's `@@split` gives them (an empty
    /// match never splits at the start of a piece).
    pub(crate) fn split(&self, s: &str, limit: Option<usize>) -> Result<Value, Error> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut out: Vec<Value> = Vec::new();
        if limit == 0 {
            return Ok(list(out));
        }
        if s.is_empty() {
            if !self.re.is_match(s) {
                out.push(Value::from(""));
            }
            return Ok(list(out));
        }
        let mut piece_start = 0;
        let mut from = 0;
        while from < s.len() {
            let Some(caps) = self.re.captures_at(s, from) else {
                break;
            };
            let whole = caps.get(0).expect("group 0 always matches");
            if whole.start() >= s.len() {
                break;
            }
            if whole.end() == piece_start {
                from = next_char(s, whole.start());
                continue;
            }
            out.push(Value::from(&s[piece_start..whole.start()]));
            for i in 1..caps.len() {
                out.push(group(&caps, i));
            }
            if out.len() >= limit {
                out.truncate(limit);
                return Ok(list(out));
            }
            room_for_items("split()", out.len())?;
            piece_start = whole.end();
            from = if whole.end() == whole.start() {
                next_char(s, whole.end())
            } else {
                whole.end()
            };
        }
        out.push(Value::from(&s[piece_start..]));
        out.truncate(limit);
        Ok(list(out))
    }

    /// `re.exec(s)` for a fresh `re`: the first match as a match array, or null.
    fn exec(&self, s: &str) -> Value {
        match self.re.captures(s) {
            Some(c) => self.match_array(&c, s),
            None => Value::from(()),
        }
    }

    fn match_array(&self, caps: &Captures, s: &str) -> Value {
        let whole = caps.get(0).expect("group 0 always matches");
        let names: Vec<&str> = self.re.capture_names().flatten().collect();
        let groups = if names.is_empty() {
            Value::UNDEFINED
        } else {
            Value::from_pairs(names.into_iter().map(|n| {
                (
                    n,
                    caps.name(n)
                        .map_or(Value::UNDEFINED, |m| Value::from(m.as_str())),
                )
            }))
        };
        Value::from_object(MatchArray {
            items: (0..caps.len()).map(|i| group(caps, i)).collect(),
            index: s[..whole.start()].chars().count(),
            input: s.to_string(),
            groups,
        })
    }
}

/// A group's text, or undefined when it took no part in the match.
fn group(caps: &Captures, i: usize) -> Value {
    caps.get(i)
        .map_or(Value::UNDEFINED, |m| Value::from(m.as_str()))
}

fn next_char(s: &str, at: usize) -> usize {
    at + s[at..].chars().next().map_or(1, char::len_utf8)
}

fn type_error(msg: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.to_string())
}

impl fmt::Display for JsRegExp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/{}", self.source, self.flags)
    }
}

impl Object for JsRegExp {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let flag = |c| Some(Value::from(self.flags.contains(c)));
        match key.as_str()? {
            "source" => Some(Value::from(self.source.as_str())),
            "flags" => Some(Value::from(self.flags.as_str())),
            "global" => flag('g'),
            "ignoreCase" => flag('i'),
            "multiline" => flag('m'),
            "sticky" => flag('y'),
            "lastIndex" => Some(Value::from(0)),
            _ => None,
        }
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State,
        name: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let arg = || args.first().map_or_else(|| "undefined".to_string(), text);
        match name {
            "test" => Ok(Value::from(self.re.is_match(&arg()))),
            "exec" => Ok(self.exec(&arg())),
            "toString" => Ok(Value::from(self.to_string())),
            // The environment's methods say what a regular expression has.
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_ref(), f)
    }
}

/// What `exec` and `match` give: the match and its groups, with `index`
/// (in characters), `input` and `groups` (named groups, or undefined).
#[derive(Debug)]
struct MatchArray {
    items: Vec<Value>,
    index: usize,
    input: String,
    groups: Value,
}

impl Object for MatchArray {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        if let Some(i) = key.as_usize() {
            return self.items.get(i).cloned();
        }
        match key.as_str()? {
            "length" => Some(Value::from(self.items.len())),
            "index" => Some(Value::from(self.index)),
            "input" => Some(Value::from(self.input.as_str())),
            "groups" => Some(self.groups.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.items.len())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.items.len())
    }
}

/// `__js_regexp(source, flags)`.
pub(crate) fn new_regexp(source: &str, flags: Option<&str>) -> Result<Value, Error> {
    let flags = flags.unwrap_or_default();
    let re = js_regex(source, Some(flags))?.re;
    Ok(Value::from_object(JsRegExp {
        source: source.to_string(),
        flags: flags.to_string(),
        re,
    }))
}

/// A bare expression with its literals rewritten; `None` when it has none.
pub(crate) fn literals(src: &str) -> Option<Translated> {
    if !src.contains("r/") {
        return None;
    }
    apply(src, literal_edits(src, 0..src.len()))
}

/// The literals in the code `range` of `src` (an expression, or the inside
/// of a tag), each as an edit to `__js_regexp('…', '…')`. A literal starts
/// with `r/` where a name could start, as Nunjucks' lexer reads it, and
/// runs to the next `/` not escaped by `\`; `g`, `i`, `m` and `y` after
/// it are its flags. Nothing inside a quoted string is a literal.
pub(crate) fn literal_edits(src: &str, range: Range<usize>) -> Vec<Edit> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut quote: Option<u8> = None;
    let mut i = range.start;
    while i < range.end {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == b'\'' || c == b'"' {
            quote = Some(c);
            i += 1;
            continue;
        }
        let starts_name =
            i == range.start || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if c == b'r' && starts_name && i + 1 < range.end && b[i + 1] == b'/' {
            if let Some((end, edit)) = literal(src, i, range.end) {
                out.push(edit);
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The literal starting at `at` (its `r`), if it closes before `end`.
fn literal(src: &str, at: usize, end: usize) -> Option<(usize, Edit)> {
    let b = src.as_bytes();
    let body_start = at + 2;
    let mut i = body_start;
    while i < end && b[i] != b'/' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    if i >= end {
        return None;
    }
    let body = &src[body_start..i];
    let flags_start = i + 1;
    let mut j = flags_start;
    while j < end && LITERAL_FLAGS.contains(&b[j]) {
        j += 1;
    }
    let flags = &src[flags_start..j];
    let quoted = body.replace('\\', "\\\\").replace('\'', "\\'");
    let call = format!("{REGEXP_FN}('{quoted}', '{flags}')");
    Some((j, Edit::new(at, j - at, call)))
}

#[cfg(test)]
mod tests {
    use super::super::Templates;
    use serde_json::{json, Value as Json};

    fn ctx() -> minijinja::Value {
        let vars = json!({"tag": "v12.3", "n": 1234});
        Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        )
    }

    fn ev(expr: &str) -> Result<Json, String> {
        Templates::new()
            .eval_condition_value(expr, &ctx())
            .map_err(|e| e.to_string())
    }

    fn render(src: &str) -> Result<String, String> {
        Templates::new()
            .render_str(src, &ctx())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_literal_works_in_conditions_expressions_and_tags() {
        assert_eq!(
            ev("r/^v[0-9]+/.test(tag) && tag.length > 2"),
            Ok(json!(true))
        );
        assert_eq!(ev("tag.match(r/[0-9]+/g)"), Ok(json!(["12", "3"])));
        assert_eq!(
            render("{% if r/^v/i.test(tag) %}{{ tag.replace(r/^v/, '') }}{% endif %}"),
            Ok("12.3".to_string())
        );
        // Not inside strings, not after a name's other letters.
        assert_eq!(
            render("{{ 'r/x/' ~ 'var/2' }}"),
            Ok("r/x/var/2".to_string())
        );
        assert_eq!(ev("n / 2"), Ok(json!(617)));
        // Raw blocks are text.
        assert_eq!(
            render("{% raw %}{{ r/x/ }}{% endraw %}"),
            Ok("{{ r/x/ }}".to_string())
        );
        // A quote or backslash in the pattern stays part of it.
        assert_eq!(ev(r#"'it\'s'.replace(r/'/, '')"#), Ok(json!("its")));
        assert_eq!(ev(r"'a.b'.split(r/\./)"), Ok(json!(["a", "b"])));
    }

    #[test]
    fn match_arrays_carry_index_input_and_groups() {
        assert_eq!(
            ev("r/(?<major>[0-9]+)\\.([0-9]+)/.exec(tag)"),
            Ok(json!(["12.3", "12", "3"]))
        );
        assert_eq!(ev("r/([0-9]+)/.exec(tag).index"), Ok(json!(1)));
        assert_eq!(
            ev("r/(?<major>[0-9]+)/.exec(tag).groups.major"),
            Ok(json!("12"))
        );
        assert_eq!(ev("r/x/.exec(tag)"), Ok(json!(null)));
        assert_eq!(
            ev("'a1b2'.matchAll(r/[a-z]([0-9])/g) | map(attribute=1) | list"),
            Ok(json!(["1", "2"]))
        );
    }

    #[test]
    fn any_text_is_rewritten_without_a_panic() {
        const PARTS: [&str; 14] = [
            "r/", "/", "\\", "'", "\"", "{{", "}}", "{%", "%}", "gi", "é", "x", " ", "r",
        ];
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..20_000 {
            let text: String = (0..rng.usize(0..14))
                .map(|_| PARTS[rng.usize(..PARTS.len())])
                .collect();
            let _ = super::literals(&text);
            let _ = super::super::compat::nunjucks_compat(&text);
            let _ = render(&text);
        }
    }

    #[test]
    fn split_follows_ecmascript() {
        assert_eq!(ev("''.split(r/,/)"), Ok(json!([""])));
        assert_eq!(ev("''.split(r/(?:)/)"), Ok(json!([])));
        assert_eq!(ev("'a,b,'.split(r/,/)"), Ok(json!(["a", "b", ""])));
        assert_eq!(ev("'aXbxc'.split(r/x/i, 2)"), Ok(json!(["a", "b"])));
        assert_eq!(
            ev("'héllo'.split(r/(?:)/)"),
            Ok(json!(["h", "é", "l", "l", "o"]))
        );
        assert_eq!(ev("'a1b'.split(r/([0-9])/)"), Ok(json!(["a", "1", "b"])));
    }

    #[test]
    fn mistakes_are_errors_that_say_what_is_wrong() {
        let e = ev("'aa'.replaceAll(r/a/, 'b')").unwrap_err();
        assert!(
            e.contains("replaceAll() must be given a global regular expression"),
            "{e}"
        );
        let e = ev("'aa'.matchAll(r/a/)").unwrap_err();
        assert!(
            e.contains("matchAll() must be given a global regular expression"),
            "{e}"
        );
        let e = ev("tag.match(r/[/)").unwrap_err();
        assert!(e.contains("invalid regular expression `[`"), "{e}");
        let e = ev("r/a/.flat()").unwrap_err();
        assert!(
            e.contains("a regular expression has no method `flat`"),
            "{e}"
        );
    }

    #[test]
    fn the_replace_filter_reads_a_regexp_and_keeps_its_text_form() {
        assert_eq!(
            render("{{ 'a1b22' | replace(r/[0-9]+/g, '#') }}"),
            Ok("a#b#".into())
        );
        assert_eq!(
            render("{{ 'aXa' | replace(r/a/, '$&$&') }}"),
            Ok("aaXa".into())
        );
        assert_eq!(
            render("{{ 'a-a-a' | replace('-', '+', 1) }}"),
            Ok("a+a-a".into())
        );
        assert_eq!(
            render("{{ 'a-a-a' | replace('-', '+', count=2) }}"),
            Ok("a+a+a".into())
        );
        assert_eq!(
            render("{{ 'a-a' | replace('-', '+', 0) }}"),
            Ok("a-a".into())
        );
        assert_eq!(render("{{ 1234 | replace(2, 'x') }}"), Ok("1x34".into()));
        assert_eq!(render("{{ r/a+/gi }}"), Ok("/a+/gi".into()));
    }
}
