//! Where marktoflow keeps its own state (the run store, knowledge-base
//! indexes, memory databases), found the way git finds `.git`: the nearest
//! `.marktoflow/` folder above the workflow (or the current folder), else a
//! per-user data folder. So `history` works from any folder of a project,
//! and a run never litters the current folder or the user's notes.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder name that marks a project's state.
pub const DIR_NAME: &str = ".marktoflow";

/// A state folder and the files in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    pub root: PathBuf,
    /// Whether it is a project's `.marktoflow/` (else the per-user folder).
    pub project: bool,
}

impl StateDir {
    /// The nearest `.marktoflow/` at or above `start` (made absolute
    /// against `cwd`), else the per-user folder. A `.marktoflow` that is a
    /// symlink is passed over: state is written there without a write root,
    /// so it must not lead elsewhere.
    pub fn discover(start: &Path, cwd: &Path, env: &BTreeMap<String, String>) -> StateDir {
        let start = crate::core::sandbox::normalize(&cwd.join(start));
        for dir in start.ancestors() {
            let candidate = dir.join(DIR_NAME);
            if std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.is_dir()) {
                return StateDir {
                    root: candidate,
                    project: true,
                };
            }
        }
        StateDir {
            root: user_dir(env),
            project: false,
        }
    }

    /// The run store.
    pub fn runs_db(&self) -> PathBuf {
        self.root.join("runs.db")
    }

    /// `memory.*`'s default database.
    pub fn memory_db(&self) -> PathBuf {
        self.root.join("memory.db")
    }

    /// The index folder of the knowledge base at `kb` (an absolute path):
    /// one per knowledge base, named after it, outside it.
    pub fn kb_index(&self, kb: &Path) -> PathBuf {
        let hash = Sha256::digest(kb.as_os_str().as_encoded_bytes());
        let name: String = kb
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let short: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
        self.root
            .join("kb")
            .join(format!("{name}-{short}"))
            .join("index")
    }

    /// [`kb_index`](Self::kb_index), for an index about to be used: its
    /// knowledge base's folder is marked as used now, and a new one first
    /// makes room. Each folder a caller names as a knowledge base gets one,
    /// so a server whose callers may name any folder under its roots keeps
    /// the [`MAX_KB_FOLDERS`] used last and removes the others (built again
    /// when asked for).
    pub fn kb_index_in_use(&self, kb: &Path) -> PathBuf {
        let index = self.kb_index(kb);
        let Some(folder) = index.parent() else {
            return index;
        };
        if let Ok(f) = std::fs::File::open(folder) {
            let _ = f.set_modified(std::time::SystemTime::now());
            return index;
        }
        let Ok(entries) = std::fs::read_dir(self.root.join("kb")) else {
            return index;
        };
        let mut folders: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| {
                let used = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (used, e.path())
            })
            .collect();
        if folders.len() >= MAX_KB_FOLDERS {
            folders.sort();
            for (_, old) in &folders[..=folders.len() - MAX_KB_FOLDERS] {
                let _ = std::fs::remove_dir_all(old);
            }
        }
        index
    }
}

/// Knowledge-base folders (index and vectors) kept in one state folder.
pub const MAX_KB_FOLDERS: usize = 64;

impl StateDir {
    /// What no workflow reads or writes (see
    /// [`crate::core::sandbox::Protected`]): this state folder and the
    /// per-user data folder (whose downloaded models may still be read), and
    /// `store`, the run store file, where it lives elsewhere. A folder that
    /// holds the working folder itself (a home set to the project) is not
    /// closed whole: its state files are.
    pub fn protected(
        &self,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        store: Option<&Path>,
    ) -> crate::core::sandbox::Protected {
        let cwd = crate::core::sandbox::real_path(cwd);
        let mut p = crate::core::sandbox::Protected {
            readable: vec![models_dir(env)],
            ..Default::default()
        };
        for dir in [self.root.clone(), user_dir(env)] {
            let dir =
                crate::core::sandbox::real_path(&crate::core::sandbox::normalize(&cwd.join(dir)));
            if cwd.starts_with(&dir) {
                p.files.push(dir.join("runs.db"));
                p.files.push(dir.join("memory.db"));
                p.trees.push(dir.join("kb"));
            } else if !p.trees.contains(&dir) {
                p.trees.push(dir);
            }
        }
        if let Some(store) = store {
            p.files.push(cwd.join(store));
        }
        p
    }
}

