//! Where each node of a YAML text starts, so errors can point into the `.md`.
//!
//! Values come from serde_yaml; this tree records positions (from
//! yaml-rust2's marked events), looked up by the same key path, and the
//! plain scalars that serde_yaml reads otherwise than YAML 1.2's core
//! schema does (the peer's `yaml` package reads 1.2): `0644` is the number
//! 644 there, `-0x1F` and `0b101` are text.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A 1-based line and column within the YAML text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct YPos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    Plain,
    Quoted,
    /// `|` or `>`: the content starts on the next line.
    Block,
}

#[derive(Debug, Clone)]
pub enum PosNode {
    /// A scalar; with its value by YAML 1.2's core schema where serde_yaml
    /// reads it otherwise.
    Scalar(YPos, ScalarStyle, Option<Box<serde_json::Value>>),
    Seq(YPos, Vec<PosNode>),
    /// Entries: key text, key position, value node.
    Map(YPos, Vec<(String, YPos, PosNode)>),
}

impl PosNode {
    pub fn pos(&self) -> YPos {
        match self {
            PosNode::Scalar(p, ..) | PosNode::Seq(p, _) | PosNode::Map(p, _) => *p,
        }
    }
    pub fn get(&self, key: &str) -> Option<&PosNode> {
        match self {
            PosNode::Map(_, entries) => entries.iter().find(|(k, _, _)| k == key).map(|e| &e.2),
            PosNode::Seq(_, items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
    }
    pub fn key_pos(&self, key: &str) -> Option<YPos> {
        match self {
            PosNode::Map(_, entries) => entries.iter().find(|(k, _, _)| k == key).map(|e| e.1),
            _ => None,
        }
    }
    pub fn index(&self, i: usize) -> Option<&PosNode> {
        match self {
            PosNode::Seq(_, items) => items.get(i),
            _ => None,
        }
    }
    /// Follows a key path as far as it goes.
    pub fn lookup<'a>(&'a self, path: &[String]) -> &'a PosNode {
        let mut cur = self;
        for seg in path {
            match cur.get(seg) {
                Some(n) => cur = n,
                None => break,
            }
        }
        cur
    }
}

enum Frame {
    Seq(YPos, Vec<PosNode>),
    Map(YPos, Vec<(String, YPos, PosNode)>, Option<(String, YPos)>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<PosNode>,
    anchors: std::collections::HashMap<usize, PosNode>,
}

fn ypos(m: &Marker) -> YPos {
    // yaml-rust2 columns are 0-based.
    YPos {
        line: m.line(),
        col: m.col() + 1,
    }
}

impl Builder {
    fn push_node(&mut self, node: PosNode, key_text: Option<String>) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq(_, items)) => items.push(node),
            Some(Frame::Map(_, entries, pending)) => match pending.take() {
                None => {
                    // This node is a key.
                    let text = key_text.unwrap_or_default();
                    *pending = Some((text, node.pos()));
                }
                Some((k, kp)) => entries.push((k, kp, node)),
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let p = ypos(&mark);
        match ev {
            Event::Scalar(text, style, anchor, _) => {
                let style = match style {
                    TScalarStyle::Plain => ScalarStyle::Plain,
                    TScalarStyle::Literal | TScalarStyle::Folded => ScalarStyle::Block,
                    _ => ScalarStyle::Quoted,
                };
                let core = (style == ScalarStyle::Plain)
                    .then(|| core_schema(&text))
                    .flatten()
                    .map(Box::new);
                let node = PosNode::Scalar(p, style, core);
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_node(node, Some(text));
            }
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().unwrap_or(PosNode::Scalar(
                    p,
                    ScalarStyle::Plain,
                    None,
                ));
                self.push_node(node, Some(String::new()));
            }
            Event::SequenceStart(..) => self.stack.push(Frame::Seq(p, Vec::new())),
            Event::MappingStart(..) => self.stack.push(Frame::Map(p, Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Frame::Seq(p, items)) => PosNode::Seq(p, items),
                    // A mapping's own marker sits after its first key: use that key's.
                    Some(Frame::Map(p, entries, _)) => {
                        let p = entries.first().map(|e| e.1).unwrap_or(p);
                        PosNode::Map(p, entries)
                    }
                    None => return,
                };
                self.push_node(node, None);
            }
            _ => {}
        }
    }
}

