//! `fs.Stats` and `fs.Dirent` objects: what `statSync`, `lstatSync` and
//! `readdirSync({withFileTypes})` return, with the type tests (`isFile()`,
//! `isDirectory()`, …) read from hidden native data.

use super::{confined, denied, io_error, path_arg, read_ok, sandbox, Native};
use crate::core::confined::{Access, ConfinedError};
use crate::script::js::{fn_obj, state};
use boa_engine::gc::{empty_trace, Finalize, Trace};
use boa_engine::object::ObjectInitializer;
use boa_engine::property::{Attribute, PropertyDescriptor};
use boa_engine::{
    js_string, Context, JsData, JsObject, JsResult, JsString, JsValue, NativeFunction,
};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::time::UNIX_EPOCH;

/// Hidden native data of `Stats` / `Dirent` objects: the file type bits.
#[derive(Debug, Clone, Copy, JsData)]
struct FileKind {
    mode: u32,
}

impl Finalize for FileKind {}

// SAFETY: holds no garbage-collected values.
unsafe impl Trace for FileKind {
    empty_trace!();
}

fn kind_of(this: &JsValue) -> u32 {
    this.as_object()
        .and_then(|o| o.downcast_ref::<FileKind>().map(|k| k.mode))
        .unwrap_or(0)
        & libc::S_IFMT
}

macro_rules! kind_fn {
    ($name:ident, $flag:expr) => {
        fn $name(this: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
            Ok((kind_of(this) == $flag).into())
        }
    };
}
kind_fn!(is_file, libc::S_IFREG);
kind_fn!(is_directory, libc::S_IFDIR);
kind_fn!(is_symlink, libc::S_IFLNK);
kind_fn!(is_fifo, libc::S_IFIFO);
kind_fn!(is_socket, libc::S_IFSOCK);
kind_fn!(is_block, libc::S_IFBLK);
kind_fn!(is_char, libc::S_IFCHR);

fn date_getter(ms_key: &'static str) -> NativeFunction {
    NativeFunction::from_copy_closure(move |this, _, ctx| {
        let ms = match this.as_object() {
            Some(o) => o.get(JsString::from(ms_key), ctx)?,
            None => JsValue::undefined(),
        };
        let date = ctx.intrinsics().constructors().date().constructor();
        Ok(date.construct(&[ms], None, ctx)?.into())
    })
}

/// Prototype with `isFile()` & co. (and, for Stats, the Date getters).
fn proto(ctx: &mut Context, name: &'static str) -> JsObject {
    if let Some(p) = state(ctx).protos.borrow().get(name) {
        return p.clone();
    }
    let p = JsObject::with_object_proto(ctx.intrinsics());
    let methods: [(&str, Native); 7] = [
        ("isFile", is_file),
        ("isDirectory", is_directory),
        ("isSymbolicLink", is_symlink),
        ("isFIFO", is_fifo),
        ("isSocket", is_socket),
        ("isBlockDevice", is_block),
        ("isCharacterDevice", is_char),
    ];
    for (m, f) in methods {
        let func = fn_obj(ctx, m, NativeFunction::from_fn_ptr(f), 0);
        p.define_property_or_throw(
            JsString::from(m),
            PropertyDescriptor::builder()
                .value(func)
                .writable(true)
                .enumerable(false)
                .configurable(true),
            ctx,
        )
        .expect("fresh object");
    }
    if name == "Stats" {
        for (key, ms_key) in [
            ("atime", "atimeMs"),
            ("mtime", "mtimeMs"),
            ("ctime", "ctimeMs"),
            ("birthtime", "birthtimeMs"),
        ] {
            let getter = fn_obj(ctx, key, date_getter(ms_key), 0);
            p.define_property_or_throw(
                JsString::from(key),
                PropertyDescriptor::builder()
                    .get(getter)
                    .enumerable(false)
                    .configurable(true),
                ctx,
            )
            .expect("fresh object");
        }
    }
    let ctor = fn_obj(
        ctx,
        name,
        NativeFunction::from_fn_ptr(|_, _, _| Ok(JsValue::undefined())),
        0,
    );
    let _ = p.set(js_string!("constructor"), ctor, false, ctx);
    state(ctx).protos.borrow_mut().insert(name, p.clone());
    p
}

