//! The one folder walker: knowledge bases, `file.list` and the workflow
//! folders of `validate` and `serve` are all listed by [`walk`], so they
//! agree on ignore files, hidden entries, symlinks and `.marktoflow/`.

use std::path::{Path, PathBuf};

/// What a walk lists.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkOptions {
    /// File extensions (without the dot, compared case-insensitively);
    /// empty lists every file.
    pub extensions: Vec<String>,
    /// Honour `.gitignore`, `.ignore` and `.marktoflowignore` files.
    pub respect_ignore_files: bool,
    /// Enter hidden files and directories (`.marktoflow/` is always skipped).
    pub include_hidden: bool,
    pub follow_links: bool,
    /// How deep to go: 1 lists the root's own entries; None has no limit.
    pub max_depth: Option<usize>,
    /// List directories as entries too (they are entered either way).
    pub include_dirs: bool,
}

impl Default for WalkOptions {
    /// Every file below, as ripgrep would list it.
    fn default() -> Self {
        WalkOptions {
            extensions: Vec::new(),
            respect_ignore_files: true,
            include_hidden: false,
            follow_links: false,
            max_depth: None,
            include_dirs: false,
        }
    }
}

impl WalkOptions {
    /// The notes of a knowledge base: Markdown files.
    pub fn notes() -> Self {
        WalkOptions {
            extensions: vec!["md".into(), "markdown".into()],
            ..WalkOptions::default()
        }
    }
}

/// One file (or, with `include_dirs`, directory) found by [`walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub abs_path: PathBuf,
    /// Relative to the root, with `/` separators.
    pub rel_path: String,
    pub is_dir: bool,
    pub mtime_ms: i64,
    pub size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("`{0}` is not a directory")]
    NotADirectory(String),
    #[error("cannot read `{path}`: {message}")]
    Io { path: String, message: String },
}

impl WalkError {
    fn io(path: &Path, e: impl std::fmt::Display) -> Self {
        WalkError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Lists what is under `root`, sorted by relative path.
///
/// Ignore files follow ripgrep's rules (the `ignore` crate's matchers do the
/// pattern work): in each directory `.marktoflowignore` beats `.ignore`
/// beats `.gitignore`, and for each kind the nearest directory's file that
/// has an opinion wins (a `.git` directory marks no boundary: a vault need
/// not be a repository). Hidden entries are skipped unless whitelisted by an
/// ignore file or `include_hidden` is set; `.marktoflow/` never enters.
///
/// Our own walker rather than `ignore::WalkBuilder`: the freshness check of
/// every search walks the whole vault, and stat'ing each entry relative to its
/// open directory (`DirEntry::metadata`) on two threads roughly halves it on
/// 10,000 notes.
pub fn walk(root: &Path, opts: &WalkOptions) -> Result<Vec<Entry>, WalkError> {
    if !root.is_dir() {
        return Err(WalkError::NotADirectory(root.display().to_string()));
    }
    let first = DirJob {
        path: root.to_path_buf(),
        rel: String::new(),
        rules: None,
        ancestors: Vec::new(),
        depth: 0,
    };
    let queue = std::sync::Mutex::new(Queue {
        dirs: vec![first],
        busy: 0,
        error: None,
    });
    let wake = std::sync::Condvar::new();
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut mine = Vec::new();
                while let Some(job) = next_dir(&queue, &wake) {
                    let done = walk_dir(opts, job, &mut mine);
                    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                    q.busy -= 1;
                    match done {
                        Ok(subdirs) => q.dirs.extend(subdirs),
                        Err(e) => {
                            q.error.get_or_insert(e);
                        }
                    }
                    wake.notify_all();
                }
                found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(&mut mine);
            });
        }
    });
    if let Some(e) = queue.into_inner().unwrap_or_else(|e| e.into_inner()).error {
        return Err(e);
    }
    let mut out = found.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_unstable_by(|a, b| a.rel_path.cmp(&b.rel_path));
    Ok(out)
}

/// Directories waiting to be read, shared by the walking threads.
struct Queue {
    dirs: Vec<DirJob>,
    /// Directories being read now (their subdirectories are still to come).
    busy: usize,
    error: Option<WalkError>,
}

struct DirJob {
    path: PathBuf,
    /// Relative path with a trailing `/` (empty at the root).
    rel: String,
    /// The rules in force for this directory's entries, before its own files.
    rules: Option<std::sync::Arc<Rules>>,
    /// Canonical paths above, to stop at symlink loops (only with `follow_links`).
    ancestors: Vec<PathBuf>,
    /// 0 at the root.
    depth: usize,
}

