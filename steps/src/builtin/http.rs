//! `http.request` and `http.get/post/put/patch/delete`.
//!
//! Retries (default 3, exponential backoff with jitter, `Retry-After`
//! honoured) happen here, like the agent's: on connection errors, timeouts,
//! 429 and 5xx. Hosts can be limited by the workflow's `permissions.hosts` or
//! `--allow-host`.

use super::{display, Args};
use crate::core::net::{
    backoff, describe_reqwest, fmt_duration, retry_after, retry_base_ms, retryable_status,
    sleep_or_cancel, status_text,
};
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
    signals::LogLevel,
};
use async_trait::async_trait;
use reqwest::Method;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;
use std::time::Duration;

pub struct HttpAction;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bodies larger than this are refused rather than held in memory.
const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        crate::core::net::client_builder()
            // Redirects are followed by `send`, each hop checked against
            // the allowed hosts.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default()
    })
}

#[async_trait]
impl Action for HttpAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let a = Args::of(SPECS, call, &inputs)?;
        let method = match call.method {
            "request" => a.text("method")?.to_ascii_uppercase(),
            m => m.to_ascii_uppercase(),
        };
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| a.invalid("method", format!("`{method}` is not an HTTP method")))?;
        let options = call.tool.map(|t| &t.options);
        let url = build_url(&a, options)?;
        call.check_host(&url)?;

        let mut headers = reqwest::header::HeaderMap::new();
        let tool_headers = options.and_then(|o| o.get("headers"));
        for source in [tool_headers, a.get("headers")].into_iter().flatten() {
            let Value::Object(m) = source else {
                return Err(a.invalid("headers", "expected a mapping of header names to values"));
            };
            for (k, v) in m {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| a.invalid("headers", format!("`{k}` is not a header name")))?;
                let value = reqwest::header::HeaderValue::from_str(&display(v)).map_err(|_| {
                    a.invalid(
                        "headers",
                        format!("the value of `{k}` is not valid in a header"),
                    )
                })?;
                headers.insert(name, value);
            }
        }
        // The run's key for this call, unless the workflow sets its own.
        if let Some(key) = call.idempotency_key {
            if !headers.contains_key("idempotency-key") {
                if let Ok(v) = reqwest::header::HeaderValue::from_str(key) {
                    headers.insert("idempotency-key", v);
                }
            }
        }
        // The step's place in the run's trace, unless the workflow sets one.
        if let Some(tp) = call.caps.traceparent() {
            if !headers.contains_key("traceparent") {
                if let Ok(v) = reqwest::header::HeaderValue::from_str(&tp) {
                    headers.insert("traceparent", v);
                }
            }
        }
        // `json:` is always JSON; `body:`/`data:` is JSON unless it is a string.
        let body: Option<(Vec<u8>, &str)> = match (a.get("json"), a.get("body")) {
            (Some(j), _) => Some((j.to_string().into_bytes(), "application/json")),
            (None, Some(Value::String(s))) => {
                Some((s.clone().into_bytes(), "text/plain; charset=utf-8"))
            }
            (None, Some(v)) => Some((v.to_string().into_bytes(), "application/json")),
            (None, None) => None,
        };
        let timeout = match a
            .get("timeout")
            .or_else(|| options.and_then(|o| o.get("timeout")))
        {
            Some(v) => super::parse_duration(v).map_err(|e| a.invalid("timeout", e))?,
            None => call.timeout.unwrap_or(DEFAULT_TIMEOUT),
        };
        let max_retries = match a.number("retries")? {
            n if (0.0..=10.0).contains(&n) => n as u32,
            _ => return Err(a.invalid("retries", "use 0 to 10")),
        };
        let fail_on_error = a.bool("fail_on_error")?;
        let response_type = a.chosen("response_type")?;
        let shown = shown_url(&url);
        let base_ms = retry_base_ms(&call.caps.env);

        let mut attempt = 0u32;
        loop {
            let exchange = send(call, &method, &url, &headers, body.as_ref(), timeout);
            let result = tokio::select! {
                biased;
                _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
                r = exchange => r?,
            };
            let (transient, wait) = match result {
                Ok((status, resp_headers, bytes)) => {
                    let Some(bytes) = bytes else {
                        return Err(ActionError::failed(format!(
                            "{method} {shown}: the response is larger than {} MiB",
                            MAX_RESPONSE_BYTES / (1024 * 1024)
                        )));
                    };
                    let out = response_value(status, &resp_headers, &bytes, response_type)
                        .map_err(|e| ActionError::failed(format!("{method} {shown}: {e}")))?;
                    if status.is_success() || !fail_on_error {
                        return Ok(out);
                    }
                    let msg = format!(
                        "{method} {shown} returned HTTP {}: {}",
                        status_text(status),
                        snippet(&out["body"])
                    );
                    if !retryable_status(status) {
                        return Err(ActionError::failed(msg));
                    }
                    (msg, retry_after(&resp_headers))
                }
                Err(e) if e.is_builder() => {
                    return Err(ActionError::failed(format!(
                        "cannot build the request {method} {shown}: {}",
                        describe_reqwest(e)
                    )))
                }
                Err(e) => {
                    let text = if e.is_timeout() {
                        format!("no response within {}", fmt_duration(timeout))
                    } else {
                        describe_reqwest(e)
                    };
                    (format!("{method} {shown}: {text}"), None)
                }
            };
            if attempt >= max_retries {
                // Requests, not attempts: a step's attempts (its
                // `max_retries`) are counted by the engine, as `show` does.
                let n = attempt + 1;
                return Err(ActionError::failed(if n == 1 {
                    transient
                } else {
                    format!("{transient} (after {n} requests)")
                }));
            }
            let delay = wait.unwrap_or_else(|| backoff(base_ms, attempt));
            call.log(
                LogLevel::Warn,
                format!(
                    "{transient}; retry {} of {max_retries} in {}",
                    attempt + 1,
                    fmt_duration(delay)
                ),
            );
            sleep_or_cancel(&call.caps.cancel, delay).await?;
            attempt += 1;
        }
    }
}

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

