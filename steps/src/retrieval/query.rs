//! `query.analyze`: a rule-based reading of a search question (no LLM):
//! terms, quoted phrases, operators, entities by capitalisation, relative
//! dates resolved to a range, and a coarse kind. Its output also carries
//! the fields the LifeOS seed asks its model for (`search_terms`,
//! `entities`, `time_context`, `query_type`, `expected_location`).

use crate::core::{
    action::{Action, Call},
    args::Args,
    error::ActionError,
};
use crate::retrieval::syntax::{parse, resolve_date, DateRange};
use async_trait::async_trait;
use chrono::{Datelike, NaiveDate};
use serde_json::{json, Value};

pub struct QueryAction;

#[async_trait]
impl Action for QueryAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        match call.method {
            "analyze" => analyze(&Args::of(SPECS, call, &inputs)?, call.caps.clock.as_ref()),
            m => Err(ActionError::Input(format!("unknown method `query.{m}`"))),
        }
    }
}

const STOP: &[&str] = &[
    "a",
    "about",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "for",
    "from",
    "had",
    "has",
    "have",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "know",
    "me",
    "my",
    "of",
    "on",
    "or",
    "our",
    "please",
    "should",
    "show",
    "so",
    "tell",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "to",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "list",
    "find",
    "give",
    "summarize",
    "summarise",
    "summary",
    "anything",
    "something",
    "get",
    "got",
    "s",
];

/// Words that start questions and commands: capitalised, but not entities.
const LEADING: &[&str] = &[
    "What",
    "When",
    "Where",
    "Who",
    "Why",
    "How",
    "Which",
    "Is",
    "Are",
    "Do",
    "Does",
    "Did",
    "Can",
    "Could",
    "Should",
    "Show",
    "List",
    "Find",
    "Give",
    "Tell",
    "Summarize",
    "Summarise",
    "Any",
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "For",
    "My",
    "I",
];

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Relative time phrases in running text, as the `date:` value they mean.
const TIME_PHRASES: &[(&str, &str)] = &[
    ("last week", "last-week"),
    ("past week", "last-7-days"),
    ("this week", "this-week"),
    ("next week", "next-week"),
    ("last month", "last-month"),
    ("this month", "this-month"),
    ("next month", "next-month"),
    ("last year", "last-year"),
    ("this year", "this-year"),
    ("yesterday", "yesterday"),
    ("today", "today"),
    ("tonight", "today"),
    ("tomorrow", "tomorrow"),
];

/// A time expression in running text: (matched words, range).
fn time_in_text(lower: &str, today: NaiveDate) -> Option<(String, DateRange)> {
    for (phrase, expr) in TIME_PHRASES {
        if contains_words(lower, phrase) {
            return Some((phrase.to_string(), resolve_date(expr, today)?));
        }
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    if let Some((said, r)) = crate::retrieval::dates::day_range(&words, today) {
        return Some((said.join(" "), r));
    }
    for (i, w) in words.iter().enumerate() {
        // "last 10 days", "past 3 days"
        if (*w == "last" || *w == "past") && i + 2 < words.len() && words[i + 2].starts_with("day")
        {
            if let Ok(n) = words[i + 1].parse::<i64>() {
                let r = resolve_date(&format!("last-{n}-days"), today)?;
                return Some((format!("{w} {} {}", words[i + 1], words[i + 2]), r));
            }
        }
        if let Some(r) = resolve_date(w, today).filter(|_| w.len() == 10 && w.contains('-')) {
            return Some((w.to_string(), r));
        }
        // "in March", "March 2027" ("may" only with a year or "in" before it).
        if let Some(m) = MONTHS.iter().position(|m| m == w) {
            let year = words
                .get(i + 1)
                .and_then(|y| y.parse::<i32>().ok())
                .filter(|y| (1900..3000).contains(y));
            let after_in = i > 0 && words[i - 1] == "in";
            if year.is_some() || after_in || (*w != "may" && *w != "march") {
                let y = year.unwrap_or(today.year());
                let spec = format!("{y}-{:02}", m + 1);
                let (f, t) = crate::retrieval::syntax::span(&spec)?;
                let said = match year {
                    Some(y) => format!("{w} {y}"),
                    None => w.to_string(),
                };
                return Some((
                    said,
                    DateRange {
                        from: Some(f),
                        to: Some(t),
                    },
                ));
            }
        }
    }
    None
}

fn contains_words(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after = hay[i + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
        before && after
    })
}

