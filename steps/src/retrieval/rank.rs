//! `rank.*`: combining and re-ordering hit lists (pure, in-process).
//!
//! - `rank.fuse`: several ranked lists → one (reciprocal rank fusion, or a
//!   weighted sum of min-max normalised scores);
//! - `rank.rerank`: one list re-scored (recency half-life, metadata
//!   multipliers, date-range boost), thresholded, diversified (MMR), cut.

use crate::core::args::Args;
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
};
use crate::retrieval::hits::{hit_list, hits_input};
use async_trait::async_trait;
use chrono::NaiveDate;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

pub struct RankAction;

#[async_trait]
impl Action for RankAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        match call.method {
            "fuse" => fuse(&Args::of(SPECS, call, &inputs)?),
            "rerank" => rerank(&Args::of(SPECS, call, &inputs)?, call.caps.clock.as_ref()),
            m => Err(ActionError::Input(format!("unknown method `rank.{m}`"))),
        }
    }
}

fn input_err(msg: impl Into<String>) -> ActionError {
    ActionError::Input(msg.into())
}

/// A number inside a mapping input (`recency: {half_life_days: 30}`).
fn num(v: &Value, field: &str, default: f64) -> Result<f64, ActionError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => Ok(n.as_f64().unwrap_or(default)),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| input_err(format!("input `{field}` must be a number, got `{s}`"))),
        Some(other) => Err(input_err(format!(
            "input `{field}` must be a number, got {}",
            type_name(other)
        ))),
    }
}

fn key_of(hit: &Value, id_field: &str, i: usize) -> String {
    match hit.get(id_field) {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => match hit {
            Value::String(s) => s.clone(),
            _ => format!("#{i}"),
        },
    }
}

fn score_of(hit: &Value) -> f64 {
    hit.get("score").and_then(Value::as_f64).unwrap_or(0.0)
}

fn round(x: f64) -> f64 {
    (x * 1_000_000.0).round() / 1_000_000.0
}

/// A per-list number: absent (`default` each), a list (one per list, in
/// order) or a mapping name → number (`default` for lists not named).
fn per_list(
    a: &Args,
    field: &str,
    names: &[String],
    default: f64,
) -> Result<Vec<f64>, ActionError> {
    match a.get(field) {
        None => Ok(vec![default; names.len()]),
        Some(Value::Array(a)) if a.len() == names.len() => a
            .iter()
            .map(|w| {
                w.as_f64()
                    .ok_or_else(|| input_err(format!("`{field}` must be numbers")))
            })
            .collect(),
        Some(Value::Array(a)) => Err(input_err(format!(
            "`{field}` has {} numbers for {} lists",
            a.len(),
            names.len()
        ))),
        Some(Value::Object(o)) => names
            .iter()
            .map(|n| match o.get(n) {
                None => Ok(default),
                Some(w) => w
                    .as_f64()
                    .ok_or_else(|| input_err(format!("`{field}.{n}` must be a number"))),
            })
            .collect(),
        Some(other) => Err(input_err(format!(
            "input `{field}` must be a list or mapping of numbers, got {}",
            type_name(other)
        ))),
    }
}

