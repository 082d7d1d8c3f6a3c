//! Answers that can be checked: evidence lines chosen by rules
//! ([`evidence`], behind `kb.evidence`), an extractive answer from them
//! (`answer.extract`), and a verifier for any model's answer
//! (`answer.verify`). No model is called here: a model may phrase an
//! answer, but what it states must stand in the lines it cites.

pub mod evidence;
pub mod extract;
pub mod question;
pub mod read;
pub mod spans;
pub mod text;
pub mod units;
pub mod verify;

use crate::core::{
    action::{Action, Call},
    args::Args,
    error::{type_name, ActionError},
};
use async_trait::async_trait;
use serde_json::{json, Value};

pub struct AnswerAction;

#[async_trait]
impl Action for AnswerAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        match call.method {
            "extract" => extract_method(&Args::of(SPECS, call, &inputs)?),
            "read" => read_method(call, &Args::of(SPECS, call, &inputs)?).await,
            "verify" => verify_method(&Args::of(SPECS, call, &inputs)?),
            m => Err(ActionError::Input(format!("unknown method `answer.{m}`"))),
        }
    }
}

/// The evidence input: a `kb.evidence` output, or its `evidence` list
/// (null, from an evidence step that found nothing, is none).
fn evidence_input(a: &Args) -> Result<Vec<Value>, ActionError> {
    let Some(v) = a.get("evidence") else {
        return match a.map().contains_key("evidence") {
            true => Ok(Vec::new()),
            false => Err(a.missing("evidence")),
        };
    };
    match v {
        Value::Array(items) => Ok(items.clone()),
        Value::Object(o) => match o.get("evidence") {
            Some(Value::Array(items)) => Ok(items.clone()),
            _ => Err(a.invalid(
                "evidence",
                "must be a `kb.evidence` output or its `evidence` list",
            )),
        },
        other => Err(a.invalid(
            "evidence",
            format!("must be a list of evidence items, got {}", type_name(other)),
        )),
    }
}

fn extract_method(a: &Args) -> Result<Value, ActionError> {
    let q = question::analyze(question::input(a, "question")?);
    let items = evidence::from_json(&evidence_input(a)?);
    let found = extract::extract(&q, &items);
    Ok(found.to_json(&q, &items))
}

/// How long reading may take when the step sets no `timeout`.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

async fn read_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let items = evidence::from_json(&evidence_input(a)?);
    let several = a.is_given("questions");
    let questions: Vec<String> = if several {
        let list = a.strings("questions")?;
        for q in &list {
            question::check_length(a, "questions", q)?;
        }
        list
    } else {
        vec![question::input(a, "question")?.to_string()]
    };
    let env = &call.caps.env;
    let model = match a.str("model")?.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => {
            let p = crate::core::models::resolve_gguf(m, env).ok_or_else(|| {
                a.invalid(
                    "model",
                    format!(
                        "`{m}` is not an installed model: give the path of a .gguf file or a file name in {}",
                        crate::core::state::models_dir(env).display()
                    ),
                )
            })?;
            Some(
                call.caps
                    .sandbox
                    .check_read(&p.to_string_lossy())
                    .map_err(|e| ActionError::failed(format!("the reading model: {e}")))?,
            )
        }
        None => crate::core::models::reading_gguf(env),
    };
    let analyzed: Vec<question::Question> =
        questions.iter().map(|q| question::analyze(q)).collect();
    let results: Vec<Value> = match model {
        // Nothing to read: every question is unanswered.
        _ if items.is_empty() => analyzed
            .iter()
            .map(|q| {
                let mut v = extract::extract(q, &items).to_json(q, &items);
                v["reader"] = json!({"model": Value::Null});
                v
            })
            .collect(),
        None => {
            call.log(
                crate::core::signals::LogLevel::Warn,
                format!(
                    "{}: no local model is installed, so the answer is chosen by rules (answer.extract); install it with `marktoflow model install`",
                    call.action
                ),
            );
            analyzed
                .iter()
                .map(|q| {
                    let mut v = extract::extract(q, &items).to_json(q, &items);
                    v["reader"] = json!({"model": "rules"});
                    v
                })
                .collect()
        }
        Some(path) => {
            let deadline = std::time::Instant::now() + call.timeout.unwrap_or(READ_TIMEOUT);
            let left = || deadline.saturating_duration_since(std::time::Instant::now());
            // Overview questions are answered with cited lines, not read.
            let summaries: Vec<bool> = analyzed.iter().map(read::asks_for_summary).collect();
            let asks = questions
                .iter()
                .zip(&summaries)
                .filter(|(_, s)| !**s)
                .map(|(q, _)| read::ask(q, &items))
                .collect::<Vec<_>>();
            let readings = if asks.is_empty() {
                Vec::new()
            } else {
                call.caps
                    .agents
                    .read_spans(call, &path, asks, left())
                    .await?
            };
            let name = crate::core::models::short_name(&path);
            let mut read = readings.iter();
            analyzed
                .iter()
                .zip(&summaries)
                .map(|(q, summary)| {
                    // One reading was made for each question that is not
                    // an overview, in order.
                    let next = if *summary { None } else { read.next() };
                    let Some(r) = next else {
                        let mut v = read::summary(q, &items);
                        if v["found"] != json!(true) {
                            v["answer"] = json!(not_said(&items, None));
                        }
                        return v;
                    };
                    let (_, fit, _) = read::FITS.for_model(&name);
                    let reading = read::decide(fit, q, &items, r);
                    let mut v = read::to_json(q, &items, &reading, &name);
                    if !reading.found {
                        v["answer"] = json!(not_said(&items, reading.cited.as_deref()));
                    }
                    v
                })
                .collect()
        }
    };
    Ok(if several {
        json!({ "answers": results })
    } else {
        results.into_iter().next().unwrap_or(Value::Null)
    })
}

