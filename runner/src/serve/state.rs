//! What a server holds while it runs: its configuration, the workflows it
//! serves, the runs in memory, the queue's places, the turns taken by
//! requests with one `Idempotency-Key`.

use super::{ApiAccess, Route};
use crate::engine::{Engine, Event, RunResult, WorkflowLoader};
use crate::format::model::Workflow;
use crate::store::RunStore;
use axum::http::{header, StatusCode};
use axum::response::Response;
use marktoflow_steps::core::{action::Capabilities, signals::Cancel};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// Server settings fixed at start.
pub struct ServeConfig {
    pub max_body: usize,
    pub request_timeout: Duration,
    /// Runs executing at once, over all workflows.
    pub max_concurrent: usize,
    /// Runs of one workflow executing at once (a trigger's `max_concurrent:` may lower it).
    pub max_concurrent_per_workflow: usize,
    /// Runs waiting for a slot; beyond it requests get 503.
    pub max_queue: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_body: 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            max_concurrent: 64,
            max_concurrent_per_workflow: 16,
            max_queue: 1000,
        }
    }
}

/// A run the server knows about.
pub(super) struct RunEntry {
    pub(super) workflow: String,
    /// The workflow's file, absolute (finds the served workflow again).
    pub(super) file: PathBuf,
    pub(super) trigger: String,
    pub(super) inputs: Arc<Map<String, Value>>,
    /// Milliseconds since the Unix epoch.
    pub(super) created_at: i64,
    pub(super) result: watch::Receiver<Option<Arc<RunResult>>>,
    pub(super) events: Arc<Mutex<Vec<Event>>>,
    /// False while the run waits for a concurrency slot.
    pub(super) started: Arc<AtomicBool>,
    pub(super) cancel: Cancel,
    /// Set by `POST /runs/{id}/pause`: the run stops before its next
    /// top-level step and waits to be resumed.
    pub(super) pause: Arc<AtomicBool>,
}

/// Counts run tasks so shutdown can wait for them.
#[derive(Default)]
pub(super) struct Active {
    pub(super) count: AtomicUsize,
    pub(super) idle: tokio::sync::Notify,
}

pub(super) struct ActiveGuard(pub(super) Arc<ServerState>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        if self.0.active.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.active.idle.notify_waiters();
        }
    }
}

/// What the server serves now; `serve --watch` replaces it as a whole
/// when the files change (requests under way keep the one they started with).
#[derive(Default)]
pub struct Served {
    pub routes: Vec<Route>,
    /// Every workflow served (by any trigger): the console and the run API
    /// start, show and retry runs of these only.
    pub workflows: Vec<Arc<Workflow>>,
    /// Files that did not load at the last reload, and why: skipped.
    pub broken: Vec<crate::diag::Diagnostic>,
}

pub struct ServerState {
    pub engine: Engine,
    pub(super) served: std::sync::RwLock<Arc<Served>>,
    /// Who may use the run API and the console.
    pub api: ApiAccess,
    pub caps: Capabilities,
    pub loader: Arc<dyn WorkflowLoader>,
    pub config: ServeConfig,
    pub(super) runs: Mutex<HashMap<String, RunEntry>>,
    /// Run ids oldest first, to forget finished runs past `MAX_RUNS_KEPT`.
    pub(super) order: Mutex<std::collections::VecDeque<String>>,
    /// `Idempotency-Key` (with the route) → the run it started.
    pub(super) idempotency: Mutex<HashMap<String, String>>,
    /// Runs whose end this process could not record: what the store says
    /// of them is the truth once it can be read again.
    pub(super) unrecorded: Mutex<std::collections::HashSet<String>>,
    /// `Idempotency-Key`s being decided: requests with one key take turns,
    /// so the second finds the run the first started (see [`KeyTurn`]).
    pub(super) key_turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) global_slots: Arc<Semaphore>,
    /// Per workflow file: its slots.
    pub(super) workflow_slots: Mutex<HashMap<PathBuf, Arc<Semaphore>>>,
    /// Per `concurrency:` bucket: its slots and limit.
    pub(super) bucket_slots: Mutex<HashMap<String, (Arc<Semaphore>, u32)>>,
    pub(super) queued: AtomicUsize,
    /// Runs holding their slots.
    pub(super) running: AtomicUsize,
    pub(super) active: Active,
    /// Set when shutdown begins: no new runs, queued runs stay unstarted.
    pub(super) stopping: Cancel,
    /// Where runs are recorded (None: `--no-store`).
    pub store: Option<Arc<dyn RunStore>>,
    /// Where runs execute: not the threads that accept connections, so a
    /// run busy rendering a template never stops `/health` or other routes.
    /// None: the current runtime.
    pub(super) runs_rt: Option<tokio::runtime::Handle>,
    /// With a shared store: runs are queued for the workers, not executed
    /// here (`serve --no-execute`).
    pub enqueue_only: bool,
    /// Told when a run gives its slots back (a worker claims more).
    pub(super) slot_freed: tokio::sync::Notify,
    /// What `/metrics` shows.
    pub metrics: super::metrics::Metrics,
    /// Signs and checks the links to answer waits (None: no links).
    pub links: Option<Arc<super::links::Links>>,
    /// The tokens that grant tenants (`--tenant-token`).
    pub tenants: super::tenants::Tenants,
}

