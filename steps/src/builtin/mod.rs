//! Built-in actions: `core.*`, `workflow.*`, `file.*` and `http.*`.
//!
//! `core.transform` and `core.template` evaluate templates per item, so the
//! engine runs them (it owns the template environment); they are listed here
//! so that validation knows them.

use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
    signals::LogLevel,
};
use async_trait::async_trait;
use serde_json::{json, Value};

mod crypto;
mod data;
mod datetime;
pub mod file;
pub mod http;
mod lists;

pub use data::lookup_path;
pub use file::FileAction;
pub use http::HttpAction;

pub struct CoreAction;

#[async_trait]
impl Action for CoreAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        CORE_SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let args = Args::of(CORE_SPECS, call, &inputs)?;
        match call.method {
            // Inputs arrive rendered once; they are returned as they are
            // (the peer renders them a second time).
            "set" => Ok(inputs),
            "log" => log(call, &args),
            "extract" => data::extract(&args),
            "format" => data::format(&args),
            "parse" => data::parse(&args),
            "datetime" => datetime::datetime(&args, call.caps.clock.now()),
            "crypto" => crypto::crypto(&args),
            "aggregate" => lists::aggregate(&args),
            "compare" => lists::compare(&args),
            "rename_keys" => lists::rename_keys(&args),
            "limit" => lists::limit(&args),
            "sort" => lists::sort(&args),
            m if CORE_SPECS
                .iter()
                .any(|s| s.method == m && s.traits.engine_op) =>
            {
                Err(ActionError::Input(format!(
                    "`core.{m}` is evaluated by the workflow engine"
                )))
            }
            m => Err(ActionError::Input(format!("unknown method `core.{m}`"))),
        }
    }
}

pub use crate::core::args::Args;

pub struct WorkflowAction;

#[async_trait]
impl Action for WorkflowAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        WORKFLOW_SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let a = Args::of(WORKFLOW_SPECS, call, &inputs)?;
        match call.method {
            // The engine records these as the workflow's outputs.
            "set_outputs" => match inputs {
                Value::Object(_) => Ok(inputs),
                Value::Null => Ok(json!({})),
                other => Err(ActionError::Input(format!(
                    "`workflow.set_outputs` takes a mapping of output names to values, got {}",
                    type_name(&other)
                ))),
            },
            "log" => log(call, &a),
            "fail" => Err(ActionError::Raised {
                message: a.value("message").map(|m| display(&m)).unwrap_or_default(),
                code: a.get("code").filter(|c| !c.is_null()).map(display),
            }),
            "sleep" => {
                let d = parse_duration(a.required("duration")?)
                    .map_err(|e| a.invalid("duration", e))?;
                tokio::select! {
                    _ = tokio::time::sleep(d) => {
                        let ms = d.as_millis() as u64;
                        Ok(json!({"slept": ms, "slept_ms": ms}))
                    }
                    _ = call.caps.cancel.cancelled() => Err(ActionError::Cancelled),
                }
            }
            "timestamp" => {
                let now = call.caps.clock.now();
                let ts = match a.chosen("format")? {
                    "unix" => json!(now.timestamp()),
                    "ms" => json!(now.timestamp_millis()),
                    _ => json!(now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
                };
                Ok(json!({ "timestamp": ts }))
            }
            "noop" => Ok(json!({"success": true})),
            // The engine ends the run once this returns.
            "exit" => {
                let status = a.num("status")?;
                if let Some(s) = status.filter(|s| !(100.0..=599.0).contains(s)) {
                    return Err(a.invalid(
                        "status",
                        format!("must be an HTTP status from 100 to 599, got {s}"),
                    ));
                }
                if let Some(m) = a.str("message")? {
                    call.log(LogLevel::Info, m);
                }
                let mut out = json!({"exited": true});
                if let Some(o) = a.get("outputs") {
                    out["outputs"] = o.clone();
                }
                if let Some(s) = status {
                    out["status"] = json!(s as u16);
                }
                if let Some(b) = a.get("body") {
                    out["body"] = b.clone();
                }
                Ok(out)
            }
            m => Err(ActionError::Input(format!("unknown method `workflow.{m}`"))),
        }
    }
}

fn log(call: &Call<'_>, a: &Args) -> Result<Value, ActionError> {
    let message = display(a.required("message")?);
    let line = match a.mapping("metadata")? {
        Some(m) if !m.is_empty() => format!("{message} {}", Value::Object(m.into_owned())),
        _ => message.clone(),
    };
    let level = a.chosen("level")?;
    let level = LogLevel::parse(level)
        .ok_or_else(|| a.invalid("level", format!("`{level}` is not a log level")))?;
    call.log(level, line);
    Ok(json!({ "logged": true, "message": message }))
}

