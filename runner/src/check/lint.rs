//! Authoring checks run by `validate` and before `run`: template errors
//! (syntax, unknown filters, tests and functions) are errors, found before
//! any step runs; the rest load fine but are probably mistakes (warnings).

use crate::diag::{did_you_mean, surely_meant, Diagnostic, Pos};
use crate::format::model::{Step, StepKind, Workflow};
use crate::template::{has_tags, Templates};
use marktoflow_steps::registry::ActionKind;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Names every template can use without a step defining them.
const ALWAYS: &[&str] = &[
    "inputs",
    "steps",
    "env",
    "trigger",
    "true",
    "false",
    "none",
    "null",
    "undefined",
    "loop",
];

pub fn lint(wf: &Workflow, t: &Templates) -> Vec<Diagnostic> {
    let mut cx = Lint {
        wf,
        t,
        out: Vec::new(),
        defined_anywhere: BTreeSet::new(),
        used_text: String::new(),
        text_replies: text_replies(wf),
        step_ids: wf.walk().into_iter().map(|s| s.id.clone()).collect(),
    };
    // `concurrency.key` is rendered over the inputs too.
    if let Some(key) = wf.concurrency.as_ref().and_then(|c| c.key.as_deref()) {
        cx.used_text.push_str(key);
        cx.used_text.push('\n');
    }
    for s in wf.walk() {
        // Step metadata answers to the bare step id (`{{ first.status }}`).
        cx.defined_anywhere.insert(s.id.clone());
        if let Some(v) = &s.output_variable {
            cx.defined_anywhere.insert(v.clone());
        }
        if let StepKind::While { initial, .. } = &s.kind {
            cx.defined_anywhere
                .extend(initial.iter().map(|(name, _)| name.clone()));
        }
        if let StepKind::Parallel { branches, .. } = &s.kind {
            for b in branches {
                cx.defined_anywhere.insert(b.id.clone());
            }
        }
    }
    let mut scope: BTreeSet<String> = ALWAYS.iter().map(|s| s.to_string()).collect();
    scope.extend(wf.inputs.iter().map(|i| i.name.clone()));
    cx.steps(&wf.steps, &mut scope, false);
    cx.input_defaults();
    cx.unused_inputs();
    cx.declared_outputs();
    cx.out
}

struct Lint<'a> {
    wf: &'a Workflow,
    t: &'a Templates,
    out: Vec<Diagnostic>,
    defined_anywhere: BTreeSet<String>,
    /// Every template and script text, to find input uses.
    used_text: String,
    /// Variables that only ever hold a model's reply text (see
    /// [`text_replies`]), with the step that sets each.
    text_replies: BTreeMap<String, String>,
    /// Every step's id, nested ones too (`steps.ID`).
    step_ids: BTreeSet<String>,
}

/// The agent methods whose output is the reply as text, unless the step
/// asks for JSON.
const TEXT_METHODS: &[&str] = &["run", "generate", "chat"];

/// What a template may read of text (minijinja's string methods, and the
/// peer's `.length`): anything else is undefined.
const TEXT_ATTRIBUTES: &[&str] = &[
    "length",
    "upper",
    "lower",
    "title",
    "capitalize",
    "strip",
    "lstrip",
    "rstrip",
    "split",
    "splitlines",
    "replace",
    "startswith",
    "endswith",
    "find",
    "rfind",
    "count",
    "join",
    "format",
    "isalpha",
    "isalnum",
    "isdigit",
    "isnumeric",
    "islower",
    "isupper",
    "isspace",
    "istitle",
    "casefold",
    "center",
    "zfill",
    "index",
];

