//! A question read as a graph query: the nodes it names (the longest runs
//! of its words that are names in the graph, so the graph itself says what
//! a name is), the relation its verb asks about, which way, and how far.
//!
//! "Who owns the billing service?" asks for the edges `owns` *to* the
//! billing service; "What does the billing service depend on?" for the
//! edges `depends_on` *from* it; "everything … depends on, directly or
//! not" follows them on; "How is X connected to Y?" asks for the chain.
//! The verbs are the ones the notes' statements are read by
//! ([`super::extract`]), in their question forms.

use super::extract::key;
use super::store::GraphStore;
use super::walk::Direction;
use regex::Regex;
use std::sync::OnceLock;

/// What a question asks of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The names it mentions that the graph knows, in the order written.
    pub nodes: Vec<String>,
    pub relation: Option<String>,
    pub direction: Direction,
    pub depth: usize,
    /// With two names and "connected", "related", "reach"…: the second.
    pub to: Option<String>,
}

/// Question forms of each relation: the pattern, the relation, and the
/// direction to follow from a name written before the verb (the opposite
/// for one written after it).
fn forms() -> &'static [(Regex, &'static str, Direction)] {
    static FORMS: OnceLock<Vec<(Regex, &'static str, Direction)>> = OnceLock::new();
    FORMS.get_or_init(|| {
        let r = |p: &str| Regex::new(&format!(r"(?i)\b(?:{p})\b")).expect("valid pattern");
        vec![
            // "Who is X owned by?", "what is owned by X?"
            (
                r("owned by|maintained by|looked after by|administered by|run by|operated by"),
                "owns",
                Direction::In,
            ),
            (
                r("owner|owners|ownership|maintainer|maintainers|steward|stewards"),
                "owns",
                Direction::In,
            ),
            (
                r("owns|own|owning|maintains|maintain|maintaining|looks after|look after|looking after|administers|administer|responsible for|in charge of|accountable for|on the hook for"),
                "owns",
                Direction::Out,
            ),
            (
                r("dependents|consumers|downstream|affected|impacted|impact|break|breaks|broken|goes down|go down|went down|going down|outage|fails|fail|failed|blast radius"),
                "depends_on",
                Direction::In,
            ),
            (r("dependencies|dependency|upstream|upstreams"), "depends_on", Direction::Out),
            // "What feeds X?": what X depends on.
            (r("feeds into|feed into|feeds|feed"), "depends_on", Direction::In),
            (
                r("depends|depend|dependent|relies|rely|relying|requires|require|uses|use|using|calls|call|needs|need|talks to|talk to|reads from|read from|pulls from|pull from|consumes|consume|built on|sits on top of|mounts|mount|authenticates against|fed by|is fed by"),
                "depends_on",
                Direction::Out,
            ),
            (
                r("manager|managers|boss|supervisor|line manager|management chain|chain of command|reporting line|reporting chain"),
                "reports_to",
                Direction::Out,
            ),
            // The verb before the noun: at one place the first form wins.
            (
                r("reports to|report to|reports into|report into|reports directly to|report up to|reports up to|report up into|works for|work for|works under|work under|supervised by|managed by"),
                "reports_to",
                Direction::Out,
            ),
            (r("direct reports|reportees|reports"), "reports_to", Direction::In),
            (
                r("deployed to|deployed on|deployed in|deployed|deploys|deploy|hosted on|hosted in|hosted at|hosted|hosting|runs on|run on|runs in|run in|lives on|lives in"),
                "deployed_to",
                Direction::Out,
            ),
            (r("run by|operated by"), "owns", Direction::In),
            (r("runs|run|operates|operate"), "owns", Direction::Out),
            (
                r("blocked by|blocked on|blocked|blocker|blockers|waiting on|waiting for|held up by|stuck on"),
                "blocked_by",
                Direction::Out,
            ),
            (
                r("blocks|block|blocking|holding up|holds up|hold up|holding back"),
                "blocked_by",
                Direction::In,
            ),
            (r("vendor|vendors|supplier|suppliers|provider"), "supplied_by", Direction::Out),
            (r("supplied by|provided by"), "supplied_by", Direction::Out),
            (r("supplies|supply|provides|provide"), "supplied_by", Direction::In),
            (r("attendees|participants"), "attended", Direction::In),
            (r("attended|attend|attending"), "attended", Direction::Out),
            (r("part of|belongs to|belong to"), "part_of", Direction::Out),
            (r("leader|head"), "leads", Direction::In),
            (r("leads|lead|led|heads"), "leads", Direction::Out),
            (
                r("links to|link to|linked from|backlinks|mentions|mention"),
                "links_to",
                Direction::Out,
            ),
        ]
    })
}

/// Forms that ask about the other end of the relation whatever side the
/// name is on ("the owner of X" and "X's owner" both ask who owns X).
const NOUN_FORMS: &[&str] = &[
    "owner",
    "owners",
    "ownership",
    "maintainer",
    "maintainers",
    "steward",
    "stewards",
    "dependents",
    "consumers",
    "downstream",
    "affected",
    "impacted",
    "impact",
    "break",
    "breaks",
    "broken",
    "goes down",
    "go down",
    "went down",
    "going down",
    "outage",
    "fails",
    "fail",
    "failed",
    "blast radius",
    "dependencies",
    "dependency",
    "upstream",
    "upstreams",
    "manager",
    "managers",
    "boss",
    "supervisor",
    "line manager",
    "management chain",
    "chain of command",
    "reporting line",
    "reporting chain",
    "direct reports",
    "reportees",
    "reports",
    "attendees",
    "participants",
    "blocker",
    "blockers",
    "vendor",
    "vendors",
    "supplier",
    "suppliers",
    "provider",
    "leader",
    "head",
];

fn transitive() -> &'static Regex {
    static T: OnceLock<Regex> = OnceLock::new();
    T.get_or_init(|| {
        Regex::new(r"(?i)\b(transitive|transitively|indirect|indirectly|directly or not|directly or indirectly|everything|whole chain|entire chain|full chain|all the way|recursively|ultimately|in turn|any depth|any level|up to the top|management chain|chain of command|reporting chain|of blockers|the blockers|its blockers|their blockers|including anything|including everything|however indirect)\b")
            .expect("valid pattern")
    })
}