type Exchange = (
    reqwest::StatusCode,
    reqwest::header::HeaderMap,
    Option<Vec<u8>>,
);

/// One request, following redirects as browsers do (303, and 301/302 of a
/// non-GET, become GET without a body; 307/308 keep both), each hop's host
/// checked against the allowed hosts before it is contacted. The outer
/// error refuses the request; the inner one is the transport's.
pub(crate) async fn send(
    call: &Call<'_>,
    method: &Method,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    body: Option<&(Vec<u8>, &str)>,
    timeout: Duration,
) -> Result<Result<Exchange, reqwest::Error>, ActionError> {
    let (mut method, mut url, mut headers, mut body) =
        (method.clone(), url.clone(), headers.clone(), body.cloned());
    for _ in 0..=MAX_REDIRECTS {
        let mut req = client()
            .request(method.clone(), url.clone())
            .headers(headers.clone())
            .timeout(timeout);
        if let Some((bytes, ctype)) = &body {
            if !headers.contains_key(reqwest::header::CONTENT_TYPE) {
                req = req.header(reqwest::header::CONTENT_TYPE, *ctype);
            }
            req = req.body(bytes.clone());
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let status = resp.status();
        let next = status
            .is_redirection()
            .then(|| resp.headers().get(reqwest::header::LOCATION))
            .flatten()
            .and_then(|l| l.to_str().ok())
            .and_then(|l| url.join(l).ok());
        let Some(next) = next else {
            let resp_headers = resp.headers().clone();
            return Ok(read_limited(resp).await.map(|b| (status, resp_headers, b)));
        };
        if !matches!(next.scheme(), "http" | "https") {
            return Err(ActionError::failed(format!(
                "{method} {}: redirected to `{}`, which is not http or https",
                shown_url(&url),
                shown_url(&next)
            )));
        }
        call.check_host(&next).map_err(|e| {
            ActionError::failed(format!(
                "{method} {}: redirected off the allowed hosts: {e}",
                shown_url(&url)
            ))
        })?;
        if next.origin() != url.origin() {
            // Credentials are for the origin they were written for, and a
            // header may be one under any name (`X-Api-Key`): only those
            // that describe the request itself follow a redirect elsewhere.
            const KEPT: &[reqwest::header::HeaderName] = &[
                reqwest::header::ACCEPT,
                reqwest::header::ACCEPT_LANGUAGE,
                reqwest::header::CONTENT_TYPE,
                reqwest::header::USER_AGENT,
            ];
            let dropped: Vec<_> = headers
                .keys()
                .filter(|n| !KEPT.contains(n))
                .cloned()
                .collect();
            for name in dropped {
                headers.remove(name);
            }
        }
        let to_get = status == reqwest::StatusCode::SEE_OTHER
            || (matches!(status.as_u16(), 301 | 302)
                && method != Method::GET
                && method != Method::HEAD);
        if to_get {
            method = Method::GET;
            body = None;
        }
        url = next;
    }
    Err(ActionError::failed(format!(
        "{method} {}: more than {MAX_REDIRECTS} redirects",
        shown_url(&url)
    )))
}

/// `url`, or the tool's `base_url` joined with `url`/`path`, plus `query`.
fn build_url(a: &Args, options: Option<&Map<String, Value>>) -> Result<reqwest::Url, ActionError> {
    let given = a.str("url")?.or(a.str("path")?);
    let base = options
        .and_then(|o| o.get("base_url").or_else(|| o.get("baseUrl")))
        .and_then(Value::as_str);
    let base = a.str("base_url")?.or(base);
    let text = match (base, given) {
        (Some(b), Some(p)) if !p.contains("://") => {
            format!("{}/{}", b.trim_end_matches('/'), p.trim_start_matches('/'))
        }
        (_, Some(p)) => p.to_string(),
        (Some(b), None) => b.to_string(),
        (None, None) => return Err(a.missing("url")),
    };
    let mut url = reqwest::Url::parse(&text)
        .map_err(|e| a.invalid("url", format!("`{text}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(a.invalid("url", format!("`{text}`: only http and https URLs")));
    }
    match a.get("query") {
        None => {}
        Some(Value::Object(q)) => {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in q {
                match v {
                    Value::Array(items) => {
                        for i in items {
                            pairs.append_pair(k, &display(i));
                        }
                    }
                    Value::Null => {}
                    v => {
                        pairs.append_pair(k, &display(v));
                    }
                }
            }
        }
        Some(other) => {
            return Err(a.invalid(
                "query",
                format!(
                    "expected a mapping of names to values, got {}",
                    type_name(other)
                ),
            ))
        }
    }
    Ok(url)
}

/// The URL without credentials, for messages.
pub(crate) fn shown_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_password(None);
    let _ = u.set_username("");
    u.to_string()
}

async fn read_limited(mut resp: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if out.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out))
}

