//! `console.*` formatting, close to Node's `util.format` / `util.inspect`
//! (single line: Node wraps long output over several lines, we do not).

use boa_engine::builtins::date::Date;
use boa_engine::builtins::error::Error as JsErrorData;
use boa_engine::builtins::regexp::RegExp;
use boa_engine::object::builtins::{JsArray, JsMap, JsPromise, JsSet};
use boa_engine::property::PropertyKey;
use boa_engine::{js_string, Context, JsObject, JsValue};

const MAX_DEPTH: usize = 2;
const MAX_ITEMS: usize = 100;

/// `util.format(...args)`.
pub(crate) fn format_args(args: &[JsValue], ctx: &mut Context) -> String {
    let mut out = String::new();
    let mut rest = args;
    if let Some(first) = args.first().and_then(JsValue::as_string) {
        let fmt = first.to_std_string_lossy();
        rest = &args[1..];
        if fmt.contains('%') {
            let mut chars = fmt.chars().peekable();
            while let Some(c) = chars.next() {
                if c != '%' {
                    out.push(c);
                    continue;
                }
                let Some(&spec) = chars.peek() else {
                    out.push('%');
                    break;
                };
                if spec == '%' {
                    chars.next();
                    out.push('%');
                    continue;
                }
                if !matches!(spec, 's' | 'd' | 'i' | 'f' | 'j' | 'o' | 'O' | 'c') {
                    out.push('%');
                    continue;
                }
                let Some((arg, tail)) = rest.split_first() else {
                    out.push('%');
                    continue;
                };
                chars.next();
                rest = tail;
                match spec {
                    's' => match arg.as_object() {
                        Some(_) => out.push_str(&inspect(arg, ctx)),
                        None => out.push_str(&primitive_string(arg)),
                    },
                    'd' | 'i' | 'f' => {
                        if arg.is_object() {
                            out.push_str("NaN");
                        } else {
                            let n = arg.to_number(ctx).unwrap_or(f64::NAN);
                            let n = if spec == 'i' { n.trunc() } else { n };
                            out.push_str(&number(n));
                        }
                    }
                    'j' => out.push_str(&json(arg, ctx)),
                    'o' | 'O' => out.push_str(&inspect(arg, ctx)),
                    _ => {} // %c: CSS, ignored
                }
            }
        } else {
            out.push_str(&fmt);
        }
    }
    for (i, a) in rest.iter().enumerate() {
        if i > 0 || !out.is_empty() || args.len() != rest.len() {
            out.push(' ');
        }
        match a.as_string() {
            Some(s) => out.push_str(&s.to_std_string_lossy()),
            None => out.push_str(&inspect(a, ctx)),
        }
    }
    out
}

fn json(v: &JsValue, ctx: &mut Context) -> String {
    let stringify = ctx
        .intrinsics()
        .objects()
        .json()
        .get(js_string!("stringify"), ctx)
        .ok()
        .and_then(|f| f.as_callable());
    match stringify.map(|f| f.call(&JsValue::undefined(), std::slice::from_ref(v), ctx)) {
        Some(Ok(s)) if s.is_string() => s.as_string().unwrap().to_std_string_lossy(),
        Some(Ok(_)) => "undefined".into(),
        _ => "[Circular]".into(),
    }
}

pub(crate) fn number(n: f64) -> String {
    if n == 0.0 && n.is_sign_negative() {
        "-0".into()
    } else {
        JsValue::from(n).display().to_string()
    }
}

