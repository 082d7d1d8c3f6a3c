//! What a question asks for, by rules (no model): the expected answer type,
//! the words that name its topic, the names in it, and its qualifiers.

use super::spans::Kind;
use super::text;
use crate::core::args::Args;
use crate::core::error::ActionError;
use serde_json::{json, Value};
use std::collections::HashSet;

/// The longest question the answer steps read, in characters. A question
/// is a sentence or two; a longer text is refused rather than analysed
/// (each of its words is a term scored against every line of evidence).
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// The question input `name` of an answer step: given, and at most
/// [`MAX_QUESTION_CHARS`] long.
pub fn input<'a>(a: &Args<'a>, name: &str) -> Result<&'a str, ActionError> {
    let q = a.required_str(name)?;
    check_length(a, name, q)?;
    Ok(q)
}

/// An error when `q`, the input `name`, is over [`MAX_QUESTION_CHARS`].
pub fn check_length(a: &Args, name: &str, q: &str) -> Result<(), ActionError> {
    let n = q.chars().count();
    if n > MAX_QUESTION_CHARS {
        return Err(a.invalid(
            name,
            format!("a question is at most {MAX_QUESTION_CHARS} characters long, got {n}"),
        ));
    }
    Ok(())
}

/// The kind of answer a question expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A typed value (a date, a time, an amount, a key…).
    Value(Kind),
    /// A person.
    Person,
    /// A place: a city, a hotel, an address.
    Place,
    /// The items of a list or table.
    List,
    /// A statement to confirm or deny.
    YesNo,
    /// A reason, a description, a summary: one or a few lines.
    Text,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Value(k) => k.as_str(),
            Expect::Person => "person",
            Expect::Place => "place",
            Expect::List => "list",
            Expect::YesNo => "yes/no",
            Expect::Text => "text",
        }
    }

    /// The span kinds that can answer it.
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            // "When is the race start": a day, or on the day a time.
            Expect::Value(Kind::Date) => &[Kind::Date, Kind::Time],
            Expect::Value(Kind::Time) => &[Kind::Time],
            Expect::Value(Kind::Amount) => &[Kind::Amount, Kind::Number],
            Expect::Value(Kind::Number) => &[Kind::Number, Kind::Amount, Kind::Percent, Kind::Time],
            Expect::Value(Kind::Percent) => &[Kind::Percent, Kind::Number],
            Expect::Value(Kind::Email) => &[Kind::Email],
            Expect::Value(Kind::Url) => &[Kind::Url],
            Expect::Value(Kind::Code) => &[Kind::Code],
            Expect::Value(Kind::Phone) => &[Kind::Phone],
            Expect::Person => &[Kind::Name],
            _ => &[],
        }
    }
}

/// One topic word of a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// As written, lower case.
    pub word: String,
    pub stem: String,
    /// Written with a capital inside the question: a name.
    pub entity: bool,
}

impl Term {
    pub fn matches(&self, stem: &str) -> bool {
        self.stem == stem
    }
}

#[derive(Debug, Clone)]
pub struct Question {
    pub text: String,
    pub lower: String,
    pub expect: Expect,
    pub terms: Vec<Term>,
    /// "still open", "not reach": the open items of a list.
    pub wants_open: bool,
    /// "done", "finished": the done items.
    pub wants_done: bool,
    /// A value question about money (cost, rent, refund…): the value must
    /// be an amount of money.
    pub wants_money: bool,
    /// Years the question names ("in 2025"): the answer must be of them.
    pub years: Vec<String>,
    /// The noun the question asks about ("blood type" → type, "passport
    /// number" → number): a line that does not say it cannot answer.
    pub head: Option<Term>,
    /// Words that narrow a noun phrase of the question ("my *eye*
    /// appointment", "the Apollo *code* freeze"): a line that says none of
    /// them speaks of another appointment or freeze.
    pub modifiers: Vec<Term>,
}

/// Words of "still open", "not reached": the question's state, not topic.
const STATE_WORDS: &[&str] = &[
    "open",
    "pending",
    "reach",
    "reached",
    "done",
    "finished",
    "finish",
    "completed",
    "complete",
    "outstanding",
    "unfinished",
    "achieved",
    "achieve",
    "missed",
    "miss",
    "not",
    "yet",
    "left",
];

