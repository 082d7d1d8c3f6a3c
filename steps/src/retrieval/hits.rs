//! Hits as the retrieval steps take them: a list, or a search output (an
//! object with `hits`, or `results` as some engines name it), so that
//! `rank.*`, `context.pack` and `kb.evidence` take each other's outputs
//! whole.

use crate::core::args::Args;
use crate::core::error::{type_name, ActionError};
use serde_json::Value;

/// The hits in `v`; `what` names it in the error.
pub fn hit_list(v: &Value, what: &str) -> Result<Vec<Value>, ActionError> {
    match v {
        Value::Array(a) => Ok(a.clone()),
        Value::Object(o) => match o.get("hits").or_else(|| o.get("results")) {
            Some(Value::Array(a)) => Ok(a.clone()),
            _ => Err(ActionError::Input(format!(
                "{what} must be a list of hits or an object with `hits`"
            ))),
        },
        other => Err(ActionError::Input(format!(
            "{what} must be a list of hits, got {}",
            type_name(other)
        ))),
    }
}

/// The hits of the input `name`, which must be given.
pub fn hits_input(a: &Args, name: &str) -> Result<Vec<Value>, ActionError> {
    hit_list(
        a.required(name)?,
        &format!("input `{name}` of `{}`", a.action()),
    )
}
