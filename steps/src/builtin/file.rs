//! `file.read`, `file.write`, `file.list`, `file.exists`.
//!
//! Relative paths resolve against the workflow's folder (the engine sets the
//! sandbox's working directory for these actions; the peer used the process
//! cwd). Every path goes through the sandbox; writes are atomic.

use super::{display, Args};
use crate::core::args;
use crate::core::confined::ConfinedError;
use crate::core::files::shown;
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
};
use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::Path;

pub struct FileAction;

/// Files larger than this are not read whole into a workflow variable.
const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// `file.list` stops here rather than filling memory.
const MAX_LISTED: usize = 100_000;

#[async_trait]
impl Action for FileAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let action = call.action.to_string();
        let method = call.method.to_string();
        let sandbox = call.caps.sandbox.clone();
        // Disk work off the async threads.
        crate::core::blame::spawn_blocking(move || {
            let a = Args::new(args::spec_of(SPECS, &method, &action)?, &inputs)?;
            let sb = &sandbox;
            match method.as_str() {
                "read" => read(&a, sb),
                "write" => write(&a, sb),
                "list" => list(&a, sb),
                "exists" => exists(&a, sb),
                m => Err(ActionError::Input(format!("unknown method `file.{m}`"))),
            }
        })
        .await
        .map_err(|e| ActionError::failed(format!("file action stopped: {e}")))?
    }
}

fn denied(e: crate::core::sandbox::SandboxError) -> ActionError {
    ActionError::failed(e.to_string())
}

fn io_error(what: &str, path: &str, real: &Path, e: std::io::Error) -> ActionError {
    let why = match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or folder".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    };
    ActionError::failed(format!("cannot {what} {}: {why}", shown(path, real)))
}

