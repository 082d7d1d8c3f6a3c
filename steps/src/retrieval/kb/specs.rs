//! The inputs each `kb.*` method takes, as the catalog lists them.

use crate::core::catalog::{
    alias, input, spec, Input, Spec, Traits, BOOLEAN, BOOLEAN_OR_STRING, EFFECTS, INTEGER, LIST,
    LIST_OR_MAPPING, MAPPING, NUMBER, STRING, STRING_OR_LIST,
};

pub(super) const KB: Input = input("kb", STRING, "The knowledge base folder.").required();

pub(super) const KB_ALIAS: Input = alias("knowledge_base", "kb");

pub(super) const INDEX_DIR: Input = input(
    "index_dir",
    STRING,
    "Where the index lives (default `<kb>/.marktoflow/index`).",
);

pub(super) const FORCE: Input = input("force", BOOLEAN, "Rebuild from scratch.").default("false");

pub(super) const EXTENSIONS: Input =
    input("extensions", LIST, "Note file extensions.").default("[md, markdown]");

pub(super) const HIDDEN: Input =
    input("include_hidden", BOOLEAN, "Index hidden folders.").default("false");

pub(super) const CHUNK_CHARS: Input = input(
    "chunk_chars",
    INTEGER,
    "Longest section before it is cut at paragraphs.",
)
.default("2000");

pub(super) const SPLIT_LEVEL: Input = input(
    "split_level",
    INTEGER,
    "Deepest heading that starts a chunk.",
)
.default("3");

pub(super) const REFRESH: Input = input("refresh", STRING, "When to re-index first.")
    .default("auto")
    .one_of(&["auto", "always", "never"]);

pub(super) const REFRESH_MS: Input = input(
    "refresh_interval_ms",
    NUMBER,
    "auto: check the folder at most this often.",
)
.default("1000");

pub(super) const QUERY: Input = input("query", STRING, "The words (with the seed's operators).");

pub(super) const TOP_K: Input =
    input("top_k", INTEGER, "How many hits (1 to 10000).").default("10");

pub(super) const THRESHOLD: Input = input("threshold", NUMBER, "The lowest score kept.");

pub(super) const PER_FILE: Input =
    input("per_file", BOOLEAN, "One hit per note, its best chunk.").default("false");

pub(super) const SCOPE: Input = input(
    "scope",
    STRING,
    "`all`, or a top-level folder such as `work`.",
);

pub(super) const PATH_PREFIX: Input = input(
    "path_prefix",
    STRING_OR_LIST,
    "Only notes below these folders.",
);

pub(super) const FILTERS: Input = input(
    "filters",
    MAPPING,
    "Metadata filters: {field: value | [values] | {eq, in, not}}, `date: {from, to}`.",
);

pub(super) const BOOSTS: Input = input("boosts", MAPPING, "Field weights {title, section, body}.");

pub(super) const SNIPPET: Input = input("snippet_chars", INTEGER, "Snippet length.").default("160");

/// `kb.vector_search` shows more of each chunk: it has no BM25 snippet.
pub(super) const VECTOR_SNIPPET: Input =
    input("snippet_chars", INTEGER, "Snippet length.").default("240");

pub(super) const OPERATORS: Input = input(
    "operators",
    BOOLEAN,
    "Read `tag:`, `type:`, `\"phrases\"`, `-words` in the query.",
)
.default("true");

pub(super) const TODAY: Input = input(
    "today",
    STRING,
    "The date relative dates count from (YYYY-MM-DD).",
);

pub(super) const MODEL_DIR: Input = input(
    "model_dir",
    STRING,
    "The sentence-embedding model folder (else the tool's `options.model_dir`, else MARKTOFLOW_EMBED_MODEL).",
);

pub(super) const TENANT: Input = input(
    "tenant",
    STRING,
    "Whose notes may be found besides the shared ones: notes with another `tenant_id` in their frontmatter never are (empty: the shared notes only).",
);

/// The index inputs, the freshness inputs, the search inputs, then `$extra`.
macro_rules! kb_inputs {
    ($($extra:expr),* $(,)?) => {
        &[
            KB, KB_ALIAS, INDEX_DIR, FORCE, EXTENSIONS, HIDDEN, CHUNK_CHARS, SPLIT_LEVEL,
            REFRESH, REFRESH_MS, QUERY, TOP_K, THRESHOLD, PER_FILE, SCOPE, PATH_PREFIX,
            FILTERS, BOOSTS, OPERATORS, TODAY, TENANT, $($extra),*
        ]
    };
}

pub(super) const KB_TRAITS: Traits = EFFECTS;

