//! The typed workflow, built from a [`Document`] with every error pointing
//! into the `.md` file.

use crate::diag::{did_you_mean, surely_meant, Diagnostic, Pos, Source};
use crate::format::document::{Document, YamlText};
use marktoflow_steps::core::yamlpos::{apply_core_schema, positions, PosNode, ScalarStyle, YPos};
use marktoflow_steps::registry::Registry;
use marktoflow_steps::ToolConfig;
use serde_json::{Map, Value};
use std::sync::Arc;

mod body;
mod keys;
mod load;
mod policy;
mod sections;
mod spawn;
mod step;
mod text;
mod trigger;
mod types;

use keys::{ANSWER_NAMES, ASK_KEYS, FIELD_KEYS, NOT_YET};
pub use keys::{COMMON_KEYS, INPUT_KEYS, KINDS, META_KEYS, TOOL_KEYS, TOP_KEYS};
pub use load::{
    io_reason, load_file, load_parts, load_str, read_text, yaml_to_json, Loaded, Parts,
};
pub use spawn::{MAX_CONCURRENCY, MAX_MAP_ITEMS};
pub use text::{camel_case, slug};
use text::{infer_kind, scalar_string, unquoted_template};
pub use trigger::TriggerKind;
pub use types::{
    ActionStep, Ask, AskMode, Backoff, Branch, Budget, Concurrency, ErrorPolicy, InputDef,
    InputType, MergeMode, Meta, OnError, OnTimeout, OutputDef, Price, Spans, SpawnOnError,
    SpawnWait, Step, StepKind, Trigger, Workflow,
};

struct Cx<'r> {
    src: Arc<Source>,
    registry: &'r Registry,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    tools: Vec<ToolConfig>,
    ids: Vec<(String, Pos)>,
    /// Tools whose sdk we do not provide (name, where its `sdk:` is, sdk):
    /// an error once, at the first step using one; a warning if none does.
    sdk_unknown: Vec<(String, Pos, String)>,
    sdk_reported: std::collections::BTreeSet<String>,
}

/// A YAML text parsed twice: values (serde_yaml) and positions (yaml-rust2).
struct Parsed {
    value: Value,
    spans: Arc<Spans>,
}