/// Words after "how" that make a type, not a topic ("how big").
const HOW_WORDS: &[&str] = &[
    "big", "long", "far", "old", "fast", "often", "heavy", "soon",
];

/// Money, for [`Question::wants_money`].
const MONEY_WORDS: &[&str] = &[
    "cost",
    "costs",
    "price",
    "pay",
    "paid",
    "spend",
    "spent",
    "budget",
    "salary",
    "rent",
    "refund",
    "fund",
    "savings",
    "expensive",
    "cheap",
    "fee",
    "fees",
    "money",
    "earn",
    "income",
    "invest",
    "bill",
    "charge",
    "owe",
];

/// Words that, right before a value in a note, say which of two values it
/// is; a question that does not ask for that side does not want the value
/// behind them (the target when asked for the balance).
pub const SIDE_WORDS: &[&[&str]] = &[
    &["back", "return", "returning"],
    &["until", "till", "ends", "end", "to"],
    &["target", "goal", "aim", "aiming", "under"],
    &["average", "avg"],
    &["sandbox", "test", "staging"],
    &["production", "prod", "live"],
    &["last", "previous", "old", "before"],
    &["next", "new", "upcoming"],
    &["p99"],
    &["p95"],
];

fn has_any(lower: &str, words: &[&str]) -> bool {
    words.iter().any(|w| text::contains_phrase(lower, w))
}

/// Reads a question.
pub fn analyze(question: &str) -> Question {
    let text_q = question.trim().to_string();
    let lower = text_q.to_lowercase().replace('’', "'");
    let first = lower
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    let expect = expect_of(&lower, first);
    let mut terms: Vec<Term> = Vec::new();
    let mut stems: HashSet<String> = HashSet::new();
    for (i, raw) in text_q
        .split(|c: char| c.is_whitespace() || c == '?' || c == ',' || c == '!' || c == '"')
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let w = w
            .strip_suffix("'s")
            .or_else(|| w.strip_suffix("’s"))
            .unwrap_or(w);
        let lw = w.to_lowercase();
        if lw.is_empty() || text::is_filler(&lw) || lw.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        // "what time", "what date": the type, not the topic.
        if (lw == "time" || lw == "date" || lw == "day") && expect_is_time_like(expect) {
            continue;
        }
        let entity = i > 0 && w.chars().next().is_some_and(char::is_uppercase);
        for s in text::stems(&lw) {
            if text::is_filler(&s) || !stems.insert(s.clone()) {
                continue;
            }
            terms.push(Term {
                word: lw.clone(),
                stem: s,
                entity,
            });
        }
    }
    let wants_open = text::asks_for_open_items(&lower);
    let wants_done = text::asks_for_done_items(&lower);
    if wants_open || wants_done {
        terms.retain(|t| !STATE_WORDS.contains(&t.word.as_str()));
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    terms.retain(|t| {
        !(HOW_WORDS.contains(&t.word.as_str())
            && words.windows(2).any(|w| w[0] == "how" && w[1] == t.word))
    });
    if text::contains_phrase(&lower, "how much is in")
        || text::contains_phrase(&lower, "how much do i have in")
    {
        terms.push(Term {
            word: "balance".into(),
            stem: text::stem("balance"),
            entity: false,
        });
    }
    let wants_money = matches!(expect, Expect::Value(Kind::Amount))
        && words
            .iter()
            .any(|w| MONEY_WORDS.contains(w) || w.starts_with("eur") || w.starts_with('$'));
    let years = words
        .iter()
        .filter(|w| {
            w.len() == 4
                && (w.starts_with("19") || w.starts_with("20"))
                && w.chars().all(|c| c.is_ascii_digit())
        })
        .map(|w| w.to_string())
        .collect();
    let head = head_noun(&words, &terms);
    let modifiers = modifiers_of(&words, &terms);
    Question {
        modifiers,
        wants_open,
        wants_done,
        wants_money,
        years,
        head,
        text: text_q,
        lower,
        expect,
        terms,
    }
}

