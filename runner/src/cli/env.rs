//! The environment a run sees: the process's, with `.env` files filling in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The process environment, with `.env` files filling in what is not set
/// (the first file to set a name wins): the current folder's, then the
/// workflow's folder's and each folder's above it up to the project root,
/// the folder holding `.marktoflow/` (only the workflow's folder when it is
/// in no project: a home folder's `.env` is not the workflow's).
pub(super) fn environment(workflow_dir: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    for dir in dotenv_dirs(workflow_dir) {
        if let Ok(text) = std::fs::read_to_string(dir.join(".env")) {
            for (k, v) in parse_dotenv(&text) {
                env.entry(k).or_insert(v);
            }
        }
    }
    env
}

/// The folders whose `.env` is read, in order of precedence.
fn dotenv_dirs(workflow_dir: &Path) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let start = marktoflow_steps::core::sandbox::normalize(&cwd.join(workflow_dir));
    // The project is the one the run's state goes to (its `.marktoflow/`).
    let state = super::state_dir(&start);
    let root = state.root.parent().filter(|_| state.project);
    let mut dirs = vec![cwd];
    for d in start.ancestors() {
        dirs.push(d.to_path_buf());
        if Some(d) == root || root.is_none() {
            break;
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// `KEY=value` lines; `#` comments, `export ` prefixes and quotes allowed.
pub fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let l = l.strip_prefix("export ").unwrap_or(l);
            let (k, v) = l.split_once('=')?;
            let v = v.trim();
            let v = if v.len() >= 2
                && ((v.starts_with('"') && v.ends_with('"'))
                    || (v.starts_with('\'') && v.ends_with('\'')))
            {
                &v[1..v.len() - 1]
            } else {
                v
            };
            Some((k.trim().to_string(), v.to_string()))
        })
        .collect()
}