/// The contracts of `kb.*`.
pub const SPECS: &[Spec] = &[
    spec("kb", "index", "Indexes a folder of Markdown notes (incremental).")
        .inputs(&[
            KB, KB_ALIAS, INDEX_DIR, FORCE, EXTENSIONS, HIDDEN, CHUNK_CHARS, SPLIT_LEVEL,
            input("embed", BOOLEAN, "Also embed every chunk that has no vector yet (the embedding model must be installed), so that search by meaning never waits.").default("false"),
            MODEL_DIR,
        ])
        .returns("{files, chunks, added, updated, removed, unchanged, rebuilt, duration_ms, index_dir, vectors?: {model, embedded, covered, chunks}}")
        .traits(KB_TRAITS),
    spec("kb", "status", "How much of a knowledge base is indexed and embedded, without changing either.")
        .inputs(&[KB, KB_ALIAS, INDEX_DIR, MODEL_DIR])
        .returns("{kb, index_dir, files, chunks, indexed, vectors: {model, covered, chunks, background?: {pid, done, total, started_ms, updated_ms}} | null}")
        .traits(KB_TRAITS),
    spec("kb", "search", "Full-text (BM25) search of the notes, fused with dense search when asked.")
        .inputs(kb_inputs!(
            SNIPPET,
            input("analyze", BOOLEAN, "Search the words `query.analyze` keeps, and filter by a date the text names.").default("false"),
            input("question_words", BOOLEAN, "Search question words and pronouns too (what, when, my, did, …).").default("false"),
            input("dense", BOOLEAN_OR_STRING, "Fuse dense (embedding) search in: true, false or auto (when a model is configured).").default("false"),
            input("dense_weight", NUMBER, "The dense list's weight in the fusion, 0..1.").default("0.6"),
            // The nearest chunk to a question the notes know nothing about
            // ("Qwxzv", "the weather on Mars") scores 0.25–0.29 with
            // all-MiniLM-L6-v2 on the bundled notes, answering chunks 0.35 and up.
            input("dense_min", NUMBER, "The lowest cosine at which a hit found by meaning alone is kept.").default("0.3"),
            input("dense_query", STRING, "The text to embed (default: the query without operators)."),
            input("embed_limit", INTEGER, "With dense: when more chunks than this have no vector yet, answer at once with the vectors made so far and the chunks of the best notes by words (at most 64), and leave the rest to `marktoflow kb index --embed` or `serve`'s background embedding.").default("512"),
            MODEL_DIR,
        ))
        .returns("{query, found, count, total, hits: [{id, path, title, section, text, snippet, score, metadata, mtime_ms}], ranking, took_ms}")
        .traits(KB_TRAITS),
    spec("kb", "facets", "Counts notes by a metadata field.")
        .inputs(kb_inputs!(
            SNIPPET,
            input("field", STRING, "A metadata field, or `folder`.").required(),
            input("limit", INTEGER, "How many values."),
        ))
        .returns("{field, values: [{value, count}], files}")
        .traits(KB_TRAITS),
    spec("kb", "vector_search", "Dense (embedding) search of the notes.")
        .inputs(kb_inputs!(VECTOR_SNIPPET, MODEL_DIR))
        .returns("{query, found, count, hits, took_ms}")
        .traits(KB_TRAITS),
    spec("kb", "graph", "The knowledge graph of the notes (links, properties, tags and statements such as \"X owns Y\"), each edge citing its note and line: a node's edges, what it reaches up to a depth, or the chain to another node.")
        .inputs(&[
            KB, KB_ALIAS, INDEX_DIR, EXTENSIONS, HIDDEN, CHUNK_CHARS, SPLIT_LEVEL, REFRESH, REFRESH_MS, TENANT,
            input("node", STRING, "The node: a note's title, file name or alias, or a name the notes use (`billing-service`, `Payments team`)."),
            input("question", STRING, "Or a question: the names in it the graph knows are the node (and `to`), its verb the relation and the direction (\"Who owns the billing service?\")."),
            input("direction", STRING, "Follow edges from the node (`out`), to it (`in`: backlinks, dependents, owners), or both.").default("both").one_of(&["out", "in", "both"]),
            input("relation", STRING_OR_LIST, "Only these relations (`owns`, `depends_on`, `reports_to`, `deployed_to`, `blocked_by`, `part_of`, `attended`, `in_repo`, `leads`, `links_to`, `tagged`, or a property's name)."),
            input("depth", INTEGER, "How many edges away, 1 to 10 (more than 1: transitively).").default("1"),
            input("to", STRING, "Find the shortest chain of edges from the node to this one (within `depth`)."),
            input("limit", INTEGER, "At most this many edges (1 to 10000).").default("200"),
        ])
        .returns("{node: {name, notes}, found, count, edges: [{from, relation, to, path, line, text, how, depth}], nodes: [{name, depth}], path, truncated, suggestions, hits, read, graph: {notes, edges, read}, took_ms}")
        .traits(KB_TRAITS),
    spec("kb", "evidence", "The lines of the found notes that bear on a question, with line numbers (rules, no model).")
        .inputs(&[
            KB,
            KB_ALIAS,
            input("question", STRING, "The question.").required(),
            input("hits", LIST_OR_MAPPING, "A `kb.search` output, or its `hits`: the notes to read, best first.").required(),
            input("max_notes", INTEGER, "Read at most this many notes.").default("5"),
            input("budget_tokens", INTEGER, "Keep at most this much text (characters / 4).").default("500"),
            input("max_items", INTEGER, "At most this many evidence items.").default("8"),
            input("min_score", NUMBER, "Drop items scored lower.").default("0"),
            input("dense", BOOLEAN_OR_STRING, "Score lines by meaning too: true, false or auto (when a model is configured).").default("auto"),
            MODEL_DIR,
            TENANT,
        ])
        .returns("{question, found, count, text, notes, evidence: [{id, path, title, heading, heading_path, start_line, end_line, lines, kind, text, quote, score, units}]}")
        .traits(KB_TRAITS),
];
