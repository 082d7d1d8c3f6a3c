//! `marktoflow answer RUN [STEP] --input k=v [--approve|--reject]`: the
//! answer to a waiting run is checked against the step's `fields:`,
//! recorded once (see [`crate::store::wait`]), and when it decides the
//! wait, the run continues in this process. `marktoflow pause RUN` asks
//! whichever process runs a run to pause it; `marktoflow resume RUN`
//! continues it here.

use super::args::{AnswerArgs, RunArgs};
use super::run::{run_with, Continuing};
use super::{print_diagnostics, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::diag::Diagnostic;
use crate::engine::Vote;
use crate::format::inputs::{resolve_defs, Supplied};
use crate::format::model::{AskMode, InputDef, Workflow};
use crate::store::{AnswerIn, Answered, PauseAsked, RunStatus, WaitFilter, WaitRecord};
use serde_json::Map;
use std::path::PathBuf;

pub fn answer(a: AnswerArgs) -> i32 {
    answer_wait(a, false)
}

/// `marktoflow pause RUN`: recorded in the store, where the process that
/// runs it looks (every half second) and pauses it before its next step.
pub fn pause(run_id: &str, as_: Option<String>, store: &super::args::StoreArgs) -> i32 {
    let store = match super::store::open(store) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.get_run(run_id) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if run.is_interrupted() {
        eprintln!(
            "error: run `{}` is interrupted (its process is gone): the next server start resumes it",
            run.id
        );
        return EXIT_USAGE;
    }
    let by = who(as_);
    match store.ask_pause(&run.id, &by) {
        Ok(PauseAsked::Asked) => {
            println!(
                "run {} pauses before its next step; `marktoflow resume {}` continues it",
                run.id,
                crate::store::short_id(&run.id)
            );
            EXIT_OK
        }
        Ok(PauseAsked::NotRunning(_) | PauseAsked::NotFound) => {
            eprintln!(
                "error: run `{}` is {}: only a queued or running run can be paused",
                run.id,
                run.shown_status()
            );
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// Who answers from this terminal: `--as`, else the login name.
fn who(as_: Option<String>) -> String {
    as_.or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cli".into())
}

/// `marktoflow resume RUN`: a run paused from outside goes on.
pub fn resume(run_id: String, as_: Option<String>, exec: super::args::ExecArgs) -> i32 {
    let a = AnswerArgs {
        run_id,
        step: None,
        input: Vec::new(),
        approve: false,
        reject: false,
        comment: None,
        as_,
        exec,
    };
    answer_wait(a, true)
}

fn answer_wait(a: AnswerArgs, paused: bool) -> i32 {
    let store = match super::store::open(&a.exec.store) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let run = match store.get_run(&a.run_id) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if run.status != RunStatus::Waiting {
        eprintln!(
            "error: run `{}` is not waiting for an answer (it is {})",
            run.id,
            run.shown_status()
        );
        return EXIT_USAGE;
    }
    let open = match store.waits(&WaitFilter {
        run_id: Some(run.id.clone()),
        open: true,
        ..Default::default()
    }) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let wait = match pick(&open, a.step.as_deref()) {
        Ok(w) => w,
        Err(why) => {
            eprintln!("error: {why}");
            return EXIT_USAGE;
        }
    };
    let pause = wait.request.mode == AskMode::Pause;
    if paused && !pause {
        eprintln!(
            "error: run `{}` is not paused: it waits at step `{}` for an answer (`marktoflow answer`)",
            run.id, wait.request.step_id
        );
        return EXIT_USAGE;
    }
    let file = PathBuf::from(&run.file);
    let wf = match crate::check::load::load_file(&file, &marktoflow_steps::Registry::standard()) {
        Ok(l) => l.workflow,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_USAGE;
        }
    };
    // A pause or an agent's tool call waits at no step of the file.
    let (fields, mode) = match (
        wf.ask(&wait.request.step_id),
        crate::engine::outside_wait(&wait.request.step_id),
    ) {
        (Some(ask), _) => (ask.fields.clone(), ask.mode),
        (None, Some(outside)) => outside,
        (None, None) => {
            eprintln!(
                "error: `{}` has no `wait` step `{}` any more: the file changed since the run started",
                run.file, wait.request.step_id
            );
            return EXIT_USAGE;
        }
    };
    let vote = match vote_of(&a, &wf, &fields, mode) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let outcome = store.answer_wait(AnswerIn {
        run_id: run.id.clone(),
        step_id: wait.request.step_id.clone(),
        vote,
    });
    match outcome {
        Ok(Answered::Resumes { .. }) if store.shared().is_some() => {
            eprintln!(
                "answered: run `{}` is queued again; a worker serving `{}` continues it",
                run.id, run.file
            );
            EXIT_OK
        }
        Ok(Answered::Resumes { .. }) => {
            // Read again: the run is queued now, and this process owns it.
            let run = match store.get_run(&run.id) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: the answer was recorded, but the run cannot be read: {e}");
                    return EXIT_RUN_FAILED;
                }
            };
            let args = RunArgs::of_file(file, a.exec);
            run_with(args, None, None, Some(Continuing { run, store }))
        }
        Ok(Answered::Counted { have, need }) => {
            eprintln!(
                "recorded: {have} of {need} approvals; run `{}` waits for the rest",
                crate::store::short_id(&run.id)
            );
            EXIT_OK
        }
        Ok(Answered::Refused { why }) => {
            eprintln!("error: {why}");
            EXIT_USAGE
        }
        Ok(Answered::Closed { state }) => {
            eprintln!(
                "error: step `{}` of run `{}` was {state} already: this answer changes nothing",
                wait.request.step_id, run.id
            );
            EXIT_RUN_FAILED
        }
        Ok(Answered::NotFound) => {
            eprintln!(
                "error: run `{}` does not wait at step `{}`",
                run.id, wait.request.step_id
            );
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// The open wait `step` names, or the only one.
fn pick<'a>(open: &'a [WaitRecord], step: Option<&str>) -> Result<&'a WaitRecord, String> {
    let ids = || {
        open.iter()
            .map(|w| format!("`{}`", w.request.step_id))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match step {
        Some(s) => open.iter().find(|w| w.request.step_id == s).ok_or_else(|| {
            format!(
                "the run does not wait at step `{s}` (it waits at {})",
                ids()
            )
        }),
        None => match open {
            [one] => Ok(one),
            [] => Err("the run has no open wait".into()),
            _ => Err(format!(
                "the run waits at several steps ({}); name one",
                ids()
            )),
        },
    }
}

/// The vote the command line gives, its values checked like inputs.
fn vote_of(a: &AnswerArgs, wf: &Workflow, fields: &[InputDef], mode: AskMode) -> Result<Vote, i32> {
    let mut supplied = Vec::new();
    for kv in &a.input {
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("error: `--input {kv}`: expected NAME=VALUE");
            return Err(EXIT_USAGE);
        };
        supplied.push((k.trim().to_string(), Supplied::Text(v.to_string())));
    }
    let values = check_fields(wf, fields, supplied).map_err(|diags| {
        print_diagnostics(&diags);
        EXIT_USAGE
    })?;
    let decision = match (mode, a.approve, a.reject) {
        (AskMode::Approval, true, _) => Some("approved".to_string()),
        (AskMode::Approval, _, true) => Some("rejected".to_string()),
        (AskMode::Approval, false, false) => {
            eprintln!("error: this step asks for an approval: add `--approve` or `--reject`");
            return Err(EXIT_USAGE);
        }
        (_, false, false) => None,
        (_, _, _) => {
            eprintln!("error: `--approve` and `--reject` answer `mode: approval` steps only");
            return Err(EXIT_USAGE);
        }
    };
    let by = who(a.as_.clone());
    Ok(Vote {
        by,
        at: crate::store::now_ms(),
        decision,
        comment: a.comment.clone(),
        values,
        via: "cli".into(),
    })
}

/// `supplied` checked against the step's fields, as inputs are: errors
/// point at each field's definition.
fn check_fields(
    wf: &Workflow,
    fields: &[InputDef],
    supplied: Vec<(String, Supplied)>,
) -> Result<Map<String, serde_json::Value>, Vec<Diagnostic>> {
    let env = std::collections::BTreeMap::new();
    resolve_defs(fields, Err("this step has no such field"), supplied, &env).map_err(|errs| {
        errs.iter()
            .map(|e| {
                let pos = fields.iter().find(|f| f.name == e.name).map(|f| f.pos);
                let mut d = Diagnostic::error(
                    &wf.source,
                    pos,
                    e.to_string().replacen("input `", "field `", 1),
                );
                if let Some(h) = e.hint.clone().or_else(|| {
                    e.missing
                        .as_ref()
                        .map(|m| format!("give it with `--input {}=<{}>`", e.name, m.ty))
                }) {
                    d.hints.push(h);
                }
                d
            })
            .collect()
    })
}
