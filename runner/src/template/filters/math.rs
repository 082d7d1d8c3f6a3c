//! Numbers: `round`, `floor`, `ceil`, `min`/`max`, `add`, `subtract`,
//! `multiply`, `divide` (JavaScript's rounding).

use super::super::values::{to_num, Num};
use super::lists::num_op;
use super::{invalid, is_list, items, split_kwargs};
use minijinja::value::{Rest, ValueKind, ValueOrKwargs};
use minijinja::{Error, State, Value};

/// JavaScript's `Math.round`: halves round up (towards +∞).
pub(crate) fn js_round(x: f64) -> f64 {
    let fl = x.floor();
    if x - fl >= 0.5 {
        fl + 1.0
    } else {
        fl
    }
}

/// `round(decimals=0)`: the peer's version (replaces minijinja's): halves
/// round up like JavaScript's `Math.round` (2.5 → 3, -2.5 → -2), and the
/// result is an integer when `decimals` is 0 (minijinja returns a float).
/// The value may be a numeric text.
pub(super) fn round(value: &Value, decimals: Option<i64>) -> Result<Value, Error> {
    let n = to_num(value, "round")?;
    let d = decimals.unwrap_or(0);
    if let (Num::Int(_), true) = (n, d >= 0) {
        return Ok(n.into_value());
    }
    let m = 10f64.powi(d.clamp(-308, 308) as i32);
    let r = js_round(n.as_f64() * m) / m;
    Ok(if d <= 0 {
        Num::from_f64_int(r)
    } else {
        Num::Float(r)
    }
    .into_value())
}

/// `floor`: largest integer not above the value.
pub(super) fn floor(value: &Value) -> Result<Value, Error> {
    Ok(match to_num(value, "floor")? {
        Num::Int(i) => Num::Int(i),
        Num::Float(f) => Num::from_f64_int(f.floor()),
    }
    .into_value())
}

/// `ceil`: smallest integer not below the value.
pub(super) fn ceil(value: &Value) -> Result<Value, Error> {
    Ok(match to_num(value, "ceil")? {
        Num::Int(i) => Num::Int(i),
        Num::Float(f) => Num::from_f64_int(f.ceil()),
    }
    .into_value())
}

pub(super) fn min_max(
    state: &State,
    value: Value,
    args: Rest<ValueOrKwargs>,
    want_max: bool,
) -> Result<Value, Error> {
    let name = if want_max { "max" } else { "min" };
    let (pos, kw) = split_kwargs(args.into_values());
    if let Some(kw) = kw {
        if !pos.is_empty() {
            return Err(invalid(format!(
                "{name}: positional and keyword arguments cannot be mixed"
            )));
        }
        return if want_max {
            minijinja::filters::max(state, value, kw)
        } else {
            minijinja::filters::min(state, value, kw)
        };
    }
    let all: Vec<Value> = if is_list(&value) && pos.is_empty() {
        items(&value)?
    } else {
        std::iter::once(value).chain(pos).collect()
    };
    if all.is_empty() {
        return Ok(Value::from(()));
    }
    let nums: Result<Vec<Num>, Error> = all.iter().map(|v| to_num(v, name)).collect();
    match nums {
        Ok(nums) => {
            let mut best = nums[0];
            for n in &nums[1..] {
                let better = if want_max {
                    n.as_f64() > best.as_f64()
                } else {
                    n.as_f64() < best.as_f64()
                };
                if better {
                    best = *n;
                }
            }
            Ok(best.into_value())
        }
        Err(e) => {
            if all.iter().all(|v| v.kind() == ValueKind::String) {
                let pick = if want_max {
                    all.iter().max()
                } else {
                    all.iter().min()
                };
                Ok(pick.cloned().unwrap_or(Value::from(())))
            } else {
                Err(e)
            }
        }
    }
}

/// `min(x, ...)`: the peer's version: the smallest number of a list, or of
/// the value and the arguments; numeric texts count as numbers, a list of
/// words gives the alphabetically first; `[]` gives none. With keyword
/// arguments (`attribute`, `case_sensitive`) minijinja's `min` runs instead.
pub(super) fn min(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    min_max(state, value, args, false)
}

/// `max(x, ...)`: like `min`, the largest.
pub(super) fn max(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    min_max(state, value, args, true)
}

/// `add(n)`: value + n (numbers; numeric texts are converted).
pub(super) fn add(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "add")?,
        to_num(n, "add")?,
        i64::checked_add,
        |a, b| a + b,
    )
    .into_value())
}

/// `subtract(n)`: value − n.
pub(super) fn subtract(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "subtract")?,
        to_num(n, "subtract")?,
        i64::checked_sub,
        |a, b| a - b,
    )
    .into_value())
}

/// `multiply(n)`: value × n.
pub(super) fn multiply(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "multiply")?,
        to_num(n, "multiply")?,
        i64::checked_mul,
        |a, b| a * b,
    )
    .into_value())
}

/// `divide(n)`: value ÷ n; an integer when both are integers and it divides
/// evenly; dividing by zero is an error (the peer gave `Infinity`).
pub(super) fn divide(value: &Value, n: &Value) -> Result<Value, Error> {
    let a = to_num(value, "divide")?;
    let b = to_num(n, "divide")?;
    if b.as_f64() == 0.0 {
        return Err(invalid("divide: division by zero"));
    }
    Ok(match (a, b) {
        (Num::Int(x), Num::Int(y)) if x.checked_rem(y) == Some(0) => Num::Int(x / y),
        _ => Num::Float(a.as_f64() / b.as_f64()),
    }
    .into_value())
}