fn read(a: &Args, sb: &crate::Sandbox) -> Result<Value, ActionError> {
    let path = a.required_str("path")?;
    let max = a.number("max_bytes")?.max(0.0) as u64;
    // Opened confined: the file read is the one the sandbox allowed.
    let (file, real) = sb
        .open_read(path)
        .map_err(|e| confined_error("read", path, sb, e))?;
    let meta = file
        .metadata()
        .map_err(|e| io_error("read", path, &real, e))?;
    if meta.is_dir() {
        return Err(ActionError::failed(format!(
            "cannot read {}: it is a folder (use `file.list`)",
            shown(path, &real)
        )));
    }
    if meta.len() > max {
        return Err(ActionError::failed(format!(
            "cannot read `{path}`: {} bytes is over the limit of {max} (set `max_bytes`)",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, max), &mut bytes)
        .map_err(|e| io_error("read", path, &real, e))?;
    let asked = a.is_given("encoding");
    let format = a.chosen("format")?;
    let mut encoding = a.chosen("encoding")?;
    // Bytes that are not text come back in base64 unless text was asked
    // for (as the peer returns binary files).
    if !asked && format == "text" && std::str::from_utf8(&bytes).is_err() {
        encoding = "base64";
    }
    let text = if encoding == "base64" {
        base64::engine::general_purpose::STANDARD.encode(&bytes)
    } else {
        String::from_utf8(bytes).map_err(|_| {
            ActionError::failed(format!(
                "cannot read `{path}` as text: it is not UTF-8 (use `encoding: base64`)"
            ))
        })?
    };
    let content = match format {
        "json" => serde_json::from_str(&text)
            .map_err(|e| ActionError::failed(format!("`{path}` is not valid JSON: {e}")))?,
        "yaml" => crate::core::yaml::read(&text)
            .map_err(|e| ActionError::failed(format!("`{path}` is not valid YAML: {e}")))?,
        _ => Value::String(text),
    };
    let encoding = if encoding == "base64" {
        "base64"
    } else {
        "utf-8"
    };
    // The peer's names for what the file was (it converts documents to
    // text; this runner returns their bytes, in base64).
    let ext = real
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let original = match ext.as_str() {
        "docx" | "doc" => "docx",
        "pdf" => "pdf",
        "xlsx" | "xls" => "xlsx",
        _ if encoding == "base64" => "binary",
        _ => "text",
    };
    let mut out = json!({"content": content, "path": real.to_string_lossy(), "size": meta.len(),
                         "encoding": encoding, "originalFormat": original});
    if encoding == "base64" {
        out["convertedFrom"] = json!("binary (base64 encoded)");
    }
    Ok(out)
}

fn write(a: &Args, sb: &crate::Sandbox) -> Result<Value, ActionError> {
    let path = a.required_str("path")?;
    let content = a.get("content").ok_or_else(|| a.missing("content"))?;
    let mut bytes = match (content, a.choice("encoding")?) {
        (Value::String(s), Some("base64")) => base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|e| a.invalid("content", format!("not base64: {e}")))?,
        (Value::String(s), _) => s.clone().into_bytes(),
        // Objects and lists are written as pretty JSON, as the peer does.
        (v, _) => {
            let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
            s.push('\n');
            s.into_bytes()
        }
    };
    let create_dirs = a.bool("create_dirs")?;
    let real = sb.check_write(path).map_err(denied)?;
    let parent = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    if !create_dirs && !parent.is_dir() {
        return Err(ActionError::failed(format!(
            "cannot write `{path}`: the folder `{}` does not exist (set `create_dirs: true`)",
            parent.display()
        )));
    }
    if a.bool("append")? {
        match sb.open_read(path) {
            Ok((f, _)) => {
                let mut old = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(f, DEFAULT_MAX_BYTES),
                    &mut old,
                )
                .map_err(|e| io_error("append to", path, &real, e))?;
                old.append(&mut bytes);
                bytes = old;
            }
            Err(ConfinedError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(confined_error("append to", path, sb, e)),
        }
    }
    // Folders made and the file replaced through descriptors opened inside
    // the write roots: nothing lands outside even if a folder is swapped.
    sb.write_atomic(path, &bytes, create_dirs)
        .map_err(|e| confined_error("write", path, sb, e))?;
    Ok(json!({"path": real.to_string_lossy(), "bytes": bytes.len()}))
}

/// A confined operation's error as the step reports it.
fn confined_error(what: &str, path: &str, sb: &crate::Sandbox, e: ConfinedError) -> ActionError {
    match e {
        ConfinedError::Denied(d) => denied(d),
        ConfinedError::Io(e) => io_error(what, path, &sb.absolute(path), e),
    }
}

fn list(a: &Args, sb: &crate::Sandbox) -> Result<Value, ActionError> {
    let dir = a.str("path")?.unwrap_or(".");
    let real = sb.check_read(dir).map_err(denied)?;
    if !real.is_dir() {
        return Err(ActionError::failed(format!(
            "cannot list {}: {}",
            shown(dir, &real),
            if real.exists() {
                "not a folder"
            } else {
                "no such folder"
            }
        )));
    }
    let pattern = a.str("pattern")?;
    let recursive = a
        .flag("recursive")?
        .unwrap_or_else(|| pattern.is_some_and(|p| p.contains("**") || p.contains('/')));
    let matcher = match pattern {
        Some(p) => Some(
            globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| a.invalid("pattern", e))?
                .compile_matcher(),
        ),
        None => None,
    };
    let opts = crate::core::walk::WalkOptions {
        extensions: Vec::new(),
        respect_ignore_files: a.bool("respect_ignore_files")?,
        include_hidden: a.bool("include_hidden")?,
        // Links are listed like files; those leading out of the roots are
        // dropped below.
        follow_links: true,
        max_depth: if recursive { None } else { Some(1) },
        include_dirs: a.bool("include_dirs")?,
    };
    let with_stat = a.bool("stat")?;
    let found = crate::core::walk::walk(&real, &opts)
        .map_err(|e| ActionError::failed(format!("cannot list {}: {e}", shown(dir, &real))))?;
    let mut files = Vec::new();
    for e in found {
        if matcher
            .as_ref()
            .is_some_and(|m| !m.is_match(Path::new(&e.rel_path)))
        {
            continue;
        }
        if sb.check_read(&e.abs_path.to_string_lossy()).is_err() {
            continue;
        }
        if files.len() >= MAX_LISTED {
            return Err(ActionError::failed(format!(
                "`{dir}` holds more than {MAX_LISTED} entries: narrow it with `pattern`"
            )));
        }
        if with_stat {
            files.push(json!({"path": e.rel_path, "is_dir": e.is_dir, "size": e.size, "mtime_ms": e.mtime_ms}));
        } else {
            files.push(json!(e.rel_path));
        }
    }
    Ok(json!({"count": files.len(), "files": files}))
}

