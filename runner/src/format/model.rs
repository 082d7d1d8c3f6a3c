//! The typed workflow, built from a [`Document`] with every error pointing
//! into the `.md` file.

use crate::diag::{did_you_mean, Diagnostic, Pos, Source};
use crate::format::document::{parse_document, Block, Document, YamlText};
use crate::format::yamlpos::{positions, PosNode, ScalarStyle, YPos};
use marktoflow_steps::core::catalog::{self, Problem};
use marktoflow_steps::core::mcp;
use marktoflow_steps::registry::{Registry, Resolved};
use marktoflow_steps::ToolConfig;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod step;

#[derive(Debug, Clone, Default)]
pub struct Meta {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub author: Option<String>,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    String,
    Number,
    Integer,
    Boolean,
    Array,
    Object,
}

impl InputType {
    pub const NAMES: &'static [&'static str] =
        &["string", "number", "integer", "boolean", "array", "object"];
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => InputType::String,
            "number" => InputType::Number,
            "integer" => InputType::Integer,
            "boolean" => InputType::Boolean,
            "array" => InputType::Array,
            "object" => InputType::Object,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Number => "number",
            InputType::Integer => "integer",
            InputType::Boolean => "boolean",
            InputType::Array => "array",
            InputType::Object => "object",
        }
    }
}

