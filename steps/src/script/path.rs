//! `require('path')`: Node's POSIX `path` module, ported function by function
//! from Node's `lib/path.js` so results match for ordinary inputs. The pure
//! functions work on UTF-8 bytes; they only ever cut at `/` or `.` boundaries
//! or at the ends of complete characters, so the slices stay valid UTF-8.

use super::js::{arg_error, fn_obj, str_of};
use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{js_string, Context, JsArgs, JsObject, JsResult, JsValue, NativeFunction};

const SLASH: u8 = b'/';
const DOT: u8 = b'.';

fn slice(p: &str, a: usize, b: usize) -> String {
    String::from_utf8_lossy(&p.as_bytes()[a..b]).into_owned()
}

/// Node's `normalizeString` (POSIX flavour).
fn normalize_string(path: &str, allow_above_root: bool) -> String {
    let bytes = path.as_bytes();
    let mut res: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut last_segment_length: usize = 0;
    let mut last_slash: isize = -1;
    let mut dots: i32 = 0;
    let mut code: u8 = 0;
    let n = bytes.len();
    let mut i = 0usize;
    while i <= n {
        if i < n {
            code = bytes[i];
        } else if code == SLASH {
            break;
        } else {
            code = SLASH;
        }
        if code == SLASH {
            if last_slash == i as isize - 1 || dots == 1 {
                // no-op
            } else if dots == 2 {
                let ends_dotdot = res.len() >= 2
                    && last_segment_length == 2
                    && res[res.len() - 1] == DOT
                    && res[res.len() - 2] == DOT;
                if !ends_dotdot {
                    if res.len() > 2 {
                        match res.iter().rposition(|&c| c == SLASH) {
                            None => {
                                res.clear();
                                last_segment_length = 0;
                            }
                            Some(idx) => {
                                res.truncate(idx);
                                last_segment_length = match res.iter().rposition(|&c| c == SLASH) {
                                    Some(j) => res.len() - 1 - j,
                                    None => res.len(),
                                };
                            }
                        }
                        last_slash = i as isize;
                        dots = 0;
                        i += 1;
                        continue;
                    } else if !res.is_empty() {
                        res.clear();
                        last_segment_length = 0;
                        last_slash = i as isize;
                        dots = 0;
                        i += 1;
                        continue;
                    }
                }
                if allow_above_root {
                    if !res.is_empty() {
                        res.extend_from_slice(b"/..");
                    } else {
                        res.extend_from_slice(b"..");
                    }
                    last_segment_length = 2;
                }
            } else {
                let start = (last_slash + 1) as usize;
                if !res.is_empty() {
                    res.push(SLASH);
                }
                res.extend_from_slice(&bytes[start..i]);
                last_segment_length = i - start;
            }
            last_slash = i as isize;
            dots = 0;
        } else if code == DOT && dots != -1 {
            dots += 1;
        } else {
            dots = -1;
        }
        i += 1;
    }
    String::from_utf8_lossy(&res).into_owned()
}

pub fn normalize(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let is_abs = path.as_bytes()[0] == SLASH;
    let trailing = *path.as_bytes().last().unwrap() == SLASH;
    let mut p = normalize_string(path, !is_abs);
    if p.is_empty() {
        if is_abs {
            return "/".into();
        }
        return if trailing { "./".into() } else { ".".into() };
    }
    if trailing {
        p.push('/');
    }
    if is_abs {
        format!("/{p}")
    } else {
        p
    }
}

pub fn is_absolute(path: &str) -> bool {
    path.as_bytes().first() == Some(&SLASH)
}

pub fn join<S: AsRef<str>>(parts: &[S]) -> String {
    let kept: Vec<&str> = parts
        .iter()
        .map(|s| s.as_ref())
        .filter(|s| !s.is_empty())
        .collect();
    if kept.is_empty() {
        return ".".into();
    }
    normalize(&kept.join("/"))
}

