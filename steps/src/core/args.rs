//! Reading an action's inputs as its catalog entry declares them. Every
//! family reads through [`Args`], so the catalog is the one declaration of an
//! input: its aliases are resolved here, a value is coerced by the same rule
//! the catalog checks with ([`Ty`]: numbers and booleans may arrive as text
//! from templates, the command line and webhooks), an input not given takes
//! the default the catalog declares (what `marktoflow actions`, the schema
//! and the reference show), and a wrong value is reported in the catalog's
//! words. No reader writes a default of its own.

use crate::core::action::Call;
use crate::core::catalog::{json_type, Input, Issue, Problem, Spec, Ty};
use crate::core::error::ActionError;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// One call's inputs, read through the action's [`Spec`].
pub struct Args<'a> {
    spec: &'static Spec,
    map: &'a Map<String, Value>,
}

static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();

impl<'a> Args<'a> {
    /// `inputs` (a mapping, or null for none) read as `spec` declares them.
    pub fn new(spec: &'static Spec, inputs: &'a Value) -> Result<Self, ActionError> {
        match inputs {
            Value::Object(map) => Ok(Args { spec, map }),
            Value::Null => Ok(Args {
                spec,
                map: EMPTY.get_or_init(Map::new),
            }),
            other => Err(issue(
                spec,
                "",
                Problem::NotAMapping {
                    got: json_type(other),
                },
            )),
        }
    }

    /// The inputs of `call`, read through the spec of its method among `specs`.
    pub fn of(
        specs: &'static [Spec],
        call: &Call<'_>,
        inputs: &'a Value,
    ) -> Result<Self, ActionError> {
        Args::new(spec_of(specs, call.method, call.action)?, inputs)
    }

    /// `tool.method`, for messages.
    pub fn action(&self) -> String {
        self.spec.name()
    }

    /// Every input as given (for actions that take any mapping).
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// Whether the action declares an input `name` (for readers shared by
    /// several methods).
    pub fn declares(&self, name: &str) -> bool {
        self.spec.input(name).is_some()
    }