/// Words that end a noun phrase of a question.
const PHRASE_STOPS: &[&str] = &[
    "for", "of", "in", "at", "on", "to", "with", "from", "did", "do", "does", "am", "is", "are",
    "was", "were", "have", "has", "had", "i", "we", "should", "would", "can", "will", "about",
    "when", "that", "by", "and", "or", "without", "after", "before", "into", "than", "like",
];

/// The modifiers of the noun phrase a question asks about ("when is my
/// eye appointment", "what is the Apollo code freeze"): every topic word of
/// the phrase after the question word, its verb and "my"/"the", but its
/// last (the noun) — leaving out names (checked on their own) and side
/// words (which only rank values). Only that shape: elsewhere a question's
/// verbs would be taken for nouns.
fn modifiers_of(words: &[&str], terms: &[Term]) -> Vec<Term> {
    let opens = matches!(
        words.first(),
        Some(&("when" | "what" | "which" | "who" | "where"))
    ) && words
        .get(1)
        .is_some_and(|w| ["is", "are", "was", "were"].contains(w))
        && words
            .get(2)
            .is_some_and(|w| ["my", "the", "our", "your"].contains(w));
    if !opens {
        return Vec::new();
    }
    let mut phrase: Vec<&Term> = Vec::new();
    for w in &words[3..] {
        if PHRASE_STOPS.contains(w) {
            break;
        }
        let w = w.trim_end_matches("'s");
        if let Some(t) = terms.iter().find(|t| t.word == w) {
            phrase.push(t);
        }
    }
    phrase.pop();
    let mut out: Vec<Term> = Vec::new();
    for t in phrase {
        let side = SIDE_WORDS.iter().any(|g| g.contains(&t.word.as_str()));
        if !t.entity && !side && !out.iter().any(|o| o.stem == t.stem) {
            out.push(t.clone());
        }
    }
    out
}

/// The noun of "what is my blood type", "which airline", "what is the
/// production key for X": the last topic word of the phrase after the
/// question word, before a preposition or a verb of the question.
fn head_noun(words: &[&str], terms: &[Term]) -> Option<Term> {
    let first = *words.first()?;
    let copula = ["is", "are", "was", "were", "s"];
    let start = match first {
        "what" | "whats" | "what's" if words.get(1).is_some_and(|w| copula.contains(w)) => 2,
        "whats" | "what's" => 1,
        "which" => 1,
        _ => return None,
    };
    // "what is my X", "what is the X", "what is Priya's X"; not "what is
    // wrong with".
    let mut k = start;
    if start == 2 {
        let w = words.get(2).copied().unwrap_or("");
        if !["my", "the", "our", "your", "a", "an"].contains(&w) {
            // "what is Hannah Schmidt's home address": after the owner.
            match (2..words.len().min(5)).find(|i| words[*i].ends_with("'s")) {
                Some(i) => k = i + 1,
                None => return None,
            }
        }
    }
    // "what is my", "what was the", "which of my": skip to the phrase.
    while k < words.len()
        && [
            "is", "are", "was", "were", "s", "the", "my", "our", "a", "an", "of", "your",
        ]
        .contains(&words[k])
    {
        k += 1;
    }
    let stop = [
        "for", "of", "in", "at", "on", "to", "with", "from", "did", "do", "does", "am", "is",
        "are", "was", "were", "have", "has", "had", "i", "we", "should", "would", "can", "will",
        "about", "when", "that", "by",
    ];
    let mut last: Option<&Term> = None;
    while k < words.len() && !stop.contains(&words[k]) {
        let w = words[k].trim_end_matches("'s");
        // "cholesterol level": the level is the type, cholesterol the noun.
        if let Some(t) = terms.iter().find(|t| t.word == w && !names_a_type(&t.word)) {
            last = Some(t);
        }
        k += 1;
    }
    last.filter(|t| !t.entity).cloned()
}

/// Words a question uses to name the kind of value it wants.
pub fn names_a_type(word: &str) -> bool {
    [
        "email",
        "e-mail",
        "mail",
        "address",
        "key",
        "code",
        "password",
        "token",
        "number",
        "phone",
        "url",
        "link",
        "website",
        "time",
        "date",
        "day",
        "price",
        "cost",
        "amount",
        "level",
        "temperature",
        "much",
        "many",
        "total",
        "figure",
        "value",
        "rate",
        "limit",
        "limits",
    ]
    .contains(&word)
}

