//! `schedule` triggers: their cron expressions checked at start, and the
//! loop that starts their runs.

use super::{start_run, Job, ServerState};
use crate::diag::Diagnostic;
use crate::format::inputs::{self, Supplied};
use crate::format::model::{Trigger, Workflow};
use crate::serve::cron::Cron;
use serde_json::{Map, Value};
use std::sync::Arc;

/// A `schedule` trigger: when, and with which inputs.
pub struct Schedule {
    pub workflow: Arc<Workflow>,
    pub cron: Cron,
    pub expr: String,
    pub inputs: Map<String, Value>,
}

/// The `schedule` triggers of the workflows (`cron:` at the top level or under `config:`).
pub fn schedules_of(workflows: &[Arc<Workflow>]) -> Result<Vec<Schedule>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for wf in workflows {
        for t in wf.triggers.iter().filter(|t| fires(t)) {
            match cron_of(wf, t) {
                Ok((expr, cron)) => out.push(Schedule {
                    workflow: wf.clone(),
                    cron,
                    expr,
                    inputs: match t.fields.get("inputs") {
                        Some(Value::Object(m)) => m.clone(),
                        _ => Map::new(),
                    },
                }),
                Err(d) => errors.push(*d),
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Whether `t` is a schedule that `serve` starts (not `enabled: false`).
pub fn fires(t: &Trigger) -> bool {
    t.kind == crate::format::model::TriggerKind::Schedule
        && t.fields.get("enabled") != Some(&Value::Bool(false))
}

/// One `schedule` trigger's expression, read on its `timezone:`'s clock.
pub fn cron_of(wf: &Workflow, t: &Trigger) -> Result<(String, Cron), Box<Diagnostic>> {
    let at = |message: String| Box::new(Diagnostic::error(&wf.source, Some(t.pos), message));
    let Some(expr) = t
        .fields
        .get("cron")
        .or_else(|| t.fields.get("schedule"))
        .and_then(Value::as_str)
    else {
        return Err(at(
            "a schedule trigger needs `cron:` (e.g. `0 9 * * mon-fri`)".into(),
        ));
    };
    let tz = match t.fields.get("timezone") {
        None => None,
        Some(Value::String(name)) => match name.parse::<chrono_tz::Tz>() {
            Ok(tz) => Some(tz),
            Err(_) => {
                let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
                let hint = match crate::diag::did_you_mean(name, &names) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "use an IANA name such as `Europe/Lisbon`, `America/New_York` or `UTC`"
                        .into(),
                };
                return Err(Box::new(
                    at(format!("unknown time zone `{name}`")).with_hint(hint),
                ));
            }
        },
        Some(_) => {
            return Err(at(
                "`timezone` must be an IANA name such as `Europe/Lisbon`".into(),
            ))
        }
    };
    match Cron::parse(expr) {
        Ok(c) => Ok((
            expr.to_string(),
            match tz {
                Some(tz) => c.in_zone(tz),
                None => c,
            },
        )),
        Err(e) => Err(at(format!("invalid cron expression: {e}"))),
    }
}

/// Starts each scheduled run at its minute (UTC, or the trigger's
/// `timezone`), with the trigger's inputs
/// checked and defaulted like any other run. Runs show in `/runs/{id}`.
pub async fn run_schedules(state: Arc<ServerState>, schedules: Vec<Schedule>) {
    if schedules.is_empty() {
        return;
    }
    loop {
        let now = chrono::Utc::now();
        let Some(next) = schedules
            .iter()
            .filter_map(|s| s.cron.next_after(now))
            .min()
        else {
            return;
        };
        let wait = (next - chrono::Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait).await;
        for s in schedules.iter().filter(|s| s.cron.matches(next)) {
            let supplied = s
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
                .collect();
            match inputs::resolve(&s.workflow, supplied, &state.caps.env) {
                Ok(inputs) => {
                    let run_id = crate::store::new_run_id();
                    // On a shared store every server has the schedule; the
                    // tick's key lets one of them start it.
                    let shared = state.store.as_ref().is_some_and(|s| s.shared().is_some());
                    let key = shared.then(|| {
                        format!(
                            "schedule {} {} {}",
                            s.workflow.meta.id,
                            s.expr,
                            next.timestamp()
                        )
                    });
                    match start_run(
                        &state,
                        s.workflow.clone(),
                        Job::New(inputs, crate::engine::RunTrigger::Schedule, key),
                        run_id.clone(),
                    ) {
                        Ok(_) => eprintln!(
                            "marktoflow: schedule `{}` started run {run_id} of {}",
                            s.expr, s.workflow.source.name
                        ),
                        Err(why) => eprintln!(
                            "marktoflow: schedule `{}` of {}: not started: {why}",
                            s.expr, s.workflow.source.name
                        ),
                    }
                }
                Err(errs) => {
                    let msg: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                    eprintln!(
                        "marktoflow: schedule `{}` of {}: not started: {}",
                        s.expr,
                        s.workflow.source.name,
                        msg.join("; ")
                    );
                }
            }
        }
    }
}