/// Strings as they are; anything else as JSON.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub use crate::core::time::parse_duration;

use crate::core::catalog::{
    alias, input, spec, Spec, Traits, ANY, BOOLEAN, DURATION, EFFECTS, INTEGER, LIST, MAPPING,
    NUMBER, PURE, STRING, WAITS,
};

const ENGINE: Traits = Traits {
    engine_op: true,
    ..PURE
};

/// `core.transform`'s operations (the engine evaluates it: see the runner's `core_ops`).
pub const TRANSFORM_OPERATIONS: &[&str] = &[
    "map", "filter", "reduce", "find", "group_by", "unique", "sort",
];

/// The contracts of `core.*`.
pub const CORE_SPECS: &[Spec] = &[
    spec(
        "core",
        "set",
        "Sets variables: returns its inputs, rendered once.",
    )
    .open()
    .returns("the rendered inputs"),
    spec("core", "log", "Writes a line to the run log.")
        .inputs(LOG_INPUTS)
        .returns("{logged: true, message}"),
    spec(
        "core",
        "transform",
        "Maps, filters, reduces, groups, sorts a list.",
    )
    .inputs(&[
        input("input", LIST, "The list.").required(),
        alias("items", "input"),
        input("operation", STRING, "What to do.")
            .required()
            .one_of(TRANSFORM_OPERATIONS),
        input(
            "expression",
            STRING,
            "map/reduce: a template evaluated per item (`item`, `index`, `accumulator`).",
        ),
        input(
            "condition",
            STRING,
            "filter/find: an expression evaluated per item.",
        ),
        input("initialValue", ANY, "reduce: the starting accumulator."),
        alias("initial_value", "initialValue"),
        input(
            "key",
            STRING,
            "group_by/unique/sort: a path into the item or an `item…` expression.",
        ),
        input("reverse", BOOLEAN, "sort: descending.").default("false"),
    ])
    .returns("the new list, value or groups")
    .traits(ENGINE),
    spec(
        "core",
        "template",
        "Renders a template with the run's variables.",
    )
    .inputs(&[
        input(
            "template",
            STRING,
            "The template text, or one `{{ expr }}` giving it.",
        )
        .required(),
        input("context", MAPPING, "Extra names for the template."),
    ])
    .returns("the rendered text")
    .traits(ENGINE),
    spec("core", "extract", "Reads a value at a path (`a.b[0].c`).")
        .inputs(&[
            input("input", ANY, "The value to read from."),
            input("path", STRING, "The path.").required(),
            input("default", ANY, "When nothing is at the path."),
        ])
        .returns("the value, else `default`, else null"),
    spec("core", "format", "Formats a value as text.")
        .inputs(&[
            input("value", ANY, "The value."),
            input("type", STRING, "How to format it.")
                .default("string")
                .one_of(data::FORMAT_TYPES),
            input(
                "format",
                STRING,
                "string: upper, lower, title, capitalize, trim, slug; date: a YYYY-MM-DD pattern.",
            ),
            input("precision", NUMBER, "number/currency: decimals."),
            input("grouping", BOOLEAN, "number: thousands separators.").default("false"),
            input("currency", STRING, "currency: a code (USD, EUR, …).").default("USD"),
        ])
        .returns("text"),
    spec("core", "parse", "Parses text into data.")
        .inputs(&[
            input("data", STRING, "The text.").required(),
            input("format", STRING, "Its format.")
                .required()
                .one_of(data::PARSE_FORMATS),
            input("delimiter", STRING, "csv: the field separator.").default("','"),
            input("header", BOOLEAN, "csv: the first row names the fields.").default("true"),
        ])
        .returns("the parsed value"),
    spec("core", "datetime", "Date arithmetic and formatting (UTC).")
        .inputs(&[
            input("operation", STRING, "What to do.")
                .default("now")
                .one_of(datetime::OPERATIONS),
            input("date", ANY, "A date (ISO 8601 or epoch ms); default now."),
            input("date2", ANY, "diff: the other date."),
            input("amount", NUMBER, "add/subtract: how many units."),
            input("unit", STRING, "The unit (milliseconds … years)."),
            input(
                "format",
                STRING,
                "format: iso, unix, ms or a YYYY-MM-DD pattern.",
            ),
        ])
        .returns("ISO text, or a number"),
    spec(
        "core",
        "crypto",
        "Hashes, HMACs, random bytes, UUIDs, base64.",
    )
    .inputs(&[
        input("operation", STRING, "What to do.")
            .required()
            .one_of(crypto::OPERATIONS),
        input("data", ANY, "The data."),
        input("key", STRING, "hmac: the key."),
        input("algorithm", STRING, "hash/hmac: the algorithm.")
            .default("sha256")
            .one_of(crypto::ALGORITHMS),
        input("encoding", STRING, "The output encoding.")
            .default("hex")
            .one_of(crypto::ENCODINGS),
        input("size", NUMBER, "random: how many bytes.").default("32"),
    ])
    .returns("text"),
    spec(
        "core",
        "aggregate",
        "Sums, averages, counts, joins the items of a list (or one field of each).",
    )
    .inputs(&[
        input("input", LIST, "The list.").required(),
        input("operation", STRING, "What to compute.")
            .required()
            .one_of(lists::AGGREGATE_OPERATIONS),
        input(
            "field",
            STRING,
            "Each item's field to use (else the items).",
        ),
        input("separator", STRING, "concat: between the values.").default("', '"),
    ])
    .returns("a number, an item, or text (concat)"),
    spec(
        "core",
        "compare",
        "Which items of two lists were added, removed or kept, by one field.",
    )
    .inputs(&[
        input("source1", LIST, "The old list.").required(),
        input("source2", LIST, "The new list.").required(),
        input("field", STRING, "The field that identifies an item.").required(),
    ])
    .returns("{added, removed, unchanged, total_source1, total_source2}"),
    spec(
        "core",
        "rename_keys",
        "Renames the keys of a mapping, or of each mapping in a list.",
    )
    .inputs(&[
        input("input", ANY, "A mapping or a list of them."),
        input("mapping", MAPPING, "Old key → new key.").required(),
    ])
    .returns("the renamed value"),
    spec(
        "core",
        "limit",
        "A slice of a list: `count` items from `offset`.",
    )
    .inputs(&[
        input("input", LIST, "The list.").required(),
        input("count", NUMBER, "How many items.").required(),
        input("offset", NUMBER, "Where to start (negative: from the end).").default("0"),
    ])
    .returns("the slice"),
    spec(
        "core",
        "sort",
        "Sorts a list, by one field of its items if given.",
    )
    .inputs(&[
        input("input", LIST, "The list.").required(),
        input("field", STRING, "The field to sort by (else the items)."),
        input("direction", STRING, "Ascending or descending.")
            .default("asc")
            .one_of(&["asc", "desc"]),
    ])
    .returns("the sorted list"),
];