/// The next directory to read, or None when the walk is over or failed.
fn next_dir(queue: &std::sync::Mutex<Queue>, wake: &std::sync::Condvar) -> Option<DirJob> {
    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if q.error.is_some() {
            return None;
        }
        if let Some(job) = q.dirs.pop() {
            q.busy += 1;
            return Some(job);
        }
        if q.busy == 0 {
            return None;
        }
        q = wake.wait(q).unwrap_or_else(|e| e.into_inner());
    }
}

/// The ignore files of one directory, chained to those above it.
struct Rules {
    custom: Option<ignore::gitignore::Gitignore>,
    ignore: Option<ignore::gitignore::Gitignore>,
    git: Option<ignore::gitignore::Gitignore>,
    parent: Option<std::sync::Arc<Rules>>,
}

#[derive(PartialEq)]
enum Verdict {
    Ignore,
    Whitelist,
    Neither,
}

impl Rules {
    fn verdict(&self, path: &Path, is_dir: bool) -> Verdict {
        let of = |m: &Option<ignore::gitignore::Gitignore>| match m {
            Some(g) => match g.matched(path, is_dir) {
                ignore::Match::Ignore(_) => Verdict::Ignore,
                ignore::Match::Whitelist(_) => Verdict::Whitelist,
                ignore::Match::None => Verdict::Neither,
            },
            None => Verdict::Neither,
        };
        let (mut custom, mut ignore, mut git) =
            (Verdict::Neither, Verdict::Neither, Verdict::Neither);
        let mut at = Some(self);
        while let Some(r) = at {
            if custom == Verdict::Neither {
                custom = of(&r.custom);
            }
            if ignore == Verdict::Neither {
                ignore = of(&r.ignore);
            }
            if git == Verdict::Neither {
                git = of(&r.git);
            }
            at = r.parent.as_deref();
        }
        [custom, ignore, git]
            .into_iter()
            .find(|v| *v != Verdict::Neither)
            .unwrap_or(Verdict::Neither)
    }
}

/// Reads one directory: its files go to `out`, its subdirectories are returned.
fn walk_dir(
    opts: &WalkOptions,
    job: DirJob,
    out: &mut Vec<Entry>,
) -> Result<Vec<DirJob>, WalkError> {
    let entries =
        match std::fs::read_dir(&job.path).and_then(|d| d.collect::<std::io::Result<Vec<_>>>()) {
            Ok(entries) => entries,
            // Below the root, a folder removed since its parent was listed, or
            // one nested deeper than a path may name (PATH_MAX), is passed
            // over: one such folder must not fail the whole knowledge base.
            Err(e) if job.depth > 0 && gone_or_unreachable(&e) => return Ok(Vec::new()),
            Err(e) => return Err(WalkError::io(&job.path, e)),
        };
    let rules = if opts.respect_ignore_files {
        dir_rules(&job, &entries)?
    } else {
        None
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let name = entry.file_name();
        if name == ".marktoflow" {
            continue;
        }
        let mut file_type = entry
            .file_type()
            .map_err(|e| WalkError::io(&entry.path(), e))?;
        let path = entry.path();
        let mut meta = None;
        if file_type.is_symlink() {
            if !opts.follow_links {
                continue;
            }
            // A dangling link is not a note.
            let Ok(m) = std::fs::metadata(&path) else {
                continue;
            };
            file_type = m.file_type();
            meta = Some(m);
        }
        let is_dir = file_type.is_dir();
        if !is_dir && !file_type.is_file() {
            continue;
        }
        // Files of other kinds are dropped before any pattern matching.
        let wanted = opts.extensions.is_empty()
            || Path::new(&name)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| opts.extensions.iter().any(|x| x.eq_ignore_ascii_case(e)));
        if !is_dir && !wanted {
            continue;
        }
        let verdict = match &rules {
            Some(r) => r.verdict(&path, is_dir),
            None => Verdict::Neither,
        };
        let hidden = name.as_encoded_bytes().first() == Some(&b'.');
        if verdict == Verdict::Ignore
            || (hidden && !opts.include_hidden && verdict != Verdict::Whitelist)
        {
            continue;
        }
        let name = name.to_string_lossy();
        if is_dir {
            let mut ancestors = Vec::new();
            if opts.follow_links {
                let here = std::fs::canonicalize(&path).map_err(|e| WalkError::io(&path, e))?;
                if job.ancestors.contains(&here) {
                    continue;
                }
                ancestors = job.ancestors.clone();
                ancestors.push(here);
            }
            if opts.include_dirs {
                let meta = match &meta {
                    Some(m) => m.clone(),
                    None => entry.metadata().map_err(|e| WalkError::io(&path, e))?,
                };
                out.push(Entry {
                    rel_path: format!("{}{name}", job.rel),
                    abs_path: path.clone(),
                    is_dir: true,
                    mtime_ms: mtime_ms(&meta),
                    size: meta.len(),
                });
            }
            if opts.max_depth.is_none_or(|max| job.depth + 1 < max) {
                subdirs.push(DirJob {
                    rel: format!("{}{name}/", job.rel),
                    path,
                    rules: rules.clone(),
                    ancestors,
                    depth: job.depth + 1,
                });
            }
            continue;
        }
        let meta = match meta {
            Some(m) => m,
            // Relative to the open directory: no path lookup.
            None => match entry.metadata() {
                Ok(m) => m,
                Err(e) if gone_or_unreachable(&e) => continue,
                Err(e) => return Err(WalkError::io(&path, e)),
            },
        };
        out.push(Entry {
            rel_path: format!("{}{name}", job.rel),
            abs_path: path,
            is_dir: false,
            mtime_ms: mtime_ms(&meta),
            size: meta.len(),
        });
    }
    Ok(subdirs)
}

