//! Which top-level modules of its crate each source file names, for the
//! layer tests of both crates (included by `#[path]` from their `lib.rs`).
//! Every way a path can reach another module counts: `crate::x`,
//! `crate::{x, y::z}`, and `super::` chains that climb to the crate root.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src` with the top-level modules it names: `(the
/// file relative to `src`, its own top-level module, the ones it names)`.
pub fn uses(src: &Path) -> Vec<(String, String, Vec<String>)> {
    module_files(src)
        .into_iter()
        .map(|(module, p)| {
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().into_owned();
            // `lib.rs` and `main.rs` are the root: their own name stands.
            let top = module
                .first()
                .cloned()
                .unwrap_or_else(|| p.file_stem().unwrap().to_string_lossy().into_owned());
            let text = std::fs::read_to_string(&p).unwrap();
            (rel, top, named(&text, module.len()))
        })
        .collect()
}

/// The top-level modules `text`, a module `depth` levels below the root,
/// names.
pub fn named(text: &str, depth: usize) -> Vec<String> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        // Matched on bytes: the patterns are ASCII, so where they end is a
        // character boundary of the text.
        if boundary && b[i..].starts_with(b"crate::") {
            i += 7;
            after_root(&text[i..], &mut found);
            continue;
        }
        if boundary && b[i..].starts_with(b"super::") {
            let mut k = 0;
            let mut j = i;
            while b[j..].starts_with(b"super::") {
                k += 1;
                j += 7;
            }
            if k == depth {
                after_root(&text[j..], &mut found);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    found.sort();
    found.dedup();
    found
}

/// The top-level names at the start of `rest`, the text after a path that
/// reached the crate root: one name, or each item of a `{…}` group.
fn after_root(rest: &str, found: &mut Vec<String>) {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut level = 0;
        let mut item = String::new();
        for c in group.chars() {
            match c {
                '{' => level += 1,
                '}' if level == 0 => break,
                '}' => level -= 1,
                ',' if level == 0 => {
                    found.push(ident(&item));
                    item.clear();
                    continue;
                }
                _ => {}
            }
            if level == 0 {
                item.push(c);
            }
        }
        found.push(ident(&item));
        found.retain(|n| !n.is_empty() && n != "self");
    } else {
        let name = ident(rest);
        if !name.is_empty() {
            found.push(name);
        }
    }
}

#[test]
fn every_path_to_another_module_counts() {
    let text = "use crate::{alpha, beta::{x, y}, self};\nuse super::super::gamma::z;\nfn f() { crate::delta::g(); super::local(); }\n// not_crate::omega\n";
    assert_eq!(named(text, 2), ["alpha", "beta", "delta", "gamma"]);
    assert_eq!(named("use super::x;", 1), ["x"]);
    assert_eq!(named("use super::x;", 2), Vec::<String>::new());
}

/// Circles between sibling modules: for every module, the children that
/// reach each other, directly or round a loop (`serve: api → http → api`).
/// A child naming its parent's own items, or a parent naming its children,
/// is not a circle; only paths between siblings' subtrees count.
pub fn circles(src: &Path) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let files = module_files(src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    // parent → child → the siblings it reaches
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (me, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for target in absolute_paths(&code_only(&text), me) {
            let k = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if k >= me.len() || k >= target.len() {
                continue;
            }
            let parent = me[..k].to_vec();
            let mut sibling = parent.clone();
            sibling.push(target[k].clone());
            if modules.contains(&sibling) {
                edges
                    .entry(parent)
                    .or_default()
                    .entry(me[k].clone())
                    .or_default()
                    .insert(target[k].clone());
            }
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        for component in strongly_connected(graph) {
            let at = if parent.is_empty() {
                "crate".to_string()
            } else {
                parent.join("::")
            };
            found.push(format!("{at}: {}", component.join(" ↔ ")));
        }
    }
    found
}

/// Every `.rs` file under `src` with its module path (`a/mod.rs` is `[a]`,
/// `a/b.rs` is `[a, b]`, `lib.rs` the root `[]`).
fn module_files(src: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().to_string_lossy().into_owned();
                let mut parts: Vec<String> = rel
                    .trim_end_matches(".rs")
                    .split('/')
                    .map(String::from)
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                out.push((parts, p));
            }
        }
    }
    out
}

/// The text without `//` comments (doc links are not dependencies).
fn code_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::`, `super::` and `self::` path in `text`, made absolute
/// from the module `me`, `{…}` groups expanded.
fn absolute_paths(text: &str, me: &[String]) -> Vec<Vec<String>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        if !boundary {
            i += 1;
            continue;
        }
        let (base, j) = if b[i..].starts_with(b"crate::") {
            (Vec::new(), i + 7)
        } else if b[i..].starts_with(b"self::") {
            (me.to_vec(), i + 6)
        } else if b[i..].starts_with(b"super::") {
            let mut j = i;
            let mut up = 0;
            while b[j..].starts_with(b"super::") {
                up += 1;
                j += 7;
            }
            (me[..me.len().saturating_sub(up)].to_vec(), j)
        } else {
            i += 1;
            continue;
        };
        for tail in path_tails(&text[j..]) {
            let mut p = base.clone();
            p.extend(tail);
            out.push(p);
        }
        i = j;
    }
    out
}

/// The paths at the start of `rest`: `a::b::C` or `a::{b, c::{d}}`.
fn path_tails(rest: &str) -> Vec<Vec<String>> {
    fn parse(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
        if *i < s.len() && s[*i] == b'{' {
            *i += 1;
            let mut all = Vec::new();
            loop {
                all.extend(parse(s, i));
                while *i < s.len() && s[*i].is_ascii_whitespace() {
                    *i += 1;
                }
                match s.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        break;
                    }
                    _ => break,
                }
            }
            return all;
        }
        let start = *i;
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
            *i += 1;
        }
        let name = String::from_utf8_lossy(&s[start..*i]).into_owned();
        if name.is_empty() {
            return vec![Vec::new()];
        }
        if s[*i..].starts_with(b"::") {
            *i += 2;
            return parse(s, i)
                .into_iter()
                .map(|mut t| {
                    t.insert(0, name.clone());
                    t
                })
                .collect();
        }
        if name == "self" {
            return vec![Vec::new()];
        }
        vec![vec![name]]
    }
    let mut i = 0;
    parse(rest.as_bytes(), &mut i)
}

/// The strongly connected parts of more than one node, each sorted.
fn strongly_connected(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in graph.keys() {
        if out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let from_n = reach(n);
        if !from_n.contains(n) {
            continue;
        }
        let mut part: Vec<String> = from_n
            .into_iter()
            .filter(|m| reach(m).contains(n))
            .collect();
        part.sort();
        out.push(part);
    }
    out
}

#[test]
fn circles_between_siblings_are_found() {
    let dir = std::env::temp_dir().join(format!("scan-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("serve")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(dir.join(p), t).unwrap();
    write("lib.rs", "mod serve;");
    write("serve/mod.rs", "mod api; mod http; use self::api::X;");
    write("serve/api.rs", "use super::{http::Y, Shared};");
    write(
        "serve/http.rs",
        "fn f() { crate::serve::api::g(); super::Shared; }",
    );
    assert_eq!(circles(&dir), ["serve: api ↔ http"]);
    write(
        "serve/http.rs",
        "// crate::serve::api::g()\nuse super::Shared;",
    );
    assert!(circles(&dir).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