/// Finished runs kept in memory for `GET /runs/{id}`.
pub(super) const MAX_RUNS_KEPT: usize = 10_000;

/// A request's turn to decide what its `Idempotency-Key` starts: held from
/// the lookup until the run it starts is known to the next request.
pub(super) struct KeyTurn {
    pub(super) state: Arc<ServerState>,
    pub(super) key: String,
    pub(super) held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for KeyTurn {
    fn drop(&mut self) {
        drop(self.held.take());
        if let Ok(mut turns) = self.state.key_turns.lock() {
            // Nobody else holds or waits for it: forget it.
            if turns
                .get(&self.key)
                .is_some_and(|m| Arc::strong_count(m) == 1)
            {
                turns.remove(&self.key);
            }
        }
    }
}

impl ServerState {
    pub fn new(
        routes: Vec<Route>,
        caps: Capabilities,
        loader: Arc<dyn WorkflowLoader>,
        config: ServeConfig,
    ) -> Self {
        ServerState {
            engine: Engine::new(),
            global_slots: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            served: std::sync::RwLock::new(Arc::new(Served {
                workflows: routes.iter().map(|r| r.workflow.clone()).collect(),
                routes,
                broken: Vec::new(),
            })),
            api: ApiAccess::default(),
            caps,
            loader,
            config,
            runs: Mutex::new(HashMap::new()),
            order: Mutex::new(std::collections::VecDeque::new()),
            idempotency: Mutex::new(HashMap::new()),
            key_turns: Mutex::new(HashMap::new()),
            unrecorded: Mutex::new(std::collections::HashSet::new()),
            workflow_slots: Mutex::new(HashMap::new()),
            bucket_slots: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            active: Active::default(),
            stopping: Cancel::default(),
            store: None,
            runs_rt: None,
            enqueue_only: false,
            slot_freed: tokio::sync::Notify::new(),
            metrics: super::metrics::Metrics::default(),
            links: None,
            tenants: super::tenants::Tenants::default(),
        }
    }

    /// Requests are granted tenants by `tenants`' tokens.
    pub fn with_tenants(mut self, tenants: super::tenants::Tenants) -> Self {
        self.tenants = tenants;
        self
    }

    /// Waits get links made and checked by `links`.
    pub fn with_links(mut self, links: Arc<super::links::Links>) -> Self {
        self.links = Some(links);
        self
    }

    /// [`ServerState::with_links`] when there are links.
    pub fn with_links_if(mut self, links: Option<Arc<super::links::Links>>) -> Self {
        self.links = links;
        self
    }

    /// Waits for the turn of requests with `key` (see [`KeyTurn`]).
    pub(super) async fn key_turn(self: &Arc<Self>, key: &str) -> KeyTurn {
        let lock = self
            .key_turns
            .lock()
            .map(|mut turns| turns.entry(key.to_string()).or_default().clone())
            .unwrap_or_default();
        KeyTurn {
            state: self.clone(),
            key: key.to_string(),
            held: Some(lock.lock_owned().await),
        }
    }

    /// Queues runs for the workers of a shared store instead of executing
    /// them (see [`ServerState::enqueue_only`]).
    pub fn enqueuing_only(mut self) -> Self {
        self.enqueue_only = true;
        self
    }

    /// Runs execute on `rt` (see [`ServerState::runs_rt`]).
    pub fn with_run_runtime(mut self, rt: tokio::runtime::Handle) -> Self {
        self.runs_rt = Some(rt);
        self
    }

    /// Serves `workflows` (every workflow loaded, with triggers or without)
    /// to the console and the run API.
    pub fn with_workflows(self, workflows: Vec<Arc<Workflow>>) -> Self {
        let routes = self.served().routes.clone();
        self.replace_served(Served {
            routes,
            workflows,
            broken: Vec::new(),
        });
        self
    }

