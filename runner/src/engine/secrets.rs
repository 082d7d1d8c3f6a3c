//! Secrets masked in everything a run shows or keeps: its events (so the
//! log, `--json`, the store, `show`, the API and the console), its result
//! and its error messages. A secret is the value of an environment variable
//! the run sees (the process's or a `.env` file's) whose name says it is
//! one — it holds `TOKEN`, `KEY`, `SECRET`, `PASSWORD`, `PASSWD` or
//! `CREDENTIAL`, in any case — or that `MARKTOFLOW_SECRETS` names
//! (comma-separated); `MARKTOFLOW_NOT_SECRETS` names variables that are not,
//! whatever their names say. A value shorter than [`MIN_SECRET_CHARS`] is
//! not treated as a secret (masking `on` or `1` everywhere would hide
//! everything else): `validate`-time checks warn about it.
//!
//! Only a secret's exact text is found: a secret transformed (base64,
//! hashed, split, upper-cased) cannot be recognised.

use std::borrow::Cow;
use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use super::event::{Event, RunEvent};

/// What a secret becomes.
pub const MASK: &str = "***";

/// The shortest value treated as a secret.
pub const MIN_SECRET_CHARS: usize = 4;

/// Words that make a variable's name a secret's.
const SECRET_WORDS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// The secrets of one run.
#[derive(Clone, Default)]
pub struct Secrets {
    finder: Option<AhoCorasick>,
}

