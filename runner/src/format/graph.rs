//! `marktoflow graph`: a workflow as a flowchart (Mermaid, DOT, or SVG).
//!
//! One graph model is built from the steps, then rendered; the SVG needs no
//! Graphviz: nodes are placed in layers by their longest path from the start.

use crate::format::model::{Step, StepKind, Workflow};
use std::collections::HashMap;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Terminal,
    Box,
    Decision,
    Loop,
    Fork,
    Call,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub label: String,
    pub detail: Option<String>,
    pub shape: Shape,
}

#[derive(Debug, Clone)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub label: Option<String>,
    /// Loops back to an earlier node (drawn dashed, ignored for layout).
    pub back: bool,
    /// The error path of a `try`.
    pub dashed: bool,
}

#[derive(Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// A place a step sequence can be left from, with an optional edge label.
type Exit = (String, Option<String>);

impl Graph {
    pub fn of(wf: &Workflow) -> Graph {
        let mut g = Graph::default();
        // `end` is a keyword in Mermaid (and `start` reads badly next to it):
        // the terminals get ids no step can have (step ids are `s_…`).
        g.node("wf_start", "start", None, Shape::Terminal);
        let exits = g.seq(&wf.steps, vec![("wf_start".into(), None)]);
        g.node("wf_end", "end", None, Shape::Terminal);
        g.link(exits, "wf_end");
        g
    }

    fn node(&mut self, id: &str, label: &str, detail: Option<String>, shape: Shape) {
        self.nodes.push(Node {
            id: id.to_string(),
            label: label.to_string(),
            detail,
            shape,
        });
    }

    fn edge(&mut self, from: &str, to: &str, label: Option<String>) {
        self.edges.push(Edge {
            from: from.into(),
            to: to.into(),
            label,
            back: false,
            dashed: false,
        });
    }

    fn link(&mut self, exits: Vec<Exit>, to: &str) {
        for (from, label) in exits {
            self.edge(&from, to, label);
        }
    }

    fn seq(&mut self, steps: &[Step], mut entry: Vec<Exit>) -> Vec<Exit> {
        for s in steps {
            entry = self.step(s, entry);
        }
        entry
    }

