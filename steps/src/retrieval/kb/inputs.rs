//! Reading `kb.*` inputs: the walk and chunk options, filters, dates, the
//! dense setting, and a search request from them.

use super::chunk::ChunkOptions;
use super::index::{Filter, SearchRequest};
use crate::core::error::{type_name, ActionError};
use crate::core::walk::WalkOptions;
use crate::retrieval::syntax;
use chrono::NaiveDate;
use serde_json::{Map, Value};

pub(super) fn opt_str<'v>(inputs: &'v Value, field: &str) -> Result<Option<&'v str>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be a string, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn opt_num(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        // Inputs from the CLI arrive as strings.
        Some(Value::String(s)) if s.trim().parse::<f64>().is_ok() => Ok(s.trim().parse().ok()),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be a number, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn opt_bool(inputs: &Value, field: &str, default: bool) -> Result<bool, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be true or false, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn options(inputs: &Value) -> Result<(WalkOptions, ChunkOptions), ActionError> {
    let mut walk = WalkOptions::notes();
    if let Some(v) = inputs.get("extensions") {
        let exts = v.as_array().ok_or_else(|| {
            ActionError::Input("input `extensions` must be a list like [md, markdown]".into())
        })?;
        walk.extensions = exts
            .iter()
            .map(|e| e.as_str().map(|s| s.trim_start_matches('.').to_string()))
            .collect::<Option<_>>()
            .ok_or_else(|| ActionError::Input("input `extensions` must list strings".into()))?;
    }
    walk.include_hidden = opt_bool(inputs, "include_hidden", false)?;
    let mut chunking = ChunkOptions::default();
    if let Some(n) = opt_num(inputs, "chunk_chars")? {
        chunking.max_chars = n.max(200.0) as usize;
    }
    if let Some(n) = opt_num(inputs, "split_level")? {
        if !(1.0..=6.0).contains(&n) {
            return Err(ActionError::Input(
                "input `split_level` must be 1 to 6".into(),
            ));
        }
        chunking.split_level = n as u8;
    }
    Ok((walk, chunking))
}

pub(super) fn today(
    inputs: &Value,
    clock: &dyn crate::core::time::Clock,
) -> Result<NaiveDate, ActionError> {
    crate::core::time::today(inputs, &["today"], clock).map_err(ActionError::Input)
}

/// `kb.search` / `kb.facets` inputs other than the query text.
pub(super) fn request(
    inputs: &Value,
    parsed: syntax::ParsedQuery,
    today: NaiveDate,
) -> Result<SearchRequest, ActionError> {
    let mut req = SearchRequest {
        paths: parsed.paths.clone(),
        filters: Vec::new(),
        date: parsed.date,
        top_k: 10,
        threshold: opt_num(inputs, "threshold")?,
        boosts: [3.0, 2.0, 1.0],
        snippet_chars: 160,
        collapse: opt_bool(inputs, "per_file", false)?,
        question_words: opt_bool(inputs, "question_words", false)?,
        parsed,
    };
    if let Some(d) = req.parsed.bad_dates.first() {
        return Err(ActionError::Input(format!(
            "`date:{d}` in the query is not a date: use today, yesterday, this-week, last-week, this-month, YYYY-MM-DD, YYYY-MM, >DATE or DATE..DATE"
        )));
    }
    if let Some(k) = opt_num(inputs, "top_k")? {
        if k < 1.0 {
            return Err(ActionError::Input(
                "input `top_k` must be at least 1".into(),
            ));
        }
        req.top_k = k as usize;
    }
    if let Some(n) = opt_num(inputs, "snippet_chars")? {
        req.snippet_chars = n.max(20.0) as usize;
    }
    if let Some(b) = inputs.get("boosts") {
        let b = b.as_object().ok_or_else(|| {
            ActionError::Input(
                "input `boosts` must be a mapping like {title: 3, section: 2, body: 1}".into(),
            )
        })?;
        for (k, v) in b {
            let i = match k.as_str() {
                "title" => 0,
                "section" | "headings" => 1,
                "body" => 2,
                other => {
                    return Err(ActionError::Input(format!(
                        "unknown field `{other}` in `boosts`: use title, section or body"
                    )))
                }
            };
            req.boosts[i] = v
                .as_f64()
                .ok_or_else(|| ActionError::Input(format!("`boosts.{k}` must be a number")))?
                as f32;
        }
    }
    // The seed's `search_scope`: all, work, personal, or a folder.
    if let Some(s) = opt_str(inputs, "scope")? {
        if !s.is_empty() && !s.eq_ignore_ascii_case("all") {
            req.paths.push(s.to_string());
        }
    }
    match inputs.get("path_prefix") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => req.paths.push(s.clone()),
        Some(Value::Array(a)) => {
            for v in a {
                req.paths.push(
                    v.as_str()
                        .ok_or_else(|| {
                            ActionError::Input("input `path_prefix` must list strings".into())
                        })?
                        .to_string(),
                );
            }
        }
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `path_prefix` must be a string or a list, got {}",
                type_name(other)
            )))
        }
    }
    for (k, v) in &req.parsed.fields {
        req.filters.push(Filter {
            field: k.clone(),
            values: vec![v.clone()],
            negate: false,
        });
    }
    match inputs.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => parse_filters(m, &mut req, today)?,
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `filters` must be a mapping of field to value, got {}",
                type_name(other)
            )))
        }
    }
    Ok(req)
}

