//! Calling a declared method: the request its declaration describes (the
//! path's placeholders from the inputs, the rest in the query or the body),
//! the tool's auth, retries on 429 and 5xx honouring `Retry-After`, pages
//! followed when asked, and the reply in the shape the peer's SDK gives.

use super::decl::{BodyKind, Method, Paginate, Service, ALL_PAGES, MAX_PAGES};
use super::values::ToolValues;
use crate::builtin::http::{send, shown_url, snippet};
use crate::core::action::{Action, Call};
use crate::core::catalog::Spec;
use crate::core::error::ActionError;
use crate::core::net::{
    backoff, fmt_duration, retry_after, retry_base_ms, retryable_status, sleep_or_cancel,
    status_text,
};
use crate::core::signals::LogLevel;
use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
const RETRIES: u32 = 3;
const DEFAULT_MAX_PAGES: u64 = 10;

/// The actions of one service.
pub struct IntegrationAction {
    pub service: Arc<Service>,
}

#[async_trait]
impl Action for IntegrationAction {
    fn specs(&self) -> &'static [Spec] {
        self.service.specs
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let s = &self.service;
        let m = s.method(call.method).ok_or_else(|| {
            ActionError::Input(format!("{} has no method `{}`", s.title, call.method))
        })?;
        let values = ToolValues::of(call);
        let secrets = values.secrets();
        let hide = |msg: String| redact(msg, &secrets);
        // `options.base_url` points a tool elsewhere (GitHub Enterprise, a
        // proxy), and `MARKTOFLOW_<NAME>_BASE_URL` every tool of the service.
        let from_env = || {
            let name = format!("MARKTOFLOW_{}_BASE_URL", s.name.to_ascii_uppercase());
            call.caps.env.get(&name).filter(|v| !v.is_empty()).cloned()
        };
        let base = match values
            .get("options.base_url")
            .filter(|_| !s.base_url.contains("{options.base_url"))
            .or_else(from_env)
        {
            Some(b) => values
                .fill(&b)
                .map_err(|e| ActionError::Input(hide(e)))?
                .trim_end_matches('/')
                .to_string(),
            None => values
                .fill(&s.base_url)
                .map_err(|e| ActionError::Input(hide(e)))?,
        };
        let base = if base.starts_with("http://") || base.starts_with("https://") {
            base
        } else {
            // Jira's `host: your-site.atlassian.net`, as the peer's SDK takes it.
            format!("https://{base}")
        };
        let mut inputs = match inputs {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            _ => {
                return Err(ActionError::Input(format!(
                    "the inputs of `{}` must be a mapping",
                    call.action
                )))
            }
        };
        // The other spellings of inputs, as their own.
        if let Some(spec) = s.specs.iter().find(|sp| sp.method == call.method) {
            for i in spec.inputs {
                let Some(of) = i.alias_of else { continue };
                if let Some(v) = inputs.remove(i.name) {
                    inputs.entry(of.to_string()).or_insert(v);
                }
            }
        }
        let all_pages = matches!(inputs.remove(ALL_PAGES), Some(Value::Bool(true)))
            || inputs.get(ALL_PAGES).is_some_and(|v| v == "true");
        inputs.remove(ALL_PAGES);
        let max_pages = inputs
            .remove(MAX_PAGES)
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
            })
            .unwrap_or(DEFAULT_MAX_PAGES)
            .clamp(1, 1000);
        let mut req = Request::build(s, m, &base, inputs, &values)
            .map_err(|e| ActionError::Input(hide(e)))?;
        // The service's own hosts (its API, its OAuth endpoint) are allowed
        // for its calls, beside the workflow's (permissions.hosts, --allow-host).
        let mut caps = call.caps.clone();
        if let Some(list) = &caps.allowed_hosts {
            let mut l = (**list).clone();
            let token_url = s
                .auth
                .oauth
                .as_ref()
                .and_then(|o| token_url_of(call, s, o, &values));
            let token_url = token_url.and_then(|u| reqwest::Url::parse(&u).ok());
            for u in std::iter::once(&req.url).chain(token_url.as_ref()) {
                if let Some(host) = u.host_str() {
                    l.push(match u.port() {
                        Some(p) => format!("{host}:{p}"),
                        None => host.to_string(),
                    });
                }
            }
            caps.allowed_hosts = Some(Arc::new(l));
        }
        let call = Call {
            caps: &caps,
            ..call.reborrow()
        };
        let mut secrets = secrets.clone();
        if let Some(o) = &s.auth.oauth {
            let url = token_url_of(&call, s, o, &values).ok_or_else(|| {
                ActionError::Input("the tool needs `options.token_url` (OAuth)".into())
            })?;
            let token = super::oauth::access_token(&call, o, &values, &url)
                .await
                .map_err(|e| match e {
                    ActionError::Input(m) => ActionError::Input(hide(m)),
                    ActionError::Failed { message, .. } => ActionError::failed(hide(message)),
                    other => other,
                })?;
            req.bearer(&token).map_err(ActionError::Input)?;
            secrets.push(token);
        }
        let hide = |msg: String| redact(msg, &secrets);
        let origin = req.url.origin();
        let (status, headers, mut body) = exchange(&call, s, &req, &hide).await?;
        let Some(p) = m.paginate.as_ref().filter(|_| all_pages) else {
            return Ok(shape(s, status, &req.url, &headers, body));
        };
        let items_at = match p {
            Paginate::Cursor { items, .. } | Paginate::Offset { items, .. } => Some(items.as_str()),
            Paginate::Link { items } => items.as_deref(),
        };
        let mut all: Vec<Value> = items_of(&body, items_at);
        let mut last_headers = headers;
        for _ in 1..max_pages {
            let next = match p {
                Paginate::Cursor { param, next, .. } => match dotted(&body, next) {
                    Some(Value::String(c)) if !c.is_empty() => {
                        req.set(param, Value::String(c.clone()));
                        true
                    }
                    _ => false,
                },
                Paginate::Offset { param, total, .. } => {
                    let total = dotted(&body, total).and_then(Value::as_u64).unwrap_or(0);
                    let got = all.len() as u64;
                    let page = items_of(&body, items_at).len();
                    if page == 0 || got >= total {
                        false
                    } else {
                        req.set(param, json!(got));
                        true
                    }
                }
                Paginate::Link { .. } => match next_link(&last_headers, &req.url) {
                    Some(u) if u.origin() == origin => {
                        req.url = u;
                        true
                    }
                    _ => false,
                },
            };
            if !next {
                break;
            }
            let (_, h, b) = exchange(&call, s, &req, &hide).await?;
            all.extend(items_of(&b, items_at));
            body = b;
            last_headers = h;
        }
        let merged = match items_at {
            Some(path) => {
                let mut b = body;
                set_dotted(&mut b, path, Value::Array(all));
                b
            }
            None => Value::Array(all),
        };
        Ok(shape(s, status, &req.url, &last_headers, merged))
    }
}