fn connects() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    C.get_or_init(|| {
        Regex::new(r"(?i)\b(connected|connect|connects|connection|connections|related|relate|relates|relationship|reach|reaches|path|route|links|link|linked|between|chain|trace)\b")
            .expect("valid pattern")
    })
}

/// The longest names a graph knows within `question`, left to right, with
/// the byte offset each starts at.
fn names_in(g: &GraphStore, question: &str) -> Vec<(usize, String)> {
    // Words with their offsets; `'s` and punctuation around words are not part of names.
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in question
        .char_indices()
        .chain(std::iter::once((question.len(), ' ')))
    {
        let inside = c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '#' | '/');
        match (inside, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let w = question[s..i].trim_end_matches(['.', '/']);
                if !w.is_empty() {
                    words.push((s, w));
                }
                start = None;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut matched = 0;
        for n in (1..=6.min(words.len() - i)).rev() {
            let text = words[i..i + n]
                .iter()
                .map(|(_, w)| w.strip_suffix("'s").unwrap_or(w))
                .collect::<Vec<_>>()
                .join(" ");
            let k = key(&text);
            // A lone small word ("it", "the", "who") is never a name here.
            if k.is_empty() || (n == 1 && k.len() < 3) {
                continue;
            }
            if g.knows(&k) {
                out.push((words[i].0, k));
                matched = n;
                break;
            }
            // A word written as a name ("Tomasz", "PAY-1412") that only one
            // name starts with: that name.
            let written = words[i].1;
            if n == 1 && k.len() >= 3 && written.starts_with(|c: char| c.is_uppercase()) && i > 0 {
                if let [full] = g.names_starting(&k, 2).as_slice() {
                    out.push((words[i].0, full.clone()));
                    matched = 1;
                    break;
                }
            }
        }
        i += matched.max(1);
    }
    if out.is_empty() {
        // No name as such: the longest run of two or more words that is
        // part of exactly one note's name ("the billing review" for a
        // note "Billing review 2026-11-20").
        'outer: for n in (2..=6.min(words.len())).rev() {
            for w in words.windows(n) {
                let k = key(&w.iter().map(|(_, x)| *x).collect::<Vec<_>>().join(" "));
                if k.split(' ').count() < 2 {
                    continue;
                }
                if let [one] = g.notes_containing(&k, 2).as_slice() {
                    let names = g.names_of(std::slice::from_ref(one));
                    if let Some(name) = names.into_iter().max_by_key(|n| n.len()) {
                        out.push((w[0].0, name));
                        break 'outer;
                    }
                }
            }
        }
    }
    out
}

