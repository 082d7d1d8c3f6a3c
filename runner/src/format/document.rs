//! Finds the frontmatter and the fenced ```yaml blocks of a workflow file,
//! with their positions in the `.md`.
//!
//! The frontmatter may follow a title and prose (the peer insists on byte 0).
//! Fenced blocks are found by a CommonMark parser, so a fence inside a YAML
//! block scalar (```` ```json ```` in a prompt) does not end the block.

use crate::diag::{Pos, Source};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::sync::Arc;

/// A piece of YAML inside the `.md`, and where its first line sits.
#[derive(Debug, Clone)]
pub struct YamlText {
    pub text: String,
    /// File line of the YAML's first line.
    pub first_line: usize,
    /// Columns the YAML is indented by in the file (a fence inside a list).
    pub indent: usize,
}

impl YamlText {
    /// Position in the file of a 1-based line/col inside this YAML text.
    pub fn file_pos(&self, line: usize, col: usize) -> Pos {
        Pos {
            line: self.first_line + line.saturating_sub(1),
            col: col + self.indent,
        }
    }
}

/// A fenced ```yaml block of the body.
#[derive(Debug, Clone)]
pub struct Block {
    pub yaml: YamlText,
    /// Position of the opening fence.
    pub fence: Pos,
    /// Text of the nearest heading above the block.
    pub heading: Option<String>,
    /// How many blocks before this one sit under the same heading.
    pub index_under_heading: usize,
}

#[derive(Debug)]
pub struct Document {
    pub source: Arc<Source>,
    pub frontmatter: Option<YamlText>,
    pub blocks: Vec<Block>,
}

impl Document {
    /// The sha256 (hex) of what the file makes run: the frontmatter, and
    /// each step block with the heading above it (a heading may name its
    /// steps). Prose is left out: an edit of the explanations around the
    /// steps leaves a workflow the same version (a run of it can still be
    /// resumed and retried as it is).
    pub fn behaviour_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        use std::fmt::Write as _;
        let mut h = Sha256::new();
        let mut part = |tag: &str, text: &str| {
            // Lengths first: no two different sequences of parts hash alike.
            h.update(format!("{tag}:{}:", text.len()));
            h.update(text.as_bytes());
        };
        part(
            "frontmatter",
            self.frontmatter.as_ref().map_or("", |f| f.text.as_str()),
        );
        for b in &self.blocks {
            part("heading", b.heading.as_deref().unwrap_or(""));
            part("block", &b.yaml.text);
        }
        let mut hex = String::with_capacity(64);
        for byte in h.finalize() {
            let _ = write!(hex, "{byte:02x}");
        }
        hex
    }
}

const FRONTMATTER_KEYS: &[&str] = &[
    "workflow", "tools", "inputs", "steps", "triggers", "outputs",
    // A test file's (`NAME.test.md`): the workflow it tests.
    "test",
];

