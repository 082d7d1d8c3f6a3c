//! The engine in-process: control flow, retries, timeouts and the checks of
//! rendered inputs, without the binary. Actions are the real built-ins; no
//! step here runs a script or calls a model.

use super::*;
use crate::format::model::load_str;
use marktoflow_steps::core::action::hosts::{Llm, ScriptError, ScriptJob, ScriptRunner};
use marktoflow_steps::core::state::StateDir;
use marktoflow_steps::core::{
    action::{Call, Capabilities},
    error::ActionError,
    signals::{Cancel, LogLine},
};
use marktoflow_steps::ToolConfig;
use marktoflow_steps::{Registry, Sandbox};
use serde_json::json;
use std::path::Path;
use std::sync::Mutex;

/// Scripts and models are not part of these tests: asked for one, they fail.
struct Unavailable;

#[async_trait::async_trait]
impl ScriptRunner for Unavailable {
    async fn run(
        &self,
        _: ScriptJob,
        _: &(dyn Fn(LogLine) + Send + Sync),
        _: &Cancel,
    ) -> Result<Value, ScriptError> {
        Err(ScriptError::Internal("no scripts in engine tests".into()))
    }
}

#[async_trait::async_trait]
impl Llm for Unavailable {
    fn preflight(
        &self,
        _: &ToolConfig,
        _: Option<&str>,
        _: &std::collections::BTreeMap<String, String>,
    ) -> Result<String, String> {
        Err("no models in engine tests".into())
    }
    async fn complete(&self, _: &Call<'_>, _: &Value) -> Result<String, ActionError> {
        Err(ActionError::failed("no models in engine tests"))
    }
}

/// Where the wall clock of these runs starts: 2024-01-15T10:00:00Z.
const T0: i64 = 1_705_312_800_000;

/// Runs `text` (a workflow) with `inputs`; returns the result and the
/// events it emitted.
fn run(text: &str, inputs: Value) -> (RunResult, Vec<RunEvent>) {
    let (r, events) = run_timed(text, inputs);
    (r, events.into_iter().map(|e| e.kind).collect())
}

/// [`run`] on a paused tokio clock, which jumps ahead whenever every task
/// waits (retry delays, sleeps, timeouts take no real time), with a fixed
/// wall clock at [`T0`]; the events keep their times.
fn run_timed(text: &str, inputs: Value) -> (RunResult, Vec<Event>) {
    run_env(text, inputs, &[])
}

