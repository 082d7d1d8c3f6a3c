//! POST a JSON body with a timeout, retries (exponential backoff, full jitter,
//! `Retry-After`) and cancellation.

use super::config::{display_url, Auth, Provider, Resolved};
use super::wire::{error_message, snippet};
use crate::action::{ActionError, Call, LogLevel};
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// Longest wait taken from a `Retry-After` header.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest computed backoff before jitter.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Default backoff base; `MARKTOFLOW_RETRY_BASE_MS` overrides it.
const DEFAULT_BASE_MS: u64 = 1000;

/// Statuses worth retrying.
pub(crate) fn retryable_status(s: StatusCode) -> bool {
    matches!(s.as_u16(), 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait a `Retry-After` (seconds or HTTP date) or `retry-after-ms` header asks for, capped.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let wait = if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Duration::from_secs_f64((ms / 1000.0).max(0.0))
    } else {
        let v = get("retry-after")?;
        if let Ok(secs) = v.parse::<f64>() {
            if !secs.is_finite() {
                return None;
            }
            Duration::from_secs_f64(secs.clamp(0.0, MAX_RETRY_AFTER.as_secs_f64()))
        } else {
            let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
            let ms = (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
            Duration::from_millis(ms.max(0) as u64)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Full-jitter backoff before retry number `attempt` (0-based): uniform in
/// `[0, min(cap, base·2^attempt)]`.
pub(crate) fn backoff(base_ms: u64, attempt: u32) -> Duration {
    let cap = (MAX_BACKOFF.as_millis() as u64).max(base_ms);
    let ceiling = base_ms.saturating_mul(1u64 << attempt.min(20)).min(cap);
    Duration::from_millis(fastrand::u64(0..=ceiling))
}

pub(crate) fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// `429 Too Many Requests`, `529 Overloaded`, `599`.
pub(crate) fn status_text(s: StatusCode) -> String {
    match (s.as_u16(), s.canonical_reason()) {
        (_, Some(reason)) => format!("{} {reason}", s.as_u16()),
        (529, None) => "529 Overloaded".to_string(),
        (code, None) => code.to_string(),
    }
}

/// Replaces the key with `[redacted]` wherever it appears.
fn redact(msg: String, auth: &Auth) -> String {
    match auth.secret() {
        Some(k) if k.len() >= 4 && msg.contains(k) => msg.replace(k, "[redacted]"),
        _ => msg,
    }
}

/// A transport error with its causes, without the URL.
pub(crate) fn describe_reqwest(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    if timeout && !parts.iter().any(|p| p.contains("timed out")) {
        parts.push("timed out".into());
    }
    parts.join(": ")
}

pub(crate) async fn sleep_or_cancel(call: &Call<'_>, d: Duration) -> Result<(), ActionError> {
    tokio::select! {
        biased;
        _ = call.caps.cancel.cancelled() => Err(ActionError::Cancelled),
        _ = tokio::time::sleep(d) => Ok(()),
    }
}

enum Outcome {
    Reply(Value),
    /// Retry may help; carries the log text and a header-requested wait.
    Transient(String, Option<Duration>),
    Fatal(ActionError),
}

/// The backoff base for retries: `MARKTOFLOW_RETRY_BASE_MS` (tests shorten it) or 1 s.
pub(crate) fn retry_base_ms(call: &Call<'_>) -> u64 {
    call.caps
        .env
        .get("MARKTOFLOW_RETRY_BASE_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_BASE_MS)
}

/// Posts `body` to the resolved endpoint and returns the decoded JSON reply.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    call: &Call<'_>,
    r: &Resolved,
    body: &Value,
    timeout: Duration,
) -> Result<Value, ActionError> {
    let url = r.endpoint();
    let shown_url = display_url(&url);
    let base_ms = retry_base_ms(call);
    let who = r.provider.id();
    let mut attempt: u32 = 0;
    loop {
        if call.caps.cancel.is_cancelled() {
            return Err(ActionError::Cancelled);
        }
        let mut req = client.post(&url).timeout(timeout).json(body);
        match &r.auth {
            Auth::None => {}
            Auth::XApiKey(k) => req = req.header("x-api-key", k),
            Auth::Bearer(k) => req = req.header("authorization", format!("Bearer {k}")),
        }
        if r.provider == Provider::Anthropic {
            req = req.header("anthropic-version", "2023-06-01");
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
                    let attempts = attempt + 1;
                    let plural = if attempts == 1 { "" } else { "s" };
                    return Err(ActionError::retryable(format!(
                        "{who} request to {shown_url} failed after {attempts} attempt{plural}: {text}"
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
                sleep_or_cancel(call, delay).await?;
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
        }),
        _ => None,
    };
    if let Some(h) = hint {
        out.push_str(" — ");
        out.push_str(&h);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", HeaderValue::from_static("100000"));
        assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc2822();
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        let d = retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(25) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn backoff_is_bounded() {
        for attempt in 0..40 {
            let d = backoff(1000, attempt);
            assert!(d <= Duration::from_millis((1000u64 << attempt.min(5)).min(30_000)));
        }
        assert_eq!(backoff(0, 3), Duration::ZERO);
    }

    #[test]
    fn retryable_set() {
        for s in [429, 500, 502, 503, 504, 529] {
            assert!(retryable_status(StatusCode::from_u16(s).unwrap()));
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!retryable_status(StatusCode::from_u16(s).unwrap()));
        }
    }
}
