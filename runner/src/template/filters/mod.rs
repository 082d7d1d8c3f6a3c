//! Filters the peer's workflows use (Nunjucks names, `packages/core/src/filters/*.ts`
//! in the peer), added on top of minijinja's builtins.
//!
//! Where a name already exists in minijinja (`split`, `round`, `sum`, `min`,
//! `max`, `unique`, `count`, `dictsort`) the peer's semantics win; each such
//! filter says how it differs. Where the peer silently produced `NaN`,
//! `Invalid Date` or `[object Object]`, these filters raise an error instead.

mod checks;
mod lists;
mod math;
mod objects;
mod patterns;
mod strings;

use checks::{and, is_array, is_empty, is_null, is_number, is_object, is_string, not, or, ternary};
use lists::{count, flatten, nth, parse_json, slice, sum, to_json_filter, unique};
pub(crate) use math::js_round;
use math::{add, ceil, divide, floor, max, min, multiply, round, subtract};
use objects::{dictsort, entries, keys, merge, omit, path, pick, values};
pub(crate) use patterns::{js_regex, replace_js};
use patterns::{match_, not_match, regex_replace};
use strings::{
    capitalize, contains, lower, prefix, slugify, split, striptags, substring, suffix, title, trim,
    truncate, upper, wordcount,
};

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

use super::dates;
pub(crate) use super::values::map_pairs;
use super::values::text;

/// Names of the filters added here (for "did you mean" hints).
pub(crate) const CUSTOM_FILTERS: &[&str] = &[
    "split",
    "slugify",
    "prefix",
    "suffix",
    "truncate",
    "substring",
    "contains",
    "match",
    "notMatch",
    "not_match",
    "regexReplace",
    "regex_replace",
    "path",
    "keys",
    "values",
    "entries",
    "pick",
    "omit",
    "merge",
    "nth",
    "count",
    "sum",
    "unique",
    "flatten",
    "format_date",
    "add_days",
    "subtract_days",
    "diff_days",
    "parse_json",
    "to_json",
    "is_array",
    "is_object",
    "is_string",
    "is_number",
    "is_empty",
    "is_null",
    "ternary",
    "and",
    "or",
    "not",
    "round",
    "floor",
    "ceil",
    "min",
    "max",
    "add",
    "subtract",
    "multiply",
    "divide",
    "wordcount",
    "striptags",
    "dictsort",
];

/// minijinja's own builtin filters (kept unless listed above).
pub(crate) const BUILTIN_FILTERS: &[&str] = &[
    "safe",
    "escape",
    "e",
    "lower",
    "upper",
    "title",
    "capitalize",
    "length",
    "items",
    "reverse",
    "trim",
    "join",
    "lines",
    "default",
    "d",
    "abs",
    "int",
    "float",
    "attr",
    "first",
    "last",
    "sort",
    "list",
    "string",
    "bool",
    "batch",
    "slice",
    "indent",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "map",
    "groupby",
    "chain",
    "zip",
    "pprint",
    "format",
    "tojson",
    "urlencode",
];