    /// The declaration of `name`. Reading an input the catalog does not
    /// declare is a bug in the action (its docs and schema would not show
    /// it), caught by the tests that run every action.
    fn decl(&self, name: &str) -> &'static Input {
        let found = self.spec.input(name);
        debug_assert!(
            found.is_some_and(|i| i.alias_of.is_none()),
            "`{}` reads `{name}`, which its catalog entry does not declare",
            self.spec.name()
        );
        found.unwrap_or(&UNDECLARED)
    }

    /// The key `name` was given under (itself or one of its aliases) and
    /// its value. Null counts as not given, and so does empty text where
    /// the input does not take text (an unset template value renders so).
    fn given_as(&self, name: &str) -> Option<(&'a str, &'a Value)> {
        let decl = self.decl(name);
        let names = std::iter::once(name).chain(
            self.spec
                .inputs
                .iter()
                .filter(|i| i.alias_of == Some(name))
                .map(|i| i.name),
        );
        for n in names {
            let Some((k, v)) = self.map.get_key_value(n) else {
                continue;
            };
            match v {
                Value::Null => continue,
                Value::String(s) if s.is_empty() && !takes_text(decl) => continue,
                _ => return Some((k.as_str(), v)),
            }
        }
        None
    }

    /// The value given for `name` (or an alias of it), without its default.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.given_as(name).map(|(_, v)| v)
    }

    /// Whether `name` was given (a default does not count).
    pub fn is_given(&self, name: &str) -> bool {
        self.given_as(name).is_some()
    }

    /// The value given for `name`, else its declared default.
    pub fn value(&self, name: &str) -> Option<Cow<'a, Value>> {
        match self.get(name) {
            Some(v) => Some(Cow::Borrowed(v)),
            None => self.default(name).map(Cow::Owned),
        }
    }

    /// The declared default of `name`, as a value. Numbers and booleans,
    /// most defaults, are read without the YAML parser (this runs on every
    /// call of an action).
    fn default(&self, name: &str) -> Option<Value> {
        let d = self.decl(name).default?;
        if let Ok(n) = d.parse::<i64>() {
            return Some(Value::from(n));
        }
        if let Some(n) = d.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return Some(Value::Number(n));
        }
        match d {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => serde_yaml::from_str(d).ok(),
        }
    }

    /// The value of `name` after the catalog's type check: given or
    /// defaulted, and of one of the declared types.
    fn checked(&self, name: &str) -> Result<Option<(&'a str, Cow<'a, Value>)>, ActionError> {
        let decl = self.decl(name);
        let (key, v) = match self.given_as(name) {
            Some((k, v)) => (k, Cow::Borrowed(v)),
            None => match self.default(name) {
                Some(d) => (decl.name, Cow::Owned(d)),
                None => return Ok(None),
            },
        };
        if !decl.types.iter().any(|t| t.accepts(&v)) {
            return Err(self.issue(
                key,
                Problem::WrongType {
                    expected: decl.types,
                    got: json_type(&v),
                },
            ));
        }
        Ok(Some((key, v)))
    }

    /// The date `name` gives (a date text; only its date counts), else the
    /// clock's today.
    pub fn today(
        &self,
        name: &str,
        clock: &dyn crate::core::time::Clock,
    ) -> Result<chrono::NaiveDate, ActionError> {
        crate::core::time::today(self.get(name), name, clock).map_err(ActionError::Input)
    }

    /// A required value: given, or an error naming the input.
    pub fn required(&self, name: &str) -> Result<&'a Value, ActionError> {
        self.get(name).ok_or_else(|| self.missing(name))
    }

    /// Text: given, else the declared default.
    pub fn str(&self, name: &str) -> Result<Option<&'a str>, ActionError> {
        match self.given_as(name) {
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((key, other)) => Err(self.issue(
                key,
                Problem::WrongType {
                    expected: &[Ty::String],
                    got: json_type(other),
                },
            )),
            None => Ok(self.decl(name).default.map(default_text)),
        }
    }

    /// Text that has a value: given, or the declared default.
    pub fn text(&self, name: &str) -> Result<&'a str, ActionError> {
        self.str(name)?.ok_or_else(|| self.missing(name))
    }

    /// Text that must be there (and not blank).
    pub fn required_str(&self, name: &str) -> Result<&'a str, ActionError> {
        match self.str(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(self.missing(name)),
        }
    }

    /// A number (finite; numeric text counts), else the declared default.
    pub fn num(&self, name: &str) -> Result<Option<f64>, ActionError> {
        let Some((key, v)) = self.checked(name)? else {
            return Ok(None);
        };
        let n = match v.as_ref() {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match n {
            Some(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(self.issue(
                key,
                Problem::WrongType {
                    expected: &[Ty::Number],
                    got: json_type(&v),
                },
            )),
        }
    }

    /// A number that has a value: given, or the declared default.
    pub fn number(&self, name: &str) -> Result<f64, ActionError> {
        self.num(name)?.ok_or_else(|| self.missing(name))
    }

    /// A number of at least `min`.
    pub fn at_least(&self, name: &str, min: f64) -> Result<Option<f64>, ActionError> {
        match self.num(name)? {
            Some(x) if x < min => {
                Err(self.invalid(name, format!("must be at least {min}, got {x}")))
            }
            x => Ok(x),
        }
    }

    /// A whole number from `min` to `max`, else the declared default. A
    /// number that sizes work (hits, items, notes) is bounded here, before
    /// anything is allocated for it.
    pub fn count(&self, name: &str, min: u64, max: u64) -> Result<Option<usize>, ActionError> {
        match self.num(name)? {
            Some(x) if x.fract() != 0.0 || x < min as f64 || x > max as f64 => Err(self.invalid(
                name,
                format!("must be a whole number from {min} to {max}, got {x}"),
            )),
            x => Ok(x.map(|x| x as usize)),
        }
    }

    /// A whole number of 0 or more, read exactly (a seed past 2^53 stays
    /// itself), else the declared default.
    pub fn whole(&self, name: &str) -> Result<Option<u64>, ActionError> {
        let Some((key, v)) = self.checked(name)? else {
            return Ok(None);
        };
        let n = match v.as_ref() {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|x| *x >= 0.0 && x.fract() == 0.0)
                    .map(|x| x as u64)
            }),
            Value::String(s) => s.trim().parse::<u64>().ok().or_else(|| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| *x >= 0.0 && x.fract() == 0.0 && x.is_finite())
                    .map(|x| x as u64)
            }),
            _ => None,
        };
        n.map(Some).ok_or_else(|| {
            self.invalid(key, format!("must be a whole number of 0 or more, got {v}"))
        })
    }

    /// A number above 0.
    pub fn positive(&self, name: &str) -> Result<Option<f64>, ActionError> {
        match self.num(name)? {
            Some(x) if x <= 0.0 => Err(self.invalid(name, format!("must be above 0, got {x}"))),
            x => Ok(x),
        }
    }

    /// A number from 0 to 1.
    pub fn unit(&self, name: &str) -> Result<Option<f64>, ActionError> {
        match self.num(name)? {
            Some(x) if !(0.0..=1.0).contains(&x) => {
                Err(self.invalid(name, format!("must be between 0 and 1, got {x}")))
            }
            x => Ok(x),
        }
    }

    /// true or false (or that text) as given, without the default.
    pub fn flag(&self, name: &str) -> Result<Option<bool>, ActionError> {
        match self.given_as(name) {
            None => Ok(None),
            Some((_, Value::Bool(b))) => Ok(Some(*b)),
            Some((_, Value::String(s))) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some((key, other)) => Err(self.issue(
                key,
                Problem::WrongType {
                    expected: &[Ty::Boolean],
                    got: json_type(other),
                },
            )),
        }
    }

    /// true or false: given, else the declared default, else false.
    pub fn bool(&self, name: &str) -> Result<bool, ActionError> {
        Ok(match self.flag(name)? {
            Some(b) => b,
            None => self.decl(name).default == Some("true"),
        })
    }

    /// One of the values the catalog allows (compared without case, as
    /// the catalog checks them), as the catalog spells it; else the default.
    pub fn choice(&self, name: &str) -> Result<Option<&'static str>, ActionError> {
        let decl = self.decl(name);
        let Some(v) = self.str(name)? else {
            return Ok(None);
        };
        let v = v.trim();
        decl.values
            .iter()
            .find(|a| a.eq_ignore_ascii_case(v))
            .copied()
            .map(Some)
            .ok_or_else(|| {
                self.issue(
                    name,
                    Problem::NotAllowed {
                        value: v.to_string(),
                        allowed: decl.values,
                    },
                )
            })
    }

    /// A choice that has a value: given, or the declared default.
    pub fn chosen(&self, name: &str) -> Result<&'static str, ActionError> {
        self.choice(name)?.ok_or_else(|| self.missing(name))
    }

    /// Strings: a list of strings (numbers written as text), or one string
    /// as a list of one; else the declared default.
    pub fn strings(&self, name: &str) -> Result<Vec<String>, ActionError> {
        let Some((key, v)) = self.checked(name)? else {
            return Ok(Vec::new());
        };
        match v.as_ref() {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(items) => {
                items
                    .iter()
                    .map(|i| match i {
                        Value::String(s) => Ok(s.clone()),
                        Value::Number(n) => Ok(n.to_string()),
                        other => Err(self
                            .invalid(key, format!("must list strings, got {}", json_type(other)))),
                    })
                    .collect()
            }
            other => Err(self.issue(
                key,
                Problem::WrongType {
                    expected: self.decl(name).types,
                    got: json_type(other),
                },
            )),
        }
    }

    /// A mapping: given, else the declared default.
    pub fn mapping(&self, name: &str) -> Result<Option<Cow<'a, Map<String, Value>>>, ActionError> {
        let Some((key, v)) = self.checked(name)? else {
            return Ok(None);
        };
        match v {
            Cow::Borrowed(Value::Object(m)) => Ok(Some(Cow::Borrowed(m))),
            Cow::Owned(Value::Object(m)) => Ok(Some(Cow::Owned(m))),
            other => Err(self.issue(
                key,
                Problem::WrongType {
                    expected: &[Ty::Object],
                    got: json_type(&other),
                },
            )),
        }
    }

    /// `name` is needed and was not given.
    pub fn missing(&self, name: &str) -> ActionError {
        self.issue(name, Problem::Missing)
    }

    /// `name`'s value is of the right type but not usable: `msg` says why
    /// ("must be at least 1, got 0").
    pub fn invalid(&self, name: &str, msg: impl std::fmt::Display) -> ActionError {
        ActionError::Input(format!("input `{name}` of `{}`: {msg}", self.spec.name()))
    }

    fn issue(&self, name: &str, problem: Problem) -> ActionError {
        issue(self.spec, name, problem)
    }
}