/// A plain scalar's value by YAML 1.2's core schema, where serde_yaml
/// (which also reads YAML 1.1's forms) differs: decimals with leading zeros
/// are numbers (`0644` is 644, `02139` 2139), and the radix forms 1.2 does
/// not have are text (`0b101`, a signed `-0x1F` or `+0o14`).
fn core_schema(text: &str) -> Option<serde_json::Value> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let signed = unsigned.len() != text.len();
    let digits = |rest: &str, ok: fn(char) -> bool| !rest.is_empty() && rest.chars().all(ok);
    if unsigned.len() > 1 && unsigned.starts_with('0') && digits(unsigned, |c| c.is_ascii_digit()) {
        let n: f64 = text.parse().ok()?;
        return Some(match text.parse::<i64>() {
            Ok(i) if i.unsigned_abs() < 1 << 53 => serde_json::Value::from(i),
            _ => serde_json::Number::from_f64(n).map(serde_json::Value::Number)?,
        });
    }
    let radix_text = match unsigned.get(..2) {
        Some("0b") => digits(&unsigned[2..], |c| c == '0' || c == '1'),
        Some("0o") => signed && digits(&unsigned[2..], |c| ('0'..='7').contains(&c)),
        Some("0x") => signed && digits(&unsigned[2..], |c| c.is_ascii_hexdigit()),
        _ => false,
    };
    radix_text.then(|| serde_json::Value::String(text.to_string()))
}

/// Replaces the plain scalars of `v` (read by serde_yaml from the text
/// `node` was built from) that YAML 1.2's core schema reads otherwise.
pub fn apply_core_schema(v: &mut serde_json::Value, node: &PosNode) {
    use serde_json::Value;
    match (v, node) {
        (v, PosNode::Scalar(_, _, Some(core))) => *v = (**core).clone(),
        (Value::Object(map), PosNode::Map(_, entries)) => {
            for (k, _, child) in entries {
                if let Some(x) = map.get_mut(k) {
                    apply_core_schema(x, child);
                }
            }
        }
        (Value::Array(items), PosNode::Seq(_, nodes)) => {
            for (x, child) in items.iter_mut().zip(nodes) {
                apply_core_schema(x, child);
            }
        }
        _ => {}
    }
}

/// Positions of every node of `text`, or None when yaml-rust2 cannot read it
/// (serde_yaml's own error is reported then).
pub fn positions(text: &str) -> Option<PosNode> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut b, false).ok()?;
    b.root
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn positions_of_nested_keys() {
        let y = "action: agent.run\nmodel: haiku\ninputs:\n  prompt: |\n    hello\n    {{ x }}\nlist:\n  - a: 1\n  - b: 2\n";
        let n = positions(y).unwrap();
        assert_eq!(n.key_pos("model"), Some(YPos { line: 2, col: 1 }));
        let prompt = n.get("inputs").unwrap().get("prompt").unwrap();
        // A block scalar's position is where its content starts.
        assert!(matches!(
            prompt,
            PosNode::Scalar(YPos { line: 5, col: 5 }, ScalarStyle::Block, None)
        ));
        assert_eq!(n.pos(), YPos { line: 1, col: 1 });
        assert_eq!(
            n.lookup(&["list".into(), "1".into(), "b".into()]).pos(),
            YPos { line: 9, col: 8 }
        );
    }

    #[test]
    fn plain_scalars_read_as_yaml_1_2_core_schema() {
        for (text, want) in [
            ("0644", Some(serde_json::json!(644))),
            ("-012", Some(serde_json::json!(-12))),
            ("+02139", Some(serde_json::json!(2139))),
            ("0b101", Some(serde_json::json!("0b101"))),
            ("-0x1F", Some(serde_json::json!("-0x1F"))),
            ("+0o14", Some(serde_json::json!("+0o14"))),
            // serde_yaml already reads these as 1.2 does.
            ("0", None),
            ("0x1F", None),
            ("0o14", None),
            ("0644a", None),
            ("0.5", None),
        ] {
            assert_eq!(core_schema(text), want, "{text}");
        }
    }
}