    fn step(&mut self, s: &Step, entry: Vec<Exit>) -> Vec<Exit> {
        let id = format!("s_{}", sanitize(&s.id));
        let name = s.display_name().to_string();
        let (shape, detail) = match &s.kind {
            StepKind::Action { action, .. } => (Shape::Box, Some(action.clone())),
            StepKind::If { condition, .. } => (Shape::Decision, Some(format!("if {condition}"))),
            StepKind::Switch { expression, .. } => {
                (Shape::Decision, Some(format!("switch {expression}")))
            }
            StepKind::ForEach { item_variable, .. } => {
                (Shape::Loop, Some(format!("for each {item_variable}")))
            }
            StepKind::While { condition, .. } => (Shape::Loop, Some(format!("while {condition}"))),
            StepKind::Try { .. } => (Shape::Box, Some("try".into())),
            StepKind::Wait { .. } => (Shape::Box, Some("wait".into())),
            StepKind::Ask(a) => (
                Shape::Decision,
                Some(format!("wait for {}", a.mode.as_str())),
            ),
            StepKind::Map { .. } => (Shape::Box, Some("map".into())),
            StepKind::Filter { .. } => (Shape::Box, Some("filter".into())),
            StepKind::Reduce { .. } => (Shape::Box, Some("reduce".into())),
            StepKind::Merge { .. } => (Shape::Box, Some("merge".into())),
            StepKind::Parallel { max_concurrent, .. } => {
                (Shape::Fork, Some(format!("parallel ×{max_concurrent}")))
            }
            StepKind::SubWorkflow { path, .. } => (Shape::Call, Some(path.clone())),
            StepKind::Spawn { agents, items, .. } => {
                let detail = match items {
                    None => format!("parallel.spawn ×{}", agents.len()),
                    Some(_) => "parallel.map".to_string(),
                };
                (Shape::Fork, Some(detail))
            }
        };
        self.node(&id, &name, detail, shape);
        self.link(entry, &id);
        match &s.kind {
            StepKind::If {
                then, otherwise, ..
            } => {
                let mut out = self.seq(then, vec![(id.clone(), Some("then".into()))]);
                out.extend(self.seq(otherwise, vec![(id.clone(), Some("else".into()))]));
                out
            }
            StepKind::Ask(a) => {
                // What it sends when it starts waiting is a side lane.
                let first = self.edges.len();
                let _ = self.seq(&a.notify, vec![(id.clone(), Some("notify".into()))]);
                if let Some(e) = self.edges.get_mut(first) {
                    e.dashed = true;
                }
                if a.on_approve.is_empty() && a.on_reject.is_empty() {
                    return vec![(id, Some("answered".into()))];
                }
                let mut out = self.seq(&a.on_approve, vec![(id.clone(), Some("approved".into()))]);
                out.extend(self.seq(&a.on_reject, vec![(id.clone(), Some("rejected".into()))]));
                out
            }
            StepKind::Switch { cases, default, .. } => {
                let mut out = Vec::new();
                for (k, steps) in cases {
                    out.extend(self.seq(steps, vec![(id.clone(), Some(k.clone()))]));
                }
                out.extend(self.seq(default, vec![(id.clone(), Some("default".into()))]));
                out
            }
            StepKind::ForEach { steps, .. } | StepKind::While { steps, .. } => {
                let body = self.seq(steps, vec![(id.clone(), Some("each".into()))]);
                for (from, _) in body {
                    if from != id {
                        self.edges.push(Edge {
                            from,
                            to: id.clone(),
                            label: Some("next".into()),
                            back: true,
                            dashed: true,
                        });
                    }
                }
                vec![(id, Some("done".into()))]
            }
            StepKind::Parallel { branches, .. } => {
                let join = format!("{id}_join");
                let mut exits = Vec::new();
                for b in branches {
                    exits.extend(self.seq(&b.steps, vec![(id.clone(), Some(b.id.clone()))]));
                }
                self.node(&join, "join", None, Shape::Fork);
                self.link(exits, &join);
                vec![(join, None)]
            }
            StepKind::Spawn { agents, items, .. } => {
                let join = format!("{id}_join");
                let mut exits = Vec::new();
                for a in agents {
                    let label = if items.is_some() {
                        "each item"
                    } else {
                        a.id.as_str()
                    };
                    let lane = std::slice::from_ref(a);
                    exits.extend(self.seq(lane, vec![(id.clone(), Some(label.to_string()))]));
                }
                self.node(&join, "join", None, Shape::Fork);
                self.link(exits, &join);
                vec![(join, None)]
            }
            StepKind::Try {
                body,
                catch,
                finally,
            } => {
                let mut out = self.seq(body, vec![(id.clone(), None)]);
                if !catch.is_empty() {
                    let first = self.edges.len();
                    out.extend(self.seq(catch, vec![(id.clone(), Some("on error".into()))]));
                    if let Some(e) = self.edges.get_mut(first) {
                        e.dashed = true;
                    }
                }
                if finally.is_empty() {
                    out
                } else {
                    self.seq(finally, out)
                }
            }
            _ => vec![(id, None)],
        }
    }