    /// Serves `routes` from now on (the workflows and problems stay).
    pub fn serve_routes(&self, routes: Vec<Route>) {
        let now = self.served();
        self.replace_served(Served {
            routes,
            workflows: now.workflows.clone(),
            broken: now.broken.clone(),
        });
    }

    /// What is served now.
    pub fn served(&self) -> Arc<Served> {
        self.served
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Serves `served` from now on.
    pub fn replace_served(&self, served: Served) {
        let mut slot = self.served.write().unwrap_or_else(|e| e.into_inner());
        *slot = Arc::new(served);
    }

    /// Guards the run API and the console with `api`.
    pub fn with_api(mut self, api: ApiAccess) -> Self {
        self.api = api;
        self
    }

    /// The served workflow whose file is `file` (absolute or as loaded).
    pub(super) fn workflow_at(&self, file: &std::path::Path) -> Option<Arc<Workflow>> {
        self.served()
            .workflows
            .iter()
            .find(|w| {
                w.source.path == file
                    || std::path::absolute(&w.source.path).ok().as_deref() == Some(file)
            })
            .cloned()
    }

    /// Records runs in `store`.
    pub fn with_store(mut self, store: Option<Arc<dyn RunStore>>) -> Self {
        self.store = store;
        self
    }

    /// The slots of one workflow: the smallest `max_concurrent:` of its
    /// triggers, else the server's per-workflow limit.
    pub(super) fn slots_for(&self, wf: &Workflow) -> Arc<Semaphore> {
        let mut map = self
            .workflow_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(wf.source.path.clone())
            .or_insert_with(|| {
                let limit = wf
                    .triggers
                    .iter()
                    .filter_map(|t| t.fields.get("max_concurrent").and_then(Value::as_u64))
                    .min()
                    .map(|n| n as usize)
                    .unwrap_or(self.config.max_concurrent_per_workflow);
                Arc::new(Semaphore::new(limit.max(1)))
            })
            .clone()
    }

    /// The slots of a `concurrency:` bucket in this process; a bucket
    /// nobody holds or waits for is forgotten.
    pub(super) fn bucket(&self, (key, limit): (String, u32)) -> Arc<Semaphore> {
        let mut map = self.bucket_slots.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (sem, n)| {
            Arc::strong_count(sem) > 1 || sem.available_permits() < *n as usize
        });
        map.entry(key)
            .or_insert_with(|| {
                (
                    Arc::new(Semaphore::new(limit.max(1) as usize)),
                    limit.max(1),
                )
            })
            .0
            .clone()
    }

    /// Runs waiting for a slot, and runs executing.
    pub fn load(&self) -> (usize, usize) {
        (
            self.queued.load(Ordering::SeqCst),
            self.running.load(Ordering::SeqCst),
        )
    }

    /// Begins shutdown: no new runs start, queued runs are left unstarted.
    /// Waits up to `grace` for executing runs, then cancels the rest and
    /// waits for them to record their end; then stops the MCP servers.
    pub async fn drain(&self, grace: Duration) {
        self.stopping.cancel();
        // Background work keeps what it did and ends with the process.
        if let Some(bg) = &self.caps.background {
            bg.stop();
        }
        if !self.wait_idle(grace).await {
            if let Ok(runs) = self.runs.lock() {
                for e in runs.values() {
                    e.cancel.cancel();
                }
            }
            // Cancelled runs stop at their next step or await; a template
            // being rendered ends within its fuel (about a second).
            self.wait_idle(Duration::from_secs(3)).await;
        }
        // The MCP servers the runs started are stopped with the server.
        self.caps.mcp.shutdown().await;
    }

    /// Stops taking runs and waits up to `grace` for those executing; true
    /// when they all ended. (A worker then hands the rest back to the
    /// queue before [`ServerState::drain`] cancels them here.)
    pub async fn stop_and_wait(&self, grace: Duration) -> bool {
        self.stopping.cancel();
        self.wait_idle(grace).await
    }

    /// True when every run task ended within `limit`.
    pub(super) async fn wait_idle(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let idle = self.active.idle.notified();
                if self.active.count.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }
}

/// Why the server would not take a run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the run queue is full")]
    QueueFull,
}

impl Refused {
    pub(super) fn response(self, max_queue: usize) -> Response {
        let msg = match self {
            Refused::ShuttingDown => self.to_string(),
            Refused::QueueFull => {
                format!("{max_queue} runs are already waiting; try again shortly")
            }
        };
        let mut resp = super::request::error(StatusCode::SERVICE_UNAVAILABLE, msg);
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        resp
    }
}
