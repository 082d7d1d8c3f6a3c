//! `require('fs')`: the synchronous subset of Node's `fs` that workflow
//! scripts use, implemented natively and confined to the run's [`Sandbox`].
//!
//! Differences from Node, on purpose:
//! - there is no `Buffer`: `readFileSync` always returns a string (UTF-8 when
//!   no encoding is given; `latin1`/`binary`, `ascii`, `base64` and `hex` are
//!   also understood);
//! - `readdirSync` returns names sorted by byte value (like `ls` in the C
//!   locale), so scripts are deterministic;
//! - `fs.promises` / `require('fs/promises')` are the same functions returning
//!   already-settled promises; callback-style `fs.readFile(p, cb)` is absent.
//!
//! Every path goes through [`Sandbox::check_read`] / [`Sandbox::check_write`];
//! a refusal throws an `Error` with `.code = 'EACCES'` and the sandbox's
//! message. I/O failures throw Node-shaped errors (`ENOENT: no such file or
//! directory, open 'x'` with `errno`, `code`, `syscall`, `path`).

mod stats;

use super::js::{arg_error, error_with, fn_obj, jstr, state};
use crate::core::confined::{Access, ConfinedError};
use crate::core::sandbox::{Sandbox, SandboxError};
use boa_engine::object::builtins::{JsArray, JsPromise};
use boa_engine::{
    js_string, Context, JsError, JsObject, JsResult, JsString, JsValue, NativeFunction,
};
use stats::{dirent, file_type_mode, lstat_sync, stat_sync};
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

// ---- errors ----

fn errno_info(code: i32) -> (&'static str, &'static str) {
    match code {
        libc::ENOENT => ("ENOENT", "no such file or directory"),
        libc::EACCES => ("EACCES", "permission denied"),
        libc::EEXIST => ("EEXIST", "file already exists"),
        libc::ENOTDIR => ("ENOTDIR", "not a directory"),
        libc::EISDIR => ("EISDIR", "illegal operation on a directory"),
        libc::ENOTEMPTY => ("ENOTEMPTY", "directory not empty"),
        libc::EPERM => ("EPERM", "operation not permitted"),
        libc::ELOOP => ("ELOOP", "too many symbolic links encountered"),
        libc::ENAMETOOLONG => ("ENAMETOOLONG", "name too long"),
        libc::EINVAL => ("EINVAL", "invalid argument"),
        libc::EMFILE => ("EMFILE", "too many open files"),
        libc::EXDEV => ("EXDEV", "cross-device link not permitted"),
        libc::ENOSPC => ("ENOSPC", "no space left on device"),
        libc::EROFS => ("EROFS", "read-only file system"),
        libc::EBUSY => ("EBUSY", "resource busy or locked"),
        libc::EFBIG => ("EFBIG", "file too large"),
        libc::ENOMEM => ("ENOMEM", "not enough memory"),
        _ => ("EIO", "i/o error"),
    }
}

/// Node's error for a failed system call: `CODE: text, syscall 'path'`.
fn io_error(ctx: &mut Context, e: &io::Error, syscall: &str, path: Option<&str>) -> JsError {
    let errno = e.raw_os_error().unwrap_or(match e.kind() {
        io::ErrorKind::NotFound => libc::ENOENT,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        io::ErrorKind::AlreadyExists => libc::EEXIST,
        io::ErrorKind::OutOfMemory => libc::ENOMEM,
        _ => libc::EIO,
    });
    let (code, text) = errno_info(errno);
    let message = match path {
        Some(p) => format!("{code}: {text}, {syscall} '{p}'"),
        None => format!("{code}: {text}, {syscall}"),
    };
    let mut props = vec![
        ("errno", JsValue::from(-errno)),
        ("code", jstr(code)),
        ("syscall", jstr(syscall)),
    ];
    if let Some(p) = path {
        props.push(("path", jstr(p)));
    }
    error_with(ctx, message, &props)
}

fn denied(ctx: &mut Context, e: &SandboxError, syscall: &str, path: &str) -> JsError {
    error_with(
        ctx,
        format!("EACCES: {e}"),
        &[
            ("errno", JsValue::from(-libc::EACCES)),
            ("code", jstr("EACCES")),
            ("syscall", jstr(syscall)),
            ("path", jstr(path)),
        ],
    )
}

fn sandbox(ctx: &Context) -> &Sandbox {
    &state(ctx).sandbox
}

