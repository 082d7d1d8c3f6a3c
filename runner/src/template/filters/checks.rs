//! Type checks (`is_array`, `is_empty`, …) and logic (`ternary`, `and`,
//! `or`, `not`).

use super::super::js_ops::truthy;
use super::is_list;
use minijinja::value::{Rest, ValueKind};
use minijinja::Value;

/// `is_array`: a list.
pub(super) fn is_array(value: &Value) -> bool {
    is_list(value)
}

/// `is_object`: a map.
pub(super) fn is_object(value: &Value) -> bool {
    value.kind() == ValueKind::Map
}

/// `is_string`: a text.
pub(super) fn is_string(value: &Value) -> bool {
    value.kind() == ValueKind::String
}

/// `is_number`: a number that is not NaN.
pub(super) fn is_number(value: &Value) -> bool {
    value.is_number()
        && f64::try_from(value.clone())
            .map(|f| !f.is_nan())
            .unwrap_or(true)
}

/// `is_empty`: none, undefined, `''`, `[]` or `{}`.
pub(super) fn is_empty(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => true,
        ValueKind::String | ValueKind::Seq | ValueKind::Map => value.len() == Some(0),
        ValueKind::Iterable => value
            .try_iter()
            .map(|mut i| i.next().is_none())
            .unwrap_or(false),
        _ => false,
    }
}

/// `is_null`: none or undefined (the peer says false for undefined; JSON
/// has no undefined).
pub(super) fn is_null(value: &Value) -> bool {
    value.is_none() || value.is_undefined()
}

/// `ternary(a, b)`: `a` if the value is truthy, else `b` (JavaScript's
/// truthiness, as in conditions: empty lists and maps are true).
pub(super) fn ternary(value: &Value, a: Value, b: Option<Value>) -> Value {
    if truthy(value) {
        a
    } else {
        b.unwrap_or(Value::UNDEFINED)
    }
}

/// `and(x, ...)`: true if the value and all arguments are truthy.
pub(super) fn and(value: &Value, rest: Rest<Value>) -> bool {
    truthy(value) && rest.iter().all(truthy)
}

/// `or(x, ...)`: the value if truthy, else the first truthy argument, else none.
pub(super) fn or(value: &Value, rest: Rest<Value>) -> Value {
    std::iter::once(value)
        .chain(rest.iter())
        .find(|v| truthy(v))
        .cloned()
        .unwrap_or(Value::from(()))
}

/// `not`: true if the value is falsy.
pub(super) fn not(value: &Value) -> bool {
    !truthy(value)
}
