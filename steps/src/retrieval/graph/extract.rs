//! The edges one note states, each with the line it comes from:
//!
//! - links: `[[Target]]`, `[[Target|shown]]`, `[[Target#part]]` and
//!   Markdown links to other notes (`[text](other.md)`): `links_to`;
//! - frontmatter properties and `Key: value` lines of the body whose key
//!   names a relation (`owner`, `depends_on`, `project`, `attendees`,
//!   `repo`, `reports_to`, `blocked_by`, `deployed_to`, `lead`, …), and any
//!   property whose values are `[[links]]` (the relation is the key);
//! - tags: `tagged`;
//! - statements in the text: "X owns Y", "Y is owned by X", "X depends on
//!   Y" (or relies on), "A reports to B", "X is deployed to Y", "X is
//!   blocked by Y", "X blocks Y". A sentence that starts with a pronoun
//!   ("It depends on …") speaks of the previous sentence's subject. A list
//!   after the verb ("on A and on B", "A, B and C") is one edge per item.
//!
//! Relations point one way: `owns` from the owner, `depends_on` from the
//! dependent, `part_of` to the project, `attended` from the person.

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// The version of these rules: a graph read by others is read again.
/// Change it with any change to what a note's edges are.
pub const READER: &str = "42";

/// One edge as a note states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub rel: String,
    pub to: String,
    /// 1-based line in the note.
    pub line: u32,
    /// How it was found: `link`, `property`, `tag` or `statement`.
    pub how: &'static str,
    /// The line it comes from, trimmed (at most 240 characters).
    pub text: String,
}

/// A note's own names (its title, file name and `aliases`) and its edges.
#[derive(Debug, Clone, Default)]
pub struct NoteGraph {
    /// The name it is shown by: its title, else its file name.
    pub name: String,
    pub aliases: Vec<String>,
    pub edges: Vec<Edge>,
    /// Whose the note is ("" shared; see [`crate::retrieval::frontmatter::tenant_of`]).
    pub tenant: String,
}

/// How names are compared: case, `-`/`_` and runs of spaces do not count
/// (`Billing-Service` is `billing service`), nor does a leading article.
pub fn key(name: &str) -> String {
    // One pass over the characters, no splitting: called for every end of
    // every edge, and most names are ASCII.
    let mut out = String::with_capacity(name.len());
    let mut words = 0;
    let mut in_word = false;
    for c in name.chars() {
        if c.is_whitespace() || c == '-' || c == '_' {
            in_word = false;
            continue;
        }
        if !in_word {
            if words > 0 {
                out.push(' ');
            }
            words += 1;
            in_word = true;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    // A leading article goes when a word follows it ("The Band": "band").
    for article in ["the ", "a ", "an "] {
        if words > 1 && out.starts_with(article) {
            out.drain(..article.len());
            break;
        }
    }
    out
}

/// Frontmatter and `Key: value` keys that name a relation, with the
/// relation and whether the note is its subject (`depends_on: X`: the
/// note depends on X) or its object (`owner: P`: P owns the note).
const KEYED: &[(&[&str], &str, bool)] = &[
    (
        &[
            "owner",
            "owners",
            "owned by",
            "maintainer",
            "maintainers",
            "maintained by",
            "product owner",
            "steward",
            "stewards",
            "responsible",
            "team",
            "squad",
            "owning team",
            "dri",
            "owner team",
            "team owner",
            "service owner",
            "code owner",
            "code owners",
            "codeowners",
            "technical owner",
            "business owner",
            "system owner",
            "application owner",
            "app owner",
            "asset owner",
            "data owner",
            "data steward",
            "custodian",
            "responsible team",
        ],
        "owns",
        false,
    ),
    (
        &[
            "depends on",
            "dependencies",
            "dependency",
            "requires",
            "upstream",
            "upstreams",
            "uses",
            "reads from",
            "calls",
            "needs",
            "inputs",
            "sources",
            "data sources",
            "ingest",
            "ingests",
            "depends",
            "upstream services",
            "upstream dependencies",
            "service dependencies",
            "external dependencies",
            "consumes",
            "relies on",
            "data source",
            "backend",
            "backends",
            "built on",
            "imports",
            "queries",
        ],
        "depends_on",
        true,
    ),
    (
        &[
            "downstream",
            "consumers",
            "dependents",
            "used by",
            "relying parties",
            "feeds",
            "feeds into",
            "clients",
            "subscribers",
            "consumed by",
            "downstreams",
            "downstream services",
            "downstream consumers",
            "downstream dependencies",
            "depended on by",
            "required by",
            "reverse dependencies",
            "callers",
            "called by",
            "read by",
            "imported by",
        ],
        "depends_on",
        false,
    ),
    (
        &[
            "project",
            "projects",
            "part of",
            "parent",
            "parent system",
            "parent project",
            "parent epic",
            "parent team",
            "parent organization",
            "parent company",
            "belongs to",
            "member of",
            "component of",
            "subcomponent of",
            "domain",
            "programme",
            "program",
            "initiative",
            "epic",
            "umbrella",
            "portfolio",
            "product line",
            "suite",
            "family",
            "division",
            "department",
        ],
        "part_of",
        true,
    ),
    (&["attendees", "participants"], "attended", false),
    (&["repo", "repository", "repos"], "in_repo", true),
    (
        &[
            "reports to",
            "manager",
            "line manager",
            "supervisor",
            "supervised by",
            "managed by",
            "boss",
            "reporting to",
            "reports into",
            "direct manager",
            "people manager",
            "superior",
            "manager name",
        ],
        "reports_to",
        true,
    ),
    (
        &[
            "direct reports",
            "reports",
            "reportees",
            "his team",
            "her team",
            "my team",
            "direct report",
            "subordinates",
            "line reports",
            "supervises",
        ],
        "reports_to",
        false,
    ),
    (
        &[
            "blocked by",
            "blockers",
            "blocker",
            "blocked on",
            "waiting on",
            "is blocked by",
            "blocking issues",
            "waiting for",
            "pending on",
            "prerequisites",
            "prerequisite",
            "impediments",
            "impediment",
            "held up by",
        ],
        "blocked_by",
        true,
    ),
    (&["blocks"], "blocks", true),
    (
        &[
            "deployed to",
            "deployed on",
            "environment",
            "environments",
            "env",
            "hosting",
            "hosted in",
            "hosted on",
            "hosted at",
            "host",
            "hosts",
            "runs on",
            "runs in",
            "cluster",
            "region",
            "datacenter",
            "data centre",
            "deployed in",
            "running on",
            "k8s cluster",
            "kubernetes cluster",
            "regions",
            "availability zone",
            "data center",
            "server",
            "servers",
            "namespace",
            "cloud",
            "deployment target",
            "infrastructure",
        ],
        "deployed_to",
        true,
    ),
    (
        &[
            "lead",
            "leads",
            "project lead",
            "team lead",
            "tech lead",
            "led by",
            "head",
            "team leader",
            "technical lead",
            "engineering lead",
            "eng lead",
            "leader",
            "headed by",
            "head of",
            "project leader",
            "lead engineer",
            "lead developer",
            "squad lead",
            "chapter lead",
            "engineering manager",
            "project manager",
            "program manager",
            "programme manager",
            "chair",
            "chaired by",
            "director",
        ],
        "leads",
        false,
    ),
    (
        &[
            "vendor",
            "vendors",
            "supplier",
            "supplied by",
            "provider",
            "provided by",
            "vendor name",
            "suppliers",
            "service provider",
            "manufacturer",
            "made by",
            "publisher",
            "distributor",
            "reseller",
            "licensor",
            "purchased from",
            "procured from",
            "sourced from",
            "saas vendor",
            "third party vendor",
        ],
        "supplied_by",
        true,
    ),
];

/// The relation a key of [`KEYED`] names, and whether the note is its
/// subject: looked up in a map (the lists are long, and keys many).
fn keyed_relation(k: &str) -> Option<(&'static str, bool)> {
    static MAP: OnceLock<HashMap<&'static str, (&'static str, bool)>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = HashMap::new();
        for (names, rel, subject) in KEYED {
            for n in *names {
                // The first list that names a key is the one read.
                map.entry(*n).or_insert((*rel, *subject));
            }
        }
        map
    })
    .get(k)
    .copied()
}

