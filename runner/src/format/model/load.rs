//! Loading: a file or a text into a [`Workflow`] or every problem found.

use super::{Cx, Workflow};
use crate::diag::{Diagnostic, Source};
use crate::format::document::parse_document;
use marktoflow_steps::registry::Registry;
use std::path::Path;

/// A loaded workflow and the warnings found while loading it.
pub struct Loaded {
    pub workflow: Workflow,
    pub warnings: Vec<Diagnostic>,
}

/// Reads and checks a workflow file. Errors are all the problems found.
pub fn load_file(path: &Path, registry: &Registry) -> Result<Loaded, Vec<Diagnostic>> {
    load_str(path, &read_text(path)?, registry)
}

/// A workflow file's text, or why it cannot be read.
pub fn read_text(path: &Path) -> Result<String, Vec<Diagnostic>> {
    let text = std::fs::read(path).map_err(|e| {
        vec![Diagnostic::file_error(
            &path.display().to_string(),
            format!("cannot read workflow file: {}", io_reason(&e)),
        )]
    })?;
    String::from_utf8(text).map_err(|e| {
        vec![Diagnostic::file_error(
            &path.display().to_string(),
            format!(
                "workflow file is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )]
    })
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

pub fn load_str(path: &Path, text: &str, registry: &Registry) -> Result<Loaded, Vec<Diagnostic>> {
    let parts = load_parts(path, text, registry);
    if parts.errors.is_empty() {
        Ok(Loaded {
            workflow: parts.workflow,
            warnings: parts.warnings,
        })
    } else {
        Err(parts.errors)
    }
}

/// What loading found, errors or not: the workflow as far as it could be
/// read (a step with an error is left out), so later checks can look at
/// the rest in the same pass.
pub struct Parts {
    pub workflow: Workflow,
    /// In file order.
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

pub fn load_parts(path: &Path, text: &str, registry: &Registry) -> Parts {
    let src = Source::new(path, text);
    let doc = parse_document(src.clone());
    let mut cx = Cx {
        src: src.clone(),
        registry,
        errors: Vec::new(),
        warnings: Vec::new(),
        tools: Vec::new(),
        ids: Vec::new(),
        sdk_unknown: Vec::new(),
        sdk_reported: Default::default(),
    };
    let wf = cx.workflow(&doc);
    for (name, pos, sdk) in std::mem::take(&mut cx.sdk_unknown) {
        if !cx.sdk_reported.contains(&name) {
            let e = marktoflow_steps::registry::unsupported_sdk(&name, &sdk, registry.sdks());
            let mut d = Diagnostic::warning(
                &cx.src,
                Some(pos),
                format!("{}; steps that use it will be rejected", e.message),
            );
            d.hints.extend(e.hint);
            cx.warnings.push(d);
        }
    }
    cx.errors.sort_by_key(|d| d.pos);
    Parts {
        workflow: wf,
        errors: cx.errors,
        warnings: cx.warnings,
    }
}

pub use marktoflow_steps::core::yaml::to_json as yaml_to_json;
