//! Small file helpers every action family uses.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes to a temporary file beside `path`, flushes it to disk and renames
/// it over `path`: readers see the old file or the new one, never half.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    atomic_write_with(path, |w| w.write_all(bytes))
}

/// [`atomic_write`] with the content streamed by `write` (buffered), for
/// files too big to assemble in memory first.
pub fn atomic_write_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{:08x}", fastrand::u32(..)));
    let result = (|| {
        let mut out = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&tmp)?);
        write(&mut out)?;
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        // Keep the permissions of the file being replaced.
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A path as written, with where it resolved to when that differs, so a
/// "not found" says where it looked.
pub fn shown(path: &str, real: &Path) -> String {
    if Path::new(path) == real {
        format!("`{path}`")
    } else {
        format!("`{path}` (resolved to `{}`)", real.display())
    }
}