/// A file or folder deleted while the walk ran, or too deep to name.
fn gone_or_unreachable(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENAMETOOLONG)
}

/// The rules for a directory's entries: its own ignore files on top of the
/// inherited ones (no new link in the chain when it has none).
fn dir_rules(
    job: &DirJob,
    entries: &[std::fs::DirEntry],
) -> Result<Option<std::sync::Arc<Rules>>, WalkError> {
    let has = |n: &str| entries.iter().any(|e| e.file_name() == n);
    let read = |n: &str| -> Result<Option<ignore::gitignore::Gitignore>, WalkError> {
        if !has(n) {
            return Ok(None);
        }
        let file = job.path.join(n);
        let mut b = ignore::gitignore::GitignoreBuilder::new(&job.path);
        if let Some(e) = b.add(&file) {
            return Err(WalkError::io(&file, e));
        }
        b.build().map(Some).map_err(|e| WalkError::io(&file, e))
    };
    let (custom, ignore, git) = (
        read(".marktoflowignore")?,
        read(".ignore")?,
        read(".gitignore")?,
    );
    if custom.is_none() && ignore.is_none() && git.is_none() {
        return Ok(job.rules.clone());
    }
    Ok(Some(std::sync::Arc::new(Rules {
        custom,
        ignore,
        git,
        parent: job.rules.clone(),
    })))
}

