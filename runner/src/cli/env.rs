//! The environment a run sees: the process's, with `.env` files filling in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The process environment, with `.env` files (cwd, then the workflow's
/// folder) filling in what is not set.
pub(super) fn environment(workflow_dir: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    for dir in [PathBuf::from("."), workflow_dir.to_path_buf()] {
        if let Ok(text) = std::fs::read_to_string(dir.join(".env")) {
            for (k, v) in parse_dotenv(&text) {
                env.entry(k).or_insert(v);
            }
        }
    }
    env
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