const LOG_INPUTS: &[crate::core::catalog::Input] = &[
    input("message", ANY, "The line (a value is written as JSON).").required(),
    input("level", STRING, "Its level.")
        .default("info")
        .one_of(&["debug", "trace", "info", "log", "warn", "warning", "error"]),
    input(
        "metadata",
        MAPPING,
        "Fields written after the line, as JSON.",
    ),
];

/// The contracts of `workflow.*`.
pub const WORKFLOW_SPECS: &[Spec] = &[
    spec("workflow", "set_outputs", "Sets the run's outputs.")
        .open()
        .returns("the outputs")
        .traits(Traits {
            sets_outputs: true,
            ..PURE
        }),
    spec("workflow", "log", "Writes a line to the run log.")
        .inputs(LOG_INPUTS)
        .returns("{logged: true, message}"),
    spec("workflow", "fail", "Fails the step with a message.")
        .inputs(&[
            input("message", ANY, "Why.").default("workflow failed"),
            input(
                "code",
                ANY,
                "An error code, kept beside the message (`error.code`).",
            ),
        ])
        .returns("nothing: the step fails"),
    spec("workflow", "sleep", "Waits.")
        .inputs(&[input(
            "duration",
            DURATION,
            "How long (`2s`, `500ms`, or milliseconds).",
        )
        .required()])
        .returns("{slept, slept_ms}: milliseconds")
        .traits(WAITS),
    spec("workflow", "timestamp", "The current time.")
        .inputs(&[input("format", STRING, "iso, unix (seconds) or ms.")
            .default("iso")
            .one_of(&["iso", "unix", "ms"])])
        .returns("{timestamp}")
        .traits(EFFECTS),
    spec("workflow", "noop", "Does nothing.").returns("{success: true}"),
    spec(
        "workflow",
        "exit",
        "Ends the run now, successfully; the steps after it do not run.",
    )
    .inputs(&[
        input(
            "outputs",
            MAPPING,
            "The run's outputs (else they are found as usual).",
        ),
        input(
            "status",
            INTEGER,
            "The HTTP status a waiting webhook caller gets (default 200).",
        ),
        input(
            "body",
            ANY,
            "What a waiting webhook caller gets instead of the run's JSON.",
        ),
        input("message", STRING, "Why: written to the run log."),
    ])
    .returns("{exited: true, outputs?, status?, body?}")
    .traits(Traits {
        exits: true,
        ..PURE
    }),
];