fn is_dashes(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Locates the frontmatter: the first `---` line outside code fences whose
/// YAML up to the next `---` has a top-level workflow key (`workflow:`,
/// `inputs:`, …), so a thematic break in prose is not mistaken for it.
fn find_frontmatter(src: &Source) -> Option<(YamlText, usize)> {
    let lines: Vec<&str> = src.text.split('\n').collect();
    let mut in_fence: Option<&str> = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if let Some(f) = in_fence {
            if t.starts_with(f) && t.trim_end().chars().all(|c| c == f.chars().next().unwrap()) {
                in_fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let ch = &t[..1];
            let n = t.chars().take_while(|c| c.to_string() == ch).count();
            in_fence = Some(&t[..n]);
            continue;
        }
        if !is_dashes(line) {
            continue;
        }
        let Some(end) = lines[i + 1..]
            .iter()
            .position(|l| is_dashes(l) || l.trim_end() == "...")
        else {
            continue;
        };
        let body = &lines[i + 1..i + 1 + end];
        let has_key = body.iter().any(|l| {
            FRONTMATTER_KEYS
                .iter()
                .any(|k| l.starts_with(k) && l[k.len()..].trim_start().starts_with(':'))
        });
        if has_key {
            let text = body.join("\n") + "\n";
            let end_line = i + 1 + end; // 0-based index of the closing line
            let end_offset = src.line_start(end_line + 2);
            return Some((
                YamlText {
                    text,
                    first_line: i + 2,
                    indent: 0,
                },
                end_offset,
            ));
        }
    }
    None
}

/// The line (1-based) of a `---` that opens a frontmatter no `---` closes:
/// the next lines are a workflow's keys, and no `---` (or `...`) comes
/// after it outside code fences.
pub fn unclosed_frontmatter(src: &Source) -> Option<usize> {
    let lines: Vec<&str> = src.text.split('\n').collect();
    let opening = lines.iter().position(|l| is_dashes(l))?;
    let mut in_fence = false;
    let mut keys = false;
    for line in &lines[opening + 1..] {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if is_dashes(line) || line.trim_end() == "..." {
            return None;
        }
        keys |= FRONTMATTER_KEYS
            .iter()
            .any(|k| line.starts_with(k) && line[k.len()..].trim_start().starts_with(':'));
    }
    keys.then_some(opening + 1)
}

pub fn parse_document(src: Arc<Source>) -> Document {
    let (frontmatter, body_start) = match find_frontmatter(&src) {
        Some((fm, end)) => (Some(fm), end),
        None => (None, 0),
    };
    let body = &src.text[body_start..];
    let mut blocks = Vec::new();
    let mut heading: Option<String> = None;
    let mut heading_buf: Option<String> = None;
    let mut under_heading = 0;
    let mut in_yaml: Option<(Pos, usize, String, Option<usize>)> = None;
    let parser = Parser::new_ext(body, Options::empty()).into_offset_iter();
    for (ev, range) in parser {
        match ev {
            Event::Start(Tag::Heading { .. }) => heading_buf = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                heading = heading_buf.take().map(|h| h.trim().to_string());
                under_heading = 0;
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = info.split_whitespace().next().unwrap_or("");
                if lang == "yaml" || lang == "yml" {
                    let fence = src.pos_of(body_start + range.start);
                    in_yaml = Some((fence, body_start + range.start, String::new(), None));
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((fence, fence_off, text, first)) = in_yaml.take() {
                    let first_off = first.unwrap_or(fence_off);
                    let first_pos = src.pos_of(first_off);
                    let first_line = if first.is_some() {
                        first_pos.line
                    } else {
                        fence.line + 1
                    };
                    // Content lines are de-indented by the fence's own indent.
                    let indent = fence.col - 1;
                    blocks.push(Block {
                        yaml: YamlText {
                            text,
                            first_line,
                            indent,
                        },
                        fence,
                        heading: heading.clone(),
                        index_under_heading: under_heading,
                    });
                    under_heading += 1;
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, _, text, first)) = in_yaml.as_mut() {
                    if first.is_none() {
                        *first = Some(body_start + range.start);
                    }
                    text.push_str(&t);
                } else if let Some(h) = heading_buf.as_mut() {
                    h.push_str(&t);
                }
            }
            _ => {}
        }
    }
    Document {
        source: src,
        frontmatter,
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_behaviour_digest_ignores_prose_only() {
        let digest =
            |text: &str| parse_document(Source::new(Path::new("t.md"), text)).behaviour_digest();
        let base = "---\nworkflow: {id: x}\n---\n\n## Ask\n\nWhy.\n\n```yaml\naction: core.set\ninputs: {a: 1}\n```\n";
        let prose = base.replace("Why.", "Why, at length.\n\nAnd more.");
        assert_eq!(digest(base), digest(&prose));
        for changed in [
            base.replace("{a: 1}", "{a: 2}"),
            base.replace("## Ask", "## Ask again"),
            base.replace("id: x", "id: y"),
        ] {
            assert_ne!(digest(base), digest(&changed), "{changed}");
        }
    }

    #[test]
    fn frontmatter_after_title_and_nested_fences() {
        let text = "# Title\n\nProse.\n\n---\nworkflow:\n  id: x\n---\n\n## Step 1: Ask\n\n```yaml\naction: agent.run\ninputs:\n  prompt: |\n    Return JSON:\n    ```json\n    {}\n    ```\noutput_variable: raw\n```\n\n---\n\n```bash\necho hi\n```\n";
        let doc = parse_document(Source::new(Path::new("t.md"), text));
        let fm = doc.frontmatter.unwrap();
        assert_eq!(fm.first_line, 6);
        assert_eq!(fm.text, "workflow:\n  id: x\n");
        assert_eq!(doc.blocks.len(), 1);
        let b = &doc.blocks[0];
        assert_eq!(b.heading.as_deref(), Some("Step 1: Ask"));
        assert_eq!(b.yaml.first_line, 13);
        assert!(
            b.yaml.text.ends_with("output_variable: raw\n"),
            "{}",
            b.yaml.text
        );
    }

    #[test]
    fn frontmatter_at_byte_zero() {
        let text = "---\nworkflow: {id: a}\nsteps: []\n---\nbody\n";
        let doc = parse_document(Source::new(Path::new("t.md"), text));
        assert_eq!(doc.frontmatter.unwrap().first_line, 2);
    }
}
