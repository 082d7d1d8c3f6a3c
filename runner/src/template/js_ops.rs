//! Arithmetic and truthiness as JavaScript has them, for the peer's
//! templates (Nunjucks compiles `a + b` to JavaScript's `+`):
//!
//! - `+` joins text when either side is text (`'7' + 3` is `'73'`, `'#' + 3`
//!   is `'#3'`); two lists still concatenate, as in Jinja; otherwise it adds
//!   numbers (`none + 1` is 1, `true + 1` is 2);
//! - `-`, `*`, `/`, `//`, `%`, `**` read both sides as numbers (`'7' - 2` is 5);
//!   what is not a number gives NaN, division by zero Infinity;
//! - only `false`, `0`, NaN, `''`, none and undefined are false: `[]` and `{}`
//!   are true.
//!
//! [`super::js_rewrite`] turns the template's operators into calls of the
//! functions registered here.

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, Value};

use super::values::{js_join, list, text, to_json, Num};

/// `(operator, function)` for each rewritten binary operator.
pub(crate) const BINARY: &[(&str, &str)] = &[
    ("+", "__js_add"),
    ("-", "__js_sub"),
    ("*", "__js_mul"),
    ("/", "__js_div"),
    ("//", "__js_floordiv"),
    ("%", "__js_rem"),
    ("**", "__js_pow"),
];

/// `(operator, function)` for each rewritten comparison; `===` and `!==`
/// are strict, `==` and `!=` JavaScript's loose equality.
pub(crate) const COMPARE: &[(&str, &str)] = &[
    ("===", "__js_seq"),
    ("!==", "__js_sne"),
    ("==", "__js_eq"),
    ("!=", "__js_ne"),
    ("<", "__js_lt"),
    ("<=", "__js_le"),
    (">", "__js_gt"),
    (">=", "__js_ge"),
];

/// The function `~` becomes.
pub(crate) const CONCAT: &str = "__js_cat";

/// The function unary minus becomes.
pub(crate) const NEG: &str = "__js_neg";

/// The function a boolean context is wrapped in.
pub(crate) const TRUTHY: &str = "__js_truthy";

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_function("__js_add", add);
    env.add_function("__js_sub", |a: Value, b: Value| arith(&a, &b, Op::Sub));
    env.add_function("__js_mul", mul);
    env.add_function("__js_div", |a: Value, b: Value| arith(&a, &b, Op::Div));
    env.add_function("__js_floordiv", |a: Value, b: Value| {
        arith(&a, &b, Op::FloorDiv)
    });
    env.add_function("__js_rem", |a: Value, b: Value| arith(&a, &b, Op::Rem));
    env.add_function("__js_pow", |a: Value, b: Value| arith(&a, &b, Op::Pow));
    env.add_function(TRUTHY, |v: Value| truthy(&v));
    env.add_function("__js_seq", |a: Value, b: Value| strict_eq(&a, &b));
    env.add_function("__js_sne", |a: Value, b: Value| !strict_eq(&a, &b));
    env.add_function("__js_eq", |a: Value, b: Value| loose_eq(&a, &b));
    env.add_function("__js_ne", |a: Value, b: Value| !loose_eq(&a, &b));
    env.add_function("__js_lt", |a: Value, b: Value| {
        order(&a, &b).is_some_and(|o| o.is_lt())
    });
    env.add_function("__js_le", |a: Value, b: Value| {
        order(&a, &b).is_some_and(|o| o.is_le())
    });
    env.add_function("__js_gt", |a: Value, b: Value| {
        order(&a, &b).is_some_and(|o| o.is_gt())
    });
    env.add_function("__js_ge", |a: Value, b: Value| {
        order(&a, &b).is_some_and(|o| o.is_ge())
    });
    env.add_function(CONCAT, |a: Value, b: Value| -> Result<Value, Error> {
        let (x, y) = (js_string(&a), js_string(&b));
        super::values::room_for("~", x.len() + y.len())?;
        Ok(Value::from(x + &y))
    });
    env.add_function(NEG, |v: Value| arith(&Value::from(0), &v, Op::Sub));
}

/// JavaScript's `Boolean(v)`.
pub(crate) fn truthy(v: &Value) -> bool {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => false,
        ValueKind::Bool => v.is_true(),
        ValueKind::Number => match to_number(v) {
            Num::Int(i) => i != 0,
            Num::Float(f) => f != 0.0 && !f.is_nan(),
        },
        ValueKind::String | ValueKind::Bytes => v.is_true(),
        _ => true,
    }
}