/// Verb phrases of the statements read in the text: the phrase, the
/// relation, and whether the sentence's subject is the edge's subject
/// ("X owns Y") or its object ("Y is owned by X"). General English for
/// each relation, not any one team's wording.
const STATEMENTS: &[(&str, &str, bool)] = &[
    ("is owned by", "owns", false),
    ("are owned by", "owns", false),
    ("owned by", "owns", false),
    ("is owned jointly by", "owns", false),
    ("owned jointly by", "owns", false),
    ("is co-owned by", "owns", false),
    ("co-owned by", "owns", false),
    ("is run by", "owns", false),
    ("are run by", "owns", false),
    ("run by", "owns", false),
    ("is operated by", "owns", false),
    ("operated by", "owns", false),
    ("is maintained by", "owns", false),
    ("are maintained by", "owns", false),
    ("maintained by", "owns", false),
    ("is looked after by", "owns", false),
    ("looked after by", "owns", false),
    ("is administered by", "owns", false),
    ("administered by", "owns", false),
    ("is the responsibility of", "owns", false),
    ("the responsibility of", "owns", false),
    ("maintains", "owns", true),
    ("maintain", "owns", true),
    ("owns", "owns", true),
    ("own", "owns", true),
    ("co-owns", "owns", true),
    ("co-own", "owns", true),
    ("looks after", "owns", true),
    ("look after", "owns", true),
    ("administers", "owns", true),
    ("administer", "owns", true),
    ("is responsible for", "owns", true),
    ("are responsible for", "owns", true),
    ("is on the hook for", "owns", true),
    ("are on the hook for", "owns", true),
    ("is the steward of", "owns", true),
    ("is the dri for", "owns", true),
    ("is dri for", "owns", true),
    ("is the tech lead for", "leads", true),
    ("is tech lead for", "leads", true),
    ("is the lead for", "leads", true),
    ("is its tech lead", "leads", true),
    ("is its lead", "leads", true),
    ("depends on", "depends_on", true),
    ("depend on", "depends_on", true),
    ("depends directly on", "depends_on", true),
    ("relies on", "depends_on", true),
    ("rely on", "depends_on", true),
    ("uses", "depends_on", true),
    ("calls", "depends_on", true),
    ("needs", "depends_on", true),
    ("requires", "depends_on", true),
    ("talks to", "depends_on", true),
    ("talk to", "depends_on", true),
    ("reads from", "depends_on", true),
    ("read from", "depends_on", true),
    ("pulls from", "depends_on", true),
    ("pulls data from", "depends_on", true),
    ("consumes", "depends_on", true),
    ("calls out to", "depends_on", true),
    ("is fed by", "depends_on", true),
    ("fed by", "depends_on", true),
    ("is fed from", "depends_on", true),
    ("feeds into", "depends_on", false),
    ("feeds", "depends_on", false),
    ("feed into", "depends_on", false),
    ("is built on", "depends_on", true),
    ("is built on top of", "depends_on", true),
    ("sits on top of", "depends_on", true),
    ("authenticates against", "depends_on", true),
    ("authenticates with", "depends_on", true),
    ("subscribes to", "depends_on", true),
    ("mounts", "depends_on", true),
    ("is used by", "depends_on", false),
    ("are used by", "depends_on", false),
    ("used by", "depends_on", false),
    ("is called by", "depends_on", false),
    ("is consumed by", "depends_on", false),
    ("consumed by", "depends_on", false),
    ("is needed by", "depends_on", false),
    ("is required by", "depends_on", false),
    ("consumers include", "depends_on", false),
    ("consumer is", "depends_on", false),
    ("is led by", "leads", false),
    ("are led by", "leads", false),
    ("led by", "leads", false),
    ("leads", "leads", true),
    ("manages", "leads", true),
    ("reports to", "reports_to", true),
    ("report to", "reports_to", true),
    ("reports directly to", "reports_to", true),
    ("reports into", "reports_to", true),
    ("works for", "reports_to", true),
    ("work for", "reports_to", true),
    ("works under", "reports_to", true),
    ("work under", "reports_to", true),
    ("is supervised by", "reports_to", true),
    ("supervised by", "reports_to", true),
    ("is managed by", "reports_to", true),
    ("manager is", "reports_to", true),
    ("line manager is", "reports_to", true),
    ("supervisor is", "reports_to", true),
    ("is her manager", "reports_to", false),
    ("is his manager", "reports_to", false),
    ("is their manager", "reports_to", false),
    ("supervises", "reports_to", false),
    ("reports are", "reports_to", false),
    ("direct reports are", "reports_to", false),
    ("direct reports include", "reports_to", false),
    ("is deployed to", "deployed_to", true),
    ("are deployed to", "deployed_to", true),
    ("deploys to", "deployed_to", true),
    ("is deployed on", "deployed_to", true),
    ("is deployed in", "deployed_to", true),
    ("deployed to", "deployed_to", true),
    ("deployed on", "deployed_to", true),
    ("deployed in", "deployed_to", true),
    ("runs on", "deployed_to", true),
    ("run on", "deployed_to", true),
    ("runs in", "deployed_to", true),
    ("run in", "deployed_to", true),
    ("lives on", "deployed_to", true),
    ("lives in", "deployed_to", true),
    ("is hosted in", "deployed_to", true),
    ("is hosted on", "deployed_to", true),
    ("is hosted at", "deployed_to", true),
    ("hosted in", "deployed_to", true),
    ("hosted on", "deployed_to", true),
    ("hosted at", "deployed_to", true),
    ("is blocked by", "blocked_by", true),
    ("are blocked by", "blocked_by", true),
    ("blocked by", "blocked_by", true),
    ("is blocked on", "blocked_by", true),
    ("is waiting on", "blocked_by", true),
    ("waiting on", "blocked_by", true),
    ("is held up by", "blocked_by", true),
    ("held up by", "blocked_by", true),
    ("blocks", "blocked_by", false),
    ("can't ship until", "blocked_by", true),
    ("cannot ship until", "blocked_by", true),
    ("can't start until", "blocked_by", true),
    ("cannot start until", "blocked_by", true),
    ("can't launch until", "blocked_by", true),
    ("can't go live until", "blocked_by", true),
    ("won't ship until", "blocked_by", true),
    ("is on hold until", "blocked_by", true),
    ("on hold until", "blocked_by", true),
    ("is waiting for", "blocked_by", true),
    ("waiting for", "blocked_by", true),
    ("is supplied by", "supplied_by", true),
    ("supplied by", "supplied_by", true),
    ("is provided by", "supplied_by", true),
    ("provided by", "supplied_by", true),
    // Written by a writer who never saw our notes, keys or rules: the
    // common ways of saying each relation (bench/relations/lexicon.json).
    ("is the owner of", "owns", true),
    ("are the owner of", "owns", true),
    ("is the owner for", "owns", true),
    ("are the owner for", "owns", true),
    ("is owner of", "owns", true),
    ("are owner of", "owns", true),
    ("owns and maintains", "owns", true),
    ("is accountable for", "owns", true),
    ("are accountable for", "owns", true),
    ("has ownership of", "owns", true),
    ("takes ownership of", "owns", true),
    ("has responsibility for", "owns", true),
    ("is the maintainer of", "owns", true),
    ("are the maintainer of", "owns", true),
    ("is the service owner for", "owns", true),
    ("are the service owner for", "owns", true),
    ("is the service owner of", "owns", true),
    ("are the service owner of", "owns", true),
    ("is the product owner for", "owns", true),
    ("are the product owner for", "owns", true),
    ("is the product owner of", "owns", true),
    ("are the product owner of", "owns", true),
    ("is the technical owner of", "owns", true),
    ("are the technical owner of", "owns", true),
    ("is the data owner for", "owns", true),
    ("are the data owner for", "owns", true),
    ("is the data owner of", "owns", true),
    ("are the data owner of", "owns", true),
    ("is the custodian of", "owns", true),
    ("are the custodian of", "owns", true),
    ("are the steward of", "owns", true),
    ("are the dri for", "owns", true),
    ("takes care of", "owns", true),
    ("is owned and maintained by", "owns", false),
    ("are owned and maintained by", "owns", false),
    ("are the responsibility of", "owns", false),
    ("is under the ownership of", "owns", false),
    ("are under the ownership of", "owns", false),
    ("are built on", "depends_on", true),
    ("are built on top of", "depends_on", true),
    ("is dependent on", "depends_on", true),
    ("are dependent on", "depends_on", true),
    ("has a dependency on", "depends_on", true),
    ("has a hard dependency on", "depends_on", true),
    ("is a consumer of", "depends_on", true),
    ("are a consumer of", "depends_on", true),
    ("is a client of", "depends_on", true),
    ("are a client of", "depends_on", true),
    ("is downstream of", "depends_on", true),
    ("are downstream of", "depends_on", true),
    ("makes calls to", "depends_on", true),
    ("sends requests to", "depends_on", true),
    ("reads data from", "depends_on", true),
    ("writes data to", "depends_on", true),
    ("is upstream of", "depends_on", false),
    ("are upstream of", "depends_on", false),
    ("is a dependency of", "depends_on", false),
    ("are a dependency of", "depends_on", false),
    ("is a dependency for", "depends_on", false),
    ("are a dependency for", "depends_on", false),
    ("are managed by", "reports_to", true),
    ("reports directly into", "reports_to", true),
    ("is a direct report of", "reports_to", true),
    ("are a direct report of", "reports_to", true),
    ("is a direct report to", "reports_to", true),
    ("are a direct report to", "reports_to", true),
    ("is the direct report of", "reports_to", true),
    ("are the direct report of", "reports_to", true),
    ("is managed directly by", "reports_to", true),
    ("are managed directly by", "reports_to", true),
    ("is the line manager of", "reports_to", false),
    ("are the line manager of", "reports_to", false),
    ("is the line manager for", "reports_to", false),
    ("are the line manager for", "reports_to", false),
    ("is the direct manager of", "reports_to", false),
    ("are the direct manager of", "reports_to", false),
    ("is the people manager of", "reports_to", false),
    ("are the people manager of", "reports_to", false),
    ("is the people manager for", "reports_to", false),
    ("are the people manager for", "reports_to", false),
    ("is the boss of", "reports_to", false),
    ("are the boss of", "reports_to", false),
    ("is the lead of", "leads", true),
    ("are the lead of", "leads", true),
    ("are the lead for", "leads", true),
    ("is the lead on", "leads", true),
    ("are the lead on", "leads", true),
    ("is the head of", "leads", true),
    ("are the head of", "leads", true),
    ("is the leader of", "leads", true),
    ("are the leader of", "leads", true),
    ("is the team lead of", "leads", true),
    ("are the team lead of", "leads", true),
    ("is the team lead for", "leads", true),
    ("are the team lead for", "leads", true),
    ("is the tech lead of", "leads", true),
    ("are the tech lead of", "leads", true),
    ("are the tech lead for", "leads", true),
    ("is the tech lead on", "leads", true),
    ("are the tech lead on", "leads", true),
    ("is the engineering manager of", "leads", true),
    ("are the engineering manager of", "leads", true),
    ("is the engineering manager for", "leads", true),
    ("are the engineering manager for", "leads", true),
    ("is the project lead for", "leads", true),
    ("are the project lead for", "leads", true),
    ("is the project lead on", "leads", true),
    ("are the project lead on", "leads", true),
    ("is the project manager for", "leads", true),
    ("are the project manager for", "leads", true),
    ("is the project manager on", "leads", true),
    ("are the project manager on", "leads", true),
    ("is the program manager for", "leads", true),
    ("are the program manager for", "leads", true),
    ("is the programme manager for", "leads", true),
    ("are the programme manager for", "leads", true),
    ("is the director of", "leads", true),
    ("are the director of", "leads", true),
    ("is the chair of", "leads", true),
    ("are the chair of", "leads", true),
    ("is in charge of", "leads", true),
    ("are in charge of", "leads", true),
    ("are deployed on", "deployed_to", true),
    ("are deployed in", "deployed_to", true),
    ("is deployed into", "deployed_to", true),
    ("are deployed into", "deployed_to", true),
    ("are hosted on", "deployed_to", true),
    ("are hosted in", "deployed_to", true),
    ("are hosted at", "deployed_to", true),
    ("is hosted with", "deployed_to", true),
    ("are hosted with", "deployed_to", true),
    ("is installed on", "deployed_to", true),
    ("are installed on", "deployed_to", true),
    ("is provisioned in", "deployed_to", true),
    ("are provisioned in", "deployed_to", true),
    ("is provisioned on", "deployed_to", true),
    ("are provisioned on", "deployed_to", true),
    ("is served from", "deployed_to", true),
    ("are served from", "deployed_to", true),
    ("is scheduled on", "deployed_to", true),
    ("are scheduled on", "deployed_to", true),
    ("is running on", "deployed_to", true),
    ("are running on", "deployed_to", true),
    ("is running in", "deployed_to", true),
    ("are running in", "deployed_to", true),
    ("is self-hosted on", "deployed_to", true),
    ("are self-hosted on", "deployed_to", true),
    ("are blocked on", "blocked_by", true),
    ("are waiting on", "blocked_by", true),
    ("are waiting for", "blocked_by", true),
    ("is blocked pending", "blocked_by", true),
    ("are blocked pending", "blocked_by", true),
    ("is on hold pending", "blocked_by", true),
    ("are on hold pending", "blocked_by", true),
    ("is gated on", "blocked_by", true),
    ("are gated on", "blocked_by", true),
    ("is gated behind", "blocked_by", true),
    ("are gated behind", "blocked_by", true),
    ("is stuck on", "blocked_by", true),
    ("are stuck on", "blocked_by", true),
    ("is stuck behind", "blocked_by", true),
    ("are stuck behind", "blocked_by", true),
    ("is stuck waiting on", "blocked_by", true),
    ("are stuck waiting on", "blocked_by", true),
    ("is stalled on", "blocked_by", true),
    ("are stalled on", "blocked_by", true),
    ("is blocked behind", "blocked_by", true),
    ("are blocked behind", "blocked_by", true),
    ("are on hold until", "blocked_by", true),
    ("cannot proceed until", "blocked_by", true),
    ("can only start after", "blocked_by", true),
    ("is a blocker for", "blocked_by", false),
    ("are a blocker for", "blocked_by", false),
    ("is blocking", "blocked_by", false),
    ("are blocking", "blocked_by", false),
    ("is a prerequisite for", "blocked_by", false),
    ("are a prerequisite for", "blocked_by", false),
    ("is a prereq for", "blocked_by", false),
    ("are a prereq for", "blocked_by", false),
    ("is licensed from", "supplied_by", true),
    ("are licensed from", "supplied_by", true),
    ("is bought from", "supplied_by", true),
    ("are bought from", "supplied_by", true),
    ("is purchased from", "supplied_by", true),
    ("are purchased from", "supplied_by", true),
    ("is sourced from", "supplied_by", true),
    ("are sourced from", "supplied_by", true),
    ("is procured from", "supplied_by", true),
    ("are procured from", "supplied_by", true),
    ("is leased from", "supplied_by", true),
    ("are leased from", "supplied_by", true),
    ("is rented from", "supplied_by", true),
    ("are rented from", "supplied_by", true),
    ("is obtained from", "supplied_by", true),
    ("are obtained from", "supplied_by", true),
    ("is licensed through", "supplied_by", true),
    ("are licensed through", "supplied_by", true),
    ("is bought through", "supplied_by", true),
    ("are bought through", "supplied_by", true),
    ("is purchased through", "supplied_by", true),
    ("are purchased through", "supplied_by", true),
    ("is procured through", "supplied_by", true),
    ("are procured through", "supplied_by", true),
    ("is contracted through", "supplied_by", true),
    ("are contracted through", "supplied_by", true),
    ("is outsourced to", "supplied_by", true),
    ("are outsourced to", "supplied_by", true),
    ("is a product of", "supplied_by", true),
    ("are a product of", "supplied_by", true),
    ("is an offering from", "supplied_by", true),
    ("are an offering from", "supplied_by", true),
    ("is a service from", "supplied_by", true),
    ("are a service from", "supplied_by", true),
    ("is the vendor of", "supplied_by", false),
    ("are the vendor of", "supplied_by", false),
    ("is the vendor for", "supplied_by", false),
    ("are the vendor for", "supplied_by", false),
    ("is the supplier of", "supplied_by", false),
    ("are the supplier of", "supplied_by", false),
    ("is the supplier for", "supplied_by", false),
    ("are the supplier for", "supplied_by", false),
    ("is the provider of", "supplied_by", false),
    ("are the provider of", "supplied_by", false),
    ("is the manufacturer of", "supplied_by", false),
    ("are the manufacturer of", "supplied_by", false),
    ("is the reseller for", "supplied_by", false),
    ("are the reseller for", "supplied_by", false),
    ("is part of", "part_of", true),
    ("are part of", "part_of", true),
    ("is a part of", "part_of", true),
    ("are a part of", "part_of", true),
    ("forms part of", "part_of", true),
    ("is a member of", "part_of", true),
    ("are a member of", "part_of", true),
    ("is a component of", "part_of", true),
    ("are a component of", "part_of", true),
    ("is a subsystem of", "part_of", true),
    ("are a subsystem of", "part_of", true),
    ("is a module of", "part_of", true),
    ("are a module of", "part_of", true),
    ("is a subteam of", "part_of", true),
    ("are a subteam of", "part_of", true),
    ("is a sub-team of", "part_of", true),
    ("are a sub-team of", "part_of", true),
    ("is a team in", "part_of", true),
    ("are a team in", "part_of", true),
    ("is a team within", "part_of", true),
    ("are a team within", "part_of", true),
    ("is a team under", "part_of", true),
    ("are a team under", "part_of", true),
    ("is a group within", "part_of", true),
    ("are a group within", "part_of", true),
    ("is a division of", "part_of", true),
    ("are a division of", "part_of", true),
    ("is a subsidiary of", "part_of", true),
    ("are a subsidiary of", "part_of", true),
    ("is a workstream of", "part_of", true),
    ("are a workstream of", "part_of", true),
    ("is a workstream within", "part_of", true),
    ("are a workstream within", "part_of", true),
    ("is a project within", "part_of", true),
    ("are a project within", "part_of", true),
    ("is a child of", "part_of", true),
    ("are a child of", "part_of", true),
    ("is a subtask of", "part_of", true),
    ("are a subtask of", "part_of", true),
    ("is nested under", "part_of", true),
    ("are nested under", "part_of", true),
    ("is nested within", "part_of", true),
    ("are nested within", "part_of", true),
    ("is contained in", "part_of", true),
    ("are contained in", "part_of", true),
    ("is contained within", "part_of", true),
    ("are contained within", "part_of", true),
    ("is under the umbrella of", "part_of", true),
    ("are under the umbrella of", "part_of", true),
    ("is made up of", "part_of", false),
    ("are made up of", "part_of", false),
    ("is comprised of", "part_of", false),
    ("are comprised of", "part_of", false),
    ("is composed of", "part_of", false),
    ("are composed of", "part_of", false),
    ("is the parent of", "part_of", false),
    ("are the parent of", "part_of", false),
];

/// The relations of a topology, which the tables above read: what a chain
/// between two things is best made of.
pub const TOPOLOGY: &[&str] = &[
    "owns",
    "depends_on",
    "reports_to",
    "deployed_to",
    "blocked_by",
    "supplied_by",
    "leads",
    "part_of",
    "in_repo",
];

/// Verbs read in their other tenses too: the present (third person), the
/// participle and the -ing form, the relation, and whether the active
/// voice's subject is the edge's subject. "has looked after", "is using",
/// "has been maintained by" state what "looks after", "uses" and "is
/// maintained by" do; English's tenses, not any one writer's wording.
const TENSED: &[(&str, &str, &str, &str, bool)] = &[
    ("owns", "owned", "owning", "owns", true),
    ("maintains", "maintained", "maintaining", "owns", true),
    ("looks after", "looked after", "looking after", "owns", true),
    ("operates", "operated", "operating", "owns", true),
    ("administers", "administered", "administering", "owns", true),
    (
        "depends on",
        "depended on",
        "depending on",
        "depends_on",
        true,
    ),
    ("relies on", "relied on", "relying on", "depends_on", true),
    ("uses", "used", "using", "depends_on", true),
    ("calls", "called", "calling", "depends_on", true),
    ("needs", "needed", "needing", "depends_on", true),
    ("requires", "required", "requiring", "depends_on", true),
    (
        "reads from",
        "read from",
        "reading from",
        "depends_on",
        true,
    ),
    (
        "pulls from",
        "pulled from",
        "pulling from",
        "depends_on",
        true,
    ),
    ("consumes", "consumed", "consuming", "depends_on", true),
    (
        "subscribes to",
        "subscribed to",
        "subscribing to",
        "depends_on",
        true,
    ),
    ("talks to", "talked to", "talking to", "depends_on", true),
    ("leads", "led", "leading", "leads", true),
    ("manages", "managed", "managing", "leads", true),
    (
        "reports to",
        "reported to",
        "reporting to",
        "reports_to",
        true,
    ),
    ("works for", "worked for", "working for", "reports_to", true),
    (
        "works under",
        "worked under",
        "working under",
        "reports_to",
        true,
    ),
    ("supplies", "supplied", "supplying", "supplied_by", false),
    ("blocks", "blocked", "blocking", "blocked_by", false),
    // The same writer's verbs (bench/relations/lexicon.json).
    ("co-owns", "co-owned", "co-owning", "owns", true),
    ("curates", "curated", "curating", "owns", true),
    ("writes to", "written to", "writing to", "depends_on", true),
    ("invokes", "invoked", "invoking", "depends_on", true),
    (
        "connects to",
        "connected to",
        "connecting to",
        "depends_on",
        true,
    ),
    (
        "publishes to",
        "published to",
        "publishing to",
        "depends_on",
        true,
    ),
    (
        "authenticates against",
        "authenticated against",
        "authenticating against",
        "depends_on",
        true,
    ),
    (
        "depends upon",
        "depended upon",
        "depending upon",
        "depends_on",
        true,
    ),
    (
        "underpins",
        "underpinned",
        "underpinning",
        "depends_on",
        false,
    ),
    (
        "reports into",
        "reported into",
        "reporting into",
        "reports_to",
        true,
    ),
    (
        "answers to",
        "answered to",
        "answering to",
        "reports_to",
        true,
    ),
    (
        "rolls up to",
        "rolled up to",
        "rolling up to",
        "reports_to",
        true,
    ),
    (
        "reports up to",
        "reported up to",
        "reporting up to",
        "reports_to",
        true,
    ),
    (
        "line manages",
        "line managed",
        "line managing",
        "reports_to",
        false,
    ),
    (
        "supervises",
        "supervised",
        "supervising",
        "reports_to",
        false,
    ),
    ("heads", "headed", "heading", "leads", true),
    ("co-leads", "co-led", "co-leading", "leads", true),
    ("oversees", "overseen", "overseeing", "leads", true),
    ("spearheads", "spearheaded", "spearheading", "leads", true),
    ("runs on", "run on", "running on", "deployed_to", true),
    ("runs in", "run in", "running in", "deployed_to", true),
    (
        "deploys to",
        "deployed to",
        "deploying to",
        "deployed_to",
        true,
    ),
    ("lives on", "lived on", "living on", "deployed_to", true),
    (
        "resides on",
        "resided on",
        "residing on",
        "deployed_to",
        true,
    ),
    (
        "resides in",
        "resided in",
        "residing in",
        "deployed_to",
        true,
    ),
    (
        "executes on",
        "executed on",
        "executing on",
        "deployed_to",
        true,
    ),
    ("waits on", "waited on", "waiting on", "blocked_by", true),
    ("waits for", "waited for", "waiting for", "blocked_by", true),
    ("awaits", "awaited", "awaiting", "blocked_by", true),
    ("holds up", "held up", "holding up", "blocked_by", false),
    ("belongs to", "belonged to", "belonging to", "part_of", true),
    (
        "sits within",
        "sat within",
        "sitting within",
        "part_of",
        true,
    ),
    ("sits under", "sat under", "sitting under", "part_of", true),
    (
        "falls under",
        "fallen under",
        "falling under",
        "part_of",
        true,
    ),
    (
        "falls within",
        "fallen within",
        "falling within",
        "part_of",
        true,
    ),
    (
        "rolls up into",
        "rolled up into",
        "rolling up into",
        "part_of",
        true,
    ),
    ("comprises", "comprised", "comprising", "part_of", false),
    (
        "encompasses",
        "encompassed",
        "encompassing",
        "part_of",
        false,
    ),
    (
        "consists of",
        "consisted of",
        "consisting of",
        "part_of",
        false,
    ),
];

/// A verb's plain form ("calls": "call", "relies on": "rely on",
/// "pushes": "push"), as written after "we", "they" or in an instruction.
fn plain(present: &str) -> String {
    let (verb, rest) = present.split_once(' ').unwrap_or((present, ""));
    let stem = if let Some(s) = verb.strip_suffix("ies") {
        format!("{s}y")
    } else if ["ches", "shes", "sses", "xes"]
        .iter()
        .any(|e| verb.ends_with(e))
    {
        verb[..verb.len() - 2].to_string()
    } else {
        verb.strip_suffix('s').unwrap_or(verb).to_string()
    };
    if rest.is_empty() {
        stem
    } else {
        format!("{stem} {rest}")
    }
}

/// Every verb phrase read: [`STATEMENTS`], and [`TENSED`]'s verbs in the
/// perfect and the progressive, active and passive.
fn verb_phrases() -> &'static [(String, &'static str, bool)] {
    static ALL: OnceLock<Vec<(String, &'static str, bool)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<(String, &'static str, bool)> = STATEMENTS
            .iter()
            .map(|(p, rel, forward)| (p.to_string(), *rel, *forward))
            .collect();
        for (present, participle, ing, rel, forward) in TENSED {
            // "lead" and "head" are also nouns ("the tech lead Jonas", "the
            // head of Payments"): not read plain.
            let plain = if matches!(*present, "leads" | "heads") {
                present.to_string()
            } else {
                plain(present)
            };
            let active = [
                present.to_string(),
                plain,
                format!("has {participle}"),
                format!("have {participle}"),
                format!("has been {ing}"),
                format!("have been {ing}"),
                format!("is {ing}"),
                format!("are {ing}"),
            ];
            let passive = [
                format!("{participle} by"),
                format!("is {participle} by"),
                format!("are {participle} by"),
                format!("has been {participle} by"),
                format!("have been {participle} by"),
                format!("is being {participle} by"),
            ];
            for (phrases, forward) in [(active.to_vec(), *forward), (passive.to_vec(), !*forward)] {
                for p in phrases {
                    if !all.iter().any(|(q, _, _)| *q == p) {
                        all.push((p, *rel, forward));
                    }
                }
            }
        }
        all
    })
}