/// Runs of capitalised words (`Project Apollo`, `John`, `API`), skipping
/// question words and the pronoun `I`.
fn entities(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let flush = |cur: &mut Vec<&str>, out: &mut Vec<String>| {
        if !cur.is_empty() {
            let e = cur.join(" ");
            if !out.contains(&e) {
                out.push(e);
            }
            cur.clear();
        }
    };
    let mut sentence_start = true;
    for raw in text.split_whitespace() {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'');
        let w = w.strip_suffix("'s").unwrap_or(w);
        let capital = w.chars().next().is_some_and(char::is_uppercase);
        let leading = LEADING.contains(&w) && (sentence_start || cur.is_empty());
        let is_month = crate::retrieval::dates::is_calendar_word(&w.to_lowercase());
        if capital && !leading && !is_month && w.len() > 1 {
            cur.push(w);
        } else {
            flush(&mut cur, &mut out);
        }
        // Punctuation after a word ends the entity.
        if raw.ends_with([',', '.', '?', '!', ';', ':']) {
            flush(&mut cur, &mut out);
        }
        sentence_start = raw.ends_with(['.', '?', '!']);
    }
    flush(&mut cur, &mut out);
    out
}

/// What a question asks for: `summary`, `list`, `exploratory` or `factual`.
pub(crate) fn kind(lower: &str, has_time: bool) -> &'static str {
    let starts = |p: &[&str]| p.iter().any(|x| lower.starts_with(x));
    if starts(&[
        "summarize",
        "summarise",
        "summary",
        "give me an overview",
        "overview",
        "recap",
    ]) || contains_words(lower, "summary")
        || contains_words(lower, "overview")
    {
        "summary"
    } else if starts(&[
        "list",
        "show",
        "which",
        "what are",
        "what were",
        "what meetings",
        "what tasks",
        "all ",
    ]) || contains_words(lower, "all my")
        || (has_time && starts(&["what", "any"]) && lower.contains("s "))
    {
        "list"
    } else if starts(&[
        "what do i know",
        "tell me about",
        "what about",
        "explore",
        "anything about",
    ]) || lower.contains("know about")
        || ((lower.starts_with("how is") || lower.starts_with("how's")) && lower.contains(" going"))
    {
        "exploratory"
    } else {
        "factual"
    }
}