fn read_ok(ctx: &mut Context, p: &str, syscall: &str) -> JsResult<PathBuf> {
    let r = sandbox(ctx).check_read(p);
    r.map_err(|e| denied(ctx, &e, syscall, p))
}

fn write_ok(ctx: &mut Context, p: &str, syscall: &str) -> JsResult<PathBuf> {
    let r = sandbox(ctx).check_write(p);
    r.map_err(|e| denied(ctx, &e, syscall, p))
}

/// A confined operation's failure as Node would throw it.
fn confined(ctx: &mut Context, e: ConfinedError, syscall: &str, p: &str) -> JsError {
    match e {
        ConfinedError::Denied(d) => denied(ctx, &d, syscall, p),
        ConfinedError::Io(e) => io_error(ctx, &e, syscall, Some(p)),
    }
}

// ---- arguments ----

fn path_arg(args: &[JsValue], i: usize, name: &str) -> JsResult<String> {
    let v = args.get(i).cloned().unwrap_or_default();
    if let Some(s) = v.as_string() {
        return Ok(s.to_std_string_lossy());
    }
    Err(arg_error(
        name,
        "string or an instance of Buffer or URL",
        &v,
    ))
}

/// The `encoding` of an options argument (a string or `{ encoding }`).
fn encoding_arg(v: Option<&JsValue>, ctx: &mut Context) -> JsResult<Option<String>> {
    let Some(v) = v else { return Ok(None) };
    if let Some(s) = v.as_string() {
        return Ok(Some(s.to_std_string_lossy().to_ascii_lowercase()));
    }
    if let Some(o) = v.as_object() {
        let e = o.get(js_string!("encoding"), ctx)?;
        if let Some(s) = e.as_string() {
            return Ok(Some(s.to_std_string_lossy().to_ascii_lowercase()));
        }
    }
    Ok(None)
}

fn bool_opt(v: Option<&JsValue>, key: &str, ctx: &mut Context) -> JsResult<bool> {
    match v.and_then(JsValue::as_object) {
        Some(o) => Ok(o.get(JsString::from(key), ctx)?.to_boolean()),
        None => Ok(false),
    }
}

fn string_opt(v: Option<&JsValue>, key: &str, ctx: &mut Context) -> JsResult<Option<String>> {
    match v.and_then(JsValue::as_object) {
        Some(o) => {
            let x = o.get(JsString::from(key), ctx)?;
            Ok(x.as_string().map(|s| s.to_std_string_lossy()))
        }
        None => Ok(None),
    }
}

fn unknown_encoding(enc: &str) -> JsError {
    boa_engine::JsNativeError::typ()
        .with_message(format!("Unknown encoding: {enc}"))
        .into()
}

// ---- encodings ----

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(B64[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => continue,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn decode(bytes: Vec<u8>, enc: Option<&str>) -> JsResult<JsValue> {
    let s = match enc.unwrap_or("utf8") {
        "utf8" | "utf-8" => match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        },
        "latin1" | "binary" => bytes.iter().map(|&b| b as char).collect(),
        "ascii" => bytes.iter().map(|&b| (b & 0x7f) as char).collect(),
        "base64" => base64_encode(&bytes),
        "hex" => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        other => return Err(unknown_encoding(other)),
    };
    Ok(JsString::from(s.as_str()).into())
}

fn encode(s: &str, enc: Option<&str>) -> JsResult<Vec<u8>> {
    Ok(match enc.unwrap_or("utf8") {
        "utf8" | "utf-8" => s.as_bytes().to_vec(),
        "latin1" | "binary" | "ascii" => s.chars().map(|c| c as u32 as u8).collect(),
        "base64" => base64_decode(s),
        "hex" => s
            .as_bytes()
            .chunks(2)
            .map_while(|p| {
                std::str::from_utf8(p)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect(),
        other => return Err(unknown_encoding(other)),
    })
}

/// The data argument of write/append: strings as is, anything else `String(x)`.
fn data_arg(v: &JsValue, ctx: &mut Context) -> JsResult<String> {
    match v.as_string() {
        Some(s) => Ok(s.to_std_string_lossy()),
        None => Ok(v.to_string(ctx)?.to_std_string_lossy()),
    }
}

// ---- functions ----

fn read_file_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let enc = encoding_arg(args.get(1), ctx)?;
    let r = sandbox(ctx).open_read(&p);
    let (mut f, _) = r.map_err(|e| confined(ctx, e, "open", &p))?;
    let mut buf = Vec::with_capacity(f.metadata().map(|m| m.len() as usize + 1).unwrap_or(0));
    f.read_to_end(&mut buf)
        .map_err(|e| io_error(ctx, &e, "read", None))?;
    decode(buf, enc.as_deref())
}

fn write_common(args: &[JsValue], ctx: &mut Context, append: bool) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "file")?;
    let data = data_arg(args.get(1).unwrap_or(&JsValue::undefined()), ctx)?;
    let enc = encoding_arg(args.get(2), ctx)?;
    let flag = string_opt(args.get(2), "flag", ctx)?;
    let append = append || flag.is_some_and(|f| f.starts_with('a'));
    let bytes = encode(&data, enc.as_deref())?;
    if !append {
        // Whole or not at all, never truncated in place: a reader (or a
        // process that maps the file) sees the old file or the new one.
        sandbox(ctx)
            .write_atomic(&p, &bytes, false)
            .map_err(|e| confined(ctx, e, "open", &p))?;
        return Ok(JsValue::undefined());
    }
    let r = sandbox(ctx).parent_of(&p, Access::Write, false);
    let (dir, name, _) = r.map_err(|e| confined(ctx, e, "open", &p))?;
    let mut f = dir
        .open(
            &name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            0o666,
        )
        .map_err(|e| io_error(ctx, &e, "open", Some(&p)))?;
    f.write_all(&bytes)
        .map_err(|e| io_error(ctx, &e, "write", None))?;
    Ok(JsValue::undefined())
}

