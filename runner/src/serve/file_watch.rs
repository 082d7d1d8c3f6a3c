//! `file_watch` triggers: run a workflow when files matching a glob change.
//!
//! ```yaml
//! triggers:
//!   - type: file_watch
//!     path: notes/**/*.md     # glob, relative to the workflow's folder (or `paths: [...]`)
//!     debounce: 500ms         # quiet time before a run starts
//!     input: changed_paths    # the array input that receives the changed files
//! ```
//!
//! Changes are collected until nothing has changed for `debounce`; then one
//! run starts with every changed path (sorted, deduplicated). The folders are
//! watched with the operating system's notifications (inotify on Linux).

use super::{start_run, Job, ServerState};
use crate::diag::Diagnostic;
use crate::format::inputs::{self, Supplied};
use crate::format::model::{InputType, Workflow};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::json;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// One `file_watch` trigger, checked at start.
pub struct FileWatch {
    pub workflow: Arc<Workflow>,
    /// The patterns as written.
    pub patterns: Vec<String>,
    /// Folders to watch (the literal prefix of each pattern), absolute.
    pub roots: Vec<PathBuf>,
    /// Matches absolute paths.
    pub matcher: GlobSet,
    pub debounce: Duration,
    /// The input that receives the changed paths.
    pub input: String,
    /// Other inputs of the runs.
    pub inputs: Map<String, Value>,
    /// Paths are given relative to this folder when they are inside it.
    pub base: PathBuf,
}

const DEFAULT_INPUT: &str = "changed_paths";
const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(500);

/// The `file_watch` triggers of the workflows; `cwd` anchors relative
/// workflow paths.
pub fn file_watches_of(
    workflows: &[Arc<Workflow>],
    cwd: &Path,
) -> Result<Vec<FileWatch>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for wf in workflows {
        for t in wf
            .triggers
            .iter()
            .filter(|t| t.kind == crate::format::model::TriggerKind::FileWatch)
        {
            if t.fields.get("enabled") == Some(&Value::Bool(false)) {
                continue;
            }
            let err = |msg: String| Diagnostic::error(&wf.source, Some(t.pos), msg);
            let patterns: Vec<String> = match t.fields.get("paths").or_else(|| t.fields.get("path"))
            {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(a)) if a.iter().all(Value::is_string) && !a.is_empty() => a
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                _ => {
                    errors.push(
                        err("a file_watch trigger needs `path:` (a glob like `notes/**/*.md`) or a list `paths:`".into()),
                    );
                    continue;
                }
            };
            let base = cwd.join(wf.source.path.parent().unwrap_or(Path::new("")));
            let base = marktoflow_steps::core::sandbox::normalize(&base);
            let mut builder = GlobSetBuilder::new();
            let mut roots = Vec::new();
            let mut bad = false;
            for p in &patterns {
                let abs = base.join(p);
                let abs_text = abs.to_string_lossy().into_owned();
                match Glob::new(&abs_text) {
                    Ok(g) => {
                        builder.add(g);
                    }
                    Err(e) => {
                        errors.push(err(format!("invalid glob `{p}`: {e}")));
                        bad = true;
                        continue;
                    }
                }
                let root = literal_prefix(&abs);
                if !root.is_dir() {
                    errors.push(err(format!(
                        "`{p}`: the folder `{}` does not exist",
                        root.display()
                    )));
                    bad = true;
                    continue;
                }
                roots.push(root);
            }
            if bad {
                continue;
            }
            let matcher = match builder.build() {
                Ok(m) => m,
                Err(e) => {
                    errors.push(err(format!("invalid glob: {e}")));
                    continue;
                }
            };
            let debounce = match t.fields.get("debounce") {
                None => DEFAULT_DEBOUNCE,
                Some(v) => match marktoflow_steps::builtin::parse_duration(v) {
                    Ok(d) => d,
                    Err(e) => {
                        errors.push(err(format!("`debounce`: {e}")));
                        continue;
                    }
                },
            };
            let input = t
                .fields
                .get("input")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_INPUT)
                .to_string();
            match wf.inputs.iter().find(|i| i.name == input) {
                Some(def) if def.ty == InputType::Array => {}
                Some(def) => {
                    errors.push(err(format!(
                        "the input `{input}` receives the changed paths, so it must be `type: array`, not `{}`",
                        def.ty.name()
                    )));
                    continue;
                }
                None => {
                    errors.push(
                        err(format!(
                            "the workflow has no input `{input}` to receive the changed paths"
                        ))
                        .with_hint(format!(
                            "declare `inputs: {{{input}: {{type: array}}}}`, or name another array input with `input:`"
                        )),
                    );
                    continue;
                }
            }
            roots.sort();
            roots.dedup();
            // A folder inside another watched folder is watched already.
            let roots: Vec<PathBuf> = roots
                .iter()
                .filter(|r| !roots.iter().any(|o| o != *r && r.starts_with(o)))
                .cloned()
                .collect();
            out.push(FileWatch {
                workflow: wf.clone(),
                patterns,
                roots,
                matcher,
                debounce,
                input,
                inputs: match t.fields.get("inputs") {
                    Some(Value::Object(m)) => m.clone(),
                    _ => Map::new(),
                },
                base,
            });
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The folders before the first component with a glob character.
fn literal_prefix(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        if let Component::Normal(s) = c {
            if s.to_string_lossy().contains(['*', '?', '[', '{']) {
                break;
            }
        }
        out.push(c);
    }
    // A pattern naming one file watches its folder.
    if out == p && !p.is_dir() {
        out.pop();
    }
    out
}

