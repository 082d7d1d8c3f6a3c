//! Methods on values, for templates written for Nunjucks (where JavaScript
//! methods work: `name.toUpperCase()`, `items.join(', ')`) or for Jinja
//! (`name.upper()`, `obj.items()`). minijinja has none of these built in.
//!
//! - text: `toUpperCase`/`upper`, `toLowerCase`/`lower`, `trim`/`strip`,
//!   `trimStart`/`lstrip`, `trimEnd`/`rstrip`, `split(sep?, limit?)` (no
//!   separator: split on whitespace), `includes`, `startsWith`/`startswith`,
//!   `endsWith`/`endswith`, `indexOf`, `lastIndexOf`, `slice(a, b?)`,
//!   `substring(a, b?)`, `replace(a, b)` (first occurrence, as in
//!   JavaScript), `replaceAll(a, b)`, `padStart(n, fill?)`, `padEnd`,
//!   `repeat(n)`, `charAt(i)`, `concat(…)`, `toString()`;
//! - numbers: `toFixed(digits=0)`, `toString()`;
//! - lists: `join(sep=',')`, `includes`, `indexOf`, `slice(a, b?)`,
//!   `concat(…)`, `at(i)`, `reverse()` (a reversed copy), `toString()`;
//! - maps: `items()`, `keys()`, `values()`, `get(key, default?)`,
//!   `hasOwnProperty(key)`.
//!
//! Indexes count characters; negative indexes count from the end where
//! JavaScript allows it (`slice`, `at`).

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value};

use super::filters::js_round;
use super::regexp::{new_regexp, JsRegExp};
use super::values::{from_json, list, room_for, text, to_json, to_num};

/// The JavaScript methods of String, Number and Array that templates
/// refuse, and why (docs/reference.md lists them from here).
pub(crate) const REFUSED: &[(&[&str], &str)] = &[
    (
        &["map", "filter", "find", "findIndex", "findLast", "findLastIndex", "every", "some", "forEach", "reduce", "reduceRight", "flatMap"],
        "it takes a function, which a template cannot write (nor can Nunjucks): use a filter (`select`, `reject`, `selectattr`, `map(attribute=…)`, `sum`) or a script step",
    ),
    (
        &["push", "pop", "shift", "unshift", "splice", "fill", "copyWithin", "toSpliced"],
        "it changes the list in place, and a template's values do not change: build a new one (`xs + [x]`, `xs.concat([x])`, `xs.slice(1)`)",
    ),
    (
        &["toLocaleDateString", "toLocaleTimeString"],
        "templates have no dates (a date is its text): format it with `format_date`, or in a script step, which has Intl",
    ),
    (&["normalize"], "Unicode normalization tables are not built in"),
    (&["toExponential"], "it is not built in: use `toPrecision` or `toFixed`"),
    (
        &["entries", "with"],
        "not for lists in templates: use the `entries` filter, or `loop.index` in a loop",
    ),
    (
        &["anchor", "big", "blink", "bold", "fixed", "fontcolor", "fontsize", "italics", "link", "small", "strike", "sub", "sup"],
        "it is one of JavaScript's deprecated HTML methods",
    ),
];

fn unknown(value: &Value, name: &str) -> Error {
    let why = REFUSED
        .iter()
        .find(|(names, _)| names.contains(&name))
        .map_or(String::new(), |(_, why)| format!(": {why}"));
    Error::new(
        ErrorKind::UnknownMethod,
        format!("{} has no method named {}{why}", value.kind(), name),
    )
}

fn arity(name: &str, args: &[Value], max: usize) -> Result<(), Error> {
    if args.len() > max {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            format!("{name}() takes at most {max} argument(s)"),
        ));
    }
    Ok(())
}

fn arg_text(args: &[Value], i: usize, name: &str) -> Result<String, Error> {
    match args.get(i) {
        Some(v) if !v.is_undefined() => Ok(text(v)),
        _ => Err(Error::new(
            ErrorKind::MissingArgument,
            format!("{name}() needs argument {}", i + 1),
        )),
    }
}