fn write_file_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    write_common(args, ctx, false)
}

fn append_file_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    write_common(args, ctx, true)
}

fn exists_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(p) = args.first().and_then(JsValue::as_string) else {
        return Ok(false.into());
    };
    let p = p.to_std_string_lossy();
    Ok(sandbox(ctx).open_read(&p).is_ok().into())
}

fn access_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let mode = match args.get(1) {
        Some(m) if !m.is_undefined() => m.to_u32(ctx)?,
        _ => 0,
    };
    if mode & 2 != 0 {
        write_ok(ctx, &p, "access")?;
    }
    let r = sandbox(ctx).open_read(&p);
    r.map_err(|e| confined(ctx, e, "access", &p))?;
    Ok(JsValue::undefined())
}

/// Sorted entries of a directory: (name, mode bits of the entry's type),
/// read through a confined open of it.
fn list_dir(sb: &Sandbox, p: &str) -> Result<Vec<(String, u32)>, ConfinedError> {
    let (dir, _) = sb.open_read(p)?;
    let via = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let mut out = Vec::new();
    for e in fs::read_dir(via)? {
        let e = e?;
        let mode = e.file_type().map(file_type_mode).unwrap_or(0);
        out.push((e.file_name().to_string_lossy().into_owned(), mode));
    }
    out.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

fn readdir_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let with_types = bool_opt(args.get(1), "withFileTypes", ctx)?;
    let recursive = bool_opt(args.get(1), "recursive", ctx)?;
    let real = read_ok(ctx, &p, "scandir")?;
    let r = list_dir(sandbox(ctx), &p);
    let entries = r.map_err(|e| confined(ctx, e, "scandir", &p))?;
    let mut items: Vec<JsValue> = Vec::with_capacity(entries.len());
    // (relative name, parent as the script sees it, mode); subdirectories are
    // visited breadth first, after the entries of their parent, like Node.
    let mut queue: std::collections::VecDeque<(String, PathBuf, String)> = Default::default();
    let push = |ctx: &mut Context,
                items: &mut Vec<JsValue>,
                rel_prefix: &str,
                parent_shown: &str,
                real_dir: &Path,
                entries: Vec<(String, u32)>,
                queue: &mut std::collections::VecDeque<(String, PathBuf, String)>| {
        for (name, mode) in entries {
            let rel = if rel_prefix.is_empty() {
                name.clone()
            } else {
                format!("{rel_prefix}/{name}")
            };
            if with_types {
                items.push(dirent(ctx, &name, parent_shown, mode));
            } else {
                items.push(JsString::from(rel.as_str()).into());
            }
            if recursive && mode == libc::S_IFDIR {
                let shown = super::path::join(&[parent_shown, name.as_str()]);
                queue.push_back((rel, real_dir.join(&name), shown));
            }
        }
    };
    push(ctx, &mut items, "", &p, &real, entries, &mut queue);
    while let Some((rel, dir, shown)) = queue.pop_front() {
        // Subdirectories are re-checked: a symlinked directory may lead out.
        if sandbox(ctx).check_read(&dir.to_string_lossy()).is_err() {
            continue;
        }
        if let Ok(entries) = list_dir(sandbox(ctx), &dir.to_string_lossy()) {
            push(ctx, &mut items, &rel, &shown, &dir, entries, &mut queue);
        }
    }
    Ok(JsArray::from_iter(items, ctx).into())
}

