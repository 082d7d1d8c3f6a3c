//! Source rewrites before minijinja compiles a template or expression, with
//! a map from the rewritten text back to the author's (so errors point at
//! what was written).

use std::borrow::Cow;

/// Rewritten text, with a map from each byte of it back to the source.
pub(crate) struct Translated {
    pub text: String,
    /// `origin[i]` is the source offset of byte `i` of `text`
    /// (one extra entry for the end).
    pub origin: Vec<usize>,
}

impl Translated {
    pub fn source_offset(&self, out: usize) -> usize {
        self.origin
            .get(out)
            .copied()
            .unwrap_or_else(|| self.origin.last().copied().unwrap_or(0))
    }
}

/// Replaces `removed` bytes at `at` with `text`.
pub(crate) struct Edit {
    pub at: usize,
    pub removed: usize,
    pub text: Cow<'static, str>,
}

impl Edit {
    pub fn new(at: usize, removed: usize, text: impl Into<Cow<'static, str>>) -> Self {
        Edit {
            at,
            removed,
            text: text.into(),
        }
    }

    pub fn insert(at: usize, text: impl Into<Cow<'static, str>>) -> Self {
        Self::new(at, 0, text)
    }
}

/// `src` with `edits` applied; `None` when there are none. Edits at the same
/// offset apply in the order given. An edit that starts inside the bytes an
/// earlier one removed (a tag inside a `{# comment #}` the comment's edit
/// replaces) is dropped: its text is gone.
pub(crate) fn apply(src: &str, mut edits: Vec<Edit>) -> Option<Translated> {
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| e.at);
    let extra: usize = edits.iter().map(|e| e.text.len()).sum();
    let mut text = String::with_capacity(src.len() + extra);
    let mut origin = Vec::with_capacity(src.len() + extra + 1);
    let mut at = 0;
    for e in edits {
        if e.at < at || e.at + e.removed > src.len() {
            continue;
        }
        let pos = e.at;
        text.push_str(&src[at..pos]);
        origin.extend(at..pos);
        text.push_str(&e.text);
        origin.extend(std::iter::repeat_n(pos, e.text.len()));
        at = pos + e.removed;
    }
    text.push_str(&src[at..]);
    origin.extend(at..src.len());
    origin.push(src.len());
    Some(Translated { text, origin })
}

/// `second` rewrote the text of `first`: one translation from the source
/// of `first` to the text of `second`.
pub(crate) fn chain(first: Option<Translated>, second: Option<Translated>) -> Option<Translated> {
    match (first, second) {
        (f, None) => f,
        (None, s) => s,
        (Some(f), Some(s)) => Some(Translated {
            origin: s.origin.iter().map(|&o| f.source_offset(o)).collect(),
            text: s.text,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_and_chains_map_back() {
        let t = apply(
            "a + b",
            vec![
                Edit::insert(0, "f("),
                Edit::new(2, 1, ","),
                Edit::insert(5, ")"),
            ],
        )
        .unwrap();
        assert_eq!(t.text, "f(a , b)");
        assert_eq!(t.source_offset(t.text.find('b').unwrap()), 4);
        let u = apply(&t.text, vec![Edit::insert(0, "g(")]);
        let c = chain(Some(t), u).unwrap();
        assert_eq!(c.text, "g(f(a , b)");
        assert_eq!(c.source_offset(c.text.find('b').unwrap()), 4);
        assert!(apply("x", Vec::new()).is_none());
    }

    #[test]
    fn an_edit_inside_a_removed_range_is_dropped() {
        let t = apply(
            "{#{%e.length%}#}!",
            vec![
                Edit::new(0, 16, "{{ '' }}"),
                Edit::new(5, 7, "|__js_length"),
            ],
        )
        .unwrap();
        assert_eq!(t.text, "{{ '' }}!");
        assert_eq!(t.source_offset(t.text.len() - 1), 16);
    }
}