/// `path.resolve(...parts)` with `cwd` standing in for `process.cwd()`.
pub fn resolve<S: AsRef<str>>(cwd: &str, parts: &[S]) -> String {
    let mut resolved = String::new();
    let mut absolute = false;
    let mut i = parts.len() as isize - 1;
    while i >= -1 && !absolute {
        let p = if i >= 0 {
            parts[i as usize].as_ref()
        } else {
            cwd
        };
        i -= 1;
        if p.is_empty() {
            continue;
        }
        resolved = format!("{p}/{resolved}");
        absolute = p.as_bytes()[0] == SLASH;
    }
    let r = normalize_string(&resolved, !absolute);
    if absolute {
        format!("/{r}")
    } else if r.is_empty() {
        ".".into()
    } else {
        r
    }
}

pub fn relative(cwd: &str, from: &str, to: &str) -> String {
    if from == to {
        return String::new();
    }
    let from = resolve(cwd, &[from]);
    let to = resolve(cwd, &[to]);
    if from == to {
        return String::new();
    }
    let f = from.as_bytes();
    let t = to.as_bytes();
    let from_start = 1usize;
    let from_end = f.len();
    let from_len = from_end - from_start;
    let to_start = 1usize;
    let to_len = t.len() - to_start;
    let length = from_len.min(to_len);
    let mut last_common_sep: isize = -1;
    let mut i = 0usize;
    while i < length {
        let c = f[from_start + i];
        if c != t[to_start + i] {
            break;
        } else if c == SLASH {
            last_common_sep = i as isize;
        }
        i += 1;
    }
    if i == length {
        if to_len > length {
            if t[to_start + i] == SLASH {
                return slice(&to, to_start + i + 1, t.len());
            }
            if i == 0 {
                return slice(&to, to_start + i, t.len());
            }
        } else if from_len > length {
            if f[from_start + i] == SLASH {
                last_common_sep = i as isize;
            } else if i == 0 {
                last_common_sep = 0;
            }
        }
    }
    let mut out = String::new();
    let mut j = (from_start as isize + last_common_sep + 1) as usize;
    while j <= from_end {
        if j == from_end || f[j] == SLASH {
            out.push_str(if out.is_empty() { ".." } else { "/.." });
        }
        j += 1;
    }
    let rest_start = (to_start as isize + last_common_sep) as usize;
    out.push_str(&slice(&to, rest_start, t.len()));
    out
}

pub fn dirname(path: &str) -> String {
    let b = path.as_bytes();
    if b.is_empty() {
        return ".".into();
    }
    let has_root = b[0] == SLASH;
    let mut end: isize = -1;
    let mut matched_slash = true;
    let mut i = b.len() - 1;
    while i >= 1 {
        if b[i] == SLASH {
            if !matched_slash {
                end = i as isize;
                break;
            }
        } else {
            matched_slash = false;
        }
        i -= 1;
    }
    if end == -1 {
        return if has_root { "/".into() } else { ".".into() };
    }
    if has_root && end == 1 {
        return "//".into();
    }
    slice(path, 0, end as usize)
}

pub fn basename(path: &str, suffix: Option<&str>) -> String {
    let b = path.as_bytes();
    let mut start = 0usize;
    let mut end: isize = -1;
    let mut matched_slash = true;
    if let Some(sfx) = suffix {
        let s = sfx.as_bytes();
        if !s.is_empty() && s.len() <= b.len() {
            if sfx == path {
                return String::new();
            }
            let mut ext_idx: isize = s.len() as isize - 1;
            let mut first_non_slash_end: isize = -1;
            let mut i = b.len() as isize - 1;
            while i >= 0 {
                let code = b[i as usize];
                if code == SLASH {
                    if !matched_slash {
                        start = i as usize + 1;
                        break;
                    }
                } else {
                    if first_non_slash_end == -1 {
                        matched_slash = false;
                        first_non_slash_end = i + 1;
                    }
                    if ext_idx >= 0 {
                        if code == s[ext_idx as usize] {
                            ext_idx -= 1;
                            if ext_idx == -1 {
                                end = i;
                            }
                        } else {
                            ext_idx = -1;
                            end = first_non_slash_end;
                        }
                    }
                }
                i -= 1;
            }
            if start as isize == end {
                end = first_non_slash_end;
            } else if end == -1 {
                end = b.len() as isize;
            }
            return slice(path, start, end.max(start as isize) as usize);
        }
    }
    let mut i = b.len() as isize - 1;
    while i >= 0 {
        if b[i as usize] == SLASH {
            if !matched_slash {
                start = i as usize + 1;
                break;
            }
        } else if end == -1 {
            matched_slash = false;
            end = i + 1;
        }
        i -= 1;
    }
    if end == -1 {
        return String::new();
    }
    slice(path, start, end as usize)
}

