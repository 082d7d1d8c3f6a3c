//! The verifier: an answer (from any model) stands only if what it states
//! can be found in the evidence it cites.
//!
//! - every cited id exists, and an answer that says it found something
//!   cites at least one item;
//! - every number, date, time, amount, percentage, key- or code-like token,
//!   e-mail, URL and phone number in the answer occurs in the cited items
//!   (normalised: `2 December` = `2026-12-02`, `1,650` = `1650`), or in the
//!   question;
//! - every proper name in the answer occurs in the cited items, their
//!   headings and titles, or the question;
//! - the names the question asks about occur in the cited items (asking
//!   about project X, evidence only about project Y is no answer);
//! - any other value-like token of the answer (letters with digits, an `@`,
//!   a scheme such as `javascript:`, a bare domain or path, letters of two
//!   scripts) occurs, exactly, in the cited items or the question; keys
//!   and codes are compared in their exact case.
//!
//! The answer and the evidence are compared as normalised text: NFKC (a
//! fullwidth `＠` is `@`) without invisible format characters (zero-width
//! spaces and joiners, soft hyphens, direction marks). A confusable letter
//! of another script stays itself, so a key with a Cyrillic `а` is not the
//! key with a Latin `a`.

use super::evidence::{self, Item, Unit};
use super::question::Question;
use super::spans::{self, Kind};
use super::text;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

/// Text as the verifier compares it (see the module docs).
pub fn normalised(s: &str) -> String {
    s.nfkc().filter(|c| !invisible(*c)).collect()
}

fn invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// Whether a token of an answer names a value that must be found verbatim:
/// letters with digits, an `@`, a scheme (`x:y`), a domain or path, or
/// letters of more than one script.
fn value_like(token: &str) -> bool {
    let letters = token.chars().any(char::is_alphabetic);
    let digits = token.chars().any(|c| c.is_ascii_digit());
    let inner = |c: char| {
        token
            .char_indices()
            .any(|(i, x)| x == c && i > 0 && i + c.len_utf8() < token.len())
    };
    let latin = token.chars().any(|c| c.is_ascii_alphabetic());
    // Greek, Cyrillic, Armenian: the scripts whose letters pass for Latin.
    let other_script = token
        .chars()
        .any(|c| c.is_alphabetic() && matches!(c as u32, 0x0370..=0x058F));
    (letters && digits)
        || token.chars().any(|c| c.is_numeric() && !c.is_ascii_digit())
        || token.contains('@')
        || (letters && (inner(':') || inner('/') || inner('\\')))
        || (inner('.')
            && token
                .rsplit('.')
                .next()
                .is_some_and(|t| t.chars().any(char::is_alphabetic))
            && token
                .split('.')
                .next()
                .is_some_and(|h| h.chars().any(char::is_alphabetic)))
        || (latin && other_script)
}

/// One reason an answer fails, worded for the model's second try and for
/// the user's record.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem(pub String);

/// What a model answered, read from its reply.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    pub answer: String,
    pub found: bool,
    pub citations: Vec<String>,
}

impl Claimed {
    /// Reads `{answer, found, citations}` (the object, or JSON text of it;
    /// plain text is an answer that cites nothing).
    pub fn read(v: &Value) -> Claimed {
        let obj = match v {
            Value::Null => {
                return Claimed {
                    answer: String::new(),
                    found: true,
                    citations: Vec::new(),
                }
            }
            Value::String(s) => match serde_json::from_str::<Value>(s.trim()) {
                Ok(o @ Value::Object(_)) => o,
                _ => {
                    return Claimed {
                        answer: s.trim().to_string(),
                        found: true,
                        citations: Vec::new(),
                    }
                }
            },
            o => o.clone(),
        };
        let citations = match obj.get("citations").or_else(|| obj.get("lines")) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|c| match c {
                    Value::String(s) => Some(s.trim().trim_matches(['[', ']']).to_string()),
                    Value::Number(n) => Some(format!("E{n}")),
                    Value::Object(o) => o.get("id").and_then(Value::as_str).map(str::to_string),
                    _ => None,
                })
                .collect(),
            Some(Value::String(s)) => s
                .split(|c: char| c == ',' || c.is_whitespace())
                .map(|c| c.trim().trim_matches(['[', ']']).to_string())
                .filter(|c| !c.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        Claimed {
            answer: obj
                .get("answer")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .to_string(),
            found: obj.get("found").and_then(Value::as_bool).unwrap_or(true),
            citations,
        }
    }
}