/// Inputs: `lists` (array of lists, or a mapping name → list), `method`
/// (`rrf` | `convex`), `k` (RRF constant, 60), `weights` (array or mapping,
/// default 1 each), `normalize` (convex: `minmax` | `tm2c2` | `zscore`),
/// `min` (tm2c2: each list's theoretical lowest score, array or mapping,
/// default 0), `id_field` (`id`), `top_k`.
///
/// Convex: a hit missing from a list scores that list's lowest score (its
/// normalised value: 0 under min-max; 0 too when the list's scores are all equal).
pub fn fuse(a: &Args) -> Result<Value, ActionError> {
    let (names, lists): (Vec<String>, Vec<Vec<Value>>) = match a.required("lists")? {
        Value::Array(l) => (
            (0..l.len()).map(|i| i.to_string()).collect(),
            l.iter()
                .enumerate()
                .map(|(i, l)| hit_list(l, &format!("`lists[{i}]`")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => (
            o.keys().cloned().collect(),
            o.iter()
                .map(|(k, l)| hit_list(l, &format!("`lists.{k}`")))
                .collect::<Result<_, _>>()?,
        ),
        other => {
            return Err(a.invalid(
                "lists",
                format!(
                    "must be a list of hit lists or a mapping of them, got {}",
                    type_name(other)
                ),
            ))
        }
    };
    let weights = per_list(a, "weights", &names, 1.0)?;
    let method = a.chosen("method")?;
    let k = a.at_least("k", 0.0)?.ok_or_else(|| a.missing("k"))?;
    let id_field = a.text("id_field")?;

    let mut order: Vec<String> = Vec::new();
    let mut first: HashMap<String, Value> = HashMap::new();
    let mut fused: HashMap<String, f64> = HashMap::new();
    let mut parts: HashMap<String, Map<String, Value>> = HashMap::new();
    // Empty text (an unset template value) is the default.
    let normalize = match a.str("normalize")? {
        Some("") => "minmax",
        _ => a.chosen("normalize")?,
    };
    let mins = per_list(a, "min", &names, 0.0)?;
    // Convex: what a hit missing from list `li` adds (weight × the list's
    // lowest score, normalised).
    let mut fills = vec![0.0; lists.len()];
    for (li, list) in lists.iter().enumerate() {
        let w = weights[li];
        let norm: Box<dyn Fn(f64) -> f64> = match method {
            "rrf" => Box::new(|_| 0.0),
            _ => {
                let scores: Vec<f64> = list.iter().map(score_of).collect();
                let (lo, hi) = scores
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &s| (a.min(s), b.max(s)));
                let f: Box<dyn Fn(f64) -> f64> = match normalize {
                    // Theoretical min-max (Bruch et al. 2023): the floor is
                    // what the scorer can give at worst, not this list's last hit.
                    "tm2c2" => {
                        let t = mins[li];
                        Box::new(move |s| if hi > t { (s - t) / (hi - t) } else { 1.0 })
                    }
                    "zscore" => {
                        let n = scores.len().max(1) as f64;
                        let mean = scores.iter().sum::<f64>() / n;
                        let sd =
                            (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n).sqrt();
                        Box::new(move |s| if sd > 0.0 { (s - mean) / sd } else { 0.0 })
                    }
                    _ => Box::new(move |s| if hi > lo { (s - lo) / (hi - lo) } else { 1.0 }),
                };
                // A list of equal scores says nothing of what lies below it.
                if hi > lo {
                    fills[li] = w * f(lo);
                }
                f
            }
        };
        let mut seen = HashSet::new();
        for (rank, hit) in list.iter().enumerate() {
            let key = key_of(hit, id_field, rank);
            // A list that repeats an id counts it once, at its best rank.
            if !seen.insert(key.clone()) {
                continue;
            }
            let contrib = match method {
                "rrf" => w / (k + (rank + 1) as f64),
                _ => w * norm(score_of(hit)),
            };
            if !first.contains_key(&key) {
                order.push(key.clone());
                first.insert(key.clone(), hit.clone());
            }
            *fused.entry(key.clone()).or_default() += contrib;
            parts.entry(key).or_default().insert(
                names[li].clone(),
                json!({"rank": rank + 1, "score": score_of(hit)}),
            );
        }
    }
    if method == "convex" {
        for key in &order {
            let from = &parts[key];
            let missing: f64 = names
                .iter()
                .zip(&fills)
                .filter(|(n, _)| !from.contains_key(*n))
                .map(|(_, f)| f)
                .sum();
            *fused.get_mut(key).unwrap() += missing;
        }
    }
    let mut out: Vec<(String, f64)> = order.iter().map(|k| (k.clone(), fused[k])).collect();
    // Stable: equal scores keep first-seen order.
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top_k = a.at_least("top_k", 0.0)?.unwrap_or(0.0) as usize;
    if top_k > 0 {
        out.truncate(top_k);
    }
    let hits: Vec<Value> = out
        .into_iter()
        .map(|(key, s)| {
            let mut h = first.remove(&key).unwrap_or(Value::Null);
            if !h.is_object() {
                h = json!({ "id": h });
            }
            h["score"] = json!(round(s));
            h["fused_from"] = Value::Object(parts.remove(&key).unwrap_or_default());
            h
        })
        .collect();
    Ok(json!({"count": hits.len(), "found": !hits.is_empty(), "hits": hits}))
}

/// A dotted path into a hit: `metadata.priority`, `date`, `score`.
fn field<'v>(hit: &'v Value, path: &str) -> Option<&'v Value> {
    let mut cur = hit;
    for p in path.split('.') {
        cur = cur.get(p)?;
    }
    Some(cur)
}