/// "The notes don't say", with the line closest to an answer.
fn not_said(items: &[(String, evidence::Item, Value)], closest: Option<&str>) -> String {
    let item = closest
        .and_then(|id| items.iter().find(|(i, _, _)| i == id))
        .or(items.first());
    match item {
        Some((_, it, v)) => {
            let u = &it.units[0];
            format!(
                "Your notes don't say. The closest I found: “{}” ({}, line {}).",
                u.text,
                v.get("path").and_then(Value::as_str).unwrap_or(""),
                u.line
            )
        }
        None => "Your notes don't say.".to_string(),
    }
}

fn verify_method(a: &Args) -> Result<Value, ActionError> {
    let q = question::analyze(question::input(a, "question")?);
    let items = evidence::from_json(&evidence_input(a)?);
    // A model step that failed (`on_error: continue`) leaves no reply:
    // that is an answer that fails, not a wrong input.
    let reply = a.get("answer").cloned().unwrap_or(Value::Null);
    let fallback = a.get("fallback").filter(|v| v.is_object());
    if let Some(other) = a.get("fallback").filter(|v| !v.is_object()) {
        return Err(a.invalid(
            "fallback",
            format!(
                "must be an `answer.extract` output, got {}",
                type_name(other)
            ),
        ));
    }
    let claimed = verify::Claimed::read(&reply);
    let mut problems = verify::check(&q, &items, &claimed);
    // The value the rules found for a value question must be the one the
    // answer gives: a neighbouring value of the same line (the target for
    // the balance) passes the check above but is still wrong.
    if let Some(v) = fallback
        .filter(|f| f.get("found") == Some(&Value::Bool(true)))
        .and_then(|f| f.get("value"))
        .and_then(Value::as_str)
    {
        if claimed.found && !claimed.answer.is_empty() && !verify::states_value(&claimed.answer, v)
        {
            problems.push(verify::Problem(format!(
                "it does not give {v}, the value the cited line gives"
            )));
        }
    }
    let problem_text: Vec<String> = problems.iter().map(|p| p.0.clone()).collect();
    if problems.is_empty() && claimed.found {
        let coverage = cited_coverage(&q, &items, &claimed.citations);
        let typed = !q.expect.kinds().is_empty()
            && spans::find(&claimed.answer)
                .iter()
                .any(|s| q.expect.kinds().contains(&s.kind));
        let shape = if typed {
            extract::Shape::Value
        } else if q.expect == question::Expect::List {
            extract::Shape::List
        } else {
            extract::Shape::Line
        };
        // Agreeing with the extractive answer's value counts as its margin.
        let margin = fallback
            .filter(|f| {
                f.get("value")
                    .and_then(Value::as_str)
                    .is_some_and(|v| claimed.answer.contains(v))
            })
            .map_or(0.3, |_| 0.6);
        return Ok(json!({
            "ok": true,
            "problems": [],
            "found": true,
            "answer": claimed.answer,
            "citations": extract::cite(&items, &claimed.citations),
            "confidence": extract::confidence(true, coverage, margin, shape, true),
            "source": "model",
        }));
    }
    if problems.is_empty() {
        // The model says the notes don't say: unless the rules found an
        // answer that stands, so be it.
        if let Some(f) = fallback.filter(|f| f.get("found") == Some(&Value::Bool(true))) {
            return Ok(from_fallback(f, true, &[]));
        }
        return Ok(abstention(&q, &items, fallback));
    }
    match fallback {
        Some(f) => Ok(from_fallback(f, false, &problem_text)),
        None => {
            let mut a = abstention(&q, &items, None);
            a["ok"] = json!(false);
            a["problems"] = json!(problem_text);
            Ok(a)
        }
    }
}

