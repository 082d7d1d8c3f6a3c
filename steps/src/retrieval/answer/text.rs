//! Words of questions and evidence, compared the way the index compares
//! them: lower-cased and stemmed (English). Questions also lose the words
//! that shape a question rather than say what it is about.

use std::cell::RefCell;
use tantivy::tokenizer::{
    Language, LowerCaser, SimpleTokenizer, Stemmer, TextAnalyzer, TokenStream,
};

thread_local! {
    static ANALYZER: RefCell<TextAnalyzer> = RefCell::new(
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(Stemmer::new(Language::English))
            .build(),
    );
}

/// The stems of `text`'s words, in order (repeats kept).
pub fn stems(text: &str) -> Vec<String> {
    ANALYZER.with(|a| {
        let mut a = a.borrow_mut();
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    })
}

/// One word's stem.
pub fn stem(word: &str) -> String {
    stems(word).into_iter().next().unwrap_or_default()
}

/// Words that carry no topic in a question: question words, pronouns,
/// auxiliaries, articles and prepositions, and verbs that questions use for
/// anything ("what do I need", "how is it going").
pub const FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "and",
    "or",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "from",
    "with",
    "about",
    "by",
    "into",
    "than",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "is",
    "are",
    "was",
    "be",
    "what",
    "whats",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "which",
    "why",
    "how",
    "i",
    "im",
    "me",
    "my",
    "mine",
    "we",
    "us",
    "our",
    "you",
    "your",
    "he",
    "him",
    "his",
    "she",
    "her",
    "it",
    "its",
    "they",
    "them",
    "their",
    "do",
    "does",
    "did",
    "done",
    "have",
    "has",
    "had",
    "am",
    "were",
    "been",
    "can",
    "could",
    "should",
    "would",
    "shall",
    "may",
    "might",
    "must",
    "will",
    "get",
    "got",
    "much",
    "many",
    "please",
    "tell",
    "know",
    "any",
    "some",
    "ever",
    "still",
    "again",
    "s",
    "t",
    "ll",
    "d",
    "need",
    "needs",
    "say",
    "said",
    "go",
    "going",
    "goes",
    "like",
    "likes",
    "supposed",
    "so",
    "if",
    "all",
    "also",
    "just",
    "very",
    "really",
    "up",
    "out",
    "happen",
    "happens",
    "thing",
    "things",
    "anything",
    "something",
    "note",
    "notes",
];

/// Whether `word` (lower case) is [`FILLER`].
pub fn is_filler(word: &str) -> bool {
    FILLER.contains(&word)
}

/// Words with the sense of "not yet done" in a question ("still open",
/// "not reach", "left to do").
pub fn asks_for_open_items(lower_question: &str) -> bool {
    [
        "still open",
        "open",
        "pending",
        "not reach",
        "not reached",
        "didn't reach",
        "did not reach",
        "not done",
        "not finish",
        "left to do",
        "to do",
        "todo",
        "outstanding",
        "unfinished",
        "missed",
        "miss",
        "not yet",
    ]
    .iter()
    .any(|p| contains_phrase(lower_question, p))
}

/// Words with the sense of "already done" in a question.
pub fn asks_for_done_items(lower_question: &str) -> bool {
    !asks_for_open_items(lower_question)
        && [
            "done",
            "finished",
            "completed",
            "reached",
            "achieved",
            "ticked off",
        ]
        .iter()
        .any(|p| contains_phrase(lower_question, p))
}

/// `phrase` in `hay` as whole words (both lower case).
pub fn contains_phrase(hay: &str, phrase: &str) -> bool {
    let mut start = 0;
    while let Some(i) = hay[start..].find(phrase) {
        let at = start + i;
        let end = at + phrase.len();
        let before = hay[..at].chars().next_back();
        let after = hay[end..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if boundary(before) && boundary(after) {
            return true;
        }
        start = at + phrase.len().max(1);
        while start < hay.len() && !hay.is_char_boundary(start) {
            start += 1;
        }
        if start >= hay.len() {
            break;
        }
    }
    false
}

/// Markdown reduced to the words a reader sees: emphasis, link brackets,
/// checkboxes and list markers gone.
pub fn plain(line: &str) -> String {
    let t = line.trim();
    let t = t
        .strip_prefix("- [ ] ")
        .or_else(|| t.strip_prefix("- [x] "))
        .or_else(|| t.strip_prefix("- [X] "))
        .or_else(|| t.strip_prefix("* [ ] "))
        .or_else(|| t.strip_prefix("* [x] "))
        .or_else(|| t.strip_prefix("- "))
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("> "))
        .unwrap_or(t);
    let t = strip_number_marker(t);
    t.replace("**", "")
        .replace("[[", "")
        .replace("]]", "")
        .replace('`', "")
        .replace("__", "")
        .trim()
        .to_string()
}

/// `1. text` → `text`.
fn strip_number_marker(t: &str) -> &str {
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        if let Some(rest) = t[digits..].strip_prefix(". ") {
            return rest;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_phrases() {
        assert_eq!(stems("Flights booked"), vec!["flight", "book"]);
        assert_eq!(stem("Meetings"), "meet");
        assert!(contains_phrase("which tasks are still open?", "still open"));
        assert!(!contains_phrase("reopened", "open"));
        assert!(asks_for_open_items("which goals did i not reach"));
        assert!(asks_for_done_items("which tasks are done"));
        assert_eq!(plain("- [x] **Hotel** in [[Alfama]]"), "Hotel in Alfama");
        assert_eq!(plain("2. Fewer cities."), "Fewer cities.");
    }
}
