//! Templates: `{{ … }}` / `{% … %}` in step inputs and conditions, on
//! minijinja, following the peer's Nunjucks setup (`trimBlocks`,
//! `lstripBlocks`, no autoescape, chainable undefined) but failing loudly:
//! syntax errors, unknown filters and runtime errors are errors with the
//! line and column inside the failing string (the caller adds the string's
//! position in the `.md` file).
//!
//! Pure: no I/O, no printing; the only clock is `now()`, the run's clock
//! when the context comes from [`Templates::clocked`].
//!
//! - [`Templates::render_value`]: renders every string inside a JSON value;
//!   a string that is exactly one `{{ expr }}` keeps the expression's type.
//! - [`Templates::eval_condition`]: conditions (see [`conditions`]).
//! - Filters: minijinja's builtins plus the peer's (see [`filters`],
//!   [`dates`]); JavaScript and Python methods on values (see [`methods`]);
//!   Nunjucks' `elseif` and `for k, v in map` (see [`compat`]).
//! - JavaScript's operators, truthiness and loop scopes, as the peer's
//!   Nunjucks has them (`'7' + 3` is `73`, `[]` is true, a `set` in a loop
//!   reaches the variable outside it): the parsed template is rewritten
//!   before compiling (see `js_rewrite`, `js_ops`).
//!
//! Rendered text: none and undefined print as nothing, integral floats
//! without `.0` (`{{ 10 / 4 * 2 }}` is `5`), lists and maps as compact JSON.
//! Lists from the context also answer `.length` (the peer's JavaScript
//! habit) besides `|length`.

mod check;
pub mod compat;
pub mod conditions;
pub mod dates;
pub mod filters;
mod js_builtins;
mod js_ops;
mod js_rewrite;
pub mod limits;
pub mod methods;
mod nunjucks;
mod regexp;
pub(crate) use nunjucks::html_escape;
mod rewrite;
mod values;

use marktoflow_steps::core::time::Clock;
use std::ops::Range;
use std::sync::Arc;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::merge_maps;
use minijinja::{AutoEscape, Environment, ErrorKind, UndefinedBehavior, Value};
use serde_json::Value as Json;

pub use values::is_truthy_text;

/// A template, expression or condition that failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    /// What went wrong, e.g. ``unknown filter: filter uper is unknown (did you mean `upper`?)``.
    pub message: String,
    /// Key path inside the rendered value, e.g. `["prompt"]` or
    /// `["messages", "0", "content"]`; empty for a plain string.
    pub path: Vec<String>,
    /// 1-based line within the failing string.
    pub line: Option<usize>,
    /// 1-based column (in characters) within that line.
    pub col: Option<usize>,
}

impl TemplateError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        TemplateError {
            message: message.into(),
            path: Vec::new(),
            line: None,
            col: None,
        }
    }

    /// Converts a minijinja error. `compiled` is the text minijinja saw,
    /// `src` the string the user wrote, `map` turns an offset in `compiled`
    /// into one in `src`.
    pub(crate) fn from_mj(
        e: &minijinja::Error,
        compiled: &str,
        src: &str,
        map: impl Fn(usize) -> usize,
    ) -> Self {
        let mut err = TemplateError::new(error_message(e));
        let offset = match (e.range(), e.line()) {
            (Some(r), _) => Some((map(r.start), true)),
            (None, Some(line)) => Some((map(line_start(compiled, line)), false)),
            _ => None,
        };
        if let Some((offset, exact)) = offset {
            let (line, col) = line_col(src, offset);
            err.line = Some(line);
            err.col = exact.then_some(col);
        }
        err
    }

    fn at(mut self, path: &[String]) -> Self {
        self.path = path.to_vec();
        self
    }
}

