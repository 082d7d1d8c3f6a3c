//! An OpenAPI 3 document as an integration's methods: each operation with
//! an `operationId` becomes the method of that name — its path and query
//! parameters, and its JSON (or form) body's properties, as typed inputs —
//! so a declaration can say `openapi: petstore.json` instead of listing
//! them. `$ref`s inside the document (`#/components/...`) are followed.

use serde_json::Value;
use std::collections::BTreeMap;

/// One operation, as a method: `request` is `VERB /path`.
pub(super) struct Operation {
    pub doc: String,
    pub request: String,
    /// name → (type, required, doc).
    pub inputs: BTreeMap<String, (&'static str, bool, String)>,
    pub query: Vec<String>,
    pub form: bool,
    pub body_input: Option<String>,
    pub returns: String,
}

const VERBS: &[&str] = &["get", "post", "put", "patch", "delete"];

/// The document's first server URL and its operations as methods.
pub(super) fn methods(
    doc: &Value,
) -> Result<(Option<String>, BTreeMap<String, Operation>), String> {
    if doc
        .get("openapi")
        .and_then(Value::as_str)
        .is_none_or(|v| !v.starts_with('3'))
    {
        return Err("the document is not OpenAPI 3 (`openapi: 3.x`)".into());
    }
    let server = doc
        .pointer("/servers/0/url")
        .and_then(Value::as_str)
        .map(|u| u.trim_end_matches('/').to_string());
    let mut out = BTreeMap::new();
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .ok_or("the document has no `paths`")?;
    for (path, item) in paths {
        let shared = item
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for verb in VERBS {
            let Some(op) = item.get(*verb) else { continue };
            let Some(id) = op.get("operationId").and_then(Value::as_str) else {
                continue;
            };
            let mut inputs = BTreeMap::new();
            let mut query = Vec::new();
            let params = shared.iter().chain(
                op.get("parameters")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            );
            for p in params {
                let p = resolve(doc, p)?;
                let (Some(name), Some(place)) = (
                    p.get("name").and_then(Value::as_str),
                    p.get("in").and_then(Value::as_str),
                ) else {
                    continue;
                };
                if !matches!(place, "path" | "query") {
                    continue;
                }
                if place == "query" {
                    query.push(name.to_string());
                }
                let schema = p.get("schema").map(|s| resolve(doc, s)).transpose()?;
                inputs.insert(
                    name.to_string(),
                    input(
                        schema.as_ref(),
                        p.get("required") == Some(&Value::Bool(true)),
                        describe(&p),
                    ),
                );
            }
            let mut form = false;
            let mut body_input = None;
            if let Some(body) = op.get("requestBody") {
                let body = resolve(doc, body)?;
                let content = body.get("content").and_then(Value::as_object);
                let (media, schema) = match content {
                    Some(c) => match c.get("application/json") {
                        Some(m) => ("json", m.get("schema")),
                        None => match c.get("application/x-www-form-urlencoded") {
                            Some(m) => ("form", m.get("schema")),
                            None => return Err(format!(
                                "operation `{id}`: only JSON and form bodies are supported (it takes {})",
                                c.keys().cloned().collect::<Vec<_>>().join(", ")
                            )),
                        },
                    },
                    None => ("json", None),
                };
                form = media == "form";
                let schema = schema.map(|s| resolve(doc, s)).transpose()?;
                let props = schema
                    .as_ref()
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object);
                match props {
                    Some(props) => {
                        let required: Vec<&str> = schema
                            .as_ref()
                            .and_then(|s| s.get("required"))
                            .and_then(Value::as_array)
                            .map(|r| r.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        for (name, prop) in props {
                            if inputs.contains_key(name) {
                                continue;
                            }
                            let prop = resolve(doc, prop)?;
                            inputs.insert(
                                name.clone(),
                                input(
                                    Some(&prop),
                                    required.contains(&name.as_str()),
                                    describe(&prop),
                                ),
                            );
                        }
                    }
                    // A body that is not an object of properties is given whole.
                    None => {
                        inputs.insert(
                            "body".to_string(),
                            input(
                                schema.as_ref(),
                                body.get("required") == Some(&Value::Bool(true)),
                                "The request's body".into(),
                            ),
                        );
                        body_input = Some("body".to_string());
                    }
                }
            }
            let doc_line = op
                .get("summary")
                .or_else(|| op.get("description"))
                .and_then(Value::as_str)
                .unwrap_or(id)
                .lines()
                .next()
                .unwrap_or(id)
                .to_string();
            let returns = ["200", "201", "202", "204"]
                .iter()
                .find_map(|c| op.pointer(&format!("/responses/{c}/description")))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            out.insert(
                id.to_string(),
                Operation {
                    doc: doc_line,
                    request: format!("{} {path}", verb.to_ascii_uppercase()),
                    inputs,
                    query,
                    form,
                    body_input,
                    returns,
                },
            );
        }
    }
    if out.is_empty() {
        return Err("the document has no operation with an `operationId`".into());
    }
    Ok((server, out))
}

/// `v`, or what its `$ref` (`#/components/…`) points at.
fn resolve(doc: &Value, v: &Value) -> Result<Value, String> {
    let mut v = v.clone();
    for _ in 0..16 {
        let Some(r) = v.get("$ref").and_then(Value::as_str) else {
            return Ok(v);
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(format!("`$ref: {r}` points outside the document"));
        };
        v = doc
            .pointer(pointer)
            .cloned()
            .ok_or_else(|| format!("`$ref: {r}` points at nothing"))?;
    }
    Err("`$ref`s that go round in a circle".into())
}

fn describe(v: &Value) -> String {
    v.get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

fn input(schema: Option<&Value>, required: bool, doc: String) -> (&'static str, bool, String) {
    let ty = match schema.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("string") => "string",
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "boolean",
        Some("array") => "array",
        Some("object") => "object",
        _ => "any",
    };
    (ty, required, doc)
}