fn mkdir_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let recursive = bool_opt(args.get(1), "recursive", ctx)?;
    let real = write_ok(ctx, &p, "mkdir")?;
    if recursive {
        // Node returns the first directory it created (or undefined).
        let mut first: Option<PathBuf> = None;
        let mut cur = real.as_path();
        while !cur.exists() {
            first = Some(cur.to_path_buf());
            match cur.parent() {
                Some(parent) => cur = parent,
                None => break,
            }
        }
        let r = sandbox(ctx)
            .parent_of(&p, Access::Write, true)
            .and_then(|(dir, name, _)| Ok(dir.mkdir(&name)?));
        r.map_err(|e| confined(ctx, e, "mkdir", &p))?;
        Ok(match first {
            Some(f) => JsString::from(f.to_string_lossy().as_ref()).into(),
            None => JsValue::undefined(),
        })
    } else {
        let _ = real;
        let r = sandbox(ctx)
            .parent_of(&p, Access::Write, false)
            .and_then(|(dir, name, _)| {
                // Node's non-recursive mkdir fails on an existing path.
                if dir.stat(&name).is_ok() {
                    return Err(io::Error::from_raw_os_error(libc::EEXIST).into());
                }
                Ok(dir.mkdir(&name)?)
            });
        r.map_err(|e| confined(ctx, e, "mkdir", &p))?;
        Ok(JsValue::undefined())
    }
}

fn unlink_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let r = sandbox(ctx)
        .name_in(&p, Access::Write)
        .and_then(|(dir, name)| Ok(dir.remove(&name, false)?));
    r.map_err(|e| confined(ctx, e, "unlink", &p))?;
    Ok(JsValue::undefined())
}

fn rm_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let recursive = bool_opt(args.get(1), "recursive", ctx)?;
    let force = bool_opt(args.get(1), "force", ctx)?;
    let r = sandbox(ctx).name_in(&p, Access::Write);
    let (dir, name) = r.map_err(|e| confined(ctx, e, "rm", &p))?;
    let meta = match dir.stat(&name) {
        Ok(m) => m,
        Err(e) if force && e.kind() == io::ErrorKind::NotFound => return Ok(JsValue::undefined()),
        Err(e) => return Err(io_error(ctx, &e, "lstat", Some(&p))),
    };
    let r = if meta.is_dir() {
        if !recursive {
            return Err(error_with(
                ctx,
                format!("Path is a directory: rm returned EISDIR (is a directory) {p}"),
                &[("code", jstr("ERR_FS_EISDIR"))],
            ));
        }
        // std's remove_dir_all walks by descriptors; the path goes through
        // the folder opened above, so it cannot be redirected.
        fs::remove_dir_all(dir.fd_path(&name))
    } else {
        dir.remove(&name, false)
    };
    r.map_err(|e| io_error(ctx, &e, "rm", Some(&p)))?;
    Ok(JsValue::undefined())
}

fn rmdir_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let r = sandbox(ctx)
        .name_in(&p, Access::Write)
        .and_then(|(dir, name)| Ok(dir.remove(&name, true)?));
    r.map_err(|e| confined(ctx, e, "rmdir", &p))?;
    Ok(JsValue::undefined())
}

fn rename_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let from = path_arg(args, 0, "oldPath")?;
    let to = path_arg(args, 1, "newPath")?;
    let a = sandbox(ctx).name_in(&from, Access::Write);
    let (da, na) = a.map_err(|e| confined(ctx, e, "rename", &from))?;
    let b = sandbox(ctx).name_in(&to, Access::Write);
    let (db, nb) = b.map_err(|e| confined(ctx, e, "rename", &to))?;
    da.rename(&na, &db, &nb).map_err(|e| {
        let msg_path = format!("{from}' -> '{to}");
        io_error(ctx, &e, "rename", Some(&msg_path))
    })?;
    Ok(JsValue::undefined())
}

fn copy_file_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let from = path_arg(args, 0, "src")?;
    let to = path_arg(args, 1, "dest")?;
    let a = sandbox(ctx).open_read(&from);
    let (mut src, _) = a.map_err(|e| confined(ctx, e, "copyfile", &from))?;
    // Atomic, as a write is.
    let copied =
        sandbox(ctx).write_atomic_with(&to, false, |dst| io::copy(&mut src, dst).map(drop));
    copied.map_err(|e| confined(ctx, e, "copyfile", &to))?;
    Ok(JsValue::undefined())
}