/// Variables set only by agent steps that reply with text (no `format`,
/// no `output_schema`), never by another step, a loop or a `while`: a
/// field read of one (`{{ summary.actions }}`) is undefined.
fn text_replies(wf: &Workflow) -> BTreeMap<String, String> {
    let mut text = BTreeMap::new();
    let mut other = BTreeSet::new();
    for s in wf.walk() {
        match &s.kind {
            StepKind::ForEach {
                item_variable,
                index_variable,
                ..
            } => {
                other.insert(item_variable.clone());
                other.extend(index_variable.clone());
            }
            StepKind::While { initial, .. } => {
                other.extend(initial.iter().map(|(n, _)| n.clone()));
            }
            _ => {}
        }
        let Some(var) = &s.output_variable else {
            continue;
        };
        let replies_text = match &s.kind {
            StepKind::Action {
                resolved, inputs, ..
            } => {
                resolved.kind == ActionKind::Agent
                    && TEXT_METHODS.contains(&resolved.method.as_str())
                    && inputs.as_object().is_some_and(|m| {
                        !m.contains_key("format") && !m.contains_key("output_schema")
                    })
            }
            _ => false,
        };
        if replies_text {
            text.entry(var.clone()).or_insert_with(|| s.id.clone());
        } else {
            other.insert(var.clone());
        }
    }
    text.retain(|name, _| !other.contains(name));
    text
}