fn error_message(e: &minijinja::Error) -> String {
    if e.kind() == ErrorKind::OutOfFuel {
        return "the template does too much work (it ran out of fuel, the bound on how long one rendering may take): loop over less data, or do the work in a script step".into();
    }
    let mut msg = match e.detail() {
        Some(d) => format!("{}: {}", e.kind(), d),
        None => e.kind().to_string(),
    };
    if e.kind() == ErrorKind::UnknownFilter {
        let name = e
            .detail()
            .and_then(|d| d.strip_prefix("filter "))
            .and_then(|d| d.strip_suffix(" is unknown"));
        if let Some(hint) = name.and_then(suggest_filter) {
            msg.push_str(&format!(" (did you mean `{hint}`?)"));
        }
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        match s.downcast_ref::<minijinja::Error>() {
            Some(inner) => msg.push_str(&format!(": {}", error_message(inner))),
            None => msg.push_str(&format!(": {s}")),
        }
        source = s.source();
    }
    msg
}

/// Names people reach for from other template languages.
const FILTER_ALIASES: &[(&str, &str)] = &[
    ("upcase", "upper"),
    ("uppercase", "upper"),
    ("touppercase", "upper"),
    ("downcase", "lower"),
    ("lowercase", "lower"),
    ("tolowercase", "lower"),
    ("json", "to_json"),
    ("stringify", "to_json"),
    ("parsejson", "parse_json"),
    ("fromjson", "parse_json"),
    ("size", "length"),
    ("len", "length"),
    ("strip", "trim"),
    ("regex", "match"),
    ("date", "format_date"),
];

pub(crate) fn suggest_filter(name: &str) -> Option<&'static str> {
    let lower = name.to_lowercase();
    if let Some((_, to)) = FILTER_ALIASES.iter().find(|(from, _)| *from == lower) {
        return Some(to);
    }
    nearest_name(
        name,
        filters::CUSTOM_FILTERS
            .iter()
            .chain(nunjucks::NUNJUCKS_FILTERS)
            .chain(filters::BUILTIN_FILTERS)
            .copied(),
    )
}