/// The catalog's words for `problem` with the input `name` of `spec`, with
/// its hint (for a value not allowed, the values that are), as a step's
/// error says them.
fn issue(spec: &Spec, name: &str, problem: Problem) -> ActionError {
    let issue = Issue {
        action: spec.name(),
        input: name.to_string(),
        problem,
    };
    ActionError::Input(issue.message(spec))
}

/// Whether empty text is a value of `decl` (else it counts as not given).
fn takes_text(decl: &Input) -> bool {
    decl.types.iter().any(|t| matches!(t, Ty::String | Ty::Any))
}

/// A text default as its value: YAML quotes (`'[{n}]'`, which unquoted
/// would be a list) taken off. Defaults with escapes inside are refused by
/// the catalog test, so the slice is the whole value.
pub(crate) fn default_text(d: &'static str) -> &'static str {
    let quoted = |q: char| d.len() >= 2 && d.starts_with(q) && d.ends_with(q);
    if quoted('\'') || quoted('"') {
        &d[1..d.len() - 1]
    } else {
        d
    }
}

/// The spec of `method` among `specs` (`action` names it in the error).
pub fn spec_of(
    specs: &'static [Spec],
    method: &str,
    action: &str,
) -> Result<&'static Spec, ActionError> {
    specs
        .iter()
        .find(|s| s.method == method)
        .ok_or_else(|| ActionError::Input(format!("unknown method `{action}`")))
}