fn arg_int(args: &[Value], i: usize, name: &str) -> Result<Option<i64>, Error> {
    match args.get(i) {
        Some(v) if !v.is_undefined() && !v.is_none() => {
            let f = to_num(v, name)?.as_f64();
            Ok(Some(if f.is_nan() { 0 } else { f.trunc() as i64 }))
        }
        _ => Ok(None),
    }
}

/// JavaScript's `slice` bounds: negative counts from the end, clamped.
fn slice_bounds(len: usize, a: Option<i64>, b: Option<i64>) -> (usize, usize) {
    let len_i = len as i64;
    let fix = |x: i64| {
        if x < 0 {
            (len_i + x).max(0) as usize
        } else {
            x.min(len_i) as usize
        }
    };
    let start = fix(a.unwrap_or(0));
    let end = fix(b.unwrap_or(len_i));
    (start, end.max(start))
}

/// JavaScript's `substring` bounds: clamped, swapped if reversed.
fn substring_bounds(len: usize, a: Option<i64>, b: Option<i64>) -> (usize, usize) {
    let clamp = |x: i64| x.clamp(0, len as i64) as usize;
    let (s, e) = (clamp(a.unwrap_or(0)), clamp(b.unwrap_or(len as i64)));
    (s.min(e), s.max(e))
}

fn char_index(hay: &str, byte: usize) -> i64 {
    hay[..byte].chars().count() as i64
}

fn pad(s: &str, n: Option<i64>, fill: Option<String>, start: bool) -> Result<String, Error> {
    let width = usize::try_from(n.unwrap_or(0).max(0)).unwrap_or(usize::MAX);
    let len = s.chars().count();
    let fill = fill.unwrap_or_else(|| " ".into());
    if len >= width || fill.is_empty() {
        return Ok(s.to_string());
    }
    let widest = fill.chars().map(char::len_utf8).max().unwrap_or(1);
    room_for(
        if start { "padStart()" } else { "padEnd()" },
        (width - len).saturating_mul(widest).saturating_add(s.len()),
    )?;
    let padding: String = fill.chars().cycle().take(width - len).collect();
    Ok(if start {
        padding + s
    } else {
        s.to_string() + &padding
    })
}

/// The size of `s` with `from` replaced by `to` (`limit` times at most),
/// counted without building it.
fn replaced_len(s: &str, from: &str, to: &str, limit: usize) -> usize {
    if to.len() <= from.len() {
        return s.len();
    }
    // An empty pattern matches before every character and at the end.
    let matches = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    matches
        .min(limit)
        .saturating_mul(to.len() - from.len())
        .saturating_add(s.len())
}

/// The text methods that read a `RegExp` argument as JavaScript does;
/// `None` for the others.
fn with_regexp(s: &str, re: &JsRegExp, name: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    Ok(Some(match name {
        "replace" | "replaceAll" => {
            arity(name, args, 2)?;
            let repl = args.get(1).map_or_else(|| "undefined".to_string(), text);
            Value::from(re.replace(s, &repl, name == "replaceAll")?)
        }
        "match" => arity(name, args, 1).and_then(|_| re.match_in(s))?,
        "matchAll" => arity(name, args, 1).and_then(|_| re.match_all(s))?,
        "search" => arity(name, args, 1).map(|_| re.search(s))?,
        "split" => {
            arity(name, args, 2)?;
            let limit = arg_int(args, 1, name)?.map(|l| l.max(0) as usize);
            re.split(s, limit)?
        }
        _ => return Ok(None),
    }))
}

/// JavaScript's locale methods, computed by the `Intl` script steps have
/// (ICU's data), so a template and a script format alike.
fn locale(value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    arity(name, args, if name == "localeCompare" { 3 } else { 2 })?;
    let this = to_json(value)?;
    let args = args.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
    marktoflow_steps::script::intl::locale_method(&this, name, &args)
        .map(|v| from_json(&v))
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("{name}(): {e}")))
}