/// Shared scan of `extname` and `parse`: (startDot, startPart, end, preDotState).
fn scan_ext(b: &[u8], stop: usize) -> (isize, usize, isize, i32) {
    let mut start_dot: isize = -1;
    let mut start_part = 0usize;
    let mut end: isize = -1;
    let mut matched_slash = true;
    let mut pre_dot_state = 0;
    let mut i = b.len() as isize - 1;
    while i >= stop as isize {
        let code = b[i as usize];
        if code == SLASH {
            if !matched_slash {
                start_part = i as usize + 1;
                break;
            }
            i -= 1;
            continue;
        }
        if end == -1 {
            matched_slash = false;
            end = i + 1;
        }
        if code == DOT {
            if start_dot == -1 {
                start_dot = i;
            } else if pre_dot_state != 1 {
                pre_dot_state = 1;
            }
        } else if start_dot != -1 {
            pre_dot_state = -1;
        }
        i -= 1;
    }
    (start_dot, start_part, end, pre_dot_state)
}

fn no_ext(start_dot: isize, start_part: usize, end: isize, pre: i32) -> bool {
    start_dot == -1
        || end == -1
        || pre == 0
        || (pre == 1 && start_dot == end - 1 && start_dot == start_part as isize + 1)
}

pub fn extname(path: &str) -> String {
    let (start_dot, start_part, end, pre) = scan_ext(path.as_bytes(), 0);
    if no_ext(start_dot, start_part, end, pre) {
        return String::new();
    }
    slice(path, start_dot as usize, end as usize)
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub root: String,
    pub dir: String,
    pub base: String,
    pub ext: String,
    pub name: String,
}

pub fn parse(path: &str) -> Parsed {
    let mut ret = Parsed::default();
    let b = path.as_bytes();
    if b.is_empty() {
        return ret;
    }
    let is_abs = b[0] == SLASH;
    let stop = if is_abs {
        ret.root = "/".into();
        1
    } else {
        0
    };
    let (start_dot, start_part, end, pre) = scan_ext(b, stop);
    if end != -1 {
        let start = if start_part == 0 && is_abs {
            1
        } else {
            start_part
        };
        if start_dot == -1
            || pre == 0
            || (pre == 1 && start_dot == end - 1 && start_dot == start_part as isize + 1)
        {
            ret.base = slice(path, start, end as usize);
            ret.name = ret.base.clone();
        } else {
            ret.name = slice(path, start, start_dot as usize);
            ret.base = slice(path, start, end as usize);
            ret.ext = slice(path, start_dot as usize, end as usize);
        }
    }
    if start_part > 0 {
        ret.dir = slice(path, 0, start_part - 1);
    } else if is_abs {
        ret.dir = "/".into();
    }
    ret
}

pub fn format(dir: &str, root: &str, base: &str, name: &str, ext: &str) -> String {
    let dir = if dir.is_empty() { root } else { dir };
    let base = if base.is_empty() {
        let ext = if ext.is_empty() {
            String::new()
        } else if ext.starts_with('.') {
            ext.to_string()
        } else {
            format!(".{ext}")
        };
        format!("{name}{ext}")
    } else {
        base.to_string()
    };
    if dir.is_empty() {
        base
    } else if dir == root {
        format!("{dir}{base}")
    } else {
        format!("{dir}/{base}")
    }
}

// ---- JS bindings ----

fn all_strings(args: &[JsValue], name: &str) -> JsResult<Vec<String>> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            let n = if name == "paths" {
                format!("paths[{i}]")
            } else {
                name.to_string()
            };
            str_of(a, &n)
        })
        .collect()
}

fn cwd(ctx: &Context) -> String {
    super::js::state(ctx)
        .sandbox
        .cwd
        .to_string_lossy()
        .into_owned()
}

