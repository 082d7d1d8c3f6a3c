//! Provider requests (POST a JSON body, or GET) with a timeout, retries
//! (exponential backoff, full jitter, `Retry-After`) and cancellation.

use super::config::{display_url, Auth, Resolved};
use super::provider::Provider;
use super::wire::{error_message, snippet};
use crate::core::action::{hosts::ModelCall, Call};
use crate::core::net::{
    backoff, describe_reqwest, fmt_duration, retry_after, retry_base_ms, retryable_status,
    sleep_or_cancel, status_text,
};
use crate::core::{error::ActionError, signals::LogLevel};
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// Replaces the key with `[redacted]` wherever it appears.
fn redact(msg: String, auth: &Auth) -> String {
    match auth.secret() {
        Some(k) if k.len() >= 4 && msg.contains(k) => msg.replace(k, "[redacted]"),
        _ => msg,
    }
}

enum Outcome {
    Reply(Value),
    /// Retry may help; carries the log text and a header-requested wait.
    Transient(String, Option<Duration>),
    Fatal(ActionError),
}

/// Posts `body` to the resolved endpoint and returns the decoded JSON reply.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    call: &Call<'_>,
    r: &Resolved,
    body: &Value,
    timeout: Duration,
) -> Result<Value, ActionError> {
    let usage = call.caps.usage.as_ref();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(u) = usage {
        // About four characters a token: what the request itself sends.
        let estimate = body.to_string().len() as u64 / 4;
        u.before(r.provider.id(), model, estimate)
            .await
            .map_err(ActionError::Input)?;
    }
    let started_ms = call.caps.clock.now_ms();
    let reply = exchange_json(client, call, r, &r.endpoint(), Some(body), timeout).await?;
    if let Some(u) = usage {
        let (input_tokens, output_tokens) = tokens_of(&reply);
        u.after(&ModelCall {
            provider: r.provider.id().to_string(),
            model: model.to_string(),
            input_tokens,
            output_tokens,
            started_ms,
            duration_ms: (call.caps.clock.now_ms() - started_ms).max(0) as u64,
        });
    }
    Ok(reply)
}

/// The tokens a provider's reply says the request took, in and out
/// (Anthropic `usage.input_tokens`/`output_tokens`, OpenAI
/// `usage.prompt_tokens`/`completion_tokens`, Ollama `prompt_eval_count`/
/// `eval_count`); 0 where it does not say.
pub(crate) fn tokens_of(reply: &Value) -> (u64, u64) {
    let n = |p: &str| reply.pointer(p).and_then(Value::as_u64);
    let input = n("/usage/input_tokens")
        .or_else(|| n("/usage/prompt_tokens"))
        .or_else(|| n("/prompt_eval_count"))
        .unwrap_or(0);
    let output = n("/usage/output_tokens")
        .or_else(|| n("/usage/completion_tokens"))
        .or_else(|| n("/eval_count"))
        .unwrap_or(0);
    (input, output)
}

/// GETs `url` from the provider (with its key) and returns the JSON reply.
pub(crate) async fn get_json(
    client: &reqwest::Client,
    call: &Call<'_>,
    r: &Resolved,
    url: &str,
    timeout: Duration,
) -> Result<Value, ActionError> {
    exchange_json(client, call, r, url, None, timeout).await
}