#[derive(Debug, Clone)]
pub struct InputDef {
    pub name: String,
    pub ty: InputType,
    pub required: bool,
    pub default: Option<Value>,
    pub description: Option<String>,
    pub allowed: Option<Vec<Value>>,
    pub pattern: Option<regex::Regex>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct OutputDef {
    pub name: String,
    pub ty: Option<String>,
    pub description: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub kind: String,
    /// The trigger's fields, with `config:` merged over the top level.
    pub fields: Map<String, Value>,
    pub pos: Pos,
}

/// What to do when a step fails.
#[derive(Debug, Clone, Default)]
pub struct ErrorPolicy {
    pub action: OnError,
    /// `action: fallback` + `fallback_action: tool.method`: called with the
    /// same inputs when the step still fails after its retries.
    pub fallback: Option<(String, Box<Resolved>)>,
    /// None: the action kind's default (agents retry inside the provider layer).
    pub max_retries: Option<u32>,
    pub retry_delay: Option<Duration>,
    pub backoff: Backoff,
    pub max_delay: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    #[default]
    Stop,
    Continue,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backoff {
    #[default]
    Exponential,
    Fixed,
}

/// Where a step's YAML sits, to point errors at its fields.
#[derive(Debug, Clone)]
pub struct Spans {
    pub yaml: Arc<YamlText>,
    pub node: PosNode,
}

impl Spans {
    /// File position of the value at `path` (or the nearest existing parent).
    pub fn pos(&self, path: &[String]) -> Pos {
        let p = self.node.lookup(path).pos();
        self.yaml.file_pos(p.line, p.col)
    }
    /// File position of a key of the step mapping.
    pub fn key_pos(&self, key: &str) -> Pos {
        let p = self.node.key_pos(key).unwrap_or(self.node.pos());
        self.yaml.file_pos(p.line, p.col)
    }
    /// File position of the key `key` of the mapping at `path` (else of
    /// that mapping).
    pub fn key_pos_in(&self, path: &[String], key: &str) -> Pos {
        let node = self.node.lookup(path);
        let p = node.key_pos(key).unwrap_or(node.pos());
        self.yaml.file_pos(p.line, p.col)
    }
    /// File position of 1-based `line`/`col` inside the string value at `path`.
    pub fn pos_in_string(&self, path: &[String], line: usize, col: usize) -> Pos {
        match self.node.lookup(path) {
            PosNode::Scalar(p, style) => {
                let YPos { line: l0, col: c0 } = *p;
                match style {
                    ScalarStyle::Block => self.yaml.file_pos(l0 + line - 1, c0 + col - 1),
                    ScalarStyle::Quoted if line == 1 => self.yaml.file_pos(l0, c0 + col),
                    ScalarStyle::Plain if line == 1 => self.yaml.file_pos(l0, c0 + col - 1),
                    _ => self.yaml.file_pos(l0, c0),
                }
            }
            other => {
                let p = other.pos();
                self.yaml.file_pos(p.line, p.col)
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Step {
    pub id: String,
    pub name: Option<String>,
    pub pos: Pos,
    pub kind: StepKind,
    pub output_variable: Option<String>,
    pub conditions: Vec<String>,
    pub timeout: Option<Duration>,
    pub on_error: ErrorPolicy,
    pub model: Option<String>,
    pub spans: Arc<Spans>,
    /// Key path of this step inside its block (for nested steps).
    pub path: Vec<String>,
}

impl Step {
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
    fn path_to(&self, rest: &[&str]) -> Vec<String> {
        let mut p = self.path.clone();
        p.extend(rest.iter().map(|s| s.to_string()));
        p
    }
    /// File position of a field of this step.
    pub fn field_pos(&self, rest: &[&str]) -> Pos {
        self.spans.pos(&self.path_to(rest))
    }
    /// File position of line/col inside the string at `rest` of this step.
    pub fn string_pos(&self, rest: &[String], line: usize, col: usize) -> Pos {
        let mut p = self.path.clone();
        p.extend(rest.iter().cloned());
        self.spans.pos_in_string(&p, line, col)
    }
}

#[derive(Debug, Clone)]
pub enum StepKind {
    Action {
        action: String,
        resolved: Box<Resolved>,
        inputs: Value,
    },
    If {
        condition: String,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    Switch {
        expression: String,
        cases: Vec<(String, Vec<Step>)>,
        default: Vec<Step>,
    },
    ForEach {
        items: Value,
        item_variable: String,
        index_variable: Option<String>,
        steps: Vec<Step>,
        /// Items in flight at once (1: one after another).
        max_concurrent: usize,
    },
    While {
        condition: String,
        max_iterations: u64,
        steps: Vec<Step>,
        /// `variables: {name: {initial: value}}`: set (rendered) before the
        /// first check of the condition.
        initial: Vec<(String, Value)>,
    },
    Try {
        body: Vec<Step>,
        catch: Vec<Step>,
        finally: Vec<Step>,
    },
    Wait {
        duration: Value,
    },
    Map {
        items: Value,
        item_variable: String,
        expression: Value,
    },
    Filter {
        items: Value,
        item_variable: String,
        condition: String,
    },
    Reduce {
        items: Value,
        item_variable: String,
        accumulator_variable: String,
        initial_value: Value,
        expression: Value,
    },
    Parallel {
        branches: Vec<Branch>,
        max_concurrent: usize,
    },
    SubWorkflow {
        path: String,
        inputs: Value,
    },
}

/// One lane of a `parallel` step.
#[derive(Debug, Clone)]
pub struct Branch {
    pub id: String,
    pub steps: Vec<Step>,
}

impl StepKind {
    pub fn label(&self) -> &'static str {
        match self {
            StepKind::Action { .. } => "action",
            StepKind::If { .. } => "if",
            StepKind::Switch { .. } => "switch",
            StepKind::ForEach { .. } => "for_each",
            StepKind::While { .. } => "while",
            StepKind::Try { .. } => "try",
            StepKind::Wait { .. } => "wait",
            StepKind::Map { .. } => "map",
            StepKind::Filter { .. } => "filter",
            StepKind::Reduce { .. } => "reduce",
            StepKind::Parallel { .. } => "parallel",
            StepKind::SubWorkflow { .. } => "workflow",
        }
    }
    /// The nested step lists, for walking the tree.
    pub fn children(&self) -> Vec<&[Step]> {
        match self {
            StepKind::Action { .. }
            | StepKind::Wait { .. }
            | StepKind::Map { .. }
            | StepKind::Filter { .. }
            | StepKind::Reduce { .. }
            | StepKind::SubWorkflow { .. } => vec![],
            StepKind::Parallel { branches, .. } => {
                branches.iter().map(|b| b.steps.as_slice()).collect()
            }
            StepKind::If {
                then, otherwise, ..
            } => vec![then, otherwise],
            StepKind::Switch { cases, default, .. } => {
                let mut v: Vec<&[Step]> = cases.iter().map(|(_, s)| s.as_slice()).collect();
                v.push(default);
                v
            }
            StepKind::ForEach { steps, .. } | StepKind::While { steps, .. } => vec![steps],
            StepKind::Try {
                body,
                catch,
                finally,
            } => vec![body, catch, finally],
        }
    }
}

#[derive(Debug, Clone)]
pub struct Workflow {
    pub source: Arc<Source>,
    pub meta: Meta,
    pub tools: Vec<ToolConfig>,
    pub triggers: Vec<Trigger>,
    pub inputs: Vec<InputDef>,
    pub outputs: Vec<OutputDef>,
    pub steps: Vec<Step>,
    pub timeout: Option<Duration>,
    /// `permissions.hosts`: the hosts `http.*` may call (None: any).
    pub allowed_hosts: Option<Vec<String>>,
    /// `concurrency:` how many of its runs may execute at once, over every
    /// server and worker of a store.
    pub concurrency: Option<Concurrency>,
}

/// `concurrency: {key: '{{ inputs.user }}', limit: 1}`: at most `limit`
/// runs at once with the same rendered `key` (without a key: of the
/// workflow).
#[derive(Debug, Clone, PartialEq)]
pub struct Concurrency {
    /// A template over `inputs`.
    pub key: Option<String>,
    pub limit: u32,
}

impl Workflow {
    pub fn input(&self, name: &str) -> Option<&InputDef> {
        self.inputs.iter().find(|i| i.name == name)
    }
    /// Every step, depth first.
    pub fn walk(&self) -> Vec<&Step> {
        fn go<'a>(steps: &'a [Step], out: &mut Vec<&'a Step>) {
            for s in steps {
                out.push(s);
                for c in s.kind.children() {
                    go(c, out);
                }
            }
        }
        let mut out = Vec::new();
        go(&self.steps, &mut out);
        out
    }
}

/// A loaded workflow and the warnings found while loading it.
pub struct Loaded {
    pub workflow: Workflow,
    pub warnings: Vec<Diagnostic>,
}

/// Reads and checks a workflow file. Errors are all the problems found.
pub fn load_file(path: &Path, registry: &Registry) -> Result<Loaded, Vec<Diagnostic>> {
    let text = std::fs::read(path).map_err(|e| {
        vec![Diagnostic::file_error(
            &path.display().to_string(),
            format!("cannot read workflow file: {}", io_reason(&e)),
        )]
    })?;
    let text = String::from_utf8(text).map_err(|e| {
        vec![Diagnostic::file_error(
            &path.display().to_string(),
            format!(
                "workflow file is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )]
    })?;
    load_str(path, &text, registry)
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

pub fn load_str(path: &Path, text: &str, registry: &Registry) -> Result<Loaded, Vec<Diagnostic>> {
    let src = Source::new(path, text);
    let doc = parse_document(src.clone());
    let mut cx = Cx {
        src: src.clone(),
        registry,
        errors: Vec::new(),
        warnings: Vec::new(),
        tools: Vec::new(),
        ids: Vec::new(),
        sdk_unknown: Vec::new(),
        sdk_reported: Default::default(),
    };
    let wf = cx.workflow(&doc);
    for (name, pos, sdk) in std::mem::take(&mut cx.sdk_unknown) {
        if !cx.sdk_reported.contains(&name) {
            let e = marktoflow_steps::registry::unsupported_sdk(&name, &sdk, registry.sdks());
            let mut d = Diagnostic::warning(
                &cx.src,
                Some(pos),
                format!("{}; steps that use it will be rejected", e.message),
            );
            d.hints.extend(e.hint);
            cx.warnings.push(d);
        }
    }
    if cx.errors.is_empty() {
        Ok(Loaded {
            workflow: wf,
            warnings: cx.warnings,
        })
    } else {
        cx.errors.sort_by_key(|d| d.pos);
        Err(cx.errors)
    }
}

/// YAML → JSON, with non-string keys stringified and tags dropped.
pub fn yaml_to_json(v: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match yaml_to_json(k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value),
    }
}

pub const TOP_KEYS: &[&str] = &[
    "workflow",
    "tools",
    "triggers",
    "inputs",
    "outputs",
    "steps",
    "permissions",
    "default_agent",
    "default_model",
    "mode",
    "sources",
    "secrets",
    "timeout",
    "concurrency",
];
pub const META_KEYS: &[&str] = &["id", "name", "version", "description", "author", "tags"];
pub const INPUT_KEYS: &[&str] = &[
    "type",
    "required",
    "default",
    "description",
    "enum",
    "pattern",
    "min",
    "max",
    "validation",
];
pub const TOOL_KEYS: &[&str] = &["sdk", "auth", "options", "description"];
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "name",
    "type",
    "description",
    "output_variable",
    "outputVariable",
    "conditions",
    "timeout",
    "error_handling",
    "errorHandling",
    "on_error",
    "model",
    "agent",
];

/// Step types and their own keys.
pub const KINDS: &[(&str, &[&str])] = &[
    (
        "action",
        &[
            "action",
            "inputs",
            "prompt",
            "prompt_inputs",
            "permissions",
            "condition",
            "retry",
        ],
    ),
    ("script", &["inputs", "code", "condition", "retry"]),
    ("if", &["condition", "then", "else", "steps"]),
    ("switch", &["expression", "cases", "default"]),
    (
        "for_each",
        &[
            "items",
            "item_variable",
            "index_variable",
            "steps",
            "max_concurrent",
        ],
    ),
    (
        "while",
        &["condition", "max_iterations", "steps", "variables"],
    ),
    ("try", &["try", "catch", "finally"]),
    ("wait", &["duration", "mode", "fields", "webhook_path"]),
    ("map", &["items", "item_variable", "expression"]),
    ("filter", &["items", "item_variable", "condition"]),
    (
        "reduce",
        &[
            "items",
            "item_variable",
            "accumulator_variable",
            "initial_value",
            "expression",
        ],
    ),
    ("parallel", &["branches", "max_concurrent"]),
    (
        "workflow",
        &[
            "workflow",
            "inputs",
            "use_subagent",
            "subagent_config",
            "condition",
        ],
    ),
];

/// Step types of the peer's format that this version does not run yet.
const NOT_YET: &[&str] = &["merge"];

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
                ));
                Some(Parsed {
                    value: yaml_to_json(v),
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
                self.err(pos, format!("invalid YAML: {msg}"));
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
                let hint = did_you_mean(k, allowed).map(|c| format!("did you mean `{c}`?"));
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
                version: "1.0.0".into(),
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
        };
        let fm = match &doc.frontmatter {
            Some(fm) => self.parse_yaml(fm),
            None => {
                let text = self.src.text.trim_start_matches('\u{feff}');
                let d = if text.lines().next().is_some_and(|l| l.trim_end() == "---") {
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
                    let hint = did_you_mean(k, TOP_KEYS)
                        .map(|c| format!(" (did you mean `{c}`?)"))
                        .unwrap_or_default();
                    self.warn(
                        pos,
                        format!("unknown frontmatter key `{k}` is ignored{hint}"),
                    );
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
        if wf.steps.is_empty() && self.errors.is_empty() {
            self.warn(
                Pos { line: 1, col: 1 },
                "the workflow has no steps (no ```yaml step blocks and no frontmatter `steps:`)",
            );
        }
        wf
    }

    fn meta(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>, meta: &mut Meta) {
        let Some(w) = top.get("workflow") else {
            self.warn(
                spans.pos(&[]),
                "the frontmatter has no `workflow:` section (id, name, version)",
            );
            return;
        };
        let Value::Object(w) = w else {
            let pos = spans.pos(&["workflow".into()]);
            self.err(pos, "`workflow` must be a mapping with `id`, `name`, …");
            return;
        };
        self.check_keys(w, META_KEYS, spans, &["workflow".into()], "`workflow`");
        let s = |k: &str| w.get(k).map(scalar_string);
        if let Some(v) = s("id") {
            meta.id = v;
        }
        if let Some(v) = s("name") {
            meta.name = v;
        }
        if let Some(v) = s("version") {
            meta.version = v;
        }
        meta.description = s("description");
        meta.author = s("author");
        if let Some(Value::Array(tags)) = w.get("tags") {
            meta.tags = tags.iter().map(scalar_string).collect();
        }
    }

    fn tools(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) {
        let Some(tools) = top.get("tools") else {
            return;
        };
        let Value::Object(tools) = tools else {
            let pos = spans.pos(&["tools".into()]);
            self.err(
                pos,
                "`tools` must be a mapping of tool names to `{sdk, auth, options}`",
            );
            return;
        };
        for (name, t) in tools {
            let path = vec!["tools".to_string(), name.clone()];
            let Value::Object(t) = t else {
                let pos = spans.pos(&path);
                self.err(pos, format!("tool `{name}` must be a mapping with `sdk:`"));
                continue;
            };
            let sdk = match t.get("sdk") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    let pos = spans.pos(&path);
                    self.err(pos, format!("tool `{name}` needs `sdk:` (a string)"));
                    continue;
                }
            };
            let is_mcp = sdk == "mcp";
            let keys: Vec<&str> = if is_mcp {
                TOOL_KEYS.iter().chain(mcp::SERVER_KEYS).copied().collect()
            } else {
                TOOL_KEYS.to_vec()
            };
            let mut rest = t.clone();
            if !is_mcp {
                // An MCP server's key on another tool: say what it is for.
                for k in mcp::SERVER_KEYS.iter().filter(|k| t.contains_key(**k)) {
                    rest.remove(*k);
                    let pos = spans.key_pos_in(&path, k);
                    self.err(pos, format!("unknown key `{k}` in tool `{name}`"))
                        .hints
                        .push(format!(
                            "`{k}` belongs to MCP servers (`sdk: mcp`); a tool with sdk `{sdk}` takes settings under `options`"
                        ));
                }
            }
            self.check_keys(&rest, &keys, spans, &path, &format!("tool `{name}`"));
            if !self.registry.knows_sdk(&sdk) {
                let mut p = path.clone();
                p.push("sdk".into());
                let pos = spans.pos(&p);
                self.sdk_unknown.push((name.clone(), pos, sdk.clone()));
            }
            let obj = |k: &str| match t.get(k) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            let mut options = obj("options");
            if is_mcp {
                // The server's keys may sit beside `sdk` (as MCP clients write
                // them) or inside `options` (as the peer's tools do).
                for k in mcp::SERVER_KEYS {
                    if let Some(v) = t.get(*k) {
                        options.insert(k.to_string(), v.clone());
                    }
                }
                self.mcp_server(name, &options, t, spans, &path);
            }
            self.tools.push(ToolConfig {
                name: name.clone(),
                sdk,
                auth: obj("auth"),
                options,
            });
        }
    }

    /// Checks a `sdk: mcp` tool's server keys; `${VAR}`s are filled in
    /// only when it runs, so a `url` or `timeout` made of one is not judged.
    fn mcp_server(
        &mut self,
        name: &str,
        options: &Map<String, Value>,
        tool: &Map<String, Value>,
        spans: &Spans,
        path: &[String],
    ) {
        let mut probe = options.clone();
        let deferred =
            |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.contains("${"));
        if deferred(probe.get("url")) {
            probe.insert("url".into(), Value::String("http://env.invalid/".into()));
        }
        if deferred(probe.get("timeout")) {
            probe.remove("timeout");
        }
        let Err(e) = mcp::ServerConfig::from_options(&probe) else {
            return;
        };
        let mut p = path.to_vec();
        if !e.field.is_empty() {
            if !tool.contains_key(e.field) {
                p.push("options".into());
            }
            p.push(e.field.into());
        }
        let pos = spans.pos(&p);
        self.err(pos, format!("tool `{name}`: {}", e.message));
    }

    fn inputs(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) -> Vec<InputDef> {
        let mut out = Vec::new();
        let Some(inputs) = top.get("inputs") else {
            return out;
        };
        let Value::Object(inputs) = inputs else {
            let pos = spans.pos(&["inputs".into()]);
            self.err(
                pos,
                "`inputs` must be a mapping of input names to definitions",
            );
            return out;
        };
        for (name, def) in inputs {
            let path = vec!["inputs".to_string(), name.clone()];
            let pos = {
                let inputs_node = spans.node.lookup(&path[..1]);
                let kp = inputs_node.key_pos(name).unwrap_or(inputs_node.pos());
                spans.yaml.file_pos(kp.line, kp.col)
            };
            let def = match def {
                Value::Object(d) => d.clone(),
                // `name: string` shorthand.
                Value::String(t) => {
                    let mut m = Map::new();
                    m.insert("type".into(), Value::String(t.clone()));
                    m
                }
                Value::Null => Map::new(),
                _ => {
                    self.err(
                        pos,
                        format!("input `{name}` must be a mapping with `type:`"),
                    );
                    continue;
                }
            };
            self.check_keys(&def, INPUT_KEYS, spans, &path, &format!("input `{name}`"));
            let field = |k: &str| {
                let mut p = path.clone();
                p.push(k.into());
                spans.pos(&p)
            };
            let ty = match def.get("type") {
                None => InputType::String,
                Some(Value::String(t)) => match InputType::parse(t) {
                    Some(ty) => ty,
                    None => {
                        let hint = did_you_mean(t, InputType::NAMES);
                        let d =
                            self.err(field("type"), format!("input `{name}`: unknown type `{t}`"));
                        d.hints.push(match hint {
                            Some(c) => format!("did you mean `{c}`?"),
                            None => format!("expected one of: {}", InputType::NAMES.join(", ")),
                        });
                        continue;
                    }
                },
                Some(_) => {
                    self.err(
                        field("type"),
                        format!("input `{name}`: `type` must be a string"),
                    );
                    continue;
                }
            };
            let validation = match def.get("validation") {
                Some(Value::Object(v)) => v.clone(),
                _ => Map::new(),
            };
            let get = |k: &str| def.get(k).or_else(|| validation.get(k));
            let required = match get("required") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    self.err(
                        field("required"),
                        format!("input `{name}`: `required` must be true or false"),
                    );
                    false
                }
            };
            let pattern = match get("pattern") {
                Some(Value::String(p)) => match regex::Regex::new(&format!("^(?:{p})$")) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.err(
                            field("pattern"),
                            format!("input `{name}`: invalid pattern: {e}"),
                        );
                        None
                    }
                },
                _ => None,
            };
            let allowed = match get("enum") {
                Some(Value::Array(a)) => Some(a.clone()),
                Some(_) => {
                    self.err(
                        field("enum"),
                        format!("input `{name}`: `enum` must be a list"),
                    );
                    None
                }
                None => None,
            };
            let num = |k: &str| get(k).and_then(Value::as_f64);
            out.push(InputDef {
                name: name.clone(),
                ty,
                required,
                default: def.get("default").cloned(),
                description: def.get("description").map(scalar_string),
                allowed,
                pattern,
                min: num("min"),
                max: num("max"),
                pos,
            });
        }
        out
    }