/// A hit's date: the field given, else `metadata.date`, else `mtime_ms`.
fn hit_date(hit: &Value, path: Option<&str>) -> Option<NaiveDate> {
    let v = match path {
        Some(p) => field(hit, p)?,
        None => match field(hit, "metadata.date") {
            Some(v) => v,
            None => field(hit, "mtime_ms")?,
        },
    };
    match v {
        Value::String(s) => NaiveDate::parse_from_str(s.get(..10)?, "%Y-%m-%d").ok(),
        Value::Number(n) => {
            let ms = n.as_i64()?;
            chrono::DateTime::from_timestamp_millis(ms).map(|d| d.date_naive())
        }
        _ => None,
    }
}

/// Inputs: `hits`, then in this order: `recency: {half_life_days, field?,
/// weight?}`, `boost_field` (multiply by a numeric field), `ratios: {field?,
/// values: {task: 1.5}}`, `time_match: {from, to, boost, field?}`,
/// `threshold`, `mmr: {lambda, field?}`, `top_k`.
pub fn rerank(a: &Args, clock: &dyn crate::core::time::Clock) -> Result<Value, ActionError> {
    let hits = hits_input(a, "hits")?;
    let now = a.today("now", clock)?;
    let mut scored: Vec<(f64, Value)> = hits.into_iter().map(|h| (score_of(&h), h)).collect();

    if let Some(r) = a.get("recency") {
        let half = num(r, "half_life_days", 30.0)?;
        if half <= 0.0 {
            return Err(input_err("`recency.half_life_days` must be above 0"));
        }
        let weight = num(r, "weight", 1.0)?.clamp(0.0, 1.0);
        let path = r.get("field").and_then(Value::as_str);
        for (s, h) in &mut scored {
            // Undated hits get the decay of one half-life: neither favoured nor dropped.
            let age = hit_date(h, path)
                .map(|d| (now - d).num_days().max(0) as f64)
                .unwrap_or(half);
            let decay = 0.5f64.powf(age / half);
            *s *= 1.0 - weight + weight * decay;
        }
    }
    if let Some(name) = a.str("boost_field")? {
        for (s, h) in &mut scored {
            let m = field(h, name)
                .or_else(|| field(h, &format!("metadata.{name}")))
                .and_then(|v| {
                    v.as_f64()
                        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                });
            if let Some(m) = m {
                *s *= m;
            }
        }
    }
    if let Some(r) = a.get("ratios") {
        let fname = r
            .get("field")
            .and_then(Value::as_str)
            .unwrap_or("metadata.type");
        let values = r.get("values").and_then(Value::as_object).ok_or_else(|| {
            input_err("`ratios.values` must map values to multipliers, e.g. {task: 1.5}")
        })?;
        for (s, h) in &mut scored {
            let v = field(h, fname).or_else(|| field(h, &format!("metadata.{fname}")));
            let keys: Vec<String> = match v {
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|x| x.as_str().map(str::to_lowercase))
                    .collect(),
                Some(Value::String(x)) => vec![x.to_lowercase()],
                Some(other) => vec![other.to_string()],
                None => vec![],
            };
            let mut m = 1.0;
            for k in keys {
                if let Some(r) = values
                    .iter()
                    .find(|(vk, _)| vk.to_lowercase() == k)
                    .and_then(|(_, r)| r.as_f64())
                {
                    m *= r;
                }
            }
            *s *= m;
        }
    }
    if let Some(t) = a.get("time_match") {
        let d = |k: &str| -> Result<Option<NaiveDate>, ActionError> {
            match t.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => {
                    NaiveDate::parse_from_str(s.get(..10).unwrap_or(s), "%Y-%m-%d")
                        .map(Some)
                        .map_err(|_| {
                            input_err(format!("`time_match.{k}` must be a date like 2026-11-20"))
                        })
                }
                Some(_) => Err(input_err(format!("`time_match.{k}` must be a date"))),
            }
        };
        let (from, to) = (d("from")?, d("to")?);
        let boost = num(t, "boost", 1.5)?;
        let path = t.get("field").and_then(Value::as_str);
        if from.is_some() || to.is_some() {
            for (s, h) in &mut scored {
                if let Some(hd) = hit_date(h, path) {
                    if from.is_none_or(|f| hd >= f) && to.is_none_or(|x| hd <= x) {
                        *s *= boost;
                    }
                }
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    if let Some(th) = a.num("threshold")? {
        scored.retain(|(s, _)| *s >= th);
    }
    let top_k = a.at_least("top_k", 0.0)?.unwrap_or(0.0) as usize;
    if let Some(m) = a.get("mmr") {
        let lambda = num(m, "lambda", 0.7)?;
        if !(0.0..=1.0).contains(&lambda) {
            return Err(input_err("`mmr.lambda` must be between 0 and 1"));
        }
        let fname = m.get("field").and_then(Value::as_str).unwrap_or("text");
        let want = if top_k > 0 { top_k } else { scored.len() };
        scored = mmr(scored, lambda, fname, want);
    }
    if top_k > 0 {
        scored.truncate(top_k);
    }
    let hits: Vec<Value> = scored
        .into_iter()
        .map(|(s, mut h)| {
            if h.is_object() {
                h["score"] = json!(round(s));
            }
            h
        })
        .collect();
    Ok(json!({"count": hits.len(), "found": !hits.is_empty(), "hits": hits}))
}

fn words(s: &str) -> HashSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect()
}