impl Cx<'_> {
    fn err(&mut self, pos: Pos, msg: impl Into<String>) -> &mut Diagnostic {
        self.errors
            .push(Diagnostic::error(&self.src, Some(pos), msg));
        self.errors.last_mut().unwrap()
    }

    /// False for a second use of a tool whose sdk we do not provide: that
    /// was said once, at its first use.
    fn first_report(&mut self, e: &marktoflow_steps::registry::ResolveError) -> bool {
        match &e.unsupported_tool {
            Some(tool) => self.sdk_reported.insert(tool.clone()),
            None => true,
        }
    }

    fn warn(&mut self, pos: Pos, msg: impl Into<String>) {
        self.warnings
            .push(Diagnostic::warning(&self.src, Some(pos), msg));
    }

    /// A run pauses only between top-level steps (where its checkpoints
    /// are): a wait for a person inside a branch or loop is refused.
    fn asks_on_top(&mut self, top: &[Step]) {
        fn nested<'a>(steps: &'a [Step], out: &mut Vec<&'a Step>) {
            for s in steps {
                for c in s.kind.children() {
                    for n in c {
                        out.push(n);
                    }
                    nested(c, out);
                }
            }
        }
        let mut inner = Vec::new();
        nested(top, &mut inner);
        for s in inner {
            if let StepKind::Ask(a) = &s.kind {
                let d = self.err(
                    s.pos,
                    format!(
                        "a `wait` with `mode: {}` must be a top-level step: a run pauses only between its top-level steps",
                        a.mode.as_str()
                    ),
                );
                d.hints.push("move it out of the branch, loop or block; its output can decide what the next steps do (`if:`)".into());
            }
        }
    }

    fn parse_yaml(&mut self, yaml: &YamlText) -> Option<Parsed> {
        if let Some((line, col)) = unquoted_template(&yaml.text) {
            let d = self.err(
                yaml.file_pos(line, col),
                "quote the template: YAML reads a value that starts with `{{` as a mapping",
            );
            d.hints
                .push("write `key: '{{ x }}'` (or use a block scalar `key: |`)".into());
            return None;
        }
        if let Err(e) = marktoflow_steps::core::yaml::check(&yaml.text) {
            self.err(
                yaml.file_pos(e.line, 1),
                format!("YAML too complex to read: {}", e.what),
            );
            return None;
        }
        match serde_yaml::from_str::<serde_yaml::Value>(&yaml.text) {
            Ok(v) => {
                let node = positions(&yaml.text).unwrap_or(PosNode::Scalar(
                    YPos { line: 1, col: 1 },
                    ScalarStyle::Plain,
                    None,
                ));
                let mut value = yaml_to_json(v);
                apply_core_schema(&mut value, &node);
                Some(Parsed {
                    value,
                    spans: Arc::new(Spans {
                        yaml: Arc::new(yaml.clone()),
                        node,
                    }),
                })
            }
            Err(e) => {
                let (line, col) = e
                    .location()
                    .map(|l| (l.line(), l.column()))
                    .unwrap_or((1, 1));
                let pos = yaml.file_pos(line, col);
                // serde_yaml says "... at line L column C[, while ... at line L2 column C2]"
                // within the block: drop the first (shown in the header), map the rest.
                let raw = e.to_string();
                let at = regex::Regex::new(r" at line (\d+) column (\d+)").expect("valid regex");
                let mut first = true;
                let msg = at.replace_all(&raw, |c: &regex::Captures| {
                    if std::mem::take(&mut first) {
                        return String::new();
                    }
                    let l: usize = c[1].parse().unwrap_or(1);
                    let k: usize = c[2].parse().unwrap_or(1);
                    let p = yaml.file_pos(l, k);
                    format!(" at line {} column {}", p.line, p.col)
                });
                let file_line = |n: usize| yaml.file_pos(n, 1).line;
                match crate::format::yamlhint::explain(&yaml.text, line, col, &raw, &file_line) {
                    Some((said, hint)) => {
                        self.err(pos, format!("invalid YAML: {said}"))
                            .hints
                            .push(hint);
                    }
                    None => {
                        self.err(pos, format!("invalid YAML: {msg}"));
                    }
                }
                None
            }
        }
    }

    fn check_keys(
        &mut self,
        obj: &Map<String, Value>,
        allowed: &[&str],
        spans: &Spans,
        path: &[String],
        what: &str,
    ) {
        for k in obj.keys() {
            if !allowed.contains(&k.as_str()) {
                let mut p = path.to_vec();
                p.push(k.clone());
                let node = spans.node.lookup(&p[..p.len() - 1]);
                let kp = node.key_pos(k).unwrap_or(node.pos());
                let pos = spans.yaml.file_pos(kp.line, kp.col);
                // Suggested in the spelling the author uses (the peer's
                // camelCase works as well).
                let hint = if k.chars().any(|c| c.is_ascii_uppercase()) {
                    did_you_mean(&text::snake_case(k), allowed).map(text::camel_case)
                } else {
                    did_you_mean(k, allowed).map(str::to_string)
                }
                .map(|c| format!("did you mean `{c}`?"));
                let d = self.err(pos, format!("unknown key `{k}` in {what}"));
                d.hints.push(
                    hint.unwrap_or_else(|| format!("expected one of: {}", allowed.join(", "))),
                );
            }
        }
    }

    fn workflow(&mut self, doc: &Document) -> Workflow {
        let mut wf = Workflow {
            source: self.src.clone(),
            meta: Meta {
                id: "unnamed".into(),
                name: "Unnamed Workflow".into(),
                // Only what the file says (none: the console shows none).
                version: String::new(),
                ..Default::default()
            },
            tools: Vec::new(),
            triggers: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            steps: Vec::new(),
            timeout: None,
            allowed_hosts: None,
            concurrency: None,
            budget: Default::default(),
            behaviour: doc.behaviour_digest(),
        };
        let fm = match &doc.frontmatter {
            Some(fm) => self.parse_yaml(fm),
            None => {
                let text = self.src.text.trim_start_matches('\u{feff}');
                let unclosed = crate::format::document::unclosed_frontmatter(&self.src);
                let d = if let Some(line) = unclosed {
                    Diagnostic::error(
                        &self.src,
                        Some(Pos { line, col: 1 }),
                        format!(
                            "the frontmatter starting at line {line} is never closed with `---`"
                        ),
                    )
                    .with_hint(
                        "end the frontmatter with a `---` line before the first heading or step",
                    )
                } else if let Some(line) = peer_daemon(text) {
                    // Its steps wait for events this runner has no sources
                    // for: one error says so, instead of one per step.
                    self.errors.push(
                        Diagnostic::error(
                            &self.src,
                            Some(Pos { line, col: 1 }),
                            "this is a daemon workflow of the TypeScript marktoflow (`mode: daemon`, event `sources:`), which this runner does not run",
                        )
                        .with_hint("write it as a workflow with `triggers:` and serve it with `marktoflow serve`: a cron source becomes a `schedule` trigger, an HTTP or chat source a `webhook`, a file source `file_watch` (docs/compatibility.md, daemon mode)"),
                    );
                    return wf;
                } else if text.lines().next().is_some_and(|l| l.trim_end() == "---") {
                    // A YAML block is there, without any key of a workflow.
                    Diagnostic::error(
                        &self.src,
                        Some(Pos { line: 1, col: 1 }),
                        "the frontmatter has no `workflow:` (nor `tools:`, `inputs:`, `steps:`, `triggers:`, `outputs:`)",
                    )
                    .with_hint("a workflow's frontmatter starts with `workflow: {id: ..., name: ...}`; the peer's daemon files (`metadata:`, `mode: daemon`, `sources:`) are not supported")
                } else {
                    Diagnostic::error(&self.src, Some(Pos { line: 1, col: 1 }), "no workflow frontmatter found")
                        .with_hint("add a YAML block between two `---` lines with at least `workflow:` (it may follow a title and prose)")
                };
                self.errors.push(d);
                None
            }
        };
        let mut fm_steps = None;
        if let Some(Parsed { value, spans }) = fm {
            let Value::Object(top) = value else {
                let pos = spans.pos(&[]);
                self.err(pos, "the frontmatter must be a mapping of keys like `workflow:`, `inputs:`, `tools:`");
                return wf;
            };
            for k in top.keys() {
                if !TOP_KEYS.contains(&k.as_str()) {
                    let pos = spans.key_pos(k);
                    match did_you_mean(k, TOP_KEYS) {
                        // A misspelt key would be ignored, and what it holds
                        // (a schedule, the inputs) silently never apply.
                        Some(c) if surely_meant(k, c) => {
                            self.err(pos, format!("unknown frontmatter key `{k}`"))
                                .hints
                                .push(format!("did you mean `{c}`? (as written, this key and all it holds would be ignored)"));
                        }
                        Some(c) => self.warn(
                            pos,
                            format!(
                                "unknown frontmatter key `{k}` is ignored (did you mean `{c}`?)"
                            ),
                        ),
                        None => self.warn(pos, format!("unknown frontmatter key `{k}` is ignored")),
                    }
                }
            }
            self.meta(&top, &spans, &mut wf.meta);
            self.tools(&top, &spans);
            wf.tools = self.tools.clone();
            wf.inputs = self.inputs(&top, &spans);
            wf.outputs = self.outputs(&top, &spans);
            wf.triggers = self.triggers(&top, &spans);
            match top.get("permissions") {
                None | Some(Value::Null) => {}
                Some(Value::Object(p)) => {
                    self.check_keys(
                        p,
                        &["hosts", "network"],
                        &spans,
                        &["permissions".into()],
                        "`permissions`",
                    );
                    match p.get("hosts").or_else(|| p.get("network")) {
                        None => {}
                        Some(Value::Array(h)) => {
                            wf.allowed_hosts = Some(h.iter().map(scalar_string).collect())
                        }
                        Some(_) => {
                            let pos = spans.pos(&["permissions".into(), "hosts".into()]);
                            self.err(pos, "`permissions.hosts` must be a list of host names");
                        }
                    }
                }
                Some(_) => {
                    let pos = spans.pos(&["permissions".into()]);
                    self.err(
                        pos,
                        "`permissions` must be a mapping like `{hosts: [api.example.com]}`",
                    );
                }
            }
            if let Some(t) = top.get("timeout") {
                wf.timeout = self.duration(t, spans.pos(&["timeout".into()]), "timeout");
            }
            if let Some(c) = top.get("concurrency") {
                wf.concurrency = self.concurrency(c, &spans);
            }
            if let Some(b) = top.get("budget") {
                wf.budget = self.budget(b, &spans);
            }
            if let Some(steps) = top.get("steps") {
                fm_steps = Some((steps.clone(), spans.clone()));
            }
        }
        if let Some((steps, spans)) = fm_steps {
            // Steps in the frontmatter: the body's blocks are documentation.
            match steps {
                Value::Array(items) => {
                    wf.steps = self.step_list(&items, &spans, &["steps".into()], "", None);
                }
                _ => {
                    let pos = spans.pos(&["steps".into()]);
                    self.err(pos, "`steps` must be a list of steps");
                }
            }
        } else {
            wf.steps = self.body_steps(&doc.blocks);
        }
        self.asks_on_top(&wf.steps);
        if wf.steps.is_empty() && self.errors.is_empty() {
            self.warn(
                Pos { line: 1, col: 1 },
                "the workflow has no steps (no ```yaml step blocks and no frontmatter `steps:`)",
            );
        }
        wf
    }
}