fn redact(mut msg: String, secrets: &[String]) -> String {
    for s in secrets {
        if msg.contains(s.as_str()) {
            msg = msg.replace(s.as_str(), "[redacted]");
        }
    }
    msg
}

/// One request, ready to send (and to send again for the next page).
struct Request {
    method: reqwest::Method,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    /// The body (None: none).
    body: Option<Value>,
    kind: BodyKind,
    /// A multipart body's content and its type.
    media: Option<(String, String)>,
}

impl Request {
    /// Sends the OAuth access token.
    fn bearer(&mut self, token: &str) -> Result<(), String> {
        let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the access token is not valid in a header".to_string())?;
        v.set_sensitive(true);
        self.headers.insert(reqwest::header::AUTHORIZATION, v);
        Ok(())
    }

    fn build(
        s: &Service,
        m: &Method,
        base: &str,
        mut inputs: Map<String, Value>,
        values: &ToolValues,
    ) -> Result<Request, String> {
        let mut path = m.path.clone();
        for p in &m.params {
            let v = inputs
                .remove(p)
                .ok_or_else(|| format!("`{p}` is required"))?;
            let text = match &v {
                Value::String(t) => t.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("`{p}` must be text or a number, not {other}")),
            };
            // Each segment encoded (a file path keeps its `/`); `.` and `..`
            // never walk the URL up.
            let enc: Vec<String> = text
                .split('/')
                .map(|seg| match seg {
                    "." => "%2E".to_string(),
                    ".." => "%2E%2E".to_string(),
                    s => path_segment(s),
                })
                .collect();
            path = path.replace(&format!("{{{p}}}"), &enc.join("/"));
        }
        let mut url = reqwest::Url::parse(&format!("{base}{path}"))
            .map_err(|e| format!("invalid URL for this call: {e}"))?;
        let has_body = !matches!(
            m.method_kind(),
            reqwest::Method::GET | reqwest::Method::HEAD | reqwest::Method::DELETE
        );
        let mut query: Vec<(String, String)> = Vec::new();
        let mut body = Map::new();
        // A multipart body's content, and its type (text: one line).
        let media = match &m.kind {
            BodyKind::Multipart(md) => {
                let content = match inputs.get(&md.content).cloned() {
                    Some(Value::String(t)) => t,
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                let media_type = match inputs.get(&md.media_type).cloned() {
                    Some(Value::String(t)) if !t.trim().is_empty() => t.replace(['\r', '\n'], ""),
                    _ => "application/octet-stream".to_string(),
                };
                Some((content, media_type))
            }
            _ => None,
        };
        let whole_body = match &m.body_template {
            Some(t) => Some(super::template::render(t, &mut inputs)?),
            None => m.body_input.as_ref().and_then(|k| inputs.remove(k)),
        };
        let body_given = m.body_input.is_some() || m.body_template.is_some();
        if let BodyKind::Multipart(md) = &m.kind {
            inputs.remove(&md.content);
            inputs.remove(&md.media_type);
        }
        for (k, v) in inputs {
            if !has_body || m.query.contains(&k) || body_given {
                if !v.is_null() {
                    query.push((k, query_text(&v)));
                }
            } else {
                body.insert(k, v);
            }
        }
        for (param, key) in &s.auth.query {
            let v = values
                .get(key)
                .ok_or_else(|| format!("the tool needs `auth.{key}`"))?;
            query.push((param.clone(), v));
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut headers = reqwest::header::HeaderMap::new();
        let mut put = |k: &str, v: &str| -> Result<(), String> {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("`{k}` is not a header name"))?;
            let mut value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|_| format!("the value of header `{k}` is not valid"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
            Ok(())
        };
        put("accept", "application/json")?;
        for (k, v) in &s.headers {
            put(k, &values.fill(v)?)?;
        }
        if let Some(key) = &s.auth.bearer {
            let t = values.get(key).ok_or_else(|| {
                format!("the tool needs `auth.{key}` (a token: `auth: {{{key}: '${{ENV_VAR}}'}}`)")
            })?;
            put("authorization", &format!("Bearer {t}"))?;
        }
        if let Some(groups) = &s.auth.basic {
            let pick = |g: &Vec<String>| g.iter().find_map(|k| values.get(k));
            let (user, pass) = match groups.as_slice() {
                [u, p] => (pick(u), pick(p)),
                _ => (None, None),
            };
            let (Some(user), Some(pass)) = (user, pass) else {
                let names: Vec<String> = groups.iter().map(|g| g.join(" or ")).collect();
                return Err(format!("the tool needs `auth` {}", names.join(" and ")));
            };
            let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            put("authorization", &format!("Basic {b}"))?;
        }
        for (name, template) in &s.auth.header {
            // A header whose value the tool does not give is left out.
            if let Ok(v) = values.fill(template) {
                put(name, &v)?;
            }
        }
        let body = match whole_body {
            Some(b) => Some(b),
            None => has_body.then(|| match &m.wrap {
                Some(w) => json!({ w: body }),
                None => Value::Object(body),
            }),
        };
        Ok(Request {
            method: m.method_kind(),
            url,
            headers,
            body,
            kind: m.kind.clone(),
            media,
        })
    }

    /// Sets `param` for the next page: in the body when the request has
    /// one, else in the query.
    fn set(&mut self, param: &str, v: Value) {
        if let Some(Value::Object(b)) = &mut self.body {
            b.insert(param.to_string(), v);
            return;
        }
        let kept: Vec<(String, String)> = self
            .url
            .query_pairs()
            .filter(|(k, _)| k != param)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        self.url
            .query_pairs_mut()
            .clear()
            .extend_pairs(kept)
            .append_pair(param, &query_text(&v));
    }

    fn body_bytes(&self) -> Option<(Vec<u8>, String)> {
        let b = self.body.as_ref()?;
        match &self.kind {
            BodyKind::Form => {
                let mut f = form_urlencoded::Serializer::new(String::new());
                if let Value::Object(m) = b {
                    for (k, v) in m {
                        f.append_pair(k, &query_text(v));
                    }
                }
                Some((
                    f.finish().into_bytes(),
                    "application/x-www-form-urlencoded".into(),
                ))
            }
            BodyKind::Json => Some((b.to_string().into_bytes(), "application/json".into())),
            BodyKind::Multipart(_) => {
                let (content, media_type) = self.media.clone().unwrap_or_default();
                // A boundary no content can hold by chance.
                let boundary = format!("marktoflow-{}", uuid::Uuid::new_v4().simple());
                let mut out = format!(
                    "--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{b}\r\n--{boundary}\r\nContent-Type: {media_type}\r\n\r\n"
                )
                .into_bytes();
                out.extend_from_slice(content.as_bytes());
                out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
                Some((out, format!("multipart/related; boundary={boundary}")))
            }
        }
    }
}

impl Method {
    fn method_kind(&self) -> reqwest::Method {
        self.http.clone()
    }
}

/// Where the OAuth refresh token is exchanged: `MARKTOFLOW_<NAME>_TOKEN_URL`
/// (every tool of the service), else the declaration's (over `options`).
fn token_url_of(
    call: &Call<'_>,
    s: &Service,
    o: &super::decl::OAuthDecl,
    values: &ToolValues,
) -> Option<String> {
    let name = format!("MARKTOFLOW_{}_TOKEN_URL", s.name.to_ascii_uppercase());
    match call.caps.env.get(&name).filter(|v| !v.is_empty()) {
        Some(u) if values.get("options.token_url").is_none() => Some(u.clone()),
        _ => values.fill(&o.token_url).ok(),
    }
}

/// `s` as one path segment: RFC 3986's `pchar`s as they are (Sheets'
/// `Data!A1:B2`), everything else percent-encoded.
fn path_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn query_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(query_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Sends `req`, retrying 429, 5xx and transport errors (up to 3 times,
/// `Retry-After` honoured); the reply's status, headers and JSON.
async fn exchange(
    call: &Call<'_>,
    s: &Service,
    req: &Request,
    redact: &(dyn Fn(String) -> String + Sync),
) -> Result<(u16, reqwest::header::HeaderMap, Value), ActionError> {
    let shown = redact(shown_url(&req.url));
    let what = format!(
        "{} {} {}",
        s.title,
        req.method,
        shown.split('?').next().unwrap_or(&shown)
    );
    let body = req.body_bytes();
    let body = body.as_ref().map(|(b, t)| (b.clone(), t.as_str()));
    let base_ms = retry_base_ms(&call.caps.env);
    let timeout = call.timeout.unwrap_or(TIMEOUT);
    let mut attempt = 0u32;
    loop {
        let sent = send(
            call,
            &req.method,
            &req.url,
            &req.headers,
            body.as_ref(),
            timeout,
        );
        let result = tokio::select! {
            biased;
            _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
            r = sent => r?,
        };
        let (transient, wait) = match result {
            Ok((status, headers, Some(bytes))) => {
                let value = serde_json::from_slice::<Value>(&bytes).unwrap_or_else(|_| {
                    Value::String(String::from_utf8_lossy(&bytes).into_owned())
                });
                if status.is_success() {
                    if let Some((ok, message)) = &s.errors {
                        if value.get(ok) == Some(&Value::Bool(false)) {
                            let why = value.get(message).map(snippet).unwrap_or_default();
                            return Err(ActionError::failed(redact(format!("{what}: {why}"))));
                        }
                    }
                    return Ok((status.as_u16(), headers, value));
                }
                // The service's own words for what went wrong, when it has them.
                let why = s
                    .errors
                    .as_ref()
                    .and_then(|(_, m)| value.get(m))
                    .map(snippet)
                    .unwrap_or_else(|| snippet(&value));
                let msg = redact(format!(
                    "{what} returned HTTP {}: {why}",
                    status_text(status)
                ));
                if !retryable_status(status) {
                    return Err(ActionError::failed(msg));
                }
                (msg, retry_after(&headers))
            }
            Ok((_, _, None)) => {
                return Err(ActionError::failed(format!(
                    "{what}: the reply is too large"
                )))
            }
            Err(e) => (
                redact(format!("{what}: {}", crate::core::net::describe_reqwest(e))),
                None,
            ),
        };
        if attempt >= RETRIES {
            return Err(ActionError::failed(format!(
                "{transient} (after {} requests)",
                attempt + 1
            )));
        }
        let delay = wait.unwrap_or_else(|| backoff(base_ms, attempt));
        call.log(
            LogLevel::Warn,
            format!(
                "{transient}; retry {} of {RETRIES} in {}",
                attempt + 1,
                fmt_duration(delay)
            ),
        );
        sleep_or_cancel(&call.caps.cancel, delay).await?;
        attempt += 1;
    }
}

/// The reply as the peer's SDK gives it.
fn shape(
    s: &Service,
    status: u16,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    body: Value,
) -> Value {
    if let Some(f) = &s.unwrap {
        return body.get(f).cloned().unwrap_or(body);
    }
    if !s.octokit {
        return body;
    }
    let h: Map<String, Value> = headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.as_str().to_string(),
                Value::String(v.to_str().ok()?.to_string()),
            ))
        })
        .collect();
    json!({"status": status, "url": url.as_str(), "headers": h, "data": body})
}

fn dotted<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

fn set_dotted(v: &mut Value, path: &str, new: Value) {
    let mut at = v;
    let keys: Vec<&str> = path.split('.').collect();
    for (i, k) in keys.iter().enumerate() {
        let Some(next) = at.get_mut(*k) else { return };
        if i + 1 == keys.len() {
            *next = new;
            return;
        }
        at = next;
    }
}

fn items_of(body: &Value, path: Option<&str>) -> Vec<Value> {
    let list = match path {
        Some(p) => dotted(body, p),
        None => Some(body),
    };
    list.and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(headers: &reqwest::header::HeaderMap, base: &reqwest::Url) -> Option<reqwest::Url> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"")
            .then(|| {
                base.join(url.trim().trim_start_matches('<').trim_end_matches('>'))
                    .ok()
            })
            .flatten()
    })
}