const LONGEST_NAME_WORDS: usize = 6;

pub fn note(rel_path: &str, source: &str) -> NoteGraph {
    let (meta, body) = crate::retrieval::frontmatter::split(source);
    let src = source.strip_prefix('\u{feff}').unwrap_or(source);
    let body_first_line = src[..src.len().saturating_sub(body.len())].lines().count() as u32 + 1;
    let stem = rel_path
        .rsplit('/')
        .next()
        .unwrap_or(rel_path)
        .rsplit_once('.')
        .map_or(rel_path, |(s, _)| s)
        .to_string();
    // As the index names a note: its title, else its first `# heading`.
    let title = meta
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            body.lines()
                .find_map(|l| l.strip_prefix("# "))
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        });
    let name = title.clone().unwrap_or_else(|| stem.clone());
    let mut aliases = vec![stem.clone()];
    aliases.extend(title);
    aliases.extend(strings(meta.get("aliases")));
    let mut g = NoteGraph {
        name: name.clone(),
        aliases,
        edges: Vec::new(),
        tenant: crate::retrieval::frontmatter::tenant_of(&meta),
    };
    properties(&mut g, &meta, src);
    // Statements are read by paragraph (prose wraps its lines); links and
    // `Key: value` lines by line.
    let mut para = Paragraph {
        // "I" in a note with an `author` is its author, named as a name
        // in a property is (`[[Li Wei]]`, `Li Wei <li@example.com>`).
        author: meta
            .get("author")
            .and_then(Value::as_str)
            .and_then(|a| clean_name(&strip_parentheses(a.split('<').next().unwrap_or(a)))),
        ..Paragraph::default()
    };
    let mut in_code = false;
    // A table's header cells, once its separator row is seen.
    let mut table: Option<Vec<String>> = None;
    let mut header: Option<Vec<String>> = None;
    // A list whose label names a relation ("## Dependencies", "Direct
    // reports:", "It depends on:"): its items are the relation's objects.
    let mut listed: Option<Listed> = None;
    // Whether the label's table (if it has one) is past its header.
    let mut listed_body = false;
    for (i, line) in body.lines().enumerate() {
        let n = body_first_line + i as u32;
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            para.flush(&mut g);
            in_code = !in_code;
            listed = None;
            continue;
        }
        if in_code {
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            para.flush(&mut g);
            links(&mut g, t, n);
            if t.starts_with('#') {
                listed = list_label(&g, t.trim_start_matches('#'));
                listed_body = false;
            }
            continue;
        }
        links(&mut g, t, n);
        // A table under the label lists its items in its first column,
        // below its header.
        let row = if listed.is_some() && t.starts_with('|') {
            let cells = table_cells(t);
            let separator = cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')));
            if separator || !listed_body {
                listed_body |= separator;
                continue;
            }
            cells.into_iter().next().filter(|c| !c.is_empty())
        } else {
            None
        };
        let item = list_item(t).or(row.as_deref());
        match (&listed, item) {
            (Some(l), Some(it)) => {
                if let Some(object) = item_name(it) {
                    let (from, to) = if l.forward {
                        (l.subject.as_str(), object.as_str())
                    } else {
                        (object.as_str(), l.subject.as_str())
                    };
                    if key(from) != key(to) {
                        g.edges.push(edge(from, l.rel, to, n, "property", t));
                    }
                }
                para.flush(&mut g);
                continue;
            }
            (Some(_), None) => listed = None,
            _ => {}
        }
        if t.ends_with(':') && !t.starts_with('|') {
            if let Some(l) = list_label(&g, t) {
                para.flush(&mut g);
                listed = Some(l);
                listed_body = false;
                continue;
            }
        }
        if t.starts_with('|') {
            para.flush(&mut g);
            let cells = table_cells(t);
            if cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
            {
                table = header.take();
            } else if let (Some(cols), [first, v]) = (&table, cells.as_slice()) {
                // A table of two columns: each row a `Key | value` pair
                // about the note (`| Owner | [[Platform]] |`), unless the
                // header names a relation (`| Service | Owner |`).
                let k = strip_parentheses(first).to_lowercase();
                if keyed_relation(&k).is_some() {
                    keyed(&mut g, &k, &split_list(v), n, "property", t);
                } else if let Some(c) = cols.get(1).filter(|_| !first.is_empty()) {
                    keyed_about(&mut g, first, c, &split_list(v), n, "property", t);
                }
            } else if let Some(cols) = &table {
                // A row: its first cell is what the row is about; a column
                // headed by a relation gives its edges.
                let cols = cols.clone();
                for (c, cell) in cols.iter().zip(&cells).skip(1) {
                    if let Some(about) = cells.first().filter(|a| !a.is_empty()) {
                        keyed_about(&mut g, about, c, &split_list(cell), n, "property", t);
                    }
                }
            } else {
                header = Some(cells.iter().map(|c| c.to_lowercase()).collect());
            }
            continue;
        }
        table = None;
        header = None;
        // "Owner: [[Tomasz]] · Status: planning": fields on one line.
        // Most lines are ASCII, which has neither (checked a word at a time).
        let fields: Vec<&str> = if !t.is_ascii() && (t.contains('·') || t.contains('•')) {
            t.split(" · ").flat_map(|f| f.split(" • ")).collect()
        } else {
            Vec::new()
        };
        if fields.len() > 1 && fields.iter().all(|f| key_line_any(f)) {
            para.flush(&mut g);
            for f in fields {
                if let Some((k, v)) = key_line(f) {
                    keyed(&mut g, &k, &split_list(v), n, "property", t);
                }
            }
            continue;
        }
        if let Some((k, v)) = key_line(t) {
            para.flush(&mut g);
            // "Head: Tomasz Wilk. Tomasz reports to …": the value is its
            // first sentence; what follows is prose.
            let (value, rest) = match sentences(v).as_slice() {
                // `first` is a part of `v`: what follows it is the rest.
                [first, _, ..] => {
                    let end = first.as_ptr() as usize - v.as_ptr() as usize + first.len();
                    (*first, v[end..].trim_start_matches(['.', '!', '?']).trim())
                }
                _ => (v, ""),
            };
            keyed(&mut g, &k, &split_list(value), n, "property", t);
            if !rest.is_empty() {
                para.push(rest, n);
            }
            continue;
        }
        // A list item starts a paragraph of its own.
        if t.starts_with(['-', '*', '+'])
            || (t.starts_with(|c: char| c.is_ascii_digit())
                && t.split_once(". ")
                    .is_some_and(|(d, _)| d.chars().all(|c| c.is_ascii_digit())))
        {
            para.flush(&mut g);
        }
        para.push(t.trim_start_matches(['-', '*', '+', ' ']), n);
    }
    para.flush(&mut g);
    g
}

/// A list introduced by a label that names a relation.
struct Listed {
    subject: String,
    rel: &'static str,
    /// The subject is the edge's subject (`Dependencies:`), else its
    /// object (`Direct reports:`).
    forward: bool,
}

/// A label ("Dependencies:", "## Owners", "It depends on:") as the relation
/// its list gives, about the note.
fn list_label(g: &NoteGraph, label: &str) -> Option<Listed> {
    thread_local! {
        // Labels that name no relation ("Log", "Notes", "Action items"):
        // most of them, the same few in note after note. Whether a label
        // names one depends on its words alone (the note only names the
        // subject of one that does).
        static NO_RELATION: std::cell::RefCell<HashSet<String>> = Default::default();
    }
    if NO_RELATION.with_borrow(|known| known.contains(label)) {
        return None;
    }
    let listed = read_label(g, label);
    // Bounded: a few short labels are what repeats (a long line that ends
    // with a colon is prose, not kept), and a folder of notes with a
    // heading each of its own empties the set now and then.
    if listed.is_none() && label.len() <= 80 {
        NO_RELATION.with_borrow_mut(|known| {
            if known.len() >= 4096 {
                known.clear();
            }
            known.insert(label.to_string());
        });
    }
    listed
}

fn read_label(g: &NoteGraph, label: &str) -> Option<Listed> {
    // A line that ends with a colon introduces what follows; a heading
    // only names it.
    let colon = label.trim_end().trim_end_matches('*').ends_with(':');
    let label = label
        .trim()
        .trim_end_matches(':')
        .trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace())
        .trim_end_matches(':');
    let spoken = strip_parentheses(label)
        .replace(['_', '-'], " ")
        .to_lowercase();
    let spoken = spoken.trim();
    // A label is its noun, after any word that qualifies it ("Main
    // consumers", "Upstream dependencies", "Hard dependencies").
    let words: Vec<&str> = spoken.split_whitespace().collect();
    let tails = (0..words.len().min(3)).map(|i| words[i..].join(" "));
    if let Some((rel, subject)) = tails
        .filter(|t| !t.is_empty())
        .find_map(|t| keyed_relation(&t))
    {
        return Some(Listed {
            subject: g.name.clone(),
            rel,
            forward: subject,
        });
    }
    // "Line managers under Tomasz:", "Reporting to Grace:": each item
    // reports to the one named.
    if colon {
        for mark in [" under ", "reporting to ", "reports to "] {
            if let Some(i) = format!(" {spoken}").find(mark) {
                let named = &label[(i + mark.len()).saturating_sub(1).min(label.len())..];
                if let Some(subject) = clean_name(named) {
                    return Some(Listed {
                        subject,
                        rel: "reports_to",
                        forward: false,
                    });
                }
            }
        }
    }
    // A sentence that ends with its verb: "It depends on:"; before a colon,
    // words after the verb only announce the list ("We look after the
    // shared plumbing:").
    let lower = format!(" {} ", spoken);
    let (at, len, _, rel, forward) = Verbs::new(&lower, &lower).next_verb(0)?;
    let before = lower[..at].trim();
    // "Everything below depends on Keystone:", "The following are owned by
    // X:": the items are the subjects.
    if colon
        && (before.contains("below")
            || before.contains("following")
            || before.starts_with("these")
            || before.starts_with("all of these")
            || matches!(
                before,
                "who" | "what" | "which" | "whoever" | "anything that"
            ))
    {
        // "Who reads from it:": the items read from the note.
        let after = &label[(at + len + 1).min(label.len())..];
        let object = head_name(after.split([',', ';']).next().unwrap_or(after))
            .filter(|o| !is_pronoun(o))
            .unwrap_or_else(|| g.name.clone());
        return Some(Listed {
            subject: object,
            rel,
            forward: !forward,
        });
    }
    if colon || lower[at + len + 2..].trim().is_empty() {
        let subject = if before.is_empty() || is_pronoun(before) || is_first_person(before) {
            g.name.clone()
        } else {
            let original = label[..before.len().min(label.len())].trim();
            clean_name(original).unwrap_or_else(|| g.name.clone())
        };
        return Some(Listed {
            subject,
            rel,
            forward,
        });
    }
    None
}

/// A list item's text (`- x`, `* x`, `1. x`), else None.
fn list_item(t: &str) -> Option<&str> {
    if let Some(rest) = t.strip_prefix(['-', '*', '+']) {
        return rest.starts_with(' ').then(|| rest.trim());
    }
    // (Only a line that starts with a digit is looked through.)
    if !t.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (d, rest) = t.split_once(['.', ')'])?;
    (!d.is_empty()
        && d.len() <= 3
        && d.chars().all(|c| c.is_ascii_digit())
        && rest.starts_with(' '))
    .then(|| rest.trim())
}

/// The name a list item starts with: its first link, else its text up to
/// a dash, colon, comma or parenthesis ("[[On-Call Roster]] — who is on
/// call", "Telvox SMS Gateway — outbound SMS").
fn item_name(item: &str) -> Option<String> {
    let item = item.trim().trim_matches('*').trim();
    if item.starts_with('[') {
        if let Some(t) = first_link(item) {
            return Some(t);
        }
    }
    let end = [
        " — ", " – ", " - ", ":", ",", "(", ";", " has ", " is ", " are ", " was ", " were ",
    ]
    .iter()
    .filter_map(|sep| item.find(sep))
    .min()
    .unwrap_or(item.len());
    clean_name(&item[..end])
}

/// The note `t` opens with a link to, if it does (`[[Relay Engine]] — …`).
fn first_link(t: &str) -> Option<String> {
    if !t.trim_start().starts_with('[') {
        return None;
    }
    link_targets(t).into_iter().next()
}