/// The line of `mode: daemon` (or of `sources:`) in the first `---` block:
/// the peer's daemon files, which have no `workflow:`.
fn peer_daemon(text: &str) -> Option<usize> {
    let mut lines = text.lines().enumerate();
    // The block may follow a title or a comment, as a workflow's may.
    lines.find(|(_, l)| l.trim_end() == "---")?;
    lines
        .take_while(|(_, l)| l.trim_end() != "---")
        .find(|(_, l)| {
            let l = l.trim_end();
            l.starts_with("sources:")
                || l.strip_prefix("mode:")
                    .is_some_and(|m| m.trim().trim_matches(['\'', '"']) == "daemon")
        })
        .map(|(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_unquoted_templates() {
        assert_eq!(unquoted_template("a: 1\nb: {{ x }}\n"), Some((2, 4)));
        assert_eq!(unquoted_template("items:\n  - {{ x }}\n"), Some((2, 5)));
        assert_eq!(unquoted_template("a: '{{ x }}'\nb: \"{{ y }}\"\n"), None);
        assert_eq!(
            unquoted_template("code: |\n  {{ x }}\n  y: {{ z }}\nc: 1\n"),
            None
        );
        assert_eq!(unquoted_template("m: {a: 1}\nn: [1]\n"), None);
    }

    #[test]
    fn slugs() {
        assert_eq!(
            slug("Step 3: Search Knowledge Base"),
            "search_knowledge_base"
        );
        assert_eq!(slug("2. Parse it!"), "parse_it");
        assert_eq!(slug("Stepping stones"), "stepping_stones");
    }

    /// Unnamed steps sharing a heading are told apart by place and by the
    /// id their author wrote; a lone step and an author's name are kept.
    #[test]
    fn steps_under_one_heading_are_numbered() {
        let text = "---\nworkflow: {id: t}\n---\n# Write\n```yaml\naction: core.set\n```\n```yaml\nid: save\naction: core.set\n```\n```yaml\nname: Mine\naction: core.set\n```\n# Two\n```yaml\n- action: core.set\n- action: core.set\n```\n# One\n```yaml\naction: core.set\n```\n";
        let wf = load_str(std::path::Path::new("t.md"), text, &Registry::standard())
            .map_err(|e| e.iter().map(|d| d.render()).collect::<Vec<_>>())
            .unwrap()
            .workflow;
        let names: Vec<&str> = wf.steps.iter().map(|s| s.display_name()).collect();
        assert_eq!(
            names,
            [
                "Write (1 of 3)",
                "Write (2 of 3, save)",
                "Mine",
                "Two (1 of 2)",
                "Two (2 of 2)",
                "One"
            ]
        );
        let ids: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["write", "save", "write_2", "two", "two_2", "one"]);
    }
}

#[cfg(test)]
mod seed_tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn seed_parses_whole() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/seeds/000_fd4e5c8ba954ba6b.txt"
        ));
        // ../shared sits beside the clone in CI and in the README's setup.
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let loaded = load_str(path, &text, &Registry::standard()).unwrap_or_else(|e| {
            panic!(
                "{}",
                e.iter().map(|d| d.render()).collect::<Vec<_>>().join("\n")
            )
        });
        let wf = loaded.workflow;
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(wf.meta.id, "lifeos-retrieval");
        let ids: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "analyze_query_intent",
                "parse_query_analysis",
                "search_knowledge_base",
                "has_results",
                "set_outputs"
            ]
        );
        assert_eq!(wf.steps[0].model.as_deref(), Some("haiku"));
        assert_eq!(
            wf.steps[0].output_variable.as_deref(),
            Some("query_analysis_raw")
        );
        assert_eq!(
            wf.steps[1].output_variable.as_deref(),
            Some("query_analysis")
        );
        let StepKind::Action { inputs, .. } = &wf.steps[1].kind else {
            panic!()
        };
        assert!(inputs["code"]
            .as_str()
            .unwrap()
            .contains("return analysis;"));
        let StepKind::If {
            condition,
            then,
            otherwise,
        } = &wf.steps[3].kind
        else {
            panic!()
        };
        assert_eq!(condition, "{{ search_results.found }}");
        assert_eq!((then.len(), otherwise.len()), (2, 1));
        assert_eq!(wf.steps[3].name.as_deref(), Some("Step 4: Generate Answer"));
        assert_eq!(wf.steps[0].pos.line, 85);
        assert_eq!(wf.triggers[1].fields["path"], "/lifeos/query");
        assert_eq!(wf.inputs.len(), 4);
    }
}

