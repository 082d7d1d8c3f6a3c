//! Faster versions of a few `String.prototype` methods that text-scanning
//! scripts lean on (`toLowerCase`, `includes`, `indexOf`).
//!
//! boa 0.22 implements `includes`/`indexOf` as a window-by-window comparison
//! and `toLowerCase` through a round trip to a Rust `String`; on notes of a
//! few KB that dominated the seed's search step. The replacements handle the
//! common case — primitive string receiver and argument, no position — with
//! the same results (for Latin-1 text, lower-casing maps only `A–Z` and
//! `À–Þ` except `×`, exactly as Unicode does); anything else is passed to
//! boa's original method, so semantics are unchanged.

use boa_engine::property::PropertyDescriptor;
use boa_engine::string::{JsStr, JsStrVariant};
use boa_engine::{Context, JsObject, JsResult, JsString, JsValue, NativeFunction};

fn find_bytes(h: &[u8], n: &[u8]) -> Option<usize> {
    if n.is_empty() {
        return Some(0);
    }
    if n.len() > h.len() {
        return None;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: both pointers/lengths describe live slices; memmem only reads them.
        let p = unsafe { libc::memmem(h.as_ptr().cast(), h.len(), n.as_ptr().cast(), n.len()) };
        if p.is_null() {
            None
        } else {
            Some(p as usize - h.as_ptr() as usize)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        h.windows(n.len()).position(|w| w == n)
    }
}

/// Generic search over code units (mixed or UTF-16 representations).
fn find_units<A, B>(h: &[A], n: &[B]) -> Option<usize>
where
    A: Copy + Into<u16>,
    B: Copy + Into<u16>,
{
    if n.is_empty() {
        return Some(0);
    }
    if n.len() > h.len() {
        return None;
    }
    let first: u16 = n[0].into();
    let last = h.len() - n.len();
    let mut i = 0;
    while i <= last {
        if h[i].into() == first
            && h[i + 1..i + n.len()]
                .iter()
                .zip(&n[1..])
                .all(|(a, b)| (*a).into() == (*b).into())
        {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn index_of(h: JsStr<'_>, n: JsStr<'_>) -> Option<usize> {
    match (h.variant(), n.variant()) {
        (JsStrVariant::Latin1(h), JsStrVariant::Latin1(n)) => find_bytes(h, n),
        (JsStrVariant::Utf16(h), JsStrVariant::Utf16(n)) => find_units(h, n),
        (JsStrVariant::Utf16(h), JsStrVariant::Latin1(n)) => find_units(h, n),
        (JsStrVariant::Latin1(h), JsStrVariant::Utf16(n)) => find_units(h, n),
    }
}

/// `(this, [search])` when both are primitive strings and nothing else is passed.
fn simple_pair(this: &JsValue, args: &[JsValue]) -> Option<(JsString, JsString)> {
    if args.len() > 2 || args.get(1).is_some_and(|p| !p.is_undefined()) {
        return None;
    }
    Some((this.as_string()?, args.first()?.as_string()?))
}

fn includes(
    this: &JsValue,
    args: &[JsValue],
    orig: &JsObject,
    ctx: &mut Context,
) -> JsResult<JsValue> {
    match simple_pair(this, args) {
        Some((h, n)) => Ok(index_of(h.as_str(), n.as_str()).is_some().into()),
        None => orig.call(this, args, ctx),
    }
}

fn index_of_fn(
    this: &JsValue,
    args: &[JsValue],
    orig: &JsObject,
    ctx: &mut Context,
) -> JsResult<JsValue> {
    match simple_pair(this, args) {
        Some((h, n)) => Ok(match index_of(h.as_str(), n.as_str()) {
            Some(i) => JsValue::from(i as f64),
            None => JsValue::from(-1),
        }),
        None => orig.call(this, args, ctx),
    }
}

fn to_lower_case(
    this: &JsValue,
    args: &[JsValue],
    orig: &JsObject,
    ctx: &mut Context,
) -> JsResult<JsValue> {
    if let Some(s) = this.as_string() {
        if let JsStrVariant::Latin1(bytes) = s.as_str().variant() {
            let needs = |b: u8| b.is_ascii_uppercase() || (0xC0..=0xDE).contains(&b) && b != 0xD7;
            let Some(first) = bytes.iter().position(|&b| needs(b)) else {
                return Ok(s.into());
            };
            let mut out = bytes.to_vec();
            for b in &mut out[first..] {
                if needs(*b) {
                    *b += 0x20;
                }
            }
            return Ok(JsString::from(JsStr::latin1(&out)).into());
        }
    }
    orig.call(this, args, ctx)
}

type Fast = fn(&JsValue, &[JsValue], &JsObject, &mut Context) -> JsResult<JsValue>;

/// Replaces the methods on `String.prototype` of this context.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let proto = ctx.intrinsics().constructors().string().prototype();
    let methods: [(&str, usize, Fast); 3] = [
        ("includes", 1, includes),
        ("indexOf", 1, index_of_fn),
        ("toLowerCase", 0, to_lower_case),
    ];
    for (name, len, f) in methods {
        let key = JsString::from(name);
        let Some(orig) = proto.get(key.clone(), ctx)?.as_callable() else {
            continue;
        };
        let native = NativeFunction::from_copy_closure_with_captures(
            move |this, args, orig: &JsObject, ctx| f(this, args, orig, ctx),
            orig,
        );
        let func = super::js::fn_obj(ctx, name, native, len);
        proto.define_property_or_throw(
            key,
            PropertyDescriptor::builder()
                .value(func)
                .writable(true)
                .enumerable(false)
                .configurable(true),
            ctx,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search() {
        assert_eq!(find_bytes(b"hello world", b"world"), Some(6));
        assert_eq!(find_bytes(b"hello", b""), Some(0));
        assert_eq!(find_bytes(b"he", b"hello"), None);
        let h: Vec<u16> = "héllo wörld".encode_utf16().collect();
        assert_eq!(find_units(&h, b"llo".as_slice()), Some(2));
        assert_eq!(
            find_units(&h, &"wö".encode_utf16().collect::<Vec<_>>()),
            Some(6)
        );
        assert_eq!(find_units(b"abc".as_slice(), &[0x100u16]), None);
    }
}