/// Whether the variable `name` holds a secret, by the rule in the module
/// docs (`extra` and `not` are the names the two variables list).
pub fn is_secret_name(name: &str, extra: &[&str], not: &[&str]) -> bool {
    if not.contains(&name) {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    extra.contains(&name) || SECRET_WORDS.iter().any(|w| upper.contains(w))
}

fn names(env: &BTreeMap<String, String>, var: &str) -> Vec<String> {
    env.get(var)
        .map(|v| {
            v.split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

impl Secrets {
    /// The secrets among `env` (see the module docs).
    pub fn of_env(env: &BTreeMap<String, String>) -> Self {
        let extra = names(env, "MARKTOFLOW_SECRETS");
        let not = names(env, "MARKTOFLOW_NOT_SECRETS");
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let not: Vec<&str> = not.iter().map(String::as_str).collect();
        let mut values: Vec<&str> = env
            .iter()
            .filter(|(k, v)| {
                is_secret_name(k, &extra, &not) && v.trim().chars().count() >= MIN_SECRET_CHARS
            })
            .map(|(_, v)| v.as_str())
            .collect();
        values.sort_unstable();
        values.dedup();
        let finder = (!values.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&values)
                    .ok()
            })
            .flatten();
        Secrets { finder }
    }

    pub fn is_empty(&self) -> bool {
        self.finder.is_none()
    }

    /// `s` with every secret in it replaced by [`MASK`].
    pub fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match &self.finder {
            Some(f) if f.is_match(s) => Cow::Owned(f.replace_all(s, &vec![MASK; f.patterns_len()])),
            _ => Cow::Borrowed(s),
        }
    }

    fn in_place(&self, s: &mut String) {
        if let Cow::Owned(masked) = self.text(s) {
            *s = masked;
        }
    }

    /// Every string in `v` (keys included) with its secrets masked.
    pub fn value(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => self.in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|x| self.value(x)),
            Value::Object(m) => {
                if m.keys().any(|k| matches!(self.text(k), Cow::Owned(_))) {
                    let old = std::mem::take(m);
                    for (k, mut x) in old {
                        self.value(&mut x);
                        m.insert(self.text(&k).into_owned(), x);
                    }
                } else {
                    m.values_mut().for_each(|x| self.value(x));
                }
            }
            _ => {}
        }
    }

    fn has(&self, s: &str) -> bool {
        self.finder.as_ref().is_some_and(|f| f.is_match(s))
    }

    /// Whether a string of `v` (a key or a value) holds a secret.
    fn value_has(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => self.has(s),
            Value::Array(items) => items.iter().any(|x| self.value_has(x)),
            Value::Object(m) => m.iter().any(|(k, x)| self.has(k) || self.value_has(x)),
            _ => false,
        }
    }

    /// Whether `e` shows a secret (most events do not: they pass uncopied).
    fn event_has(&self, e: &Event) -> bool {
        let opt = |s: &Option<String>| s.as_deref().is_some_and(|s| self.has(s));
        match &e.kind {
            RunEvent::RunStarted { .. }
            | RunEvent::RunFinished { .. }
            | RunEvent::ModelCall { .. } => false,
            RunEvent::StepStarted { detail, .. } => opt(detail),
            RunEvent::Log { message, .. } => self.has(message),
            RunEvent::Progress { what, .. } => self.has(what),
            RunEvent::StepRetry { error, .. } => self.has(error),
            RunEvent::StepFinished {
                output,
                error,
                inputs,
                ..
            } => {
                self.value_has(output)
                    || opt(error)
                    || inputs.as_ref().is_some_and(|v| self.value_has(v))
            }
            RunEvent::Waiting(w) => self.value_has(&serde_json::to_value(&**w).unwrap_or_default()),
            RunEvent::Checkpoint(c) => {
                c.variables
                    .values()
                    .chain(c.steps.values())
                    .any(|v| self.value_has(v))
                    || c.set_outputs
                        .iter()
                        .chain(c.last_output.iter())
                        .any(|v| self.value_has(v))
            }
        }
    }

    /// The event as it may be shown and kept; `None` when it shows no secret.
    pub fn event(&self, e: &Event) -> Option<Event> {
        if !self.event_has(e) {
            return None;
        }
        let mut e = e.clone();
        let opt = |s: &mut Option<String>| {
            if let Some(s) = s {
                self.in_place(s);
            }
        };
        match &mut e.kind {
            RunEvent::RunStarted { .. }
            | RunEvent::RunFinished { .. }
            | RunEvent::ModelCall { .. } => {}
            RunEvent::StepStarted { detail, .. } => opt(detail),
            RunEvent::Log { message, .. } => self.in_place(message),
            RunEvent::Progress { what, .. } => self.in_place(what),
            RunEvent::StepRetry { error, .. } => self.in_place(error),
            RunEvent::StepFinished {
                output,
                error,
                inputs,
                ..
            } => {
                self.value(output);
                opt(error);
                if let Some(v) = inputs {
                    self.value(v);
                }
            }
            RunEvent::Checkpoint(c) => {
                let mut c = (**c).clone();
                for v in c.variables.values_mut().chain(c.steps.values_mut()) {
                    self.value(v);
                }
                for v in c.set_outputs.iter_mut().chain(c.last_output.iter_mut()) {
                    self.value(v);
                }
                e.kind = RunEvent::Checkpoint(std::sync::Arc::new(c));
            }
            RunEvent::Waiting(w) => {
                let mut v = serde_json::to_value(&**w).unwrap_or_default();
                self.value(&mut v);
                if let Ok(masked) = serde_json::from_value(v) {
                    e.kind = RunEvent::Waiting(std::sync::Arc::new(masked));
                }
            }
        }
        Some(e)
    }

    /// The result as it may be shown and kept.
    pub fn result(&self, r: &mut super::event::RunResult) {
        if self.is_empty() {
            return;
        }
        self.value(&mut r.outputs);
        for step in &mut r.steps {
            self.value(&mut step.output);
            if let Some(e) = &mut step.error {
                self.in_place(e);
            }
        }
        if let Some(e) = &mut r.error {
            self.in_place(&mut e.message);
        }
        if let Some(v) = &mut r.response {
            self.value(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn values_of_secret_names_are_masked_wherever_they_appear() {
        let s = Secrets::of_env(&env(&[
            ("MY_API_TOKEN", "tok-12345"),
            ("db_password", "hunter22"),
            ("STRIPE_KEY", "sk_live_abc"),
            ("SHORT_KEY", "abc"),
            ("HOME", "/home/me"),
            ("REGION", "eu-west-1"),
            ("MARKTOFLOW_SECRETS", "REGION"),
            ("MARKTOFLOW_NOT_SECRETS", "STRIPE_KEY"),
        ]));
        assert_eq!(
            s.text("Bearer tok-12345 for hunter22 in eu-west-1 at /home/me, sk_live_abc, abc"),
            "Bearer *** for *** in *** at /home/me, sk_live_abc, abc"
        );
        let mut v = json!({"tok-12345": ["x tok-12345 y", 1, {"k": "hunter22"}]});
        s.value(&mut v);
        assert_eq!(v, json!({"***": ["x *** y", 1, {"k": "***"}]}));
        assert!(Secrets::of_env(&env(&[("PATH", "/usr/bin")])).is_empty());
    }
}