/// Checks `claimed` against the evidence. Empty: it stands.
pub fn check(q: &Question, items: &[(String, Item, Value)], claimed: &Claimed) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !claimed.found {
        return problems;
    }
    if claimed.answer.is_empty() {
        problems.push(Problem("the answer is empty".into()));
        return problems;
    }
    let answer = normalised(&claimed.answer);
    let mut cited: Vec<&(String, Item, Value)> = Vec::new();
    for id in &claimed.citations {
        match items.iter().find(|(i, _, _)| i.eq_ignore_ascii_case(id)) {
            Some(it) => cited.push(it),
            None => problems.push(Problem(format!(
                "it cites {id}, which is not in the evidence"
            ))),
        }
    }
    if cited.is_empty() {
        problems.push(Problem("it cites no evidence".into()));
        return problems;
    }
    let units: Vec<&Unit> = cited
        .iter()
        .flat_map(|(_, it, _)| it.units.iter())
        .collect();
    let mut evidence_spans: Vec<spans::Span> = units.iter().flat_map(|u| u.spans.clone()).collect();
    evidence_spans.extend(spans::find(&q.text));
    // What the cited lines say, as written (values are found in it
    // exactly) and in lower case (names).
    let mut written = String::new();
    for u in &units {
        written.push_str(&u.text);
        written.push('\n');
        for h in &u.heading_path {
            written.push_str(h);
            written.push('\n');
        }
    }
    for (_, _, v) in &cited {
        if let Some(p) = v.get("path").and_then(Value::as_str) {
            written.push_str(p);
            written.push('\n');
        }
    }
    written.push_str(&q.text);
    let written = normalised(&written);
    let context_text = written.to_lowercase();
    let answer_spans = spans::find(&answer);
    for mut sp in answer_spans.clone() {
        if sp.kind == Kind::Name {
            // A capital that only starts a sentence ("Call", "Ask Priya")
            // is not part of a name.
            let before = answer[..sp.start].trim_end();
            let starts_sentence = before.is_empty() || before.ends_with(['.', '!', '?', ':', '\n']);
            if starts_sentence {
                let first = sp.text.split_whitespace().next().unwrap_or("").to_string();
                if !name_in(&first, &context_text) {
                    match sp.text.split_once(' ') {
                        Some((_, rest)) => sp.text = rest.trim().to_string(),
                        None => continue,
                    }
                }
            }
        }
        let ok = match sp.kind {
            Kind::Name => name_in(&sp.text, &context_text),
            // A key or code stands only as written, case and all.
            Kind::Code => written.contains(sp.text.as_str()),
            _ => {
                evidence_spans.iter().any(|e| spans::same_value(&sp, e)) || {
                    // A year or day number alone may stand inside a date.
                    sp.kind == Kind::Number && number_in_dates(&sp.norm, &evidence_spans)
                }
            }
        };
        if !ok {
            let what = match sp.kind {
                Kind::Name => "the name",
                Kind::Date => "the date",
                Kind::Time => "the time",
                Kind::Email => "the e-mail address",
                Kind::Url => "the link",
                Kind::Phone => "the phone number",
                Kind::Code => "the value",
                _ => "the number",
            };
            problems.push(Problem(format!(
                "{what} “{}” is not in the cited lines",
                sp.text
            )));
        }
    }
    // Value-like tokens no span reads (a bare domain, `javascript:…`, a
    // crypto address, a key with a letter of another script) must be there
    // as written.
    let mut at = 0;
    for raw in answer.split_whitespace() {
        let start = at + answer[at..].find(raw).unwrap_or(0);
        at = start + raw.len();
        let edge = |c: char| {
            c.is_ascii_punctuation()
                && !matches!(
                    c,
                    '/' | '@' | '#' | '$' | '%' | '&' | '+' | '=' | '_' | '~' | '\\'
                )
                || matches!(c, '“' | '”' | '‘' | '’' | '«' | '»')
        };
        let mut trimmed = raw.trim_start_matches(edge);
        // A closing parenthesis ends the token when it closes one of its own.
        while let Some(last) = trimmed.chars().last().filter(|c| edge(*c)) {
            if last == ')' && trimmed.matches('(').count() >= trimmed.matches(')').count() {
                break;
            }
            trimmed = &trimmed[..trimmed.len() - last.len_utf8()];
        }
        if trimmed.is_empty() || !value_like(trimmed) {
            continue;
        }
        let offset = start + raw.find(trimmed).unwrap_or(0);
        let end = offset + trimmed.len();
        let read = answer_spans
            .iter()
            .any(|s| s.start <= offset && end <= s.end);
        if !read && !written.contains(trimmed) {
            problems.push(Problem(format!(
                "the value “{trimmed}” is not in the cited lines"
            )));
        }
    }
    // Names the span finder does not read: a capitalised or all-capitals
    // word of any script (`Łukasz`, `MALLORY`), alone at the start of a
    // sentence or after `Owner:` too; a sentence may still start with a
    // common word ("Yes", "Call …").
    for (offset, word) in words_of(&answer) {
        if word.chars().count() < 2
            || !word.chars().any(char::is_uppercase)
            || word.chars().any(|c| c.is_numeric())
        {
            continue;
        }
        // A word of a date, time or amount was checked as that value.
        let end = offset + word.len();
        if answer_spans
            .iter()
            .any(|s| s.kind != Kind::Name && s.start <= offset && end <= s.end)
        {
            continue;
        }
        let lower = word.to_lowercase();
        if text::contains_phrase(&context_text, &lower) {
            continue;
        }
        let capitalised_only = word.chars().skip(1).all(|c| !c.is_uppercase());
        let before = answer[..offset].trim_end();
        let starts_sentence = before.is_empty()
            || before.ends_with(['.', '!', '?', ':', ';', '\n', '-', '*', '“', '"', '(']);
        if starts_sentence
            && capitalised_only
            && (text::is_filler(&lower) || SENTENCE_STARTERS.contains(&lower.as_str()))
        {
            continue;
        }
        if problems.iter().any(|p| p.0.contains(word)) {
            continue;
        }
        problems.push(Problem(format!(
            "the name “{word}” is not in the cited lines"
        )));
    }
    // Numbers in words ("five thousand euros") stand only when the cited
    // lines say that number, in words or in digits.
    for (words, value) in numbers_in_words(&answer) {
        let said = text::contains_phrase(&context_text, &words.to_lowercase())
            || spans::find(&value.to_string())
                .first()
                .is_some_and(|v| evidence_spans.iter().any(|e| spans::same_value(v, e)));
        if !said {
            problems.push(Problem(format!(
                "the number “{words}” is not in the cited lines"
            )));
        }
    }
    // The names the question asks about must be in what is cited.
    let mut q2 = q.clone();
    let all: Vec<Unit> = items
        .iter()
        .flat_map(|(_, it, _)| it.units.clone())
        .collect();
    evidence::mark_entities(&mut q2, &all);
    for t in q2.terms.iter().filter(|t| t.entity) {
        let covered = units.iter().any(|u| {
            u.stems.iter().any(|s| t.matches(s)) || u.context.iter().any(|s| t.matches(s))
        });
        if !covered {
            problems.push(Problem(format!(
                "the cited lines are not about “{}”, which the question asks about",
                t.word
            )));
        }
    }
    problems
}