#[cfg(test)]
mod robustness {
    use super::*;
    use std::path::Path;

    /// No input makes the loader panic: truncations and line deletions of
    /// real workflows, and some hostile shapes.
    #[test]
    fn mangled_workflows_never_panic() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
        let mut texts: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .collect();
        assert!(texts.len() >= 5);
        texts.push("---\nworkflow: [\n---\n".into());
        texts.push("---\nworkflow: {id: x}\nsteps: 5\n---\n".into());
        texts.push("---\ninputs: {a: {type: 3, enum: 4, pattern: '('}}\n---\n```yaml\n- 1\n- [a]\n- {type: 7}\n```\n".into());
        texts.push("---\nworkflow: {id: x}\n---\n```yaml\n&a [*a]\n```\n```yaml\ntype: if\ncondition: {x: 1}\nthen: 3\n```\n".into());
        texts.push(
            "\u{feff}---\r\nworkflow: {id: x}\r\n---\r\n```yml\r\naction: core.set\r\n```".into(),
        );
        texts.push("---\nworkflow: {id: x}\n---\n```yaml\ntype: parallel\nbranches: [{id: a}, 3, {steps: [{action: core.set}]}]\n```\n```yaml\ntype: reduce\nitems: []\n```\n".into());
        let reg = Registry::standard();
        for text in &texts {
            let lines: Vec<&str> = text.split('\n').collect();
            for cut in (0..text.len()).step_by(7) {
                if text.is_char_boundary(cut) {
                    let _ = load_str(Path::new("t.md"), &text[..cut], &reg);
                }
            }
            for skip in 0..lines.len() {
                let mut l = lines.clone();
                l.remove(skip);
                let _ = load_str(Path::new("t.md"), &l.join("\n"), &reg);
            }
        }
    }
}
