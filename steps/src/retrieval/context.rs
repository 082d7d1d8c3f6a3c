//! `context.pack`: hits → one prompt-ready text within a token budget, with
//! citation labels. Tokens are estimated as ceil(chars / 4), the usual rule
//! of thumb for English with BPE tokenizers; no tokenizer is loaded.

use crate::core::{
    action::{Action, Call},
    args::Args,
    error::ActionError,
};
use crate::retrieval::hits::hits_input;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashSet;

pub struct ContextAction;

#[async_trait]
impl Action for ContextAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        match call.method {
            "pack" => pack(&Args::of(SPECS, call, &inputs)?),
            m => Err(ActionError::Input(format!("unknown method `context.{m}`"))),
        }
    }
}

pub fn estimate_tokens(s: &str) -> usize {
    s.chars().count().div_ceil(4)
}

/// Cuts `s` to at most `max_tokens` (estimated), at a line or word break
/// when one is near, marking the cut with `…`.
fn truncate(s: &str, max_tokens: usize) -> (String, bool) {
    if estimate_tokens(s) <= max_tokens {
        return (s.to_string(), false);
    }
    let max_chars = (max_tokens * 4).saturating_sub(1);
    let end = s
        .char_indices()
        .nth(max_chars)
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let head = &s[..end];
    let cut = head
        .rfind('\n')
        .filter(|p| *p > end / 2)
        .or_else(|| head.rfind(' ').filter(|p| *p > end / 2))
        .unwrap_or(end);
    (format!("{}…", head[..cut].trim_end()), true)
}

/// Inputs: `hits` (a list, or a `kb.search` output), `budget_tokens` (2000),
/// `max_blocks` (10), `max_block_tokens` (500), `dedupe` (true: same id,
/// or the same text), `label` (`[{n}]`; `{n}`, `{path}`, `{section}`,
/// `{title}`, `{id}` are filled), `text_field` (`text`), `separator`.
pub fn pack(a: &Args) -> Result<Value, ActionError> {
    let hits = hits_input(a, "hits")?;
    // These have declared defaults, so a value is always there.
    let count = |name: &str| -> Result<usize, ActionError> {
        Ok(a.at_least(name, 0.0)?.ok_or_else(|| a.missing(name))? as usize)
    };
    let budget = count("budget_tokens")?;
    let max_blocks = count("max_blocks")?;
    let per_block = count("max_block_tokens")?;
    let dedupe = a.bool("dedupe")?;
    let label_fmt = a.text("label")?;
    let text_field = a.text("text_field")?;
    let sep = a.str("separator")?.unwrap_or("\n\n");

    let mut seen_ids = HashSet::new();
    let mut seen_text = HashSet::new();
    let mut blocks = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let mut used = 0usize;
    let mut dropped = 0usize;
    let mut duplicates = 0usize;
    let mut sources: Vec<String> = Vec::new();
    for h in &hits {
        let s = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let text = match h.get(text_field) {
            Some(Value::String(t)) => t.clone(),
            Some(other) if !other.is_null() => other.to_string(),
            _ => match h {
                Value::String(t) => t.clone(),
                _ => s("snippet"),
            },
        };
        if dedupe {
            let id = s("id");
            let norm: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if (!id.is_empty() && !seen_ids.insert(id)) || !seen_text.insert(norm) {
                duplicates += 1;
                continue;
            }
        }
        if blocks.len() >= max_blocks {
            dropped += 1;
            continue;
        }
        let n = blocks.len() + 1;
        let label = label_fmt
            .replace("{n}", &n.to_string())
            .replace("{path}", &s("path"))
            .replace("{section}", &s("section"))
            .replace("{title}", &s("title"))
            .replace("{id}", &s("id"));
        let header = match (s("path"), s("section")) {
            (p, sec) if !p.is_empty() && !sec.is_empty() => format!("{label} {p} — {sec}"),
            (p, _) if !p.is_empty() => format!("{label} {p}"),
            _ => label.clone(),
        };
        let sep_cost = if parts.is_empty() {
            0
        } else {
            estimate_tokens(sep)
        };
        let header_cost = estimate_tokens(&header) + 1;
        let room = budget.saturating_sub(used + sep_cost + header_cost);
        let limit = per_block.min(room);
        // A block cut to almost nothing is worth less than its header.
        if limit < 16.min(estimate_tokens(&text)) || limit == 0 {
            dropped += 1;
            continue;
        }
        let (body, truncated) = truncate(&text, limit);
        let block = format!("{header}\n{body}");
        used += sep_cost + estimate_tokens(&block);
        parts.push(block);
        let path = s("path");
        if !path.is_empty() && !sources.contains(&path) {
            sources.push(path.clone());
        }
        let mut b = json!({
            "label": label,
            "n": n,
            "id": s("id"),
            "path": path,
            "title": s("title"),
            "section": s("section"),
            "text": body,
            "truncated": truncated,
        });
        if let Some(score) = h.get("score") {
            b["score"] = score.clone();
        }
        blocks.push(b);
    }
    Ok(json!({
        "text": parts.join(sep),
        "tokens": used,
        "blocks": blocks,
        "sources": sources,
        "dropped": dropped,
        "duplicates": duplicates,
    }))
}

