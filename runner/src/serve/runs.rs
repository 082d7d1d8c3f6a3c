//! Starting runs: a place in the queue, the run recorded before any step,
//! executed and published; runs a restarted server resumes; the results
//! of runs that could not start or be recorded.

use super::state::ActiveGuard;
use super::{Refused, RunEntry, ServerState, MAX_RUNS_KEPT};
use crate::engine::{Event, EventSink, RunConfig, RunEvent, RunResult, RunStatus, RunTrigger};
use crate::format::model::Workflow;
use crate::store::{NewRun, RunRecord};
use futures_util::FutureExt;
use marktoflow_steps::core::signals::Cancel;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// What a background run does.
pub enum Job {
    /// A new run, recorded when it starts (`trigger` says by what), with
    /// the key that makes it once across a cluster (a schedule's tick).
    New(Map<String, Value>, RunTrigger, Option<String>),
    /// A new run already committed to the store (started by `trigger`,
    /// which the run sees as `trigger`: a request's method, headers, body).
    Recorded(Map<String, Value>, RunTrigger, Value),
    /// A retry already committed to the store, continuing from a checkpoint
    /// of the run it retries (its id last).
    Retry(Map<String, Value>, Box<crate::engine::Checkpoint>, String),
    /// A stored run that did not finish, continued from its checkpoint.
    Resume(Box<RunRecord>),
}

/// Starts a run in the background; its result arrives on the receiver. The
/// run waits for a slot of its workflow and a global slot (workflow first, so
/// one busy workflow queues behind its own limit without holding global slots).
/// A place in the run queue, held from admission until the run gets its
/// slots; dropped unused, it is given back.
pub(super) struct QueuePlace(pub(super) Arc<ServerState>);

