//! Who owns a run, and whether that owner still lives.
//!
//! A process id cannot tell: it is reused (a restarted container's server
//! is PID 1 again) and lingers while a killed process is a zombie. Instead,
//! each process that records runs holds an exclusive lock on a file of its
//! own, `<store>.owners/<token>`, for as long as it lives; runs name the
//! token. The kernel drops the lock when the process ends, however it ends,
//! so "the lock can be taken" means "the owner is gone", at once and for
//! certain.

use super::death::Death;
use super::StoreError;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The folder of owner locks of the store file `db`.
fn dir_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".owners");
    db.with_file_name(name)
}

/// This process as the owner of the runs it records in one store.
#[derive(Debug)]
pub struct Owner {
    pub token: String,
    path: PathBuf,
    _lock: File,
}

impl Owner {
    /// Takes a fresh token for the store file `db` and holds its lock.
    pub fn acquire(db: &Path) -> Result<Owner, StoreError> {
        let dir = dir_of(db);
        let open_err = |path: &Path, e: std::io::Error| StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(|e| open_err(&dir, e))?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let path = dir.join(&token);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| open_err(&path, e))?;
        file.lock().map_err(|e| open_err(&path, e))?;
        // Should the process abort, its file says in which run.
        super::death::record_aborts_in(file.as_raw_fd());
        Ok(Owner {
            token,
            path,
            _lock: file,
        })
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // A clean exit leaves nothing behind; a killed one leaves a file
        // whose lock is free, read and removed by the next start.
        super::death::stop_recording_in(self._lock.as_raw_fd());
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether the owner `token` of runs in the store file `db` still lives.
pub fn is_alive(db: &Path, token: &str) -> bool {
    match look(db, token) {
        Look::Alive => true,
        Look::Gone { record, path } => {
            // A dead owner's file goes, unless it tells how it died: the
            // next start reads that ([`death_of`]) and removes it.
            if record.is_empty() {
                if let Some(p) = path {
                    let _ = std::fs::remove_file(p);
                }
            }
            false
        }
    }
}

/// How the owner `token` died (None while it lives), and its file removed:
/// for a server resuming the runs it left.
pub fn death_of(db: &Path, token: &str) -> Option<Death> {
    match look(db, token) {
        Look::Alive => None,
        Look::Gone { record, path } => {
            if let Some(p) = path {
                let _ = std::fs::remove_file(p);
            }
            Some(Death::read(&record))
        }
    }
}

enum Look {
    Alive,
    /// Its file's contents (empty when it has none), and the file if any.
    Gone {
        record: Vec<u8>,
        path: Option<PathBuf>,
    },
}

fn look(db: &Path, token: &str) -> Look {
    let gone = Look::Gone {
        record: Vec::new(),
        path: None,
    };
    if token.is_empty() || !token.chars().all(|c| c.is_ascii_alphanumeric()) {
        return gone;
    }
    let path = dir_of(db).join(token);
    let Ok(file) = File::open(&path) else {
        return gone;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            // Nobody holds it: the owner is gone. Its record is one short
            // line; more is not ours.
            let mut record = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::Read::take(&file, 256), &mut record);
            Look::Gone {
                record,
                path: Some(path),
            }
        }
        Err(std::fs::TryLockError::WouldBlock) => Look::Alive,
        // Cannot tell: treat as alive, never resume a live run.
        Err(std::fs::TryLockError::Error(_)) => Look::Alive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_lives_while_its_lock_is_held() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("runs.db");
        let me = Owner::acquire(&db).unwrap();
        assert!(is_alive(&db, &me.token));
        let token = me.token.clone();
        drop(me);
        assert!(!is_alive(&db, &token));
        assert!(!is_alive(&db, "nobody"));
        assert!(!is_alive(&db, "../escape"));
        // A lock file left by a killed owner (here: never locked) counts as
        // gone and is removed.
        std::fs::write(dir_of(&db).join("leftover"), "").unwrap();
        assert!(!is_alive(&db, "leftover"));
        assert!(!dir_of(&db).join("leftover").exists());
    }
}