fn nullish(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Undefined | ValueKind::None)
}

fn is_text(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::String | ValueKind::Bytes)
}

/// Lists and mappings: JavaScript's objects.
fn is_object(v: &Value) -> bool {
    !nullish(v) && !is_text(v) && !matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
}

fn same_number(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (x, y) => x.as_f64() == y.as_f64(),
    }
}

/// `a === b`. Lists and mappings are equal when their contents are (in
/// JavaScript only the same object is).
pub(crate) fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a.kind(), b.kind()) {
        (ValueKind::Number, ValueKind::Number) => same_number(to_number(a), to_number(b)),
        (x, y) if x != y => false,
        _ => a == b,
    }
}

/// `a == b`: null and undefined equal each other only; a boolean is a
/// number; text and a number compare as numbers; a list or mapping meets a
/// text or number as its text.
pub(crate) fn loose_eq(a: &Value, b: &Value) -> bool {
    if nullish(a) || nullish(b) {
        return nullish(a) && nullish(b);
    }
    if a.kind() == ValueKind::Bool || b.kind() == ValueKind::Bool {
        return same_number(to_number(a), to_number(b));
    }
    match (is_object(a), is_object(b)) {
        (true, true) => a == b,
        (true, false) => loose_eq(&Value::from(js_string(a)), b),
        (false, true) => loose_eq(a, &Value::from(js_string(b))),
        (false, false) if is_text(a) && is_text(b) => a.as_str() == b.as_str(),
        (false, false) => same_number(to_number(a), to_number(b)),
    }
}

/// How `<`, `<=`, `>`, `>=` order two values: texts by their characters,
/// anything else as numbers (`'10' < 9` is false); `None` when either is
/// NaN, which makes every comparison false.
pub(crate) fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    let prim = |v: &Value| {
        if is_object(v) {
            Value::from(js_string(v))
        } else {
            v.clone()
        }
    };
    let (a, b) = (prim(a), prim(b));
    if is_text(&a) && is_text(&b) {
        let (x, y) = (
            a.as_str().unwrap_or_default(),
            b.as_str().unwrap_or_default(),
        );
        // JavaScript orders texts by UTF-16 code units.
        return Some(x.encode_utf16().cmp(y.encode_utf16()));
    }
    match (to_number(&a), to_number(&b)) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (x, y) => x.as_f64().partial_cmp(&y.as_f64()),
    }
}

/// `Number(v)`; NaN for what is not a number.
fn to_number(v: &Value) -> Num {
    match v.kind() {
        ValueKind::Number => {
            if v.is_integer() {
                if let Ok(i) = i64::try_from(v.clone()) {
                    return Num::Int(i);
                }
            }
            Num::Float(f64::try_from(v.clone()).unwrap_or(f64::NAN))
        }
        ValueKind::Bool => Num::Int(i64::from(v.is_true())),
        ValueKind::None => Num::Int(0),
        ValueKind::Undefined => Num::Float(f64::NAN),
        ValueKind::String | ValueKind::Seq | ValueKind::Iterable => to_json(v)
            .ok()
            .and_then(|j| marktoflow_steps::core::js::number(&j))
            .map_or(Num::Float(f64::NAN), Num::from_f64_int),
        _ => Num::Float(f64::NAN),
    }
}

/// `String(v)` as `+` joins it.
pub(crate) fn js_string(v: &Value) -> String {
    match v.kind() {
        ValueKind::Undefined => "undefined".into(),
        ValueKind::None => "null".into(),
        ValueKind::Seq | ValueKind::Iterable => js_join(v),
        _ => text(v),
    }
}