impl Drop for QueuePlace {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Takes a queue place, or says why the server would not take a run now.
/// Taken before anything is recorded: a refused request leaves no trace.
pub(super) fn reserve(s: &Arc<ServerState>) -> Result<QueuePlace, Refused> {
    if s.is_stopping() {
        return Err(Refused::ShuttingDown);
    }
    if s.queued.fetch_add(1, Ordering::SeqCst) >= s.config.max_queue {
        s.queued.fetch_sub(1, Ordering::SeqCst);
        return Err(Refused::QueueFull);
    }
    Ok(QueuePlace(s.clone()))
}

/// A run started for a caller that waits for it (an MCP tool call): its
/// id, its result when it ends, its events so far, and how to cancel it.
pub struct Started {
    pub run_id: String,
    pub result: watch::Receiver<Option<Arc<RunResult>>>,
    pub events: Arc<Mutex<Vec<Event>>>,
    pub cancel: Cancel,
}

/// Starts a new run of `wf` with checked `inputs`, recorded with `trigger`,
/// under the server's limits.
pub fn start_new(
    s: &Arc<ServerState>,
    wf: Arc<Workflow>,
    inputs: Map<String, Value>,
    trigger: RunTrigger,
) -> Result<Started, Refused> {
    let run_id = crate::store::new_run_id();
    let result = start_run(s, wf, Job::New(inputs, trigger, None), run_id.clone())?;
    Ok(s.started(&run_id).unwrap_or(Started {
        run_id,
        result,
        events: Arc::default(),
        cancel: Cancel::default(),
    }))
}

impl ServerState {
    /// A run this process holds, as a caller that waits for it follows it
    /// (a run resumed by an answer is held again).
    pub fn started(&self, run_id: &str) -> Option<Started> {
        let runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let entry = runs.get(run_id)?;
        Some(Started {
            run_id: run_id.to_string(),
            result: entry.result.clone(),
            events: entry.events.clone(),
            cancel: entry.cancel.clone(),
        })
    }
}

pub(super) fn start_run(
    s: &Arc<ServerState>,
    wf: Arc<Workflow>,
    job: Job,
    run_id: String,
) -> Result<watch::Receiver<Option<Arc<RunResult>>>, Refused> {
    let place = reserve(s)?;
    Ok(start_reserved(s, wf, job, run_id, place))
}

/// Starts a run that holds a queue place: it waits for its slots, runs and
/// records itself. A panic inside the run fails it (and its stored row)
/// rather than leaving it running.
pub(super) fn start_reserved(
    s: &Arc<ServerState>,
    wf: Arc<Workflow>,
    job: Job,
    run_id: String,
    place: QueuePlace,
) -> watch::Receiver<Option<Arc<RunResult>>> {
    s.active.count.fetch_add(1, Ordering::SeqCst);
    let (tx, rx) = watch::channel(None);
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let started = Arc::new(AtomicBool::new(false));
    let cancel = Cancel::default();
    let pause = Arc::new(AtomicBool::new(false));
    let (trigger, inputs) = match &job {
        Job::New(i, t, _) | Job::Recorded(i, t, _) => (t.as_str().to_string(), i.clone()),
        Job::Retry(i, ..) => (RunTrigger::Retry.as_str().to_string(), i.clone()),
        Job::Resume(r) => (
            r.trigger.clone(),
            r.inputs.as_object().cloned().unwrap_or_default(),
        ),
    };
    if let (Ok(mut runs), Ok(mut order)) = (s.runs.lock(), s.order.lock()) {
        runs.insert(
            run_id.clone(),
            RunEntry {
                workflow: wf.meta.id.clone(),
                file: std::path::absolute(&wf.source.path).unwrap_or(wf.source.path.clone()),
                trigger,
                inputs: Arc::new(inputs),
                created_at: crate::store::now_ms(),
                result: rx.clone(),
                events: events.clone(),
                started: started.clone(),
                cancel: cancel.clone(),
                pause: pause.clone(),
            },
        );
        order.push_back(run_id.clone());
        // Forget the oldest finished runs; unfinished ones stay until they end.
        let mut scanned = 0;
        while runs.len() > MAX_RUNS_KEPT && scanned < order.len() {
            let Some(old) = order.pop_front() else { break };
            if runs.get(&old).is_some_and(|e| e.result.borrow().is_none()) {
                order.push_back(old);
                scanned += 1;
            } else {
                runs.remove(&old);
            }
        }
    }
    let mut caps = s.caps.clone();
    caps.cancel = cancel.clone();
    // Its workflow's budget, and its model calls counted in `/metrics`.
    caps.usage = Some(Arc::new(super::metrics::ServedUsage {
        run: crate::engine::RunUsage::new(
            wf.budget.clone(),
            s.store.clone().map(|store| {
                Arc::new(crate::store::StoredSpend {
                    store,
                    workflow: wf.meta.id.clone(),
                    run_id: run_id.clone(),
                    clock: s.caps.clock.clone(),
                }) as Arc<dyn crate::engine::DailySpend>
            }),
        ),
        state: s.clone(),
    })
        as Arc<dyn marktoflow_steps::core::action::hosts::Usage>);
    // Agent replies are recorded with the run; a resumed run recalls them.
    caps.replies = s.store.clone().map(|store| {
        Arc::new(crate::store::RecordedReplies {
            store,
            run_id: run_id.clone(),
            recall: matches!(job, Job::Resume(_)),
        }) as Arc<dyn marktoflow_steps::core::action::hosts::Replies>
    });
    let sink_events = events.clone();
    let measured = s.clone();
    let wf_id = wf.meta.id.clone();
    let sink: EventSink = Arc::new(move |e: &Event| {
        // Checkpoints are for the store; streams and memory do without them.
        if matches!(e.kind, RunEvent::Checkpoint(_)) {
            return;
        }
        if let RunEvent::StepFinished { duration_ms, .. } = &e.kind {
            measured
                .metrics
                .step_finished(&wf_id, Duration::from_millis(*duration_ms));
        }
        if let Ok(mut v) = sink_events.lock() {
            v.push(e.clone());
        }
    });
    let trigger_context = match &job {
        Job::New(_, t, _) => serde_json::json!({"type": t.as_str()}),
        Job::Recorded(_, _, context) => context.clone(),
        // A run queued by another process starts with what it was given;
        // a resumed run's checkpoint holds what it had.
        Job::Resume(r) => r.context.clone(),
        // A retry starts from the run it retries.
        Job::Retry(..) => Value::Null,
    };
    let cfg = RunConfig {
        run_id: run_id.clone(),
        caps,
        events: sink,
        loader: Some(s.loader.clone()),
        callers: Vec::new(),
        debugger: None,
        trigger: trigger_context,
        lease: s.store.as_ref().and_then(|st| st.lease(&run_id)),
        recorded: None,
        answers: Default::default(),
        waits: s
            .links
            .clone()
            .map(|l| l as Arc<dyn crate::engine::WaitLinks>),
        pause: Some(pause),
        mocks: None,
    };
    let lease = cfg.lease.clone();
    let state = s.clone();
    let wf_slots = s.slots_for(&wf);
    let bucket_slots = wf
        .concurrency
        .as_ref()
        .and_then(|_| crate::store::concurrency_of(&wf, &inputs_of(&job)))
        .map(|b| s.bucket(b));
    let task = async move {
        let _active = ActiveGuard(state.clone());
        let store = state.store.clone();
        // Scheduled and watched runs are committed here, before they wait.
        if let (Some(store), Job::New(inputs, trigger, key)) = (&store, &job) {
            let mut new = NewRun::new(run_id.clone(), &wf, inputs.clone(), *trigger);
            new.idempotency_key = key.clone();
            match store
                .submit_run(new)
                .await
                .unwrap_or(Err(crate::store::StoreError::Closed))
            {
                Ok(()) => {}
                // Another server of the cluster took this one (a tick).
                Err(crate::store::StoreError::DuplicateKey(other)) => {
                    drop(place);
                    let mut r = not_started(&run_id, &wf, false);
                    if let Some(e) = &mut r.error {
                        e.message =
                            format!("not started: another server started it as run {other}");
                    }
                    let _ = tx.send(Some(Arc::new(r)));
                    return;
                }
                // Nothing runs that the store cannot record (a full disk).
                Err(e) => {
                    eprintln!("marktoflow: run {run_id} not started: the run store could not record it: {e}");
                    drop(place);
                    let mut r = not_started(&run_id, &wf, false);
                    if let Some(f) = &mut r.error {
                        f.message = format!("not started: the run store could not record it ({e})");
                    }
                    let _ = tx.send(Some(Arc::new(r)));
                    return;
                }
            }
        }
        // A server that only enqueues leaves the run to the workers and
        // tells its end when the store has it; so does any server of a
        // shared store for a new run under a `concurrency:` limit, which
        // only the claim (of this process or another) may start.
        let limited = crate::store::cluster_limited(&wf)
            && matches!(job, Job::New(..) | Job::Recorded(..))
            && store.as_ref().is_some_and(|s| s.shared().is_some());
        if let (true, Some(store)) = (state.enqueue_only || limited, &store) {
            drop(place);
            let r = match job {
                Job::Retry(..) | Job::Resume(_) => {
                    let mut r = not_started(&run_id, &wf, false);
                    if let Some(e) = &mut r.error {
                        e.message = "this server only enqueues runs (--no-execute): retry through a server or `marktoflow retry` that executes".into();
                    }
                    store.finish_run(&run_id, crate::store::RunEnd::from(&r));
                    r
                }
                _ => {
                    drop(_active);
                    super::worker::stored_result(store, &run_id, &wf, &state).await
                }
            };
            let _ = tx.send(Some(Arc::new(r)));
            return;
        }
        let bucket = bucket_slots;
        let slots = async {
            // The run's `concurrency:` bucket first: runs waiting for a
            // user's bucket hold no slot of the workflow meanwhile.
            let k = match bucket {
                Some(b) => Some(b.acquire_owned().await.ok()?),
                None => None,
            };
            let a = wf_slots.acquire_owned().await.ok()?;
            let b = state.global_slots.clone().acquire_owned().await.ok()?;
            Some((a, b, k))
        };
        let permits = tokio::select! {
            p = slots => p.ok_or(false),
            _ = state.stopping.cancelled() => Err(false),
            _ = cancel.cancelled() => Err(true),
        };
        drop(place);
        let _permits = match permits {
            Ok(p) => p,
            // Cancelled while queued: it ends here, recorded as cancelled.
            Err(true) => {
                let r = cancelled_queued(&run_id, &wf);
                if let Some(store) = &store {
                    store.finish_run(&run_id, crate::store::RunEnd::from(&r));
                    let _ = store.submit_flush().await;
                }
                let _ = tx.send(Some(Arc::new(r)));
                return;
            }
            // Not started: in the store it stays queued, for the next start.
            Err(false) => {
                let _ = tx.send(Some(Arc::new(not_started(&run_id, &wf, store.is_some()))));
                return;
            }
        };
        started.store(true, Ordering::SeqCst);
        state.running.fetch_add(1, Ordering::SeqCst);
        let go = async {
            match (&store, job) {
                (Some(store), Job::Resume(record)) => {
                    crate::store::resume_run(store, &state.engine, &wf, &record, cfg).await
                }
                (Some(store), Job::New(inputs, ..) | Job::Recorded(inputs, ..)) => {
                    crate::store::run_recorded(store, &state.engine, &wf, inputs, cfg).await
                }
                (Some(store), Job::Retry(inputs, cp, of)) => {
                    let lineage = crate::telemetry::Lineage::RetryOf(of);
                    crate::store::resume_from(store, &state.engine, &wf, inputs, cfg, *cp, lineage)
                        .await
                }
                (None, Job::New(inputs, ..) | Job::Recorded(inputs, ..)) => {
                    state.engine.run(&wf, inputs, cfg).await
                }
                (None, Job::Resume(_) | Job::Retry(..)) => not_started(&run_id, &wf, false),
            }
        };
        // Should the process abort while working for this run, its owner
        // file names it, and the next start blames it alone.
        let go = marktoflow_steps::core::blame::InRun::new(&run_id, go);
        let result = match std::panic::AssertUnwindSafe(go).catch_unwind().await {
            Ok(r) => r,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let r = crashed(&run_id, &wf, &what);
                if let Some(store) = &store {
                    store.finish_run(&run_id, crate::store::RunEnd::from(&r));
                }
                r
            }
        };
        if lease.as_ref().is_some_and(|l| !l.held()) {
            // Its writes are refused; the worker that holds it now ends it.
            eprintln!(
                "marktoflow: run {run_id} abandoned here: its lease passed to another worker, which continues it"
            );
        }
        // Its result is told once its end is committed: by the store's
        // writer, right after the commit that carries the run's writes
        // (no trip back through this task).
        match store {
            Some(store) => {
                let held = (_active, _permits);
                store.after_commit(crate::store::AfterCommit::new(move |committed| {
                    let result = match committed {
                        Ok(()) => result,
                        Err(e) => {
                            // The store may have it after all (a commit
                            // whose answer was lost, a write retried once it
                            // was back): `GET /runs/{id}` asks it again.
                            if let Ok(mut u) = state.unrecorded.lock() {
                                if u.len() >= MAX_RUNS_KEPT {
                                    u.clear();
                                }
                                u.insert(run_id.clone());
                            }
                            not_recorded(result, &wf, &e.to_string())
                        }
                    };
                    publish(&state, &run_id, result, true, &tx);
                    drop(held);
                }));
            }
            None => publish(&state, &run_id, result, false, &tx),
        }
    };
    match &s.runs_rt {
        Some(rt) => drop(rt.spawn(task)),
        None => drop(tokio::spawn(task)),
    }
    rx
}

