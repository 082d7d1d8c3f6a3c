//! Source files, positions, and diagnostics that point into the `.md` file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A workflow file's text, with line starts for position lookups.
#[derive(Debug)]
pub struct Source {
    pub path: PathBuf,
    /// The path as the user should see it (as given on the command line).
    pub name: String,
    /// Text with CRLF/CR normalised to LF (line numbers are unchanged).
    pub text: String,
    line_starts: Vec<usize>,
    /// The text's sha256, once asked for (a server records it with every
    /// run it starts).
    digest: std::sync::OnceLock<String>,
}

impl Source {
    pub fn new(path: &Path, text: &str) -> Arc<Source> {
        let text = if text.contains('\r') {
            text.replace("\r\n", "\n").replace('\r', "\n")
        } else {
            text.to_string()
        };
        let text = text
            .strip_prefix('\u{feff}')
            .map(str::to_string)
            .unwrap_or(text);
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Arc::new(Source {
            path: path.to_path_buf(),
            name: path.display().to_string(),
            text,
            line_starts,
            digest: std::sync::OnceLock::new(),
        })
    }

    /// The sha256 of the text, in hex.
    pub fn digest(&self) -> &str {
        self.digest.get_or_init(|| {
            use sha2::{Digest, Sha256};
            let mut hex = String::with_capacity(64);
            for b in Sha256::digest(self.text.as_bytes()) {
                let _ = write!(hex, "{b:02x}");
            }
            hex
        })
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn pos_of(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let line_idx = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line_idx];
        let col = self.text[start..offset].chars().count() + 1;
        Pos {
            line: line_idx + 1,
            col,
        }
    }

    /// Byte offset where 1-based `line` starts.
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(self.text.len())
    }

    /// The text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> Option<&str> {
        let start = *self.line_starts.get(line.checked_sub(1)?)?;
        let end = self
            .line_starts
            .get(line)
            .map(|e| e - 1)
            .unwrap_or(self.text.len());
        self.text.get(start..end)
    }
}

/// A 1-based position in the `.md` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A message about a place in a workflow file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub pos: Option<Pos>,
    pub message: String,
    /// The source line the position points at.
    pub line_text: Option<String>,
    pub hints: Vec<String>,
}

impl Diagnostic {
    pub fn error(src: &Source, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, src, pos, message)
    }
    pub fn warning(src: &Source, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, src, pos, message)
    }
    fn new(severity: Severity, src: &Source, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            file: src.name.clone(),
            pos,
            message: message.into(),
            line_text: pos.and_then(|p| src.line_text(p.line)).map(str::to_string),
            hints: Vec::new(),
        }
    }
    /// A diagnostic about a file as a whole (not found, unreadable).
    pub fn file_error(file: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            pos: None,
            message: message.into(),
            line_text: None,
            hints: Vec::new(),
        }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// `file:line:col: error: message`, the source line, a caret, then hints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match self.pos {
            Some(p) => {
                let _ = write!(
                    out,
                    "{}:{}:{}: {kind}: {}",
                    self.file, p.line, p.col, self.message
                );
            }
            None => {
                let _ = write!(out, "{}: {kind}: {}", self.file, self.message);
            }
        }
        if let (Some(p), Some(text)) = (self.pos, &self.line_text) {
            let num = p.line.to_string();
            let pad = " ".repeat(num.len());
            let shown: String = text
                .chars()
                .map(|c| if c == '\t' { ' ' } else { c })
                .collect();
            let caret_pad = " ".repeat(p.col.saturating_sub(1).min(shown.chars().count()));
            let _ = write!(out, "\n{pad} |\n{num} | {shown}\n{pad} | {caret_pad}^");
        }
        for h in &self.hints {
            let _ = write!(out, "\n  = hint: {h}");
        }
        out
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

pub use marktoflow_steps::core::catalog::surely_meant;
pub use marktoflow_steps::registry::closest as did_you_mean;
