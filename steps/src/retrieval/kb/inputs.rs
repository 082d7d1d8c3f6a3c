//! Reading what is particular to `kb.*` inputs (the walk and chunk
//! options, filters, dates, the dense setting, and a search request from
//! them) over the one reader of inputs, [`Args`].

use super::chunk::ChunkOptions;
use super::index::{Filter, SearchRequest};
use crate::core::args::Args;
use crate::core::error::{type_name, ActionError};
use crate::core::walk::WalkOptions;
use crate::retrieval::syntax;
use chrono::NaiveDate;
use serde_json::{Map, Value};

pub(super) fn options(a: &Args) -> Result<(WalkOptions, ChunkOptions), ActionError> {
    let walk = WalkOptions {
        extensions: a
            .strings("extensions")?
            .into_iter()
            .map(|s| s.trim_start_matches('.').to_string())
            .collect(),
        include_hidden: a.bool("include_hidden")?,
        ..WalkOptions::notes()
    };
    let split_level = a.number("split_level")?;
    if !(1.0..=6.0).contains(&split_level) {
        return Err(a.invalid("split_level", format!("must be 1 to 6, got {split_level}")));
    }
    let chunking = ChunkOptions {
        max_chars: a.number("chunk_chars")?.max(200.0) as usize,
        split_level: split_level as u8,
        ..ChunkOptions::default()
    };
    Ok((walk, chunking))
}

/// The most hits one search returns: the collectors are sized by it, so a
/// caller's number must not size them (`top_k: 1000000000`).
pub const MAX_TOP_K: u64 = 10_000;

/// `kb.search` / `kb.facets` inputs other than the query text.
pub(super) fn request(
    a: &Args,
    parsed: syntax::ParsedQuery,
    today: NaiveDate,
) -> Result<SearchRequest, ActionError> {
    let mut req = SearchRequest {
        paths: parsed.paths.clone(),
        filters: Vec::new(),
        date: parsed.date,
        top_k: a
            .count("top_k", 1, MAX_TOP_K)?
            .ok_or_else(|| a.missing("top_k"))?,
        threshold: a.num("threshold")?,
        boosts: [3.0, 2.0, 1.0],
        snippet_chars: a.number("snippet_chars")?.max(20.0) as usize,
        collapse: a.bool("per_file")?,
        // Only `kb.search` declares it.
        question_words: a.declares("question_words") && a.bool("question_words")?,
        tenant: tenant(a)?,
        parsed,
    };
    if let Some(d) = req.parsed.bad_dates.first() {
        return Err(ActionError::Input(format!(
            "`date:{d}` in the query is not a date: use today, yesterday, this-week, last-week, this-month, YYYY-MM-DD, YYYY-MM, >DATE or DATE..DATE"
        )));
    }
    if let Some(b) = a.mapping("boosts")? {
        for (k, v) in b.iter() {
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
    if let Some(s) = a.str("scope")? {
        if !s.is_empty() && !s.eq_ignore_ascii_case("all") {
            req.paths.push(s.to_string());
        }
    }
    req.paths.extend(a.strings("path_prefix")?);
    for (k, v) in &req.parsed.fields {
        req.filters.push(Filter {
            field: k.clone(),
            values: vec![v.clone()],
            negate: false,
        });
    }
    if let Some(m) = a.mapping("filters")? {
        parse_filters(&m, &mut req, today)?;
    }
    Ok(req)
}

/// The `tenant` input, as notes' `tenant_id` is compared with it.
pub(super) fn tenant(a: &Args) -> Result<String, ActionError> {
    let t = a.str("tenant")?.unwrap_or_default();
    crate::retrieval::frontmatter::tenant_key(t)
        .ok_or_else(|| a.invalid("tenant", "must not hold control characters"))
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

/// Reads the `dense` input, given or its declared default (an empty
/// string is false).
pub(super) fn dense_setting(a: &Args) -> Result<Dense, ActionError> {
    Ok(match a.value("dense").as_deref() {
        None | Some(Value::Bool(false)) => Dense::Off,
        Some(Value::Bool(true)) => Dense::On,
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "" | "false" | "off" | "no" => Dense::Off,
            "true" | "on" | "yes" => Dense::On,
            "auto" => Dense::Auto,
            other => {
                return Err(a.invalid(
                    "dense",
                    format!("must be true, false or auto, got `{other}`"),
                ))
            }
        },
        Some(other) => {
            return Err(a.invalid(
                "dense",
                format!("must be true, false or auto, got {}", type_name(other)),
            ))
        }
    })
}
