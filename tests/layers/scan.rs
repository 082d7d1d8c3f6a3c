//! Which top-level modules of its crate each source file names, for the
//! layer tests of both crates (included by `#[path]` from their `lib.rs`).
//! Every way a path can reach another module counts: `crate::x`,
//! `crate::{x, y::z}`, and `super::` chains that climb to the crate root.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src` with the top-level modules it names: `(the
/// file relative to `src`, its own top-level module, the ones it names)`.
pub fn uses(src: &Path) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().into_owned();
            let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
            let top = parts[0].to_string();
            // The module's depth below the crate root: `a/mod.rs` is `a`,
            // `a/b.rs` is `a::b`; `lib.rs` is the root itself.
            let depth = match parts.as_slice() {
                ["lib"] | ["main"] => 0,
                p if p.last() == Some(&"mod") => p.len() - 1,
                p => p.len(),
            };
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((rel, top, named(&text, depth)));
        }
    }
    out
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