/// `text` without its parenthesised parts ("Northbrook DC (relay-01
/// active)" is Northbrook DC).
fn strip_parentheses(text: &str) -> std::borrow::Cow<'_, str> {
    // Most text has none: nothing to copy.
    if !text.contains('(') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    // A Markdown link's target, `[text](note.md)`, is kept.
    let mut in_target = false;
    let mut prev = ' ';
    for c in text.chars() {
        match c {
            '(' if depth == 0 && prev == ']' => {
                in_target = true;
                out.push(c);
            }
            ')' if in_target => {
                in_target = false;
                out.push(c);
            }
            _ if in_target => out.push(c),
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        prev = c;
    }
    std::borrow::Cow::Owned(out.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Where `needle` first starts in `text`, as `str::find` says, by the
/// plain search: on the few words of a clause, setting up `str::find`'s
/// searcher costs more than the search.
fn find_short(text: &str, needle: &str) -> Option<usize> {
    let (t, n) = (text.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else {
        return Some(0);
    };
    // A match of whole UTF-8 starts at a character: the same offsets.
    (0..(t.len() + 1).saturating_sub(n.len()))
        .find(|&i| t[i] == first && t[i + 1..i + n.len()] == *rest)
}

/// The cells of a table row, trimmed, bold marks off.
fn table_cells(t: &str) -> Vec<String> {
    let inner = t.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .split('|')
        .map(|c| c.trim().trim_matches('*').trim().to_string())
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(scalar).collect(),
        Some(other) => scalar(other).into_iter().collect(),
        None => Vec::new(),
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The line of the frontmatter that holds `key` (1-based), else 1.
fn key_line_no(src: &str, key: &str) -> u32 {
    src.lines()
        .take_while(|l| !l.trim_start().starts_with("# "))
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i as u32 + 1)
}

fn properties(g: &mut NoteGraph, meta: &Map<String, Value>, src: &str) {
    for (k, v) in meta {
        let line = key_line_no(src, k);
        let text = src
            .lines()
            .nth(line as usize - 1)
            .unwrap_or("")
            .trim()
            .to_string();
        let values = strings(Some(v));
        if k == "tags" || k == "tag" {
            for t in values {
                let tag = format!("#{}", t.trim_start_matches('#'));
                g.edges
                    .push(edge(&g.name, "tagged", &tag, line, "tag", &text));
            }
            continue;
        }
        let spoken = k.replace(['_', '-'], " ").to_lowercase();
        if keyed_relation(&spoken).is_some() {
            keyed(g, &spoken, &values, line, "property", &text);
        } else if !values.is_empty() && values.iter().all(|v| wiki_target(v).is_some()) {
            // Any property made of links: the key is the relation.
            let rel = spoken.replace(' ', "_");
            for v in &values {
                if let Some(t) = wiki_target(v) {
                    g.edges
                        .push(edge(&g.name, &rel, &t, line, "property", &text));
                }
            }
        }
    }
}

/// Whether a field reads `Key: value` (a short key), whatever the key.
fn key_line_any(t: &str) -> bool {
    t.split_once(':').is_some_and(|(k, v)| {
        let k = k.trim().trim_matches('*').trim();
        !k.is_empty() && k.split_whitespace().count() <= 3 && !v.trim().is_empty()
    })
}

/// `Key: value` on a line of its own (`- **Owner:** Priya` too), when
/// the key names a relation.
fn key_line(t: &str) -> Option<(String, &str)> {
    let t = t.trim_start_matches(['-', '*', '+', ' ']);
    let (k, v) = t.split_once(':')?;
    let k = strip_parentheses(k.trim().trim_matches('*').trim());
    // Most lines with a colon are prose ("Goal check: …"): a key longer
    // than any relation's name is none (lower case never has fewer
    // characters), found without a copy.
    static LONGEST: OnceLock<usize> = OnceLock::new();
    let longest = *LONGEST.get_or_init(|| {
        KEYED
            .iter()
            .flat_map(|(names, _, _)| names.iter())
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
    });
    if k.chars().nth(longest).is_some() {
        return None;
    }
    let k = k.to_lowercase();
    let v = v.trim().trim_start_matches('*').trim();
    let known = keyed_relation(&k).is_some();
    (known && !v.is_empty()).then_some((k, v))
}

fn keyed(g: &mut NoteGraph, k: &str, values: &[String], line: u32, how: &'static str, text: &str) {
    let name = g.name.clone();
    keyed_about(g, &name, k, values, line, how, text);
}

/// `keyed` about `about` (a table row's first cell) rather than the note.
fn keyed_about(
    g: &mut NoteGraph,
    about: &str,
    k: &str,
    values: &[String],
    line: u32,
    how: &'static str,
    text: &str,
) {
    let Some((rel, subject)) = keyed_relation(k) else {
        return;
    };
    // A table row about `[[Relay Engine]]` is about Relay Engine.
    let about = first_link(about).unwrap_or_else(|| about.to_string());
    let about = about.as_str();
    for v in values {
        // "[[TeleLink]] subscribing": the link is the name.
        let linked = wiki_target(v).or_else(|| link_targets(v).into_iter().next());
        // "Margaret Ashby (Chief Executive)": the name, not its aside.
        let target = linked.clone().unwrap_or_else(|| {
            strip_parentheses(v)
                .trim_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '_' | '`'))
                .to_string()
        });
        // An empty cell written as a dash is no name, nor is a phrase
        // ("nothing else", "3 broker VMs behind keepalived").
        if !target.chars().any(char::is_alphanumeric)
            || target.split_whitespace().count() > LONGEST_NAME_WORDS
            || (linked.is_none() && !looks_like_a_name(&target))
        {
            continue;
        }
        let e = if subject {
            edge(about, rel, &target, line, how, text)
        } else {
            edge(&target, rel, about, line, how, text)
        };
        g.edges.push(e);
    }
}

fn edge(from: &str, rel: &str, to: &str, line: u32, how: &'static str, text: &str) -> Edge {
    let end = text.char_indices().nth(240).map_or(text.len(), |(i, _)| i);
    let text = text[..end].to_string();
    Edge {
        from: from.trim().to_string(),
        rel: rel.to_string(),
        to: to.trim().to_string(),
        line,
        how,
        text,
    }
}

/// `[[Target]]`, `[[Target|shown]]`, `[[Target#part]]`: the target.
fn wiki_target(s: &str) -> Option<String> {
    let inner = s.trim().strip_prefix("[[")?.strip_suffix("]]")?;
    let t = inner.split(['|', '#']).next()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn links(g: &mut NoteGraph, t: &str, n: u32) {
    for target in link_targets(t) {
        g.edges
            .push(edge(&g.name, "links_to", &target, n, "link", t));
    }
}

/// Items of a value written as a list: `A, B and C`, `[[A]], [[B]]`.
fn split_list(v: &str) -> Vec<String> {
    let v = strip_parentheses(v);
    let v = v.trim().trim_end_matches('.');
    // Not inside a link's brackets: `[Payments and Billing](payments.md)`
    // is one item.
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let cut = match b[i] {
            b'[' => {
                depth += 1;
                0
            }
            b']' => {
                depth = depth.saturating_sub(1);
                0
            }
            b',' | b';' if depth == 0 => 1,
            b' ' if depth == 0 && b[i..].starts_with(b" and ") => 5,
            _ => 0,
        };
        if cut > 0 {
            items.push(&v[start..i]);
            start = i + cut;
            i = start;
        } else {
            i += 1;
        }
    }
    items.push(&v[start..]);
    items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Words that end a name before a verb, or after one.
const STOP_BEFORE: &[&str] = &[
    "and",
    "but",
    "that",
    "which",
    "who",
    "while",
    "when",
    "because",
    "so",
    "then",
    "also",
    "now",
    "still",
    "currently",
];
/// [`STOP_AFTER`] as one search: the earliest of them in a text.
fn stop_after() -> &'static Regex {
    static STOPS: OnceLock<Regex> = OnceLock::new();
    STOPS.get_or_init(|| {
        let alternation: Vec<String> = STOP_AFTER.iter().map(|s| regex::escape(s)).collect();
        Regex::new(&alternation.join("|")).expect("valid pattern")
    })
}

const STOP_AFTER: &[&str] = &[
    // A name holds no verb: "the Policy Systems team and Grace Liu is the owner".
    " is ",
    " are ",
    " was ",
    " were ",
    " for ",
    " to ",
    " in ",
    " with ",
    " from ",
    " by ",
    " via ",
    " at ",
    " since ",
    " because ",
    " which ",
    " that ",
    " who ",
    " when ",
    " until ",
    " as ",
    " (",
    " alongside ",
    " along with ",
    " together with ",
    " next to ",
    " behind ",
    " on its ",
    " on their ",
    " during ",
    " after ",
    " before ",
    " but ",
    " where ",
    " if ",
    " unless ",
    " so ",
    " whenever ",
    " while ",
    " being ",
    " rather than ",
    " instead of ",
];
const PRONOUNS: &[&str] = &[
    "it",
    "this",
    "that",
    "they",
    "he",
    "she",
    "these",
    "her",
    "his",
    "him",
    "them",
    "their",
    "this service",
    "this team",
];

/// Lines of prose joined, with the line each starts at.
#[derive(Default)]
struct Paragraph {
    text: String,
    starts: Vec<(usize, u32)>,
    /// The text after a space, as written and in ASCII lower case, for
    /// the look for a verb: kept from one paragraph to the next (a note
    /// has many, and most are a line or two).
    padded: String,
    lower: String,
    verbs_at: Vec<usize>,
    /// Who "I" is: the note's author, when it names one.
    author: Option<String>,
}

impl Paragraph {
    fn push(&mut self, t: &str, n: u32) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.starts.push((self.text.len(), n));
        self.text.push_str(t);
    }

    fn line_at(&self, offset: usize) -> u32 {
        // In order of offset: a search, not a walk (a paragraph may be
        // thousands of lines, each asked for).
        let i = self.starts.partition_point(|(o, _)| *o <= offset);
        i.checked_sub(1).map_or(1, |i| self.starts[i].1)
    }

    fn flush(&mut self, g: &mut NoteGraph) {
        // Most paragraphs state no relation: one look for a verb over the
        // whole paragraph before it is read sentence by sentence.
        if !self.text.is_empty() {
            let mut at = std::mem::take(&mut self.verbs_at);
            at.clear();
            self.padded.clear();
            self.padded.push(' ');
            self.padded.push_str(&self.text);
            self.lower.clear();
            self.lower.push_str(&self.padded);
            self.lower.make_ascii_lowercase();
            let mut from = 0;
            let mut verbs = Verbs::new(&self.padded, &self.lower);
            while let Some((i, len, _, _, _)) = verbs.next(from) {
                // `i` is the space before the verb: in the text, where the
                // verb starts.
                at.push(i);
                from = i + len + 1;
            }
            if !at.is_empty() {
                statements(g, self, &at);
            }
            self.verbs_at = at;
        }
        self.text.clear();
        self.starts.clear();
    }
}

/// Verbs of data flowing in: what flows, then "from".
const PULLS: &[&str] = &[
    "pulls",
    "pull",
    "pulling",
    "reads",
    "read",
    "reading",
    "gets",
    "get",
    "getting",
    "fetches",
    "fetch",
    "fetching",
    "loads",
    "load",
    "loading",
    "receives",
    "receive",
    "receiving",
    "ingests",
    "ingest",
    "ingesting",
    "collects",
    "collect",
    "collecting",
    "consumes",
    "consume",
    "consuming",
    "importing",
    "syncs",
    "syncing",
    "downloading",
];
/// Verbs of data flowing out: what flows, then "to", "into" or "through".
const WRITES: &[&str] = &[
    "writes",
    "write",
    "writing",
    "pushes",
    "push",
    "pushing",
    "sends",
    "send",
    "sending",
    "publishes",
    "publish",
    "publishing",
    "exporting",
    "uploading",
    "emits",
    "emit",
    "emitting",
];
/// Verbs of data kept somewhere: what is kept, then "in", "into" or "to".
const STORES: &[&str] = &[
    "stores",
    "storing",
    "persists",
    "persist",
    "persisting",
    "archiving",
];

/// A verb found: its offset (the space before it), its length there, the
/// phrase, the relation and its direction.
type Verb = (usize, usize, &'static str, &'static str, bool);

/// A verb of data flowing found: its start, its length, whether it pulls
/// (else writes), and whether what flows is plain words.
type Flow = (usize, usize, bool, bool);

/// The relation verbs of one text, found left to right. One pattern for
/// all the phrases, longest first, so that at one place the longest phrase
/// wins ("is owned by" over "owned by"); a verb of data flowing, with what
/// flows between it and its preposition ("pulls the risk score for each
/// area from [[LeakSense]]", "writes the setpoints out through"), is read
/// as its phrase ("pulls from", "writes to").
struct Verbs<'t> {
    /// The text as written, and its ASCII lower case (the same offsets).
    text: &'t str,
    lower: &'t str,
    /// The first verb of data flowing at or after an offset: kept while
    /// the search has not passed it (looking for one reads to the text's
    /// end when there is none).
    flow: Option<(usize, Option<Flow>)>,
}

impl<'t> Verbs<'t> {
    fn new(text: &'t str, lower: &'t str) -> Verbs<'t> {
        Verbs {
            text,
            lower,
            flow: None,
        }
    }

    /// The first verb of data flowing at or after `from`.
    fn flow_at(&mut self, from: usize) -> Option<Flow> {
        static FLOWS: OnceLock<Regex> = OnceLock::new();
        let flows = FLOWS.get_or_init(|| {
            // What flows is a few plain words: no punctuation, no link, and
            // not itself a preposition of the verb.
            let gap = r"(?: (?:[a-z0-9'’\-/`_.]+)){1,8}?";
            Regex::new(&format!(
                r" (?:(?:{}){gap} from|(?:{}){gap} (?:to|into|through)|(?:{}){gap} (?:in|into|to)) ",
                PULLS.join("|"),
                WRITES.join("|"),
                STORES.join("|")
            ))
            .expect("valid pattern")
        });
        match self.flow {
            Some((since, None)) if since <= from => return None,
            Some((since, Some(f))) if since <= from && from <= f.0 => return Some(f),
            _ => {}
        }
        // What flows lies between the match's first word (the verb) and
        // its last (the preposition: "from" after a verb that pulls), its
        // words one space apart: read from the match, no groups asked of
        // the pattern (which a search without them finds faster).
        let found = flows.find_at(self.lower, from).map(|m| {
            let words: Vec<&str> = m.as_str().trim().split(' ').collect();
            let gap = &words[1..words.len() - 1];
            let plain = !gap
                .iter()
                .any(|w| matches!(*w, "from" | "to" | "into" | "through" | "in" | "on" | "by"));
            (m.start(), m.len(), words.last() == Some(&"from"), plain)
        });
        self.flow = Some((from, found));
        found
    }

    /// The first relation verb at or after `from`.
    fn next_verb(&mut self, from: usize) -> Option<Verb> {
        static VERBS: OnceLock<(Regex, HashMap<&'static str, usize>)> = OnceLock::new();
        let (verbs, index) = VERBS.get_or_init(|| {
            let all = verb_phrases();
            let mut phrases: Vec<&str> = all.iter().map(|(p, _, _)| p.as_str()).collect();
            phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
            let alternation: Vec<String> = phrases.iter().map(|p| regex::escape(p)).collect();
            let re =
                // A space before; after, a space or the sentence's end ("…,
                // which Tariq leads.").
                Regex::new(&format!(
                    " (?:{})(?: |[.!?]?$|[.!?] )",
                    alternation.join("|")
                ))
                .expect("valid pattern");
            // The first of equal phrases, as a search through them finds.
            let mut index = HashMap::new();
            for (i, (p, _, _)) in all.iter().enumerate() {
                index.entry(p.as_str()).or_insert(i);
            }
            (re, index)
        });
        let phrase = verbs.find_at(self.lower, from);
        // A verb of data flowing counts when it comes first (at the same
        // word, "consumes data from X" says more than "consumes") and what
        // flows is plain words.
        if let Some((start, len, pulls, plain)) = self.flow_at(from) {
            if plain && phrase.is_none_or(|m| start <= m.start()) {
                let name = if pulls { "pulls from" } else { "writes to" };
                return Some((start, len - 2, name, "depends_on", true));
            }
        }
        let m = phrase?;
        let said = self.lower[m.start() + 1..m.end()].trim_end_matches([' ', '.', '!', '?']);
        let (p, rel, forward) = &verb_phrases()[*index.get(said)?];
        Some((m.start(), said.len(), p.as_str(), *rel, *forward))
    }

    /// The first verb at or after `from` as written: a verb written with a
    /// capital inside a sentence is part of a name ("Orchard Supply sends
    /// …"), not a verb; at a sentence's start it is one ("Call [[Verdict]]
    /// for the rules").
    fn next(&mut self, from: usize) -> Option<Verb> {
        let mut from = from;
        loop {
            let found = self.next_verb(from)?;
            let i = found.0;
            let capital = self.text[i + 1..].starts_with(|c: char| c.is_ascii_uppercase());
            let opens = self.text[..i]
                .trim_end()
                .trim_end_matches(['*', '_', ')', '"'])
                .chars()
                .last()
                .is_none_or(|c| matches!(c, '.' | '!' | '?' | ':' | ';' | '—' | '–' | '-' | '|'));
            // "a page of its own": after a possessive, "own" is no verb.
            let possessed = found.2 == "own"
                && self.lower[..i].rsplit(' ').next().is_some_and(|w| {
                    matches!(w, "its" | "their" | "his" | "her" | "my" | "our" | "your")
                });
            if (!capital || opens) && !possessed {
                return Some(found);
            }
            from = i + 1;
        }
    }
}

/// The statements of a paragraph; `verbs_at`: where in its text the
/// relation verbs start (a sentence with none is not read).
fn statements(g: &mut NoteGraph, para: &Paragraph, verbs_at: &[usize]) {
    let note_key = key(&g.name);
    let mut last_subject: Option<String> = None;
    // A sentence without a relation verb, whose subject a pronoun in a
    // later one may mean: read only when one does.
    let mut unread: Option<&str> = None;
    // Whether the sentence before named the note as an object ("Daniel
    // reports to Marcus" in Marcus's note), for "her" and "him".
    let mut note_was_object = false;
    // What "it" last meant in the paragraph: the next "it" means the same.
    let mut last_it: Option<String> = None;
    // Whether the subject spoken of last may be "it": not one who owns,
    // leads or reports, not several at once.
    let mut subject_may_be_it = true;
    let base = para.text.as_ptr() as usize;
    // A semicolon joins clauses that each say their own thing ("A owns
    // B; B reads from C"): each is read as a sentence.
    for said in sentences(&para.text)
        .into_iter()
        .flat_map(|s| s.split("; "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let at = said.as_ptr() as usize - base;
        // `verbs_at` is in order: the first at or after the sentence's start.
        let first = verbs_at.partition_point(|&v| v < at);
        if verbs_at.get(first).is_none_or(|&v| v >= at + said.len()) {
            unread = Some(said);
            continue;
        }
        // A space before, so that a verb that opens the sentence is found
        // as " relies on "; ASCII lower case, so that offsets in `lower`
        // are offsets in `sentence` (the verbs are ASCII).
        // In the paragraph's padded copies (the same offsets), unless what
        // comes before it there is other white space than a space (a
        // no-break space after "fine.").
        let owned: (String, String);
        let (sentence, lower) = if para.padded.as_bytes().get(at) == Some(&b' ') {
            let span = at..at + 1 + said.len();
            (&para.padded[span.clone()], &para.lower[span])
        } else {
            let padded = format!(" {said}");
            let lower = padded.to_ascii_lowercase();
            owned = (padded, lower);
            (owned.0.as_str(), owned.1.as_str())
        };
        let mut verbs = Verbs::new(sentence, lower);
        let Some(mut verb) = verbs.next(0) else {
            unread = Some(said);
            continue;
        };
        // The subject: the name just before the verb; after a coordinating
        // "and" ("Nadia runs the Apps team and reports to …"), the
        // sentence's own subject.
        let before = &sentence[..verb.0];
        let coordinated = ends_with_ignoring_case(before.trim_end(), " and");
        let named = if before.trim().is_empty()
            || before
                .rsplit([';', ':'])
                .next()
                .is_some_and(|b| b.trim().is_empty())
        {
            // Notes are terse: "Relies on MySQL." is about the note.
            Some(g.name.clone())
        } else if coordinated {
            // "I run the data team and report to …": the speaker.
            leading_subject(said).or_else(|| {
                let first = said.split_whitespace().next()?;
                is_first_person(first).then(|| first.to_string())
            })
        } else if verb.2.starts_with("consumer")
            || verb.2.ends_with("reports are")
            || verb.2.starts_with("direct reports")
            || ["manager is", "line manager is", "supervisor is"].contains(&verb.2)
        {
            // A noun that is the verb ("its main consumer is", "Tomasz's
            // manager is"): the subject is whose it is, else the one spoken of.
            let last = before.split_whitespace().last().unwrap_or("");
            if last.ends_with("'s") || last.ends_with("’s") {
                tail_name(before)
            } else {
                Some("it".to_string())
            }
        } else {
            // "OPS-4412: offline mode, blocked by OPS-4398", "TEL-9: the
            // pilot is blocked by TEL-7": the ticket ("OPS-1: Billing
            // depends on Ledger" is about Billing).
            let written = tail_name(before);
            match ticket_label(before) {
                Some(key) if written.is_none() || verb.3 == "blocked_by" => Some(key),
                _ => written,
            }
        };
        let Some(mut subject) = named else {
            continue;
        };
        // "Ravi, Sofia and Kwame report to her": each name is a subject.
        let mut fellows = if coordinated {
            Vec::new()
        } else {
            subject_list(before)
        };
        // What a pronoun among the objects means: who was spoken of before.
        let referent = last_subject.clone().unwrap_or_else(|| g.name.clone());
        let note_named = std::mem::take(&mut note_was_object);
        if is_first_person(&subject) {
            // "We own …" in a team's note: the note; "I report to …" in a
            // note with an author: the author.
            subject = match &para.author {
                Some(a) if subject.eq_ignore_ascii_case("i") => a.clone(),
                _ => g.name.clone(),
            };
        } else if is_pronoun(&subject) {
            // "It", "she": the subject of the clause before in the same
            // sentence ("Olu is tech lead; he works under Grace"), else
            // the sentence before's, else what the note is about.
            let earlier_clause = before
                .rfind(';')
                .and_then(|_| leading_subject(said))
                .filter(|s| !is_pronoun(s));
            if let Some(s) = earlier_clause.or_else(|| {
                unread
                    .take()
                    .and_then(leading_subject)
                    .filter(|s| !is_pronoun(s))
            }) {
                last_subject = Some(as_the_note(&g.name, &note_key, s));
            }
            subject = last_subject.clone().unwrap_or_else(|| g.name.clone());
            if said
                .split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("it"))
                || before.trim().eq_ignore_ascii_case("it")
            {
                last_it = Some(subject.clone());
            }
        } else {
            subject = as_the_note(&g.name, &note_key, subject);
            last_subject = Some(subject.clone());
            unread = None;
        }
        // One clause per verb that shares the subject: "X is maintained by
        // A and depends on B" is two statements about X; after ", who" or
        // ", which" the clause is about the last object ("led by Nadia,
        // who reports to …").
        let mut antecedent: Option<String> = None;
        loop {
            let (i, len, phrase, rel, forward) = verb;
            // Past the verb and its space (at a sentence's end, the end).
            let start = (i + len + 2).min(sentence.len());
            // The next verb: in a clause about the same subject, or about
            // the last object (", which …"), or about a name of its own
            // ("A owns B, and C depends on D").
            let next = verbs.next(start).and_then(|v| {
                let between = start.min(v.0)..v.0;
                match clause_start(&lower[between.clone()]) {
                    Some((cut, relative)) => Some((v, start + cut, relative, None)),
                    None => new_subject(&sentence[between]).map(|(cut, named, fronted, list)| {
                        (v, start + cut, false, Some((named, fronted, list)))
                    }),
                }
            });
            let end = next.as_ref().map_or(sentence.len(), |(_, cut, _, _)| *cut);
            // `i` is the verb's leading space, one past the padding.
            let n = para.line_at(at + i);
            let note_name = g.name.clone();
            // "it" among the objects: what "it" meant before in the
            // paragraph, else what the sentence before spoke of, else what
            // the note is about (never the clause's own subject).
            let it_means = last_it
                .clone()
                .filter(|x| key(x) != key(&subject))
                .unwrap_or_else(|| {
                    let spoken_of = key(&referent) != key(&subject) && subject_may_be_it;
                    if spoken_of || key(&subject) == note_key {
                        referent.clone()
                    } else {
                        g.name.clone()
                    }
                });
            let said_of = Clause {
                it_means: &it_means,
                subject: &subject,
                referent: &referent,
                note_named,
                note: &note_name,
                note_key: &note_key,
                phrase,
                rel,
                forward,
                line: n,
                sentence: said,
                fellows: &fellows,
            };
            // "X no longer depends on Y", "used to run on", "does not
            // own": a relation denied is no edge.
            let found = if negated(&lower[..i])
                || ended(
                    &lower[..i],
                    &lower[start.min(lower.len())..end.max(start).min(lower.len())],
                ) {
                Vec::new()
            } else {
                objects(
                    g,
                    &said_of,
                    &sentence[start.min(sentence.len())..end.max(start).min(sentence.len())],
                )
            };
            // ", which Tariq leads.": the object came before.
            if let Some(o) = antecedent.take().filter(|_| {
                found.is_empty()
                    && sentence[start.min(sentence.len())..end.max(start).min(sentence.len())]
                        .trim_matches(|c: char| !c.is_alphanumeric())
                        .is_empty()
                    && !negated(&lower[..i])
            }) {
                g.edges.push(if forward {
                    edge(&subject, rel, &o, n, "statement", said)
                } else {
                    edge(&o, rel, &subject, n, "statement", said)
                });
            }
            note_was_object |= found.iter().any(|o| key(o) == note_key);
            subject_may_be_it = !(rel == "reports_to"
                || matches!(rel, "owns" | "leads") && forward)
                && fellows.is_empty();
            if found.contains(&it_means)
                && lower[start.min(lower.len())..end.max(start).min(lower.len())]
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|w| w == "it")
            {
                last_it = Some(it_means.clone());
            }
            match next {
                Some((v, _, relative, named)) => {
                    if let Some((named, fronted, list)) = named {
                        antecedent = found.last().cloned().filter(|_| fronted);
                        subject = as_the_note(&g.name, &note_key, named);
                        last_subject = Some(subject.clone());
                        fellows = list;
                    } else if relative {
                        match found.last() {
                            Some(o) => subject = o.clone(),
                            None => break,
                        }
                        fellows.clear();
                    }
                    verb = v;
                }
                None => break,
            }
        }
    }
}