fn realpath_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let real = read_ok(ctx, &p, "realpath")?;
    let canon = fs::canonicalize(&real).map_err(|e| io_error(ctx, &e, "realpath", Some(&p)))?;
    Ok(JsString::from(canon.to_string_lossy().as_ref()).into())
}

fn chmod_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let mode = args.get(1).cloned().unwrap_or_default();
    let mode = match mode.as_string() {
        Some(s) => u32::from_str_radix(&s.to_std_string_lossy(), 8).unwrap_or(0),
        None => mode.to_u32(ctx)?,
    };
    let r = sandbox(ctx).parent_of(&p, Access::Write, false);
    let (dir, name, _) = r.map_err(|e| confined(ctx, e, "chmod", &p))?;
    dir.open(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
        .and_then(|f| f.set_permissions(fs::Permissions::from_mode(mode)))
        .map_err(|e| io_error(ctx, &e, "chmod", Some(&p)))?;
    Ok(JsValue::undefined())
}

type Native = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

const SYNC: [(&str, &str, Native, usize); 16] = [
    ("readFileSync", "readFile", read_file_sync, 2),
    ("writeFileSync", "writeFile", write_file_sync, 3),
    ("appendFileSync", "appendFile", append_file_sync, 3),
    ("existsSync", "", exists_sync, 1),
    ("accessSync", "access", access_sync, 2),
    ("readdirSync", "readdir", readdir_sync, 2),
    ("statSync", "stat", stat_sync, 2),
    ("lstatSync", "lstat", lstat_sync, 2),
    ("mkdirSync", "mkdir", mkdir_sync, 2),
    ("unlinkSync", "unlink", unlink_sync, 1),
    ("rmSync", "rm", rm_sync, 2),
    ("rmdirSync", "rmdir", rmdir_sync, 2),
    ("renameSync", "rename", rename_sync, 2),
    ("copyFileSync", "copyFile", copy_file_sync, 3),
    ("realpathSync", "realpath", realpath_sync, 2),
    ("chmodSync", "chmod", chmod_sync, 2),
];

/// Wraps a sync function as `(...args) => Promise` settled with its outcome.
fn promised(f: Native) -> NativeFunction {
    NativeFunction::from_copy_closure(move |this, args, ctx| {
        let p = match f(this, args, ctx) {
            Ok(v) => JsPromise::resolve(v, ctx)?,
            Err(e) => JsPromise::reject(e, ctx)?,
        };
        Ok(p.into())
    })
}

/// `fs.promises` / `require('fs/promises')`.
pub(crate) fn promises_module(ctx: &mut Context) -> JsObject {
    let obj = JsObject::with_object_proto(ctx.intrinsics());
    for (_, name, f, len) in SYNC {
        if name.is_empty() {
            continue;
        }
        let func = fn_obj(ctx, name, promised(f), len);
        let _ = obj.set(JsString::from(name), func, false, ctx);
    }
    let c = constants(ctx);
    let _ = obj.set(js_string!("constants"), c, false, ctx);
    obj
}

fn constants(ctx: &mut Context) -> JsObject {
    let obj = JsObject::with_object_proto(ctx.intrinsics());
    for (k, v) in [("F_OK", 0), ("R_OK", 4), ("W_OK", 2), ("X_OK", 1)] {
        let _ = obj.set(JsString::from(k), v, false, ctx);
    }
    obj
}

/// The `fs` module object.
pub(crate) fn module(ctx: &mut Context) -> JsObject {
    let obj = JsObject::with_object_proto(ctx.intrinsics());
    for (name, _, f, len) in SYNC {
        if name.is_empty() {
            continue;
        }
        let func = fn_obj(ctx, name, NativeFunction::from_fn_ptr(f), len);
        let _ = obj.set(JsString::from(name), func, false, ctx);
    }
    let c = constants(ctx);
    for (k, v) in [("F_OK", 0), ("R_OK", 4), ("W_OK", 2), ("X_OK", 1)] {
        let _ = obj.set(JsString::from(k), v, false, ctx);
    }
    let _ = obj.set(js_string!("constants"), c, false, ctx);
    let promises = promises_module(ctx);
    let _ = obj.set(js_string!("promises"), promises, false, ctx);
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip() {
        for s in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e), s.as_bytes());
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
    }
}