/// Whether `answer` states `value` (in any spelling of it).
pub fn states_value(answer: &str, value: &str) -> bool {
    let want = spans::find(value);
    let Some(w) = want.iter().find(|s| s.kind != Kind::Name).or(want.first()) else {
        return answer.to_lowercase().contains(&value.to_lowercase());
    };
    answer.to_lowercase().contains(&value.to_lowercase())
        || spans::find(answer).iter().any(|a| spans::same_value(a, w))
}

/// A name (a capitalised word or words) in `context` (lower case), each of
/// its words as a whole word.
fn name_in(name: &str, context: &str) -> bool {
    let lower = name.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            w.len() > 1 && !text::is_filler(w) && !["dr", "mr", "mrs", "ms", "prof"].contains(w)
        })
        .collect();
    words.is_empty() || words.iter().all(|w| text::contains_phrase(context, w))
}

/// Common English words that may start a sentence of an answer with a
/// capital without being a name (beyond [`text::FILLER`]).
const SENTENCE_STARTERS: &[&str] = &[
    "yes",
    "no",
    "not",
    "none",
    "nothing",
    "nobody",
    "it",
    "its",
    "they",
    "their",
    "them",
    "we",
    "our",
    "you",
    "your",
    "he",
    "his",
    "she",
    "her",
    "my",
    "mine",
    "according",
    "based",
    "as",
    "if",
    "then",
    "so",
    "but",
    "also",
    "only",
    "both",
    "each",
    "every",
    "all",
    "some",
    "any",
    "one",
    "first",
    "second",
    "next",
    "last",
    "finally",
    "today",
    "tomorrow",
    "yesterday",
    "now",
    "currently",
    "still",
    "already",
    "probably",
    "maybe",
    "perhaps",
    "unfortunately",
    "sorry",
    "note",
    "see",
    "use",
    "run",
    "call",
    "ask",
    "check",
    "open",
    "go",
    "try",
    "set",
    "add",
    "remove",
    "make",
    "take",
    "send",
    "pay",
    "book",
    "bring",
    "buy",
    "do",
    "don't",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "may",
    "might",
    "must",
    "has",
    "have",
    "had",
    "was",
    "were",
    "is",
    "are",
    "be",
    "there",
    "here",
    "after",
    "before",
    "since",
    "until",
    "during",
    "between",
    "around",
    "about",
    "over",
    "under",
    "per",
    "via",
    "total",
    "about",
    "approximately",
    "roughly",
    "just",
    "answer",
    "summary",
    "owner",
    "status",
    "done",
    "open",
    "pending",
];