fn response_value(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    bytes: &[u8],
    response_type: &str,
) -> Result<Value, String> {
    let mut h = Map::new();
    for (k, v) in headers {
        h.insert(
            k.as_str().to_string(),
            json!(String::from_utf8_lossy(v.as_bytes())),
        );
    }
    let is_json = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains("json"));
    let text = String::from_utf8_lossy(bytes).into_owned();
    let body = match response_type {
        "text" => Value::String(text),
        "json" => serde_json::from_str(&text).map_err(|e| format!("the body is not JSON: {e}"))?,
        _ if is_json && !text.trim().is_empty() => {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        }
        _ => Value::String(text),
    };
    // `data` repeats the body under the name axios and the peer use.
    Ok(
        json!({"status": status.as_u16(), "ok": status.is_success(), "headers": h, "data": body.clone(), "body": body}),
    )
}

pub(crate) fn snippet(body: &Value) -> String {
    let text = display(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

use crate::core::catalog::{
    alias, input, spec, Input, Spec, ANY, BOOLEAN, DURATION, INTEGER, MAPPING, STRING, WAITS,
};

const HTTP_INPUTS: &[Input] = &[
    input("url", STRING, "The URL (http or https)."),
    input("path", STRING, "Joined to `base_url` instead of `url`."),
    input(
        "base_url",
        STRING,
        "Where `path` starts (else the tool's `options.base_url`).",
    ),
    alias("baseUrl", "base_url"),
    input("method", STRING, "http.request: the method.").default("GET"),
    input(
        "query",
        MAPPING,
        "Query parameters; list values repeat the name.",
    ),
    alias("params", "query"),
    input(
        "headers",
        MAPPING,
        "Headers, over the tool's `options.headers`.",
    ),
    input("json", ANY, "A body sent as JSON."),
    input(
        "body",
        ANY,
        "A body: text as text/plain, anything else as JSON.",
    ),
    alias("data", "body"),
    input(
        "timeout",
        DURATION,
        "Per attempt (default the step's timeout, else 30s).",
    ),
    input(
        "retries",
        INTEGER,
        "Retries on connection errors, timeouts, 429 and 5xx (0-10).",
    )
    .default("3"),
    input(
        "fail_on_error",
        BOOLEAN,
        "A status outside 2xx fails the step.",
    )
    .default("true"),
    input("response_type", STRING, "How to read the body.")
        .default("auto")
        .one_of(&["auto", "json", "text"]),
];

const fn http(method: &'static str, doc: &'static str) -> Spec {
    spec("http", method, doc)
        .inputs(HTTP_INPUTS)
        .returns("{status, ok, headers, body}")
        .traits(WAITS)
}

/// The contracts of `http.*`.
pub const SPECS: &[Spec] = &[
    http("request", "An HTTP request (any method)."),
    http("get", "A GET request."),
    http("post", "A POST request."),
    http("put", "A PUT request."),
    http("patch", "A PATCH request."),
    http("delete", "A DELETE request."),
    http("head", "A HEAD request."),
];
