//! Trigger sources as a server serves them: one type per kind behind
//! [`TriggerSource`] — webhooks ([`Webhooks`]), schedules ([`Schedules`]),
//! file watches ([`FileWatches`]) here, MCP tools in `mcp`. [`Triggers`]
//! builds them from the loaded workflows, lists them, starts them, and on a
//! reload stops them and starts what replaced them, in one place: a new
//! kind is a new type and one line in [`Triggers::of`].

use super::file_watch::{file_watches_of, run_file_watches, FileWatch};
use super::{routes_of, run_schedules, schedules_of, Route, Schedule, ServerState};
use crate::diag::Diagnostic;
use crate::format::model::{TriggerKind, Workflow};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// One kind of trigger as a server serves it.
pub trait TriggerSource: Send + Sync {
    fn kind(&self) -> TriggerKind;
    /// How many things it serves (routes, schedules, tools…).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// One line per thing served, as `serve` lists them when it starts.
    fn listing(&self) -> Vec<String>;
    /// Keeps what belongs to the workflows `keep` accepts.
    fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool);
    /// Starts serving on `state`: the task that serves until the server
    /// stops (aborted to stop it sooner), or None when serving is what
    /// `state` holds (routes, tools).
    fn start(self: Box<Self>, state: &Arc<ServerState>) -> Option<JoinHandle<()>>;
}

/// Every trigger source of the workflows a server serves.
#[derive(Default)]
pub struct Triggers(Vec<Box<dyn TriggerSource>>);

/// Trigger sources started: stopped on a reload or at exit.
#[derive(Default)]
pub struct Serving(Vec<JoinHandle<()>>);

impl Serving {
    pub fn stop(&mut self) {
        for t in self.0.drain(..) {
            t.abort();
        }
    }
}

impl Triggers {
    /// The webhooks, schedules and file watches `workflows` declare
    /// (`env` for their secrets, `cwd` anchors relative paths); every
    /// problem of every kind, positioned at its trigger.
    pub fn of(
        workflows: &[Arc<Workflow>],
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> Result<Triggers, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        let mut take = |r: Result<Box<dyn TriggerSource>, Vec<Diagnostic>>| match r {
            Ok(s) => Some(s),
            Err(d) => {
                errors.extend(d);
                None
            }
        };
        let sources = [
            take(routes_of(workflows, env).map(|r| Box::new(Webhooks(r)) as _)),
            take(schedules_of(workflows).map(|s| Box::new(Schedules(s)) as _)),
            take(file_watches_of(workflows, cwd).map(|w| Box::new(FileWatches(w)) as _)),
        ];
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Triggers(sources.into_iter().flatten().collect()))
    }

    /// With a source built elsewhere (MCP tools).
    pub fn with(mut self, source: Box<dyn TriggerSource>) -> Self {
        self.0.push(source);
        self
    }

    /// How many things of `kind` are served.
    pub fn count(&self, kind: TriggerKind) -> usize {
        self.0
            .iter()
            .filter(|s| s.kind() == kind)
            .map(|s| s.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|s| s.is_empty())
    }

    /// What is served, a line each, kind after kind.
    pub fn listing(&self) -> Vec<String> {
        self.0.iter().flat_map(|s| s.listing()).collect()
    }

    /// Keeps what belongs to the workflows `keep` accepts.
    pub fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool) {
        for s in &mut self.0 {
            s.retain(keep);
        }
    }

    /// Serves them all on `state` from now on.
    pub fn start(self, state: &Arc<ServerState>) -> Serving {
        Serving(self.0.into_iter().filter_map(|s| s.start(state)).collect())
    }
}

/// `webhook` triggers: routes the server's router looks requests up in.
pub struct Webhooks(pub Vec<Route>);

impl TriggerSource for Webhooks {
    fn kind(&self) -> TriggerKind {
        TriggerKind::Webhook
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn listing(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|r| format!("  {} {} → {}", r.method, r.path, r.workflow.source.name))
            .collect()
    }
    fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool) {
        self.0.retain(|r| keep(&r.workflow));
    }
    fn start(self: Box<Self>, state: &Arc<ServerState>) -> Option<JoinHandle<()>> {
        state.serve_routes(self.0);
        None
    }
}