/// Tells a run's end: counted out, its slots' waiters woken, its result
/// sent to whoever waits (the slots themselves are released after).
pub(super) fn publish(
    state: &ServerState,
    run_id: &str,
    result: RunResult,
    recorded: bool,
    tx: &watch::Sender<Option<Arc<RunResult>>>,
) {
    state.running.fetch_sub(1, Ordering::SeqCst);
    state.metrics.run_finished(result.status.as_str());
    state.slot_freed.notify_one();
    // Its inputs are in the store from now on: memory keeps only what the
    // store does not have (a request's body can be large).
    if recorded {
        if let Ok(mut runs) = state.runs.lock() {
            if result.status == RunStatus::Waiting {
                // A waiting run is its row: nothing of it stays in memory
                // (the API reads it from the store, where an answer changes it).
                runs.remove(run_id);
            } else if let Some(e) = runs.get_mut(run_id) {
                e.inputs = Arc::default();
            }
        }
    }
    let _ = tx.send(Some(Arc::new(result)));
}

/// The inputs a job runs with.
pub(super) fn inputs_of(job: &Job) -> Map<String, Value> {
    match job {
        Job::New(i, ..) | Job::Recorded(i, ..) | Job::Retry(i, ..) => i.clone(),
        Job::Resume(r) => r.inputs.as_object().cloned().unwrap_or_default(),
    }
}