/// What an undeclared name reads as in a release build: no type, no default.
const UNDECLARED: Input = crate::core::catalog::input("", crate::core::catalog::ANY, "");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::{
        alias, input, spec, BOOLEAN, INTEGER, LIST, NUMBER, STRING, STRING_OR_LIST,
    };
    use serde_json::json;

    static S: Spec = spec("demo", "read", "Reads.").inputs(&[
        input("path", STRING, "The file.").required(),
        alias("file", "path"),
        input("format", STRING, "How.")
            .default("text")
            .one_of(&["text", "json"]),
        input("top_k", INTEGER, "How many.").default("5"),
        alias("topK", "top_k"),
        input("weight", NUMBER, "0..1."),
        input("touch", BOOLEAN, "Mark.").default("true"),
        input("force", BOOLEAN, "Again."),
        input("tags", STRING_OR_LIST, "Tags."),
        input("exts", LIST, "Extensions.").default("[md, markdown]"),
    ]);

    fn args(v: &Value) -> Args<'_> {
        Args::new(&S, v).unwrap()
    }

    fn err<T: std::fmt::Debug>(r: Result<T, ActionError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn defaults_come_from_the_catalog() {
        let v = json!({"path": "a"});
        let a = args(&v);
        assert_eq!(a.num("top_k").unwrap(), Some(5.0));
        assert_eq!(a.choice("format").unwrap(), Some("text"));
        assert!(a.bool("touch").unwrap());
        assert!(!a.bool("force").unwrap());
        assert_eq!(a.num("weight").unwrap(), None);
        assert_eq!(a.strings("exts").unwrap(), ["md", "markdown"]);
        assert!(!a.is_given("top_k"));
        assert_eq!(a.flag("touch").unwrap(), None);
    }

    #[test]
    fn aliases_and_text_forms_read_as_the_catalog_checks_them() {
        let v = json!({"file": "a", "topK": "7", "touch": "false", "format": "JSON", "weight": " 0.5 "});
        let a = args(&v);
        assert_eq!(a.required_str("path").unwrap(), "a");
        assert_eq!(a.num("top_k").unwrap(), Some(7.0));
        assert!(!a.bool("touch").unwrap());
        assert_eq!(a.choice("format").unwrap(), Some("json"));
        assert_eq!(a.num("weight").unwrap(), Some(0.5));
        // The input's own name before an alias of it.
        let v = json!({"file": "b", "path": "a"});
        assert_eq!(args(&v).required_str("path").unwrap(), "a");
        // Null, and empty text for a number, are not given.
        let v = json!({"path": "a", "top_k": "", "weight": null});
        assert_eq!(args(&v).num("top_k").unwrap(), Some(5.0));
        assert_eq!(args(&v).num("weight").unwrap(), None);
    }

    #[test]
    fn wrong_values_are_reported_in_the_catalogs_words() {
        let v = json!({"path": 3, "topK": 1.5, "weight": "NaN", "touch": "yes", "format": "xml"});
        let a = args(&v);
        assert_eq!(
            err(a.str("path")),
            "input `path` of `demo.read` must be a string, got a number"
        );
        assert_eq!(
            err(a.num("top_k")),
            "input `topK` of `demo.read` must be an integer, got a number"
        );
        assert_eq!(
            err(a.num("weight")),
            "input `weight` of `demo.read` must be a number, got text"
        );
        assert_eq!(
            err(a.bool("touch")),
            "input `touch` of `demo.read` must be a boolean, got text"
        );
        assert_eq!(
            err(a.choice("format")),
            "input `format` of `demo.read` cannot be `xml` (expected one of: text, json)"
        );
        let v = json!({"weight": 2});
        assert_eq!(
            err(args(&v).unit("weight")),
            "input `weight` of `demo.read`: must be between 0 and 1, got 2"
        );
        assert_eq!(
            err(args(&v).required_str("path")),
            "`demo.read` needs the input `path`"
        );
        assert_eq!(
            Args::new(&S, &json!([1])).err().unwrap().to_string(),
            "`demo.read` takes a mapping of inputs, got a list"
        );
    }

    #[test]
    fn strings_take_a_list_or_one_string() {
        let v = json!({"tags": ["a", 2], "exts": "md"});
        assert_eq!(args(&v).strings("tags").unwrap(), ["a", "2"]);
        assert_eq!(
            err(args(&v).strings("exts")),
            "input `exts` of `demo.read` must be a list, got text"
        );
        let v = json!({"tags": "a,b"});
        assert_eq!(args(&v).strings("tags").unwrap(), ["a,b"]);
        let v = json!({"tags": [{}]});
        assert_eq!(
            err(args(&v).strings("tags")),
            "input `tags` of `demo.read`: must list strings, got a mapping"
        );
    }
}