/// Names the folder models are installed in (default: `models/` in the
/// per-user data folder).
pub const MODELS_DIR_ENV: &str = "MARKTOFLOW_MODELS_DIR";

/// The models folder: `MARKTOFLOW_MODELS_DIR`, else `models/` in the
/// per-user data folder.
pub fn models_dir(env: &BTreeMap<String, String>) -> PathBuf {
    match env.get(MODELS_DIR_ENV).filter(|v| !v.trim().is_empty()) {
        Some(d) => PathBuf::from(d),
        None => user_dir(env).join("models"),
    }
}

/// The per-user data folder: `MARKTOFLOW_HOME`, else `$XDG_DATA_HOME/marktoflow`,
/// else `~/.local/share/marktoflow` (a relative `.marktoflow` in the
/// current folder when no home is known).
pub fn user_dir(env: &BTreeMap<String, String>) -> PathBuf {
    let var = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = var("MARKTOFLOW_HOME") {
        return p;
    }
    if let Some(p) = var("XDG_DATA_HOME").filter(|p| p.is_absolute()) {
        return p.join("marktoflow");
    }
    match var("HOME") {
        Some(h) => h.join(".local/share/marktoflow"),
        None => PathBuf::from(DIR_NAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knowledge_bases_used_last_keep_their_folders() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: d.path().join(DIR_NAME),
            project: true,
        };
        let kb = |i: usize| d.path().join(format!("notes/{i}"));
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for i in 0..MAX_KB_FOLDERS + 5 {
            let index = state.kb_index_in_use(&kb(i));
            std::fs::create_dir_all(&index).unwrap();
            // Folders used earlier look older, as they would be.
            if i != 0 {
                let f = std::fs::File::open(index.parent().unwrap()).unwrap();
                f.set_modified(old + std::time::Duration::from_secs(i as u64))
                    .unwrap();
            }
            if i == 3 {
                // The first is used again: it stays.
                state.kb_index_in_use(&kb(0));
            }
        }
        let left = std::fs::read_dir(state.root.join("kb")).unwrap().count();
        assert_eq!(left, MAX_KB_FOLDERS);
        let here = |i: usize| state.kb_index(&kb(i)).exists();
        assert!(here(0) && here(MAX_KB_FOLDERS + 4));
        assert!(!here(1) && !here(5) && here(6));
    }

    #[test]
    fn nearest_project_folder_else_the_user_folder() {
        let d = std::env::temp_dir().join(format!("mtf-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("proj/.marktoflow")).unwrap();
        std::fs::create_dir_all(d.join("proj/a/b")).unwrap();
        std::fs::create_dir_all(d.join("other")).unwrap();
        let env: BTreeMap<String, String> = [(
            "MARKTOFLOW_HOME".to_string(),
            d.join("home").display().to_string(),
        )]
        .into();
        let s = StateDir::discover(Path::new("proj/a/b"), &d, &env);
        assert_eq!((s.root, s.project), (d.join("proj/.marktoflow"), true));
        let s = StateDir::discover(Path::new("other"), &d, &env);
        assert_eq!((s.root.clone(), s.project), (d.join("home"), false));
        assert_eq!(s.runs_db(), d.join("home/runs.db"));
        // A symlinked `.marktoflow` does not count.
        std::os::unix::fs::symlink(d.join("home"), d.join("other/.marktoflow")).unwrap();
        assert!(!StateDir::discover(Path::new("other"), &d, &env).project);
        // One index folder per knowledge base, outside it.
        let a = s.kb_index(Path::new("/notes/vault"));
        assert!(
            a.starts_with(d.join("home/kb")) && a.ends_with("index"),
            "{a:?}"
        );
        assert_ne!(a, s.kb_index(Path::new("/other/vault")));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn user_folder_order() {
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            user_dir(&env(&[("MARKTOFLOW_HOME", "/m"), ("HOME", "/h")])),
            PathBuf::from("/m")
        );
        assert_eq!(
            user_dir(&env(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")])),
            PathBuf::from("/x/marktoflow")
        );
        assert_eq!(
            user_dir(&env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/share/marktoflow")
        );
    }
}