fn exists(a: &Args, sb: &crate::Sandbox) -> Result<Value, ActionError> {
    let path = a.required("path")?;
    let Value::String(path) = path else {
        return Err(a.invalid(
            "path",
            format!("expected a string, got {}", type_name(path)),
        ));
    };
    // Outside the roots is an error, not `false`: a workflow cannot probe the disk.
    let real = sb.check_read(path).map_err(denied)?;
    // Asked of what a confined open reaches, not of the name.
    let meta = sb.open_read(path).ok().and_then(|(f, _)| f.metadata().ok());
    Ok(json!({
        "exists": meta.is_some(),
        "is_file": meta.as_ref().is_some_and(|m| m.is_file()),
        "is_dir": meta.as_ref().is_some_and(|m| m.is_dir()),
        "path": display(&json!(real.to_string_lossy())),
    }))
}

use crate::core::catalog::{
    alias, input, spec, Spec, ANY, BOOLEAN, EFFECTS, INTEGER, STRING, WRITES,
};

const READ_FORMATS: &[&str] = &["text", "json", "yaml"];
const ENCODINGS: &[&str] = &["utf-8", "utf8", "base64"];

/// The contracts of `file.*`.
pub const SPECS: &[Spec] = &[
    spec("file", "read", "Reads a file.")
        .inputs(&[
            input(
                "path",
                STRING,
                "The file, relative to the workflow's folder.",
            )
            .required(),
            input("format", STRING, "How to read it.")
                .default("text")
                .one_of(READ_FORMATS),
            input("encoding", STRING, "utf-8, or base64 for bytes.")
                .default("utf-8")
                .one_of(ENCODINGS),
            input("max_bytes", INTEGER, "Refuse larger files.").default("67108864"),
        ])
        .returns("{content, path, size, encoding, originalFormat, convertedFrom?}")
        .traits(EFFECTS),
    spec("file", "write", "Writes a file atomically.")
        .inputs(&[
            input("path", STRING, "The file, below an `--allow-write` folder.").required(),
            input(
                "content",
                ANY,
                "Text; a mapping or list is written as pretty JSON.",
            )
            .required(),
            alias("data", "content"),
            input("encoding", STRING, "base64: `content` is bytes in base64.").one_of(ENCODINGS),
            input("create_dirs", BOOLEAN, "Create missing folders.").default("false"),
            alias("createDirectory", "create_dirs"),
            input("append", BOOLEAN, "Add to the end instead of replacing.").default("false"),
        ])
        .returns("{path, bytes}")
        .traits(WRITES),
    spec("file", "list", "Lists a folder.")
        .inputs(&[
            input("path", STRING, "The folder.").default("."),
            alias("dir", "path"),
            input("pattern", STRING, "A glob, e.g. `**/*.md`."),
            input(
                "recursive",
                BOOLEAN,
                "Go down folders (default: when the pattern has `/` or `**`).",
            ),
            input("include_dirs", BOOLEAN, "List folders too.").default("false"),
            input("include_hidden", BOOLEAN, "List dot-files.").default("false"),
            input(
                "respect_ignore_files",
                BOOLEAN,
                "Leave out what `.gitignore`, `.ignore` and `.marktoflowignore` exclude.",
            )
            .default("false"),
            input(
                "stat",
                BOOLEAN,
                "Give {path, is_dir, size, mtime_ms} per entry.",
            )
            .default("false"),
        ])
        .returns("{count, files}")
        .traits(EFFECTS),
    spec("file", "exists", "Whether a path exists.")
        .inputs(&[input("path", STRING, "The path.").required()])
        .returns("{exists, is_file, is_dir, path}")
        .traits(EFFECTS),
];