fn is_list(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

fn add(a: Value, b: Value) -> Result<Value, Error> {
    if is_list(&a) && is_list(&b) {
        let cap = super::values::MAX_LIST_ITEMS;
        // Counted before anything is copied (an iterable without a length
        // is counted up to one past the cap).
        let len = |v: &Value| -> Result<usize, Error> {
            Ok(match v.len() {
                Some(n) => n,
                None => v.try_iter()?.take(cap + 1).count(),
            })
        };
        super::values::room_for_items("+", len(&a)?.saturating_add(len(&b)?))?;
        let items: Vec<Value> = a.try_iter()?.chain(b.try_iter()?).collect();
        return Ok(list(items));
    }
    // Anything but a number, boolean or nothing is text to JavaScript's `+`.
    let numeric = |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Number | ValueKind::Bool | ValueKind::None | ValueKind::Undefined
        )
    };
    if !numeric(&a) || !numeric(&b) {
        let (x, y) = (js_string(&a), js_string(&b));
        super::values::room_for("+", x.len() + y.len())?;
        return Ok(Value::from(x + &y));
    }
    arith(&a, &b, Op::Add)
}

/// `*`: numbers multiplied; text that is not a number times a whole number
/// is repeated, as in Jinja (JavaScript would give NaN).
fn mul(a: Value, b: Value) -> Result<Value, Error> {
    let words = |v: &Value| {
        v.kind() == ValueKind::String && matches!(to_number(v), Num::Float(f) if f.is_nan())
    };
    let count = |v: &Value| match (v.kind(), to_number(v)) {
        (ValueKind::Number, Num::Int(n)) => Some(usize::try_from(n).unwrap_or(0)),
        _ => None,
    };
    let repeat = match (words(&a), words(&b)) {
        (true, false) => count(&b).map(|n| (a.as_str().unwrap_or_default(), n)),
        (false, true) => count(&a).map(|n| (b.as_str().unwrap_or_default(), n)),
        _ => None,
    };
    if let Some((s, n)) = repeat {
        super::values::room_for("*", s.len().saturating_mul(n))?;
        return Ok(Value::from(s.repeat(n)));
    }
    arith(&a, &b, Op::Mul)
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
}