pub fn analyze(a: &Args, clock: &dyn crate::core::time::Clock) -> Result<Value, ActionError> {
    let q = a.str("query")?.ok_or_else(|| a.missing("query"))?;
    // Its declared default, the word `today`, is the clock's.
    let today = a.today("today", clock)?;
    let operators = a.bool("operators")?;
    let p = parse(q, operators, today);
    let free = p.terms.join(" ");
    let lower = free.to_lowercase();
    let time = match p.date {
        Some(r) => Some(("date operator".to_string(), r)),
        None => time_in_text(&lower, today),
    };
    let time_words: Vec<String> = time
        .as_ref()
        .map(|(said, _)| said.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let mut terms: Vec<String> = Vec::new();
    for t in &p.terms {
        let w: String = t
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        let w = w.strip_suffix("'s").map(str::to_string).unwrap_or(w);
        if w.len() < 2
            || STOP.contains(&w.as_str())
            || time_words.contains(&w)
            || terms.contains(&w)
        {
            continue;
        }
        terms.push(w);
    }
    let mut search_terms = terms.clone();
    search_terms.extend(p.phrases.iter().map(|s| s.to_lowercase()));
    let mut ents = entities(&free);
    for ph in &p.phrases {
        if ph.chars().next().is_some_and(char::is_uppercase) && !ents.contains(ph) {
            ents.push(ph.clone());
        }
    }
    let k = kind(&q.trim().to_lowercase(), time.is_some());
    let time_json = time.as_ref().map(|(said, r)| {
        let mut v = r.to_json();
        v["expression"] = json!(said);
        v
    });
    let mut operators_json = serde_json::Map::new();
    if !p.paths.is_empty() {
        operators_json.insert("in".into(), json!(p.paths));
    }
    for (k, v) in &p.fields {
        operators_json.insert(k.clone(), json!(v));
    }
    if let Some(d) = &p.date {
        operators_json.insert("date".into(), d.to_json());
    }
    // Text for `kb.search`: the free words and phrases without the operators
    // (those are in `filters`/`paths`) and without the time words.
    let mut search_text: Vec<String> = terms.clone();
    search_text.extend(p.phrases.iter().map(|s| format!("\"{s}\"")));
    search_text.extend(p.prefixes.iter().map(|s| format!("{s}*")));
    search_text.extend(p.excluded.iter().map(|s| format!("-{s}")));
    let mut filters = p.filters_json();
    if let Some((_, r)) = &time {
        filters["date"] = r.to_json();
    }
    Ok(json!({
        "query": q,
        "terms": terms,
        "phrases": p.phrases,
        "prefixes": p.prefixes,
        "excluded": p.excluded,
        "operators": operators_json,
        "paths": p.paths,
        "filters": filters,
        "entities": ents,
        "time": time_json,
        "kind": k,
        "search_text": search_text.join(" "),
        // The seed's analysis shape.
        "search_terms": search_terms,
        "time_context": time.as_ref().map(|(said, _)| json!(said)).unwrap_or(Value::Null),
        "query_type": k,
        "expected_location": p.paths.first().map(|s| json!(s)).unwrap_or(Value::Null),
    }))
}

use crate::core::catalog::{alias, input, spec, Spec, BOOLEAN, STRING};

/// The contracts of `query.*`.
pub const SPECS: &[Spec] = &[spec("query", "analyze", "Reads a question: terms, entities, dates, kind (rules, no model).")
    .inputs(&[
        input("query", STRING, "The question.").required(),
        input("today", STRING, "The date relative dates count from (YYYY-MM-DD).").default("today"),
        alias("now", "today"),
        input("operators", BOOLEAN, "Read `tag:`, `type:`, `\"phrases\"`, `-words`.").default("true"),
    ])
    .returns("{query, terms, phrases, prefixes, excluded, operators, paths, filters, entities, time, kind, search_text, search_terms, time_context, query_type, expected_location}")];

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze_now(inputs: &Value) -> Result<Value, ActionError> {
        analyze(
            &Args::new(&SPECS[0], inputs)?,
            &crate::core::time::SystemClock,
        )
    }

    fn a(q: &str) -> Value {
        analyze_now(&json!({"query": q, "today": "2026-11-20"})).unwrap()
    }

    #[test]
    fn reads_questions() {
        let v = a("What is the API key for Apollo?");
        assert_eq!(v["terms"], json!(["api", "key", "apollo"]));
        assert_eq!(v["entities"], json!(["API", "Apollo"]));
        assert_eq!(v["kind"], "factual");
        assert_eq!(v["time"], Value::Null);

        let v = a("What meetings did I have with John Carter last week?");
        assert_eq!(v["entities"], json!(["John Carter"]));
        assert_eq!(v["time"]["from"], "2026-11-09");
        assert_eq!(v["time"]["to"], "2026-11-15");
        assert_eq!(v["time_context"], "last week");
        assert_eq!(v["terms"], json!(["meetings", "john", "carter"]));
        assert_eq!(v["kind"], "list");

        assert_eq!(a("Summarize the Hermes project")["kind"], "summary");
        assert_eq!(a("What do I know about Priya?")["kind"], "exploratory");
        assert_eq!(a("List all my work tasks")["kind"], "list");
        let v = a("trip in May");
        assert_eq!(v["time"]["from"], "2026-05-01");
        // Day-level dates (2026-11-20 is a Friday) and open ranges.
        let v = a("What did John say on November 17?");
        assert_eq!(
            (&v["time"]["from"], &v["time"]["to"]),
            (&json!("2026-11-17"), &json!("2026-11-17"))
        );
        assert_eq!(v["time_context"], "november 17");
        assert_eq!(v["entities"], json!(["John"]));
        let v = a("What is due Dec 1?");
        assert_eq!(v["time"]["from"], "2026-12-01");
        assert_eq!(v["entities"], json!([]), "a month is not an entity");
        assert_eq!(v["terms"], json!(["due"]));
        let v = a("What meetings do I have next Friday?");
        assert_eq!(v["time"]["from"], "2026-11-27");
        assert_eq!(v["entities"], json!([]));
        let v = a("tasks due before 2026-12-01");
        assert_eq!(
            (&v["time"]["from"], &v["time"]["to"]),
            (&Value::Null, &json!("2026-11-30"))
        );
        assert_eq!(v["filters"]["date"]["to"], "2026-11-30");
    }

    #[test]
    fn reads_operators_and_phrases() {
        let v = a(r#"in:work type:task tag:urgent date:today "rate limit" deadline"#);
        assert_eq!(v["paths"], json!(["work"]));
        assert_eq!(v["filters"]["type"], "task");
        assert_eq!(v["filters"]["tags"], "urgent");
        assert_eq!(v["filters"]["date"]["from"], "2026-11-20");
        assert_eq!(v["phrases"], json!(["rate limit"]));
        assert_eq!(v["search_text"], r#"deadline "rate limit""#);
        assert_eq!(v["expected_location"], "work");
        assert!(analyze_now(&json!({"query": 3})).is_err());
    }
}