/// Whether the words just before a verb deny it ("not", "never", "no
/// longer", "used to", "doesn't"), put it in the past ("formerly run
/// by", "previously maintained by", "the former owner is") or in the
/// future or the maybe ("will move to", "could use", "plans to call").
fn negated(before: &str) -> bool {
    let words: Vec<&str> = before.split_whitespace().rev().take(3).collect();
    // Only the word right before the verb, as written: "Ledger (formerly
    // Vault) is owned by", "As noted previously, Orbit depends on" state
    // what holds now.
    if words.first().is_some_and(|w| {
        matches!(
            *w,
            "former" | "previous" | "outgoing" | "formerly" | "previously" | "originally"
        )
    }) {
        return true;
    }
    let last_two = words
        .iter()
        .take(2)
        .rev()
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    // Not yet, or only maybe: a modal verb or "to" right before it ("will
    // move to", "could use", "plans to call", "Hugo to pull from"); "has
    // to" and "needs to" say what holds.
    let planned = match words.as_slice() {
        [w, ..]
            if matches!(
                *w,
                "will" | "would" | "could" | "should" | "might" | "may" | "shall"
            ) =>
        {
            true
        }
        [w, ..] if w.ends_with("'ll") || w.ends_with("’ll") => true,
        // "is configured to use", "is set up to run" say what holds.
        ["to", before, ..] => {
            matches!(
                *before,
                "planned" | "scheduled" | "expected" | "supposed" | "slated"
            ) || !(matches!(
                *before,
                "has" | "have" | "had" | "need" | "needs" | "got" | "up" | "able"
            ) || before.ends_with("ed"))
        }
        ["to"] => true,
        _ => false,
    };
    planned
        || last_two == "used to"
        || words.iter().any(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’');
            matches!(w, "not" | "never" | "longer" | "no")
                || w.ends_with("n't")
                || w.ends_with("n’t")
        })
}

/// Whether a relation is said in the past and to have held until some
/// time ("was owned by Ana until March"): it holds no more. (In the
/// present, "is run by Ops until the handover", it still does.)
fn ended(before: &str, after: &str) -> bool {
    before
        .split_whitespace()
        .rev()
        .take(3)
        .any(|w| matches!(w, "was" | "were" | "had"))
        && after.split_whitespace().any(|w| w == "until")
}

/// Where, in the text between two verbs, the first clause ends: at the
/// last "and", "," or ";" when only small words (a pronoun, "is", "also")
/// follow it up to the second verb; and whether the second clause is a
/// relative one (", who …", ", which …").
fn clause_start(between: &str) -> Option<(usize, bool)> {
    const SMALL: &[&str] = &[
        "it",
        "they",
        "he",
        "she",
        "this",
        "that",
        "which",
        "who",
        "is",
        "are",
        "was",
        "were",
        "also",
        "then",
        "and",
        "so",
        "directly",
        "now",
        "still",
        "in",
        "turn",
        "often",
        "usually",
        "sometimes",
        "always",
        "only",
        "mostly",
        "mainly",
        "typically",
        "normally",
    ];
    // The verb's own leading space ends `between`: " and" then counts.
    let spaced = format!("{between} ");
    let cut = [" and ", ",", ";"]
        .iter()
        .filter_map(|sep| spaced.rfind(sep))
        .max()?
        .min(between.len());
    let words: Vec<&str> = between[cut..]
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    let relative = words.first().is_some_and(|w| matches!(*w, "who" | "which"));
    // ", whose SMS gateway is bought from": a clause about the name before.
    if words.first() == Some(&"whose") && (2..=4).contains(&words.len()) {
        return Some((cut, true));
    }
    words
        .iter()
        .all(|w| SMALL.contains(w))
        .then_some((cut, relative))
}

/// Where, in the text between two verbs, a clause with a subject of its
/// own starts ("…, and C depends on", "…; C depends on", "… but C
/// uses"), and that subject: a name, not a pronoun.
fn new_subject(between: &str) -> Option<(usize, String, bool, Vec<String>)> {
    // At a comma or the like, else at "and" ("A uses B and C runs on D");
    // "…, and Bob and Carol report to" is a subject written as a list.
    let last_of = |seps: &[&str]| {
        seps.iter()
            .filter_map(|sep| between.rfind(sep).map(|i| (i, i + sep.len())))
            .max()
    };
    let cut =
        last_of(&[";", ",", " but ", " while ", " whereas "]).or_else(|| last_of(&[" and "]))?;
    let mut segment = between[cut.1..].trim();
    // ", which Tariq leads": the name before is the verb's object.
    let fronted = ["which ", "that "].iter().any(|w| {
        segment.len() > w.len()
            && segment
                .get(..w.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(w))
    });
    for joined in ["and ", "but ", "while ", "whereas "] {
        if let Some(rest) = segment.strip_prefix(joined) {
            segment = rest;
        }
    }
    if segment.is_empty() || segment.split_whitespace().count() > LONGEST_NAME_WORDS {
        return None;
    }
    let named = tail_name(segment)?;
    // A name is written as one: "and often uses" has none.
    let written = named
        .chars()
        .any(|c| c.is_uppercase() || c.is_ascii_digit() || c == '-');
    (written && !is_pronoun(&named) && !is_first_person(&named) && !generic_noun(&named))
        .then(|| (cut.0, named, fronted, subject_list(segment)))
}

/// A note speaks of what it is about by part of its name: a person by
/// their first name ("Ines reports to …" in "Ines Duarte"), a thing with
/// its kind after it ("the raw-events topic" in "raw-events").
fn as_the_note(note: &str, own: &str, subject: String) -> String {
    let said = key(&subject);
    // Its first name, or the first words of its name ("Season 4" in
    // "Season 4 Launch").
    let opens = |long: &str, short: &str| {
        long.len() > short.len() && long.starts_with(short) && long.as_bytes()[short.len()] == b' '
    };
    let first_name = opens(own, &said) && !said.is_empty();
    let with_kind = opens(&said, own) && said.split(' ').count() == own.split(' ').count() + 1;
    // The note's own name as written in its text: as the note shows it.
    if first_name || with_kind || said == own {
        note.to_string()
    } else {
        subject
    }
}

/// A clause being read: its subject, its verb, where it is.
struct Clause<'a> {
    /// Whom "it" among the objects means.
    it_means: &'a str,
    subject: &'a str,
    /// Whom "it" among the objects means: the subject before.
    referent: &'a str,
    /// Whether the sentence before named the note as an object.
    note_named: bool,
    /// What the note is about, whom "her", "him" or "them" mean.
    note: &'a str,
    /// Its key.
    note_key: &'a str,
    phrase: &'a str,
    rel: &'a str,
    forward: bool,
    line: u32,
    sentence: &'a str,
    /// Other subjects listed with it ("Ravi, Sofia and Kwame report to").
    fellows: &'a [String],
}

/// The edges of one clause: one per name in what follows its verb; the
/// names are returned. Links, where the clause has them, are its names
/// ("relies on [[Keystone IdP|Keystone]] for the service accounts").
fn objects(g: &mut NoteGraph, c: &Clause<'_>, after: &str) -> Vec<String> {
    // ", as does X": X too is a subject of the clause.
    let lower = after.to_ascii_lowercase();
    let (after, also) = match [", as does ", ", as do ", " as does ", " as do "]
        .iter()
        .find_map(|m| find_short(&lower, m).map(|i| (i, m.len())))
    {
        Some((i, len)) => (&after[..i], split_list(&after[i + len..])),
        None => (after, Vec::new()),
    };
    let head_end = [" — ", " – ", ": ", "; "]
        .iter()
        .filter_map(|sep| find_short(after, sep))
        .min()
        .unwrap_or(after.len());
    let mut head = &after[..head_end];
    // "manages the engineering leads: A, B and C", "Three people report
    // to Dana: A, B and C": the names after a colon are what the words
    // before it count.
    let after_colon: Vec<String> = after
        .strip_prefix(head)
        .and_then(|rest| rest.strip_prefix(": "))
        .map(|rest| {
            split_list(rest)
                .iter()
                .filter_map(|i| head_name(i))
                .collect()
        })
        .unwrap_or_default();
    let counted_subject = !after_colon.is_empty() && is_a_count(c.subject);
    let counted_object = !after_colon.is_empty()
        && !counted_subject
        && !head.contains('[')
        && strip_article(head)
            .chars()
            .all(|ch| !ch.is_uppercase() && !ch.is_ascii_digit());
    // "Co-owns X with Y": Y is a subject too; whatever "with" brings, it
    // is not an object.
    let mut also = also;
    if let Some(i) = find_short(&head.to_ascii_lowercase(), " with ") {
        if c.rel == "owns" && c.forward && c.phrase.starts_with("co-") {
            also.extend(
                link_targets(&head[i..])
                    .into_iter()
                    .chain(split_list(&head[i + 6..])),
            );
        }
        head = &head[..i];
    }
    let preposition = c
        .phrase
        .rsplit(' ')
        .next()
        .filter(|p| ["on", "to", "by", "of", "for", "from", "under", "in", "at"].contains(p));
    let mut found: Vec<String> = if counted_object {
        after_colon.clone()
    } else {
        Vec::new()
    };
    if counted_object {
        head = "";
    }
    // Whether the item before ended in a phrase of its own ("A for
    // tokens"): the list goes on only where the verb's preposition comes
    // again ("and on B"); "A for the X and the Y" is one item.
    let mut phrase_after = false;
    let head_lower = head.to_ascii_lowercase();
    let conjoined = [" and ", " or ", " & "]
        .iter()
        .any(|c| find_short(&head_lower, c).is_some());
    for item in split_list(head) {
        let again = preposition.and_then(|p| item.strip_prefix(&format!("{p} ")));
        if phrase_after && again.is_none() {
            break;
        }
        // "requires Stripe, for cards and refunds": what follows a
        // phrase of its own ("for cards") belongs to it, unless the verb's
        // preposition comes again ("on Ledger, for reconciliation, and on
        // Stripe").
        if again.is_none() && !found.is_empty() && opens_a_phrase(&item) {
            phrase_after = true;
            continue;
        }
        let item = again.unwrap_or(&item);
        // "depends on a message queue": a thing spoken of as any is named
        // by no name.
        if indefinite(item) {
            continue;
        }
        // "Margit Sandoval, our CTO": what follows a name with a possessive
        // says who that is; it is no other name.
        // Without "and" ("Ruth Adeyemi, the CEO") the words after the comma
        // say who that is too.
        let lower_item = item.to_ascii_lowercase();
        let determiners: &[&str] = if conjoined {
            &["our ", "my ", "your ", "his ", "her ", "its ", "their "]
        } else {
            &[
                "our ", "my ", "your ", "his ", "her ", "its ", "their ", "the ", "a ", "an ",
            ]
        };
        // "Victor Huang, (the) head of Customer Systems": who the name
        // before is, and what that says (he leads it); no other object.
        if let (Some(last), Some((rel, what))) = (found.last(), role_of(item)) {
            if let Some(what) = head_name(what) {
                g.edges
                    .push(edge(last, rel, &what, c.line, "statement", c.sentence));
            }
            continue;
        }
        if !found.is_empty() && determiners.iter().any(|p| lower_item.starts_with(p)) {
            continue;
        }
        phrase_after = ends_in_a_phrase(item);
        // A link in the item is its name ("[[Keystone IdP|Keystone]] for
        // the service accounts").
        // After a verb of data flowing, a link further on names something
        // else ("pushes users into the directory that [[Keystone]] reads").
        let flowing = matches!(c.phrase, "pulls from" | "writes to");
        let linked = if flowing {
            strip_article(item).starts_with('[')
        } else {
            find_short(item, "[[").is_some() || find_short(item, "](").is_some()
        };
        let object = if linked {
            section_linked(item).or_else(|| link_targets(item).into_iter().next())
        } else if let Some(rest) = item
            .strip_prefix("its ")
            .or_else(|| item.strip_prefix("their "))
        {
            // "calls its lookup API": the thing the note is about.
            (!rest.trim().is_empty()).then(|| c.note.to_string())
        } else {
            match head_name(item).or_else(|| pronoun_of(item)) {
                // "works under her", "feeds into it": in a note, what the
                // note is about, unless that is the subject itself ("it" is
                // then what was spoken of before). A person ("her", "him")
                // is the one the sentence before spoke of, unless that
                // sentence named the note as its object ("Daniel reports to
                // Marcus. Tomasz works under him.").
                Some(o)
                    if matches!(o.as_str(), "her" | "him")
                        && !c.note_named
                        && key(c.referent) != key(c.subject) =>
                {
                    Some(c.referent.to_string())
                }
                Some(o) if o == "it" => Some(c.it_means.to_string()),
                Some(o) if is_pronoun(&o) => Some(if key(c.subject) != c.note_key {
                    c.note.to_string()
                } else {
                    c.referent.to_string()
                }),
                // "calls IDNorth's REST API": IDNorth.
                Some(o) => Some(as_the_note(c.note, c.note_key, possessor(&o).unwrap_or(o))),
                None => None,
            }
        };
        found.extend(object);
    }
    // "X is her manager": the object is in the verb.
    if found.is_empty()
        && c.phrase
            .split(' ')
            .any(|w| matches!(w, "her" | "his" | "their" | "its"))
    {
        found.push(c.referent.to_string());
    }
    let subject_key = key(c.subject);
    found.retain(|o| key(o) != subject_key);
    let mut subjects: Vec<String> = if counted_subject {
        after_colon
    } else {
        vec![c.subject.to_string()]
    };
    for a in also
        .iter()
        .filter_map(|a| head_name(a))
        .chain(c.fellows.iter().cloned())
    {
        if !subjects.iter().any(|s| key(s) == key(&a)) {
            subjects.push(a);
        }
    }
    for s in &subjects {
        for object in &found {
            let e = if c.forward {
                edge(s, c.rel, object, c.line, "statement", c.sentence)
            } else {
                edge(object, c.rel, s, c.line, "statement", c.sentence)
            };
            g.edges.push(e);
        }
    }
    found
}

