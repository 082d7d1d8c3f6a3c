//! `marktoflow doctor`: what this machine and project give workflows — the
//! LLM providers (each asked a tiny question for real), the local models,
//! the run store, the folders runs may touch, and, for the workflows named,
//! what `serve` would serve. A check that fails makes the exit code 1.

use super::env::environment;
use super::report::plural;
use super::run::one_run_caps;
use super::{state_dir, StoreArgs, EXIT_OK, EXIT_RUN_FAILED};
use crate::engine::{Engine, RunConfig, RunStatus};
use marktoflow_steps::agent::AgentOverrides;
use marktoflow_steps::{Registry, Sandbox};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One line of the report.
struct Check {
    section: &'static str,
    ok: Option<bool>,
    what: String,
}

#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, section: &'static str, ok: Option<bool>, what: impl Into<String>) {
        self.checks.push(Check {
            section,
            ok,
            what: what.into(),
        });
    }
    fn failed(&self) -> usize {
        self.checks.iter().filter(|c| c.ok == Some(false)).count()
    }
}

/// The tiny workflow a provider is asked through: the same resolution,
/// keys and wire format as a real agent step.
const PING: &str = "---\nworkflow: {id: doctor-ping}\n---\n\n```yaml\naction: agent.run\ninputs:\n  prompt: Reply with the single word OK.\n  max_tokens: 8\n```\n";

/// The providers worth asking: those configured in `env`, and the local
/// model when it is installed.
fn providers(env: &std::collections::BTreeMap<String, String>) -> Vec<(&'static str, String)> {
    let set = |k: &str| env.get(k).is_some_and(|v| !v.trim().is_empty());
    let mut out = Vec::new();
    if set("ANTHROPIC_API_KEY") || set("ANTHROPIC_AUTH_TOKEN") {
        out.push(("anthropic", "ANTHROPIC_API_KEY is set".to_string()));
    }
    if set("OPENAI_API_KEY") || set("OPENAI_BASE_URL") {
        out.push((
            "openai",
            "OPENAI_API_KEY or OPENAI_BASE_URL is set".to_string(),
        ));
    }
    if set("OLLAMA_HOST") {
        out.push(("ollama", format!("OLLAMA_HOST={}", env["OLLAMA_HOST"])));
    }
    out
}

