//! Calling out over HTTP, shared by every action that does (`http.*`, the
//! LLM providers, MCP servers): the client, the allowed hosts, which
//! statuses to retry, how long to wait (the one backoff, `Retry-After`),
//! and how to describe a transport error.

use crate::core::error::ActionError;
use crate::core::signals::Cancel;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::sync::Once;
use std::time::Duration;

/// Longest wait taken from a `Retry-After` header.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest computed backoff, before its ±10 %.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Default backoff base; `MARKTOFLOW_RETRY_BASE_MS` overrides it.
const DEFAULT_BASE_MS: u64 = 1000;

/// Statuses worth retrying.
pub fn retryable_status(s: StatusCode) -> bool {
    matches!(s.as_u16(), 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait a `Retry-After` (seconds or HTTP date) or `retry-after-ms` header asks for, capped.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let wait = if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if !ms.is_finite() {
            return None;
        }
        Duration::from_secs_f64((ms / 1000.0).clamp(0.0, MAX_RETRY_AFTER.as_secs_f64()))
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

/// The wait before retry number `attempt + 1` of a request: the one
/// [`crate::core::time::backoff`], doubling from `base_ms`.
pub fn backoff(base_ms: u64, attempt: u32) -> Duration {
    crate::core::time::backoff(Duration::from_millis(base_ms), MAX_BACKOFF, true, attempt)
}

pub use crate::core::time::human as fmt_duration;

/// `429 Too Many Requests`, `529 Overloaded`, `599`.
pub fn status_text(s: StatusCode) -> String {
    match (s.as_u16(), s.canonical_reason()) {
        (_, Some(reason)) => format!("{} {reason}", s.as_u16()),
        (529, None) => "529 Overloaded".to_string(),
        (code, None) => code.to_string(),
    }
}

/// A transport error with its causes, without the URL.
pub fn describe_reqwest(e: reqwest::Error) -> String {
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

/// Waits `d` unless `cancel` fires first.
pub async fn sleep_or_cancel(cancel: &Cancel, d: Duration) -> Result<(), ActionError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ActionError::Cancelled),
        _ = tokio::time::sleep(d) => Ok(()),
    }
}

/// The backoff base for retries: `MARKTOFLOW_RETRY_BASE_MS` (tests shorten it) or 1 s.
pub fn retry_base_ms(env: &BTreeMap<String, String>) -> u64 {
    env.get("MARKTOFLOW_RETRY_BASE_MS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_BASE_MS)
}

/// A client builder with our user agent and the TLS crypto provider
/// installed: every HTTP client (`http.*`, LLM providers, MCP servers) starts here.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_tls();
    reqwest::Client::builder().user_agent(concat!("marktoflow/", env!("CARGO_PKG_VERSION")))
}

/// Installs the process's TLS crypto provider (once), which every HTTP
/// client needs before it is built: ours, and the trace exporter's.
pub fn install_tls() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Err only when another provider is installed already, which serves too.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `host` or `host:port`, matched against `example.com`, `*.example.com`
/// (subdomains) and `host:port` entries.
pub fn host_allowed(url: &reqwest::Url, allowed: &[String]) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = url.port_or_known_default();
    allowed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        let (h, p) = match entry.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() && !h.is_empty() => {
                (h.to_string(), p.parse().ok())
            }
            _ => (entry.clone(), None),
        };
        let host_ok = match h.strip_prefix("*.") {
            Some(suffix) => host.ends_with(&format!(".{suffix}")),
            None => host == h,
        };
        host_ok && p.is_none_or(|p| Some(p) == port)
    })
}

/// Refuses `url` when its host is not among `allowed` (None allows any),
/// naming the `action` that tried.
pub fn check_host(
    url: &reqwest::Url,
    allowed: Option<&[String]>,
    action: &str,
) -> Result<(), ActionError> {
    match allowed {
        Some(allowed) if !host_allowed(url, allowed) => Err(ActionError::Input(format!(
            "`{action}`: the host `{}` is not allowed (allowed: {}); add it to `permissions.hosts` or pass `--allow-host`",
            url.host_str().unwrap_or(""),
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
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
        // Waits no clock can hold are ignored, never a panic.
        for v in ["inf", "NaN", "1e300"] {
            let mut h = HeaderMap::new();
            h.insert("retry-after-ms", HeaderValue::from_str(v).unwrap());
            assert!(retry_after(&h).is_none_or(|d| d <= MAX_RETRY_AFTER), "{v}");
            let mut h = HeaderMap::new();
            h.insert("retry-after", HeaderValue::from_str(v).unwrap());
            assert!(retry_after(&h).is_none_or(|d| d <= MAX_RETRY_AFTER), "{v}");
        }
    }

    #[test]
    fn backoff_is_bounded() {
        for attempt in 0..40 {
            let d = backoff(1000, attempt);
            let want = Duration::from_millis((1000u64 << attempt.min(5)).min(30_000));
            assert!(d >= want.mul_f64(0.9) && d <= want.mul_f64(1.1));
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

    #[test]
    fn hosts() {
        let allow = |u: &str, list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            host_allowed(&reqwest::Url::parse(u).unwrap(), &list)
        };
        assert!(allow("https://api.example.com/x", &["api.example.com"]));
        assert!(allow("https://a.b.example.com/", &["*.example.com"]));
        assert!(!allow("https://example.com/", &["*.example.com"]));
        assert!(!allow("https://evil-example.com/", &["*.example.com"]));
        assert!(allow("http://127.0.0.1:8080/", &["127.0.0.1:8080"]));
        assert!(!allow("http://127.0.0.1:9090/", &["127.0.0.1:8080"]));
        assert!(allow("http://127.0.0.1:9090/", &["127.0.0.1"]));
        assert!(!allow(
            "https://api.example.com.evil.io/",
            &["api.example.com"]
        ));
    }
}
