//! An integration's declaration, as written in YAML, read and checked into
//! a [`Service`]: its base URL, how its auth is sent, and its methods —
//! each an HTTP request with typed inputs that become an action's
//! contract (`validate`, `actions`, the JSON Schema, "did you mean").

use crate::core::catalog::{Extra, Input, Spec, Traits, Ty, WAITS};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decl {
    /// The action family in the docs (`slack` in `slack.chat.postMessage`).
    name: String,
    title: String,
    /// The tool `sdk:` values that use it (the peer's package names).
    sdks: Vec<String>,
    #[serde(default)]
    doc: String,
    /// `https://slack.com/api`; `{auth.host}`, `{auth.token}`,
    /// `{options.NAME}` are the tool's values. Default: an OpenAPI
    /// document's first server.
    #[serde(default)]
    base_url: String,
    /// An OpenAPI 3 document (JSON or YAML, beside this file) whose
    /// operations are methods too.
    #[serde(default)]
    openapi: Option<String>,
    #[serde(default)]
    auth: AuthDecl,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `body` (the reply's JSON), `octokit` (`{status, url, headers, data}`)
    /// or `field NAME` (the reply's field NAME: Telegram's `result`).
    #[serde(default)]
    result: Option<String>,
    /// A reply whose field `ok` is false is an error, its message in `message`.
    #[serde(default)]
    errors: Option<ErrorsDecl>,
    #[serde(default)]
    methods: BTreeMap<String, MethodDecl>,
    /// Other names of methods (the peer's spellings): alias → method.
    #[serde(default)]
    aliases: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthDecl {
    /// `Authorization: Bearer <auth.KEY>`.
    bearer: Option<String>,
    /// `Authorization: Basic` of two auth keys, user first; the first one
    /// present of each group (`[[email, username], [api_token, password]]`).
    basic: Option<Vec<Vec<String>>>,
    /// Header name → its value, a template over the tool's values
    /// (`Token token={auth.token}`); left out when a value is missing.
    #[serde(default)]
    header: BTreeMap<String, String>,
    /// An OAuth 2 refresh token exchanged for an access token (cached
    /// until it expires): the token endpoint and the auth keys.
    oauth: Option<OAuthDecl>,
    /// Query parameter → auth key.
    #[serde(default)]
    query: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthDecl {
    /// A template (`{options.token_url|https://oauth2.googleapis.com/token}`).
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    pub refresh_token: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorsDecl {
    ok: String,
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MethodDecl {
    doc: String,
    /// `POST /chat.postMessage`, `GET /repos/{owner}/{repo}/pulls/{pull_number}`.
    request: String,
    #[serde(default)]
    inputs: BTreeMap<String, InputDecl>,
    /// Inputs other than those declared are sent too (the API's own).
    #[serde(default)]
    open: bool,
    /// Inputs sent in the query even when the request has a body.
    #[serde(default)]
    query: Vec<String>,
    /// `json` (default), `form`, or `multipart` (multipart/related: the
    /// body as JSON metadata, then `media`'s content: Google's uploads).
    #[serde(default)]
    body: Option<String>,
    /// For `body: multipart`: the inputs holding the content and its type.
    #[serde(default)]
    media: Option<MediaDecl>,
    /// The body is `{WRAP: inputs}` (PagerDuty's `{incident: …}`).
    #[serde(default)]
    wrap: Option<String>,
    /// The body is this input's value, and the other inputs go in the
    /// query (googleapis' `requestBody`).
    #[serde(default)]
    body_input: Option<String>,
    /// The body, with `{inputs.NAME}` filled in (see [`super::template`]);
    /// the inputs it names are not sent otherwise.
    #[serde(default)]
    body_template: Option<serde_json::Value>,
    #[serde(default)]
    paginate: Option<Paginate>,
    #[serde(default)]
    returns: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaDecl {
    pub content: String,
    #[serde(rename = "type")]
    pub media_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputDecl {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    doc: String,
    /// Other spellings (the peer's camelCase `chatId` for `chat_id`).
    #[serde(default)]
    aliases: Vec<String>,
}

/// How a method's pages follow each other.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "style", rename_all = "lowercase", deny_unknown_fields)]
pub enum Paginate {
    /// The next page's cursor is in the reply (`next`, a dotted path), sent
    /// back as `param`.
    Cursor {
        param: String,
        next: String,
        items: String,
    },
    /// The reply's `Link: <…>; rel="next"` header (GitHub).
    Link {
        #[serde(default)]
        items: Option<String>,
    },
    /// `param` counts items from 0 (Jira's `startAt`) up to `total`.
    Offset {
        param: String,
        total: String,
        items: String,
    },
}

/// A service, ready to call.
#[derive(Debug)]
pub struct Service {
    pub name: String,
    pub title: String,
    pub doc: String,
    /// Kept for the process, as the registry's keys are.
    pub sdks: Vec<&'static str>,
    pub base_url: String,
    pub auth: Auth,
    pub headers: Vec<(String, String)>,
    pub octokit: bool,
    /// The reply's field that is the result (None: the whole reply).
    pub unwrap: Option<String>,
    pub errors: Option<(String, String)>,
    /// The methods' contracts (aliases included), for the catalog.
    pub specs: &'static [Spec],
    pub methods: BTreeMap<String, Method>,
    /// alias → method.
    pub aliases: BTreeMap<String, String>,
    /// Where it was declared (`bundled` or a file).
    pub origin: String,
}

#[derive(Debug, Default)]
pub struct Auth {
    pub bearer: Option<String>,
    pub basic: Option<Vec<Vec<String>>>,
    pub header: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub oauth: Option<OAuthDecl>,
}

#[derive(Debug)]
pub struct Method {
    pub http: reqwest::Method,
    pub path: String,
    /// Path placeholders, in order.
    pub params: Vec<String>,
    pub query: Vec<String>,
    pub kind: BodyKind,
    pub wrap: Option<String>,
    pub body_input: Option<String>,
    pub body_template: Option<serde_json::Value>,
    pub paginate: Option<Paginate>,
}

/// How a method's body is sent.
#[derive(Debug, Clone)]
pub enum BodyKind {
    Json,
    Form,
    Multipart(MediaDecl),
}

/// Inputs every paginated method takes besides its own.
pub const ALL_PAGES: &str = "all_pages";
pub const MAX_PAGES: &str = "max_pages";

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn ty_of(name: &str) -> Result<&'static [Ty], String> {
    Ok(match name {
        "string" => &[Ty::String],
        "number" => &[Ty::Number],
        "integer" => &[Ty::Integer],
        "boolean" => &[Ty::Boolean],
        "array" | "list" => &[Ty::Array],
        "object" | "mapping" => &[Ty::Object],
        "any" => &[Ty::Any],
        other => {
            return Err(format!(
                "type `{other}`: use string, number, integer, boolean, array, object or any"
            ))
        }
    })
}

impl From<super::openapi::Operation> for MethodDecl {
    fn from(o: super::openapi::Operation) -> MethodDecl {
        let inputs = o
            .inputs
            .into_iter()
            .map(|(name, (ty, required, doc))| {
                let i = InputDecl {
                    ty: ty.to_string(),
                    required,
                    doc,
                    aliases: Vec::new(),
                };
                (name, i)
            })
            .collect();
        MethodDecl {
            doc: o.doc,
            request: o.request,
            inputs,
            open: false,
            query: o.query,
            body: o.form.then(|| "form".to_string()),
            media: None,
            wrap: None,
            body_input: o.body_input,
            body_template: None,
            paginate: None,
            returns: o.returns,
        }
    }
}

/// Reads the declaration `text` (from `origin`, for messages); an OpenAPI
/// document it names is read from `dir`.
pub fn parse(text: &str, origin: &str, dir: Option<&std::path::Path>) -> Result<Service, String> {
    let mut d: Decl = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    if let Some(file) = &d.openapi {
        let path = dir
            .map(|d| d.join(file))
            .ok_or("`openapi` is for a project's own declarations")?;
        let text = std::fs::read_to_string(&path).map_err(|e| format!("`openapi: {file}`: {e}"))?;
        let doc: serde_json::Value =
            serde_yaml::from_str(&text).map_err(|e| format!("`openapi: {file}`: {e}"))?;
        let (server, methods) =
            super::openapi::methods(&doc).map_err(|e| format!("`openapi: {file}`: {e}"))?;
        if d.base_url.is_empty() {
            d.base_url = server
                .ok_or_else(|| format!("`openapi: {file}` names no server: give `base_url`"))?;
        }
        for (name, m) in methods {
            // A method declared here wins over the document's.
            d.methods.entry(name).or_insert_with(|| m.into());
        }
    }
    if d.sdks.is_empty() {
        return Err("`sdks` must name at least one sdk".into());
    }
    if !d.base_url.starts_with("https://")
        && !d.base_url.starts_with("http://")
        && !d.base_url.starts_with('{')
    {
        return Err(format!(
            "`base_url` `{}` must be an http(s) URL",
            d.base_url
        ));
    }
    if d.methods.is_empty() {
        return Err("no `methods` (and no `openapi` document)".into());
    }
    let (octokit, unwrap) = match d.result.as_deref() {
        None | Some("body") => (false, None),
        Some("octokit") => (true, None),
        Some(other) => match other.strip_prefix("field ") {
            Some(f) if !f.trim().is_empty() => (false, Some(f.trim().to_string())),
            _ => {
                return Err(format!(
                    "`result: {other}`: use body, octokit or `field NAME`"
                ))
            }
        },
    };
    let tool = leak(d.name.clone());
    let mut specs = Vec::new();
    let mut methods = BTreeMap::new();
    for (name, m) in &d.methods {
        let (verb, path) = m
            .request
            .split_once(' ')
            .ok_or_else(|| format!("method `{name}`: `request` is `VERB /path`"))?;
        let http = reqwest::Method::from_bytes(verb.as_bytes())
            .map_err(|_| format!("method `{name}`: `{verb}` is not an HTTP method"))?;
        if !path.starts_with('/') {
            return Err(format!(
                "method `{name}`: the path `{path}` must start with `/`"
            ));
        }
        let params: Vec<String> = path
            .split('{')
            .skip(1)
            .filter_map(|p| p.split_once('}').map(|(n, _)| n.to_string()))
            .collect();
        let mut inputs: Vec<Input> = Vec::new();
        for (iname, i) in &m.inputs {
            let types =
                ty_of(&i.ty).map_err(|e| format!("method `{name}`, input `{iname}`: {e}"))?;
            let canonical = leak(iname.clone());
            inputs.push(Input {
                required: i.required || params.contains(iname),
                ..crate::core::catalog::input(canonical, types, leak(i.doc.clone()))
            });
            for a in &i.aliases {
                inputs.push(crate::core::catalog::alias(leak(a.clone()), canonical));
            }
        }
        for p in &params {
            if !m.inputs.contains_key(p) {
                return Err(format!(
                    "method `{name}`: the path's `{{{p}}}` has no input `{p}`"
                ));
            }
        }
        if m.paginate.is_some() {
            inputs.push(crate::core::catalog::input(
                ALL_PAGES,
                &[Ty::Boolean],
                "Fetch every page (up to `max_pages`) and give their items as one list",
            ));
            inputs.push(crate::core::catalog::input(
                MAX_PAGES,
                &[Ty::Integer],
                "The most pages `all_pages` fetches (default 10)",
            ));
        }
        let kind = match (m.body.as_deref(), &m.media) {
            (None | Some("json"), None) => BodyKind::Json,
            (Some("form"), None) => BodyKind::Form,
            (Some("multipart"), Some(media)) => BodyKind::Multipart(media.clone()),
            (Some("multipart"), None) => {
                return Err(format!(
                "method `{name}`: `body: multipart` needs `media: {{content: INPUT, type: INPUT}}`"
            ))
            }
            (_, Some(_)) => {
                return Err(format!("method `{name}`: `media` is for `body: multipart`"))
            }
            (Some(other), None) => {
                return Err(format!(
                    "method `{name}`: `body: {other}`: use json, form or multipart"
                ))
            }
        };
        let reads = http == reqwest::Method::GET || http == reqwest::Method::HEAD;
        let traits = Traits {
            writes: !reads,
            ..WAITS
        };
        let mut spec = crate::core::catalog::spec(tool, leak(name.clone()), leak(m.doc.clone()))
            .inputs(Box::leak(inputs.into_boxed_slice()))
            .returns(leak(if m.returns.is_empty() {
                if octokit {
                    "`{status, url, headers, data}`: `data` is the API's reply".to_string()
                } else {
                    "the API's reply (JSON)".to_string()
                }
            } else {
                m.returns.clone()
            }))
            .traits(traits);
        if m.open {
            spec.extra = Extra::Open;
        }
        specs.push(spec);
        methods.insert(
            name.clone(),
            Method {
                http,
                path: path.to_string(),
                params,
                query: m.query.clone(),
                kind,
                wrap: m.wrap.clone(),
                body_input: m.body_input.clone(),
                body_template: m.body_template.clone(),
                paginate: m.paginate.clone(),
            },
        );
    }
    for (alias, of) in &d.aliases {
        let Some(target) = specs.iter().find(|s| s.method == of.as_str()).copied() else {
            return Err(format!("alias `{alias}` names no method `{of}`"));
        };
        let doc = leak(format!(
            "The same as `{}.{of}` (the peer's spelling).",
            d.name
        ));
        specs.push(Spec {
            method: leak(alias.clone()),
            doc,
            ..target
        });
    }
    Ok(Service {
        name: d.name,
        title: d.title,
        doc: d.doc,
        sdks: d.sdks.into_iter().map(leak).collect(),
        base_url: d.base_url,
        auth: Auth {
            bearer: d.auth.bearer,
            basic: d.auth.basic,
            header: d.auth.header.into_iter().collect(),
            query: d.auth.query.into_iter().collect(),
            oauth: d.auth.oauth,
        },
        headers: d.headers.into_iter().collect(),
        octokit,
        unwrap,
        errors: d.errors.map(|e| (e.ok, e.message)),
        specs: Box::leak(specs.into_boxed_slice()),
        methods,
        aliases: d.aliases,
        origin: origin.to_string(),
    })
}

impl Service {
    /// The method `name` names (an alias's method).
    pub fn method(&self, name: &str) -> Option<&Method> {
        let name = self.aliases.get(name).map(String::as_str).unwrap_or(name);
        self.methods.get(name)
    }
}
