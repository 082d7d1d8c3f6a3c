//! Filesystem roots a workflow may read and write.
//!
//! Every path is resolved against the run's working directory, then
//! canonicalised (which follows symlinks and removes `..`) before it is compared
//! with the roots, so neither `..` nor a symlink can lead outside them.

use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SandboxError {
    #[error("access denied: `{path}` is outside the allowed read roots ({roots}); allow it with `--allow-read DIR`")]
    ReadDenied { path: String, roots: String },
    #[error("access denied: `{path}` is outside the allowed write roots ({roots}); allow it with `--allow-write DIR`")]
    WriteDenied { path: String, roots: String },
}

/// The roots, as given (made absolute and canonical where they exist).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sandbox {
    /// Directory that relative paths resolve against (Node's `process.cwd()`).
    pub cwd: PathBuf,
    pub read_roots: Vec<PathBuf>,
    pub write_roots: Vec<PathBuf>,
}

impl Sandbox {
    pub fn new(cwd: PathBuf, read_roots: Vec<PathBuf>, write_roots: Vec<PathBuf>) -> Self {
        let cwd = canonical_or_absolute(&cwd, &cwd);
        let canon = |roots: Vec<PathBuf>| {
            let mut out: Vec<PathBuf> = Vec::new();
            for r in roots {
                let c = canonical_or_absolute(&cwd, &r);
                if !out.contains(&c) {
                    out.push(c);
                }
            }
            out
        };
        let read_roots = canon(read_roots);
        let write_roots = canon(write_roots);
        Sandbox {
            cwd,
            read_roots,
            write_roots,
        }
    }

    /// A sandbox that allows nothing but has a working directory.
    pub fn closed(cwd: PathBuf) -> Self {
        Sandbox::new(cwd, Vec::new(), Vec::new())
    }

    /// `p` made absolute against `cwd` and normalised lexically (no disk access).
    pub fn absolute(&self, p: &str) -> PathBuf {
        normalize(&self.cwd.join(p))
    }

    /// Checks that `p` may be read; returns the canonical path to use.
    pub fn check_read(&self, p: &str) -> Result<PathBuf, SandboxError> {
        let real = real_path(&self.absolute(p));
        if within(&real, &self.read_roots) || within(&real, &self.write_roots) {
            Ok(real)
        } else {
            Err(SandboxError::ReadDenied {
                path: p.to_string(),
                roots: list_roots(self.read_roots.iter().chain(&self.write_roots)),
            })
        }
    }

    /// Checks that `p` may be written (the file itself may not exist yet).
    pub fn check_write(&self, p: &str) -> Result<PathBuf, SandboxError> {
        let real = real_path(&self.absolute(p));
        if within(&real, &self.write_roots) {
            Ok(real)
        } else {
            Err(SandboxError::WriteDenied {
                path: p.to_string(),
                roots: list_roots(self.write_roots.iter()),
            })
        }
    }
}

fn list_roots<'a>(roots: impl Iterator<Item = &'a PathBuf>) -> String {
    let v: Vec<String> = roots.map(|r| format!("`{}`", r.display())).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

fn within(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

fn canonical_or_absolute(cwd: &Path, p: &Path) -> PathBuf {
    real_path(&normalize(&cwd.join(p)))
}

/// Canonicalises the longest existing prefix of `p` (resolving symlinks there)
/// and appends the rest, so paths that do not exist yet are still judged by
/// where their existing ancestors really are.
pub fn real_path(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cur = p;
    while let Some(parent) = cur.parent() {
        if let Some(name) = cur.file_name() {
            rest.push(name);
        }
        if let Ok(c) = std::fs::canonicalize(parent) {
            let mut out = c;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return out;
        }
        cur = parent;
    }
    p.to_path_buf()
}

/// Lexical normalisation: removes `.` and resolves `..` against earlier parts.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotdot_and_symlinks_cannot_escape() {
        let dir = std::env::temp_dir().join(format!("mtf-sbx-{}", std::process::id()));
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.md"), "x").unwrap();
        std::fs::write(dir.join("secret.txt"), "s").unwrap();
        let _ = std::fs::remove_file(root.join("link"));
        std::os::unix::fs::symlink(dir.join("secret.txt"), root.join("link")).unwrap();
        let sb = Sandbox::new(root.clone(), vec![root.clone()], vec![root.join("sub")]);
        assert!(sb.check_read("sub/a.md").is_ok());
        assert!(sb.check_read("../secret.txt").is_err());
        assert!(sb.check_read("sub/../../secret.txt").is_err());
        assert!(sb.check_read("link").is_err());
        assert!(sb.check_read("/etc/passwd").is_err());
        assert!(sb.check_write("a.md").is_err());
        assert!(sb.check_write("sub/new/b.md").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