/// A role and what it is held in ("head of Payments", "the owner of
/// Ledger"): the relation its holder has with it, and what follows "of".
fn role_of(item: &str) -> Option<(&'static str, &str)> {
    const ROLES: &[(&str, &str)] = &[
        ("head of ", "leads"),
        ("director of ", "leads"),
        ("lead of ", "leads"),
        ("leader of ", "leads"),
        ("manager of ", "leads"),
        ("vp of ", "leads"),
        ("chief of ", "leads"),
        ("owner of ", "owns"),
        ("maintainer of ", "owns"),
    ];
    let item = strip_article(item.trim());
    ROLES.iter().find_map(|(role, rel)| {
        let n = role.len();
        (item.len() > n && item.is_char_boundary(n) && item[..n].eq_ignore_ascii_case(role))
            .then(|| (*rel, &item[n..]))
    })
}

/// "Three people", "2 services": a number of things, not a name.
fn is_a_count(s: &str) -> bool {
    let mut words = s.split_whitespace();
    let first = words.next().unwrap_or("").to_lowercase();
    let number = first.chars().all(|c| c.is_ascii_digit()) && !first.is_empty()
        || matches!(
            first.as_str(),
            "two"
                | "three"
                | "four"
                | "five"
                | "six"
                | "seven"
                | "eight"
                | "nine"
                | "ten"
                | "several"
        );
    number && words.all(|w| !w.starts_with(|c: char| c.is_uppercase()))
}

/// Whether a list item goes on past its name with a phrase of its own
/// ("the auth service for tokens").
fn ends_in_a_phrase(item: &str) -> bool {
    let lower = format!("{} ", item.to_ascii_lowercase());
    stop_after().is_match(&lower)
}

/// The owner in "X's Y" (a part of X named after it), else None.
fn possessor(name: &str) -> Option<String> {
    let (owner, part) = name.split_once("'s ").or_else(|| name.split_once("’s "))?;
    (!owner.trim().is_empty() && !part.trim().is_empty()).then(|| owner.trim().to_string())
}

/// An object pronoun ("her", "them"), alone or before a phrase of its
/// own ("it since the reorg"), which [`clean_name`] refuses.
fn pronoun_of(item: &str) -> Option<String> {
    let lower = format!(
        "{} ",
        without_what_follows(item.trim()).to_ascii_lowercase()
    );
    let (w, rest) = lower.split_once(' ')?;
    let w = w.trim_end_matches(['.', ',']);
    let alone = rest.trim().is_empty()
        || stop_after()
            .find(&format!(" {rest}"))
            .is_some_and(|m| m.start() == 0);
    (alone && matches!(w, "her" | "him" | "them" | "it")).then(|| w.to_string())
}

/// The notes `t` links to, in the order written: `[[Target]]` (also
/// `[[Target|shown]]`, `[[Target#part]]`) and `[text](dir/note.md)`; a web
/// address is no note.
fn link_targets(t: &str) -> Vec<String> {
    static WIKI: OnceLock<Regex> = OnceLock::new();
    static MD: OnceLock<Regex> = OnceLock::new();
    let wiki =
        WIKI.get_or_init(|| Regex::new(r"\[\[([^\]\[|#]+)(?:[#|][^\]]*)?\]\]").expect("valid"));
    let md = MD.get_or_init(|| Regex::new(r"\]\(([^)\s]+?\.md)(?:#[^)]*)?\)").expect("valid"));
    // Most lines have no link: no pattern is run on them (each has a `]`,
    // and a Markdown link cut from its `[` is still one).
    if !t.as_bytes().contains(&b']') || (!t.contains("[[") && !t.contains("](")) {
        return Vec::new();
    }
    let mut found: Vec<(usize, String)> = wiki
        .captures_iter(t)
        .chain(md.captures_iter(t))
        .filter_map(|c| {
            let m = c.get(1)?;
            let target = m.as_str().trim();
            if target.contains("://") {
                return None;
            }
            let file = target.rsplit('/').next().unwrap_or(target);
            let file = file.strip_suffix(".md").unwrap_or(file);
            Some((m.start(), file.replace("%20", " ")))
        })
        .collect();
    found.sort_by_key(|(at, _)| *at);
    // Each once, in order (a set: a line may hold thousands).
    let mut seen = HashSet::new();
    found
        .into_iter()
        .map(|(_, target)| target)
        .filter(|t| seen.insert(t.clone()))
        .collect()
}

/// The heading an item's first link points into (`[[Postgres
/// clusters#pg-ledger|pg-ledger]]`: pg-ledger): the thing a statement is
/// about is that section's, not the whole note's.
fn section_linked(item: &str) -> Option<String> {
    let inner = &item[item.find("[[")? + 2..];
    let inner = &inner[..inner.find("]]")?];
    let target = inner.split('|').next()?;
    let (note, headings) = target.split_once('#')?;
    // The deepest of nested headings (`[[Note#Part#pg-ledger]]`); a block's
    // id (`#^a1b2c3`) names no thing.
    let heading = headings.rsplit('#').next()?.trim();
    (!note.trim().is_empty() && !heading.is_empty() && !heading.starts_with('^'))
        .then(|| heading.to_string())
}

/// Whether `text` ends with `tail` (ASCII), in any case. The word lists
/// compared this way, and with `eq_ignore_ascii_case`, have no "k": the
/// only letter outside ASCII that lowers into it is the Kelvin sign, so
/// this is what `to_lowercase` then a comparison would say, without the
/// copy.
fn ends_with_ignoring_case(text: &str, tail: &str) -> bool {
    let (t, n) = (text.as_bytes(), tail.as_bytes());
    t.len() >= n.len() && t[t.len() - n.len()..].eq_ignore_ascii_case(n)
}

const FIRST_PERSON: &[&str] = &["we", "us", "our team", "i"];

/// "We", "us", "our team": in a note, the note's own team or person.
fn is_first_person(s: &str) -> bool {
    FIRST_PERSON.iter().any(|w| s.eq_ignore_ascii_case(w))
}

fn is_pronoun(s: &str) -> bool {
    PRONOUNS.iter().any(|p| s.eq_ignore_ascii_case(p))
}

/// A line's sentences (ends at `.`, `!` or `?` before a space or the end).
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = line.as_bytes();
    for i in 0..b.len() {
        if !matches!(b[i], b'.' | b'!' | b'?') || i < start {
            continue;
        }
        // "**Engineering.** Tomás manages …": the emphasis closes the
        // sentence too.
        let mut j = i + 1;
        while j < b.len() && matches!(b[j], b'*' | b'_') {
            j += 1;
        }
        if j == b.len() || b[j] == b' ' {
            out.push(line[start..i].trim());
            start = j;
        }
    }
    if start < line.len() {
        out.push(line[start..].trim());
    }
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

fn strip_article(s: &str) -> &str {
    let t = s.trim();
    for a in [
        "the ", "The ", "a ", "A ", "an ", "An ", "our ", "Our ", "their ", "Their ", "its ",
        "Its ",
    ] {
        if let Some(r) = t.strip_prefix(a) {
            return r.trim();
        }
    }
    t
}

fn clean_name(s: &str) -> Option<String> {
    let raw = s.trim_matches(|c: char| c.is_whitespace() || "`*_\"'“”".contains(c));
    let raw = before_a_pronoun(raw);
    if generic_noun(raw) {
        return None;
    }
    // "firewall ticket CLIN-482" is CLIN-482: an identifier is a name.
    if let Some(id) = raw
        .rsplit(' ')
        .next()
        .filter(|w| is_identifier(w) && raw.contains(' '))
    {
        return Some(id.to_string());
    }
    let s = strip_article(raw);
    let s = s
        .strip_suffix("'s")
        .or_else(|| s.strip_suffix("’s"))
        .unwrap_or(s);
    let s = match wiki_target(s) {
        // A link names what it names.
        Some(target) => target,
        None => {
            // In lower case, with a word of a closed class after its first
            // ("one function per report kind", "a meeting every
            // morning"), four words or more say what something is or does;
            // a name is a few nouns ("the site reliability engineering team").
            // (Checked cheapest first: most names have a capital.)
            if s.split_whitespace().nth(3).is_some()
                && !s.chars().any(|c| c.is_uppercase() || c.is_ascii_digit())
                && s.split_whitespace().skip(1).any(|w| {
                    let w = w.to_lowercase();
                    is_not_a_name_start(&w) || PREPOSITIONS.contains(&w.as_str())
                })
            {
                return None;
            }
            s.to_string()
        }
    };
    let words = s.split_whitespace().count();
    (words > 0
        && words <= LONGEST_NAME_WORDS
        && s.chars().any(char::is_alphanumeric)
        && looks_like_a_name(&s))
    .then_some(s)
}

/// A name up to a pronoun, which starts what is said of it ("Ana I meet
/// with weekly", "the service they built": a common noun then); "I" as
/// the last word is a numeral ("Phase I"). A link is left whole.
fn before_a_pronoun(s: &str) -> &str {
    if s.contains("[[") || s.contains("](") {
        return s;
    }
    let mut at = 0;
    let mut words = s.split(' ').peekable();
    while let Some(w) = words.next() {
        let pronoun = matches!(w, "we" | "you" | "he" | "she" | "they")
            || (w == "I" && words.peek().is_some());
        if pronoun && at > 0 {
            return s[..at].trim_end_matches([',', ';', ':', '—', '–', '-', ' ']);
        }
        at += w.len() + 1;
    }
    s
}

/// Prepositions, which open a phrase of their own.
const PREPOSITIONS: &[&str] = &[
    "to",
    "for",
    "of",
    "in",
    "on",
    "at",
    "by",
    "with",
    "from",
    "into",
    "onto",
    "over",
    "under",
    "about",
    "via",
    "through",
    "per",
    "along",
    "after",
    "before",
    "during",
    "since",
    "until",
    "behind",
    "across",
    "against",
    "between",
    "alongside",
];

/// Whether a list item opens a phrase of its own ("for cards and
/// refunds"): a preposition, in lower case, starts it ("Per Nilsson" is
/// a name).
fn opens_a_phrase(item: &str) -> bool {
    let first = item.split_whitespace().next().unwrap_or("");
    PREPOSITIONS.contains(&first)
}

const COMMON_NOUN_DETERMINERS: &[&str] = &["the", "a", "an", "this", "our"];

/// "the team", "the database": a common noun, which in a note means what
/// the note is about rather than a thing of that name.
fn generic_noun(s: &str) -> bool {
    let mut words = s.split_whitespace();
    let (Some(article), Some(noun), None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    COMMON_NOUN_DETERMINERS
        .iter()
        .any(|a| article.eq_ignore_ascii_case(a))
        && noun.chars().all(|c| c.is_ascii_lowercase())
}

/// The ticket a sentence opens with as its label ("OPS-4412: …",
/// "**GAME-303:** …"): what the sentence is about.
fn ticket_label(before: &str) -> Option<String> {
    let (first, rest) = before.trim_start().split_once(' ')?;
    let label = first.trim_matches('*').strip_suffix(':')?;
    (is_identifier(label) && !rest.trim().is_empty()).then(|| label.to_string())
}

/// A ticket's or issue's key: `CLIN-482`, `ONL-7`.
fn is_identifier(w: &str) -> bool {
    let Some((letters, digits)) = w.split_once('-') else {
        return false;
    };
    letters.len() >= 2
        && letters
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && letters.starts_with(|c: char| c.is_ascii_uppercase())
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
}

/// Words of the closed classes of English (pronouns, determiners,
/// conjunctions, auxiliaries, prepositions, question words): a phrase
/// that starts with one is a clause or a fragment, not a name ("so changes
/// go through her", "who reports directly", "as does Fatima").
const NOT_A_NAME_START: &[&str] = &[
    "i",
    "we",
    "you",
    "he",
    "she",
    "it",
    "they",
    "me",
    "us",
    "him",
    "her",
    "them",
    "my",
    "our",
    "your",
    "his",
    "its",
    "their",
    "this",
    "that",
    "these",
    "those",
    "who",
    "whom",
    "whose",
    "what",
    "which",
    "where",
    "when",
    "why",
    "how",
    "and",
    "or",
    "but",
    "so",
    "if",
    "because",
    "since",
    "although",
    "though",
    "as",
    "than",
    "then",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "has",
    "have",
    "had",
    "do",
    "does",
    "did",
    "can",
    "can't",
    "cannot",
    "will",
    "would",
    "should",
    "could",
    "must",
    "may",
    "might",
    "shall",
    "not",
    "no",
    "never",
    "to",
    "for",
    "of",
    "in",
    "on",
    "at",
    "by",
    "with",
    "from",
    "into",
    "onto",
    "over",
    "under",
    "about",
    "via",
    "through",
    "per",
    "everything",
    "everyone",
    "everybody",
    "nothing",
    "nobody",
    "anything",
    "anyone",
    "something",
    "someone",
    "all",
    "some",
    "any",
    "each",
    "every",
    "most",
    "both",
    "either",
    "neither",
    "there",
    "here",
    "also",
    "too",
    "just",
    "only",
    "still",
    "even",
    "along",
    "plus",
    "including",
    "except",
    "besides",
    "like",
    "such",
    "that's",
    "it's",
    "out",
    "up",
    "down",
    "back",
    "off",
    "away",
];

/// Whether a phrase may be a name: it does not open with a word of a
/// closed class or an adverb ("Personally"), and a phrase in lower case
/// (not a proper name) has no article inside ("get a risk score back").
fn looks_like_a_name(s: &str) -> bool {
    let mut words = s
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''));
    let Some(first) = words.next().map(str::to_lowercase) else {
        return false;
    };
    // The words after the first: counted, then looked through.
    let rest = words;
    let count = 1 + rest.clone().count();
    if is_not_a_name_start(&first) {
        return false;
    }
    if count == 1 && is_an_adverb(&first) && !s.contains(['[', '-']) {
        return false;
    }
    // A count of things ("12 pods", "3 broker VMs"), not a name.
    if first.chars().all(|c| c.is_ascii_digit())
        && (count == 1
            || s.split_whitespace()
                .nth(1)
                .is_some_and(|w| w.starts_with(|c: char| c.is_lowercase()))
            || count > 2)
    {
        return false;
    }
    let proper = s.chars().next().is_some_and(|c| !c.is_lowercase());
    // (No letter but the Kelvin sign lowers to ASCII, and these words
    // have no "k": compared without case, as lowered.)
    proper
        || !rest
            .clone()
            .any(|w| ["a", "an", "the"].iter().any(|a| w.eq_ignore_ascii_case(a)))
}

/// Whether a word (in lower case) is in [`NOT_A_NAME_START`]: a set, as
/// it is asked of every word that may start a name.
fn is_not_a_name_start(lower_word: &str) -> bool {
    static SET: OnceLock<foldhash::HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| NOT_A_NAME_START.iter().copied().collect())
        .contains(lower_word)
}

/// An adverb in -ly ("synchronously", "personally"); shorter words in
/// -ly are as often nouns ("supply", "rally").
fn is_an_adverb(lower_word: &str) -> bool {
    lower_word.len() > 6 && lower_word.ends_with("ly")
}

/// Words after a subject, before its verb, that are no part of it ("It
/// also relies on", "Both teams are").
const AFTER_A_SUBJECT: &[&str] = &[
    "also",
    "now",
    "still",
    "currently",
    "then",
    "too",
    "directly",
    "only",
    "is",
    "are",
    "was",
    "were",
    "itself",
    "themselves",
    "himself",
    "herself",
    "both",
    "all",
];