/// `schedule` triggers: one task fires them all.
pub struct Schedules(pub Vec<Schedule>);

impl TriggerSource for Schedules {
    fn kind(&self) -> TriggerKind {
        TriggerKind::Schedule
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn listing(&self) -> Vec<String> {
        let now = chrono::Utc::now();
        self.0
            .iter()
            .map(|s| {
                format!(
                    "  schedule `{}` ({}) → {}",
                    s.expr,
                    s.cron.when(now),
                    s.workflow.source.name
                )
            })
            .collect()
    }
    fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool) {
        self.0.retain(|s| keep(&s.workflow));
    }
    fn start(self: Box<Self>, state: &Arc<ServerState>) -> Option<JoinHandle<()>> {
        Some(tokio::spawn(run_schedules(state.clone(), self.0)))
    }
}

/// `file_watch` triggers: one task watches every folder.
pub struct FileWatches(pub Vec<FileWatch>);

impl TriggerSource for FileWatches {
    fn kind(&self) -> TriggerKind {
        TriggerKind::FileWatch
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn listing(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|w| {
                format!(
                    "  file_watch `{}` → {}",
                    w.patterns.join("`, `"),
                    w.workflow.source.name
                )
            })
            .collect()
    }
    fn retain(&mut self, keep: &dyn Fn(&Workflow) -> bool) {
        self.0.retain(|w| keep(&w.workflow));
    }
    fn start(self: Box<Self>, state: &Arc<ServerState>) -> Option<JoinHandle<()>> {
        Some(tokio::spawn(run_file_watches(state.clone(), self.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workflow `NAME.md` (relative: the tests' `cwd` anchors it).
    fn workflow(name: &str, triggers: &str) -> Arc<Workflow> {
        let text = format!(
            "---\nworkflow: {{id: {name}}}\ninputs: {{changed_paths: {{type: array}}}}\ntriggers:\n{triggers}---\n\n```yaml\naction: core.set\ninputs: {{a: 1}}\n```\n"
        );
        let path = std::path::PathBuf::from(format!("{name}.md"));
        let loaded =
            crate::format::model::load_str(&path, &text, &marktoflow_steps::Registry::standard())
                .unwrap_or_else(|d| panic!("{d:?}"));
        Arc::new(loaded.workflow)
    }

    #[test]
    fn every_kind_is_built_listed_counted_and_kept_in_one_place() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("notes")).unwrap();
        let hook = workflow("hook", "  - {type: webhook, path: /in}\n");
        let both = workflow(
            "both",
            "  - {type: schedule, cron: '0 9 * * *'}\n  - {type: file_watch, path: 'notes/*.md'}\n",
        );
        let env = BTreeMap::new();
        let mut t = Triggers::of(&[hook, both], &env, d.path()).unwrap();
        assert_eq!(
            [
                TriggerKind::Webhook,
                TriggerKind::Schedule,
                TriggerKind::FileWatch
            ]
            .map(|k| t.count(k)),
            [1, 1, 1]
        );
        let listed = t.listing();
        assert_eq!(listed[0], "  POST /in → hook.md");
        assert!(
            listed[1].starts_with("  schedule `0 9 * * *` ("),
            "{listed:?}"
        );
        assert_eq!(listed[2], "  file_watch `notes/*.md` → both.md");
        t.retain(&|w| w.meta.id == "hook");
        assert_eq!(t.listing(), ["  POST /in → hook.md"]);
        t.retain(&|_| false);
        assert!(t.is_empty());
    }

    #[test]
    fn the_problems_of_every_kind_come_together() {
        let bad = workflow(
            "bad",
            "  - {type: webhook}\n  - {type: schedule, cron: 'not a cron'}\n  - {type: file_watch}\n",
        );
        let errors = Triggers::of(&[bad], &BTreeMap::new(), Path::new("/srv"))
            .err()
            .unwrap();
        assert_eq!(errors.len(), 3, "{errors:?}");
    }
}