fn arith(a: &Value, b: &Value, op: Op) -> Result<Value, Error> {
    let (x, y) = (to_number(a), to_number(b));
    // Integers stay integers while the result is exact.
    if let (Num::Int(i), Num::Int(j)) = (x, y) {
        let exact = match op {
            Op::Add => i.checked_add(j),
            Op::Sub => i.checked_sub(j),
            Op::Mul => i.checked_mul(j),
            Op::Rem if j != 0 => i.checked_rem(j),
            Op::Pow => u32::try_from(j).ok().and_then(|j| i.checked_pow(j)),
            _ => None,
        };
        if let Some(n) = exact {
            return Ok(Value::from(n));
        }
    }
    let (x, y) = (x.as_f64(), y.as_f64());
    let n = match op {
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        Op::Div => x / y,
        Op::FloorDiv => (x / y).floor(),
        // Rust's `%` on floats is JavaScript's: the sign of the dividend.
        Op::Rem => x % y,
        Op::Pow => x.powf(y),
    };
    Ok(Num::from_f64_int(n).into_value())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(j: serde_json::Value) -> Value {
        super::super::values::from_json(&j)
    }

    fn show(r: Result<Value, Error>) -> String {
        js_string(&r.unwrap())
    }

    #[test]
    fn plus_joins_text_and_adds_numbers() {
        use serde_json::json;
        assert_eq!(show(add(v(json!("7")), v(json!(3)))), "73");
        assert_eq!(show(add(v(json!(3)), v(json!("7")))), "37");
        assert_eq!(show(add(v(json!("#")), v(json!(3)))), "#3");
        assert_eq!(show(add(v(json!("a")), Value::UNDEFINED)), "aundefined");
        assert_eq!(show(add(v(json!("a")), v(json!(null)))), "anull");
        assert_eq!(show(add(v(json!("n=")), v(json!(2.5)))), "n=2.5");
        assert_eq!(show(add(v(json!("t:")), v(json!(true)))), "t:true");
        assert_eq!(show(add(v(json!(null)), v(json!(1)))), "1");
        assert_eq!(show(add(v(json!(true)), v(json!(1)))), "2");
        assert_eq!(show(add(Value::UNDEFINED, v(json!(1)))), "NaN");
        assert_eq!(
            show(add(v(json!(0.1)), v(json!(0.2)))),
            "0.30000000000000004"
        );
        assert_eq!(show(add(v(json!([1])), v(json!([2, 3])))), "1,2,3");
        assert_eq!(add(v(json!([1])), v(json!([2]))).unwrap().len(), Some(2));
        assert_eq!(show(add(v(json!([1, 2])), v(json!("x")))), "1,2x");
        assert_eq!(
            show(add(v(json!(i64::MAX)), v(json!(1)))),
            "9223372036854776000"
        );
    }

    #[test]
    fn other_operators_read_numbers() {
        use serde_json::json;
        let op = |a, b, op| show(arith(&v(a), &v(b), op));
        assert_eq!(op(json!("7"), json!(2), Op::Sub), "5");
        assert_eq!(op(json!("7"), json!(2), Op::Mul), "14");
        assert_eq!(op(json!(" 7 "), json!("2"), Op::Mul), "14");
        assert_eq!(op(json!("a"), json!(2), Op::Mul), "NaN");
        let m = |a, b| show(mul(v(a), v(b)));
        assert_eq!(m(json!("ab"), json!(3)), "ababab");
        assert_eq!(m(json!(2), json!("-")), "--");
        assert_eq!(m(json!("7"), json!(2)), "14");
        assert_eq!(m(json!("ab"), json!(-1)), "");
        assert_eq!(m(json!("ab"), json!(1.5)), "NaN");
        assert!(mul(v(json!("ab")), v(json!(1u64 << 40))).is_err());
        assert_eq!(op(json!("7"), json!(2), Op::Div), "3.5");
        assert_eq!(op(json!(6), json!(3), Op::Div), "2");
        assert_eq!(op(json!(1), json!(0), Op::Div), "Infinity");
        assert_eq!(op(json!(7), json!(2), Op::FloorDiv), "3");
        assert_eq!(op(json!(-7), json!(2), Op::FloorDiv), "-4");
        assert_eq!(op(json!(-7), json!(3), Op::Rem), "-1");
        assert_eq!(op(json!("7"), json!(4), Op::Rem), "3");
        assert_eq!(op(json!(7), json!(0), Op::Rem), "NaN");
        assert_eq!(op(json!("3"), json!(2), Op::Pow), "9");
        assert_eq!(op(json!(2), json!(-1), Op::Pow), "0.5");
        assert_eq!(op(json!([]), json!(1), Op::Sub), "-1");
        assert_eq!(op(json!({}), json!(1), Op::Sub), "NaN");
        assert_eq!(op(json!(null), json!(2), Op::Sub), "-2");
    }

    #[test]
    fn equality_and_order() {
        use serde_json::json;
        let eq = |a, b| loose_eq(&v(a), &v(b));
        assert!(eq(json!("5"), json!(5)));
        assert!(eq(json!(0), json!(false)));
        assert!(eq(json!(""), json!(0)));
        assert!(eq(json!([1]), json!(1)));
        assert!(eq(json!([1, 2]), json!("1,2")));
        assert!(eq(json!(null), json!(null)));
        assert!(loose_eq(&Value::UNDEFINED, &v(json!(null))));
        assert!(!eq(json!(null), json!(0)));
        assert!(!eq(json!("a"), json!(0)));
        assert!(eq(json!(1), json!(1.0)));
        assert!(eq(json!({"a": 1}), json!({"a": 1})));
        let seq = |a, b| strict_eq(&v(a), &v(b));
        assert!(!seq(json!("5"), json!(5)));
        assert!(seq(json!(1), json!(1.0)));
        assert!(!strict_eq(&Value::UNDEFINED, &v(json!(null))));
        assert!(seq(json!("a"), json!("a")));
        let lt = |a, b| order(&v(a), &v(b)).is_some_and(|o| o.is_lt());
        assert!(lt(json!("10"), json!("9")));
        assert!(!lt(json!("10"), json!(9)));
        assert!(lt(json!(null), json!(1)));
        assert!(order(&Value::UNDEFINED, &v(json!(1))).is_none());
        assert!(order(&v(json!("a")), &v(json!(1))).is_none());
        assert!(lt(json!(true), json!(2)));
    }

    #[test]
    fn truthiness() {
        use serde_json::json;
        for t in [
            json!([]),
            json!({}),
            json!("0"),
            json!("false"),
            json!(-1),
            json!(0.5),
        ] {
            assert!(truthy(&v(t.clone())), "{t}");
        }
        for f in [json!(null), json!(""), json!(0), json!(0.0), json!(false)] {
            assert!(!truthy(&v(f.clone())), "{f}");
        }
        assert!(!truthy(&Value::UNDEFINED));
        assert!(!truthy(&Value::from(f64::NAN)));
    }
}