fn expect_is_time_like(e: Expect) -> bool {
    matches!(e, Expect::Value(Kind::Time) | Expect::Value(Kind::Date))
}

fn expect_of(lower: &str, first: &str) -> Expect {
    let yes_no_start = [
        "did", "does", "do", "is", "are", "was", "were", "has", "have", "can", "will", "should",
    ];
    if has_any(lower, &["email", "e-mail", "mail address", "email address"]) {
        return Expect::Value(Kind::Email);
    }
    if has_any(
        lower,
        &["url", "website", "web site", "link", "address of the api"],
    ) {
        return Expect::Value(Kind::Url);
    }
    if has_any(
        lower,
        &["phone", "telephone", "mobile number", "call number"],
    ) {
        return Expect::Value(Kind::Phone);
    }
    // "When is the Apollo code freeze", "when is the next key rotation":
    // the question word decides; "code" and "key" only name the thing.
    if first == "when" || lower.starts_with("by when") {
        return if has_any(lower, &["time"]) {
            Expect::Value(Kind::Time)
        } else {
            Expect::Value(Kind::Date)
        };
    }
    // "What is wrong with the price cap": a reason, not the price.
    if has_any(
        lower,
        &[
            "what is wrong",
            "what's wrong",
            "whats wrong",
            "what went wrong",
            "what is the problem",
            "what's the problem",
            "what is the issue",
            "what's the issue",
        ],
    ) {
        return Expect::Text;
    }
    if has_any(
        lower,
        &[
            "key",
            "password",
            "passcode",
            "pin",
            "token",
            "code",
            "id",
            "passport number",
            "flight number",
            "account number",
            "licence number",
            "license number",
            "serial",
            "employee number",
            "booking reference",
            "reference",
        ],
    ) && !has_any(lower, &["key points", "key ideas", "keys without"])
        && !lower.starts_with("how ")
    {
        return Expect::Value(Kind::Code);
    }
    if has_any(lower, &["what number", "which number"]) || lower.contains(" number") {
        return Expect::Value(Kind::Code);
    }
    if has_any(
        lower,
        &[
            "what time",
            "which time",
            "what hour",
            "finishing time",
            "time am i",
        ],
    ) {
        return Expect::Value(Kind::Time);
    }
    if has_any(
        lower,
        &[
            "what date",
            "which date",
            "which day",
            "what day",
            "deadline",
            "due date",
            "by when",
        ],
    ) {
        return Expect::Value(Kind::Date);
    }
    if has_any(
        lower,
        &["percent", "percentage", "what share", "what fraction"],
    ) {
        return Expect::Value(Kind::Percent);
    }
    if has_any(
        lower,
        &[
            "how much",
            "cost",
            "price",
            "how big",
            "how expensive",
            "budget",
            "spend",
            "spent",
            "salary",
            "paid",
            "pay",
        ],
    ) {
        return Expect::Value(Kind::Amount);
    }
    if has_any(
        lower,
        &[
            "how many",
            "how long",
            "how far",
            "how fast",
            "how heavy",
            "how old",
            "temperature",
            "level",
            "rate",
            "score",
            "rating",
            "how often",
            "limit",
            "limits",
        ],
    ) {
        return Expect::Value(Kind::Number);
    }
    if first == "who" || has_any(lower, &["which person", "whom", "whose"]) {
        return Expect::Person;
    }
    if first == "where"
        || has_any(
            lower,
            &[
                "which city",
                "what city",
                "which country",
                "which hotel",
                "what hotel",
                "which town",
                "where",
                "which airline",
                "what airline",
                "home address",
                "postal address",
                "street address",
            ],
        )
    {
        return Expect::Place;
    }
    if yes_no_start.contains(&first)
        && !has_any(
            lower,
            &[
                "do i need",
                "do we need",
                "do i have",
                "do i do",
                "do i say",
            ],
        )
    {
        return Expect::YesNo;
    }
    if text::asks_for_open_items(lower) || text::asks_for_done_items(lower) {
        return Expect::List;
    }
    if has_any(
        lower,
        &[
            "how do we",
            "how do i",
            "how to",
            "how can i",
            "how can we",
            "how should",
        ],
    ) {
        return Expect::List;
    }
    if has_any(
        lower,
        &[
            "which of",
            "what are",
            "what were",
            "list",
            "steps",
            "items",
            "tasks",
            "meetings",
            "ideas",
            "what do i need",
            "bring",
            "ingredients",
            "goals",
            "companies",
            "who are",
            "differently",
        ],
    ) {
        return Expect::List;
    }
    Expect::Text
}