fn string_method(s: &str, value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    if let Some(re) = args.first().and_then(JsRegExp::of) {
        if let Some(v) = with_regexp(s, &re, name, args)? {
            return Ok(v);
        }
    }
    let chars = || s.chars().collect::<Vec<char>>();
    let one = |v: String| Ok(Value::from(v));
    match name {
        "localeCompare" => locale(value, name, args),
        // JavaScript makes a regular expression of a text argument
        // (`matchAll` a global one).
        "match" | "matchAll" => {
            let source = args.first().map_or_else(|| "(?:)".to_string(), text);
            let flags = if name == "matchAll" { "g" } else { "" };
            let re = new_regexp(&source, Some(flags))?;
            let re = JsRegExp::of(&re).expect("new_regexp makes a RegExp");
            Ok(with_regexp(s, &re, name, args)?.expect("match and matchAll take a RegExp"))
        }
        "toUpperCase" | "upper" => arity(name, args, 0).and_then(|_| one(s.to_uppercase())),
        "toLowerCase" | "lower" => arity(name, args, 0).and_then(|_| one(s.to_lowercase())),
        // Unicode's case mapping is the same in every locale but Turkish,
        // Azeri and Lithuanian, whose special rules we do not have.
        "toLocaleUpperCase" | "toLocaleLowerCase" => {
            arity(name, args, 1)?;
            if let Some(locale) = args.first().filter(|l| !l.is_undefined()).map(text) {
                let lang = locale
                    .split(['-', '_'])
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if ["tr", "az", "lt"].contains(&lang.as_str()) {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!(
                            "{name}('{locale}'): the case rules of that language are not built in"
                        ),
                    ));
                }
            }
            one(if name == "toLocaleUpperCase" {
                s.to_uppercase()
            } else {
                s.to_lowercase()
            })
        }
        // JavaScript reads the argument as a regular expression.
        "search" => {
            arity(name, args, 1)?;
            let re = super::filters::js_regex(&arg_text(args, 0, name)?, None)?.re;
            Ok(Value::from(
                re.find(s).map_or(-1, |m| char_index(s, m.start())),
            ))
        }
        "trim" | "strip" | "trimStart" | "lstrip" | "trimEnd" | "rstrip" => {
            arity(name, args, 1)?;
            let set: Option<Vec<char>> = match args.first() {
                Some(v) if !v.is_none() && !v.is_undefined() => Some(text(v).chars().collect()),
                _ => None,
            };
            let is_trim = |c: char| {
                set.as_ref()
                    .map_or(c.is_whitespace(), |set| set.contains(&c))
            };
            one(match name {
                "trim" | "strip" => s.trim_matches(is_trim),
                "trimStart" | "lstrip" => s.trim_start_matches(is_trim),
                _ => s.trim_end_matches(is_trim),
            }
            .to_string())
        }
        "split" => {
            arity(name, args, 2)?;
            let limit = arg_int(args, 1, name)?.map(|l| l.max(0) as usize);
            let parts: Vec<Value> = match args.first().filter(|v| !v.is_none() && !v.is_undefined())
            {
                None => s.split_whitespace().map(Value::from).collect(),
                Some(sep) => {
                    let sep = text(sep);
                    if sep.is_empty() {
                        s.chars().map(Value::from).collect()
                    } else {
                        s.split(sep.as_str()).map(Value::from).collect()
                    }
                }
            };
            Ok(list(match limit {
                Some(l) => parts.into_iter().take(l).collect(),
                None => parts,
            }))
        }
        "includes" => Ok(Value::from(s.contains(arg_text(args, 0, name)?.as_str()))),
        "startsWith" | "startswith" => Ok(Value::from(
            s.starts_with(arg_text(args, 0, name)?.as_str()),
        )),
        "endsWith" | "endswith" => Ok(Value::from(s.ends_with(arg_text(args, 0, name)?.as_str()))),
        "indexOf" => Ok(Value::from(
            s.find(arg_text(args, 0, name)?.as_str())
                .map_or(-1, |b| char_index(s, b)),
        )),
        "lastIndexOf" => Ok(Value::from(
            s.rfind(arg_text(args, 0, name)?.as_str())
                .map_or(-1, |b| char_index(s, b)),
        )),
        "slice" | "substring" => {
            arity(name, args, 2)?;
            let c = chars();
            let (a, b) = (arg_int(args, 0, name)?, arg_int(args, 1, name)?);
            let (start, end) = if name == "slice" {
                slice_bounds(c.len(), a, b)
            } else {
                substring_bounds(c.len(), a, b)
            };
            one(c[start..end].iter().collect())
        }
        "replace" | "replaceAll" => {
            arity(name, args, 2)?;
            let from = arg_text(args, 0, name)?;
            let to = arg_text(args, 1, name)?;
            let limit = if name == "replace" { 1 } else { usize::MAX };
            room_for(&format!("{name}()"), replaced_len(s, &from, &to, limit))?;
            one(if name == "replace" {
                s.replacen(from.as_str(), &to, 1)
            } else {
                s.replace(from.as_str(), &to)
            })
        }
        "padStart" | "padEnd" => {
            arity(name, args, 2)?;
            let fill = args.get(1).map(text);
            one(pad(s, arg_int(args, 0, name)?, fill, name == "padStart")?)
        }
        "repeat" => {
            let n = arg_int(args, 0, name)?.unwrap_or(0);
            if n < 0 {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "repeat(): the count must not be negative",
                ));
            }
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            room_for("repeat()", s.len().saturating_mul(n))?;
            one(s.repeat(n))
        }
        "charAt" => {
            let i = arg_int(args, 0, name)?.unwrap_or(0);
            one(usize::try_from(i)
                .ok()
                .and_then(|i| s.chars().nth(i))
                .map(String::from)
                .unwrap_or_default())
        }
        "concat" => {
            let parts: Vec<String> = args.iter().map(text).collect();
            room_for(
                "concat()",
                parts
                    .iter()
                    .map(String::len)
                    .fold(s.len(), usize::saturating_add),
            )?;
            one(std::iter::once(s.to_string()).chain(parts).collect())
        }
        "toString" => arity(name, args, 0).map(|_| value.clone()),
        // Text here is always well-formed Unicode (UTF-8).
        "isWellFormed" => arity(name, args, 0).map(|_| Value::from(true)),
        "toWellFormed" => arity(name, args, 0).map(|_| value.clone()),
        // JavaScript counts UTF-16 units.
        "charCodeAt" | "codePointAt" | "at" => {
            arity(name, args, 1)?;
            let u: Vec<u16> = s.encode_utf16().collect();
            let i = arg_int(args, 0, name)?.unwrap_or(0);
            let i = if name == "at" && i < 0 {
                i + u.len() as i64
            } else {
                i
            };
            let Some(unit) = usize::try_from(i)
                .ok()
                .and_then(|i| u.get(i).map(|c| (i, *c)))
            else {
                return Ok(match name {
                    "charCodeAt" => Value::from(f64::NAN),
                    _ => Value::UNDEFINED,
                });
            };
            Ok(match name {
                "charCodeAt" => Value::from(unit.1),
                "at" => Value::from(String::from_utf16_lossy(&[unit.1])),
                _ => {
                    let c = char::decode_utf16(u[unit.0..].iter().copied()).next();
                    Value::from(match c {
                        Some(Ok(c)) => c as u32,
                        _ => u32::from(unit.1),
                    })
                }
            })
        }
        "substr" => {
            arity(name, args, 2)?;
            let u: Vec<u16> = s.encode_utf16().collect();
            let n = u.len() as i64;
            let start = arg_int(args, 0, name)?.unwrap_or(0);
            let start = if start < 0 {
                (n + start).max(0)
            } else {
                start.min(n)
            };
            let len = arg_int(args, 1, name)?.unwrap_or(n).clamp(0, n - start);
            one(String::from_utf16_lossy(
                &u[start as usize..(start + len) as usize],
            ))
        }
        _ => Err(unknown(value, name)),
    }
}

