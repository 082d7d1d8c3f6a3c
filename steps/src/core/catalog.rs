//! The action catalog: what every action takes and returns, declared once as
//! data. `validate` checks literal inputs against it when a workflow loads,
//! the engine checks rendered inputs against it before each call, and
//! `marktoflow actions`, the JSON Schema and the reference are derived from
//! it. Engine behaviour that depends on the action (evaluated by the engine,
//! sets the run's outputs, may run in a dry run) is a declared [`Traits`]
//! value, never a comparison of names.

use serde_json::{json, Map, Value};
use std::fmt;

/// The JSON type an input accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    String,
    /// A number; text that parses as one is accepted (templates render text).
    Number,
    /// A whole number; text that parses as one is accepted.
    Integer,
    /// true or false; the text `true`/`false` is accepted.
    Boolean,
    Array,
    Object,
    /// A duration: `10s`, `500ms`, `2m`, or a number of milliseconds.
    Duration,
    /// Anything.
    Any,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::String => "string",
            Ty::Number => "number",
            Ty::Integer => "integer",
            Ty::Boolean => "boolean",
            Ty::Array => "list",
            Ty::Object => "mapping",
            Ty::Duration => "duration",
            Ty::Any => "any value",
        }
    }

    /// Whether `v` (not null) is of this type.
    pub(crate) fn accepts(self, v: &Value) -> bool {
        match (self, v) {
            (Ty::Any, _) => true,
            (Ty::String, Value::String(_)) => true,
            (Ty::Number, Value::Number(_)) => true,
            (Ty::Number, Value::String(s)) => s.trim().parse::<f64>().is_ok_and(f64::is_finite),
            (Ty::Integer, Value::Number(n)) => n.as_f64().is_some_and(|f| f.fract() == 0.0),
            (Ty::Integer, Value::String(s)) => s.trim().parse::<i64>().is_ok(),
            (Ty::Boolean, Value::Bool(_)) => true,
            (Ty::Boolean, Value::String(s)) => s == "true" || s == "false",
            (Ty::Array, Value::Array(_)) => true,
            (Ty::Object, Value::Object(_)) => true,
            (Ty::Duration, Value::Number(n)) => n.as_f64().is_some_and(|f| f >= 0.0),
            (Ty::Duration, Value::String(_)) => true,
            _ => false,
        }
    }

    /// The JSON Schema of one type.
    fn schema(self) -> Value {
        match self {
            Ty::String => json!({"type": "string"}),
            Ty::Number => json!({"type": ["number", "string"]}),
            Ty::Integer => json!({"type": ["integer", "string"]}),
            Ty::Boolean => json!({"type": ["boolean", "string"]}),
            // Text too: a template may give the list or mapping.
            Ty::Array => json!({"type": ["array", "string"]}),
            Ty::Object => json!({"type": ["object", "string"]}),
            Ty::Duration => json!({"type": ["string", "number"]}),
            Ty::Any => json!({}),
        }
    }
}

pub const STRING: &[Ty] = &[Ty::String];
pub const NUMBER: &[Ty] = &[Ty::Number];
pub const INTEGER: &[Ty] = &[Ty::Integer];
pub const BOOLEAN: &[Ty] = &[Ty::Boolean];
pub const LIST: &[Ty] = &[Ty::Array];
pub const MAPPING: &[Ty] = &[Ty::Object];
pub const DURATION: &[Ty] = &[Ty::Duration];
pub const ANY: &[Ty] = &[Ty::Any];
pub const STRING_OR_LIST: &[Ty] = &[Ty::String, Ty::Array];
pub const BOOLEAN_OR_STRING: &[Ty] = &[Ty::Boolean, Ty::String];
pub const LIST_OR_MAPPING: &[Ty] = &[Ty::Array, Ty::Object];

/// A check of an input's value beyond its type: why it does not fit.
pub type ValueCheck = fn(&Value) -> Result<(), String>;

/// One input of an action.
#[derive(Debug, Clone, Copy)]
pub struct Input {
    pub name: &'static str,
    pub types: &'static [Ty],
    pub required: bool,
    /// The default, as YAML would write it (for docs).
    pub default: Option<&'static str>,
    /// The values a string may take (compared without case).
    pub values: &'static [&'static str],
    pub doc: &'static str,
    /// Another name for the input `alias_of` (the peer's spelling, say).
    pub alias_of: Option<&'static str>,
    /// What a value must be beyond its type (an `output_schema` must be a
    /// JSON Schema): checked on a literal when the workflow loads, so the
    /// mistake is not found only when the step runs.
    pub check: Option<ValueCheck>,
}

