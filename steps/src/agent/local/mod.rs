//! The `local` provider: a GGUF chat model run in this process by llama.cpp.
//!
//! One model per process ([`Caches`](crate::core::cache::Caches) keeps one),
//! loaded on first use and memory-mapped; each call renders the model's chat
//! template, waits for one of a bounded number of generation slots (queued
//! beyond that), and generates off the async threads until the reply ends,
//! `max_tokens`, the step's time limit or cancellation.

pub mod chat;
pub mod engine;
pub mod span;

use super::config::Resolved;
use super::wire::{text_of, Prompt, Reply};
use crate::core::{action::Call, error::ActionError, signals::LogLevel};
use engine::{Finish, GenRequest, Halt, LocalError, LocalModel};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Reply length when neither the step nor the tool sets `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// A loaded model and the slots its generations take.
pub struct Loaded {
    pub model: LocalModel,
    slots: Arc<Semaphore>,
}

/// Generations at once: each already uses every core, so more would only
/// share them; one per 8 cores, at least one.
fn slot_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() / 8)
        .unwrap_or(1)
        .max(1)
}

/// The model at `path`, loaded once per [`Caches`](crate::core::cache::Caches)
/// (one at a time: loading another drops the previous).
pub fn load_cached(
    caches: &crate::core::cache::Caches,
    path: &Path,
) -> Result<Arc<Loaded>, LocalError> {
    type Models = HashMap<PathBuf, Arc<Loaded>>;
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(m) = caches.with(|c: &mut Models| c.get(&key).cloned()) {
        return Ok(m);
    }
    // llama.cpp maps the weights.
    crate::core::mapped::guard();
    let loaded = Arc::new(Loaded {
        model: LocalModel::load(&key)?,
        slots: Arc::new(Semaphore::new(slot_count())),
    });
    Ok(caches.with(|c: &mut Models| {
        let m = c.entry(key.clone()).or_insert(loaded).clone();
        crate::core::cache::bound(c, &key, 1);
        m
    }))
}

/// Runs one agent call on the local model.
pub(crate) async fn complete(
    call: &Call<'_>,
    r: &Resolved,
    prompt: &Prompt,
    timeout: Duration,
) -> Result<Reply, ActionError> {
    let path = r
        .local_model
        .clone()
        .ok_or_else(|| ActionError::failed("no local model resolved".to_string()))?;
    let path = if r.local_named_by_workflow {
        call.caps
            .sandbox
            .check_read(&path.to_string_lossy())
            .map_err(|e| ActionError::failed(format!("the local model: {e}")))?
    } else {
        path
    };
    let started = Instant::now();
    let deadline = started + timeout;
    let loaded = load(call, call.caps.caches.clone(), path.clone()).await?;
    call.log(
        LogLevel::Debug,
        format!(
            "{}: local model {} ready in {:.3}s (loaded in {:.3}s)",
            call.action,
            r.model,
            started.elapsed().as_secs_f64(),
            loaded.model.load_time.as_secs_f64()
        ),
    );

    let mut messages = Vec::new();
    let mut system: Vec<String> = prompt.system.iter().cloned().collect();
    if let Some(f) = &prompt.format {
        system.push(f.instruction());
    }
    if !system.is_empty() {
        messages.push(chat::ChatMessage {
            role: "system".into(),
            content: system.join("\n\n"),
        });
    }
    for m in &prompt.messages {
        messages.push(chat::ChatMessage {
            role: m.role.clone(),
            content: text_of(&m.content),
        });
    }
    let today = call.caps.clock.now().date_naive();
    let model = &loaded.model;
    let text = chat::render(
        model.chat_template.as_deref(),
        &messages,
        &model.bos,
        &model.eos,
        today,
    )
    .map_err(ActionError::failed)?;
    let grammar = match &prompt.format {
        None => None,
        Some(f) => Some(
            LocalModel::grammar_for_schema(&f.schema())
                .map_err(|e| ActionError::Input(format!("input `output_schema`: {e}")))?,
        ),
    };
    let req = GenRequest {
        prompt: text,
        max_tokens: prompt
            .max_tokens
            .or(r.max_tokens)
            .map(|n| n.min(u64::from(u32::MAX)) as u32)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        temperature: prompt.temperature.or(r.temperature).unwrap_or(0.0) as f32,
        seed: prompt.seed.unwrap_or(0) as u32,
        grammar,
    };

    let usage = call.caps.usage.as_ref();
    if let Some(u) = usage {
        // About four characters a token, as for a provider's request.
        let estimate = req.prompt.len() as u64 / 4;
        u.before("local", &r.model, estimate)
            .await
            .map_err(ActionError::Input)?;
    }
    let started_ms = call.caps.clock.now_ms();
    let generation = in_slot(call, &loaded, deadline, timeout, move |m, halt| {
        m.generate(&req, halt)
    })
    .await?;
    if let Some(u) = usage {
        u.after(&crate::core::action::hosts::ModelCall {
            provider: "local".into(),
            model: r.model.clone(),
            input_tokens: generation.prompt_tokens as u64,
            output_tokens: generation.reply_tokens as u64,
            started_ms,
            duration_ms: (call.caps.clock.now_ms() - started_ms).max(0) as u64,
        });
    }
    call.log(
        LogLevel::Debug,
        format!(
            "{}: local {} prompt tokens in {:.2}s, {} reply tokens in {:.2}s",
            call.action,
            generation.prompt_tokens,
            generation.prompt_time.as_secs_f64(),
            generation.reply_tokens,
            generation.reply_time.as_secs_f64()
        ),
    );
    let warning = match generation.finish {
        Finish::Length => Some(
            "the reply was cut off at max_tokens; raise `max_tokens` for a complete answer".into(),
        ),
        Finish::End if generation.text.trim().is_empty() => Some("the reply has no text".into()),
        Finish::End => None,
    };
    Ok(Reply {
        text: generation.text,
        warning,
    })
}

fn timed_out(limit: Duration) -> ActionError {
    ActionError::failed(format!(
        "the local model gave no complete reply within {}",
        crate::core::net::fmt_duration(limit)
    ))
}

use crate::core::reading::{SpanAsk, SPAN_SLOT};

/// Reads `asks` on the local model at `path` (loaded once per process), in
/// one generation slot, within `timeout`; asks that share their beginning
/// share its decoding.
pub async fn read_spans(
    call: &Call<'_>,
    path: &Path,
    asks: Vec<SpanAsk>,
    timeout: Duration,
) -> Result<Vec<span::SpanReading>, ActionError> {
    let deadline = Instant::now() + timeout;
    let loaded = load(call, call.caps.caches.clone(), path.to_path_buf()).await?;
    let today = call.caps.clock.now().date_naive();
    let model = &loaded.model;
    let mut prompts = Vec::with_capacity(asks.len());
    for a in asks {
        let text = chat::render(
            model.chat_template.as_deref(),
            &chat::ChatMessage::pair(&a.system, &a.user),
            &model.bos,
            &model.eos,
            today,
        )
        .map_err(ActionError::failed)?;
        let judge = match a.judge {
            None => None,
            Some(j) => {
                let text = chat::render(
                    model.chat_template.as_deref(),
                    &chat::ChatMessage::pair(&j.system, &j.user),
                    &model.bos,
                    &model.eos,
                    today,
                )
                .map_err(ActionError::failed)?
                    + &j.reply_prefix;
                let (before, after) = text.split_once(SPAN_SLOT).ok_or_else(|| {
                    ActionError::failed("the judgement's messages have no place for the span")
                })?;
                Some(span::Judge {
                    before: before.to_string(),
                    after: after.to_string(),
                    choices: j.choices,
                })
            }
        };
        prompts.push(span::SpanPrompt {
            prompt: text + &a.reply_prefix,
            sources: a.sources,
            none_word: a.none_word,
            max_tokens: a.max_tokens,
            judge,
        });
    }
    in_slot(call, &loaded, deadline, timeout, move |m, halt| {
        m.read_spans(&prompts, halt)
    })
    .await
}

/// The model at `path`, loaded off the async threads (cancellable).
async fn load(
    call: &Call<'_>,
    caches: Arc<crate::core::cache::Caches>,
    path: PathBuf,
) -> Result<Arc<Loaded>, ActionError> {
    let loading = crate::core::blame::spawn_blocking(move || load_cached(&caches, &path));
    tokio::select! {
        biased;
        _ = call.caps.cancel.cancelled() => Err(ActionError::Cancelled),
        r = loading => r
            .map_err(|e| ActionError::failed(format!("loading the local model stopped: {e}")))?
            .map_err(|e| ActionError::failed(e.to_string())),
    }
}

/// Runs `work` on the loaded model in one of its generation slots, off the
/// async threads; waiting for the slot counts against the time limit, and
/// `work` is told to stop on cancellation or at `deadline`.
async fn in_slot<T: Send + 'static>(
    call: &Call<'_>,
    loaded: &Arc<Loaded>,
    deadline: Instant,
    timeout: Duration,
    work: impl FnOnce(&LocalModel, &dyn Fn() -> Option<Halt>) -> Result<T, LocalError> + Send + 'static,
) -> Result<T, ActionError> {
    let slots = loaded.slots.clone();
    let permit = tokio::select! {
        biased;
        _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
        _ = tokio::time::sleep_until(deadline.into()) => return Err(timed_out(timeout)),
        p = slots.acquire_owned() => p.map_err(|e| ActionError::failed(e.to_string()))?,
    };
    let cancel = call.caps.cancel.clone();
    let model = loaded.clone();
    let job = crate::core::blame::spawn_blocking(move || {
        let _permit = permit;
        let halt = || {
            if cancel.is_cancelled() {
                Some(Halt::Cancelled)
            } else if Instant::now() >= deadline {
                Some(Halt::TimedOut)
            } else {
                None
            }
        };
        work(&model.model, &halt)
    });
    match job.await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(LocalError::Cancelled)) => Err(ActionError::Cancelled),
        Ok(Err(LocalError::TimedOut)) => Err(timed_out(timeout)),
        Ok(Err(e)) => Err(ActionError::failed(e.to_string())),
        Err(e) => Err(ActionError::failed(format!("the local model stopped: {e}"))),
    }
}