    pub fn mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n");
        for n in &self.nodes {
            let text = mermaid_text(n);
            let shaped = match n.shape {
                Shape::Terminal => format!("([\"{text}\"])"),
                Shape::Box => format!("[\"{text}\"]"),
                Shape::Decision => format!("{{\"{text}\"}}"),
                Shape::Loop => format!("{{{{\"{text}\"}}}}"),
                Shape::Fork => format!("[/\"{text}\"\\]"),
                Shape::Call => format!("[[\"{text}\"]]"),
            };
            let _ = writeln!(out, "    {}{}", n.id, shaped);
        }
        for e in &self.edges {
            let arrow = if e.dashed { "-.->" } else { "-->" };
            match &e.label {
                Some(l) => {
                    let _ = writeln!(
                        out,
                        "    {} {arrow}|\"{}\"| {}",
                        e.from,
                        escape_mermaid(l),
                        e.to
                    );
                }
                None => {
                    let _ = writeln!(out, "    {} {arrow} {}", e.from, e.to);
                }
            }
        }
        out
    }

    pub fn dot(&self) -> String {
        let mut out = String::from("digraph workflow {\n    rankdir=TB;\n    node [fontname=\"Helvetica\", fontsize=11];\n");
        for n in &self.nodes {
            let shape = match n.shape {
                Shape::Terminal => "oval",
                Shape::Box => "box",
                Shape::Decision => "diamond",
                Shape::Loop => "hexagon",
                Shape::Fork => "trapezium",
                Shape::Call => "box3d",
            };
            let label = match &n.detail {
                Some(d) => format!(
                    "{}\\n{}",
                    escape_dot(&n.label),
                    escape_dot(&truncate(d, 60))
                ),
                None => escape_dot(&n.label),
            };
            let _ = writeln!(out, "    {} [label=\"{label}\", shape={shape}];", n.id);
        }
        for e in &self.edges {
            let mut attrs = Vec::new();
            if let Some(l) = &e.label {
                attrs.push(format!("label=\"{}\"", escape_dot(l)));
            }
            if e.dashed {
                attrs.push("style=dashed".into());
            }
            if e.back {
                attrs.push("constraint=false".into());
            }
            let _ = writeln!(out, "    {} -> {} [{}];", e.from, e.to, attrs.join(", "));
        }
        out.push_str("}\n");
        out
    }

    /// A standalone SVG: layers by longest path from `start` over forward
    /// edges, nodes left to right in each layer.
    pub fn svg(&self) -> String {
        const W: f64 = 230.0;
        const H: f64 = 46.0;
        const GX: f64 = 40.0;
        const GY: f64 = 44.0;
        let index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), i))
            .collect();
        let mut layer = vec![0usize; self.nodes.len()];
        // Edges are emitted in step order, so relaxing them repeatedly settles quickly.
        for _ in 0..self.nodes.len() {
            let mut changed = false;
            for e in self.edges.iter().filter(|e| !e.back) {
                let (Some(&a), Some(&b)) = (index.get(e.from.as_str()), index.get(e.to.as_str()))
                else {
                    continue;
                };
                if layer[b] < layer[a] + 1 {
                    layer[b] = layer[a] + 1;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let depth = layer.iter().copied().max().unwrap_or(0) + 1;
        let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
        for (i, l) in layer.iter().enumerate() {
            rows[*l].push(i);
        }
        let widest = rows.iter().map(Vec::len).max().unwrap_or(1) as f64;
        let inner = widest * (W + GX) + GX;
        let mut pos = vec![(0.0, 0.0); self.nodes.len()];
        for (r, row) in rows.iter().enumerate() {
            let row_w = row.len() as f64 * (W + GX) - GX;
            let x0 = (inner - row_w) / 2.0;
            for (k, &i) in row.iter().enumerate() {
                pos[i] = (x0 + k as f64 * (W + GX), GY + r as f64 * (H + GY));
            }
        }
        // Edges never cross a box: an edge between neighbouring rows stays in
        // the gap between them; a longer one that a direct curve would draw
        // through a box, and every edge back to an earlier step, leaves its
        // box downwards, runs along a lane of its own beside the drawing
        // (the nearer side for forward edges, the right for back edges)
        // and enters the
        // target from above.
        let boxes: Vec<(f64, f64)> = pos.clone();
        let hits_box = |a: usize, b: usize, pts: &[(f64, f64)]| {
            pts.iter().any(|&(x, y)| {
                boxes.iter().enumerate().any(|(i, &(bx, by))| {
                    i != a
                        && i != b
                        && x > bx - 4.0
                        && x < bx + W + 4.0
                        && y > by - 4.0
                        && y < by + H + 4.0
                })
            })
        };
        enum Route {
            Direct,
            Left(usize),
            Right(usize),
        }
        let (mut n_left, mut n_right) = (0, 0);
        let routes: Vec<Option<Route>> = self
            .edges
            .iter()
            .map(|e| {
                let (&a, &b) = (index.get(e.from.as_str())?, index.get(e.to.as_str())?);
                if e.back {
                    n_right += 1;
                    return Some(Route::Right(n_right - 1));
                }
                let (ax, ay) = (pos[a].0 + W / 2.0, pos[a].1 + H);
                let (bx, by) = (pos[b].0 + W / 2.0, pos[b].1);
                let curve = bezier(
                    (ax, ay),
                    (ax, (ay + by) / 2.0),
                    (bx, (ay + by) / 2.0),
                    (bx, by),
                );
                if layer[b] == layer[a] + 1 || !hits_box(a, b, &curve) {
                    Some(Route::Direct)
                } else if ax + bx < inner {
                    n_left += 1;
                    Some(Route::Left(n_left - 1))
                } else {
                    n_right += 1;
                    Some(Route::Right(n_right - 1))
                }
            })
            .collect();
        const LANE: f64 = 12.0;
        let shift = n_left as f64 * LANE;
        for p in pos.iter_mut() {
            p.0 += shift;
        }
        let right_edge = pos.iter().map(|p| p.0 + W).fold(0.0, f64::max);
        let width = (inner + shift).max(right_edge + GX) + n_right as f64 * LANE;
        let height = depth as f64 * (H + GY) + GY;
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"Helvetica, Arial, sans-serif\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        for (e, route) in self.edges.iter().zip(&routes) {
            let (Some(&a), Some(&b), Some(route)) =
                (index.get(e.from.as_str()), index.get(e.to.as_str()), route)
            else {
                continue;
            };
            let (ax, ay) = (pos[a].0 + W / 2.0, pos[a].1 + H);
            let (bx, by) = (pos[b].0 + W / 2.0, pos[b].1);
            let dash = if e.dashed || e.back {
                " stroke-dasharray=\"5,4\""
            } else {
                ""
            };
            let color = if e.back { "#888" } else { "#555" };
            // Lanes of different edges cross the gaps at different heights.
            let lane_path = |x: f64, k: usize| {
                let dy = (k % 3) as f64 * 5.0 - 5.0;
                let (down, up) = (ay + GY / 2.0 + dy, by - GY / 2.0 + dy);
                format!("M{ax:.1},{ay:.1} V{down:.1} H{x:.1} V{up:.1} H{bx:.1} V{by:.1}")
            };
            let (d, (lx, ly)) = match route {
                Route::Direct => {
                    let my = (ay + by) / 2.0;
                    (
                        format!(
                            "M{ax:.1},{ay:.1} C{ax:.1},{my:.1} {bx:.1},{my:.1} {bx:.1},{by:.1}"
                        ),
                        ((ax + bx) / 2.0 + 4.0, my - 3.0),
                    )
                }
                Route::Left(k) => (
                    lane_path(GX / 2.0 + *k as f64 * LANE, *k),
                    (ax + 4.0, ay + 12.0),
                ),
                Route::Right(k) => (
                    lane_path(right_edge + GX / 2.0 + *k as f64 * LANE, *k),
                    (ax + 4.0, ay + 12.0),
                ),
            };
            let _ = writeln!(
                out,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\"{dash} marker-end=\"url(#arrow)\"/>"
            );
            if let Some(l) = &e.label {
                let _ = writeln!(
                    out,
                    "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"11\" fill=\"#555\">{}</text>",
                    xml(&truncate(l, 28))
                );
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let (x, y) = pos[i];
            let (fill, stroke) = match n.shape {
                Shape::Terminal => ("#eef6ee", "#4a8a4a"),
                Shape::Decision => ("#fff6e0", "#c08a20"),
                Shape::Loop => ("#eef0fb", "#5660b0"),
                Shape::Fork => ("#f4eefb", "#8a56b0"),
                Shape::Call => ("#eaf5f8", "#3a8aa0"),
                Shape::Box => ("#f6f6f6", "#666"),
            };
            let rx = match n.shape {
                Shape::Terminal => H / 2.0,
                Shape::Decision | Shape::Loop => 14.0,
                _ => 4.0,
            };
            let _ = writeln!(out, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{W}\" height=\"{H}\" rx=\"{rx}\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"/>");
            let cx = x + W / 2.0;
            match &n.detail {
                Some(d) => {
                    let _ = writeln!(out, "<text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222\">{}</text>", y + 19.0, xml(&truncate(&n.label, 32)));
                    let _ = writeln!(out, "<text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#666\">{}</text>", y + 36.0, xml(&truncate(d, 38)));
                }
                None => {
                    let _ = writeln!(out, "<text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222\">{}</text>", y + 28.0, xml(&truncate(&n.label, 32)));
                }
            }
        }
        out.push_str("</svg>\n");
        out
    }
}

/// Points along a cubic Bézier curve (for telling whether it crosses a box).
fn bezier(p0: (f64, f64), p1: (f64, f64), p2: (f64, f64), p3: (f64, f64)) -> Vec<(f64, f64)> {
    (1..50)
        .map(|i| {
            let t = i as f64 / 50.0;
            let u = 1.0 - t;
            let (a, b, c, d) = (u * u * u, 3.0 * u * u * t, 3.0 * u * t * t, t * t * t);
            (
                a * p0.0 + b * p1.0 + c * p2.0 + d * p3.0,
                a * p0.1 + b * p1.1 + c * p2.1 + d * p3.1,
            )
        })
        .collect()
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn truncate(s: &str, n: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() <= n {
        s
    } else {
        let cut: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn escape_mermaid(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
        .replace('{', "#123;")
        .replace('}', "#125;")
}

fn mermaid_text(n: &Node) -> String {
    match &n.detail {
        Some(d) => format!(
            "{}<br/><small>{}</small>",
            escape_mermaid(&n.label),
            escape_mermaid(&truncate(d, 60))
        ),
        None => escape_mermaid(&n.label),
    }
}

fn escape_dot(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use marktoflow_steps::Registry;
    use std::path::Path;

    /// Points along an SVG path of `M`, `C`, `H` and `V` commands.
    fn path_points(d: &str) -> Vec<(f64, f64)> {
        let nums = |t: &str| -> Vec<f64> {
            t.split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect()
        };
        let mut pts = Vec::new();
        let mut cur = (0.0, 0.0);
        let mut rest = d.trim();
        while let Some(c) = rest.chars().next() {
            let end = rest[1..]
                .find(|ch: char| ch.is_ascii_alphabetic())
                .map_or(rest.len(), |i| i + 1);
            let v = nums(&rest[1..end]);
            let line = |from: (f64, f64), to: (f64, f64)| -> Vec<(f64, f64)> {
                (1..=40)
                    .map(|i| {
                        let t = i as f64 / 40.0;
                        (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t)
                    })
                    .collect()
            };
            let next = match c {
                'M' => (v[0], v[1]),
                'H' => (v[0], cur.1),
                'V' => (cur.0, v[0]),
                'C' => {
                    pts.extend(bezier(cur, (v[0], v[1]), (v[2], v[3]), (v[4], v[5])));
                    (v[4], v[5])
                }
                other => panic!("unexpected path command {other} in {d}"),
            };
            if c == 'H' || c == 'V' {
                pts.extend(line(cur, next));
            }
            cur = next;
            rest = rest[end..].trim();
        }
        pts
    }

    #[test]
    fn no_edge_is_drawn_through_a_box() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut checked = 0;
        for dir in [
            "examples",
            "examples/lib",
            "workflows/lifeos",
            "workflows/conhub",
            "workflows/atlas",
            "workflows/luka",
            "workflows/memoryscope",
            "tests/console",
        ] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = e.unwrap().path();
                if path.extension().is_none_or(|x| x != "md") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let Ok(loaded) =
                    crate::format::model::load_str(&path, &text, &Registry::standard())
                else {
                    continue;
                };
                let svg = Graph::of(&loaded.workflow).svg();
                let attr = |tag: &str, name: &str| -> Option<String> {
                    let i = tag.find(&format!(" {name}=\""))? + name.len() + 3;
                    Some(tag[i..].split('"').next()?.to_string())
                };
                let mut boxes = Vec::new();
                let mut paths = Vec::new();
                for tag in svg.split('<') {
                    if tag.starts_with("rect ") && !tag.contains("width=\"100%\"") {
                        let n = |k| attr(tag, k).unwrap().parse::<f64>().unwrap();
                        boxes.push((n("x"), n("y"), n("width"), n("height")));
                    } else if tag.starts_with("path ") && tag.contains("marker-end") {
                        paths.push(attr(tag, "d").unwrap());
                    }
                }
                for d in &paths {
                    for (x, y) in path_points(d) {
                        for (bx, by, w, h) in &boxes {
                            let inside = x > bx + 1.0
                                && x < bx + w - 1.0
                                && y > by + 1.0
                                && y < by + h - 1.0;
                            assert!(
                                !inside,
                                "{}: edge `{d}` crosses the box at ({bx}, {by})",
                                path.display()
                            );
                        }
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 20, "{checked} graphs");
    }

    #[test]
    fn seed_graph_has_branches() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/seeds/000_fd4e5c8ba954ba6b.txt"
        ));
        let text = std::fs::read_to_string(path).expect("../shared beside the repository");
        let wf = crate::format::model::load_str(path, &text, &Registry::standard())
            .ok()
            .unwrap()
            .workflow;
        let g = Graph::of(&wf);
        let m = g.mermaid();
        assert!(m.starts_with("flowchart TD\n"));
        assert!(
            m.contains("s_has_results -->|\"then\"| s_has_results_then_1"),
            "{m}"
        );
        assert!(
            m.contains("s_has_results -->|\"else\"| s_has_results_else_1"),
            "{m}"
        );
        assert!(m.contains("s_has_results_then_2 --> s_set_outputs"), "{m}");
        assert!(m.contains("s_set_outputs --> wf_end"), "{m}");
        let d = g.dot();
        assert!(d.contains("s_has_results [label=\"Step 4: Generate Answer\\nif {{ search_results.found }}\", shape=diamond];"), "{d}");
        let svg = g.svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect x=").count(), g.nodes.len());
    }
}