fn list_method(value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    let items = || value.try_iter().map(|i| i.collect::<Vec<Value>>());
    match name {
        "toLocaleString" => locale(value, name, args),
        "join" => {
            arity(name, args, 1)?;
            let sep = match args.first() {
                Some(v) if !v.is_undefined() && !v.is_none() => text(v),
                _ => ",".to_string(),
            };
            let parts: Vec<String> = items()?.iter().map(text).collect();
            let seps = sep.len().saturating_mul(parts.len().saturating_sub(1));
            room_for(
                "join()",
                parts
                    .iter()
                    .map(String::len)
                    .fold(seps, usize::saturating_add),
            )?;
            Ok(Value::from(parts.join(&sep)))
        }
        "includes" => {
            arity(name, args, 1)?;
            let x = args.first().cloned().unwrap_or(Value::UNDEFINED);
            Ok(Value::from(items()?.contains(&x)))
        }
        "indexOf" => {
            arity(name, args, 1)?;
            let x = args.first().cloned().unwrap_or(Value::UNDEFINED);
            Ok(Value::from(
                items()?
                    .iter()
                    .position(|i| *i == x)
                    .map_or(-1, |p| p as i64),
            ))
        }
        "lastIndexOf" => {
            arity(name, args, 1)?;
            let x = args.first().cloned().unwrap_or(Value::UNDEFINED);
            Ok(Value::from(
                items()?
                    .iter()
                    .rposition(|i| *i == x)
                    .map_or(-1, |p| p as i64),
            ))
        }
        // Without a comparison function (a template cannot pass one),
        // JavaScript sorts by text, UTF-16 unit by unit: `[10, 9, 1]` is
        // `[1, 10, 9]`; undefined items go last. A sorted copy.
        "sort" | "toSorted" => {
            if !args.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{name}() takes no comparison function in a template: use the `sort` filter (`xs | sort(attribute='n')`)"),
                ));
            }
            let mut keyed: Vec<(Option<Vec<u16>>, Value)> = items()?
                .into_iter()
                .map(|v| {
                    (
                        (!v.is_undefined())
                            .then(|| super::js_ops::js_string(&v).encode_utf16().collect()),
                        v,
                    )
                })
                .collect();
            keyed.sort_by(|a, b| match (&a.0, &b.0) {
                (Some(x), Some(y)) => x.cmp(y),
                (None, None) => std::cmp::Ordering::Equal,
                (None, _) => std::cmp::Ordering::Greater,
                (_, None) => std::cmp::Ordering::Less,
            });
            Ok(list(keyed.into_iter().map(|(_, v)| v).collect()))
        }
        "slice" => {
            arity(name, args, 2)?;
            let all = items()?;
            let (a, b) = slice_bounds(all.len(), arg_int(args, 0, name)?, arg_int(args, 1, name)?);
            Ok(list(all[a..b].to_vec()))
        }
        "concat" => {
            let mut all = items()?;
            for a in args {
                if matches!(a.kind(), ValueKind::Seq | ValueKind::Iterable) {
                    all.extend(a.try_iter()?);
                } else {
                    all.push(a.clone());
                }
            }
            Ok(list(all))
        }
        "at" => {
            arity(name, args, 1)?;
            let i = arg_int(args, 0, name)?.unwrap_or(0);
            value.get_item(&Value::from(i))
        }
        "reverse" | "toReversed" => {
            arity(name, args, 0)?;
            let mut all = items()?;
            all.reverse();
            Ok(list(all))
        }
        "toString" => {
            arity(name, args, 0)?;
            Ok(Value::from(
                items()?.iter().map(text).collect::<Vec<_>>().join(","),
            ))
        }
        "flat" => {
            arity(name, args, 1)?;
            let depth = arg_int(args, 0, name)?.unwrap_or(1).clamp(0, 64);
            fn flatten(items: Vec<Value>, depth: i64, out: &mut Vec<Value>) {
                for v in items {
                    match v.kind() {
                        ValueKind::Seq if depth > 0 => {
                            let inner: Vec<Value> =
                                v.try_iter().map(|i| i.collect()).unwrap_or_default();
                            flatten(inner, depth - 1, out);
                        }
                        _ => out.push(v),
                    }
                }
            }
            let mut out = Vec::new();
            flatten(items()?, depth, &mut out);
            Ok(list(out))
        }
        _ => Err(unknown(value, name)),
    }
}