/// A run that ended but whose end could not be committed: failed, saying so.
pub(super) fn not_recorded(mut r: RunResult, wf: &Workflow, why: &str) -> RunResult {
    r.status = RunStatus::Failed;
    r.error = Some(crate::engine::RunFailure {
        authored: None,
        code: None,
        message: format!("the run ended but could not be recorded: {why}"),
        step_id: None,
        step_name: None,
        file: wf.source.path.display().to_string(),
        pos: None,
    });
    r
}

/// The result of a run whose task panicked (a bug of ours, never of input).
pub(super) fn crashed(run_id: &str, wf: &Workflow, what: &str) -> RunResult {
    RunResult {
        run_id: run_id.to_string(),
        workflow: wf.meta.id.clone(),
        status: RunStatus::Failed,
        outputs: Value::Null,
        steps: Vec::new(),
        error: Some(crate::engine::RunFailure {
            authored: None,
            code: None,
            message: format!(
                "internal error: the run stopped unexpectedly ({what}); please report it"
            ),
            step_id: None,
            step_name: None,
            file: wf.source.path.display().to_string(),
            pos: None,
        }),
        duration_ms: 0,
        response: None,
        waiting: None,
    }
}

/// Continues the runs a killed server left unfinished (queued or running in
/// the store, their process gone) whose workflow this server serves, each
/// from its last checkpoint.
pub fn resume_stored_runs(state: &Arc<ServerState>, workflows: &[Arc<Workflow>]) -> usize {
    let Some(store) = &state.store else { return 0 };
    let runs = match store.incomplete_runs() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("marktoflow: cannot look for unfinished runs: {e}");
            return 0;
        }
    };
    let mut n = 0;
    for run in runs {
        let path = std::path::PathBuf::from(&run.file);
        let same = |w: &&Arc<Workflow>| {
            std::path::absolute(&w.source.path).ok().as_deref() == Some(path.as_path())
        };
        // Only runs of workflows this server serves: another server (or a
        // later start with other paths) may own the rest.
        let Some(wf) = workflows.iter().find(same).cloned() else {
            eprintln!(
                "marktoflow: run {} of `{}` is left as it is: this server does not serve that file",
                run.id, run.file
            );
            continue;
        };
        let id = run.id.clone();
        let deaths = run.deaths;
        match start_run(state, wf, Job::Resume(Box::new(run)), id.clone()) {
            Ok(_) if deaths >= crate::store::MAX_DEATHS => eprintln!(
                "marktoflow: run {id} is marked failed, {}",
                crate::store::not_resumed_for_deaths()
            ),
            Ok(_) => {
                n += 1;
                eprintln!("marktoflow: resuming run {id}");
            }
            Err(why) => eprintln!("marktoflow: run {id} not resumed now: {why}"),
        }
    }
    n
}

/// The result of a run cancelled while it waited for a slot.
pub(super) fn cancelled_queued(run_id: &str, wf: &Workflow) -> RunResult {
    let mut r = not_started(run_id, wf, false);
    if let Some(e) = &mut r.error {
        e.message = "cancelled before it started".into();
    }
    r
}

/// The result of a queued run that shutdown kept from starting.
pub(super) fn not_started(run_id: &str, wf: &Workflow, kept: bool) -> RunResult {
    RunResult {
        run_id: run_id.to_string(),
        workflow: wf.meta.id.clone(),
        status: RunStatus::Cancelled,
        outputs: Value::Null,
        steps: Vec::new(),
        error: Some(crate::engine::RunFailure {
            authored: None,
            code: None,
            message: if kept {
                "the server shut down before the run started; it stays queued and runs when the server starts again".into()
            } else {
                "the server shut down before the run started".into()
            },
            step_id: None,
            step_name: None,
            file: wf.source.name.clone(),
            pos: None,
        }),
        duration_ms: 0,
        response: None,
        waiting: None,
    }
}