pub(crate) fn register(env: &mut Environment<'static>) {
    // strings (the case and trim filters replace minijinja's, which print
    // a list and work on that)
    env.add_filter("upper", upper);
    env.add_filter("lower", lower);
    env.add_filter("title", title);
    env.add_filter("capitalize", capitalize);
    env.add_filter("trim", trim);
    env.add_filter("split", split);
    env.add_filter("slugify", slugify);
    env.add_filter("prefix", prefix);
    env.add_filter("suffix", suffix);
    env.add_filter("truncate", truncate);
    env.add_filter("substring", substring);
    env.add_filter("contains", contains);
    env.add_filter("wordcount", wordcount);
    env.add_filter("striptags", striptags);
    // regex
    env.add_filter("match", match_);
    env.add_filter("notMatch", not_match);
    env.add_filter("not_match", not_match);
    env.add_filter("regexReplace", regex_replace);
    env.add_filter("regex_replace", regex_replace);
    // objects
    env.add_filter("path", path);
    env.add_filter("keys", keys);
    env.add_filter("values", values);
    env.add_filter("entries", entries);
    env.add_filter("pick", pick);
    env.add_filter("omit", omit);
    env.add_filter("merge", merge);
    env.add_filter("dictsort", dictsort);
    // arrays
    env.add_filter("nth", nth);
    env.add_filter("count", count);
    env.add_filter("sum", sum);
    env.add_filter("unique", unique);
    env.add_filter("flatten", flatten);
    env.add_filter("slice", slice);
    // dates
    env.add_filter("format_date", dates::format_date);
    env.add_filter("add_days", dates::add_days);
    env.add_filter("subtract_days", dates::subtract_days);
    env.add_filter("diff_days", dates::diff_days);
    // json
    env.add_filter("parse_json", parse_json);
    env.add_filter("to_json", to_json_filter);
    // type checks
    env.add_filter("is_array", is_array);
    env.add_filter("is_object", is_object);
    env.add_filter("is_string", is_string);
    env.add_filter("is_number", is_number);
    env.add_filter("is_empty", is_empty);
    env.add_filter("is_null", is_null);
    // logic
    env.add_filter("ternary", ternary);
    env.add_filter("and", and);
    env.add_filter("or", or);
    env.add_filter("not", not);
    // math
    env.add_filter("round", round);
    env.add_filter("floor", floor);
    env.add_filter("ceil", ceil);
    env.add_filter("min", min);
    env.add_filter("max", max);
    env.add_filter("add", add);
    env.add_filter("subtract", subtract);
    env.add_filter("multiply", multiply);
    env.add_filter("divide", divide);
}

pub(super) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

