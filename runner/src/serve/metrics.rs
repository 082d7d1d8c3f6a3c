//! `GET /metrics`: what a server or worker is doing, in Prometheus' text
//! format: runs executing and waiting here, runs finished by status, step
//! durations by workflow, and on a shared store the queue's depth, the
//! stored runs by status, the live processes and how long claims take.

use crate::store::RunStore;
use marktoflow_steps::core::background::TaskStatus;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the duration histograms, in seconds.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0,
];

#[derive(Default, Clone)]
struct Histogram {
    /// Count per bucket of `BUCKETS` (not cumulative), then above the last.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len() + 1];
        }
        let i = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += seconds;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// The figures one process keeps.
#[derive(Default)]
pub struct Metrics {
    finished: Mutex<BTreeMap<&'static str, u64>>,
    steps: Mutex<BTreeMap<String, Histogram>>,
    claims: Mutex<Histogram>,
    claimed: AtomicU64,
    /// Model calls of this process's runs, and their tokens in and out.
    model_calls: AtomicU64,
    tokens_in: AtomicU64,
    tokens_out: AtomicU64,
    /// Their estimated cost, in millionths of a US dollar.
    cost_micro_usd: AtomicU64,
}

/// A served run's usage: its budget (see [`RunUsage`]), and each model
/// call counted in `/metrics` as it is made.
///
/// [`RunUsage`]: crate::engine::RunUsage
pub struct ServedUsage {
    pub run: crate::engine::RunUsage,
    pub state: std::sync::Arc<super::ServerState>,
}

#[async_trait::async_trait]
impl marktoflow_steps::core::action::hosts::Usage for ServedUsage {
    async fn before(&self, provider: &str, model: &str, input_tokens: u64) -> Result<(), String> {
        self.run.before(provider, model, input_tokens).await
    }

    fn after(&self, call: &marktoflow_steps::core::action::hosts::ModelCall) -> Option<f64> {
        let cost = self.run.after(call);
        let m = &self.state.metrics;
        m.model_calls.fetch_add(1, Ordering::Relaxed);
        m.tokens_in.fetch_add(call.input_tokens, Ordering::Relaxed);
        m.tokens_out
            .fetch_add(call.output_tokens, Ordering::Relaxed);
        if let Some(c) = cost {
            m.cost_micro_usd
                .fetch_add((c * 1e6).round() as u64, Ordering::Relaxed);
        }
        cost
    }
}

/// Workflows whose step durations are kept apart; the rest are summed
/// under `other` (labels must stay few).
const MAX_WORKFLOWS: usize = 200;

impl Metrics {
    pub fn run_finished(&self, status: &'static str) {
        if let Ok(mut m) = self.finished.lock() {
            *m.entry(status).or_default() += 1;
        }
    }

    pub fn step_finished(&self, workflow: &str, took: Duration) {
        if let Ok(mut m) = self.steps.lock() {
            let key = if m.contains_key(workflow) || m.len() < MAX_WORKFLOWS {
                workflow.to_string()
            } else {
                "other".to_string()
            };
            m.entry(key).or_default().observe(took.as_secs_f64());
        }
    }

    pub fn claim(&self, took: Duration, runs: usize) {
        if let Ok(mut h) = self.claims.lock() {
            h.observe(took.as_secs_f64());
        }
        self.claimed.fetch_add(runs as u64, Ordering::Relaxed);
    }

