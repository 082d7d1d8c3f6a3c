//! Opening files so that the file opened is the one the [`Sandbox`] allowed.
//!
//! Checking a path and then opening it by name again leaves a window: a
//! folder swapped for a symlink in between leads out of the roots. Here a
//! path is opened by walking from the root that holds it, one component at a
//! time, each opened relative to the previous one with `O_NOFOLLOW`; the
//! last step (open, create, rename, remove) is made relative to the folder
//! so reached. A component swapped for a symlink after the check makes the
//! walk fail (`ELOOP`/`ENOTDIR`) instead of leaving the roots. Symlinks that
//! stay inside the roots still work: the check resolved them, and the walk
//! follows the resolved path.

use crate::core::sandbox::{Sandbox, SandboxError};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a confined operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    #[error(transparent)]
    Denied(#[from] SandboxError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What a path is opened for: which roots may hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A folder opened inside the roots; names are resolved relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// Where it was when opened (for messages and `/proc/self/fd` paths).
    pub path: PathBuf,
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str())?;
    // SAFETY: `c` is a valid C string; the descriptor returned is owned here.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Dir {
    /// Opens the folder at `path` by its path: for a folder already checked
    /// (a root, a knowledge base), below which names are then confined.
    pub fn open_path(path: &Path) -> io::Result<Dir> {
        Ok(Dir {
            fd: open_dir_path(path)?,
            path: path.to_path_buf(),
        })
    }

    /// Reads the file at `rel` (`/`-separated, below this folder), never
    /// following a symlink on the way.
    pub fn read_rel(&self, rel: &str) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let Some(last) = parts.pop() else {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        };
        if parts.iter().chain([&last]).any(|p| *p == "." || *p == "..") {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut held: Option<Dir> = None;
        for p in parts {
            let next = held.as_ref().unwrap_or(self).subdir(OsStr::new(p))?;
            held = Some(next);
        }
        let mut f = held.as_ref().unwrap_or(self).open(
            OsStr::new(last),
            libc::O_RDONLY | libc::O_NONBLOCK,
            0,
        )?;
        let mut out = Vec::new();
        f.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Opens `name` inside this folder with `flags` (never following a
    /// symlink in `name`); `mode` for files it creates.
    pub fn open(&self, name: &OsStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
        let fd = self.openat(name, flags, mode)?;
        Ok(File::from(fd))
    }

    fn openat(&self, name: &OsStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        let c = cstr(name)?;
        // SAFETY: valid descriptor and C string; the result is owned here.
        let fd = check(unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The folder `name` inside this one.
    pub fn subdir(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.openat(name, libc::O_DIRECTORY | libc::O_RDONLY, 0)?,
            path: self.path.join(name),
        })
    }

    /// Creates the folder `name` (an existing one is fine).
    pub fn mkdir(&self, name: &OsStr) -> io::Result<()> {
        let c = cstr(name)?;
        // SAFETY: valid descriptor and C string.
        match check(unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o777) }) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes the file (or, with `dir`, the empty folder) `name`.
    pub fn remove(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let c = cstr(name)?;
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: valid descriptor and C string.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), flags) }).map(|_| ())
    }

    /// Renames `name` here to `to_name` in `to`.
    pub fn rename(&self, name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
        let (a, b) = (cstr(name)?, cstr(to_name)?);
        // SAFETY: valid descriptors and C strings.
        check(unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                a.as_ptr(),
                to.fd.as_raw_fd(),
                b.as_ptr(),
            )
        })
        .map(|_| ())
    }

    /// The metadata of `name` (of a symlink itself, not its target).
    pub fn stat(&self, name: &OsStr) -> io::Result<std::fs::Metadata> {
        // Opened without following, then asked: no path lookup outside.
        let f = self.open(name, libc::O_PATH, 0)?;
        f.metadata()
    }

    /// A path naming `name` through this open folder, for APIs that only
    /// take paths (SQLite): it cannot be redirected while the folder is open.
    #[cfg(target_os = "linux")]
    pub fn fd_path(&self, name: &OsStr) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).join(name)
    }
}