/// Modification time in ms since the epoch (0 when the platform has none).
pub fn mtime_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same walk by `ignore::WalkBuilder`, whose rules ours follow.
    fn reference_walk(root: &Path, opts: &WalkOptions) -> Vec<String> {
        let mut b = ignore::WalkBuilder::new(root);
        b.hidden(!opts.include_hidden)
            .follow_links(opts.follow_links)
            .git_ignore(opts.respect_ignore_files)
            .git_exclude(false)
            .git_global(false)
            .ignore(opts.respect_ignore_files)
            .parents(false)
            .require_git(false)
            .filter_entry(|e| e.file_name() != ".marktoflow");
        if opts.respect_ignore_files {
            b.add_custom_ignore_filename(".marktoflowignore");
        }
        let mut out: Vec<String> = b
            .build()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .filter(|e| {
                e.path()
                    .extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| opts.extensions.iter().any(|y| y.eq_ignore_ascii_case(x)))
                    || opts.extensions.is_empty()
            })
            .map(|e| {
                let rel = e.path().strip_prefix(root).unwrap();
                rel.to_str()
                    .unwrap()
                    .replace(std::path::MAIN_SEPARATOR, "/")
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn walk_follows_the_ignore_rules_of_ripgrep() {
        let root = std::env::temp_dir().join(format!("mtf-walk-{}", fastrand::u64(..)));
        let files = [
            "a.md",
            "B.MD",
            "c.txt",
            "notes.markdown",
            ".hidden.md",
            ".hid/x.md",
            ".marktoflow/index.md",
            "sub/.marktoflow/x.md",
            "drafts/d.md",
            "drafts/keep.md",
            "sub/tmp/t.md",
            "sub/s.md",
            "sub/secret.md",
            "sub/deep/secret.md",
            "sub/deep/ok.md",
            "repo/.git/HEAD",
            "repo/r.md",
            "repo/build/b.md",
            "repo/inner/build/b.md",
            "logs/l.md",
            "logs/important.md",
            "wl/.shown.md",
        ];
        for f in files {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "# x\n").unwrap();
        }
        let rules = [
            // Nearest file wins, `.marktoflowignore` beats `.gitignore`.
            (
                ".gitignore",
                "drafts/\n*.log\nlogs/*.md\n!logs/important.md\nbuild/\n",
            ),
            (".marktoflowignore", "!drafts/\ndrafts/d.md\n"),
            ("sub/.ignore", "tmp/\nsecret.md\n"),
            // Nearest of a kind wins; across kinds, `.ignore` beats `.gitignore`.
            ("sub/deep/.ignore", "!secret.md\n"),
            ("repo/.gitignore", "!build/\n"),
            ("repo/inner/.gitignore", "/build\n"),
            ("wl/.ignore", "!.shown.md\n"),
        ];
        for (f, text) in rules {
            std::fs::write(root.join(f), text).unwrap();
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("sub"), root.join("linked")).unwrap();
            std::os::unix::fs::symlink(root.join("a.md"), root.join("alias.md")).unwrap();
            std::os::unix::fs::symlink(root.join("gone.md"), root.join("dangling.md")).unwrap();
        }
        let ours = |o: &WalkOptions| -> Vec<String> {
            walk(&root, o)
                .unwrap()
                .into_iter()
                .map(|f| f.rel_path)
                .collect()
        };
        let default = WalkOptions::notes();
        let got = ours(&default);
        assert_eq!(got, reference_walk(&root, &default));
        for want in [
            "a.md",
            "drafts/keep.md",
            "logs/important.md",
            "repo/build/b.md",
            "wl/.shown.md",
        ] {
            assert!(
                got.contains(&want.to_string()),
                "{want} missing from {got:?}"
            );
        }
        for gone in [
            "drafts/d.md",
            "sub/tmp/t.md",
            "sub/secret.md",
            "logs/l.md",
            ".hidden.md",
            "alias.md",
            "repo/inner/build/b.md",
        ] {
            assert!(!got.contains(&gone.to_string()), "{gone} walked: {got:?}");
        }
        assert!(got.contains(&"sub/deep/secret.md".to_string()));
        for o in [
            WalkOptions {
                include_hidden: true,
                ..WalkOptions::notes()
            },
            WalkOptions {
                respect_ignore_files: false,
                ..WalkOptions::notes()
            },
            WalkOptions {
                extensions: vec!["txt".into()],
                ..WalkOptions::notes()
            },
            WalkOptions::default(),
        ] {
            assert_eq!(ours(&o), reference_walk(&root, &o), "{o:?}");
        }
        #[cfg(unix)]
        {
            // Links followed (the dangling one skipped), and a loop entered once.
            std::fs::remove_file(root.join("dangling.md")).unwrap();
            let follow = WalkOptions {
                follow_links: true,
                ..WalkOptions::notes()
            };
            let got = ours(&follow);
            assert_eq!(got, reference_walk(&root, &follow));
            assert!(
                got.contains(&"linked/deep/ok.md".to_string())
                    && got.contains(&"alias.md".to_string())
            );
            std::os::unix::fs::symlink(root.join("gone.md"), root.join("dangling.md")).unwrap();
            std::os::unix::fs::symlink(&root, root.join("sub/deep/up")).unwrap();
            let got = ours(&follow);
            assert!(!got.contains(&"dangling.md".to_string()));
            assert!(got.iter().all(|p| !p.contains("up/up/")), "{got:?}");
        }
        // A bad pattern names its file.
        std::fs::write(root.join("sub/.ignore"), "ok.md\n[z-a].md\n").unwrap();
        let err = walk(&root, &default).unwrap_err().to_string();
        assert!(err.contains("sub/.ignore"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_folder_too_deep_to_name_is_passed_over() {
        // Folders nested past PATH_MAX (made one level at a time, relative
        // to the last) failed the whole walk (issue 49, item 13).
        let root = std::env::temp_dir().join(format!("mtf-walk-deep-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.md"), "# A\n").unwrap();
        let name = "d".repeat(200);
        let mut fd = std::fs::File::open(&root).unwrap();
        for _ in 0..25 {
            use std::os::fd::AsRawFd as _;
            let c = std::ffi::CString::new(name.as_str()).unwrap();
            // SAFETY: plain *at calls on a descriptor we hold.
            let next = unsafe {
                assert_eq!(libc::mkdirat(fd.as_raw_fd(), c.as_ptr(), 0o755), 0);
                libc::openat(
                    fd.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY,
                )
            };
            assert!(next >= 0);
            use std::os::fd::FromRawFd as _;
            // SAFETY: `next` is a descriptor we just opened and now own.
            fd = unsafe { std::fs::File::from_raw_fd(next) };
        }
        let found: Vec<String> = walk(&root, &WalkOptions::notes())
            .unwrap()
            .into_iter()
            .map(|e| e.rel_path)
            .collect();
        assert_eq!(found, ["a.md"]);
        // `remove_dir_all` cannot name the deepest folders either.
        let _ = std::process::Command::new("rm")
            .arg("-rf")
            .arg(&root)
            .status();
    }
}