    /// The text of `/metrics`: this process's figures with `load` (runs
    /// waiting, executing), and the shared store's when there is one.
    pub fn render(
        &self,
        load: (usize, usize),
        store: Option<&dyn RunStore>,
        background: Option<&marktoflow_steps::core::background::Background>,
    ) -> String {
        let mut out = String::new();
        if let Some(bg) = background {
            background_tasks(&mut out, &bg.status());
        }
        let (queued, running) = load;
        gauge(
            &mut out,
            "marktoflow_runs_executing",
            "Runs executing in this process.",
            running as f64,
        );
        gauge(
            &mut out,
            "marktoflow_runs_waiting",
            "Runs accepted by this process waiting for a slot.",
            queued as f64,
        );
        // Stopped at a `wait` for a person: rows of the store, not of this
        // process (a store that cannot be read now leaves the gauge out).
        let answer = store.and_then(|st| {
            st.count_runs(&crate::store::RunFilter {
                status: Some(crate::store::RunStatus::Waiting),
                ..Default::default()
            })
            .ok()
        });
        if let Some(n) = answer {
            gauge(
                &mut out,
                "marktoflow_runs_waiting_for_answer",
                "Runs in the store stopped at a wait for a person or an event.",
                n as f64,
            );
        }
        out.push_str("# HELP marktoflow_runs_finished_total Runs this process finished, by status.\n# TYPE marktoflow_runs_finished_total counter\n");
        if let Ok(m) = self.finished.lock() {
            for (status, n) in m.iter() {
                let _ = writeln!(
                    out,
                    "marktoflow_runs_finished_total{{status=\"{status}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP marktoflow_step_duration_seconds Steps this process finished, by workflow.\n# TYPE marktoflow_step_duration_seconds histogram\n");
        if let Ok(m) = self.steps.lock() {
            for (wf, h) in m.iter() {
                h.write(
                    &mut out,
                    "marktoflow_step_duration_seconds",
                    &format!("workflow=\"{}\"", escape(wf)),
                );
            }
        }
        out.push_str("# HELP marktoflow_model_calls_total Requests this process's runs made to model providers.\n# TYPE marktoflow_model_calls_total counter\n");
        let _ = writeln!(
            out,
            "marktoflow_model_calls_total {}",
            self.model_calls.load(Ordering::Relaxed)
        );
        out.push_str("# HELP marktoflow_model_tokens_total Tokens those requests took, as the providers' replies say.\n# TYPE marktoflow_model_tokens_total counter\n");
        for (direction, n) in [("input", &self.tokens_in), ("output", &self.tokens_out)] {
            let _ = writeln!(
                out,
                "marktoflow_model_tokens_total{{direction=\"{direction}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP marktoflow_model_cost_usd_total Their estimated cost in US dollars (list prices, or the workflows' `budget.prices`).\n# TYPE marktoflow_model_cost_usd_total counter\n");
        let _ = writeln!(
            out,
            "marktoflow_model_cost_usd_total {}",
            self.cost_micro_usd.load(Ordering::Relaxed) as f64 / 1e6
        );
        out.push_str("# HELP marktoflow_mapped_file_faults_total Pages of mapped files (indexes, vectors, models) read after another program cut the file short; read as zeros instead of killing the process.\n# TYPE marktoflow_mapped_file_faults_total counter\n");
        let _ = writeln!(
            out,
            "marktoflow_mapped_file_faults_total {}",
            marktoflow_steps::core::mapped::faults()
        );
        let Some(pg) = store.and_then(|s| s.shared()) else {
            return out;
        };
        out.push_str("# HELP marktoflow_claim_duration_seconds How long this process's claims on the queue took.\n# TYPE marktoflow_claim_duration_seconds histogram\n");
        if let Ok(h) = self.claims.lock() {
            h.write(&mut out, "marktoflow_claim_duration_seconds", "");
        }
        out.push_str("# HELP marktoflow_runs_claimed_total Runs this process took from the queue.\n# TYPE marktoflow_runs_claimed_total counter\n");
        let _ = writeln!(
            out,
            "marktoflow_runs_claimed_total {}",
            self.claimed.load(Ordering::Relaxed)
        );
        match pg.queue_stats() {
            Ok(q) => {
                gauge(
                    &mut out,
                    "marktoflow_queue_depth",
                    "Runs in the shared queue waiting for a worker.",
                    q.waiting as f64,
                );
                gauge(
                    &mut out,
                    "marktoflow_cluster_processes",
                    "Live servers and workers of the shared store.",
                    q.workers as f64,
                );
                out.push_str("# HELP marktoflow_stored_runs Runs in the shared store, by status.\n# TYPE marktoflow_stored_runs gauge\n");
                for (status, n) in &q.by_status {
                    let _ = writeln!(
                        out,
                        "marktoflow_stored_runs{{status=\"{}\"}} {n}",
                        escape(status)
                    );
                }
                gauge(
                    &mut out,
                    "marktoflow_store_up",
                    "Whether the shared store answered.",
                    1.0,
                );
            }
            Err(_) => gauge(
                &mut out,
                "marktoflow_store_up",
                "Whether the shared store answered.",
                0.0,
            ),
        }
        out
    }
}

/// Background tasks (a knowledge base embedded while the server answers):
/// how far each has got, and an estimate of the time left.
fn background_tasks(out: &mut String, tasks: &[(String, TaskStatus)]) {
    if tasks.is_empty() {
        return;
    }
    type Family = (&'static str, &'static str, fn(&TaskStatus) -> f64);
    let families: [Family; 4] = [
        ("marktoflow_background_done", "Units of work a background task has done (chunks embedded).", |s| s.done as f64),
        ("marktoflow_background_total", "Units of work a background task has to do.", |s| s.total as f64),
        ("marktoflow_background_running", "Whether a background task is running (1) or ended (0).", |s| f64::from(u8::from(s.running))),
        ("marktoflow_background_eta_seconds", "Estimated seconds a background task has left at its pace so far (0 when ended or not yet known).", eta),
    ];
    for (name, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (_, s) in tasks {
            let _ = writeln!(out, "{name}{{task=\"{}\"}} {}", escape(&s.what), value(s));
        }
    }
}

fn eta(s: &TaskStatus) -> f64 {
    if !s.running || s.done == 0 || s.done >= s.total {
        return 0.0;
    }
    (s.seconds as f64 / s.done as f64 * (s.total - s.done) as f64).round()
}

fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
}

/// A label value as the text format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let m = Metrics::default();
        m.step_finished("a\"b", Duration::from_millis(3));
        m.step_finished("a\"b", Duration::from_secs(2));
        m.run_finished("completed");
        let text = m.render((1, 2), None, None);
        assert!(text.contains("marktoflow_runs_executing 2\n"), "{text}");
        assert!(text.contains("marktoflow_runs_waiting 1\n"), "{text}");
        assert!(
            text.contains("marktoflow_runs_finished_total{status=\"completed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "marktoflow_step_duration_seconds_bucket{workflow=\"a\\\"b\",le=\"0.001\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "marktoflow_step_duration_seconds_bucket{workflow=\"a\\\"b\",le=\"0.005\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "marktoflow_step_duration_seconds_bucket{workflow=\"a\\\"b\",le=\"+Inf\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("marktoflow_step_duration_seconds_count{workflow=\"a\\\"b\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn background_tasks_show_progress_and_time_left() {
        let task = |done, total, running| TaskStatus {
            what: "embedding /kb".into(),
            done,
            total,
            running,
            error: None,
            seconds: 100,
        };
        let mut out = String::new();
        background_tasks(&mut out, &[("k".into(), task(1000, 5000, true))]);
        assert!(
            out.contains("marktoflow_background_done{task=\"embedding /kb\"} 1000\n"),
            "{out}"
        );
        assert!(
            out.contains("marktoflow_background_total{task=\"embedding /kb\"} 5000\n"),
            "{out}"
        );
        assert!(
            out.contains("marktoflow_background_running{task=\"embedding /kb\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("marktoflow_background_eta_seconds{task=\"embedding /kb\"} 400\n"),
            "{out}"
        );
        assert_eq!(eta(&task(5000, 5000, false)), 0.0);
    }
}