fn map_method(value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    let pairs = || super::values::map_pairs(value);
    match name {
        "items" => {
            arity(name, args, 0)?;
            Ok(list(
                pairs()?
                    .into_iter()
                    .map(|(k, v)| list(vec![k, v]))
                    .collect(),
            ))
        }
        "keys" => {
            arity(name, args, 0)?;
            Ok(list(pairs()?.into_iter().map(|(k, _)| k).collect()))
        }
        "values" => {
            arity(name, args, 0)?;
            Ok(list(pairs()?.into_iter().map(|(_, v)| v).collect()))
        }
        "get" => {
            arity(name, args, 2)?;
            let key = args.first().cloned().unwrap_or(Value::UNDEFINED);
            let v = value.get_item(&key)?;
            Ok(if v.is_undefined() {
                args.get(1).cloned().unwrap_or(Value::from(()))
            } else {
                v
            })
        }
        "hasOwnProperty" => {
            arity(name, args, 1)?;
            let key = args.first().cloned().unwrap_or(Value::UNDEFINED);
            Ok(Value::from(!value.get_item(&key)?.is_undefined()))
        }
        _ => Err(unknown(value, name)),
    }
}

fn number_method(value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    match name {
        "toLocaleString" => locale(value, name, args),
        "toFixed" => {
            arity(name, args, 1)?;
            let d = arg_int(args, 0, name)?.unwrap_or(0);
            if !(0..=100).contains(&d) {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "toFixed(): digits must be between 0 and 100",
                ));
            }
            let x = to_num(value, name)?.as_f64();
            let m = 10f64.powi(d as i32);
            let r = if m.is_finite() && (x * m).is_finite() {
                js_round(x * m) / m
            } else {
                x
            };
            Ok(Value::from(format!("{:.*}", d as usize, r)))
        }
        "toString" => {
            arity(name, args, 1)?;
            let radix = arg_int(args, 0, name)?.unwrap_or(10);
            if radix == 10 {
                return Ok(Value::from(text(value)));
            }
            if !(2..=36).contains(&radix) {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "toString(): the radix must be between 2 and 36",
                ));
            }
            let x = to_num(value, name)?.as_f64();
            if x.fract() != 0.0 || !x.is_finite() || x.abs() > 9.007_199_254_740_991e15 {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "toString(radix): only whole numbers (up to 2^53) are written in another radix here",
                ));
            }
            let mut n = x.abs() as u64;
            let mut digits = Vec::new();
            loop {
                digits.push(
                    std::char::from_digit((n % radix as u64) as u32, radix as u32).unwrap_or('0'),
                );
                n /= radix as u64;
                if n == 0 {
                    break;
                }
            }
            if x < 0.0 {
                digits.push('-');
            }
            Ok(Value::from(digits.into_iter().rev().collect::<String>()))
        }
        "toPrecision" => {
            arity(name, args, 1)?;
            let x = to_num(value, name)?.as_f64();
            let Some(p) = arg_int(args, 0, name)? else {
                return Ok(Value::from(text(value)));
            };
            if !(1..=100).contains(&p) {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "toPrecision(): precision must be between 1 and 100",
                ));
            }
            if !x.is_finite() {
                return Ok(Value::from(text(value)));
            }
            // JavaScript: the `p` digits n closest to x (the larger of two
            // as close: 2.5 gives 3), then exponential when the exponent is
            // below -6 or at least `p`, else fixed.
            let ax = x.abs();
            let mut e = if ax == 0.0 {
                0
            } else {
                ax.log10().floor() as i64
            };
            let mut n = (ax / 10f64.powi((e - p + 1) as i32) + 0.5).floor();
            if n >= 10f64.powi(p as i32) {
                n = (n / 10.0).round();
                e += 1;
            }
            let digits = if n == 0.0 {
                "0".repeat(p as usize)
            } else {
                format!("{n:.0}")
            };
            let sign = if x < 0.0 { "-" } else { "" };
            Ok(Value::from(if e < -6 || e >= p {
                let (first, rest) = digits.split_at(1);
                let dot = if rest.is_empty() { "" } else { "." };
                format!(
                    "{sign}{first}{dot}{rest}e{}{}",
                    if e < 0 { '-' } else { '+' },
                    e.abs()
                )
            } else if e >= 0 {
                let (int, frac) = digits.split_at((e + 1) as usize);
                let dot = if frac.is_empty() { "" } else { "." };
                format!("{sign}{int}{dot}{frac}")
            } else {
                format!("{sign}0.{}{digits}", "0".repeat((-e - 1) as usize))
            }))
        }
        _ => Err(unknown(value, name)),
    }
}