pub(super) fn is_list(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

pub(super) fn items(v: &Value) -> Result<Vec<Value>, Error> {
    v.try_iter().map(|it| it.collect())
}

/// Splits trailing keyword arguments off a `Rest` list.
pub(super) fn split_kwargs(mut args: Vec<Value>) -> (Vec<Value>, Option<Kwargs>) {
    if args.last().is_some_and(Value::is_kwargs) {
        let kw = args.pop().and_then(|v| Kwargs::try_from(v).ok());
        (args, kw)
    } else {
        (args, None)
    }
}

/// Arguments given either one by one or as lists (`pick('a', 'b')` or
/// `pick(['a', 'b'])`), as text.
pub(super) fn names(args: &[Value]) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for a in args {
        if is_list(a) {
            out.extend(items(a)?.iter().map(text));
        } else {
            out.push(text(a));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::Templates;
    use serde_json::{json, Value as Json};

    fn ctx() -> minijinja::Value {
        let vars = json!({
            "s": "Hello, World",
            "nums": [3, 1, 2, 3],
            "strs": ["3", "10", "x"],
            "words": ["pear", "Apple", "fig"],
            "obj": {"b": 2, "a": 1, "c": 3},
            "items": [{"name": "a", "price": 2}, {"name": "b", "price": 3.5}, {"name": "c"}],
            "nested": [[1, 2], [3, [4]], 5],
            "html": "<p>Hello <b>big</b>\n\n\n\n world</p><!-- note -->",
        });
        Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        )
    }

    /// Evaluates a single `{{ expr }}` to JSON.
    fn ev(expr: &str) -> Json {
        Templates::new()
            .eval_expr(expr, &ctx())
            .unwrap_or_else(|e| panic!("{expr}: {e:?}"))
    }

    fn ev_err(expr: &str) -> String {
        Templates::new()
            .eval_expr(expr, &ctx())
            .expect_err(expr)
            .message
    }

    #[test]
    fn string_filters() {
        assert_eq!(ev("'a,b,c' | split"), json!(["a", "b", "c"]));
        assert_eq!(ev("'a/b' | split('/') | first"), json!("a"));
        assert_eq!(ev("'abc' | split('')"), json!(["a", "b", "c"]));
        assert_eq!(ev("'a-b-c' | split('-', 1)"), json!(["a", "b-c"]));
        assert_eq!(ev("missing | split"), json!([]));
        assert_eq!(ev("('a,b' | split).length"), json!(2));
        assert_eq!(
            ev("'  Hello, World! 2024 ' | slugify"),
            json!("hello-world-2024")
        );
        assert_eq!(ev("'x' | prefix('pre-')"), json!("pre-x"));
        assert_eq!(ev("'x' | suffix('.md')"), json!("x.md"));
        assert_eq!(ev("s | truncate(5)"), json!("Hello..."));
        assert_eq!(ev("s | truncate(5, '…')"), json!("Hello…"));
        assert_eq!(ev("s | truncate(50)"), json!("Hello, World"));
        assert_eq!(ev("'héllo' | truncate(2, '')"), json!("hé"));
        assert_eq!(ev("s | substring(7)"), json!("World"));
        assert_eq!(ev("s | substring(0, 5)"), json!("Hello"));
        assert_eq!(ev("s | substring(5, 0)"), json!("Hello"));
        assert_eq!(ev("s | substring(-3, 2)"), json!("He"));
        assert_eq!(ev("s | contains('World')"), json!(true));
        assert_eq!(ev("nums | contains(2)"), json!(true));
        assert_eq!(ev("nums | contains(9)"), json!(false));
        assert_eq!(ev("obj | contains('a')"), json!(true));
        assert_eq!(ev("5 | contains(5)"), json!(false));
        assert_eq!(ev("'one two, three!' | wordcount"), json!(3));
        assert_eq!(ev("'' | wordcount"), json!(0));
        assert_eq!(ev("html | striptags"), json!("Hello big world"));
        assert_eq!(ev("html | striptags(true)"), json!("Hello big\n\nworld"));
    }

    #[test]
    fn regex_filters() {
        assert_eq!(ev(r"'order-1234' | match('\\d+')"), json!("1234"));
        assert_eq!(ev(r"'order-1234' | match('(\\w+)-(\\d+)')"), json!("order"));
        assert_eq!(
            ev(r"'order-1234' | match('(\\w+)-(\\d+)', 2)"),
            json!("1234")
        );
        assert_eq!(
            ev(r"'order-1234' | match('(?<kind>\\w+)-(?<id>\\d+)')"),
            json!({"kind": "order", "id": "1234"})
        );
        assert_eq!(
            ev(r"'order-1234' | match('(?<kind>\\w+)-(?<id>\\d+)', 'id')"),
            json!("1234")
        );
        assert_eq!(ev("'abc' | match('x')"), json!(null));
        assert_eq!(ev("'ABC' | match('/b/i')"), json!("B"));
        assert_eq!(
            ev(r"'a1b22c333' | match('/\\d+/g')"),
            json!(["1", "22", "333"])
        );
        assert_eq!(ev("'abc' | notMatch('x')"), json!(true));
        assert_eq!(ev("'abc' | not_match('b')"), json!(false));
        assert_eq!(ev("'a-b-c' | regexReplace('-', '+')"), json!("a+b-c"));
        assert_eq!(ev("'a-b-c' | regexReplace('-', '+', 'g')"), json!("a+b+c"));
        assert_eq!(ev("'a-B-b' | regexReplace('/b/gi', 'x')"), json!("a-x-x"));
        assert_eq!(
            ev(r"'John Smith' | regexReplace('(\\w+) (\\w+)', '$2, $1')"),
            json!("Smith, John")
        );
        assert_eq!(
            ev(r"'John Smith' | regexReplace('(?<f>\\w+) (?<l>\\w+)', '$<l> $<f> ($&) $$')"),
            json!("Smith John (John Smith) $")
        );
        assert_eq!(ev("'x.y' | regex_replace('/\\\\./g', '_')"), json!("x_y"));
        // A replacement that copies the text around every match grows
        // with the square of its size: refused before it is built.
        let big = "('ab'.repeat(2000000) | regex_replace('/./g', '$`$&$`'))";
        assert!(
            ev_err(big).contains("over the 16 MiB one template text may hold"),
            "{}",
            ev_err(big)
        );
        assert_eq!(
            ev("'abc' | regex_replace('/b/g', '[$`|$&|$\\']')"),
            json!("a[a|b|c]c")
        );
        assert!(ev_err("'x' | match('(')").contains("invalid regular expression"));
        // like the peer, an unknown flag makes `/x/q` a plain pattern
        assert_eq!(ev("'x' | match('/x/q')"), json!(null));
        assert!(
            ev_err("'x' | regexReplace('x', 'y', 'q')").contains("unknown regular expression flag")
        );
    }

    #[test]
    fn object_filters() {
        assert_eq!(ev("obj | keys"), json!(["b", "a", "c"]));
        assert_eq!(ev("obj | values"), json!([2, 1, 3]));
        assert_eq!(ev("obj | entries"), json!([["b", 2], ["a", 1], ["c", 3]]));
        assert_eq!(ev("'x' | keys"), json!([]));
        assert_eq!(ev("['p', 'q'] | keys"), json!([0, 1]));
        assert_eq!(ev("obj | pick('a', 'c')"), json!({"a": 1, "c": 3}));
        assert_eq!(ev("obj | pick(['c', 'zz'])"), json!({"c": 3}));
        assert_eq!(ev("obj | omit('a')"), json!({"b": 2, "c": 3}));
        assert_eq!(
            ev("obj | merge({'a': 10, 'd': 4}, 5)"),
            json!({"b": 2, "a": 10, "c": 3, "d": 4})
        );
        assert_eq!(ev("5 | merge({'a': 1})"), json!({}));
        assert_eq!(ev("items | path('1.price')"), json!(3.5));
        assert_eq!(ev("items | path('9.price')"), json!(null));
        assert_eq!(ev("obj | dictsort"), json!([["a", 1], ["b", 2], ["c", 3]]));
        assert_eq!(
            ev("obj | dictsort(false, 'value')"),
            json!([["a", 1], ["b", 2], ["c", 3]])
        );
        assert_eq!(
            ev("obj | dictsort(by='value', reverse=true)"),
            json!([["c", 3], ["b", 2], ["a", 1]])
        );
    }

    #[test]
    fn array_filters() {
        assert_eq!(ev("nums | nth(1)"), json!(1));
        assert_eq!(ev("nums | nth(-1)"), json!(3));
        assert_eq!(ev("nums | nth(10)"), json!(null));
        assert_eq!(ev("'abc' | nth(0)"), json!("abc"));
        assert_eq!(ev("nums | count"), json!(4));
        assert_eq!(ev("'héllo' | count"), json!(5));
        assert_eq!(ev("obj | count"), json!(3));
        assert_eq!(ev("{'total': 42, 'x': 1} | count"), json!(42));
        assert_eq!(ev("5 | count"), json!(0));
        assert_eq!(ev("nums | sum"), json!(9));
        assert_eq!(ev("['1', 2.5] | sum"), json!(3.5));
        assert_eq!(ev("items | sum(attribute='price')"), json!(5.5));
        assert_eq!(ev("items | sum('price', 10)"), json!(15.5));
        assert_eq!(ev("'x' | sum"), json!(0));
        assert!(ev_err("strs | sum").contains("sum expects a number"));
        assert_eq!(ev("nums | unique"), json!([3, 1, 2]));
        assert_eq!(ev("['a', 'A', 'a'] | unique"), json!(["a", "A"]));
        assert_eq!(
            ev("['a', 'A', 'a'] | unique(case_sensitive=false)"),
            json!(["a"])
        );
        assert_eq!(
            ev("[[1], [1], {'a': 1}, {'a': 1}] | unique"),
            json!([[1], {"a": 1}])
        );
        assert_eq!(ev("'x' | unique"), json!(["x"]));
        assert_eq!(ev("nested | flatten"), json!([1, 2, 3, [4], 5]));
        assert_eq!(ev("7 | flatten"), json!([7]));
    }

    #[test]
    fn date_filters() {
        assert_eq!(ev("'2024-01-15' | format_date"), json!("2024-01-15"));
        assert_eq!(
            ev("'2024-03-05T07:08:09' | format_date('DD/MM/YYYY HH:mm:ss')"),
            json!("05/03/2024 07:08:09")
        );
        assert_eq!(
            ev("'2024-03-05T07:08' | format_date('YYYY YYYY [MM]')"),
            json!("2024 2024 [03]")
        );
        let ms = 1_705_314_600_000i64;
        let local = chrono::TimeZone::timestamp_millis_opt(&chrono::Local, ms).unwrap();
        assert_eq!(
            ev(&format!("{ms} | format_date('YYYY-MM-DD HH:mm')")),
            json!(local.format("%Y-%m-%d %H:%M").to_string())
        );
        assert_eq!(
            ev("'2024-01-31' | add_days(1) | format_date"),
            json!("2024-02-01")
        );
        assert_eq!(
            ev("'2024-03-01' | subtract_days(1) | format_date"),
            json!("2024-02-29")
        );
        assert_eq!(ev("'2024-01-10T12:00' | diff_days('2024-01-01')"), json!(9));
        assert_eq!(ev("'2024-01-01' | diff_days('2024-01-10')"), json!(-9));
        let clock = std::sync::Arc::new(marktoflow_steps::core::time::FixedClock::at(
            1_705_314_600_000,
        ));
        let v = Templates::new()
            .eval_expr(
                "now() | add_days(2) | diff_days(now())",
                &Templates::clocked(ctx(), clock),
            )
            .unwrap();
        assert_eq!(v, json!(2));
        assert!(ev_err("'soon' | format_date").contains("cannot read \"soon\" as a date"));
        assert!(ev_err("[] | add_days(1)").contains("expected a date"));
    }

    #[test]
    fn json_filters() {
        assert_eq!(
            ev(r#"'{"a": [1, 2.5]}' | parse_json"#),
            json!({"a": [1, 2.5]})
        );
        assert_eq!(ev("'not json' | parse_json"), json!(null));
        assert_eq!(ev("obj | parse_json"), json!({"b": 2, "a": 1, "c": 3}));
        assert_eq!(ev("obj | to_json"), json!(r#"{"b":2,"a":1,"c":3}"#));
        assert_eq!(ev("'<&>' | to_json"), json!(r#""<&>""#));
        assert_eq!(ev("{'a': 1} | to_json(true)"), json!("{\n  \"a\": 1\n}"));
        assert_eq!(ev("missing | to_json"), json!("null"));
    }

    #[test]
    fn type_checks() {
        assert_eq!(ev("nums | is_array"), json!(true));
        assert_eq!(ev("obj | is_array"), json!(false));
        assert_eq!(ev("obj | is_object"), json!(true));
        assert_eq!(ev("nums | is_object"), json!(false));
        assert_eq!(ev("s | is_string"), json!(true));
        assert_eq!(ev("5 | is_string"), json!(false));
        assert_eq!(ev("5.5 | is_number"), json!(true));
        assert_eq!(ev("'5' | is_number"), json!(false));
        assert_eq!(ev("'' | is_empty"), json!(true));
        assert_eq!(ev("[] | is_empty"), json!(true));
        assert_eq!(ev("{} | is_empty"), json!(true));
        assert_eq!(ev("missing | is_empty"), json!(true));
        assert_eq!(ev("0 | is_empty"), json!(false));
        assert_eq!(ev("none | is_null"), json!(true));
        assert_eq!(ev("missing | is_null"), json!(true));
        assert_eq!(ev("0 | is_null"), json!(false));
    }

    #[test]
    fn logic_filters() {
        assert_eq!(ev("true | ternary('yes', 'no')"), json!("yes"));
        // JavaScript's truthiness, as the peer's filters have it.
        assert_eq!(ev("[] | ternary('yes', 'no')"), json!("yes"));
        assert_eq!(ev("'' | ternary('yes', 'no')"), json!("no"));
        assert_eq!(ev("0 | ternary('yes')"), json!(null));
        assert_eq!(ev("1 | and(true, 'x')"), json!(true));
        assert_eq!(ev("1 | and(true, '')"), json!(false));
        assert_eq!(ev("'' | or(0, 'fallback', 'other')"), json!("fallback"));
        assert_eq!(ev("'' | or(0)"), json!(null));
        assert_eq!(ev("'v' | or('w')"), json!("v"));
        assert_eq!(ev("[] | not"), json!(false));
        assert_eq!(ev("none | not"), json!(true));
        assert_eq!(ev("'x' | not"), json!(false));
    }

    #[test]
    fn math_filters() {
        assert_eq!(ev("2.5 | round"), json!(3));
        assert_eq!(ev("-2.5 | round"), json!(-2));
        assert_eq!(ev("1.23456 | round(2)"), json!(1.23));
        assert_eq!(ev("1234 | round(-2)"), json!(1200));
        assert_eq!(ev("'2.4' | round"), json!(2));
        assert_eq!(ev("7 | round(1)"), json!(7));
        assert_eq!(ev("2.7 | floor"), json!(2));
        assert_eq!(ev("-2.2 | floor"), json!(-3));
        assert_eq!(ev("2.1 | ceil"), json!(3));
        assert_eq!(ev("nums | min"), json!(1));
        assert_eq!(ev("nums | max"), json!(3));
        assert_eq!(ev("5 | min(2, 8)"), json!(2));
        assert_eq!(ev("5 | max(2, '8')"), json!(8));
        assert_eq!(ev("['10', '9'] | max"), json!(10));
        assert_eq!(ev("words | min"), json!("Apple"));
        assert_eq!(ev("[] | max"), json!(null));
        assert_eq!(
            ev("items | max(attribute='price')"),
            json!({"name": "b", "price": 3.5})
        );
        assert_eq!(ev("2 | add(3)"), json!(5));
        assert_eq!(ev("'2' | add(0.5)"), json!(2.5));
        assert_eq!(ev("2 | subtract(3)"), json!(-1));
        // One kind of number, as in JavaScript: a whole result is whole.
        assert_eq!(ev("4 | multiply(2.5)"), json!(10));
        assert_eq!(ev("9 | divide(3)"), json!(3));
        assert_eq!(ev("9 | divide(2)"), json!(4.5));
        assert!(ev_err("1 | divide(0)").contains("division by zero"));
        assert!(ev_err("[1] | add(1)").contains("add expects a number, got a sequence"));
        // Nunjucks' int/float: parseInt/parseFloat.
        assert_eq!(ev("'42' | int"), json!(42));
        assert_eq!(ev("'2.5' | float"), json!(2.5));
    }

    #[test]
    fn text_filters_refuse_lists_and_mappings() {
        assert_eq!(
            ev("'hello world-wide (x)' | title"),
            json!("Hello World-wide (x)"),
            "words split at spaces only, as Nunjucks splits them"
        );
        assert_eq!(ev("'mIXED' | capitalize"), json!("Mixed"));
        assert_eq!(ev("'  a ' | trim"), json!("a"));
        assert_eq!(ev("'xxaxx' | trim('x')"), json!("a"));
        assert_eq!(ev("5 | upper"), json!("5"));
        assert_eq!(ev("missing | upper"), json!(""));
        assert!(ev_err("words | split(',')")
            .contains("`split` works on text, got a list: it is split already"));
        for f in [
            "upper",
            "lower",
            "title",
            "capitalize",
            "trim",
            "slugify",
            "truncate(2)",
        ] {
            let e = ev_err(&format!("words | {f}"));
            assert!(e.contains("works on text, got a list"), "{f}: {e}");
            let e = ev_err(&format!("obj | {f}"));
            assert!(e.contains("works on text, got a mapping"), "{f}: {e}");
        }
    }

    #[test]
    fn minijinja_builtins_remain() {
        assert_eq!(
            ev("words | map('upper') | join(',')"),
            json!("PEAR,APPLE,FIG")
        );
        assert_eq!(ev("nums | length"), json!(4));
        assert_eq!(ev("missing | default('d')"), json!("d"));
        assert_eq!(ev("obj | tojson"), json!(r#"{"b": 2, "a": 1, "c": 3}"#));
    }

    #[test]
    fn every_registered_filter_is_listed() {
        // CUSTOM_FILTERS drives "did you mean"; keep it complete.
        for name in super::CUSTOM_FILTERS {
            let src = format!("x | {name}");
            let err = Templates::new().eval_expr(&src, &ctx()).err();
            assert!(
                err.as_ref()
                    .is_none_or(|e| !e.message.contains("unknown filter")),
                "{name}: {err:?}"
            );
        }
    }
}