fn primitive_string(v: &JsValue) -> String {
    if let Some(s) = v.as_string() {
        return s.to_std_string_lossy();
    }
    if let Some(n) = v.as_number() {
        return number(n);
    }
    if let Some(b) = v.as_bigint() {
        return format!("{b}n");
    }
    if let Some(s) = v.as_symbol() {
        return s.descriptive_string().to_std_string_lossy();
    }
    v.display().to_string()
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn key_string(k: &PropertyKey) -> String {
    match k {
        PropertyKey::String(s) => {
            let s = s.to_std_string_lossy();
            let ident = !s.is_empty()
                && s.chars().enumerate().all(|(i, c)| {
                    c == '_' || c == '$' || c.is_alphabetic() || (i > 0 && c.is_ascii_digit())
                });
            if ident {
                s
            } else {
                quote(&s)
            }
        }
        PropertyKey::Index(i) => quote(&i.get().to_string()),
        PropertyKey::Symbol(s) => format!("[{}]", s.descriptive_string().to_std_string_lossy()),
    }
}

/// `util.inspect(value)` on one line.
pub(crate) fn inspect(v: &JsValue, ctx: &mut Context) -> String {
    let mut seen = Vec::new();
    inspect_at(v, 0, &mut seen, ctx)
}

/// `Object.keys(o)`.
fn enumerable_keys(o: &JsObject, ctx: &mut Context) -> Vec<PropertyKey> {
    let object_ctor = ctx.intrinsics().constructors().object().constructor();
    let Some(keys_fn) = object_ctor
        .get(js_string!("keys"), ctx)
        .ok()
        .and_then(|f| f.as_callable())
    else {
        return Vec::new();
    };
    let Ok(arr) = keys_fn.call(&JsValue::undefined(), &[o.clone().into()], ctx) else {
        return Vec::new();
    };
    let Some(arr) = arr.as_object().and_then(|a| JsArray::from_object(a).ok()) else {
        return Vec::new();
    };
    let len = arr.length(ctx).unwrap_or(0);
    (0..len)
        .filter_map(|i| arr.get(i, ctx).ok()?.as_string())
        .map(PropertyKey::from)
        .collect()
}

fn constructor_name(o: &JsObject, ctx: &mut Context) -> Option<String> {
    let proto = o.prototype()?;
    if proto == ctx.intrinsics().constructors().object().prototype() {
        return None;
    }
    let ctor = proto.get(js_string!("constructor"), ctx).ok()?;
    let name = ctor.as_object()?.get(js_string!("name"), ctx).ok()?;
    let name = name.as_string()?.to_std_string_lossy();
    (!name.is_empty() && name != "Object").then_some(name)
}

fn inspect_at(v: &JsValue, depth: usize, seen: &mut Vec<JsObject>, ctx: &mut Context) -> String {
    let Some(o) = v.as_object() else {
        return match v.as_string() {
            Some(s) => quote(&s.to_std_string_lossy()),
            None => primitive_string(v),
        };
    };
    if seen.contains(&o) {
        return "[Circular]".into();
    }
    if o.is_callable() {
        let name = o
            .get(js_string!("name"), ctx)
            .ok()
            .and_then(|n| n.as_string().map(|s| s.to_std_string_lossy()))
            .unwrap_or_default();
        return if name.is_empty() {
            "[Function (anonymous)]".into()
        } else {
            format!("[Function: {name}]")
        };
    }
    if o.is::<JsErrorData>() {
        let mut s = v
            .to_string(ctx)
            .map(|s| s.to_std_string_lossy())
            .unwrap_or_else(|_| "Error".into());
        let keys = enumerable_keys(&o, ctx);
        if !keys.is_empty() && depth <= MAX_DEPTH {
            seen.push(o.clone());
            let body = props(&o, &keys, depth, seen, ctx);
            seen.pop();
            s.push_str(&format!(" {{ {body} }}"));
        }
        return s;
    }
    if o.is::<Date>() {
        let iso = o
            .get(js_string!("toISOString"), ctx)
            .ok()
            .and_then(|f| f.as_callable())
            .and_then(|f| f.call(v, &[], ctx).ok())
            .and_then(|s| s.as_string().map(|s| s.to_std_string_lossy()));
        return iso.unwrap_or_else(|| "Invalid Date".into());
    }
    if o.is::<RegExp>() {
        return v
            .to_string(ctx)
            .map(|s| s.to_std_string_lossy())
            .unwrap_or_default();
    }
    if let Ok(p) = JsPromise::from_object(o.clone()) {
        use boa_engine::builtins::promise::PromiseState;
        return match p.state() {
            PromiseState::Pending => "Promise { <pending> }".into(),
            PromiseState::Fulfilled(x) => {
                format!("Promise {{ {} }}", inspect_at(&x, depth + 1, seen, ctx))
            }
            PromiseState::Rejected(x) => {
                format!(
                    "Promise {{ <rejected> {} }}",
                    inspect_at(&x, depth + 1, seen, ctx)
                )
            }
        };
    }
    seen.push(o.clone());
    let out = if let Ok(m) = JsMap::from_object(o.clone()) {
        if depth > MAX_DEPTH {
            "[Map]".to_string()
        } else {
            let mut entries = Vec::new();
            let _ = m.for_each_native(|k, val| {
                entries.push((k, val));
                Ok(())
            });
            let n = entries.len();
            let parts: Vec<String> = entries
                .iter()
                .take(MAX_ITEMS)
                .map(|(k, val)| {
                    format!(
                        "{} => {}",
                        inspect_at(k, depth + 1, seen, ctx),
                        inspect_at(val, depth + 1, seen, ctx)
                    )
                })
                .collect();
            if parts.is_empty() {
                format!("Map({n}) {{}}")
            } else {
                format!("Map({n}) {{ {} }}", parts.join(", "))
            }
        }
    } else if let Ok(set) = JsSet::from_object(o.clone()) {
        if depth > MAX_DEPTH {
            "[Set]".to_string()
        } else {
            let mut items = Vec::new();
            let _ = set.for_each_native(|x| {
                items.push(x);
                Ok(())
            });
            let n = items.len();
            let parts: Vec<String> = items
                .iter()
                .take(MAX_ITEMS)
                .map(|x| inspect_at(x, depth + 1, seen, ctx))
                .collect();
            if parts.is_empty() {
                format!("Set({n}) {{}}")
            } else {
                format!("Set({n}) {{ {} }}", parts.join(", "))
            }
        }
    } else if o.is_array() {
        if depth > MAX_DEPTH {
            "[Array]".to_string()
        } else {
            let arr = JsArray::from_object(o.clone()).expect("is_array");
            let len = arr.length(ctx).unwrap_or(0);
            let mut parts = Vec::new();
            for i in 0..len.min(MAX_ITEMS as u64) {
                let x = arr.get(i, ctx).unwrap_or_default();
                parts.push(inspect_at(&x, depth + 1, seen, ctx));
            }
            if len > MAX_ITEMS as u64 {
                parts.push(format!("... {} more items", len - MAX_ITEMS as u64));
            }
            if parts.is_empty() {
                "[]".into()
            } else {
                format!("[ {} ]", parts.join(", "))
            }
        }
    } else {
        let prefix = constructor_name(&o, ctx)
            .map(|n| format!("{n} "))
            .unwrap_or_default();
        if depth > MAX_DEPTH {
            let name = prefix.trim_end();
            if name.is_empty() {
                "[Object]".to_string()
            } else {
                format!("[{name}]")
            }
        } else {
            let keys = enumerable_keys(&o, ctx);
            if keys.is_empty() {
                format!("{prefix}{{}}")
            } else {
                format!("{prefix}{{ {} }}", props(&o, &keys, depth, seen, ctx))
            }
        }
    };
    seen.pop();
    out
}

fn props(
    o: &JsObject,
    keys: &[PropertyKey],
    depth: usize,
    seen: &mut Vec<JsObject>,
    ctx: &mut Context,
) -> String {
    let mut parts = Vec::new();
    for k in keys.iter().take(MAX_ITEMS) {
        let val = o.get(k.clone(), ctx).unwrap_or_default();
        parts.push(format!(
            "{}: {}",
            key_string(k),
            inspect_at(&val, depth + 1, seen, ctx)
        ));
    }
    if keys.len() > MAX_ITEMS {
        parts.push(format!("... {} more properties", keys.len() - MAX_ITEMS));
    }
    parts.join(", ")
}