fn s(v: String) -> JsResult<JsValue> {
    Ok(js_string!(v.as_str()).into())
}

fn js_join(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    s(join(&all_strings(args, "path")?))
}
fn js_resolve(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    s(resolve(&cwd(ctx), &all_strings(args, "paths")?))
}
fn js_normalize(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    s(normalize(&str_of(args.get_or_undefined(0), "path")?))
}
fn js_relative(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let from = str_of(args.get_or_undefined(0), "from")?;
    let to = str_of(args.get_or_undefined(1), "to")?;
    s(relative(&cwd(ctx), &from, &to))
}
fn js_dirname(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    s(dirname(&str_of(args.get_or_undefined(0), "path")?))
}
fn js_basename(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let sfx = match args.get(1) {
        None => None,
        Some(v) if v.is_undefined() => None,
        Some(v) => Some(str_of(v, "suffix")?),
    };
    let p = str_of(args.get_or_undefined(0), "path")?;
    s(basename(&p, sfx.as_deref()))
}
fn js_extname(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    s(extname(&str_of(args.get_or_undefined(0), "path")?))
}
fn js_is_absolute(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(is_absolute(&str_of(args.get_or_undefined(0), "path")?).into())
}
fn js_identity(_: &JsValue, args: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(args.get_or_undefined(0).clone())
}
fn js_parse(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = parse(&str_of(args.get_or_undefined(0), "path")?);
    let o = ObjectInitializer::new(ctx)
        .property(
            js_string!("root"),
            js_string!(p.root.as_str()),
            Attribute::all(),
        )
        .property(
            js_string!("dir"),
            js_string!(p.dir.as_str()),
            Attribute::all(),
        )
        .property(
            js_string!("base"),
            js_string!(p.base.as_str()),
            Attribute::all(),
        )
        .property(
            js_string!("ext"),
            js_string!(p.ext.as_str()),
            Attribute::all(),
        )
        .property(
            js_string!("name"),
            js_string!(p.name.as_str()),
            Attribute::all(),
        )
        .build();
    Ok(o.into())
}
fn js_format(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(o) = args.get_or_undefined(0).as_object() else {
        return Err(arg_error("pathObject", "object", args.get_or_undefined(0)));
    };
    let mut field = |k: &str| -> JsResult<String> {
        let v = o.get(js_string!(k), ctx)?;
        if v.is_undefined() || v.is_null() {
            Ok(String::new())
        } else {
            Ok(v.to_string(ctx)?.to_std_string_lossy())
        }
    };
    let (dir, root, base, name, ext) = (
        field("dir")?,
        field("root")?,
        field("base")?,
        field("name")?,
        field("ext")?,
    );
    s(format(&dir, &root, &base, &name, &ext))
}

