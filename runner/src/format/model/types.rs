//! The typed workflow: what a loaded file is (meta, inputs, triggers,
//! steps and their kinds, error policies), with where each part was written.

use crate::diag::{Pos, Source};
use crate::format::document::YamlText;
use marktoflow_steps::core::yamlpos::{PosNode, ScalarStyle, YPos};
use marktoflow_steps::registry::Resolved;
use marktoflow_steps::ToolConfig;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

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
    /// Any JSON value (text that is not JSON is refused).
    Json,
}

impl InputType {
    pub const NAMES: &'static [&'static str] = &[
        "string", "number", "integer", "boolean", "array", "object", "json",
    ];
    pub(super) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => InputType::String,
            "number" => InputType::Number,
            "integer" => InputType::Integer,
            "boolean" => InputType::Boolean,
            "array" => InputType::Array,
            "object" => InputType::Object,
            "json" => InputType::Json,
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
            InputType::Json => "json",
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
    /// The input a server fills with the tenant its caller's token grants
    /// (`tenant: true`); a request cannot set it to another.
    pub tenant: bool,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct OutputDef {
    pub name: String,
    pub ty: Option<String>,
    pub description: Option<String>,
    /// Where the name is written.
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub kind: super::TriggerKind,
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
            PosNode::Scalar(p, style, _) => {
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
    /// `type: wait` with `mode: form | approval | webhook`: the run stops
    /// here, leaves memory, and goes on when a person (or an event) answers.
    Ask(Box<Ask>),
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
    /// The peer's `merge`: lists combined (see [`MergeMode`]).
    Merge {
        mode: MergeMode,
        /// Each a template or value giving a list.
        sources: Vec<Value>,
        /// The dotted path compared (`match`, `diff`, `combine_by_field`).
        match_field: Option<String>,
        /// `on_conflict: keep_first` (else the later item's fields win).
        keep_first: bool,
    },
    /// The peer's `parallel.spawn` (one agent step per agent, side by side)
    /// and `parallel.map` (one agent step, once per item of `items`).
    Spawn {
        agents: Vec<Step>,
        /// `parallel.map`'s items; `None` for `parallel.spawn`.
        items: Option<Value>,
        wait: SpawnWait,
        on_error: SpawnOnError,
        /// Agents in flight at once.
        max_concurrent: usize,
    },
}

/// How a `merge` step combines its sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// All items, source after source.
    Append,
    /// The first source's items whose field every source has.
    Match,
    /// The first source's items whose field no other source has.
    Diff,
    /// One item per field value, the items' fields merged.
    CombineByField,
}

/// How many of `parallel.spawn`'s agents to wait for; the rest are stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnWait {
    All,
    Any,
    Majority,
    Count(usize),
}

/// What failed agents do to a `parallel.spawn` or `parallel.map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnOnError {
    /// Any failure fails the step.
    Fail,
    /// Failures are reported in the result.
    Continue,
    /// The step fails only when every agent failed.
    Partial,
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
            StepKind::Wait { .. } | StepKind::Ask(_) => "wait",
            StepKind::Map { .. } => "map",
            StepKind::Filter { .. } => "filter",
            StepKind::Reduce { .. } => "reduce",
            StepKind::Parallel { .. } => "parallel",
            StepKind::SubWorkflow { .. } => "workflow",
            StepKind::Merge { .. } => "merge",
            StepKind::Spawn { items: None, .. } => "parallel.spawn",
            StepKind::Spawn { items: Some(_), .. } => "parallel.map",
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
            | StepKind::Merge { .. }
            | StepKind::SubWorkflow { .. } => vec![],
            StepKind::Parallel { branches, .. } => {
                branches.iter().map(|b| b.steps.as_slice()).collect()
            }
            StepKind::Spawn { agents, .. } => vec![agents],
            StepKind::Ask(a) => vec![&a.notify, &a.on_approve, &a.on_reject],
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

/// What a `wait` that pauses the run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskMode {
    /// Values a person fills in (`fields:`).
    Form,
    /// Approve or reject (with a comment, and any `fields:`).
    Approval,
    /// An outside event: a request to `/events/{key}`.
    Webhook,
    /// Not written in a workflow: a run paused from outside
    /// (`POST /runs/{id}/pause`) before a top-level step, resumed by any answer.
    Pause,
}