/// Similarity of two hits: cosine of `embedding` arrays when both have
/// one, else Jaccard overlap of the words of `field`.
fn similarity(a: &(Value, HashSet<String>), b: &(Value, HashSet<String>)) -> f64 {
    if let (Some(Value::Array(x)), Some(Value::Array(y))) =
        (a.0.get("embedding"), b.0.get("embedding"))
    {
        if x.len() == y.len() && !x.is_empty() {
            let (mut dot, mut nx, mut ny) = (0.0, 0.0, 0.0);
            for (p, q) in x.iter().zip(y) {
                let (p, q) = (p.as_f64().unwrap_or(0.0), q.as_f64().unwrap_or(0.0));
                dot += p * q;
                nx += p * p;
                ny += q * q;
            }
            return if nx > 0.0 && ny > 0.0 {
                dot / (nx.sqrt() * ny.sqrt())
            } else {
                0.0
            };
        }
    }
    let inter = a.1.intersection(&b.1).count() as f64;
    let union = a.1.union(&b.1).count() as f64;
    if union == 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// Maximal marginal relevance: repeatedly takes the hit maximising
/// `lambda * relevance - (1 - lambda) * max similarity to those taken`,
/// relevance being the score scaled to 0..1. Scores are kept as they were.
pub fn mmr(scored: Vec<(f64, Value)>, lambda: f64, fname: &str, want: usize) -> Vec<(f64, Value)> {
    let max = scored.iter().map(|x| x.0).fold(0.0f64, f64::max);
    let mut pool: Vec<(f64, (Value, HashSet<String>))> = scored
        .into_iter()
        .map(|(s, h)| {
            let w = words(field(&h, fname).and_then(Value::as_str).unwrap_or(""));
            (s, (h, w))
        })
        .collect();
    let mut taken: Vec<(f64, (Value, HashSet<String>))> = Vec::new();
    while !pool.is_empty() && taken.len() < want {
        let mut best = 0;
        let mut best_v = f64::MIN;
        for (i, (s, item)) in pool.iter().enumerate() {
            let rel = if max > 0.0 { s / max } else { 0.0 };
            let red = taken
                .iter()
                .map(|(_, t)| similarity(item, t))
                .fold(0.0, f64::max);
            let v = lambda * rel - (1.0 - lambda) * red;
            if v > best_v {
                best_v = v;
                best = i;
            }
        }
        taken.push(pool.remove(best));
    }
    taken.into_iter().map(|(s, (h, _))| (s, h)).collect()
}

use crate::core::catalog::{
    alias, input, spec, Spec, ANY, INTEGER, LIST_OR_MAPPING, MAPPING, NUMBER, STRING,
};

/// The contracts of `rank.*`.
pub const SPECS: &[Spec] = &[
    spec(
        "rank",
        "fuse",
        "Fuses several hit lists into one (RRF or convex).",
    )
    .inputs(&[
        input(
            "lists",
            LIST_OR_MAPPING,
            "The hit lists: a list of them, or a mapping name → list.",
        )
        .required(),
        input("method", STRING, "How to fuse.")
            .default("rrf")
            .one_of(&["rrf", "convex"]),
        input("k", NUMBER, "rrf: the rank constant.").default("60"),
        input("weights", LIST_OR_MAPPING, "One weight per list (1 each)."),
        input("normalize", STRING, "convex: how scores are scaled.")
            .default("minmax")
            .one_of(&["minmax", "tm2c2", "zscore"]),
        input(
            "min",
            LIST_OR_MAPPING,
            "tm2c2: each list's lowest possible score (0 each).",
        ),
        input("id_field", STRING, "The field that identifies a hit.").default("id"),
        input("top_k", INTEGER, "Keep this many (0: all)."),
    ])
    .returns("{count, found, hits}"),
    spec(
        "rank",
        "rerank",
        "Re-scores hits: recency, boosts, ratios, time match, MMR.",
    )
    .inputs(&[
        input("hits", LIST_OR_MAPPING, "The hits, or a search output.").required(),
        input("recency", MAPPING, "{half_life_days, field, weight}."),
        input("boost_field", STRING, "Multiply by this numeric field."),
        input("ratios", MAPPING, "{field, values: {value: ratio}}."),
        input("time_match", MAPPING, "{from, to, boost, field}."),
        input("threshold", NUMBER, "Drop hits scoring less."),
        input("mmr", MAPPING, "{lambda, field}: diversify."),
        input("top_k", INTEGER, "Keep this many (0: all)."),
        input("now", ANY, "Today, for recency (YYYY-MM-DD)."),
        alias("today", "now"),
    ])
    .returns("{count, found, hits}"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn read<'a>(method: &str, inputs: &'a Value) -> Args<'a> {
        Args::new(
            crate::core::args::spec_of(SPECS, method, method).unwrap(),
            inputs,
        )
        .unwrap()
    }

    fn fuse(inputs: &Value) -> Result<Value, ActionError> {
        super::fuse(&read("fuse", inputs))
    }

    fn rerank_now(inputs: &Value) -> Result<Value, ActionError> {
        rerank(&read("rerank", inputs), &crate::core::time::SystemClock)
    }

    /// (id, fused score) of each hit, best first.
    fn id_scores(out: &Value) -> Vec<(String, f64)> {
        out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn rrf_sums_weighted_reciprocal_ranks() {
        let out = fuse(&json!({
            "lists": {"bm25": [{"id": "a"}, {"id": "b"}], "dense": [{"id": "b"}, {"id": "c"}]},
            "k": 60, "weights": {"dense": 2}
        }))
        .unwrap();
        let ids: Vec<&str> = out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["b", "c", "a"]);
        let b = out["hits"][0]["score"].as_f64().unwrap();
        assert!((b - round(1.0 / 62.0 + 2.0 / 61.0)).abs() < 1e-9, "{b}");
        assert_eq!(out["hits"][0]["fused_from"]["dense"]["rank"], 1);
    }

    #[test]
    fn convex_normalises_each_list() {
        let out = fuse(&json!({
            "method": "convex", "weights": [0.5, 0.5],
            "lists": [[{"id": "a", "score": 10}, {"id": "b", "score": 5}, {"id": "c", "score": 0}],
                      [{"id": "c", "score": 0.9}, {"id": "b", "score": 0.1}]]
        }))
        .unwrap();
        let s = id_scores(&out);
        // a: 0.5*1 ; b: 0.5*0.5 + 0.5*0 ; c: 0 + 0.5*1
        assert_eq!(
            s,
            [("a".into(), 0.5), ("c".into(), 0.5), ("b".into(), 0.25)]
        );
        assert!(fuse(&json!({"lists": [[]], "method": "nope"})).is_err());
        assert!(fuse(&json!({"lists": [[], []], "weights": [1]})).is_err());
    }

    #[test]
    fn tm2c2_uses_theoretical_floor_and_fills_missing_with_list_min() {
        let lists = json!({
            "bm25": [{"id": "a", "score": 10.0}, {"id": "b", "score": 8.0}],
            "dense": [{"id": "c", "score": 0.8}, {"id": "b", "score": 0.6}, {"id": "d", "score": 0.4}]
        });
        let out = fuse(&json!({
            "lists": lists, "method": "convex", "normalize": "tm2c2",
            "min": {"dense": -1}, "weights": {"bm25": 0.5, "dense": 0.5}
        }))
        .unwrap();
        // bm25 / 10 (floor 0); (dense + 1) / 1.8 (floor -1). Missing: the list's
        // lowest score, bm25 8 -> 0.8, dense 0.4 -> 1.4 / 1.8.
        let n = |x: f64| 0.5 * (x + 1.0) / 1.8;
        let want = [
            ("c", 0.5 * 0.8 + n(0.8)),
            ("a", 0.5 * 1.0 + n(0.4)),
            ("b", 0.5 * 0.8 + n(0.6)),
            ("d", 0.5 * 0.8 + n(0.4)),
        ];
        let got = id_scores(&out);
        assert_eq!(
            got.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
            ["c", "a", "b", "d"]
        );
        for ((_, g), (_, w)) in got.iter().zip(want) {
            assert!((g - round(w)).abs() < 1e-9, "{got:?}");
        }
        // Min-max keeps its old behaviour (a missing hit adds 0): `a` (top of
        // bm25) and `c` (top of dense) tie at 1, first seen first; `b` 0 + 0.5.
        let mm = id_scores(&fuse(&json!({"lists": lists, "method": "convex"})).unwrap());
        assert_eq!(
            mm,
            [
                ("a".into(), 1.0),
                ("c".into(), 1.0),
                ("b".into(), 0.5),
                ("d".into(), 0.0)
            ]
        );
        // z-score: bm25 a +1, b -1; dense c +1.2247, b 0, d -1.2247; missing
        // is the list's lowest z: a 1 - 1.2247, c -1 + 1.2247, b -1, d -2.2247.
        let z = id_scores(
            &fuse(&json!({"lists": lists, "method": "convex", "normalize": "zscore"})).unwrap(),
        );
        let ids: Vec<&str> = z.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(ids, ["c", "a", "b", "d"]);
        assert!((z[0].1 - round(-1.0 + 1.5f64.sqrt())).abs() < 1e-9, "{z:?}");
        assert!(fuse(&json!({"lists": lists, "method": "convex", "normalize": "rank"})).is_err());
        assert!(fuse(&json!({"lists": lists, "method": "convex", "min": [0]})).is_err());
    }

    #[test]
    fn recency_ratios_time_match_and_threshold() {
        let hits = json!([
            {"id": "old", "score": 1.0, "metadata": {"date": "2026-10-21", "type": "note"}},
            {"id": "new", "score": 1.0, "metadata": {"date": "2026-11-20", "type": "Task"}},
        ]);
        let out = rerank_now(
            &json!({"hits": hits, "now": "2026-11-20", "recency": {"half_life_days": 30}}),
        )
        .unwrap();
        assert_eq!(out["hits"][0]["id"], "new");
        assert_eq!(out["hits"][1]["score"], 0.5);
        let out = rerank_now(&json!({"hits": hits, "ratios": {"values": {"note": 3, "task": 2}}}))
            .unwrap();
        assert_eq!(out["hits"][0]["id"], "old");
        assert_eq!(out["hits"][1]["score"], 2.0);
        let out = rerank_now(&json!({"hits": hits, "time_match": {"from": "2026-10-01", "to": "2026-10-31", "boost": 4}, "threshold": 2})).unwrap();
        assert_eq!(out["count"], 1);
        assert_eq!(out["hits"][0]["score"], 4.0);
        // A threshold rendered as text reads as the number (it was refused).
        let out =
            rerank_now(&json!({"hits": hits, "ratios": {"values": {"note": 3}}, "threshold": "2"}))
                .unwrap();
        assert_eq!(out["count"], 1, "{out}");
    }

    #[test]
    fn mmr_prefers_diverse_hits() {
        let hits = json!([
            {"id": "a", "score": 1.0, "text": "apollo api key rotation schedule"},
            {"id": "a2", "score": 0.95, "text": "apollo api key rotation schedule copy"},
            {"id": "b", "score": 0.8, "text": "hermes partner onboarding guide"},
        ]);
        let out = rerank_now(&json!({"hits": hits, "mmr": {"lambda": 0.5}, "top_k": 2})).unwrap();
        let ids: Vec<&str> = out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        let plain = rerank_now(&json!({"hits": hits, "top_k": 2})).unwrap();
        assert_eq!(plain["hits"][1]["id"], "a2");
    }
}
