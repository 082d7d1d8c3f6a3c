//! The inputs each `memory.*` method takes, as the catalog lists them.

use crate::core::catalog::{
    alias, input as arg, spec, Input, Spec, ANY, BOOLEAN, EFFECTS, INTEGER, MAPPING, NUMBER,
    STRING, STRING_OR_LIST, WRITES,
};

pub(super) const DB: Input = arg(
    "db",
    STRING,
    "The memory file (default `.marktoflow/memory.db` beside the workflow).",
);

pub(super) const NOW: Input = arg(
    "now",
    ANY,
    "The current time (RFC 3339, YYYY-MM-DD or epoch ms).",
);

pub(super) const KIND: Input = arg("kind", STRING_OR_LIST, "Only memories of these kinds.");

pub(super) const KIND_ALIAS: Input = alias("type", "kind");

pub(super) const DRY_RUN: Input =
    arg("dry_run", BOOLEAN, "Report without changing anything.").default("false");

pub(super) const REPORT: Input = arg(
    "report_limit",
    INTEGER,
    "At most this many rows in the report.",
)
.default("100");

pub(super) const HALF_LIFE: Input = arg(
    "half_life_days",
    NUMBER,
    "Days for freshness (or importance) to halve.",
)
.default("30");

pub(super) const MIN_IMPORTANCE: Input =
    arg("min_importance", NUMBER, "Importance threshold (0..1).");

/// The contracts of `memory.*`.
pub const SPECS: &[Spec] = &[
    spec("memory", "remember", "Stores a memory (or updates the same one).")
        .inputs(&[
            arg("text", STRING, "What to remember.").required(),
            alias("content", "text"),
            arg("kind", STRING, "Its kind.").default("note"),
            KIND_ALIAS,
            arg("tags", STRING_OR_LIST, "Tags (a list or comma-separated)."),
            arg("importance", NUMBER, "0..1.").default("0.5"),
            arg("source", STRING, "Where it came from."),
            arg("metadata", MAPPING, "Any fields."),
            alias("meta", "metadata"),
            arg("id", STRING, "Update this memory."),
            arg("created_at", ANY, "When it was made (default now)."),
            arg("dedupe", BOOLEAN, "The same text and kind updates instead of adding.").default("true"),
            NOW,
            DB,
        ])
        .returns("{id, created, memory, db}")
        .traits(WRITES),
    spec("memory", "recall", "Finds memories: BM25 × importance × freshness.")
        .inputs(&[
            arg("query", STRING, "The words (empty: every memory)."),
            arg("top_k", INTEGER, "How many.").default("5"),
            alias("topK", "top_k"),
            KIND,
            KIND_ALIAS,
            arg("tags", STRING_OR_LIST, "All must be present."),
            MIN_IMPORTANCE,
            arg("match", STRING, "Any word, or every word.").default("any").one_of(&["any", "all"]),
            HALF_LIFE,
            arg("importance_weight", NUMBER, "0..1.").default("1"),
            arg("recency_weight", NUMBER, "0..1.").default("0.5"),
            arg("threshold", NUMBER, "The lowest score kept."),
            arg("touch", BOOLEAN, "Count the recall on returned memories.").default("true"),
            NOW,
            DB,
        ])
        .returns("{query, found, count, total, hits, db}")
        .traits(EFFECTS),
    spec("memory", "decay", "Lowers importance with time; boosts often-recalled memories.")
        .inputs(&[
            HALF_LIFE,
            arg("factor", NUMBER, "Multiply importance by this instead (0..1)."),
            KIND,
            KIND_ALIAS,
            arg("boost_after_queries", INTEGER, "Recalls before a boost.").default("10"),
            arg("boost_per_query", NUMBER, "Boost per recall.").default("0.01"),
            arg("max_boost", NUMBER, "Largest boost.").default("0.15"),
            arg("floor", NUMBER, "Importance never goes below this.").default("0"),
            DRY_RUN,
            REPORT,
            NOW,
            DB,
        ])
        .returns("{dry_run, memories, decayed, boosted, unchanged, half_life_days, factor, changes, db}")
        .traits(WRITES),
    spec("memory", "cleanup", "Removes old or unimportant memories.")
        .inputs(&[
            arg("max_age_days", NUMBER, "Older than this goes."),
            MIN_IMPORTANCE,
            arg("age_from", STRING, "Which time counts.")
                .default("created_at")
                .one_of(&["created_at", "last_access"]),
            KIND,
            KIND_ALIAS,
            DRY_RUN,
            REPORT,
            NOW,
            DB,
        ])
        .returns("{dry_run, matched, removed, kept, reasons, memories, db}")
        .traits(WRITES),
    spec("memory", "stats", "Counts and summaries of the memories.")
        .inputs(&[KIND, KIND_ALIAS, DB])
        .returns("{count, by_kind, by_tag, avg_importance, total_queries, oldest, newest, most_recalled, schema_version, db}")
        .traits(EFFECTS),
];