/// An input named `name` of `types`, optional, with a one-line doc.
pub const fn input(name: &'static str, types: &'static [Ty], doc: &'static str) -> Input {
    Input {
        name,
        types,
        required: false,
        default: None,
        values: &[],
        doc,
        alias_of: None,
        check: None,
    }
}

/// `name` is another spelling of the input `of`.
pub const fn alias(name: &'static str, of: &'static str) -> Input {
    Input {
        name,
        types: ANY,
        required: false,
        default: None,
        values: &[],
        doc: "",
        alias_of: Some(of),
        check: None,
    }
}

impl Input {
    pub const fn required(self) -> Self {
        Input {
            required: true,
            ..self
        }
    }
    pub const fn default(self, d: &'static str) -> Self {
        Input {
            default: Some(d),
            ..self
        }
    }
    pub const fn one_of(self, values: &'static [&'static str]) -> Self {
        Input { values, ..self }
    }
    pub const fn checked(self, check: ValueCheck) -> Self {
        Input {
            check: Some(check),
            ..self
        }
    }
}

/// Engine behaviour an action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traits {
    /// Evaluated by the engine itself: it needs templates unrendered
    /// (`core.transform`'s per-item expressions, `core.template`).
    pub engine_op: bool,
    /// Its output becomes the run's outputs (`workflow.set_outputs`).
    pub sets_outputs: bool,
    /// Ends the run successfully once it returns (`workflow.exit`).
    pub exits: bool,
    /// No effects outside the run: `--dry-run` may call it.
    pub pure: bool,
    /// Spends its time waiting on something outside the process (a network
    /// reply, another process, the clock, a model's thread): it runs on the
    /// async workers. Every other step computes, and the engine runs it
    /// beside them so that a large input never holds up other runs.
    pub waits: bool,
    /// Changes something that outlives the run (a file, a memory store):
    /// `run --staged` records the call instead of making it. HTTP calls
    /// other than GET and HEAD are writes too, decided by their method.
    pub writes: bool,
}

pub const PURE: Traits = Traits {
    engine_op: false,
    sets_outputs: false,
    exits: false,
    pure: true,
    waits: false,
    writes: false,
};

/// Has effects (files, network, models, time): not called by `--dry-run`.
pub const EFFECTS: Traits = Traits {
    pure: false,
    ..PURE
};

/// Has effects and waits for them (see [`Traits::waits`]).
pub const WAITS: Traits = Traits {
    waits: true,
    ..EFFECTS
};

/// Has effects that outlive the run (see [`Traits::writes`]).
pub const WRITES: Traits = Traits {
    writes: true,
    ..EFFECTS
};

/// Whether inputs beyond the declared ones are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// Only the declared inputs.
    Closed,
    /// Any mapping (`core.set`, `workflow.set_outputs`).
    Open,
}

/// The contract of one action method.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The tool family (`core`, `file`, `agent` for every LLM provider).
    pub tool: &'static str,
    pub method: &'static str,
    pub doc: &'static str,
    pub inputs: &'static [Input],
    pub extra: Extra,
    /// `inputs:` may be plain text instead of a mapping (an agent's prompt).
    pub text: bool,
    /// What it returns, in words and field names.
    pub returns: &'static str,
    pub traits: Traits,
}

/// A spec for `tool.method` with closed inputs and pure traits.
pub const fn spec(tool: &'static str, method: &'static str, doc: &'static str) -> Spec {
    Spec {
        tool,
        method,
        doc,
        inputs: &[],
        extra: Extra::Closed,
        text: false,
        returns: "",
        traits: PURE,
    }
}

impl Spec {
    pub const fn inputs(self, inputs: &'static [Input]) -> Self {
        Spec { inputs, ..self }
    }
    pub const fn open(self) -> Self {
        Spec {
            extra: Extra::Open,
            ..self
        }
    }
    pub const fn text_inputs(self) -> Self {
        Spec { text: true, ..self }
    }
    pub const fn returns(self, returns: &'static str) -> Self {
        Spec { returns, ..self }
    }
    pub const fn traits(self, traits: Traits) -> Self {
        Spec { traits, ..self }
    }