/// The name just before a verb: the end of the clause before it.
fn tail_name(before: &str) -> Option<String> {
    // "Noor Haddad — manages …" in a list: the name before the dash.
    let before = before.trim_end().trim_end_matches(['—', '–']).trim_end();
    // "Turnstile used to run on …": the denial is not part of the name.
    static DENIAL: OnceLock<Regex> = OnceLock::new();
    let denial = DENIAL.get_or_init(|| {
        Regex::new(r"(?i)\s+(used to|no longer|does not|do not|did not|is not|are not|doesn't|don't|didn't|isn't|aren't|never|not)$")
            .expect("valid pattern")
    });
    let before = match denial.find(before) {
        Some(m) => &before[..m.start()],
        None => before,
    };
    let before = strip_parentheses(before);
    let before = before.as_ref();
    let clause = before
        .rsplit([',', ';', ':', '(', ')'])
        .next()
        .unwrap_or(before);
    let mut words: Vec<&str> = clause
        .split_whitespace()
        .map(|w| w.trim_matches('*'))
        .filter(|w| !w.is_empty())
        .collect();
    // "It also relies on": the adverb is not the subject.
    while words.len() > 1
        && AFTER_A_SUBJECT
            .iter()
            .any(|a| words[words.len() - 1].eq_ignore_ascii_case(a))
    {
        words.pop();
    }
    let from = words
        .iter()
        .rposition(|w| STOP_BEFORE.iter().any(|s| w.eq_ignore_ascii_case(s)))
        .map_or(0, |i| i + 1);
    let said = words[from..].join(" ");
    if is_pronoun(&said) || is_first_person(&said) {
        return Some(said);
    }
    if generic_noun(&said) {
        // "The fix is blocked by …": a subject as written, though as an
        // object a common noun is no name.
        return Some(strip_article(&said).to_string());
    }
    if indefinite(&said) {
        return None;
    }
    clean_name(&said)
}

/// Words in lower case after "a" or "an" ("A small service maintained by
/// …", "depends on a message queue"): a thing described as any of its
/// kind, which no name names. ("The billing service", "object storage"
/// and "postgres" may be names.)
fn indefinite(phrase: &str) -> bool {
    let t = phrase.trim();
    let Some((first, rest)) = t.split_once(' ') else {
        return false;
    };
    let rest = rest.trim();
    matches!(first, "a" | "an" | "A" | "An")
        && !rest.is_empty()
        && rest.chars().all(|c| c.is_lowercase() || c == ' ')
}

/// The names of a subject written as a list of two or more ("Ravi Mehta,
/// Sofia Lindqvist and Kwame Asante"): only when every item is a proper
/// name or a link, so that a clause is never read as one.
fn subject_list(before: &str) -> Vec<String> {
    let items = split_list(before);
    if items.len() < 2 {
        return Vec::new();
    }
    let mut names = Vec::new();
    for item in &items {
        let name = if item.contains("[[") || item.contains("](") {
            link_targets(item).into_iter().next()
        } else if item.starts_with(|c: char| c.is_uppercase())
            && item.split_whitespace().count() <= 4
        {
            clean_name(item)
        } else {
            None
        };
        match name {
            Some(n) => names.push(n),
            None => return Vec::new(),
        }
    }
    names
}

/// The name that starts what follows a verb, without an adverb after it
/// ("the Apps team too").
fn head_name(after: &str) -> Option<String> {
    // "… and Grace Liu is the owner": a clause's subject, no object
    // ("until INFRA-88 is done" still names INFRA-88).
    let lower = after.to_ascii_lowercase();
    let stop = stop_after().find(&lower);
    if let Some(m) = stop.filter(|m| matches!(m.as_str(), " is " | " are " | " was " | " were ")) {
        let state = lower[m.end()..]
            .split(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or("");
        if !matches!(
            state,
            "done"
                | "merged"
                | "fixed"
                | "resolved"
                | "closed"
                | "complete"
                | "completed"
                | "finished"
                | "live"
                | "ready"
                | "shipped"
                | "released"
                | "approved"
                | "signed"
                | "in"
                | "out"
                | "back"
                | "available"
        ) {
            return None;
        }
    }
    clean_name(before_what_follows(after, &lower, stop.map(|m| m.start())))
}

/// A name or pronoun as written after a verb, without the words that
/// follow it and are no part of it ("Ledger directly", "it now", "X
/// once Y lands").
fn without_what_follows(after: &str) -> &str {
    // ASCII only: offsets in `lower` are offsets in `after`.
    let lower = after.to_ascii_lowercase();
    let stop = stop_after().find(&lower).map(|m| m.start());
    before_what_follows(after, &lower, stop)
}

/// [`without_what_follows`], given `after` in ASCII lower case and where
/// the first of [`STOP_AFTER`] starts in it.
fn before_what_follows<'a>(after: &'a str, lower: &str, stop: Option<usize>) -> &'a str {
    let end = stop.unwrap_or(after.len());
    let mut name = after[..end].trim_end();
    for adverb in [
        " directly",
        " indirectly",
        " personally",
        " mostly",
        " primarily",
        " heavily",
        " too",
        " also",
        " as well",
        " now",
        " today",
        " instead",
        " this week",
        " this month",
        " this quarter",
        " this sprint",
        " next week",
        " for now",
        " land",
        " lands",
        " ships",
        " ship",
        " is done",
        " are done",
        " is merged",
        " are merged",
        " is fixed",
        " are fixed",
        " is resolved",
        " is closed",
        " goes out",
        " go out",
    ] {
        if lower[..name.len()].ends_with(adverb) {
            name = &name[..name.len() - adverb.len()];
        }
    }
    // "Ledger asynchronously": an adverb after a name is no part of it
    // (nor a name of its own, `looks_like_a_name`); "the nightly" keeps
    // its noun.
    if let Some((rest, last)) = name.rsplit_once(' ') {
        let kept = strip_article(rest);
        if is_an_adverb(last)
            && last.bytes().all(|b| b.is_ascii_lowercase())
            && !kept.is_empty()
            && !matches!(
                kept.to_ascii_lowercase().as_str(),
                "the" | "a" | "an" | "our" | "their" | "its"
            )
        {
            name = rest.trim_end();
        }
    }
    name
}