/// Asks `provider` the ping question; the reply's first words and how long it took.
fn ping(
    provider: &str,
    model: Option<&str>,
    env: &std::collections::BTreeMap<String, String>,
    limit: Duration,
) -> Result<(String, Duration), String> {
    let registry = Registry::standard();
    let wf = crate::format::model::load_str(Path::new("doctor-ping.md"), PING, &registry)
        .map_err(|d| d.first().map(|d| d.message.clone()).unwrap_or_default())?
        .workflow;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let caps = one_run_caps(
        &cwd,
        Sandbox::new(cwd.clone(), vec![], vec![]),
        AgentOverrides {
            agent: Some(provider.to_string()),
            model: model.map(str::to_string),
        },
        env.clone(),
        None,
    );
    if let Err(d) = crate::engine::plan::preflight(&wf, &caps) {
        return Err(d.first().map(|d| d.message.clone()).unwrap_or_default());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let cfg = RunConfig {
        run_id: "doctor".into(),
        caps,
        events: Arc::new(|_| {}),
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
    let start = Instant::now();
    let result = rt.block_on(async {
        tokio::time::timeout(limit, Engine::new().run(&wf, Default::default(), cfg)).await
    });
    let took = start.elapsed();
    match result {
        Err(_) => Err(format!("no answer within {}s", limit.as_secs())),
        Ok(r) if r.status == RunStatus::Completed => {
            let text = r
                .steps
                .first()
                .and_then(|s| s.output.as_str())
                .unwrap_or("")
                .split_whitespace()
                .take(6)
                .collect::<Vec<_>>()
                .join(" ");
            Ok((text, took))
        }
        Ok(r) => Err(r
            .error
            .map(|e| e.message)
            .unwrap_or_else(|| "the request failed".into())),
    }
}

/// `marktoflow doctor [PATHS...]`.
pub fn doctor(
    paths: &[PathBuf],
    agent: Option<&str>,
    model: Option<&str>,
    offline: bool,
    store: &StoreArgs,
    as_json: bool,
) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let start = paths
        .first()
        .map(|p| {
            if p.is_file() {
                p.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                p.clone()
            }
        })
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let env = environment(&start);
    let mut r = Report::default();
    r.add(
        "marktoflow",
        None,
        format!(
            "version {} at {}",
            env!("CARGO_PKG_VERSION"),
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    );

    // Providers: each configured one answers a tiny question.
    let mut asked: Vec<(&str, String)> = match agent {
        Some(p) => vec![(
            match p {
                "anthropic" | "claude" | "claude-agent" => "anthropic",
                "openai" => "openai",
                "ollama" => "ollama",
                "local" => "local",
                _ => "other",
            },
            format!("--agent {p}"),
        )],
        None => providers(&env),
    };
    let local = marktoflow_steps::core::models::installed(&env)
        .into_iter()
        .find(|m| {
            m.known
                .is_some_and(|k| k.kind == marktoflow_steps::core::models::Kind::Chat)
                || m.name.ends_with(".gguf")
        });
    if agent.is_none() && local.is_some() {
        asked.push(("local", "installed".into()));
    }
    if asked.is_empty() {
        r.add(
            "providers",
            Some(false),
            "no LLM provider: set ANTHROPIC_API_KEY, OPENAI_API_KEY or OLLAMA_HOST, or `marktoflow model install` the local model",
        );
    }
    for (provider, why) in &asked {
        let name = if *provider == "other" {
            agent.unwrap_or("other")
        } else {
            provider
        };
        if offline && *provider != "local" {
            r.add(
                "providers",
                None,
                format!("{name} ({why}): not asked (--offline)"),
            );
            continue;
        }
        // The local model loads from disk: give it longer.
        let limit = Duration::from_secs(if *provider == "local" { 120 } else { 30 });
        match ping(name, model, &env, limit) {
            Ok((reply, took)) => r.add(
                "providers",
                Some(true),
                format!(
                    "{name} ({why}): answered `{reply}` in {}",
                    crate::engine::human_duration(took)
                ),
            ),
            Err(e) => r.add("providers", Some(false), format!("{name} ({why}): {e}")),
        }
    }

    // Models marktoflow runs itself.
    let models = marktoflow_steps::core::models::installed(&env);
    if models.is_empty() {
        r.add(
            "models",
            None,
            format!(
                "none installed in {} (`marktoflow model install` for offline answers and dense search)",
                marktoflow_steps::core::state::models_dir(&env).display()
            ),
        );
    }
    for m in &models {
        r.add(
            "models",
            Some(true),
            format!(
                "{} ({} MB) at {}",
                m.name,
                m.bytes / 1_000_000,
                m.path.display()
            ),
        );
    }

    // The run store.
    let state = state_dir(&start);
    r.add(
        "store",
        None,
        format!(
            "state folder {} ({})",
            state.root.display(),
            if state.project {
                "this project's `.marktoflow/`"
            } else {
                "per user: `mkdir .marktoflow` at a project's root keeps its runs there"
            }
        ),
    );
    let db = store.path(&start);
    let where_ = match store.url() {
        Some(url) => crate::store::postgres::shown(url),
        None => db.display().to_string(),
    };
    if store.no_store {
        r.add("store", None, "--no-store: runs are not recorded");
    } else if store.url().is_none() && !db.parent().is_some_and(Path::exists) {
        r.add("store", None, format!("{where_}: no runs recorded yet"));
    } else {
        match store.open(&start) {
            Ok(Some(s)) => {
                let all = s.count_runs(&Default::default());
                let unfinished = s.incomplete_runs().map(|v| v.len());
                match (all, unfinished) {
                    (Ok(n), Ok(u)) => r.add(
                        "store",
                        Some(true),
                        format!("{where_}: {n} run{} recorded, {u} unfinished", plural(n)),
                    ),
                    (Err(e), _) | (_, Err(e)) => r.add("store", Some(false), e.to_string()),
                }
            }
            Ok(None) => {}
            Err(e) => r.add("store", Some(false), e.to_string()),
        }
    }

    // What runs may touch, as `run` and `serve` set it up here.
    r.add(
        "sandbox",
        None,
        format!(
            "runs read below {} and each workflow's folder (more with --allow-read), write only below --allow-write folders",
            cwd.display()
        ),
    );

    // The workflows named: what loads, and what `serve` would serve.
    if !paths.is_empty() {
        let registry = Registry::standard();
        let (found, errors) = super::validate::discover(paths, &registry);
        let n = found.len();
        r.add(
            "workflows",
            Some(errors.is_empty()),
            format!(
                "{n} workflow{} load{}{}",
                plural(n),
                if n == 1 { "s" } else { "" },
                if errors.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} problem{} (`marktoflow validate` shows them)",
                        errors.len(),
                        plural(errors.len())
                    )
                }
            ),
        );
        let workflows: Vec<Arc<crate::format::model::Workflow>> = found
            .into_iter()
            .map(|(_, l)| Arc::new(l.workflow))
            .collect();
        match crate::serve::routes_of(&workflows, &env) {
            Ok(routes) => {
                for route in &routes {
                    let auth = if route.secret.is_some() {
                        "signed"
                    } else if route.token.is_some() {
                        "bearer token"
                    } else {
                        "no authentication"
                    };
                    r.add(
                        "routes",
                        Some(true),
                        format!(
                            "{} {} → {} ({auth})",
                            route.method, route.path, route.workflow.source.name
                        ),
                    );
                }
                if routes.is_empty() {
                    r.add("routes", None, "no webhook triggers");
                }
            }
            Err(d) => {
                for d in d {
                    r.add(
                        "routes",
                        Some(false),
                        format!(
                            "{}:{}: {}",
                            d.file,
                            d.pos.map(|p| p.line).unwrap_or(0),
                            d.message
                        ),
                    );
                }
            }
        }
        let caps = one_run_caps(
            &start,
            Sandbox::new(cwd.clone(), vec![], vec![]),
            AgentOverrides {
                agent: agent.map(str::to_string),
                model: model.map(str::to_string),
            },
            env.clone(),
            None,
        );
        for w in &workflows {
            if let Err(d) = crate::engine::plan::preflight(w, &caps) {
                let why = d.first().map(|d| d.message.as_str()).unwrap_or_default();
                r.add(
                    "workflows",
                    Some(false),
                    format!("{}: its agent steps cannot run: {why}", w.source.name),
                );
            }
        }
    }

    let failed = r.failed();
    if as_json {
        let checks: Vec<Value> = r
            .checks
            .iter()
            .map(|c| json!({"section": c.section, "ok": c.ok, "message": c.what}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": failed == 0, "checks": checks}))
                .unwrap_or_default()
        );
    } else {
        let mut section = "";
        for c in &r.checks {
            if c.section != section {
                section = c.section;
                println!("{section}");
            }
            let mark = match c.ok {
                Some(true) => "ok  ",
                Some(false) => "FAIL",
                None => "    ",
            };
            println!("  {mark} {}", c.what);
        }
        println!();
        if failed == 0 {
            println!("no problems found");
        } else {
            println!("{failed} problem{} found", plural(failed));
        }
    }
    if failed == 0 {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }
}