    pub fn name(&self) -> String {
        format!("{}.{}", self.tool, self.method)
    }

    pub fn input(&self, name: &str) -> Option<&Input> {
        self.inputs.iter().find(|i| i.name == name)
    }

    /// Whether an input of this name is accepted.
    pub fn takes(&self, name: &str) -> bool {
        self.extra == Extra::Open || self.input(name).is_some()
    }

    /// The canonical inputs (aliases left out).
    pub fn canonical(&self) -> impl Iterator<Item = &Input> {
        self.inputs.iter().filter(|i| i.alias_of.is_none())
    }

    /// The JSON Schema of the `inputs:` mapping.
    pub fn input_schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for i in self.inputs {
            let target = i.alias_of.and_then(|a| self.input(a)).unwrap_or(i);
            let mut s = match target.types {
                [one] => one.schema(),
                many => json!({"anyOf": many.iter().map(|t| t.schema()).collect::<Vec<_>>()}),
            };
            let doc = match i.alias_of {
                Some(of) => format!("Another name for `{of}`."),
                None => i.doc.to_string(),
            };
            if let Value::Object(m) = &mut s {
                if !doc.is_empty() {
                    m.insert("description".into(), json!(doc));
                }
                if !target.values.is_empty() {
                    // Templates are allowed wherever a value is.
                    m.insert(
                        "anyOf".into(),
                        json!([{"enum": target.values}, {"pattern": "\\{[{%]"}]),
                    );
                }
                if let Some(d) = target.default {
                    if let Ok(v) = serde_yaml::from_str::<Value>(d) {
                        m.insert("default".into(), v);
                    }
                }
            }
            props.insert(i.name.into(), s);
            if i.required {
                required.push(i.name);
            }
        }
        let mut schema = json!({"type": "object", "properties": props});
        if self.extra == Extra::Closed {
            schema["additionalProperties"] = json!(false);
        }
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    }
}

/// What is wrong with one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The action has no input of that name.
    Unknown { suggestion: Option<&'static str> },
    /// A required input is not given.
    Missing,
    WrongType {
        expected: &'static [Ty],
        got: &'static str,
    },
    NotAllowed {
        value: String,
        allowed: &'static [&'static str],
    },
    /// `inputs:` is not a mapping.
    NotAMapping { got: &'static str },
    /// Of the right type, but not what the input takes (its declared check
    /// says why).
    Invalid { message: String },
}

/// A problem with the input `input` (empty for the whole `inputs:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub action: String,
    pub input: String,
    pub problem: Problem,
}

impl Issue {
    /// The problem and its hint in one line, as a step's error says it.
    pub fn message(&self, spec: &Spec) -> String {
        match self.hint(spec) {
            Some(h) => format!("{self} ({h})"),
            None => self.to_string(),
        }
    }

    /// A "did you mean" or the list of inputs, for the report's hint line.
    pub fn hint(&self, spec: &Spec) -> Option<String> {
        match &self.problem {
            Problem::Unknown {
                suggestion: Some(s),
            } => Some(format!("did you mean `{s}`?")),
            Problem::Unknown { suggestion: None } => {
                let names: Vec<&str> = spec.canonical().map(|i| i.name).collect();
                Some(if names.is_empty() {
                    format!("`{}` takes no inputs", self.action)
                } else {
                    format!("`{}` takes: {}", self.action, names.join(", "))
                })
            }
            Problem::NotAllowed { allowed, .. } => {
                Some(format!("expected one of: {}", allowed.join(", ")))
            }
            _ => None,
        }
    }
}

fn types_text(types: &[Ty]) -> String {
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    let article = match types.first() {
        Some(Ty::Integer) => "an ",
        Some(Ty::Any) => "",
        _ => "a ",
    };
    match names.as_slice() {
        [one] => format!("{article}{one}"),
        [init @ .., last] => format!("{article}{} or {last}", init.join(", ")),
        [] => "a value".into(),
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, i) = (&self.action, &self.input);
        match &self.problem {
            Problem::Unknown { .. } => write!(f, "unknown input `{i}` for `{a}`"),
            Problem::Missing => write!(f, "`{a}` needs the input `{i}`"),
            Problem::WrongType { expected, got } => write!(
                f,
                "input `{i}` of `{a}` must be {}, got {got}",
                types_text(expected)
            ),
            Problem::NotAllowed { value, .. } => {
                write!(f, "input `{i}` of `{a}` cannot be `{value}`")
            }
            Problem::NotAMapping { got } => {
                write!(f, "`{a}` takes a mapping of inputs, got {got}")
            }
            Problem::Invalid { message } => write!(f, "input `{i}` of `{a}`: {message}"),
        }
    }
}