    fn outputs(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) -> Vec<OutputDef> {
        match top.get("outputs") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(o)) => o
                .iter()
                .map(|(name, d)| OutputDef {
                    name: name.clone(),
                    ty: d.get("type").map(scalar_string),
                    description: d.get("description").map(scalar_string),
                })
                .collect(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|n| OutputDef {
                    name: scalar_string(n),
                    ty: None,
                    description: None,
                })
                .collect(),
            Some(_) => {
                let pos = spans.pos(&["outputs".into()]);
                self.err(
                    pos,
                    "`outputs` must be a mapping of output names to `{type, description}`",
                );
                Vec::new()
            }
        }
    }

    fn triggers(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) -> Vec<Trigger> {
        const KINDS: &[&str] = &[
            "manual",
            "webhook",
            "schedule",
            "event",
            "file_watch",
            "mcp",
        ];
        let mut out = Vec::new();
        let Some(t) = top.get("triggers") else {
            return out;
        };
        let Value::Array(items) = t else {
            let pos = spans.pos(&["triggers".into()]);
            self.err(pos, "`triggers` must be a list like `- type: webhook`");
            return out;
        };
        for (i, item) in items.iter().enumerate() {
            let path = vec!["triggers".to_string(), i.to_string()];
            let pos = spans.pos(&path);
            let Value::Object(m) = item else {
                self.err(pos, "a trigger must be a mapping with `type:`");
                continue;
            };
            let kind = m.get("type").map(scalar_string).unwrap_or_default();
            if !KINDS.contains(&kind.as_str()) {
                let hint = did_you_mean(&kind, KINDS);
                let d = self.err(pos, format!("unknown trigger type `{kind}`"));
                d.hints.push(match hint {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!("expected one of: {}", KINDS.join(", ")),
                });
                continue;
            }
            // The seed writes `path:`/`method:` at the top level, the peer
            // under `config:`; both are read.
            let mut fields = m.clone();
            if let Some(Value::Object(cfg)) = m.get("config") {
                for (k, v) in cfg {
                    fields.insert(k.clone(), v.clone());
                }
            }
            fields.remove("config");
            let own: &[&str] = match kind.as_str() {
                "webhook" => &[
                    "path",
                    "method",
                    "secret",
                    "token_env",
                    "inputMapping",
                    "input_mapping",
                    "response",
                    "max_concurrent",
                    "provider",
                    "events",
                ],
                "schedule" => &["cron", "schedule", "inputs", "max_concurrent", "timezone"],
                "file_watch" => &["path", "paths", "debounce", "input", "max_concurrent"],
                "mcp" => &["max_concurrent"],
                // Kinds this runner does not start itself keep whatever they say.
                _ => &[],
            };
            if !own.is_empty() {
                let common = ["type", "enabled", "name", "description", "id", "config"];
                let allowed: Vec<&str> = common.iter().chain(own).copied().collect();
                for k in fields.keys().filter(|k| !allowed.contains(&k.as_str())) {
                    let in_config = !m.contains_key(k);
                    let mut p = path.clone();
                    if in_config {
                        p.push("config".into());
                    }
                    let node = spans.node.lookup(&p);
                    let kp = node.key_pos(k).unwrap_or(node.pos());
                    let at = spans.yaml.file_pos(kp.line, kp.col);
                    let hint = match did_you_mean(k, &allowed) {
                        Some(c) => format!("did you mean `{c}`?"),
                        None => format!("a `{kind}` trigger reads: {}", own.join(", ")),
                    };
                    // An error, not a warning: a misspelt `secret` would
                    // otherwise serve the route without authentication.
                    let d = self.err(at, format!("unknown key `{k}` in a `{kind}` trigger"));
                    d.hints.push(hint);
                }
            }
            if kind == "webhook" {
                match fields.get("provider").map(scalar_string).as_deref() {
                    None | Some("generic" | "github") => {}
                    Some(p @ ("slack" | "telegram" | "discord")) => self.warn(
                        pos,
                        format!("`provider: {p}`: its handshake and request signing are not implemented; the route is a generic JSON webhook (authenticate it with `secret:` or `token_env:`)"),
                    ),
                    Some(other) => {
                        let d = self.err(pos, format!("unknown webhook provider `{other}`"));
                        d.hints.push("expected generic, github, slack, telegram or discord".into());
                    }
                }
            }
            out.push(Trigger { kind, fields, pos });
        }
        out
    }

    /// `concurrency: {key, limit}` (or a bare number: the limit).
    fn concurrency(&mut self, v: &Value, spans: &Spans) -> Option<Concurrency> {
        let here = ["concurrency".to_string()];
        let pos = spans.pos(&here);
        let limit_of = |v: &Value| v.as_u64().filter(|n| (1..=1_000_000).contains(n));
        match v {
            Value::Null => None,
            Value::Number(_) => match limit_of(v) {
                Some(n) => Some(Concurrency {
                    key: None,
                    limit: n as u32,
                }),
                None => {
                    self.err(
                        pos,
                        "`concurrency` must be a whole number of runs, 1 or more",
                    );
                    None
                }
            },
            Value::Object(m) => {
                self.check_keys(m, &["key", "limit"], spans, &here, "`concurrency`");
                let key = match m.get("key") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(k)) if !k.trim().is_empty() => Some(k.clone()),
                    Some(_) => {
                        let pos = spans.pos(&["concurrency".into(), "key".into()]);
                        self.err(pos, "`concurrency.key` must be text, a template over the inputs such as `'{{ inputs.user }}'`");
                        None
                    }
                };
                let limit = match m.get("limit") {
                    None => 1,
                    Some(l) => match limit_of(l) {
                        Some(n) => n as u32,
                        None => {
                            let pos = spans.pos(&["concurrency".into(), "limit".into()]);
                            self.err(
                                pos,
                                "`concurrency.limit` must be a whole number of runs, 1 or more",
                            );
                            return None;
                        }
                    },
                };
                Some(Concurrency { key, limit })
            }
            _ => {
                self.err(
                    pos,
                    "`concurrency` must be a mapping like `{key: '{{ inputs.user }}', limit: 1}`",
                );
                None
            }
        }
    }

    fn duration(&mut self, v: &Value, pos: Pos, what: &str) -> Option<Duration> {
        match marktoflow_steps::builtin::parse_duration(v) {
            Ok(d) => Some(d),
            Err(e) => {
                self.err(pos, format!("`{what}`: {e}"));
                None
            }
        }
    }

    fn body_steps(&mut self, blocks: &[Block]) -> Vec<Step> {
        let mut steps = Vec::new();
        for b in blocks {
            let Some(Parsed { value, spans }) = self.parse_yaml(&b.yaml) else {
                continue;
            };
            let name = b.heading.as_ref().map(|h| {
                if b.index_under_heading > 0 {
                    format!("{h} ({})", b.index_under_heading + 1)
                } else {
                    h.clone()
                }
            });
            match &value {
                Value::Array(items) => {
                    let first = steps.len();
                    let mut list = self.step_list(items, &spans, &[], "", name.as_deref());
                    if list.len() > 1 {
                        for (k, s) in list.iter_mut().enumerate() {
                            if s.name.as_deref() == name.as_deref() && name.is_some() {
                                s.name =
                                    Some(format!("{} ({})", name.as_deref().unwrap_or(""), k + 1));
                            }
                        }
                    }
                    let _ = first;
                    steps.extend(list);
                }
                Value::Object(m) if is_step(m) => {
                    let n = steps.len() + 1;
                    if let Some(s) = self.step(
                        &value,
                        &spans,
                        Vec::new(),
                        &format!("step_{n}"),
                        name.as_deref(),
                    ) {
                        steps.push(s);
                    }
                }
                _ => {
                    self.warn(
                        b.fence,
                        "this ```yaml block is not a step (it has no `action`, `workflow` or `type`); it is ignored. Use another fence language for documentation snippets",
                    );
                }
            }
        }
        steps
    }

    fn step_list(
        &mut self,
        items: &[Value],
        spans: &Arc<Spans>,
        path: &[String],
        prefix: &str,
        heading: Option<&str>,
    ) -> Vec<Step> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut p = path.to_vec();
            p.push(i.to_string());
            let default_id = if prefix.is_empty() {
                format!("step_{}", self.ids.len() + 1)
            } else {
                format!("{prefix}_{}", i + 1)
            };
            if let Some(s) = self.step(item, spans, p, &default_id, heading) {
                out.push(s);
            }
        }
        out
    }
    /// A step's `inputs:`: a mapping, or nothing (an empty one).
    /// Literal inputs against the action's contract; templates wait for
    /// run time, where the engine checks the rendered values the same way.
    fn check_inputs(
        &mut self,
        resolved: &Resolved,
        fallback: Option<&catalog::Spec>,
        inputs: &Value,
        spans: &Spans,
        step_path: &[String],
        action_pos: Pos,
    ) {
        let mut issues = catalog::check(resolved.spec, inputs, &|s| crate::template::has_tags(s));
        // A fallback action gets the same inputs: one of them is enough.
        issues.retain(|i| !catalog::meant_for(i, fallback));
        let mut inputs_path = step_path.to_vec();
        inputs_path.push("inputs".into());
        let inputs_node = spans.node.lookup(step_path);
        let inputs_pos = match inputs_node.key_pos("inputs") {
            Some(p) => spans.yaml.file_pos(p.line, p.col),
            None => action_pos,
        };
        for issue in issues {
            let pos = match &issue.problem {
                _ if issue.input.is_empty() => spans.pos(&inputs_path),
                Problem::Missing => inputs_pos,
                Problem::Unknown { .. } => {
                    let node = spans.node.lookup(&inputs_path);
                    match node.key_pos(&issue.input) {
                        Some(p) => spans.yaml.file_pos(p.line, p.col),
                        None => inputs_pos,
                    }
                }
                _ => {
                    let mut p = inputs_path.clone();
                    p.push(issue.input.clone());
                    spans.pos(&p)
                }
            };
            let hint = issue.hint(resolved.spec);
            let d = self.err(pos, issue.to_string());
            if let Some(h) = hint {
                d.hints.push(h);
            }
        }
    }

    fn inputs_mapping(&mut self, m: &Map<String, Value>, at: Pos) -> Option<Value> {
        match m.get("inputs") {
            None | Some(Value::Null) => Some(Value::Object(Map::new())),
            Some(i @ Value::Object(_)) => Some(i.clone()),
            Some(_) => {
                self.err(at, "`inputs` must be a mapping");
                None
            }
        }
    }

    /// `error_handling`/`errorHandling`/`on_error` (snake_case or the peer's
    /// camelCase keys inside), then the peer examples' `retry:` for what
    /// those left unset. `field` gives the position of a key path.
    fn error_policy(
        &mut self,
        m: &Map<String, Value>,
        field: &dyn Fn(&[&str]) -> Pos,
    ) -> ErrorPolicy {
        let mut pol = ErrorPolicy::default();
        let key = ["error_handling", "errorHandling", "on_error"]
            .into_iter()
            .find(|k| m.contains_key(*k));
        if let Some(key) = key {
            self.error_handling(key, &m[key], field, &mut pol);
        }
        if let Some(r) = m.get("retry") {
            self.retry_block(r, field, &mut pol);
        }
        pol
    }

    fn error_action(&mut self, s: &str, at: Pos) -> Option<OnError> {
        match s {
            "stop" | "fail" | "fallback" => Some(OnError::Stop),
            "continue" | "skip" | "ignore" => Some(OnError::Continue),
            other => {
                let hint = did_you_mean(other, &["stop", "continue", "fallback"]);
                let d = self.err(at, format!("unknown error action `{other}`"));
                d.hints.push(match hint {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "expected `stop`, `continue` or `fallback`".into(),
                });
                None
            }
        }
    }

    fn error_handling(
        &mut self,
        key: &str,
        v: &Value,
        field: &dyn Fn(&[&str]) -> Pos,
        pol: &mut ErrorPolicy,
    ) {
        const EH_KEYS: &[&str] = &[
            "action",
            "max_retries",
            "retry_delay_seconds",
            "backoff",
            "max_delay_seconds",
            "fallback_action",
        ];
        let o = match v {
            Value::String(s) => {
                if let Some(a) = self.error_action(s, field(&[key])) {
                    pol.action = a;
                }
                return;
            }
            Value::Object(o) => o,
            _ => {
                self.err(
                    field(&[key]),
                    format!("`{key}` must be `stop`, `continue` or a mapping"),
                );
                return;
            }
        };
        // The peer reads camelCase here (`maxRetries`); both spellings work.
        let mut written: Map<String, Value> = Map::new();
        let mut spelled: Vec<(&'static str, String)> = Vec::new();
        for (k, val) in o {
            let snake = snake_case(k);
            match EH_KEYS.iter().find(|c| **c == snake) {
                Some(c) => {
                    written.insert(c.to_string(), val.clone());
                    spelled.push((c, k.clone()));
                }
                None => {
                    // Suggest in the spelling the author uses.
                    let camel = k.chars().any(|c| c.is_ascii_uppercase());
                    let hint = did_you_mean(&snake, EH_KEYS).map(|c| {
                        let c = if camel { camel_case(c) } else { c.to_string() };
                        format!("did you mean `{c}`?")
                    });
                    let d = self.err(field(&[key, k]), format!("unknown key `{k}` in `{key}`"));
                    d.hints.push(
                        hint.unwrap_or_else(|| format!("expected one of: {}", EH_KEYS.join(", "))),
                    );
                }
            }
        }
        // The key as the author spelled it.
        let spelled_as = |name: &'static str| -> String {
            spelled
                .iter()
                .find(|(c, _)| *c == name)
                .map_or(name.to_string(), |(_, k)| k.clone())
        };
        let at = |name: &'static str| field(&[key, &spelled_as(name)]);
        if let Some(a) = written.get("action") {
            match a.as_str() {
                Some(a) => {
                    if let Some(a) = self.error_action(a, at("action")) {
                        pol.action = a;
                    }
                }
                None => {
                    self.err(
                        at("action"),
                        "`action` must be `stop`, `continue` or `fallback`",
                    );
                }
            }
        }
        let wants_fallback = written.get("action").and_then(Value::as_str) == Some("fallback");
        match written.get("fallback_action") {
            Some(Value::String(fa)) => match self.registry.resolve(fa, &self.tools) {
                Ok(r) => pol.fallback = Some((fa.clone(), Box::new(r))),
                Err(e) => {
                    if self.first_report(&e) {
                        let d = self.err(
                            at("fallback_action"),
                            format!("`{}`: {}", spelled_as("fallback_action"), e.message),
                        );
                        d.hints.extend(e.hint);
                    }
                }
            },
            Some(_) => {
                self.err(
                    at("fallback_action"),
                    format!(
                        "`{}` must be an action name like `core.set`",
                        spelled_as("fallback_action")
                    ),
                );
            }
            None if wants_fallback => {
                self.err(
                    at("action"),
                    "`action: fallback` needs `fallback_action: tool.method`",
                );
            }
            None => {}
        }
        if let Some(v) = written.get("max_retries") {
            match v.as_u64() {
                Some(n) => pol.max_retries = Some(n.min(100) as u32),
                None => {
                    self.err(
                        at("max_retries"),
                        format!("`{}` must be a whole number", spelled_as("max_retries")),
                    );
                }
            }
        }
        for name in ["retry_delay_seconds", "max_delay_seconds"] {
            let Some(v) = written.get(name) else { continue };
            let d = v.as_f64().and_then(marktoflow_steps::core::time::from_secs);
            if d.is_none() {
                self.err(
                    at(name),
                    format!(
                        "`{}` must be a number of seconds from 0 to 100 years",
                        spelled_as(name)
                    ),
                );
            }
            if name == "retry_delay_seconds" {
                pol.retry_delay = d;
            } else {
                pol.max_delay = d;
            }
        }
        if let Some(b) = written.get("backoff") {
            if let Some(b) = self.backoff(b, at("backoff")) {
                pol.backoff = b;
            }
        }
    }

    fn backoff(&mut self, v: &Value, at: Pos) -> Option<Backoff> {
        match v.as_str() {
            Some("fixed" | "constant") => Some(Backoff::Fixed),
            Some("exponential" | "linear") => Some(Backoff::Exponential),
            _ => {
                let d = self.err(at, "`backoff` must be `exponential` or `fixed`");
                d.hints.push("`linear` is read as `exponential`".into());
                None
            }
        }
    }

    /// The peer examples' `retry: {max_attempts, delay, initial_delay,
    /// max_delay, backoff, on_failure}` (delays in milliseconds): fills what
    /// `error_handling` left unset.
    fn retry_block(&mut self, v: &Value, field: &dyn Fn(&[&str]) -> Pos, pol: &mut ErrorPolicy) {
        const KEYS: &[&str] = &[
            "max_attempts",
            "delay",
            "initial_delay",
            "max_delay",
            "backoff",
            "on_failure",
        ];
        let Value::Object(o) = v else {
            self.err(
                field(&["retry"]),
                "`retry` must be a mapping like `{max_attempts: 3, delay: 1000}`",
            );
            return;
        };
        for (k, val) in o {
            let at = field(&["retry", k]);
            match snake_case(k).as_str() {
                "max_attempts" => match val.as_u64() {
                    Some(n) if n >= 1 => {
                        pol.max_retries.get_or_insert((n - 1).min(100) as u32);
                    }
                    _ => {
                        self.err(at, "`max_attempts` must be a whole number from 1");
                    }
                },
                name @ ("delay" | "initial_delay" | "max_delay") => {
                    match val
                        .as_f64()
                        .and_then(|ms| marktoflow_steps::core::time::from_secs(ms / 1000.0))
                    {
                        Some(d) if name == "max_delay" => {
                            pol.max_delay.get_or_insert(d);
                        }
                        Some(d) => {
                            pol.retry_delay.get_or_insert(d);
                        }
                        None => {
                            self.err(at, format!("`{name}` must be a number of milliseconds"));
                        }
                    }
                }
                "backoff" => {
                    if let Some(b) = self.backoff(val, at) {
                        pol.backoff = b;
                    }
                }
                "on_failure" => match val.as_str() {
                    Some(a) => {
                        if let Some(a) = self.error_action(a, at) {
                            pol.action = a;
                        }
                    }
                    None => {
                        self.err(at, "`on_failure` must be `stop` or `continue`");
                    }
                },
                _ => {
                    let hint = did_you_mean(k, KEYS).map(|c| format!("did you mean `{c}`?"));
                    let d = self.err(at, format!("unknown key `{k}` in `retry`"));
                    d.hints.push(
                        hint.unwrap_or_else(|| format!("expected one of: {}", KEYS.join(", "))),
                    );
                }
            }
        }
    }
}