/// The root of `roots` that holds `real` (the longest), and the rest of the path.
fn split_root<'a>(real: &'a Path, roots: &'a [PathBuf]) -> Option<(&'a Path, &'a Path)> {
    roots
        .iter()
        .filter_map(|r| real.strip_prefix(r).ok().map(|rest| (r.as_path(), rest)))
        .max_by_key(|(r, _)| r.as_os_str().len())
}

impl Sandbox {
    fn roots(&self, access: Access) -> Vec<PathBuf> {
        match access {
            Access::Read => self
                .read_roots
                .iter()
                .chain(&self.write_roots)
                .cloned()
                .collect(),
            Access::Write => self.write_roots.clone(),
        }
    }

    /// The path `p` as checked for `access` (symlinks inside the roots
    /// resolved).
    pub fn checked(&self, p: &str, access: Access) -> Result<PathBuf, SandboxError> {
        match access {
            Access::Read => self.check_read(p),
            Access::Write => self.check_write(p),
        }
    }

    /// The folder `real` (a checked path), opened by walking from the root
    /// of `access` that holds it. `create` makes missing folders on the way
    /// (only with write access).
    pub fn open_dir(
        &self,
        real: &Path,
        access: Access,
        create: bool,
    ) -> Result<Dir, ConfinedError> {
        let roots = self.roots(access);
        let Some((root, rest)) = split_root(real, &roots) else {
            return Err(io::Error::from_raw_os_error(libc::EACCES).into());
        };
        if create && access == Access::Write && !root.exists() {
            // A write root given before it exists (`--allow-write out`): the
            // user named it, so it is made by its path.
            std::fs::create_dir_all(root)?;
        }
        let mut dir = Dir {
            fd: open_dir_path(root)?,
            path: root.to_path_buf(),
        };
        for c in rest.components() {
            let Component::Normal(name) = c else { continue };
            if create && access == Access::Write {
                dir.mkdir(name)?;
            }
            dir = dir.subdir(name)?;
        }
        Ok(dir)
    }