/// [`run_timed`] with environment variables.
fn run_env(text: &str, inputs: Value, env: &[(&str, &str)]) -> (RunResult, Vec<Event>) {
    let registry = Registry::standard();
    let wf = match load_str(Path::new("t.md"), text, &registry) {
        Ok(l) => l.workflow,
        Err(d) => panic!("{:?}", d.iter().map(|d| d.render()).collect::<Vec<_>>()),
    };
    let dir = std::env::temp_dir();
    let caps = Capabilities {
        clock: Arc::new(marktoflow_steps::core::time::FixedClock::at(T0)),
        ..Capabilities::new(
            Sandbox::closed(dir.clone()),
            StateDir {
                root: dir.join("marktoflow-engine-tests"),
                project: false,
            },
            Arc::new(Unavailable),
            Arc::new(Unavailable),
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            None,
        )
    };
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let cfg = RunConfig {
        run_id: "r".into(),
        caps,
        events: Arc::new(move |e: &Event| sink.lock().unwrap().push(e.clone())),
        loader: None,
        callers: Vec::new(),
        debugger: None,
        trigger: Value::Null,
        lease: None,
        recorded: None,
        answers: Default::default(),
        waits: None,
        pause: None,
        mocks: None,
    };
    let inputs = match inputs {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let result = rt.block_on(Engine::new().run(&wf, inputs, cfg));
    let events = events.lock().unwrap().clone();
    (result, events)
}

fn wf(steps: &str) -> String {
    format!("---\nworkflow: {{id: t}}\ninputs:\n  n: {{type: integer, default: 2}}\n---\n\n```yaml\n{steps}\n```\n")
}

#[test]
fn branches_loops_and_outputs() {
    let (r, _) = run(
        &wf("- id: pick\n  type: if\n  condition: inputs.n > 1\n  then:\n    - action: core.set\n      inputs: {size: big}\n      output_variable: chosen\n  else:\n    - action: core.set\n      inputs: {size: small}\n      output_variable: chosen\n- type: for_each\n  items: '{{ [1, 2, 3] }}'\n  steps:\n    - action: core.set\n      inputs: {last: '{{ item * inputs.n }}'}\n      output_variable: last\n- action: workflow.set_outputs\n  inputs: {size: '{{ chosen.size }}', last: '{{ last.last }}'}"),
        json!({"n": 5}),
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.outputs, json!({"size": "big", "last": 15}));
}

#[test]
fn retries_are_counted_and_reported_then_the_step_fails() {
    let (r, events) = run(
        &wf("action: workflow.fail\ninputs: {message: down}\nerror_handling: {max_retries: 2, retry_delay_seconds: 0}"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.steps[0].retries, 2);
    let retries = events
        .iter()
        .filter(|e| matches!(e, RunEvent::StepRetry { .. }))
        .count();
    assert_eq!(retries, 2);
    assert!(r.error.unwrap().message.contains("down"));
}

#[test]
fn on_error_continue_keeps_going() {
    let (r, _) = run(
        &wf("- id: bad\n  action: workflow.fail\n  inputs: {message: nope}\n  on_error: continue\n- action: workflow.set_outputs\n  inputs: {after: '{{ steps.bad.status }}'}"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.outputs, json!({"after": "failed"}));
}

#[test]
fn a_step_timeout_stops_the_step_not_the_process() {
    // The sleep is ten minutes, the timeout a tenth of a second: only the
    // timeout can end the step (on the paused clock, at once).
    let (r, _) = run(
        &wf("action: workflow.sleep\ninputs: {duration: 10m}\ntimeout: 100ms"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert!(e.message.contains("timed out after 100ms"), "{}", e.message);
    assert_eq!(r.steps[0].duration_ms, 100, "measured on the run's clock");
}

#[test]
fn retry_delays_follow_the_policy_on_a_fake_clock() {
    // Ten minutes between tries, capped at fifteen: an hour of waiting that
    // the paused clock skips.
    let (r, events) = run(
        &wf("action: workflow.fail\ninputs: {message: down}\nerror_handling: {max_retries: 3, retry_delay_seconds: 600, max_delay_seconds: 900}"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Failed);
    let delays: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::StepRetry { delay_ms, .. } => Some(*delay_ms),
            _ => None,
        })
        .collect();
    // 10 min, 20 min capped to 15, 15: each within its ±10 %.
    let want = [600_000u64, 900_000, 900_000];
    assert_eq!(delays.len(), 3, "{delays:?}");
    for (d, w) in delays.iter().zip(want) {
        assert!(*d >= w * 9 / 10 && *d <= w * 11 / 10, "{delays:?}");
    }
    // The step waited them all on the run's clock.
    let waited: u64 = delays.iter().sum();
    assert!(r.duration_ms >= waited, "{} < {waited}", r.duration_ms);
}

#[test]
fn events_carry_the_time_of_the_runs_clock_and_now_reads_it() {
    let (r, events) = run_timed(
        &wf("action: workflow.set_outputs\ninputs: {at: '{{ now() }}', day: \"{{ now() | format_date('YYYY-MM') }}\"}"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.outputs["at"], json!(T0));
    assert_eq!(r.outputs["day"], json!("2024-01"));
    assert!(events.len() >= 4);
    assert!(events.iter().all(|e| e.at_ms == T0), "{events:?}");
    let first = serde_json::to_value(&events[0]).unwrap();
    assert_eq!(first["event"], "run_started");
    assert_eq!(first["at_ms"], json!(T0));
}

#[test]
fn rendered_inputs_are_checked_against_the_catalog() {
    let (r, _) = run(
        &wf("action: core.format\ninputs: {value: 3, type: '{{ \"roman\" }}'}"),
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Failed);
    let e = r.error.unwrap();
    assert!(
        e.message
            .contains("input `type` of `core.format` cannot be `roman`"),
        "{}",
        e.message
    );
    // The error points at the input's line in the file.
    assert_eq!(e.pos.map(|p| p.line), Some(9));
}

#[test]
fn a_template_from_data_never_sees_the_environment() {
    let text = "---\nworkflow: {id: t}\ninputs:\n  t: {type: string}\n---\n\n```yaml\naction: core.template\ninputs: {template: '{{ inputs.t }}'}\noutput_variable: out\n```\n\n```yaml\naction: core.template\ninputs: {template: 'mine: {{ env.HOOK_SECRET | length }}, {{ env.HOOK_SECRET }}'}\noutput_variable: own\n```\n\n```yaml\naction: workflow.set_outputs\ninputs: {data: '{{ out }}', own: '{{ own }}'}\n```\n";
    let env = [("HOOK_SECRET", "s3cret")];
    for attack in [
        "{{ env.HOOK_SECRET }}",
        "{{ env | tojson }}",
        "{% for k, v in env|items %}{{ v }}{% endfor %}",
    ] {
        let (r, _) = run_env(text, json!({"t": attack}), &env);
        assert_eq!(r.status, RunStatus::Completed, "{attack}: {:?}", r.error);
        let data = r.outputs["data"].as_str().unwrap_or_default().to_string();
        assert!(!data.contains("s3cret"), "{attack} leaked: {data}");
        // The workflow's own template still reads it (the author is
        // trusted); what it shows of it is masked (issue 49, item 8).
        assert_eq!(r.outputs["own"], "mine: 6, ***");
    }
}

#[test]
fn merge_compares_keys_by_content_in_any_key_order() {
    // Keys are looked up by a hash of their content (issue 49 item 5: every
    // pair was compared); equal mappings match whatever their key order,
    // and 1.0 is 1, as in the peer's JavaScript.
    let a = json!([
        {"k": {"x": 1, "y": 2}, "from": "a1"},
        {"k": 1, "from": "a2"},
        {"k": "s", "from": "a3"},
        {"from": "a4"}
    ]);
    let b = json!([{"k": {"y": 2, "x": 1}}, {"k": 1.0}, {"k": "s"}, {"other": true}]);
    let step = |mode: &str| {
        format!("- type: merge\n  mode: {mode}\n  sources: ['{{{{ inputs.a }}}}', '{{{{ inputs.b }}}}']\n  match_field: k\n  output_variable: {mode}")
    };
    let (r, _) = run(
        &format!(
            "---\nworkflow: {{id: t}}\ninputs:\n  a: {{type: array}}\n  b: {{type: array}}\n---\n\n```yaml\n{}\n{}\n{}\n- action: workflow.set_outputs\n  inputs: {{match: '{{{{ match }}}}', diff: '{{{{ diff }}}}', combined: '{{{{ combine_by_field | length }}}}'}}\n```\n",
            step("match"),
            step("diff"),
            step("combine_by_field"),
        ),
        json!({"a": a, "b": b}),
    );
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.outputs,
        json!({
            "match": [
                {"k": {"x": 1, "y": 2}, "from": "a1"},
                {"k": 1, "from": "a2"},
                {"k": "s", "from": "a3"},
                {"from": "a4"}
            ],
            "diff": [],
            "combined": 4
        })
    );
}

#[test]
fn a_parallel_map_over_too_many_items_fails_before_any_item_starts() {
    // Each running item held its own copy of the run: 50,000 items at
    // `concurrency: 100000` reached 6.3 GB and aborted `serve` (issue 49,
    // item 6). The copies are shared now, `concurrency` is at most 64 and
    // the items at most 10,000.
    let (r, _) = run(
        "---\nworkflow: {id: t}\ntools:\n  fast: {sdk: openai}\n---\n\n```yaml\naction: parallel.map\ninputs:\n  items: '{{ range(10001) | list }}'\n  agent: {provider: fast, prompt: 'x {{ item }}'}\n```\n",
        json!({}),
    );
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(
        r.error.map(|e| e.message),
        Some("`items` holds 10001 items; a `parallel.map` goes over at most 10000".to_string())
    );
}