/// `max_retries` → `maxRetries`.
fn camel_case(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `maxRetries` → `max_retries`; snake_case stays as it is.
fn snake_case(k: &str) -> String {
    let mut out = String::with_capacity(k.len() + 4);
    for c in k.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Line and column (1-based) of the first plain YAML value that starts with
/// `{{` — `key: {{ x }}` or `- {{ x }}` — which YAML reads as a flow mapping.
/// Block scalars (`key: |`) are skipped.
fn unquoted_template(text: &str) -> Option<(usize, usize)> {
    let mut block_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if let Some(b) = block_indent {
            if body.is_empty() || indent > b {
                continue;
            }
            block_indent = None;
        }
        if body.starts_with('#') {
            continue;
        }
        // The value part: after `- ` items and after the first `key: `.
        let mut rest = body;
        let mut at = indent;
        while let Some(r) = rest.strip_prefix("- ") {
            at += rest.len() - r.trim_start().len();
            rest = r.trim_start();
        }
        if !rest.starts_with(['"', '\'', '{', '[']) {
            if let Some(p) = rest.find(": ") {
                let value = rest[p + 2..].trim_start();
                at += rest.len() - value.len();
                rest = value;
            }
        }
        if rest.starts_with("{{") {
            return Some((i + 1, at + 1));
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            block_indent = Some(indent);
        }
    }
    None
}

fn is_step(m: &Map<String, Value>) -> bool {
    m.contains_key("type") || infer_kind(m).is_some()
}

/// The peer's order of inference when `type` is absent.
fn infer_kind(m: &Map<String, Value>) -> Option<&'static str> {
    let has = |k: &str| m.contains_key(k);
    Some(if has("action") {
        "action"
    } else if has("workflow") {
        "workflow"
    } else if has("condition")
        && (has("then") || has("else") || has("steps"))
        && !has("max_iterations")
    {
        "if"
    } else if has("expression") && has("cases") {
        "switch"
    } else if has("items") && has("steps") {
        "for_each"
    } else if has("condition") && has("steps") {
        "while"
    } else if has("items") && has("expression") && has("accumulator_variable") {
        "reduce"
    } else if has("items") && has("expression") {
        "map"
    } else if has("items") && has("condition") {
        "filter"
    } else if has("branches") {
        "parallel"
    } else if has("try") {
        "try"
    } else {
        return None;
    })
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `Step 3: Search Knowledge Base` → `search_knowledge_base`.
pub fn slug(heading: &str) -> String {
    let h = heading.trim();
    let lower = h.to_ascii_lowercase();
    // Drop a leading "Step 3:" / "3." numbering.
    let rest = if let Some(r) = lower.strip_prefix("step") {
        let r = r.trim_start();
        let digits = r.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            r[digits..].trim_start_matches([':', '.', ')', '-', ' '])
        } else {
            lower.as_str()
        }
    } else {
        let digits = lower.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            lower[digits..].trim_start_matches([':', '.', ')', '-', ' '])
        } else {
            lower.as_str()
        }
    };
    let mut out = String::new();
    for c in rest.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_string()
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
}

#[cfg(test)]
mod seed_tests {
    use super::*;

    #[test]
    fn seed_parses_whole() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/seeds/000_fd4e5c8ba954ba6b.txt"
        ));
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
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
