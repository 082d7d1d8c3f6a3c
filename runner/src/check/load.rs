//! Loading a workflow for a command: when the file has errors, the
//! template errors of the steps that did load are found in the same pass,
//! so one `validate` shows every independent mistake (a misspelt key, an
//! unquoted `{{ }}` and a misspelt filter together), in file order.

use crate::diag::{Diagnostic, Severity};
use crate::format::model::{self, Loaded};
use crate::template::Templates;
use marktoflow_steps::Registry;
use std::path::Path;

/// [`model::load_file`], with the template errors of what loaded added to
/// the errors when there are any (a workflow that loads gets them from
/// [`crate::check::verify::verify`]).
pub fn load_file(path: &Path, registry: &Registry) -> Result<Loaded, Vec<Diagnostic>> {
    let text = model::read_text(path)?;
    let parts = model::load_parts(path, &text, registry);
    if parts.errors.is_empty() {
        return Ok(Loaded {
            workflow: parts.workflow,
            warnings: parts.warnings,
        });
    }
    let mut errors = parts.errors;
    // Only errors: warnings about names would be about the steps left out.
    for d in crate::check::lint::lint(&parts.workflow, &Templates::new()) {
        if d.severity == Severity::Error && !errors.contains(&d) {
            errors.push(d);
        }
    }
    errors.sort_by_key(|d| d.pos);
    Err(errors)
}
