//! The keys each part of the format takes: what the readers check, what
//! `did you mean` suggests from, and what the JSON Schema lists.

pub const TOP_KEYS: &[&str] = &[
    "workflow",
    "tools",
    "triggers",
    "inputs",
    "outputs",
    "steps",
    "permissions",
    "default_agent",
    "default_model",
    "mode",
    "sources",
    "secrets",
    "timeout",
    "concurrency",
    "budget",
];
pub const META_KEYS: &[&str] = &["id", "name", "version", "description", "author", "tags"];
pub const INPUT_KEYS: &[&str] = &[
    "type",
    "required",
    "default",
    "description",
    "enum",
    "pattern",
    "min",
    "max",
    "validation",
    "tenant",
];
/// A wait's keys: `duration` and `mode`, then those only its `form`,
/// `approval` and `webhook` modes read ([`ASK_KEYS`]).
const WAIT_KEYS: &[&str] = &[
    "duration",
    "mode",
    "fields",
    "webhook_path",
    "title",
    "prompt",
    "message",
    "on_timeout",
    "approvals",
    "approvers",
    "requester",
    "self_approval",
    "key",
    "secret",
    "token",
    "link_ttl",
    "notify",
    "on_approve",
    "on_reject",
];
pub const ASK_KEYS: &[&str] = WAIT_KEYS.split_at(2).1;

/// What a wait's output holds besides its fields: no field may be named so.
pub const ANSWER_NAMES: &[&str] = &[
    "decision",
    "approved",
    "comment",
    "approvals",
    "answered_by",
    "answered_at",
    "via",
    "timed_out",
];

/// A wait's `fields:` entries: an input's keys and a form's.
pub const FIELD_KEYS: &[&str] = &[
    "type",
    "required",
    "default",
    "description",
    "label",
    "enum",
    "options",
    "choices",
    "pattern",
    "min",
    "max",
    "validation",
];
pub const TOOL_KEYS: &[&str] = &["sdk", "auth", "options", "description"];
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "name",
    "type",
    "description",
    "output_variable",
    "outputVariable",
    "conditions",
    "timeout",
    "error_handling",
    "errorHandling",
    "on_error",
    "model",
    "agent",
];

/// Step types and their own keys.
pub const KINDS: &[(&str, &[&str])] = &[
    (
        "action",
        &[
            "action",
            "inputs",
            "prompt",
            "prompt_inputs",
            "permissions",
            "condition",
            "retry",
        ],
    ),
    ("script", &["inputs", "code", "condition", "retry"]),
    ("if", &["condition", "then", "else", "steps"]),
    ("switch", &["expression", "cases", "default"]),
    (
        "for_each",
        &[
            "items",
            "item_variable",
            "index_variable",
            "steps",
            "max_concurrent",
        ],
    ),
    (
        "while",
        &["condition", "max_iterations", "steps", "variables"],
    ),
    ("try", &["try", "catch", "finally"]),
    ("wait", WAIT_KEYS),
    ("map", &["items", "item_variable", "expression"]),
    ("filter", &["items", "item_variable", "condition"]),
    (
        "reduce",
        &[
            "items",
            "item_variable",
            "accumulator_variable",
            "initial_value",
            "expression",
        ],
    ),
    ("parallel", &["branches", "max_concurrent"]),
    (
        "merge",
        &["mode", "sources", "match_field", "key_field", "on_conflict"],
    ),
    (
        "workflow",
        &[
            "workflow",
            "inputs",
            "use_subagent",
            "subagent_config",
            "condition",
        ],
    ),
];

/// Step types of the peer's format that this version does not run yet.
pub(super) const NOT_YET: &[&str] = &[];
