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
    #[error(
        "access denied: `{path}` is {what}; no workflow reads or writes it, whatever the roots"
    )]
    Protected { path: String, what: &'static str },
}

/// What no workflow reads or writes, whatever its roots: marktoflow's own
/// state (other runs' inputs and outputs, journals, memory, indexes of
/// other notes) and `.env` files (secrets), wherever they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Protected {
    /// Folders nothing under which is read or written (the state folder,
    /// the per-user data folder).
    pub trees: Vec<PathBuf>,
    /// Files that, with the files and folders beside them named after
    /// them (`runs.db-wal`, `runs.db.pending/`), are neither read nor
    /// written (a run store outside the state folder).
    pub files: Vec<PathBuf>,
    /// Folders inside `trees` that may still be read (downloaded models).
    pub readable: Vec<PathBuf>,
}

impl Protected {
    /// Why `real` (a canonical path) is protected, if it is.
    fn reason(&self, real: &Path, write: bool) -> Option<&'static str> {
        let name = real.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == ".env" || name.starts_with(".env.") {
            return Some("a `.env` file");
        }
        if self.trees.iter().any(|t| real.starts_with(t))
            && (write || !self.readable.iter().any(|r| real.starts_with(r)))
        {
            return Some("in marktoflow's state folder");
        }
        let named_after = |f: &PathBuf| {
            let (Some(dir), Some(stem)) = (f.parent(), f.file_name().and_then(|n| n.to_str()))
            else {
                return false;
            };
            real.ancestors().any(|a| {
                a.parent() == Some(dir)
                    && a.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n == stem
                            || n.strip_prefix(stem)
                                .is_some_and(|rest| rest.starts_with(['-', '.']))
                    })
            })
        };
        if self.files.iter().any(named_after) {
            return Some("part of the run store");
        }
        None
    }
}

/// The roots, as given (made absolute and canonical where they exist).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sandbox {
    /// Directory that relative paths resolve against (Node's `process.cwd()`).
    pub cwd: PathBuf,
    pub read_roots: Vec<PathBuf>,
    pub write_roots: Vec<PathBuf>,
    /// Refused whatever the roots (see [`Protected`]).
    #[serde(default)]
    pub protected: Protected,
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
            protected: Protected::default(),
        }
    }

    /// This sandbox refusing `protected` too (paths made canonical).
    pub fn protecting(mut self, protected: Protected) -> Self {
        let canon = |v: Vec<PathBuf>| -> Vec<PathBuf> {
            v.iter()
                .map(|p| canonical_or_absolute(&self.cwd, p))
                .collect()
        };
        self.protected = Protected {
            trees: canon(protected.trees),
            files: canon(protected.files),
            readable: canon(protected.readable),
        };
        self
    }

    fn refuse_protected(&self, p: &str, real: &Path, write: bool) -> Result<(), SandboxError> {
        match self.protected.reason(real, write) {
            Some(what) => Err(SandboxError::Protected {
                path: p.to_string(),
                what,
            }),
            None => Ok(()),
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
        self.refuse_protected(p, &real, false)?;
        if within(&real, &self.read_roots) || within(&real, &self.write_roots) {
            Ok(real)
        } else {
            Err(SandboxError::ReadDenied {
                path: p.to_string(),
                roots: self.list_roots(self.read_roots.iter().chain(&self.write_roots)),
            })
        }
    }

    /// Checks that `p` may be written (the file itself may not exist yet).
    pub fn check_write(&self, p: &str) -> Result<PathBuf, SandboxError> {
        let real = real_path(&self.absolute(p));
        self.refuse_protected(p, &real, true)?;
        if within(&real, &self.write_roots) {
            Ok(real)
        } else {
            Err(SandboxError::WriteDenied {
                path: p.to_string(),
                roots: self.list_roots(self.write_roots.iter()),
            })
        }
    }
}

impl Sandbox {
    /// The roots as a refusal shows them: relative to the working folder,
    /// and for a root outside it only its last name (`…/notes`), so that a
    /// refusal sent to a caller over the network does not map the server's
    /// disk.
    fn list_roots<'a>(&self, roots: impl Iterator<Item = &'a PathBuf>) -> String {
        let cwd = real_path(&self.cwd);
        let v: Vec<String> = roots
            .map(|r| {
                let shown = match r.strip_prefix(&cwd) {
                    Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
                    Ok(rel) => rel.display().to_string(),
                    Err(_) => format!(
                        "…/{}",
                        r.file_name()
                            .map(|n| n.to_string_lossy())
                            .unwrap_or_default()
                    ),
                };
                format!("`{shown}`")
            })
            .collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
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
    fn a_refusal_names_the_roots_without_the_servers_absolute_paths() {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path().join("srv");
        let elsewhere = d.path().join("private").join("notes");
        std::fs::create_dir_all(cwd.join("vault")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let sb = Sandbox::new(
            cwd.clone(),
            vec![cwd.join("vault"), elsewhere, cwd.clone()],
            Vec::new(),
        );
        let e = sb.check_read("/etc/hostname").unwrap_err();
        assert_eq!(
            e.to_string(),
            "access denied: `/etc/hostname` is outside the allowed read roots (`vault`, `…/notes`, `.`); allow it with `--allow-read DIR`"
        );
        let e = sb.check_write("x.txt").unwrap_err();
        assert_eq!(
            e.to_string(),
            "access denied: `x.txt` is outside the allowed write roots (none); allow it with `--allow-write DIR`"
        );
    }

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

    #[test]
    fn state_store_and_env_files_are_refused_whatever_the_roots() {
        let dir = std::env::temp_dir().join(format!("mtf-sbx-prot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".marktoflow/kb")).unwrap();
        std::fs::create_dir_all(dir.join("home/models/m")).unwrap();
        std::fs::create_dir_all(dir.join("runs.db.pending")).unwrap();
        std::fs::write(dir.join(".env"), "KEY=s").unwrap();
        std::fs::write(dir.join("notes.md"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join(".env"), dir.join("innocent.txt")).unwrap();
        let sb =
            Sandbox::new(dir.clone(), vec![dir.clone()], vec![dir.clone()]).protecting(Protected {
                trees: vec![dir.join(".marktoflow"), dir.join("home")],
                files: vec![dir.join("runs.db")],
                readable: vec![dir.join("home/models")],
            });
        assert!(sb.check_read("notes.md").is_ok());
        assert!(sb.check_write("out/new.md").is_ok());
        for p in [
            ".env",
            "sub/.env.local",
            "innocent.txt",
            ".marktoflow/runs.db",
            ".marktoflow/kb/x/index",
            "home/runs.db",
            "runs.db",
            "runs.db-wal",
            "runs.db.pending/0001.jsonl",
            "runs.db.owners/t",
        ] {
            let read = sb.check_read(p);
            assert!(
                matches!(read, Err(SandboxError::Protected { .. })),
                "{p}: {read:?}"
            );
            assert!(sb.check_write(p).is_err(), "{p}");
        }
        // Downloaded models may be read, not written.
        assert!(sb.check_read("home/models/m").is_ok());
        assert!(sb.check_write("home/models/m/x").is_err());
        // Only names made from the store's: `runs.dbx` is another file.
        assert!(sb.check_read("runs.dbx").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