/// Builds the `path` module object.
pub(crate) fn module(ctx: &mut Context) -> JsObject {
    let funcs: [(&str, NativeFunction, usize); 11] = [
        ("join", NativeFunction::from_fn_ptr(js_join), 0),
        ("resolve", NativeFunction::from_fn_ptr(js_resolve), 0),
        ("normalize", NativeFunction::from_fn_ptr(js_normalize), 1),
        ("relative", NativeFunction::from_fn_ptr(js_relative), 2),
        ("dirname", NativeFunction::from_fn_ptr(js_dirname), 1),
        ("basename", NativeFunction::from_fn_ptr(js_basename), 2),
        ("extname", NativeFunction::from_fn_ptr(js_extname), 1),
        ("isAbsolute", NativeFunction::from_fn_ptr(js_is_absolute), 1),
        ("parse", NativeFunction::from_fn_ptr(js_parse), 1),
        ("format", NativeFunction::from_fn_ptr(js_format), 1),
        (
            "toNamespacedPath",
            NativeFunction::from_fn_ptr(js_identity),
            1,
        ),
    ];
    let obj = JsObject::with_object_proto(ctx.intrinsics());
    for (name, f, len) in funcs {
        let func = fn_obj(ctx, name, f, len);
        obj.set(js_string!(name), func, false, ctx)
            .expect("plain object");
    }
    for (k, v) in [("sep", "/"), ("delimiter", ":")] {
        obj.set(js_string!(k), js_string!(v), false, ctx)
            .expect("plain object");
    }
    obj.set(js_string!("posix"), obj.clone(), false, ctx)
        .expect("plain object");
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_node() {
        // Expected values produced by Node 20's path.posix.
        assert_eq!(join(&["a", "../b", "c/"]), "b/c/");
        assert_eq!(join(&["/a/b", "../../..", "x"]), "/x");
        assert_eq!(join(&["a", "", "b"]), "a/b");
        assert_eq!(join::<&str>(&[]), ".");
        assert_eq!(join(&["", ""]), ".");
        assert_eq!(join(&["..", "a"]), "../a");
        assert_eq!(join(&["./LifeOS", "Work"]), "LifeOS/Work");
        assert_eq!(normalize("/foo/bar//baz/asdf/quux/.."), "/foo/bar/baz/asdf");
        assert_eq!(normalize("./"), "./");
        assert_eq!(normalize(""), ".");
        assert_eq!(normalize("../../a/./b/"), "../../a/b/");
        assert_eq!(normalize("//a"), "/a");
        assert_eq!(relative("/", "/a/b", "/a/b/c/d.md"), "c/d.md");
        assert_eq!(
            relative("/", "/data/orandea/test/aaa", "/data/orandea/impl/bbb"),
            "../../impl/bbb"
        );
        assert_eq!(relative("/", "/a/b", "/a"), "..");
        assert_eq!(relative("/", "/a", "/a"), "");
        assert_eq!(relative("/", "/", "/a/b"), "a/b");
        assert_eq!(relative("/", "/a/b", "/"), "../..");
        assert_eq!(relative("/", "/a/bc", "/a/b"), "../b");
        assert_eq!(relative("/w", "./LifeOS", "LifeOS/Work/x.md"), "Work/x.md");
        assert_eq!(resolve("/w", &["/foo/bar", "./baz"]), "/foo/bar/baz");
        assert_eq!(resolve("/w", &["/foo/bar", "/tmp/file/"]), "/tmp/file");
        assert_eq!(resolve("/w/x", &["a", "../b"]), "/w/x/b");
        assert_eq!(resolve::<&str>("/w", &[]), "/w");
        assert_eq!(dirname("/a/b/"), "/a");
        assert_eq!(dirname("a"), ".");
        assert_eq!(dirname("/"), "/");
        assert_eq!(dirname("//a"), "//");
        assert_eq!(dirname("a/b"), "a");
        assert_eq!(basename("/a/b/quux.html", None), "quux.html");
        assert_eq!(basename("/a/b/quux.html", Some(".html")), "quux");
        assert_eq!(basename("/a/b/quux.HTML", Some(".html")), "quux.HTML");
        assert_eq!(basename("a/b/", None), "b");
        assert_eq!(basename("/", None), "");
        assert_eq!(basename("aaa/bbb", Some("bbb")), "bbb");
        assert_eq!(basename("aaa/bbb", Some("b")), "bb");
        assert_eq!(basename("/aaa/", Some("aaa")), "aaa");
        assert_eq!(basename("file.md/", Some(".md")), "file");
        assert_eq!(extname("index.html"), ".html");
        assert_eq!(extname("index.coffee.md"), ".md");
        assert_eq!(extname("index."), ".");
        assert_eq!(extname("index"), "");
        assert_eq!(extname(".index"), "");
        assert_eq!(extname(".index.md"), ".md");
        assert_eq!(extname("a/.."), "");
        assert_eq!(extname("é/ü.tar.gz"), ".gz");
        assert_eq!(
            parse("/home/user/dir/file.txt"),
            Parsed {
                root: "/".into(),
                dir: "/home/user/dir".into(),
                base: "file.txt".into(),
                ext: ".txt".into(),
                name: "file".into()
            }
        );
        assert_eq!(
            format("/home/user/dir", "", "file.txt", "", ""),
            "/home/user/dir/file.txt"
        );
        assert_eq!(format("", "/", "", "file", "txt"), "/file.txt");
    }
}