/// The words of `text` (runs of letters, digits, `'` and `-`) with their
/// byte offsets.
fn words_of(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    let is_word = |c: char| c.is_alphanumeric() || c == '\'' || c == '’' || c == '-';
    for (i, c) in text.char_indices() {
        match (is_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, text[s..i].trim_matches(['-', '\'', '’'])));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text[s..].trim_matches(['-', '\'', '’'])));
    }
    out.retain(|(_, w)| !w.is_empty());
    out
}

/// Runs of English number words in `text` ("five thousand", "twenty-one"),
/// with their value; a lone "one" (also a pronoun) is not counted.
fn numbers_in_words(text: &str) -> Vec<(String, u64)> {
    fn unit(w: &str) -> Option<u64> {
        const SMALL: [&str; 20] = [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ];
        const TENS: [&str; 8] = [
            "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
        ];
        if let Some(i) = SMALL.iter().position(|s| *s == w) {
            return Some(i as u64);
        }
        TENS.iter()
            .position(|s| *s == w)
            .map(|i| 20 + 10 * i as u64)
    }
    fn scale(w: &str) -> Option<u64> {
        match w {
            "hundred" => Some(100),
            "thousand" => Some(1_000),
            "million" => Some(1_000_000),
            "billion" => Some(1_000_000_000),
            "dozen" => Some(12),
            _ => None,
        }
    }
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let (mut total, mut current) = (0u64, 0u64);
    let mut flush = |run: &mut Vec<&str>, total: &mut u64, current: &mut u64| {
        let lone_one = run.len() == 1 && run[0].eq_ignore_ascii_case("one");
        if !run.is_empty() && !lone_one {
            out.push((run.join(" "), *total + *current));
        }
        run.clear();
        (*total, *current) = (0, 0);
    };
    for (_, word) in words_of(text) {
        let parts: Vec<String> = word.split('-').map(str::to_lowercase).collect();
        let mut any = false;
        for p in &parts {
            if let Some(u) = unit(p) {
                current = current.saturating_add(u);
                any = true;
            } else if let Some(k) = scale(p) {
                current = current.max(1).saturating_mul(k);
                if k >= 1_000 {
                    total = total.saturating_add(current);
                    current = 0;
                }
                any = true;
            } else if p == "and" && !run.is_empty() {
                any = true;
            }
        }
        if any
            && parts
                .iter()
                .all(|p| unit(p).is_some() || scale(p).is_some() || p == "and")
        {
            run.push(word);
        } else {
            flush(&mut run, &mut total, &mut current);
        }
    }
    flush(&mut run, &mut total, &mut current);
    out.retain(|(words, _)| !words.eq_ignore_ascii_case("and"));
    out
}