pub fn read(g: &GraphStore, question: &str) -> Reading {
    let names = names_in(g, question);
    let mut relation = None;
    let mut direction = Direction::Both;
    if let Some((at, _)) = names.first() {
        // The verb nearest the name decides.
        let found = forms()
            .iter()
            .filter_map(|(re, rel, dir)| {
                re.find_iter(question)
                    .filter(|m| m.end() <= *at || m.start() > *at)
                    .map(|m| (m, *rel, *dir))
                    .min_by_key(|(m, _, _)| m.start().abs_diff(*at))
            })
            .min_by_key(|(m, _, _)| m.start().abs_diff(*at));
        if let Some((m, rel, dir)) = found {
            relation = Some(rel.to_string());
            let noun = NOUN_FORMS.contains(&m.as_str().to_lowercase().as_str());
            // "Who is on Priya's team, i.e. reports to her?": a pronoun
            // after the verb stands for the name, written before it.
            let pronoun_object = question[m.end()..]
                .split_whitespace()
                .next()
                .is_some_and(|w| {
                    matches!(
                        w.trim_matches(|c: char| !c.is_alphanumeric())
                            .to_lowercase()
                            .as_str(),
                        "her" | "him" | "them" | "it"
                    )
                });
            let before = *at < m.start() && !pronoun_object;
            direction = if noun || before { dir } else { flip(dir) };
        }
    }
    let lower = question.trim_start().to_lowercase();
    // "Where is X hosted?", "where does X run?": where a thing is is where
    // it is deployed, whatever the verb.
    if lower.starts_with("where ") {
        relation = Some("deployed_to".to_string());
        direction = Direction::Out;
    }
    // "Who sits under P in the org?": the people who report to P.
    if relation.is_none() && lower.starts_with("who ") {
        static UNDER: OnceLock<Regex> = OnceLock::new();
        let under = UNDER.get_or_init(|| Regex::new(r"\b(under|below|beneath)\b").expect("valid"));
        if under.is_match(&lower) {
            relation = Some("reports_to".to_string());
            direction = Direction::In;
        }
    }
    let two = names.len() >= 2 && connects().is_match(question);
    let depth = if two {
        6
    } else if transitive().is_match(question) {
        5
    } else {
        1
    };
    Reading {
        nodes: names.iter().map(|(_, n)| n.clone()).collect(),
        relation: if two { None } else { relation },
        direction: if two { Direction::Both } else { direction },
        depth,
        to: two.then(|| names[1].1.clone()),
    }
}