use crate::core::catalog::{input, spec, Spec, BOOLEAN, INTEGER, LIST_OR_MAPPING, STRING};

/// The contracts of `context.*`.
pub const SPECS: &[Spec] = &[spec(
    "context",
    "pack",
    "Packs hits into a prompt-sized text with labels.",
)
.inputs(&[
    input("hits", LIST_OR_MAPPING, "The hits, or a search output.").required(),
    input("budget_tokens", INTEGER, "Token budget (characters / 4).").default("2000"),
    input("max_blocks", INTEGER, "At most this many blocks.").default("10"),
    input(
        "max_block_tokens",
        INTEGER,
        "At most this many tokens per block.",
    )
    .default("500"),
    input("dedupe", BOOLEAN, "Skip repeated ids and texts.").default("true"),
    input(
        "label",
        STRING,
        "Block label: `{n}`, `{path}`, `{section}`, `{title}`, `{id}`.",
    )
    .default("'[{n}]'"),
    input("text_field", STRING, "The hit field holding the text.").default("text"),
    input(
        "separator",
        STRING,
        "Between blocks (default a blank line).",
    ),
])
.returns("{text, tokens, blocks, sources, dropped, duplicates}")];

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(v: &Value) -> Result<Value, ActionError> {
        super::pack(&Args::new(&SPECS[0], v)?)
    }

    fn hit(id: &str, path: &str, text: &str) -> Value {
        json!({"id": id, "path": path, "section": "S", "text": text})
    }

    #[test]
    fn respects_budget_blocks_and_dedupe() {
        let long = "word ".repeat(400); // 2000 chars = 500 tokens
        let hits = json!([
            hit("a", "a.md", "alpha"),
            hit("a", "a.md", "alpha"),
            hit("b", "b.md", &long),
            hit("c", "c.md", "gamma")
        ]);
        let out =
            pack(&json!({"hits": hits, "budget_tokens": 100, "max_block_tokens": 60})).unwrap();
        assert_eq!(out["duplicates"], 1);
        assert!(out["tokens"].as_u64().unwrap() <= 100, "{out}");
        assert_eq!(out["blocks"][1]["truncated"], true);
        assert!(out["text"]
            .as_str()
            .unwrap()
            .starts_with("[1] a.md — S\nalpha\n\n[2] b.md — S\nword"));
        assert_eq!(out["sources"], json!(["a.md", "b.md", "c.md"]));
        let out = pack(&json!({"hits": hits, "max_blocks": 1, "label": "({path})"})).unwrap();
        assert_eq!(out["blocks"].as_array().unwrap().len(), 1);
        assert_eq!(out["dropped"], 2);
        assert_eq!(out["blocks"][0]["label"], "(a.md)");
        // A flag rendered as text reads as the flag (it was ignored).
        let out = pack(&json!({"hits": hits, "dedupe": "false"})).unwrap();
        assert_eq!(out["duplicates"], 0, "{out}");
        assert!(pack(&json!({"hits": hits, "dedupe": "no"})).is_err());
    }
}