fn ms(t: io::Result<std::time::SystemTime>) -> f64 {
    match t {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs_f64() * 1000.0,
            Err(e) => -(e.duration().as_secs_f64() * 1000.0),
        },
        Err(_) => 0.0,
    }
}

fn stats_object(ctx: &mut Context, m: &fs::Metadata) -> JsValue {
    let proto = proto(ctx, "Stats");
    let ctime = m.ctime() as f64 * 1000.0 + (m.ctime_nsec() as f64 / 1e6);
    let birth = if m.created().is_ok() {
        ms(m.created())
    } else {
        ctime
    };
    let num = |x: u64| JsValue::from(x as f64);
    ObjectInitializer::with_native_data_and_proto(FileKind { mode: m.mode() }, proto, ctx)
        .property(js_string!("dev"), num(m.dev()), Attribute::all())
        .property(js_string!("mode"), m.mode(), Attribute::all())
        .property(js_string!("nlink"), num(m.nlink()), Attribute::all())
        .property(js_string!("uid"), m.uid(), Attribute::all())
        .property(js_string!("gid"), m.gid(), Attribute::all())
        .property(js_string!("rdev"), num(m.rdev()), Attribute::all())
        .property(js_string!("blksize"), num(m.blksize()), Attribute::all())
        .property(js_string!("ino"), num(m.ino()), Attribute::all())
        .property(js_string!("size"), num(m.size()), Attribute::all())
        .property(js_string!("blocks"), num(m.blocks()), Attribute::all())
        .property(js_string!("atimeMs"), ms(m.accessed()), Attribute::all())
        .property(js_string!("mtimeMs"), ms(m.modified()), Attribute::all())
        .property(js_string!("ctimeMs"), ctime, Attribute::all())
        .property(js_string!("birthtimeMs"), birth, Attribute::all())
        .build()
        .into()
}

/// `{ throwIfNoEntry: false }` turns ENOENT into `undefined`.
fn stat_result(
    ctx: &mut Context,
    r: io::Result<fs::Metadata>,
    syscall: &str,
    p: &str,
    opts: Option<&JsValue>,
) -> JsResult<JsValue> {
    match r {
        Ok(m) => Ok(stats_object(ctx, &m)),
        Err(e) => {
            if e.kind() == io::ErrorKind::NotFound {
                if let Some(o) = opts.and_then(JsValue::as_object) {
                    let t = o.get(js_string!("throwIfNoEntry"), ctx)?;
                    if !t.is_undefined() && !t.to_boolean() {
                        return Ok(JsValue::undefined());
                    }
                }
            }
            Err(io_error(ctx, &e, syscall, Some(p)))
        }
    }
}

pub(super) fn stat_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    read_ok(ctx, &p, "stat")?;
    let r = match sandbox(ctx).open_read(&p) {
        Ok((f, _)) => f.metadata(),
        Err(ConfinedError::Io(e)) => Err(e),
        Err(ConfinedError::Denied(d)) => return Err(denied(ctx, &d, "stat", &p)),
    };
    stat_result(ctx, r, "stat", &p, args.get(1))
}

pub(super) fn lstat_sync(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, 0, "path")?;
    let r = sandbox(ctx).name_in(&p, Access::Read);
    let (dir, name) = r.map_err(|e| confined(ctx, e, "lstat", &p))?;
    let r = dir.stat(&name);
    stat_result(ctx, r, "lstat", &p, args.get(1))
}

pub(super) fn dirent(ctx: &mut Context, name: &str, parent: &str, mode: u32) -> JsValue {
    let proto = proto(ctx, "Dirent");
    ObjectInitializer::with_native_data_and_proto(FileKind { mode }, proto, ctx)
        .property(js_string!("name"), JsString::from(name), Attribute::all())
        .property(
            js_string!("parentPath"),
            JsString::from(parent),
            Attribute::all(),
        )
        .property(js_string!("path"), JsString::from(parent), Attribute::all())
        .build()
        .into()
}

pub(super) fn file_type_mode(t: fs::FileType) -> u32 {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        libc::S_IFLNK
    } else if t.is_dir() {
        libc::S_IFDIR
    } else if t.is_file() {
        libc::S_IFREG
    } else if t.is_fifo() {
        libc::S_IFIFO
    } else if t.is_socket() {
        libc::S_IFSOCK
    } else if t.is_block_device() {
        libc::S_IFBLK
    } else if t.is_char_device() {
        libc::S_IFCHR
    } else {
        0
    }
}