impl std::error::Error for Issue {}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Whether a template is anywhere in `v` (its value is known only when the
/// step runs).
fn templated(v: &Value, unresolved: &dyn Fn(&str) -> bool) -> bool {
    match v {
        Value::String(s) => unresolved(s),
        Value::Array(a) => a.iter().any(|x| templated(x, unresolved)),
        Value::Object(m) => m.values().any(|x| templated(x, unresolved)),
        _ => false,
    }
}

/// Whether `issue` is an input the step's fallback action takes (the
/// fallback is called with the same inputs).
pub fn meant_for(issue: &Issue, fallback: Option<&Spec>) -> bool {
    matches!(issue.problem, Problem::Unknown { .. })
        && fallback.is_some_and(|f| f.takes(&issue.input))
}

/// The closest of `candidates` to `name`, for "did you mean": a typo away
/// (the fewest edits, a swap of two letters counting as one, at most a
/// third of the candidate's length: `woh` → `who`), else the most alike by
/// Jaro-Winkler (`knowledge` → `knowledge_base`).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&'a str> = candidates.into_iter().collect();
    let typo = candidates
        .iter()
        .map(|c| (typo_distance(name, c), *c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    if typo.is_some() {
        return typo;
    }
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(s, _)| *s > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Edits between two names, a swap of neighbours counting as one (`titel`
/// is one from `title`): the measure of "did you mean" by distance.
pub fn typo_distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

/// Whether `name` is surely a misspelling of `candidate`: the same once
/// case, `-` and `_` are set aside, or one edit apart (two for names of six
/// letters or more; a swap of two letters is one). A misspelt key is then an
/// error, not an unknown key to ignore.
pub fn surely_meant(name: &str, candidate: &str) -> bool {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '-' && *c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    if plain(name) == plain(candidate) {
        return true;
    }
    let (n, c) = (name.to_lowercase(), candidate.to_lowercase());
    let most = if c.chars().count() >= 6 { 2 } else { 1 };
    n.chars().count() >= 3 && typo_distance(&n, &c) <= most
}

/// Checks `inputs` against `spec`. Strings for which `unresolved` is true
/// (templates, when checking a workflow before it runs) are not checked,
/// nor is a whole `inputs:` that is one. Null, and an empty string where
/// a string is not expected, count as not given, as the actions read them.
pub fn check(spec: &Spec, inputs: &Value, unresolved: &dyn Fn(&str) -> bool) -> Vec<Issue> {
    let issue = |input: &str, problem| Issue {
        action: spec.name(),
        input: input.to_string(),
        problem,
    };
    let map = match inputs {
        Value::Object(m) => m,
        Value::Null => &Map::new(),
        Value::String(s) if unresolved(s) || spec.text => return Vec::new(),
        other => {
            return vec![issue(
                "",
                Problem::NotAMapping {
                    got: json_type(other),
                },
            )]
        }
    };
    let mut out = Vec::new();
    for (k, v) in map {
        let Some(decl) = spec.input(k) else {
            if spec.extra == Extra::Closed {
                let names = spec.canonical().map(|i| i.name);
                out.push(issue(
                    k,
                    Problem::Unknown {
                        suggestion: closest(k, names),
                    },
                ));
            }
            continue;
        };
        let decl = decl.alias_of.and_then(|a| spec.input(a)).unwrap_or(decl);
        match v {
            Value::Null => continue,
            Value::String(s) if unresolved(s) => continue,
            Value::String(s) if s.is_empty() && !decl.types.contains(&Ty::String) => continue,
            _ => {}
        }
        if !decl.types.iter().any(|t| t.accepts(v)) {
            out.push(issue(
                k,
                Problem::WrongType {
                    expected: decl.types,
                    got: json_type(v),
                },
            ));
            continue;
        }
        if let (Value::String(s), false) = (v, decl.values.is_empty()) {
            if !decl.values.iter().any(|a| a.eq_ignore_ascii_case(s.trim())) {
                out.push(issue(
                    k,
                    Problem::NotAllowed {
                        value: s.clone(),
                        allowed: decl.values,
                    },
                ));
            }
        }
        if let Some(check) = decl.check.filter(|_| !templated(v, unresolved)) {
            if let Err(message) = check(v) {
                out.push(issue(k, Problem::Invalid { message }));
            }
        }
    }
    for decl in spec.inputs.iter().filter(|i| i.required) {
        let given = spec
            .inputs
            .iter()
            .filter(|i| i.name == decl.name || i.alias_of == Some(decl.name))
            .any(|i| map.contains_key(i.name));
        // A misspelling of it was reported already, with this name as the fix.
        let misspelt = out.iter().any(|i| {
            i.problem
                == Problem::Unknown {
                    suggestion: Some(decl.name),
                }
        });
        if !given && !misspelt {
            out.push(issue(decl.name, Problem::Missing));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Spec = spec("demo", "read", "Reads.").inputs(&[
        input("path", STRING, "The file.").required(),
        input("format", STRING, "How to read it.").one_of(&["text", "json"]),
        input("max_bytes", INTEGER, "At most this many bytes."),
        input("recursive", BOOLEAN, "Go down folders."),
        alias("file", "path"),
    ]);

    fn no_templates(_: &str) -> bool {
        false
    }

    fn problems(v: Value) -> Vec<String> {
        check(&S, &v, &no_templates)
            .iter()
            .map(|i| i.to_string())
            .collect()
    }

    #[test]
    fn unknown_inputs_get_a_suggestion() {
        let issues = check(&S, &json!({"pth": "x"}), &no_templates);
        assert_eq!(
            issues[0].problem,
            Problem::Unknown {
                suggestion: Some("path")
            }
        );
        assert_eq!(issues[0].hint(&S).as_deref(), Some("did you mean `path`?"));
        // The alias satisfies the required input; the typo is still reported.
        assert_eq!(problems(json!({"file": "x"})), Vec::<String>::new());
        assert_eq!(
            problems(json!({"pth": "x"})),
            ["unknown input `pth` for `demo.read`"]
        );
        assert_eq!(
            problems(json!({"zzz": "x"})),
            [
                "unknown input `zzz` for `demo.read`",
                "`demo.read` needs the input `path`"
            ]
        );
    }

    #[test]
    fn types_values_and_text_forms() {
        assert_eq!(
            problems(json!({"path": 3, "max_bytes": 1.5, "recursive": "yes"})),
            [
                "input `path` of `demo.read` must be a string, got a number",
                "input `max_bytes` of `demo.read` must be an integer, got a number",
                "input `recursive` of `demo.read` must be a boolean, got text",
            ]
        );
        assert!(problems(json!({"path": "a", "max_bytes": "12", "recursive": "true"})).is_empty());
        assert!(problems(json!({"path": "a", "max_bytes": "", "format": null})).is_empty());
        assert_eq!(
            problems(json!({"path": "a", "format": "xml"})),
            ["input `format` of `demo.read` cannot be `xml`"]
        );
        assert!(problems(json!({"path": "a", "format": "JSON"})).is_empty());
        assert_eq!(
            problems(json!(["a"])),
            ["`demo.read` takes a mapping of inputs, got a list"]
        );
    }

    #[test]
    fn templates_are_left_for_run_time() {
        let templ = |s: &str| s.contains("{{");
        let v = json!({"path": "{{ x }}", "max_bytes": "{{ n }}", "format": "{{ f }}"});
        assert!(check(&S, &v, &templ).is_empty());
        assert_eq!(check(&S, &v, &no_templates).len(), 2);
    }

    #[test]
    fn schema_is_closed_and_names_required_inputs() {
        let s = S.input_schema();
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["required"], json!(["path"]));
        assert_eq!(
            s["properties"]["file"]["description"],
            "Another name for `path`."
        );
    }

    #[test]
    fn sure_misspellings_are_told_from_other_names() {
        for (typo, key) in [
            ("trigers", "triggers"),
            ("Inputs", "inputs"),
            ("default-agent", "default_agent"),
            ("ouptuts", "outputs"),
            ("totl", "total"),
        ] {
            assert!(surely_meant(typo, key), "{typo} → {key}");
        }
        for (other, key) in [
            ("answer", "ai_answer"),
            ("metadata", "timeout"),
            ("io", "id"),
        ] {
            assert!(!surely_meant(other, key), "{other} ≠ {key}");
        }
    }
}