/// Something [`watch`] watches: folders, which paths in them count, and
/// how long to wait for quiet.
pub trait Watched {
    /// Folders to watch (recursively), absolute.
    fn roots(&self) -> &[PathBuf];
    fn matches(&self, p: &Path) -> bool;
    fn debounce(&self) -> Duration;
    /// The changed path as handed on.
    fn shown(&self, p: &Path) -> String;
}

impl Watched for FileWatch {
    fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    fn matches(&self, p: &Path) -> bool {
        self.matcher.is_match(p)
    }

    fn debounce(&self) -> Duration {
        self.debounce
    }

    /// Relative to the workflow's folder when inside it.
    fn shown(&self, p: &Path) -> String {
        p.strip_prefix(&self.base)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    }
}

/// The workflow files `marktoflow mcp --watch` and `serve --watch` follow: the files named,
/// and the Markdown files below the folders named.
pub struct ServedFiles {
    roots: Vec<PathBuf>,
    files: Vec<PathBuf>,
    folders: Vec<PathBuf>,
}

impl ServedFiles {
    pub fn of(paths: &[PathBuf], cwd: &Path) -> ServedFiles {
        let abs = |p: &PathBuf| marktoflow_steps::core::sandbox::normalize(&cwd.join(p));
        let files: Vec<PathBuf> = paths.iter().filter(|p| p.is_file()).map(abs).collect();
        let folders: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).map(abs).collect();
        let mut roots: Vec<PathBuf> = folders.clone();
        roots.extend(
            files
                .iter()
                .filter_map(|f| f.parent().map(Path::to_path_buf)),
        );
        roots.sort();
        roots.dedup();
        ServedFiles {
            roots,
            files,
            folders,
        }
    }
}

impl Watched for ServedFiles {
    fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    fn matches(&self, p: &Path) -> bool {
        self.files.iter().any(|f| f == p)
            || (p.extension().is_some_and(|e| e == "md")
                && self.folders.iter().any(|d| p.starts_with(d)))
    }

    fn debounce(&self) -> std::time::Duration {
        std::time::Duration::from_millis(300)
    }

    fn shown(&self, p: &Path) -> String {
        p.display().to_string()
    }
}

/// Collects changes and hands each debounced batch to `start`. Returns when
/// `stop` resolves or the watcher cannot be set up (the error is returned).
pub async fn watch<W: Watched>(
    watches: Vec<W>,
    stop: impl std::future::Future<Output = ()>,
    start: impl Fn(&W, Vec<String>),
) -> Result<(), notify::Error> {
    watch_then(watches, stop, start, || {}).await
}