/// The candidate `name` is most likely a misspelling of (case aside): the
/// fewest edits, at most a third of its length (one for short names).
pub(crate) fn nearest_name<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    use marktoflow_steps::core::catalog::typo_distance;
    let name = name.to_lowercase();
    candidates
        .map(|c| (typo_distance(&name, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Byte offset where 1-based `line` starts in `s`.
fn line_start(s: &str, line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    s.match_indices('\n')
        .nth(line - 2)
        .map_or(s.len(), |(i, _)| i + 1)
}

/// 1-based line and column (in characters) of a byte offset in `s`.
pub(crate) fn line_col(s: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(s.len());
    while !s.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &s[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, s[start..offset].chars().count() + 1)
}

/// Whether a string contains template tags (`{{`, `{%` or `{#`).
pub fn has_tags(s: &str) -> bool {
    let b = s.as_bytes();
    memchr_brace(b)
}

fn memchr_brace(b: &[u8]) -> bool {
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&c| c == b'{') {
        let at = i + p;
        if matches!(b.get(at + 1), Some(b'{' | b'%' | b'#')) {
            return true;
        }
        i = at + 1;
    }
    false
}

/// If `src`, once trimmed, is exactly one `{{ expr }}` (whitespace control
/// `{{-`/`-}}` allowed; braces inside the expression must balance, as in
/// `{{ {'a': {'b': 1}} }}`), the byte range of `expr` within `src`.
pub(crate) fn single_expression(src: &str) -> Option<Range<usize>> {
    let lead = src.len() - src.trim_start().len();
    let end = src.trim_end().len();
    let t = &src[lead..end];
    if t.len() < 4 || !t.starts_with("{{") || !t.ends_with("}}") {
        return None;
    }
    let b = src.as_bytes();
    let mut i = lead + 2;
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let start = i;
    let mut depth = 0usize;
    while i < end {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < end && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' if depth == 0 && b.get(i + 1) == Some(&b'}') => {
                return (i + 2 == end).then_some(start..i);
            }
            b'-' | b'+' if depth == 0 && src[i + 1..].starts_with("}}") => {
                return (i + 3 == end).then_some(start..i);
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

fn system_clock() -> i64 {
    marktoflow_steps::core::time::Clock::now_ms(&marktoflow_steps::core::time::SystemClock)
}

/// `now()` answering from a run's clock (see [`Templates::clocked`]).
#[derive(Debug)]
struct Now(Arc<dyn Clock>);

impl minijinja::value::Object for Now {
    fn call(
        self: &Arc<Self>,
        _state: &mut minijinja::State<'_, '_>,
        args: &[Value],
    ) -> Result<Value, minijinja::Error> {
        if !args.is_empty() {
            return Err(minijinja::Error::new(
                ErrorKind::TooManyArguments,
                "now() takes no arguments",
            ));
        }
        Ok(Value::from(self.0.now_ms()))
    }
}

/// The most work one rendering may do (minijinja's fuel, about one unit per
/// instruction; 30 million take about a second on a 2-core machine).
/// Rendering cannot be interrupted, so this is what bounds how long a
/// template can hold a thread past its step's timeout.
pub const TEMPLATE_FUEL: u64 = 30_000_000;

/// The template environment. Cheap to create (no template is compiled until
/// used; strings without tags are never compiled).
/// A template's text as compiled: Nunjucks-only syntax translated (see
/// [`compat`]), then JavaScript's operators, truthiness and loop scopes
/// (see [`js_rewrite`]).
/// An error when the template's shape is over a bound (see [`limits`]).
pub(crate) fn prepare_template(src: &str) -> Result<Option<rewrite::Translated>, TemplateError> {
    limits::check_template(src)?;
    let compat = compat::nunjucks_compat(src);
    let js = js_rewrite::template(compat.as_ref().map_or(src, |t| t.text.as_str()));
    Ok(rewrite::chain(compat, js))
}

/// A bare expression as conditions are written (JavaScript's `&&`, `===`,
/// `null` …, see [`conditions`]) as compiled; `boolean` when its value is
/// used as a condition.
pub(crate) fn prepare_expression(
    src: &str,
    boolean: bool,
) -> Result<Option<rewrite::Translated>, TemplateError> {
    limits::check_expression(src, 0..src.len())?;
    // Regular-expression literals first: the translation reads tokens.
    let literals = regexp::literals(src);
    let js_ops = conditions::translate_js(literals.as_ref().map_or(src, |t| t.text.as_str()));
    let translated = rewrite::chain(literals, js_ops);
    let text = translated.as_ref().map_or(src, |t| t.text.as_str());
    let js = js_rewrite::expression(text, boolean);
    Ok(rewrite::chain(translated, js))
}

#[derive(Debug, Clone)]
pub struct Templates {
    env: Environment<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

impl Templates {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .keep_trailing_newline(true)
                .build()
                .expect("default delimiters are valid"),
        );
        env.set_auto_escape_callback(|_| AutoEscape::None);
        // Chainable, as Nunjucks with `throwOnUndefined: false`: `maybe.field`
        // of an unset `maybe` is undefined (so `| default(…)` and a polling
        // `while` work); `validate` warns about names nothing defines.
        env.set_undefined_behavior(UndefinedBehavior::Chainable);
        env.set_formatter(values::formatter);
        // Debug mode names the undefined value in errors ("`a.b` is undefined").
        env.set_debug(true);
        filters::register(&mut env);
        nunjucks::register(&mut env);
        js_builtins::register(&mut env);
        js_ops::register(&mut env);
        // `x == null` in conditions becomes `(x) is nullish` (see conditions).
        env.add_test("nullish", |v: &Value| v.is_none() || v.is_undefined());
        env.set_unknown_method_callback(methods::call_method);
        env.add_function(compat::PAIRS_FN, compat::pairs);
        env.add_function(regexp::REGEXP_FN, regexp::new_regexp);
        env.add_filter("__js_length", compat::js_length);
        env.add_function("now", system_clock);
        env.set_fuel(Some(TEMPLATE_FUEL));
        Templates { env }
    }

    /// Same, with a fuel limit (templates rendered from untrusted requests):
    /// each render or evaluation may spend at most `fuel` units (about one
    /// per instruction; see minijinja's `set_fuel`).
    pub fn with_fuel(fuel: u64) -> Self {
        let mut t = Self::new();
        t.env.set_fuel(Some(fuel));
        t
    }

    /// `ctx` with `now()` answering from `clock` (epoch milliseconds); a
    /// variable of the run named `now` still wins. Without it, `now()` is
    /// the system's clock.
    pub fn clocked(ctx: Value, clock: Arc<dyn Clock>) -> Value {
        let now = Value::from_pairs([(Value::from("now"), Value::from_object(Now(clock)))]);
        merge_maps([now, ctx])
    }

    /// Context for rendering: `{...steps, ...inputs, ...variables, inputs:
    /// inputs, steps: steps, env: env}` — a step's metadata answers to its
    /// bare id (`{{ first.status }}`, as the peer documents) unless an input
    /// or variable has that name; variables win over bare input names.
    pub fn context(
        inputs: &Json,
        variables: &serde_json::Map<String, Json>,
        steps: &Json,
        env: &Json,
    ) -> Value {
        let inputs_v = values::from_json(inputs);
        let steps_v = values::from_json(steps);
        let mut pairs: Vec<(Value, Value)> = Vec::with_capacity(variables.len() + 8);
        if let Some(meta) = steps.as_object() {
            for k in meta.keys() {
                let v = steps_v.get_attr(k).unwrap_or_default();
                pairs.push((Value::from(k.as_str()), v));
            }
        }
        if inputs_v.kind() == minijinja::value::ValueKind::Map {
            if let Ok(keys) = inputs_v.try_iter() {
                for k in keys {
                    let v = inputs_v.get_item(&k).unwrap_or_default();
                    pairs.push((k, v));
                }
            }
        }
        for (k, v) in variables {
            pairs.push((Value::from(k.as_str()), values::from_json(v)));
        }
        pairs.push((Value::from("inputs"), inputs_v));
        pairs.push((Value::from("steps"), steps_v));
        pairs.push((Value::from("env"), values::from_json(env)));
        Value::from_pairs(pairs)
    }

    /// A context with extra names on top (loop variables such as `item`,
    /// `index`); they win over the context's names. Cheap: nothing is copied.
    pub fn with_locals(ctx: &Value, locals: &serde_json::Map<String, Json>) -> Value {
        let locals = Value::from_pairs(
            locals
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), values::from_json(v))),
        );
        merge_maps([ctx.clone(), locals])
    }

    /// Converts JSON into a template value (ints stay ints, maps keep order).
    pub fn to_value(v: &Json) -> Value {
        values::from_json(v)
    }

    /// Converts a template value into JSON (undefined becomes `null`).
    pub fn to_json(v: &Value) -> Result<Json, TemplateError> {
        values::to_json(v).map_err(|e| TemplateError::new(error_message(&e)))
    }

    /// Renders a template string to text. Strings without tags are returned
    /// as they are, without compiling.
    pub fn render_str(&self, src: &str, ctx: &Value) -> Result<String, TemplateError> {
        if !has_tags(src) {
            return Ok(src.to_string());
        }
        let prepared = prepare_template(src)?;
        let text = prepared.as_ref().map_or(src, |t| t.text.as_str());
        let map = |o: usize| prepared.as_ref().map_or(o, |t| t.source_offset(o));
        let map_err = |e: minijinja::Error| TemplateError::from_mj(&e, text, src, map);
        let tmpl = self.env.template_from_str(text).map_err(map_err)?;
        tmpl.render(ctx.clone()).map_err(map_err)
    }

    /// Renders every string inside `v` recursively (object keys are not
    /// rendered). A string that is exactly one `{{ expr }}` (after trimming;
    /// no other `{{`/`}}` inside) keeps the expression's type (number, bool,
    /// list, object, null; undefined gives null); otherwise the result is a
    /// string. Errors carry the key path of the failing string.
    pub fn render_value(&self, v: &Json, ctx: &Value) -> Result<Json, TemplateError> {
        let mut path = Vec::new();
        self.render_value_at(v, ctx, &mut path)
    }

    fn render_value_at(
        &self,
        v: &Json,
        ctx: &Value,
        path: &mut Vec<String>,
    ) -> Result<Json, TemplateError> {
        Ok(match v {
            Json::String(s) => self.render_typed(s, ctx).map_err(|e| e.at(path))?,
            Json::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    out.push(self.render_value_at(item, ctx, path)?);
                    path.pop();
                }
                Json::Array(out)
            }
            Json::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, item) in map {
                    path.push(k.clone());
                    out.insert(k.clone(), self.render_value_at(item, ctx, path)?);
                    path.pop();
                }
                Json::Object(out)
            }
            other => other.clone(),
        })
    }

    /// One string: as is without tags; typed for a single `{{ expr }}`;
    /// rendered text otherwise.
    fn render_typed(&self, s: &str, ctx: &Value) -> Result<Json, TemplateError> {
        if !has_tags(s) {
            return Ok(Json::String(s.to_string()));
        }
        if let Some(r) = single_expression(s) {
            let v = self.eval_value(s, r.start, r.end, ctx)?;
            return values::to_json(&v)
                .map_err(|e| TemplateError::from_mj(&e, s, s, |o| o + r.start));
        }
        self.render_str(s, ctx).map(Json::String)
    }

    /// Evaluates the expression `src[start..end]`; error positions point into `src`.
    pub(crate) fn eval_value(
        &self,
        src: &str,
        start: usize,
        end: usize,
        ctx: &Value,
    ) -> Result<Value, TemplateError> {
        limits::check_expression(src, start..end)?;
        let literals = regexp::literals(&src[start..end]);
        let text = literals
            .as_ref()
            .map_or(&src[start..end], |t| t.text.as_str());
        let js = js_rewrite::expression(text, false);
        self.eval_prepared(src, start, end, rewrite::chain(literals, js), ctx)
    }

    /// Evaluates `src[start..end]` as `prepared` rewrote it (as it is when
    /// `None`); error positions point into `src`.
    pub(crate) fn eval_prepared(
        &self,
        src: &str,
        start: usize,
        end: usize,
        prepared: Option<rewrite::Translated>,
        ctx: &Value,
    ) -> Result<Value, TemplateError> {
        let expr = &src[start..end];
        let text = prepared.as_ref().map_or(expr, |t| t.text.as_str());
        let map = |o: usize| start + prepared.as_ref().map_or(o, |t| t.source_offset(o));
        let map_err = |e: minijinja::Error| TemplateError::from_mj(&e, text, src, map);
        let compiled = self.env.compile_expression(text).map_err(map_err)?;
        compiled.eval(ctx.clone()).map_err(map_err)
    }

    /// Evaluates an expression to JSON. Accepts a bare expression
    /// (`items | length`), one `{{ expr }}` (same result), or a template
    /// mixing text and tags (rendered to a string).
    pub fn eval_expr(&self, expr: &str, ctx: &Value) -> Result<Json, TemplateError> {
        if has_tags(expr) {
            return self.render_typed(expr, ctx);
        }
        let start = expr.len() - expr.trim_start().len();
        let end = expr.trim_end().len().max(start);
        let v = self.eval_value(expr, start, end, ctx)?;
        values::to_json(&v).map_err(|e| TemplateError::from_mj(&e, expr, expr, |o| o + start))
    }

    /// Names of top-level variables a template, expression or condition
    /// reads (for `validate`), sorted; best effort: empty if it does not parse.
    /// Global functions (`now`, `range`, …) are left out.
    pub fn referenced_names(&self, src: &str) -> Vec<String> {
        self.referenced(src, false)
    }

    /// Like [`Templates::referenced_names`], with attribute paths
    /// (`inputs.query`, `search_results.found`).
    pub fn referenced_paths(&self, src: &str) -> Vec<String> {
        self.referenced(src, true)
    }

    fn referenced(&self, src: &str, nested: bool) -> Vec<String> {
        let found = if has_tags(src) {
            let Ok(prepared) = prepare_template(src) else {
                return Vec::new();
            };
            let text = prepared.as_ref().map_or(src, |t| t.text.as_str());
            match self.env.template_from_str(text) {
                Ok(t) => t.undeclared_variables(nested),
                Err(_) => return Vec::new(),
            }
        } else {
            let text = match prepare_expression(src, false) {
                Ok(Some(t)) => t.text,
                Ok(None) => src.to_string(),
                Err(_) => return Vec::new(),
            };
            match self.env.compile_expression_owned(text) {
                Ok(e) => e.undeclared_variables(nested),
                Err(_) => return Vec::new(),
            }
        };
        let globals: Vec<&str> = self.env.globals().map(|(name, _)| name).collect();
        let mut names: Vec<String> = found
            .into_iter()
            .filter(|n| !globals.contains(&n.split('.').next().unwrap_or(n)))
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests;