/// The subject a sentence without a relation verb starts with ("The
/// billing service runs nightly"), for a pronoun in the next sentence.
fn leading_subject(sentence: &str) -> Option<String> {
    static VERB: OnceLock<Regex> = OnceLock::new();
    let verb = VERB.get_or_init(|| {
        Regex::new(r"(?i)^(.{1,60}?)\s+(is|are|was|were|has|have|had|runs|handles|uses|calls|sends|stores|keeps|serves|leads|manages|works|builds|processes|charges|issues|checks|writes|reads)\b").expect("valid")
    });
    let c = verb.captures(sentence)?;
    clean_name(&c[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(path: &str, text: &str) -> Vec<(String, String, String, u32, &'static str)> {
        note(path, text)
            .edges
            .into_iter()
            .map(|e| (e.from, e.rel, e.to, e.line, e.how))
            .collect()
    }

    fn e(
        from: &str,
        rel: &str,
        to: &str,
        line: u32,
        how: &'static str,
    ) -> (String, String, String, u32, &'static str) {
        (from.into(), rel.into(), to.into(), line, how)
    }

    #[test]
    fn verbs_of_data_flowing_read_past_what_flows() {
        assert_eq!(
            edges(
                "systems/pressure.md",
                "# PressureWise\n\nLead: [[Ada Park]] · Status: live\nOwner: **Tomasz Wilk** (since May). Tomasz reports to Daniel, the CTO.\n\nIt pulls the current risk score for each area from [[LeakSense]] and writes the setpoints out through AquaView SCADA.\nDirectory Sync pushes users into the directory that [[Keystone]] reads.\n\n1. Pull claimant / policy features from [[Tidewater]]\n2. Call [[Verdict]] for the rules\n\nDeployed on claims-prod-eks alongside ClaimDesk. Orchard Supply sends about 10,000 orders.\n"
            ),
            [
                // Fields on one line, each read.
                e("PressureWise", "links_to", "Ada Park", 3, "link"),
                e("Ada Park", "leads", "PressureWise", 3, "property"),
                e("Tomasz Wilk", "owns", "PressureWise", 4, "property"),
                // A `Key: value` line's value is its first sentence only.
                e("Tomasz", "reports_to", "Daniel", 4, "statement"),
                e("PressureWise", "links_to", "LeakSense", 6, "link"),
                e("PressureWise", "links_to", "Keystone", 7, "link"),
                e("PressureWise", "depends_on", "LeakSense", 6, "statement"),
                e("PressureWise", "depends_on", "AquaView SCADA", 6, "statement"),
                // What Directory Sync pushes into is "the directory": no name.
                // Instructions, in the verb's plain form, are about the note.
                e("PressureWise", "links_to", "Tidewater", 9, "link"),
                e("PressureWise", "links_to", "Verdict", 10, "link"),
                e("PressureWise", "depends_on", "Tidewater", 9, "statement"),
                e("PressureWise", "depends_on", "Verdict", 10, "statement"),
                e("PressureWise", "deployed_to", "claims-prod-eks", 12, "statement"),
                // "Supply" with a capital inside a sentence is a name's.
            ]
        );
    }

    #[test]
    fn a_subject_written_as_a_list_gives_each_its_edge() {
        assert_eq!(
            edges(
                "org/team.md",
                "# Team\n\nHer team:\n| Name | Role |\n|---|---|\n| [[Ada Park]] | SRE |\n| Li Wei | SRE |\n\nHelen Achterberg runs the group and reports to Daniel Oyelaran. Ravi Mehta, Sofia Lindqvist and [[Kwame Asante]] report to her.\nBen Hollis has looked after it since the reorg.\nTwo people report to Ben: Ola Nowak (SRE) and Jo Kim. Ola manages the leads: Al Day and Bo Ek.\nCy Moss is tech lead; he works under Ola.\n\nBilling, the ledger and fraud checks depend on Kafka.\n"
            ),
            [
                // A table under a label that names a relation: its rows.
                e("Team", "links_to", "Ada Park", 6, "link"),
                e("Ada Park", "reports_to", "Team", 6, "property"),
                e("Li Wei", "reports_to", "Team", 7, "property"),
                e("Team", "links_to", "Kwame Asante", 9, "link"),
                e("Helen Achterberg", "reports_to", "Daniel Oyelaran", 9, "statement"),
                // "her": the one the sentence before spoke of, not the note.
                e("Kwame Asante", "reports_to", "Helen Achterberg", 9, "statement"),
                e("Ravi Mehta", "reports_to", "Helen Achterberg", 9, "statement"),
                e("Sofia Lindqvist", "reports_to", "Helen Achterberg", 9, "statement"),
                // Another tense, a pronoun before a phrase of its own.
                e("Ben Hollis", "owns", "Team", 10, "statement"),
                // What a count or a common noun before a colon stands for.
                e("Ola Nowak", "reports_to", "Ben", 11, "statement"),
                e("Jo Kim", "reports_to", "Ben", 11, "statement"),
                e("Ola", "leads", "Al Day", 11, "statement"),
                e("Ola", "leads", "Bo Ek", 11, "statement"),
                // "he": the clause before's subject, in the same sentence.
                e("Cy Moss", "reports_to", "Ola", 12, "statement"),
                // Not every item a name: only the one before the verb.
                e("fraud checks", "depends_on", "Kafka", 14, "statement"),
            ]
        );
    }

    #[test]
    fn statements_with_pronouns_and_lists() {
        // Prose wraps: a sentence is read across its lines, each edge at
        // the line of its verb.
        let text = "# Ownership\n\nThe billing service is owned by the Payments team (lead: Alice). It\ndepends on the auth service for tokens and on the ledger service for balances.\n";
        assert_eq!(
            edges("docs/ownership.md", text),
            vec![
                e("Payments team", "owns", "billing service", 3, "statement"),
                e(
                    "billing service",
                    "depends_on",
                    "auth service",
                    4,
                    "statement"
                ),
                e(
                    "billing service",
                    "depends_on",
                    "ledger service",
                    4,
                    "statement"
                ),
            ]
        );
        let text = "The billing service is owned by the Payments team. It depends on the auth service for tokens and on the ledger service for balances.\nPriya reports to Dana.\nBILL-142 is blocked by AUTH-77.\n";
        assert_eq!(
            edges("a.md", text),
            vec![
                e("Payments team", "owns", "billing service", 1, "statement"),
                e(
                    "billing service",
                    "depends_on",
                    "auth service",
                    1,
                    "statement"
                ),
                e(
                    "billing service",
                    "depends_on",
                    "ledger service",
                    1,
                    "statement"
                ),
                e("Priya", "reports_to", "Dana", 2, "statement"),
                e("BILL-142", "blocked_by", "AUTH-77", 3, "statement"),
            ]
        );
    }

    #[test]
    fn clauses_terse_sentences_tables_and_the_notes_own_names() {
        let text = "---\ntitle: Ines Duarte\n---\n# Ines Duarte\n\nInes reports to Marta. The login service is maintained by the Identity group and depends on the user database, and it is deployed to the core cluster.\nRelies on Vault.\nFlags are owned by the Apps team too.\n\n| name | reports to |\n|---|---|\n| Theo Laine | Ines Duarte |\n";
        assert_eq!(
            edges("people/ines.md", text),
            vec![
                e("Ines Duarte", "reports_to", "Marta", 6, "statement"),
                e("Identity group", "owns", "login service", 6, "statement"),
                e(
                    "login service",
                    "depends_on",
                    "user database",
                    6,
                    "statement"
                ),
                e(
                    "login service",
                    "deployed_to",
                    "core cluster",
                    6,
                    "statement"
                ),
                e("Ines Duarte", "depends_on", "Vault", 7, "statement"),
                e("Apps team", "owns", "Flags", 8, "statement"),
                e("Theo Laine", "reports_to", "Ines Duarte", 12, "property"),
            ]
        );
    }

    #[test]
    fn labelled_lists_links_pronouns_and_relative_clauses() {
        let text = "---\ntitle: Marcus Oyelaran\n---\nDaniel reports to Marcus, as does [[Fatima Zahedi]]. [[Tomasz]] works under him.\n\nIt relies on [[Keystone IdP|Keystone]] for the service accounts used by the console.\nWe own [[Harbor]] — pipelines, models and the cost bill.\nThe Platform team is led by Nadia Castellanos, who reports directly to Robert Lindqvist (CIO).\n\nDirect reports:\n- [[Grace Whitfield]] — identity\n- Priya Ramaswamy (comms)\n\n## Dependencies\n\n1. [[PageRunner]] — pages\n2. Telvox SMS Gateway — outbound SMS\n\nSo changes go through her. Personally owned by nobody.\n";
        let stated = |p: &str, t: &str| {
            let mut all = edges(p, t);
            all.retain(|e| e.4 != "link");
            all
        };
        assert_eq!(
            stated("people/marcus.md", text),
            vec![
                e("Daniel", "reports_to", "Marcus Oyelaran", 4, "statement"),
                e(
                    "Fatima Zahedi",
                    "reports_to",
                    "Marcus Oyelaran",
                    4,
                    "statement"
                ),
                e("Tomasz", "reports_to", "Marcus Oyelaran", 4, "statement"),
                e(
                    "Marcus Oyelaran",
                    "depends_on",
                    "Keystone IdP",
                    6,
                    "statement"
                ),
                e("Marcus Oyelaran", "owns", "Harbor", 7, "statement"),
                e(
                    "Nadia Castellanos",
                    "leads",
                    "Platform team",
                    8,
                    "statement"
                ),
                e(
                    "Nadia Castellanos",
                    "reports_to",
                    "Robert Lindqvist",
                    8,
                    "statement"
                ),
                e(
                    "Grace Whitfield",
                    "reports_to",
                    "Marcus Oyelaran",
                    11,
                    "property"
                ),
                e(
                    "Priya Ramaswamy",
                    "reports_to",
                    "Marcus Oyelaran",
                    12,
                    "property"
                ),
                e(
                    "Marcus Oyelaran",
                    "depends_on",
                    "PageRunner",
                    16,
                    "property"
                ),
                e(
                    "Marcus Oyelaran",
                    "depends_on",
                    "Telvox SMS Gateway",
                    17,
                    "property"
                ),
            ]
        );
        let text = "# Season 4 Launch\n\nSeason 4 can't ship until ONL-412 and PAY-88 land.\nCo-owns [[Ladder]] with [[Ines Duarte]].\n- **Deployed to:** Northbrook DC (relay-01 active, relay-02 passive)\nThe launch is led by Nadia Castellanos. Firewall ticket CLIN-482 is itself blocked by CLIN-475.\n";
        assert_eq!(
            stated("docs/launch.md", text),
            vec![
                e("Season 4 Launch", "blocked_by", "ONL-412", 3, "statement"),
                e("Season 4 Launch", "blocked_by", "PAY-88", 3, "statement"),
                e("Season 4 Launch", "owns", "Ladder", 4, "statement"),
                e("Ines Duarte", "owns", "Ladder", 4, "statement"),
                e(
                    "Season 4 Launch",
                    "deployed_to",
                    "Northbrook DC",
                    5,
                    "property"
                ),
                e("Nadia Castellanos", "leads", "launch", 6, "statement"),
                e("CLIN-482", "blocked_by", "CLIN-475", 6, "statement"),
            ]
        );
    }

    #[test]
    fn denials_and_lists_whose_items_are_the_subjects() {
        let text = "# Session Cache\n\nIt doesn't depend on anything else. Billboard no longer depends on Reservoir. Turnstile used to run on hydra.\n\nClickstream feeds into it. Amara Nwosu is the DRI for it. Quill calls Seeker's REST API.\n\nWho reads from it:\n- [[Keystone]] (session tokens)\n\nEverything below depends on Ledger, so be careful:\n- [[Payouts]]\n\nLine managers under Tomasz Wilk:\n- Noor Haddad — manages the DBRE team\n";
        let mut got = edges("systems/session-cache.md", text);
        got.retain(|e| e.4 != "link");
        assert_eq!(
            got,
            vec![
                e("Session Cache", "depends_on", "Clickstream", 5, "statement"),
                e("Amara Nwosu", "owns", "Session Cache", 5, "statement"),
                e("Quill", "depends_on", "Seeker", 5, "statement"),
                e("Keystone", "depends_on", "Session Cache", 8, "property"),
                e("Payouts", "depends_on", "Ledger", 11, "property"),
                e("Noor Haddad", "reports_to", "Tomasz Wilk", 14, "property"),
            ]
        );
    }

    #[test]
    fn i_is_the_author_and_what_is_said_of_a_name_is_no_part_of_it() {
        let text = "---\nauthor: Li Wei\n---\n# Team notes\n\nI run the data team and report to Ana Costa, our CTO.\n\nPeers under Ana I meet with weekly:\n- Sam Okoro — Director of Sales\n\nBilling calls Ledger asynchronously at checkout. It requires Stripe, our processor, for cards and refunds. Exporter runs on AWS Lambda, one function per report kind. The tax rules service depends on the rates feed.\n";
        let mut got = edges("people/team.md", text);
        got.retain(|e| e.4 != "link");
        assert_eq!(
            got,
            vec![
                e("Li Wei", "reports_to", "Ana Costa", 6, "statement"),
                e("Sam Okoro", "reports_to", "Ana", 9, "property"),
                e("Billing", "depends_on", "Ledger", 11, "statement"),
                e("Billing", "depends_on", "Stripe", 11, "statement"),
                e("Exporter", "deployed_to", "AWS Lambda", 11, "statement"),
                e(
                    "tax rules service",
                    "depends_on",
                    "rates feed",
                    11,
                    "statement"
                ),
            ]
        );
        let got = edges(
            "people/team.md",
            "# Team\n\nLine managers under Ana, I think:\n- Sam Okoro\n",
        );
        assert_eq!(
            got,
            vec![e("Sam Okoro", "reports_to", "Ana", 4, "property")]
        );
        // Without an author, "I" is what the note is about.
        let got = edges("people/team.md", "# Team notes\n\nI report to Ana Costa.\n");
        assert_eq!(
            got,
            vec![e("Team notes", "reports_to", "Ana Costa", 3, "statement")]
        );
    }

    #[test]
    fn what_the_rules_for_names_keep() {
        let text = "---\nauthor: \"[[Li Wei]] (EM)\"\n---\n# Team notes\n\nI report to Ana Costa. Checkout depends on the nightly. Billing depends on Ledger, for reconciliation, and on Stripe. Ops depends on Ledger, After Hours and Stripe. Launch is blocked by Phase I. Search depends on the service they built. Billing is owned by the site reliability engineering team.\n";
        let mut got = edges("people/team.md", text);
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Li Wei", "reports_to", "Ana Costa", 6, "statement"),
                e("Billing", "depends_on", "Ledger", 6, "statement"),
                e("Billing", "depends_on", "Stripe", 6, "statement"),
                e("Ops", "depends_on", "Ledger", 6, "statement"),
                e("Ops", "depends_on", "After Hours", 6, "statement"),
                e("Ops", "depends_on", "Stripe", 6, "statement"),
                e("Launch", "blocked_by", "Phase I", 6, "statement"),
                e(
                    "site reliability engineering team",
                    "owns",
                    "Billing",
                    6,
                    "statement"
                ),
            ]
        );
    }

    #[test]
    fn a_thing_spoken_of_as_any_is_no_name() {
        let text = "# Directory Sync\n\nA small service maintained by the Identity team. It depends on a message queue and on the HR Feed. Checkout depends on postgres and on the billing service. The warehouse depends on object storage.\n";
        let mut got = edges("services/directory-sync.md", text);
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Directory Sync", "depends_on", "HR Feed", 3, "statement"),
                e("Checkout", "depends_on", "postgres", 3, "statement"),
                e("Checkout", "depends_on", "billing service", 3, "statement"),
                e("warehouse", "depends_on", "object storage", 3, "statement"),
            ]
        );
    }

    #[test]
    fn a_relation_said_to_have_ended_is_no_edge() {
        let text = "# Orbit\n\nOrbit was owned by Ana Silva until March. It was formerly run by Ops. It was previously maintained by Bo Chan. It was originally supplied by Nimbus. Its consumers were looked after by Tam until May. Orbit had been used by Relay until the rewrite.\n\nOrbit is operated by Gil Roy until the handover. It is looked after by Fay Ng.\n\nDana's former manager is Eli Park. Dana's outgoing manager is Kim Lee. Dana's manager is Cal Ruiz.\n\nLedger (formerly Vault) is owned by Ana Silva. As noted previously, Ledger depends on Redis.\n";
        let mut got = edges("systems/orbit.md", text);
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Gil Roy", "owns", "Orbit", 5, "statement"),
                e("Fay Ng", "owns", "Orbit", 5, "statement"),
                e("Dana", "reports_to", "Cal Ruiz", 7, "statement"),
                e("Ana Silva", "owns", "Ledger", 9, "statement"),
                e("Ledger", "depends_on", "Redis", 9, "statement"),
            ]
        );
        // "Former" puts only the role it qualifies in the past.
        assert!(negated(" the former"));
        assert!(!negated(" it replaced the former system and"));
        assert!(ended(" it was owned", " ana until march"));
        assert!(!ended(" it is owned", " ana until march"));
    }

    #[test]
    fn clauses_plans_roles_and_the_common_ways_of_saying_each_relation() {
        // Each clause its own subject ("; RosterPro reads", ", and Billing
        // depends on", ", which Tariq Aziz leads", ", whose … is licensed
        // from"); plans are no edges ("could use", "to pull", "will
        // move"); a ticket that labels a line is its subject; "head of"
        // after a name says what that one leads; a verb of data flowing
        // over the verb it starts with; "its own" is no verb; "… and Grace
        // Liu is the owner" is no object; "it" means what it meant before.
        let mut got = edges("ops.md", "# Ops notes\n\nCrew Scheduling owns RosterPro; RosterPro reads pairing data from pg-crew-01.\nLedger API is owned by Ana Silva, and Billing depends on Kafka Main.\nYard Management belongs to Warehouse Systems, which Tariq Aziz leads.\nShipment Tracking calls Notify Service, whose SMS gateway is licensed from Twilio.\nSearch could use OpenSearch next year. Hugo Lambert to pull reports from SailPoint. Card Issuing will move to Marqeta.\nOPS-4412: offline mode for the crew app, blocked by OPS-4398.\nAngela Brooks reports to Victor Huang, head of Customer Systems.\nRoute Optimizer consumes data from Telematics Gateway. Mortgage Origination stores documents in DocVault.\nKeymaster has no page of its own yet.\nPolicy Admin belongs to the Policy Systems team and Grace Liu is the owner.\nWater Billing is provided by Tyler Technologies; Utilities IT looks after it now. Hannah Berg maintains it too.\nGrid Analytics is part of Grid Modernization. Robert Nakamura heads Grid Modernization.\n");
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Crew Scheduling", "owns", "RosterPro", 3, "statement"),
                e("RosterPro", "depends_on", "pg-crew-01", 3, "statement"),
                e("Ana Silva", "owns", "Ledger API", 4, "statement"),
                e("Billing", "depends_on", "Kafka Main", 4, "statement"),
                e(
                    "Yard Management",
                    "part_of",
                    "Warehouse Systems",
                    5,
                    "statement"
                ),
                e("Tariq Aziz", "leads", "Warehouse Systems", 5, "statement"),
                e(
                    "Shipment Tracking",
                    "depends_on",
                    "Notify Service",
                    6,
                    "statement"
                ),
                e("Notify Service", "supplied_by", "Twilio", 6, "statement"),
                e("OPS-4412", "blocked_by", "OPS-4398", 8, "statement"),
                e("Victor Huang", "leads", "Customer Systems", 9, "statement"),
                e(
                    "Angela Brooks",
                    "reports_to",
                    "Victor Huang",
                    9,
                    "statement"
                ),
                e(
                    "Route Optimizer",
                    "depends_on",
                    "Telematics Gateway",
                    10,
                    "statement"
                ),
                e(
                    "Mortgage Origination",
                    "depends_on",
                    "DocVault",
                    10,
                    "statement"
                ),
                e(
                    "Policy Admin",
                    "part_of",
                    "Policy Systems team",
                    12,
                    "statement"
                ),
                e(
                    "Water Billing",
                    "supplied_by",
                    "Tyler Technologies",
                    13,
                    "statement"
                ),
                e("Utilities IT", "owns", "Water Billing", 13, "statement"),
                e("Hannah Berg", "owns", "Water Billing", 13, "statement"),
                e(
                    "Grid Analytics",
                    "part_of",
                    "Grid Modernization",
                    14,
                    "statement"
                ),
                e(
                    "Robert Nakamura",
                    "leads",
                    "Grid Modernization",
                    14,
                    "statement"
                ),
            ]
        );
    }

    #[test]
    fn what_the_new_clauses_leave_alone() {
        // A name after a ticket's label is the subject; a subject written
        // as a list after ", and"; an adverb is no subject; nouns that are
        // also verbs ("heads up", "feed", "heads:", "save") read as nouns;
        // "the head of" after a name; "it" is no owner.
        let mut got = edges(
            "ledger.md",
            "# Ledger\n\nOPS-4412: Billing depends on Kafka Main.\nAna owns Ledger, and Bob and Carol report to Dan.\nBilling calls Ledger and often uses Redis.\nHeads up, Ana Silva owns Ledger now.\nThe pricing feed is owned by the Data team.\nBo reports to Victor Huang, the head of Customer Systems.\nDepartment heads: Ana Silva, Bob Li.\nWe save money in Q3 by moving.\n\nAna owns Ledger. Relay depends on it.\n",
        );
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Billing", "depends_on", "Kafka Main", 3, "statement"),
                e("Ana", "owns", "Ledger", 4, "statement"),
                e("Carol", "reports_to", "Dan", 4, "statement"),
                e("Bob", "reports_to", "Dan", 4, "statement"),
                e("Billing", "depends_on", "Ledger", 5, "statement"),
                e("Billing", "depends_on", "Redis", 5, "statement"),
                e("Ana Silva", "owns", "Ledger", 6, "statement"),
                e("Data team", "owns", "pricing feed", 7, "statement"),
                e("Victor Huang", "leads", "Customer Systems", 8, "statement"),
                e("Bo", "reports_to", "Victor Huang", 8, "statement"),
                e("Ana", "owns", "Ledger", 12, "statement"),
                e("Relay", "depends_on", "Ledger", 12, "statement"),
            ]
        );
    }

    #[test]
    fn a_key_names_the_relation_of_the_first_list_that_holds_it() {
        for (names, rel, subject) in KEYED {
            for n in *names {
                let first = KEYED.iter().find(|(ns, _, _)| ns.contains(n)).unwrap();
                assert_eq!(keyed_relation(n), Some((first.1, first.2)), "{n}");
                if first.1 == *rel {
                    assert_eq!(keyed_relation(n), Some((*rel, *subject)));
                }
            }
        }
        assert_eq!(keyed_relation("no such key"), None);
        // Not yet, or only maybe, is not now; "has to" is.
        assert!(negated(" search could"));
        assert!(negated(" hugo lambert to"));
        assert!(negated(" it'll"));
        assert!(!negated(" billing has to"));
    }

    #[test]
    fn a_link_into_a_section_names_the_sections_thing() {
        let text = "# Ledger Core\n\nIt is built on [[Postgres clusters#pg-ledger|pg-ledger]] and calls [[Verity]]. It runs on [[Hosting#EU#atlas-prod]]. It uses [[Kafka#^f00d]].\n";
        let mut got = edges("services/ledger-core.md", text);
        got.retain(|e| e.4 == "statement");
        assert_eq!(
            got,
            vec![
                e("Ledger Core", "depends_on", "pg-ledger", 3, "statement"),
                e("Ledger Core", "depends_on", "Verity", 3, "statement"),
                e("Ledger Core", "deployed_to", "atlas-prod", 3, "statement"),
                e("Ledger Core", "depends_on", "Kafka", 3, "statement"),
            ]
        );
    }

    #[test]
    fn the_word_lists_compared_without_case_have_no_k() {
        // `eq_ignore_ascii_case` says what `to_lowercase` then `==` would
        // for these lists only while none has a "k" (the Kelvin sign
        // lowers to one).
        for list in [
            PRONOUNS,
            STOP_BEFORE,
            AFTER_A_SUBJECT,
            FIRST_PERSON,
            COMMON_NOUN_DETERMINERS,
            &[" and"],
        ] {
            for w in list {
                assert!(w.is_ascii() && !w.contains('k'), "{w}");
                assert_eq!(*w, w.to_lowercase(), "{w}");
            }
        }
        assert!(is_pronoun("This Service") && !is_pronoun("\u{212A}"));
        assert!(ends_with_ignoring_case("Nadia runs Apps AND", " and"));
        assert!(!ends_with_ignoring_case("and", " and"));
    }

    #[test]
    fn the_short_search_finds_what_str_find_finds() {
        let texts = [
            "",
            "a",
            "Payments, as does Ledger",
            "runs on kube — and on İzmir; the rest: ok",
            "ÉÉ — – ; : [[x]](y) with  with",
            " and  or  & ",
        ];
        let needles = [
            "",
            " — ",
            " – ",
            ": ",
            "; ",
            " with ",
            "[[",
            "](",
            ", as does ",
            " and ",
            " & ",
            "É",
            "ÉÉ — – ; : [[x]](y) with  with!",
        ];
        for t in texts {
            for n in needles {
                assert_eq!(find_short(t, n), t.find(n), "{t:?} {n:?}");
            }
        }
    }

    #[test]
    fn a_label_is_read_the_same_in_every_note() {
        // The labels that name no relation are remembered between notes;
        // one that names one is read for each note, about that note.
        for _ in 0..2 {
            for who in ["Billing", "Ledger"] {
                let text =
                    format!("# {who}\n\n## Log\n\n- Stripe\n\n## Dependencies\n\n- Postgres\n");
                assert_eq!(
                    edges(&format!("{who}.md"), &text),
                    vec![(
                        who.to_string(),
                        "depends_on".to_string(),
                        "Postgres".to_string(),
                        9,
                        "property"
                    )],
                );
            }
        }
    }

    #[test]
    fn any_text_is_read_without_a_panic() {
        // Letters whose lower case is longer than they are, odd tables,
        // links and frontmatter cut short.
        for text in [
            "İSTANBUL TEAM owns the İzmir service for İİİ too. İt depends on İ and on ẞ, and İt is deployed to Σ.",
            "Ops owns the İİİİİİİİİİİİ for €€€€€€€€€€€€ too. The İİİİİİİİ service depends on ÉÉ, and it is deployed to €€€€€€.",
            "| İ |\n|---|\n| a | b | c |\n|",
            "---\ntitle: [a\n---\n[[ ]] [[|]] [x](.md) ]( owns  depends on  , and",
            " owns ",
            "depends on",
            // Clauses, roles and labels read at offsets found in a copy.
            "Ana owns Ledger, whé Ünal leads. Ana owns Ledger, which Ünal leads.",
            "Ana owns Ledger, and Çağrı depends on Ödeme; é uses ß. OPS-1: é, blocked by Ü-2.",
            "Bo reports to Víctor, head of Über, and to İ, the head of İİ. It is part of it.",
        ] {
            let _ = note("n.md", text);
        }
    }

    #[test]
    fn properties_links_and_key_lines() {
        let text = "---\ntitle: Billing service\nowner: Priya Natarajan\ndepends_on: [payments-api, '[[Ledger]]']\ntags: [billing]\nsee: ['[[Runbook]]']\ndate: 2026-01-01\n---\n\n# Billing\n\nDeployed to: prod-eu, prod-us\nSee [[Incident 12|the incident]] and [notes](../docs/setup.md).\n";
        assert_eq!(
            edges("code/billing-service.md", text),
            vec![
                e("Priya Natarajan", "owns", "Billing service", 3, "property"),
                e(
                    "Billing service",
                    "depends_on",
                    "payments-api",
                    4,
                    "property"
                ),
                e("Billing service", "depends_on", "Ledger", 4, "property"),
                e("Billing service", "tagged", "#billing", 5, "tag"),
                e("Billing service", "see", "Runbook", 6, "property"),
                e("Billing service", "deployed_to", "prod-eu", 12, "property"),
                e("Billing service", "deployed_to", "prod-us", 12, "property"),
                e("Billing service", "links_to", "Incident 12", 13, "link"),
                e("Billing service", "links_to", "setup", 13, "link"),
            ]
        );
        assert_eq!(key("The Billing-Service"), "billing service");
    }

    #[test]
    fn a_link_is_one_item_of_a_list_and_a_link_wrapped_over_two_lines_is_read() {
        let text = "# Billing\n\nOwner: [Payments and Billing](payments.md)\nSee [the design\ndoc](design.md) for why.\nThe billing service depends on [Ledger and Audit](ledger.md), [[Auth]] and queues.\n";
        assert_eq!(
            edges("billing.md", text),
            vec![
                e("Billing", "links_to", "payments", 3, "link"),
                e("payments", "owns", "Billing", 3, "property"),
                e("Billing", "links_to", "design", 5, "link"),
                e("Billing", "links_to", "ledger", 6, "link"),
                e("Billing", "links_to", "Auth", 6, "link"),
                e("Billing", "depends_on", "ledger", 6, "statement"),
                e("Billing", "depends_on", "Auth", 6, "statement"),
                e("Billing", "depends_on", "queues", 6, "statement"),
            ]
        );
    }
}