impl Question {
    pub fn to_json(&self) -> Value {
        json!({
            "text": self.text,
            "expect": self.expect.as_str(),
            "terms": self.terms.iter().map(|t| t.word.clone()).collect::<Vec<_>>(),
            "entities": self.terms.iter().filter(|t| t.entity).map(|t| t.word.clone()).collect::<Vec<_>>(),
            "wants_open": self.wants_open,
            "wants_done": self.wants_done,
        })
    }

    /// The side words of [`SIDE_WORDS`] the question itself uses.
    pub fn sides(&self) -> Vec<&'static str> {
        SIDE_WORDS
            .iter()
            .flat_map(|g| g.iter())
            .filter(|w| text::contains_phrase(&self.lower, w))
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(q: &str) -> &'static str {
        analyze(q).expect.as_str()
    }

    #[test]
    fn expected_answer_types() {
        assert_eq!(expect("What time is my flight to Portugal?"), "time");
        assert_eq!(expect("When is the boiler service?"), "date");
        assert_eq!(expect("how much rent do I pay"), "amount");
        assert_eq!(
            expect("How many books have I finished this year?"),
            "number"
        );
        assert_eq!(expect("Who is my GP?"), "person");
        assert_eq!(
            expect("Who do I email when something in the flat breaks?"),
            "email"
        );
        assert_eq!(expect("What is the API key for Apollo?"), "code");
        assert_eq!(expect("What is my passport number?"), "code");
        assert_eq!(expect("What is Priya's phone number?"), "phone");
        assert_eq!(expect("Which city does Priya live in?"), "place");
        assert_eq!(expect("Which of my work tasks are still open?"), "list");
        assert_eq!(expect("Did the Apollo load test pass?"), "yes/no");
        assert_eq!(expect("Why did my last loaf come out dense?"), "text");
        assert_eq!(
            expect("What do I need to bring for a race weekend?"),
            "list"
        );
        // The question word decides over a word that names a code.
        assert_eq!(expect("When is the Apollo code freeze?"), "date");
        assert_eq!(expect("When is the next sandbox key rotation?"), "date");
        assert_eq!(
            expect("When does the key ceremony start, what time?"),
            "time"
        );
        assert_eq!(expect("What is wrong with the price cap?"), "text");
    }

    #[test]
    fn modifiers_narrow_the_noun() {
        let words = |q: &str| -> Vec<String> {
            analyze(q)
                .modifiers
                .iter()
                .map(|t| t.word.clone())
                .collect()
        };
        assert_eq!(words("When is my eye appointment?"), ["eye"]);
        assert_eq!(words("When is the Apollo code freeze?"), ["code"]);
        // Names and side words are not modifiers; a one-word phrase has none.
        assert_eq!(
            words("When is the next Apollo sandbox key rotation?"),
            ["key"]
        );
        assert!(words("Who is my manager?").is_empty());
        // Not after a verb the question does not end its phrase with.
        assert!(words("When can the tomato plants go outside?").is_empty());
    }

    #[test]
    fn topic_words_names_and_qualifiers() {
        let q = analyze("What is the production API key for Apollo?");
        let words: Vec<&str> = q.terms.iter().map(|t| t.word.as_str()).collect();
        assert_eq!(words, ["production", "api", "key", "apollo"]);
        assert!(q.terms.iter().find(|t| t.word == "apollo").unwrap().entity);
        assert_eq!(q.sides(), ["production"]);
        let q = analyze("Which of my work tasks are still open?");
        assert!(q.wants_open && !q.wants_done);
        // "what time" asks for a time: "time" is not a topic word.
        let q = analyze("What time is my flight to Portugal?");
        let words: Vec<&str> = q.terms.iter().map(|t| t.word.as_str()).collect();
        assert_eq!(words, ["flight", "portugal"]);
    }
}