impl Lint<'_> {
    fn warn(&mut self, pos: Pos, msg: String, hint: Option<String>) {
        let mut d = Diagnostic::warning(&self.wf.source, Some(pos), msg);
        if let Some(h) = hint {
            d.hints.push(h);
        }
        if !self.out.contains(&d) {
            self.out.push(d);
        }
    }

    fn steps(&mut self, steps: &[Step], scope: &mut BTreeSet<String>, in_loop: bool) {
        for s in steps {
            self.step(s, scope, in_loop);
            scope.insert(s.id.clone());
            if let Some(v) = &s.output_variable {
                scope.insert(v.clone());
            }
        }
    }

    /// Checks the names a template (or an expression, when `expr`) reads.
    fn names(
        &mut self,
        step: &Step,
        field: &[&str],
        src: &str,
        expr: bool,
        scope: &BTreeSet<String>,
        in_loop: bool,
    ) {
        let path: Vec<String> = field.iter().map(|s| s.to_string()).collect();
        self.names_at(step, &path, src, expr, scope, in_loop)
    }

    /// File position of `path` below the step.
    fn pos_of(step: &Step, path: &[String]) -> Pos {
        let mut full = step.path.clone();
        full.extend(path.iter().cloned());
        step.spans.pos(&full)
    }

    fn names_at(
        &mut self,
        step: &Step,
        field: &[String],
        src: &str,
        expr: bool,
        scope: &BTreeSet<String>,
        in_loop: bool,
    ) {
        self.used_text.push_str(src);
        self.used_text.push('\n');
        if !expr && !has_tags(src) {
            return;
        }
        let errors = self.t.check(src, expr);
        for e in &errors {
            let pos = match (e.line, e.col) {
                (Some(l), Some(c)) => step.string_pos(field, l, c),
                _ => Self::pos_of(step, field),
            };
            let d = Diagnostic::error(
                &self.wf.source,
                Some(pos),
                format!("template error: {}", e.message),
            );
            if !self.out.contains(&d) {
                self.out.push(d);
            }
        }
        if !errors.is_empty() {
            // The names of a broken template say little.
            return;
        }
        if !self.text_replies.is_empty() {
            self.fields_of_text(step, field, src);
        }
        self.step_references(step, field, src);
        for name in self.t.referenced_names(src) {
            if scope.contains(&name) || self.wf.steps.is_empty() {
                continue;
            }
            let pos = Self::pos_of(step, field);
            if self.defined_anywhere.contains(&name) {
                if !in_loop {
                    self.warn(pos, format!("`{name}` is only set by a later step"), None);
                }
                continue;
            }
            let known: Vec<&str> = scope
                .iter()
                .map(String::as_str)
                .chain(self.defined_anywhere.iter().map(String::as_str))
                .collect();
            let hint = did_you_mean(&name, &known).map(|c| format!("did you mean `{c}`?"));
            self.warn(
                pos,
                format!("`{name}` is not defined by any step or input"),
                hint,
            );
        }
    }

    /// A script whose code does not parse fails every run when it starts;
    /// code with templates in it is judged once they are filled in.
    fn script_syntax(&mut self, s: &Step) {
        let StepKind::Action {
            inputs, resolved, ..
        } = &s.kind
        else {
            return;
        };
        let Some(Value::String(code)) = inputs.get("code") else {
            return;
        };
        if resolved.kind != ActionKind::Script || has_tags(code) {
            return;
        }
        if let Some((message, line, col)) = marktoflow_steps::script::syntax_error(code) {
            // `code:` beside `type: script`, or under `inputs:`.
            let beside = s.spans.node.lookup(&s.path).get("code").is_some();
            let field: Vec<String> = if beside {
                vec!["code".into()]
            } else {
                vec!["inputs".into(), "code".into()]
            };
            let pos = s.string_pos(&field, line as usize, col as usize);
            self.out.push(Diagnostic::error(
                &self.wf.source,
                Some(pos),
                format!("the script does not parse: {message}"),
            ));
        }
    }

    /// Warns of `steps.ID` where no step has that id: it would be
    /// undefined when the step runs, and print as nothing.
    fn step_references(&mut self, step: &Step, field: &[String], src: &str) {
        for path in self.t.referenced_paths(src) {
            let mut parts = path.split('.');
            let (Some("steps"), Some(id)) = (parts.next(), parts.next()) else {
                continue;
            };
            if self.step_ids.contains(id) {
                continue;
            }
            let known: Vec<&str> = self.step_ids.iter().map(String::as_str).collect();
            let hint = did_you_mean(id, &known)
                .map(|c| format!("did you mean `{c}`?"))
                .or_else(|| Some(format!("the steps' ids are: {}", known.join(", "))));
            self.warn(
                Self::pos_of(step, field),
                format!("`steps.{id}`: no step has the id `{id}`"),
                hint,
            );
        }
    }

    /// Warns of a field read of a variable that holds a reply's text.
    fn fields_of_text(&mut self, step: &Step, field: &[String], src: &str) {
        for path in self.t.referenced_paths(src) {
            let mut parts = path.split('.');
            let (Some(name), Some(attr)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Some(setter) = self.text_replies.get(name) else {
                continue;
            };
            if TEXT_ATTRIBUTES.contains(&attr) {
                continue;
            }
            let setter = setter.clone();
            self.warn(
                Self::pos_of(step, field),
                format!(
                    "`{name}.{attr}` is undefined: `{name}` is the reply text of step `{setter}`"
                ),
                Some(format!(
                    "give step `{setter}` an `output_schema` (or `format: json`) to get the reply as data"
                )),
            );
        }
    }

    fn value(
        &mut self,
        step: &Step,
        field: &[&str],
        v: &Value,
        scope: &BTreeSet<String>,
        in_loop: bool,
    ) {
        let mut path: Vec<String> = field.iter().map(|s| s.to_string()).collect();
        self.value_at(step, &mut path, v, scope, in_loop)
    }

    fn value_at(
        &mut self,
        step: &Step,
        path: &mut Vec<String>,
        v: &Value,
        scope: &BTreeSet<String>,
        in_loop: bool,
    ) {
        match v {
            Value::String(s) => {
                // Script bodies are JavaScript: only their `{{ }}` parts are templates.
                self.names_at(step, path, s, false, scope, in_loop)
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    path.push(i.to_string());
                    self.value_at(step, path, x, scope, in_loop);
                    path.pop();
                }
            }
            Value::Object(m) => {
                for (k, x) in m {
                    path.push(k.clone());
                    self.value_at(step, path, x, scope, in_loop);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    fn constant(&self, cond: &str) -> Option<bool> {
        let c = cond
            .trim()
            .trim_start_matches("{{")
            .trim_end_matches("}}")
            .trim()
            .to_ascii_lowercase();
        match c.as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" | "none" | "null" => Some(false),
            _ => None,
        }
    }

    fn step(&mut self, s: &Step, scope: &mut BTreeSet<String>, in_loop: bool) {
        for c in &s.conditions {
            self.names(s, &["conditions"], c, true, scope, in_loop);
        }
        self.script_syntax(s);
        match &s.kind {
            StepKind::Action {
                inputs, resolved, ..
            } if resolved.spec.traits.engine_op => {
                // Template fields see per-item names (`core.transform`) or the
                // `context` input's keys (`core.template`).
                let raw = crate::engine::core_ops::raw_fields(&resolved.method);
                let mut inner = scope.clone();
                inner.extend(["item", "index", "accumulator"].map(String::from));
                if let Some(Value::Object(ctx)) = inputs.get("context") {
                    inner.extend(ctx.keys().cloned());
                }
                if let Value::Object(m) = inputs {
                    for (k, v) in m {
                        if raw.contains(&k.as_str()) {
                            if k == "condition" {
                                if let Value::String(c) = v {
                                    self.names(s, &["inputs", k], c, true, &inner, in_loop);
                                }
                            } else {
                                self.value(s, &["inputs", k], v, &inner, in_loop);
                            }
                        } else {
                            self.value(s, &["inputs", k], v, scope, in_loop);
                        }
                    }
                }
            }
            StepKind::Action { inputs, .. } => self.value(s, &["inputs"], inputs, scope, in_loop),
            StepKind::SubWorkflow { inputs, .. } => {
                self.value(s, &["inputs"], inputs, scope, in_loop)
            }
            StepKind::Wait { duration } => self.value(s, &["duration"], duration, scope, in_loop),
            StepKind::Ask(a) => {
                for (key, text) in [
                    ("title", &a.title),
                    (a.prompt_key, &a.prompt),
                    ("requester", &a.requester),
                    ("key", &a.key),
                ] {
                    if let Some(t) = text {
                        self.value(s, &[key], &Value::String(t.clone()), scope, in_loop);
                    }
                }
                // The notification sees `wait` (its link); the branches the answer.
                let mut notify = scope.clone();
                notify.insert("wait".into());
                self.steps(&a.notify, &mut notify, in_loop);
                let mut after = scope.clone();
                after.insert("answer".into());
                self.steps(&a.on_approve, &mut after.clone(), in_loop);
                self.steps(&a.on_reject, &mut after, in_loop);
            }
            StepKind::If {
                condition,
                then,
                otherwise,
            } => {
                self.names(s, &["condition"], condition, true, scope, in_loop);
                match self.constant(condition) {
                    Some(true) if !otherwise.is_empty() => self.warn(
                        s.field_pos(&["condition"]),
                        "the condition is always true: the `else` steps never run".into(),
                        None,
                    ),
                    Some(false) if !then.is_empty() => self.warn(
                        s.field_pos(&["condition"]),
                        "the condition is always false: the `then` steps never run".into(),
                        None,
                    ),
                    _ => {}
                }
                self.steps(then, &mut scope.clone(), in_loop);
                self.steps(otherwise, &mut scope.clone(), in_loop);
            }
            StepKind::Switch {
                expression,
                cases,
                default,
            } => {
                self.names(s, &["expression"], expression, false, scope, in_loop);
                for (_, steps) in cases {
                    self.steps(steps, &mut scope.clone(), in_loop);
                }
                self.steps(default, &mut scope.clone(), in_loop);
            }
            StepKind::Merge { sources, .. } => {
                for (i, source) in sources.iter().enumerate() {
                    self.value(s, &["sources", &i.to_string()], source, scope, in_loop);
                }
            }
            StepKind::Spawn { agents, items, .. } => {
                let mut inner = scope.clone();
                if let Some(items) = items {
                    self.value(s, &["inputs", "items"], items, scope, in_loop);
                    inner.extend(["item", "itemIndex"].map(String::from));
                }
                self.steps(agents, &mut inner, in_loop);
            }
            StepKind::ForEach {
                items,
                item_variable,
                index_variable,
                steps,
                ..
            } => {
                self.value(s, &["items"], items, scope, in_loop);
                let mut inner = scope.clone();
                inner.insert(item_variable.clone());
                inner.extend(index_variable.clone());
                self.steps(steps, &mut inner, true);
                // Each item's output is what its steps set: with none, the
                // loop's output is a list of empty lists.
                if let Some(var) = &s.output_variable {
                    let mut set = BTreeSet::new();
                    for inner in steps {
                        collect_outputs(inner, &mut set);
                    }
                    if set.is_empty() {
                        self.warn(
                            Self::pos_of(s, &["output_variable".to_string()]),
                            format!("`{var}` will be a list of empty lists: no step in the loop sets an `output_variable`"),
                            Some("give the loop's steps an `output_variable`: each item's output is what they set".into()),
                        );
                    }
                }
            }
            StepKind::While {
                condition,
                steps,
                initial,
                ..
            } => {
                for (name, v) in initial {
                    self.value(s, &["variables", name], v, scope, in_loop);
                }
                scope.extend(initial.iter().map(|(name, _)| name.clone()));
                self.names(s, &["condition"], condition, true, scope, true);
                self.steps(steps, &mut scope.clone(), true);
            }
            StepKind::Try {
                body,
                catch,
                finally,
            } => {
                self.steps(body, &mut scope.clone(), in_loop);
                let mut c = scope.clone();
                c.insert("error".into());
                self.steps(catch, &mut c, in_loop);
                self.steps(finally, &mut scope.clone(), in_loop);
            }
            StepKind::Map {
                items,
                item_variable,
                expression,
            } => {
                self.value(s, &["items"], items, scope, in_loop);
                let mut inner = scope.clone();
                inner.extend([item_variable.clone(), "index".into()]);
                self.value(s, &["expression"], expression, &inner, in_loop);
            }
            StepKind::Filter {
                items,
                item_variable,
                condition,
            } => {
                self.value(s, &["items"], items, scope, in_loop);
                let mut inner = scope.clone();
                inner.extend([item_variable.clone(), "index".into()]);
                self.names(s, &["condition"], condition, true, &inner, in_loop);
            }
            StepKind::Reduce {
                items,
                item_variable,
                accumulator_variable,
                initial_value,
                expression,
            } => {
                self.value(s, &["items"], items, scope, in_loop);
                self.value(s, &["initial_value"], initial_value, scope, in_loop);
                let mut inner = scope.clone();
                inner.extend([
                    item_variable.clone(),
                    accumulator_variable.clone(),
                    "index".into(),
                ]);
                self.value(s, &["expression"], expression, &inner, in_loop);
            }
            StepKind::Parallel { branches, .. } => {
                for b in branches {
                    self.steps(&b.steps, &mut scope.clone(), in_loop);
                }
                scope.extend(branches.iter().map(|b| b.id.clone()));
            }
        }
        // Variables set inside containers are visible after them.
        for list in s.kind.children() {
            for inner in list {
                collect_outputs(inner, scope);
            }
        }
    }

    /// A default that cannot be the input's value fails every run that
    /// leaves the input out; one made of `${VAR}`s is judged when it runs.
    fn input_defaults(&mut self) {
        for input in &self.wf.inputs {
            let Some(d) = input.default.as_ref().filter(|d| !d.is_null()) else {
                continue;
            };
            if d.to_string().contains("${") {
                continue;
            }
            if let Err(e) = crate::format::inputs::check_value(input, d) {
                self.out.push(Diagnostic::error(
                    &self.wf.source,
                    Some(input.pos),
                    format!(
                        "input `{}`: the default does not fit: {}",
                        input.name, e.message
                    ),
                ));
            }
        }
    }

    fn unused_inputs(&mut self) {
        for input in &self.wf.inputs {
            let n = regex::escape(&input.name);
            let re = regex::Regex::new(&format!(
                r#"\binputs\s*(\.\s*{n}\b|\[\s*['"]{n}['"]\s*\])|\b{n}\b"#
            ))
            .expect("valid regex");
            if !re.is_match(&self.used_text) {
                self.warn(
                    input.pos,
                    format!("input `{}` is never used", input.name),
                    None,
                );
            }
        }
    }
}

impl Lint<'_> {
    /// A declared output that no step sets: said at its name, with the
    /// variable meant when one is a near miss (`totl` for `total`). An output
    /// the last top-level step's object may carry (an action's, a script's)
    /// is not knowable here and is left alone unless a near miss shows the
    /// mistake.
    fn declared_outputs(&mut self) {
        let mut set: BTreeSet<String> = self.defined_anywhere.clone();
        let mut unknown_shape = false;
        for s in self.wf.walk() {
            if let StepKind::Action { action, inputs, .. } = &s.kind {
                if action == "workflow.set_outputs" || action == "workflow.exit" {
                    match inputs {
                        Value::Object(m) if action == "workflow.set_outputs" => {
                            set.extend(m.keys().cloned())
                        }
                        Value::Object(m) => match m.get("outputs") {
                            Some(Value::Object(o)) => set.extend(o.keys().cloned()),
                            None => {}
                            Some(_) => unknown_shape = true,
                        },
                        _ => unknown_shape = true,
                    }
                }
            }
        }
        if unknown_shape {
            return;
        }
        let last_may_carry = self.wf.steps.last().is_some_and(|s| {
            !matches!(
                s.kind,
                StepKind::If { .. }
                    | StepKind::Switch { .. }
                    | StepKind::Wait { .. }
                    | StepKind::Ask(_)
            )
        });
        let names: Vec<&str> = set.iter().map(String::as_str).collect();
        for o in &self.wf.outputs {
            if set.contains(&o.name) {
                continue;
            }
            match did_you_mean(&o.name, &names) {
                // With a last step whose object may carry the name, only a
                // sure misspelling is worth saying.
                Some(c) if !last_may_carry || surely_meant(&o.name, c) => self.warn(
                    o.pos,
                    format!("declared output `{}` is never set", o.name),
                    Some(format!("did you mean `{c}`? (a step sets that one)")),
                ),
                _ if !last_may_carry => self.warn(
                    o.pos,
                    format!("declared output `{}` is never set", o.name),
                    Some(format!(
                        "give a step `output_variable: {}`, or set it with `workflow.set_outputs`",
                        o.name
                    )),
                ),
                _ => {}
            }
        }
    }
}

fn collect_outputs(s: &Step, scope: &mut BTreeSet<String>) {
    if let Some(v) = &s.output_variable {
        scope.insert(v.clone());
    }
    for list in s.kind.children() {
        for inner in list {
            collect_outputs(inner, scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use marktoflow_steps::Registry;
    use std::path::Path;

    fn lint_str(text: &str) -> Vec<String> {
        let l = crate::format::model::load_str(Path::new("t.md"), text, &Registry::standard())
            .unwrap_or_else(|e| panic!("{e:?}"));
        lint(&l.workflow, &Templates::new())
            .into_iter()
            .map(|d| d.render())
            .collect()
    }

    #[test]
    fn finds_typos_unused_inputs_and_constant_conditions() {
        let w = lint_str(
            "---\nworkflow: {id: x}\ninputs:\n  query: {type: string}\n  unused: {type: string}\n---\n\n```yaml\naction: core.set\ninputs: {q: '{{ inputs.query }}'}\noutput_variable: search_results\n```\n\n```yaml\ntype: if\ncondition: 'true'\nthen:\n  - action: core.set\n    inputs: {a: '{{ serch_results.found }}'}\nelse:\n  - action: core.log\n    inputs: {message: x}\n```\n",
        );
        let all = w.join("\n");
        assert!(
            all.contains("`serch_results` is not defined by any step or input"),
            "{all}"
        );
        assert!(all.contains("did you mean `search_results`?"), "{all}");
        assert!(all.contains("input `unused` is never used"), "{all}");
        assert!(!all.contains("input `query` is never used"), "{all}");
        assert!(all.contains("the `else` steps never run"), "{all}");
        assert_eq!(w.len(), 3, "{all}");
    }

    #[test]
    fn the_seed_is_clean() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/seeds/000_fd4e5c8ba954ba6b.txt"
        ));
        let text = std::fs::read_to_string(path).expect("../shared beside the repository");
        let w = lint_str(&text);
        assert!(w.is_empty(), "{w:?}");
    }
}