/// The environment's unknown-method callback.
pub(crate) fn call_method(
    _state: &mut State,
    value: &Value,
    name: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if name == "valueOf"
        && matches!(
            value.kind(),
            ValueKind::String | ValueKind::Number | ValueKind::Seq | ValueKind::Bool
        )
    {
        return arity(name, args, 0).map(|_| value.clone());
    }
    match value.kind() {
        ValueKind::String => string_method(value.as_str().unwrap_or_default(), value, name, args),
        ValueKind::Seq | ValueKind::Iterable => list_method(value, name, args),
        ValueKind::Map => map_method(value, name, args),
        ValueKind::Number => number_method(value, name, args),
        _ if JsRegExp::of(value).is_some() => Err(Error::new(
            ErrorKind::UnknownMethod,
            format!(
                "a regular expression has no method `{name}` in templates (it has test, exec and toString)"
            ),
        )),
        _ => Err(unknown(value, name)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Templates;
    use serde_json::{json, Value as Json};

    fn ev(expr: &str) -> Json {
        let vars = json!({"s": "  Hello World  ", "l": [1, 2, 3], "o": {"a": 1}, "x": 2.5});
        let ctx = Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        );
        Templates::new()
            .eval_expr(expr, &ctx)
            .unwrap_or_else(|e| panic!("{expr}: {e:?}"))
    }

    #[test]
    fn string_methods() {
        assert_eq!(ev("s.trim().toUpperCase()"), json!("HELLO WORLD"));
        assert_eq!(ev("s.strip().lower()"), json!("hello world"));
        assert_eq!(ev("s.trimStart()"), json!("Hello World  "));
        assert_eq!(ev("s.rstrip()"), json!("  Hello World"));
        assert_eq!(ev("'xxaxx'.strip('x')"), json!("a"));
        assert_eq!(ev("'a,b,c'.split(',')"), json!(["a", "b", "c"]));
        assert_eq!(ev("'a,b,c'.split(',', 2)"), json!(["a", "b"]));
        assert_eq!(ev("s.split()"), json!(["Hello", "World"]));
        assert_eq!(ev("s.includes('World')"), json!(true));
        assert_eq!(
            ev("'abc'.startsWith('ab') and 'abc'.endswith('c')"),
            json!(true)
        );
        assert_eq!(ev("'héllo'.indexOf('l')"), json!(2));
        assert_eq!(ev("'hello'.lastIndexOf('l')"), json!(3));
        assert_eq!(ev("'hello'.indexOf('z')"), json!(-1));
        assert_eq!(ev("'hello'.slice(-3)"), json!("llo"));
        assert_eq!(ev("'hello'.slice(1, -1)"), json!("ell"));
        assert_eq!(ev("'hello'.substring(3, 1)"), json!("el"));
        assert_eq!(ev("'a-a'.replace('a', 'b')"), json!("b-a"));
        assert_eq!(ev("'a-a'.replaceAll('a', 'b')"), json!("b-b"));
        assert_eq!(ev("'7'.padStart(3, '0')"), json!("007"));
        assert_eq!(ev("'7'.padEnd(2)"), json!("7 "));
        assert_eq!(ev("'ab'.repeat(2)"), json!("abab"));
        assert_eq!(ev("'abc'.charAt(1)"), json!("b"));
        assert_eq!(ev("'a'.concat('b', 1)"), json!("ab1"));
        assert_eq!(ev("'a'.toString()"), json!("a"));
    }

    /// What evaluating `expr` fails with.
    fn err(expr: &str) -> String {
        let ctx = Templates::context(&json!({}), &serde_json::Map::new(), &json!({}), &json!({}));
        match Templates::new().eval_expr(expr, &ctx) {
            Ok(v) => panic!("{expr} gave {v}"),
            Err(e) => format!("{e:?}"),
        }
    }

    #[test]
    fn a_text_past_the_cap_is_refused_before_it_is_built() {
        // Each of these would allocate gigabytes (or abort the process).
        for expr in [
            "'x'.padStart(100000000000)",
            "'x'.padEnd(20000000, 'é')",
            "'ab'.repeat(100000000)",
            "'abc'.replaceAll('', 'y'.repeat(10000000))",
            "'a-a-a'.replace('a', 'z'.repeat(9000000)).replaceAll('-', 'q'.repeat(9000000))",
            "'x'.repeat(9000000).concat('y'.repeat(9000000))",
            "['a', 'b', 'c'].join('-'.repeat(9000000))",
        ] {
            let e = err(expr);
            assert!(
                e.contains("over the 16 MiB one template text may hold"),
                "{expr}: {e}"
            );
        }
        // Up to the cap is fine.
        assert_eq!(ev("'x'.padStart(1000000) | length"), json!(1000000));
        assert_eq!(ev("'ab'.repeat(3)"), json!("ababab"));
    }

    #[test]
    fn other_methods() {
        assert_eq!(ev("l.join(', ')"), json!("1, 2, 3"));
        assert_eq!(ev("l.join()"), json!("1,2,3"));
        assert_eq!(ev("l.includes(2)"), json!(true));
        assert_eq!(ev("l.indexOf(3)"), json!(2));
        assert_eq!(ev("l.slice(1)"), json!([2, 3]));
        assert_eq!(ev("l.concat([4], 5)"), json!([1, 2, 3, 4, 5]));
        assert_eq!(ev("l.at(-1)"), json!(3));
        assert_eq!(ev("l.reverse()"), json!([3, 2, 1]));
        assert_eq!(ev("l.toString()"), json!("1,2,3"));
        assert_eq!(ev("o.items()"), json!([["a", 1]]));
        assert_eq!(ev("o.keys()"), json!(["a"]));
        assert_eq!(ev("o.values()"), json!([1]));
        assert_eq!(ev("o.get('a')"), json!(1));
        assert_eq!(ev("o.get('b', 'd')"), json!("d"));
        assert_eq!(ev("o.hasOwnProperty('a')"), json!(true));
        assert_eq!(ev("x.toFixed(2)"), json!("2.50"));
        assert_eq!(ev("x.toFixed()"), json!("3"));
        assert_eq!(ev("(3).toString()"), json!("3"));
    }

    #[test]
    fn unknown_methods_are_errors() {
        let e = Templates::new()
            .eval_expr("'x'.frobnicate()", &minijinja::Value::from(()))
            .unwrap_err();
        assert!(
            e.message.contains("string has no method named frobnicate"),
            "{e:?}"
        );
    }

    #[test]
    fn refused_javascript_methods_say_why_and_what_to_use() {
        let e = Templates::new()
            .eval_expr("[1, 2].push(3)", &minijinja::Value::from(()))
            .unwrap_err();
        assert_eq!(
            e.message,
            "unknown method: sequence has no method named push: it changes the list in place, and a template's values do not change: build a new one (`xs + [x]`, `xs.concat([x])`, `xs.slice(1)`)"
        );
        assert_eq!(ev("[3, 1, 2].toSorted()"), json!([1, 2, 3]));
        assert_eq!(ev("'x'.isWellFormed()"), json!(true));
        assert_eq!(ev("l.valueOf()"), json!([1, 2, 3]));
    }

    #[test]
    fn the_reference_lists_every_refused_method() {
        let reference = include_str!("../../../docs/reference.md");
        for (names, _) in super::REFUSED {
            for name in *names {
                assert!(reference.contains(&format!("`{name}`")), "{name}");
            }
        }
    }
}
