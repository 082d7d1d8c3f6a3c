//! A formatted text cut into the typed pieces `formatToParts` returns,
//! from the parts ICU4X's formatters mark as they write.

use std::fmt;
use writeable::{Part, PartsWrite, Writeable};

/// One piece of a formatted text: its `formatToParts` type and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Piece {
    pub kind: String,
    pub text: String,
}

/// Writes `value`, then cuts the text where the innermost part of
/// `category` changes (a number's group inside its integer; a date's year,
/// not the digits inside it); text no such part marks is `None`, for the
/// caller to name.
pub(super) fn pieces(value: &impl Writeable, category: &str) -> Vec<(Option<Part>, String)> {
    let mut sink = Collector::default();
    // Writing to a String cannot fail.
    let _ = value.write_to_parts(&mut sink);
    // Spans are recorded innermost first: laid down outermost first, the
    // inner ones overwrite.
    let mut owner: Vec<Option<Part>> = vec![None; sink.text.len()];
    for (start, end, part) in sink.spans.iter().rev() {
        if part.category == category {
            for slot in &mut owner[*start..*end] {
                *slot = Some(*part);
            }
        }
    }
    let mut out: Vec<(Option<Part>, String)> = Vec::new();
    for (i, c) in sink.text.char_indices() {
        match out.last_mut() {
            Some((part, text)) if *part == owner[i] => text.push(c),
            _ => out.push((owner[i], c.to_string())),
        }
    }
    out
}

#[derive(Default)]
struct Collector {
    text: String,
    spans: Vec<(usize, usize, Part)>,
}

impl fmt::Write for Collector {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

impl PartsWrite for Collector {
    type SubPartsWrite = Self;

    fn with_part(
        &mut self,
        part: Part,
        mut f: impl FnMut(&mut Self::SubPartsWrite) -> fmt::Result,
    ) -> fmt::Result {
        let start = self.text.len();
        f(self)?;
        self.spans.push((start, self.text.len(), part));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    struct Two;
    impl Writeable for Two {
        fn write_to_parts<S: PartsWrite + ?Sized>(&self, sink: &mut S) -> fmt::Result {
            const OUTER: Part = Part {
                category: "t",
                value: "outer",
            };
            const INNER: Part = Part {
                category: "t",
                value: "inner",
            };
            const OTHER: Part = Part {
                category: "other",
                value: "other",
            };
            sink.write_str("<")?;
            sink.with_part(OUTER, |s| {
                s.with_part(INNER, |s| s.with_part(OTHER, |s| s.write_str("é1")))?;
                s.write_str("2")
            })?;
            sink.write_str(">")
        }
    }

    #[test]
    fn text_is_cut_where_the_innermost_part_of_the_category_changes() {
        let got: Vec<(Option<&str>, String)> = pieces(&Two, "t")
            .into_iter()
            .map(|(p, t)| (p.map(|p| p.value), t))
            .collect();
        assert_eq!(
            got,
            vec![
                (None, "<".to_string()),
                (Some("inner"), "é1".to_string()),
                (Some("outer"), "2".to_string()),
                (None, ">".to_string()),
            ]
        );
    }
}