fn number_in_dates(n: &str, evidence: &[spans::Span]) -> bool {
    evidence.iter().any(|e| {
        e.kind == Kind::Date
            && e.norm
                .split('-')
                .any(|part| !part.is_empty() && part.trim_start_matches('0') == n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::answer::question::analyze;
    use serde_json::json;

    fn items() -> Vec<(String, Item, Value)> {
        let ev = json!([
            {"id": "E1", "path": "Travel/Lisbon.md", "title": "Lisbon Trip", "heading_path": ["Lisbon Trip", "Booked"],
             "start_line": 12, "end_line": 12, "lines": "12", "score": 1.0, "kind": "item",
             "text": "Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55 (186 EUR return)",
             "units": [{"line": 12, "kind": "item", "checked": true,
                        "text": "Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55 (186 EUR return)"}]},
            {"id": "E2", "path": "Work/Apollo/Key.md", "title": "Apollo API Key", "heading_path": ["Apollo API Key"],
             "start_line": 5, "end_line": 5, "lines": "5", "score": 0.5, "kind": "meta",
             "text": "API key: APOLLO-KEY-7f3a-EXAMPLE",
             "units": [{"line": 5, "kind": "meta", "text": "API key: APOLLO-KEY-7f3a-EXAMPLE"}]}
        ]);
        evidence::from_json(ev.as_array().unwrap())
    }

    fn claim(answer: &str, cites: &[&str]) -> Claimed {
        Claimed {
            answer: answer.into(),
            found: true,
            citations: cites.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn values_in_the_cited_lines_stand_in_any_spelling() {
        let q = analyze("When does my flight to Lisbon leave?");
        let ok = check(
            &q,
            &items(),
            &claim(
                "On 11 March 2027 at 9:40 from Amsterdam, for 186 EUR.",
                &["E1"],
            ),
        );
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn a_value_not_in_the_cited_lines_fails() {
        let q = analyze("When does my flight to Lisbon leave?");
        let p = check(
            &q,
            &items(),
            &claim("It leaves at 10:15 on March 11.", &["E1"]),
        );
        assert_eq!(
            p,
            vec![Problem("the time “10:15” is not in the cited lines".into())]
        );
        // The key is in the evidence, but not in what the answer cites.
        let q = analyze("What is the API key for Apollo?");
        let p = check(&q, &items(), &claim("APOLLO-KEY-7f3a-EXAMPLE", &["E1"]));
        assert!(
            p.iter().any(|x| x.0.contains("APOLLO-KEY-7f3a-EXAMPLE")),
            "{p:?}"
        );
        assert!(p.iter().any(|x| x.0.contains("“apollo”")), "{p:?}");
        // A made-up phone number and a contact URL.
        let p = check(
            &q,
            &items(),
            &claim(
                "Call +1 555 0100 or visit https://evil.example.com",
                &["E2"],
            ),
        );
        assert_eq!(p.len(), 2, "{p:?}");
    }

    #[test]
    fn citations_must_exist_and_names_must_be_in_the_evidence() {
        let q = analyze("What is the API key for Apollo?");
        let p = check(&q, &items(), &claim("APOLLO-KEY-7f3a-EXAMPLE", &["E9"]));
        assert_eq!(p[0].0, "it cites E9, which is not in the evidence");
        let p = check(
            &q,
            &items(),
            &claim("Ask Priya Natarajan for APOLLO-KEY-7f3a-EXAMPLE.", &["E2"]),
        );
        assert_eq!(
            p,
            vec![Problem(
                "the name “Priya Natarajan” is not in the cited lines".into()
            )]
        );
        // Asking about Zephyr, an Apollo line is no answer.
        let q = analyze("What is the API key for Zephyr?");
        let p = check(&q, &items(), &claim("APOLLO-KEY-7f3a-EXAMPLE", &["E2"]));
        assert!(p.iter().any(|x| x.0.contains("“zephyr”")), "{p:?}");
    }

    #[test]
    fn values_that_only_look_like_the_notes_are_refused() {
        // Issue 49 item 7: each of these stood before.
        let q = analyze("What is the API key for Apollo?");
        let refused = [
            (
                "APOLLO-KEY-7f3а-EXAMPLE",
                "the value “APOLLO-KEY-7f3а-EXAMPLE” is not in the cited lines",
            ), // Cyrillic а
            (
                "apollo-key-7f3a-example",
                "the value “apollo-key-7f3a-example” is not in the cited lines",
            ),
            (
                "APOLLO-KEY-7f3a-EXAMPLE; renew it at evil-login.example/renew",
                "the value “evil-login.example/renew” is not in the cited lines",
            ),
            (
                "APOLLO-KEY-7f3a-EXAMPLE, see javascript:alert(1)",
                "the value “javascript:alert(1)” is not in the cited lines",
            ),
            (
                "APOLLO-KEY-7f3a-EXAMPLE; pay to bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh",
                "the value “bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh” is not in the cited lines",
            ),
            (
                "APOLLO-KEY-7f3a-EXAMPLE, mail admin＠evil.example",
                "the e-mail address “admin@evil.example” is not in the cited lines",
            ),
            (
                "APOLLO-KEY-7f3a-EXAMPLE, mail admin@\u{200B}evil.example",
                "the e-mail address “admin@evil.example” is not in the cited lines",
            ),
        ];
        for (answer, problem) in refused {
            let p = check(&q, &items(), &claim(answer, &["E2"]));
            assert!(p.iter().any(|x| x.0 == problem), "{answer}: {p:?}");
        }
        // The key as written, and invisible characters inside it, stand.
        for answer in [
            "APOLLO-KEY-7f3a-EXAMPLE",
            "The key is APOLLO-KEY-7f3a\u{200B}-EXAMPLE.",
        ] {
            let p = check(&q, &items(), &claim(answer, &["E2"]));
            assert!(p.is_empty(), "{answer}: {p:?}");
        }
    }

    #[test]
    fn names_and_numbers_in_any_place_case_script_or_spelling_must_be_cited() {
        // Issue 49 item 7, the rest: each of these stood before.
        let q = analyze("Who owns the Apollo API key?");
        let refused = [
            (
                "Mallory owns it.",
                "the name “Mallory” is not in the cited lines",
            ),
            (
                "Owner: Mallory",
                "the name “Mallory” is not in the cited lines",
            ),
            (
                "MALLORY EVANS owns it",
                "the name “MALLORY” is not in the cited lines",
            ),
            (
                "Łukasz owns APOLLO-KEY-7f3a-EXAMPLE",
                "the name “Łukasz” is not in the cited lines",
            ),
            (
                "It is held by Zoë.",
                "the name “Zoë” is not in the cited lines",
            ),
            (
                "It costs five thousand euros",
                "the number “five thousand” is not in the cited lines",
            ),
            (
                "It costs twenty-one dollars",
                "the number “twenty-one” is not in the cited lines",
            ),
            (
                "The key is ٣٤٥",
                "the number “٣٤٥” is not in the cited lines",
            ),
        ];
        for (answer, problem) in refused {
            let p = check(&q, &items(), &claim(answer, &["E2"]));
            assert!(p.iter().any(|x| x.0 == problem), "{answer}: {p:?}");
        }
        // Common words that start a sentence, the cited names in any case,
        // and numbers the lines hold in digits, stand.
        let q = analyze("When does my flight to Lisbon leave?");
        for answer in [
            "Yes. It leaves Amsterdam at 09:40.",
            "Note: LISBON flights leave at 09:40 on 11 March.",
            "One hundred eighty-six EUR, return.",
            "It is one flight at 09:40.",
        ] {
            let p = check(&q, &items(), &claim(answer, &["E1"]));
            assert!(p.is_empty(), "{answer}: {p:?}");
        }
        assert_eq!(
            numbers_in_words("about five thousand and twenty, or one"),
            [("five thousand and twenty".to_string(), 5020)]
        );
    }

    #[test]
    fn replies_are_read_as_objects_or_json_text() {
        let c = Claimed::read(&json!(
            "{\"answer\": \"x\", \"found\": false, \"citations\": [\"E2\", 3]}"
        ));
        assert_eq!((c.answer.as_str(), c.found), ("x", false));
        assert_eq!(c.citations, ["E2", "E3"]);
        let c = Claimed::read(&json!("just text"));
        assert!(c.found && c.citations.is_empty());
    }
}