fn flip(d: Direction) -> Direction {
    match d {
        Direction::Out => Direction::In,
        Direction::In => Direction::Out,
        Direction::Both => Direction::Both,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn graph() -> GraphStore {
        let notes = BTreeMap::from([
            (
                "services/billing-service.md".to_string(),
                "---\ndepends_on: [ledger-service]\nowner: Payments team\n---\n# billing-service\n"
                    .to_string(),
            ),
            (
                "services/ledger-service.md".to_string(),
                "The ledger service depends on Postgres.\n".to_string(),
            ),
            (
                "people/priya.md".to_string(),
                "---\ntitle: Priya Natarajan\n---\nManager: Dana Whitfield\n".to_string(),
            ),
            (
                "meetings/2026-11-20-billing-review.md".to_string(),
                "---\ntitle: Billing review 2026-11-20\nattendees: [Priya Natarajan]\n---\n"
                    .to_string(),
            ),
        ]);
        let files: Vec<(String, String)> = notes.keys().map(|p| (p.clone(), "h".into())).collect();
        let mut g = GraphStore::open(None).unwrap();
        g.sync(&files, &|p| notes.get(p).cloned(), &|| false)
            .unwrap();
        g
    }

    fn asked(
        q: &str,
    ) -> (
        Vec<String>,
        Option<String>,
        Direction,
        usize,
        Option<String>,
    ) {
        let r = read(&graph(), q);
        (r.nodes, r.relation, r.direction, r.depth, r.to)
    }

    #[test]
    fn questions_name_a_node_a_relation_a_direction_and_a_depth() {
        let s = |x: &str| x.to_string();
        assert_eq!(
            asked("Who owns the billing service?"),
            (
                vec![s("billing service")],
                Some(s("owns")),
                Direction::In,
                1,
                None
            )
        );
        assert_eq!(
            asked("Who is the owner of billing-service?"),
            (
                vec![s("billing service")],
                Some(s("owns")),
                Direction::In,
                1,
                None
            )
        );
        assert_eq!(
            asked("What does the Payments team own?"),
            (
                vec![s("payments team")],
                Some(s("owns")),
                Direction::Out,
                1,
                None
            )
        );
        assert_eq!(
            asked("What does billing-service depend on, directly or not?"),
            (
                vec![s("billing service")],
                Some(s("depends_on")),
                Direction::Out,
                5,
                None
            )
        );
        assert_eq!(
            asked("What depends on Postgres?"),
            (
                vec![s("postgres")],
                Some(s("depends_on")),
                Direction::In,
                1,
                None
            )
        );
        assert_eq!(
            asked("Who is Priya Natarajan's manager?"),
            (
                vec![s("priya natarajan")],
                Some(s("reports_to")),
                Direction::Out,
                1,
                None
            )
        );
        assert_eq!(
            asked("Who reports to Dana Whitfield?"),
            (
                vec![s("dana whitfield")],
                Some(s("reports_to")),
                Direction::In,
                1,
                None
            )
        );
        assert_eq!(
            asked("Who attended the billing review?"),
            (
                vec![s("billing review 2026 11 20")],
                Some(s("attended")),
                Direction::In,
                1,
                None
            )
        );
        assert_eq!(
            asked("How is the Payments team connected to Postgres?"),
            (
                vec![s("payments team"), s("postgres")],
                None,
                Direction::Both,
                6,
                Some(s("postgres"))
            )
        );
        // The ways people ask, beyond the verbs the notes use.
        let read = |q: &str| {
            let (n, r, d, depth, to) = asked(q);
            (
                n.join("|"),
                r.unwrap_or_default(),
                d,
                depth,
                to.unwrap_or_default(),
            )
        };
        let cases = [
            (
                "Who works for Dana Whitfield?",
                ("dana whitfield", "reports_to", Direction::In, 1, ""),
            ),
            (
                "Who are Dana Whitfield's direct reports?",
                ("dana whitfield", "reports_to", Direction::In, 1, ""),
            ),
            (
                "What would break, directly or not, if Postgres went down?",
                ("postgres", "depends_on", Direction::In, 5, ""),
            ),
            (
                "Where is billing-service hosted?",
                ("billing service", "deployed_to", Direction::Out, 1, ""),
            ),
            (
                "Where does billing-service run?",
                ("billing service", "deployed_to", Direction::Out, 1, ""),
            ),
            (
                "Who is in Priya Natarajan's management chain, all the way up?",
                ("priya natarajan", "reports_to", Direction::Out, 5, ""),
            ),
            (
                "Who looks after the billing service?",
                ("billing service", "owns", Direction::In, 1, ""),
            ),
            (
                "What does billing-service use?",
                ("billing service", "depends_on", Direction::Out, 1, ""),
            ),
            (
                "What is holding up billing-service?",
                ("billing service", "blocked_by", Direction::Out, 1, ""),
            ),
            (
                "Who sits under Dana Whitfield in the org?",
                ("dana whitfield", "reports_to", Direction::In, 1, ""),
            ),
            (
                "What links the Payments team to Postgres?",
                ("payments team|postgres", "", Direction::Both, 6, "postgres"),
            ),
        ];
        for (q, (n, r, d, depth, to)) in cases {
            assert_eq!(
                read(q),
                (n.to_string(), r.to_string(), d, depth, to.to_string()),
                "{q}"
            );
        }
    }
}