    /// The folder that holds `p` and `p`'s last name, opened by walking
    /// from its root; `p` itself (symlinks resolved) is what is checked.
    /// `create` makes missing folders on the way (only with write access).
    pub fn parent_of(
        &self,
        p: &str,
        access: Access,
        create: bool,
    ) -> Result<(Dir, OsString, PathBuf), ConfinedError> {
        let real = self.checked(p, access)?;
        let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
            return Err(io::Error::from_raw_os_error(libc::EISDIR).into());
        };
        let dir = self.open_dir(parent, access, create)?;
        Ok((dir, name.to_os_string(), real))
    }

    /// For operations on a name itself (remove, rename, lstat): the folder
    /// that holds it, checked and opened, and the name, not followed (a
    /// symlink is the link, wherever it points).
    pub fn name_in(&self, p: &str, access: Access) -> Result<(Dir, OsString), ConfinedError> {
        let abs = self.absolute(p);
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Err(io::Error::from_raw_os_error(libc::EISDIR).into());
        };
        let real_parent = self
            .checked(&parent.to_string_lossy(), access)
            .map_err(|_| {
                // Name the path as given, not its folder.
                self.checked(p, access).err().unwrap_or(match access {
                    Access::Read => SandboxError::ReadDenied {
                        path: p.to_string(),
                        roots: String::new(),
                    },
                    Access::Write => SandboxError::WriteDenied {
                        path: p.to_string(),
                        roots: String::new(),
                    },
                })
            })?;
        Ok((
            self.open_dir(&real_parent, access, false)?,
            name.to_os_string(),
        ))
    }

    /// Opens `p` for reading: the file opened is inside the read roots even
    /// if the path changes meanwhile. Returns it and the checked path.
    pub fn open_read(&self, p: &str) -> Result<(File, PathBuf), ConfinedError> {
        let real = self.checked(p, Access::Read)?;
        let roots = self.roots(Access::Read);
        if roots.iter().any(|r| r == &real) {
            // A root itself (a folder, or a file named on the command line):
            // opened by its path, which the user gave.
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&real)?;
            return Ok((f, real));
        }
        let (dir, name, real) = self.parent_of(p, Access::Read, false)?;
        // Non-blocking: a FIFO planted in the roots must not hang the open.
        Ok((dir.open(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0)?, real))
    }

    /// Writes `bytes` to `p` whole or not at all: a temporary file in the
    /// same folder, synced, then renamed over `p` (keeping its permissions).
    /// `create_dirs` makes missing folders first.
    pub fn write_atomic(
        &self,
        p: &str,
        bytes: &[u8],
        create_dirs: bool,
    ) -> Result<PathBuf, ConfinedError> {
        use std::io::Write;
        self.write_atomic_with(p, create_dirs, |f| f.write_all(bytes))
    }

    /// [`Sandbox::write_atomic`] with what `fill` writes to the new file.
    pub fn write_atomic_with(
        &self,
        p: &str,
        create_dirs: bool,
        fill: impl FnOnce(&mut std::fs::File) -> io::Result<()>,
    ) -> Result<PathBuf, ConfinedError> {
        let (dir, name, real) = self.parent_of(p, Access::Write, create_dirs)?;
        let mut tmp = OsString::from(".");
        tmp.push(&name);
        tmp.push(format!(".tmp-{:08x}", fastrand::u32(..)));
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let result = (|| -> io::Result<()> {
            let mut f = dir.open(&tmp, flags, 0o666)?;
            fill(&mut f)?;
            f.sync_all()?;
            if let Ok(old) = dir.stat(&name) {
                if old.is_file() {
                    f.set_permissions(old.permissions())?;
                }
            }
            dir.rename(&tmp, &dir, &name)
        })();
        if let Err(e) = result {
            let _ = dir.remove(&tmp, false);
            return Err(e.into());
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn setup() -> (tempfile::TempDir, Sandbox) {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("d")).unwrap();
        std::fs::create_dir_all(d.path().join("outside")).unwrap();
        std::fs::write(ws.join("d/secret.txt"), "inside").unwrap();
        std::fs::write(d.path().join("outside/secret.txt"), "OUTSIDE").unwrap();
        let sb = Sandbox::new(ws.clone(), vec![ws.clone()], vec![ws.clone()]);
        (d, sb)
    }

    #[test]
    fn reads_and_writes_inside_and_follows_inner_links() {
        let (d, sb) = setup();
        let ws = d.path().join("ws");
        std::os::unix::fs::symlink(ws.join("d"), ws.join("alias")).unwrap();
        let (mut f, _) = sb.open_read("alias/secret.txt").unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "inside");
        sb.write_atomic("new/deep/x.txt", b"hi", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("new/deep/x.txt")).unwrap(),
            "hi"
        );
        assert!(sb.write_atomic("none/x.txt", b"hi", false).is_err());
        assert!(sb.open_read("../outside/secret.txt").is_err());
    }

    #[test]
    fn a_folder_swapped_for_a_symlink_after_the_check_does_not_lead_out() {
        let (d, sb) = setup();
        let ws = d.path().join("ws");
        // What a racing branch does between the check and the open: the
        // checked path is fine, then `d` becomes a link to the outside.
        let real = sb.check_read("d/secret.txt").unwrap();
        assert!(real.starts_with(&ws));
        std::fs::rename(ws.join("d"), ws.join("d-away")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside"), ws.join("d")).unwrap();
        let dir = Dir {
            fd: open_dir_path(&ws).unwrap(),
            path: ws.clone(),
        };
        let err = dir.subdir(OsStr::new("d")).unwrap_err();
        assert!(
            matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)),
            "{err}"
        );
        // And through the whole API (which re-checks: now refused outright).
        assert!(sb.open_read("d/secret.txt").is_err());
        assert!(sb.write_atomic("d/planted.txt", b"x", false).is_err());
        assert!(!d.path().join("outside/planted.txt").exists());
    }
}
