//! `kb.evidence`: the lines of the notes a search found that bear on the
//! question, with line numbers in the files as they are now (see
//! [`crate::retrieval::answer::evidence`] for how they are chosen).

use super::{dense, dense_setting, Dense};
use crate::core::args::Args;
use crate::core::{action::Call, error::ActionError};
use crate::retrieval::answer::{evidence, question};
use crate::retrieval::hits::hits_input;
use serde_json::{json, Value};
use std::path::Path;

/// Notes larger than this are read only this far: evidence is for
/// questions about notes, not for whole books.
const MAX_NOTE_BYTES: u64 = 1 << 20;

/// Lines scored by meaning when a model is at hand (the best by words).
const DENSE_UNITS: usize = 64;

pub async fn evidence_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let q_text = question::input(a, "question")?.to_string();
    let mut q = question::analyze(&q_text);
    let hits = hits_input(a, "hits")?;
    let max_notes = count(a, "max_notes")?;
    let limits = evidence::Limits {
        budget_tokens: count(a, "budget_tokens")?,
        max_items: count(a, "max_items")?,
        ..Default::default()
    };
    let tenant = super::inputs::tenant(a)?;
    let kb = a.required_str("kb")?.to_string();
    let sb = &call.caps.sandbox;
    let root = sb
        .check_read(&kb)
        .map_err(|e| ActionError::failed(e.to_string()))?;
    let mut notes: Vec<evidence::Note> = Vec::new();
    for h in &hits {
        if notes.len() >= max_notes {
            break;
        }
        let Some(path) = h.get("path").and_then(Value::as_str) else {
            continue;
        };
        if notes.iter().any(|n| n.path == path) {
            continue;
        }
        let Some(text) = read_note(call, &root, path)? else {
            continue;
        };
        // Whose the note is now, not when the search's index saw it: a
        // note given to another tenant since is not read.
        let (meta, _) = crate::retrieval::frontmatter::split(&text);
        let owner = crate::retrieval::frontmatter::tenant_of(&meta);
        if !crate::retrieval::frontmatter::sees(&tenant, &owner) {
            continue;
        }
        let title = h
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                path.rsplit('/')
                    .next()
                    .unwrap_or(path)
                    .trim_end_matches(".md")
                    .to_string()
            });
        notes.push(evidence::Note {
            path: path.to_string(),
            title,
            text,
            rank: notes.len(),
        });
    }
    let mut units: Vec<evidence::Unit> = Vec::new();
    for (i, n) in notes.iter().enumerate() {
        let first_block = units.last().map_or(0, |u| u.block + 1);
        units.extend(evidence::units_of(i, n, first_block));
    }
    evidence::mark_entities(&mut q, &units);
    evidence::score(&q, &mut units, None);
    if let Some(model) = dense_model(call, a)? {
        let sims = similarities(call, model, &q_text, &units).await?;
        evidence::score(&q, &mut units, Some(&sims));
    }
    let items = evidence::select(&q, &units, limits);
    let list = evidence::to_json(&items, &notes);
    let threshold = a.number("min_score")?;
    let list: Vec<Value> = list
        .into_iter()
        .filter(|v| v["score"].as_f64().unwrap_or(0.0) >= threshold)
        .collect();
    Ok(json!({
        "question": q.to_json(),
        "found": !list.is_empty(),
        "count": list.len(),
        "text": evidence::prompt_text(&list),
        "notes": notes.iter().map(|n| n.path.clone()).collect::<Vec<_>>(),
        "evidence": list,
    }))
}

/// A count from 1 to 10,000: given, or the declared default.
fn count(a: &Args, field: &str) -> Result<usize, ActionError> {
    a.count(field, 1, 10_000)?.ok_or_else(|| a.missing(field))
}

/// A note's text, when it is a file inside the knowledge base the run may
/// read; `None` for one that is gone (the index is a moment behind).
fn read_note(call: &Call<'_>, root: &Path, rel: &str) -> Result<Option<String>, ActionError> {
    if rel.split('/').any(|p| p == "..") || rel.starts_with('/') {
        return Err(ActionError::failed(format!(
            "hit path `{rel}` is not inside the knowledge base"
        )));
    }
    let full = root.join(rel);
    let real = call
        .caps
        .sandbox
        .check_read(&full.to_string_lossy())
        .map_err(|e| ActionError::failed(e.to_string()))?;
    if !real.starts_with(root) {
        return Err(ActionError::failed(format!(
            "hit path `{rel}` is not inside the knowledge base"
        )));
    }
    let file = match std::fs::File::open(&real) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ActionError::failed(format!("cannot read `{rel}`: {e}"))),
    };
    let mut buf = Vec::new();
    use std::io::Read;
    file.take(MAX_NOTE_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| ActionError::failed(format!("cannot read `{rel}`: {e}")))?;
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

/// `dense: auto` (the default here) uses the model when one is configured.
fn dense_model(call: &Call<'_>, a: &Args) -> Result<Option<std::path::PathBuf>, ActionError> {
    match dense_setting(a)? {
        Dense::Off => Ok(None),
        Dense::On => Ok(Some(dense::model_path(call, a)?)),
        Dense::Auto => match dense::configured(call, a)? {
            Ok(_) => Ok(Some(dense::model_path(call, a)?)),
            Err(_) => Ok(None),
        },
    }
}

/// Cosine similarity of the question to the best units by words (others
/// get 0), computed off the async threads.
async fn similarities(
    call: &Call<'_>,
    model: std::path::PathBuf,
    question: &str,
    units: &[evidence::Unit],
) -> Result<Vec<f32>, ActionError> {
    let mut order = evidence::best_first(units);
    order.truncate(DENSE_UNITS);
    let mut texts: Vec<String> = vec![question.to_string()];
    texts.extend(order.iter().map(|i| {
        let u = &units[*i];
        format!("{}: {}", u.heading_path.join(" › "), u.text)
    }));
    let caches = call.caps.caches.clone();
    let vectors = crate::core::blame::spawn_blocking(move || {
        let e = crate::retrieval::embed::load_cached(&caches, &model)?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        e.embed(&refs)
    })
    .await
    .map_err(|e| ActionError::failed(format!("embedding stopped: {e}")))?
    .map_err(|e| ActionError::failed(e.to_string()))?;
    let mut sims = vec![0.0f32; units.len()];
    let qv = &vectors[0];
    for (k, i) in order.iter().enumerate() {
        sims[*i] = cosine(qv, &vectors[k + 1]);
    }
    Ok(sims)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}