pub(super) fn scalars(field: &str, v: &Value) -> Result<Vec<String>, ActionError> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.trim_start_matches('#').to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(ActionError::Input(format!(
            "`filters.{field}` values must be strings, numbers or booleans, got {}",
            type_name(other)
        ))),
    };
    match v {
        Value::Array(a) => a.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// `filters: {type: task, tags: [a, b], status: {in: [..]}, project: {not: x},
/// path: Work/, date: {from: .., to: ..} | "last-week"}`.
pub(super) fn parse_filters(
    m: &Map<String, Value>,
    req: &mut SearchRequest,
    today: NaiveDate,
) -> Result<(), ActionError> {
    for (k, v) in m {
        let field = if k == "tag" { "tags" } else { k.as_str() };
        match field {
            "path" | "path_prefix" | "in" => req.paths.extend(scalars(k, v)?),
            "date" => {
                let r = match v {
                    Value::String(s) => syntax::resolve_date(s, today),
                    Value::Object(o) => {
                        let end =
                            |key: &str, first: bool| -> Result<Option<NaiveDate>, ActionError> {
                                match o.get(key).and_then(Value::as_str) {
                                None => Ok(None),
                                Some(s) => syntax::span(s)
                                    .map(|(a, b)| Some(if first { a } else { b }))
                                    .ok_or_else(|| {
                                        ActionError::Input(format!("`filters.date.{key}` must be a date like 2026-11-20, got `{s}`"))
                                    }),
                            }
                            };
                        Some(syntax::DateRange {
                            from: end("from", true)?,
                            to: end("to", false)?,
                        })
                    }
                    _ => None,
                };
                req.date = Some(r.ok_or_else(|| {
                    ActionError::Input(format!(
                        "`filters.date` must be {{from, to}} or an expression like last-week, got {v}"
                    ))
                })?);
            }
            _ => {
                let (values, negate) = match v {
                    Value::Object(o) => match (o.get("eq"), o.get("in"), o.get("not")) {
                        (Some(x), None, None) | (None, Some(x), None) => (scalars(k, x)?, false),
                        (None, None, Some(x)) => (scalars(k, x)?, true),
                        _ => {
                            return Err(ActionError::Input(format!(
                                "`filters.{k}` takes one of eq, in or not"
                            )))
                        }
                    },
                    v => (scalars(k, v)?, false),
                };
                req.filters.push(Filter {
                    field: field.to_string(),
                    values,
                    negate,
                });
            }
        }
    }
    Ok(())
}

/// The `dense` input: true, false or auto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dense {
    On,
    Off,
    Auto,
}

/// Reads the `dense` input (`None`: not given; an empty string is false).
pub(super) fn dense_setting(inputs: &Value) -> Result<Option<Dense>, ActionError> {
    Ok(match inputs.get("dense") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(if *b { Dense::On } else { Dense::Off }),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "" | "false" | "off" | "no" => Some(Dense::Off),
            "true" | "on" | "yes" => Some(Dense::On),
            "auto" => Some(Dense::Auto),
            other => {
                return Err(ActionError::Input(format!(
                    "input `dense` must be true, false or auto, got `{other}`"
                )))
            }
        },
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `dense` must be true, false or auto, got {}",
                type_name(other)
            )))
        }
    })
}