impl AskMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AskMode::Form => "form",
            AskMode::Approval => "approval",
            AskMode::Webhook => "webhook",
            AskMode::Pause => "pause",
        }
    }
}

/// What happens when nobody answers a wait in its `timeout`.
#[derive(Debug, Clone, PartialEq)]
pub enum OnTimeout {
    /// The step fails (its `on_error` applies).
    Fail,
    /// The step completes with `timed_out: true` and no values.
    Continue,
    /// The step completes with these values, as if answered.
    Default(Map<String, Value>),
}

/// A `wait` that pauses the run for an answer (see [`StepKind::Ask`]).
#[derive(Debug, Clone)]
pub struct Ask {
    pub mode: AskMode,
    /// Templates rendered with the run's variables when the wait starts.
    pub title: Option<String>,
    pub prompt: Option<String>,
    /// Where the prompt is written: `prompt` or `message`.
    pub prompt_key: &'static str,
    /// What the person fills in, checked like workflow inputs.
    pub fields: Vec<InputDef>,
    /// The step's `timeout`: how long the wait stays open.
    pub timeout: Option<Duration>,
    pub on_timeout: OnTimeout,
    /// Distinct approvals needed (approval mode).
    pub approvals: u32,
    /// Who may answer (identities); empty: anyone allowed to reach it.
    pub approvers: Vec<String>,
    /// Who asked (a template): with `self_approval: false`, they cannot answer.
    pub requester: Option<String>,
    pub self_approval: bool,
    /// Webhook mode: the correlation key (a template).
    pub key: Option<String>,
    /// Webhook mode: the HMAC secret or bearer token an event must carry
    /// (`${VAR}` from the server's environment), as webhook triggers take.
    pub secret: Option<String>,
    pub token: Option<String>,
    /// How long a link to answer stays valid (default: the timeout, else 7 days).
    pub link_ttl: Option<Duration>,
    /// Steps run when the wait starts (`wait.link` in scope): send the link.
    pub notify: Vec<Step>,
    pub on_approve: Vec<Step>,
    pub on_reject: Vec<Step>,
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
    /// `budget:` what a run's model calls may spend, and the prices that
    /// say what they cost.
    pub budget: Budget,
    /// `concurrency:` how many of its runs may execute at once, over every
    /// server and worker of a store.
    pub concurrency: Option<Concurrency>,
    /// What runs, as a digest (see
    /// [`crate::format::document::Document::behaviour_digest`]): the version
    /// a run records.
    pub behaviour: String,
}

/// An action step and its parts (see [`Workflow::actions`]).
pub struct ActionStep<'a> {
    pub step: &'a Step,
    /// `tool.method` as written.
    pub action: &'a str,
    pub resolved: &'a Resolved,
    pub inputs: &'a Value,
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
    /// The `wait` step `id` that pauses the run (always top-level).
    pub fn ask(&self, id: &str) -> Option<&Ask> {
        self.steps.iter().find_map(|s| match &s.kind {
            StepKind::Ask(a) if s.id == id => Some(&**a),
            _ => None,
        })
    }
    /// Every action step, depth first, with its parts (what most checks
    /// before a run look at).
    pub fn actions(&self) -> Vec<ActionStep<'_>> {
        self.walk()
            .into_iter()
            .filter_map(|step| match &step.kind {
                StepKind::Action {
                    action,
                    resolved,
                    inputs,
                } => Some(ActionStep {
                    step,
                    action,
                    resolved,
                    inputs,
                }),
                _ => None,
            })
            .collect()
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

/// `budget: {tokens, cost_usd, daily_tokens, daily_cost_usd, prices}`: what
/// model calls may spend (each limit None: none), for one run and for all
/// of a workflow's runs of a day (UTC), and the prices (US dollars per
/// million tokens, by model name or its beginning) that override the
/// built-in table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budget {
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub daily_tokens: Option<u64>,
    pub daily_cost_usd: Option<f64>,
    pub prices: Vec<(String, Price)>,
}

/// A model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}