/// [`watch`], calling `ready` once the folders are watched: a change made
/// after it is never missed.
pub async fn watch_then<W: Watched>(
    watches: Vec<W>,
    stop: impl std::future::Future<Output = ()>,
    start: impl Fn(&W, Vec<String>),
    ready: impl FnOnce(),
) -> Result<(), notify::Error> {
    use notify::{RecursiveMode, Watcher};
    if watches.is_empty() {
        return Ok(());
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PathBuf>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            for p in ev.paths {
                let _ = tx.send(p);
            }
        }
    })?;
    let mut roots: Vec<&PathBuf> = watches.iter().flat_map(|w| w.roots().iter()).collect();
    roots.sort();
    roots.dedup();
    for r in roots {
        watcher.watch(r, RecursiveMode::Recursive)?;
    }
    ready();
    let mut pending: Vec<BTreeSet<String>> = vec![BTreeSet::new(); watches.len()];
    let mut due: Vec<Option<tokio::time::Instant>> = vec![None; watches.len()];
    tokio::pin!(stop);
    loop {
        let next_due = due.iter().flatten().min().copied();
        let sleep = async {
            match next_due {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut stop => return Ok(()),
            p = rx.recv() => {
                let Some(p) = p else { return Ok(()) };
                for (i, w) in watches.iter().enumerate() {
                    if w.matches(&p) {
                        pending[i].insert(w.shown(&p));
                        // The quiet time starts again with every change.
                        due[i] = Some(tokio::time::Instant::now() + w.debounce());
                    }
                }
            }
            _ = sleep => {
                let now = tokio::time::Instant::now();
                for (i, w) in watches.iter().enumerate() {
                    if due[i].is_some_and(|t| t <= now) {
                        due[i] = None;
                        let paths: Vec<String> = std::mem::take(&mut pending[i]).into_iter().collect();
                        start(w, paths);
                    }
                }
            }
        }
    }
}

/// Runs the `file_watch` triggers until shutdown begins: each debounced
/// batch of changed paths starts one run (inputs checked like any run's).
pub async fn run_file_watches(
    state: Arc<ServerState>,
    watches: Vec<crate::serve::file_watch::FileWatch>,
) {
    let stop = state.stopping.clone();
    let result = crate::serve::file_watch::watch(watches, stop.cancelled(), |w, paths| {
        let mut supplied: Vec<(String, Supplied)> = w
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
            .collect();
        let n = paths.len();
        supplied.push((w.input.clone(), Supplied::Json(json!(paths))));
        match inputs::resolve(&w.workflow, supplied, &state.caps.env) {
            Ok(inputs) => {
                let run_id = crate::store::new_run_id();
                match start_run(
                    &state,
                    w.workflow.clone(),
                    Job::New(inputs, crate::engine::RunTrigger::FileWatch, None),
                    run_id.clone(),
                ) {
                    Ok(_) => eprintln!(
                        "marktoflow: {n} changed file{} started run {run_id} of {}",
                        if n == 1 { "" } else { "s" },
                        w.workflow.source.name
                    ),
                    Err(why) => eprintln!(
                        "marktoflow: file_watch of {}: not started: {why}",
                        w.workflow.source.name
                    ),
                }
            }
            Err(errs) => {
                let msg: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                eprintln!(
                    "marktoflow: file_watch of {}: not started: {}",
                    w.workflow.source.name,
                    msg.join("; ")
                );
            }
        }
    })
    .await;
    if let Err(e) = result {
        eprintln!("marktoflow: cannot watch files: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_prefix_is_the_folder_to_watch() {
        assert_eq!(
            literal_prefix(Path::new("/kb/notes/**/*.md")),
            PathBuf::from("/kb/notes")
        );
        assert_eq!(
            literal_prefix(Path::new("/kb/{a,b}/x.md")),
            PathBuf::from("/kb")
        );
        assert_eq!(
            literal_prefix(Path::new("/kb/inbox.md")),
            PathBuf::from("/kb")
        );
    }
}