/// POSTs `body` (GETs without one) to `url`; the decoded JSON reply.
async fn exchange_json(
    client: &reqwest::Client,
    call: &Call<'_>,
    r: &Resolved,
    url: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Value, ActionError> {
    let shown_url = display_url(url);
    let base_ms = retry_base_ms(&call.caps.env);
    let who = r.provider.id();
    let mut attempt: u32 = 0;
    loop {
        if call.caps.cancel.is_cancelled() {
            return Err(ActionError::Cancelled);
        }
        let mut req = match body {
            Some(b) => client.post(url).json(b),
            None => client.get(url),
        }
        .timeout(timeout);
        match &r.auth {
            Auth::None => {}
            Auth::XApiKey(k) => req = req.header("x-api-key", k),
            Auth::Bearer(k) => req = req.header("authorization", format!("Bearer {k}")),
        }
        if r.provider == Provider::Anthropic {
            req = req.header("anthropic-version", "2023-06-01");
        }
        if let Some(key) = call.idempotency_key {
            req = req.header("idempotency-key", key);
        }
        let exchange = async {
            let resp = req.send().await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = resp.text().await?;
            Ok::<_, reqwest::Error>((status, headers, text))
        };
        let result = tokio::select! {
            biased;
            _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
            res = exchange => res,
        };

        let outcome = match result {
            Ok((status, _, text)) if status.is_success() => match serde_json::from_str(&text) {
                Ok(v) => Outcome::Reply(v),
                Err(e) => Outcome::Fatal(ActionError::failed(format!(
                    "{who} replied with invalid JSON from {shown_url} ({e}): {}",
                    snippet(&text)
                ))),
            },
            Ok((status, headers, text)) => {
                let msg = redact(error_message(&text), &r.auth);
                if retryable_status(status) {
                    Outcome::Transient(
                        format!("HTTP {}: {msg}", status_text(status)),
                        retry_after(&headers),
                    )
                } else {
                    Outcome::Fatal(ActionError::failed(redact(
                        status_failure(r, status, &msg, &shown_url),
                        &r.auth,
                    )))
                }
            }
            Err(e) if e.is_builder() => Outcome::Fatal(ActionError::failed(format!(
                "cannot build the {who} request to {shown_url}: {}",
                describe_reqwest(e)
            ))),
            Err(e) => {
                let timed_out = e.is_timeout();
                let text = describe_reqwest(e);
                let text = if timed_out {
                    format!("no reply within {} ({text})", fmt_duration(timeout))
                } else {
                    text
                };
                Outcome::Transient(redact(text, &r.auth), None)
            }
        };

        match outcome {
            Outcome::Reply(v) => return Ok(v),
            Outcome::Fatal(e) => return Err(e),
            Outcome::Transient(text, wait) => {
                if attempt >= r.max_retries {
                    // Requests: the step's attempts are the engine's to count.
                    let sent = match attempt + 1 {
                        1 => String::new(),
                        n => format!(" after {n} requests"),
                    };
                    return Err(ActionError::retryable(format!(
                        "{who} request to {shown_url} failed{sent}: {text}"
                    )));
                }
                let (delay, why) = match wait {
                    Some(w) => (w, " (Retry-After)"),
                    None => (backoff(base_ms, attempt), ""),
                };
                call.log(
                    LogLevel::Warn,
                    format!(
                        "{who}: {text}; retry {} of {} in {}{why}",
                        attempt + 1,
                        r.max_retries,
                        fmt_duration(delay)
                    ),
                );
                sleep_or_cancel(&call.caps.cancel, delay).await?;
                attempt += 1;
            }
        }
    }
}

/// The message for a non-retryable HTTP status, with a hint on what to fix.
fn status_failure(r: &Resolved, status: StatusCode, msg: &str, url: &str) -> String {
    let who = r.provider.id();
    let mut out = format!("{who} returned HTTP {}: {msg}", status_text(status));
    let hint = match status.as_u16() {
        401 => Some(match r.auth {
            Auth::None => format!(
                "the server at {url} wants an API key: set {}",
                r.provider.key_var()
            ),
            _ => format!(
                "the API key was rejected: check {}{}",
                r.key_source,
                if r.provider == Provider::Anthropic && r.is_default_base() {
                    " (or point ANTHROPIC_BASE_URL at your proxy)"
                } else {
                    ""
                }
            ),
        }),
        403 => Some(format!(
            "the key from {} is not allowed to use model `{}` or this endpoint",
            r.key_source, r.model
        )),
        404 => Some(match r.provider {
            Provider::Anthropic => format!(
                "check the model `{}` ({}) and the endpoint {url}",
                r.model, r.model_source
            ),
            Provider::OpenAi => format!(
                "check the model `{}` ({}) and the endpoint {url} (OpenAI-compatible base URLs usually end in /v1)",
                r.model, r.model_source
            ),
            Provider::Ollama => format!(
                "check the model `{}` ({}): run `ollama pull {}`, and the host {url}",
                r.model, r.model_source, r.model
            ),
            Provider::Local => format!("check the model `{}`", r.model),
        }),
        _ => None,
    };
    if let Some(h) = hint {
        out.push_str(" — ");
        out.push_str(&h);
    }
    out
}