/// The coverage of the question by the best cited unit.
fn cited_coverage(
    q: &question::Question,
    items: &[(String, evidence::Item, Value)],
    ids: &[String],
) -> f64 {
    let mut q = q.clone();
    let all: Vec<evidence::Unit> = items
        .iter()
        .flat_map(|(_, it, _)| it.units.clone())
        .collect();
    evidence::mark_entities(&mut q, &all);
    let weights = evidence::term_weights(&q, &all);
    items
        .iter()
        .filter(|(id, _, _)| ids.iter().any(|c| c.eq_ignore_ascii_case(id)))
        .flat_map(|(_, it, _)| it.units.iter())
        .map(|u| evidence::coverage(&q, &weights, u))
        .fold(0.0, f64::max)
}

fn from_fallback(f: &Value, ok: bool, problems: &[String]) -> Value {
    let mut out = json!({
        "ok": ok,
        "problems": problems,
        "found": f.get("found").cloned().unwrap_or(Value::Bool(false)),
        "answer": f.get("answer").cloned().unwrap_or(Value::Null),
        "citations": f.get("citations").cloned().unwrap_or(json!([])),
        "confidence": f.get("confidence").cloned().unwrap_or(json!(0)),
        "source": if f.get("found") == Some(&Value::Bool(true)) { "extractive" } else { "abstained" },
    });
    if let Some(r) = f.get("reason").filter(|r| !r.is_null()) {
        out["reason"] = r.clone();
    }
    out
}

fn abstention(
    q: &question::Question,
    items: &[(String, evidence::Item, Value)],
    fallback: Option<&Value>,
) -> Value {
    if let Some(f) = fallback.filter(|f| f.get("found") == Some(&Value::Bool(false))) {
        return from_fallback(f, true, &[]);
    }
    let mut e = extract::extract(q, &[]);
    if let Some((id, it, v)) = items.first() {
        let u = &it.units[0];
        e.answer = format!(
            "Your notes don't say. The closest I found: “{}” ({}, line {}).",
            u.text,
            v.get("path").and_then(Value::as_str).unwrap_or(""),
            u.line
        );
        e.citations = vec![id.clone()];
    }
    let mut out = e.to_json(q, items);
    out["ok"] = json!(true);
    out["problems"] = json!([]);
    out["source"] = json!("abstained");
    out
}

use crate::core::catalog::{input, spec, Spec, LIST_OR_MAPPING, STRING};

/// The contracts of `answer.*`.
pub const SPECS: &[Spec] = &[
    spec(
        "answer",
        "extract",
        "Answers a question from `kb.evidence` lines by rules: the value, list or line that answers it, cited, or `found: false`.",
    )
    .inputs(&[
        input("question", STRING, "The question.").required(),
        input("evidence", LIST_OR_MAPPING, "A `kb.evidence` output, or its `evidence` list.").required(),
    ])
    .returns("{found, answer, value, expect, citations: [{id, path, lines, quote}], confidence, coverage, reason}"),
    spec(
        "answer",
        "read",
        "Reads the answer from `kb.evidence` lines with the local model: a span copied verbatim from one line (all the items of a list for a list question), given when the fitted probability that it is right reaches the threshold, else `found: false`. Without an installed model it answers by rules, as `answer.extract`.",
    )
    .inputs(&[
        input("question", STRING, "The question."),
        input("questions", crate::core::catalog::LIST, "Several questions over the same evidence, read in one pass; the result is `{answers: [...]}`."),
        input("evidence", LIST_OR_MAPPING, "A `kb.evidence` output, or its `evidence` list.").required(),
        input("model", STRING, "The GGUF model that reads (a path or a file in the models folder); else MARKTOFLOW_LOCAL_MODEL, the larger qwen2.5-coder-1.5b when installed, or the default."),
    ])
    .returns("{found, answer, value, expect, citations: [{id, path, lines, quote}], confidence, reason, reader: {model, span, probability, threshold, fit, fit_is_the_models, signals}}")
    .traits(crate::core::catalog::WAITS),
    spec(
        "answer",
        "verify",
        "Checks an answer against the evidence it cites: values, names and the question's subject must be in the cited lines; a failing answer is replaced by `fallback` or an honest one.",
    )
    .inputs(&[
        input("question", STRING, "The question.").required(),
        input("evidence", LIST_OR_MAPPING, "A `kb.evidence` output, or its `evidence` list.").required(),
        input("answer", crate::core::catalog::ANY, "The answer: `{answer, found, citations}` (object or JSON text), or plain text.").required(),
        input("fallback", crate::core::catalog::MAPPING, "An `answer.extract` output, used when the answer fails."),
    ])
    .returns("{ok, problems, found, answer, citations: [{id, path, lines, quote}], confidence, source}"),
];
