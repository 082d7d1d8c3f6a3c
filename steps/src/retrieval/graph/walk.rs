//! Questions of the graph: a node's edges (out, in or both, filtered by
//! relation), everything reachable from it up to a depth ("all that
//! billing-service depends on, directly or not"), and the shortest chain
//! of edges to another node. A node is a name: a note is one node with all
//! its names (title, file name, aliases), so `billing-service` and "the
//! billing service" meet.

use super::extract::key;
use super::store::{GraphStore, StoredEdge};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
    Both,
}

impl Direction {
    pub fn parse(s: &str) -> Option<Direction> {
        match s {
            "out" | "outgoing" => Some(Direction::Out),
            "in" | "incoming" | "backlinks" => Some(Direction::In),
            "both" => Some(Direction::Both),
            _ => None,
        }
    }
}

pub struct Query<'a> {
    pub node: &'a str,
    pub direction: Direction,
    /// Only edges of these relations (all when empty).
    pub relations: &'a [String],
    /// How many edges away (1: the node's own edges).
    pub depth: usize,
    /// A node to find the shortest chain of edges to.
    pub to: Option<&'a str>,
    /// At most this many edges in the answer.
    pub limit: usize,
}

/// A node: the names that are it, how it is shown, the notes that are it.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub keys: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Found {
    pub node: Node,
    /// Whether the notes name the node at all.
    pub known: bool,
    /// Each edge with how many steps from the node it was met.
    pub edges: Vec<(StoredEdge, usize)>,
    /// The nodes reached, with their distance, nearest first.
    pub reached: Vec<(String, usize)>,
    /// The chain to `to`, when asked for and found.
    pub path: Option<Vec<StoredEdge>>,
    /// The chain's nodes by name, from the node to `to` (an edge names
    /// them as its note does: "Beatriz" for Beatriz Santos).
    pub chain: Option<Vec<String>>,
    /// More edges than `limit`.
    pub truncated: bool,
}

/// A name as a node: with a note's names all together.
pub fn node(g: &GraphStore, name: &str) -> Node {
    let mut k = key(name);
    let mut notes = g.notes_named(&k);
    // Notes call people (and things) by their first name: "Marcus" is the
    // one name that starts with it, when only one does, and is shown by
    // that full name; a first name the notes also use alone keeps its own
    // edges too. Only a word (not a `#tag`, a path or a number) can be a
    // first name.
    let mut also: Option<String> = None;
    let a_word = |w: &str| w.chars().next().is_some_and(char::is_alphabetic);
    if notes.is_empty() && !k.contains(' ') && a_word(&k) {
        if let [full] = g.names_starting(&k, 2).as_slice() {
            if g.knows(&k) {
                also = Some(full.clone());
            } else {
                k = full.clone();
                notes = g.notes_named(&k);
            }
        }
    }
    let paths: Vec<String> = notes.iter().map(|(p, _)| p.clone()).collect();
    let mut keys: BTreeSet<String> = g.names_of(&paths).into_iter().collect();
    keys.insert(k.clone());
    if let Some(full) = &also {
        let theirs: Vec<String> = g.notes_named(full).into_iter().map(|(p, _)| p).collect();
        keys.extend(g.names_of(&theirs));
        keys.insert(full.clone());
    }
    // …and "Marcus Oyelaran" is also the "Marcus" the notes speak of.
    if let Some((first, _)) = k.split_once(' ').filter(|(f, _)| a_word(f)) {
        if g.knows(first)
            && g.notes_named(first).is_empty()
            && g.names_starting(first, 2) == [k.clone()]
        {
            keys.insert(first.to_string());
        }
    }
    let own = || g.spelling(&k).unwrap_or_else(|| name.trim().to_string());
    let shown = match (notes.first(), &also) {
        (Some((_, n)), _) => n.clone(),
        (None, Some(full)) => {
            let full = match g.notes_named(full).first() {
                Some((_, n)) => n.clone(),
                None => g.spelling(full).unwrap_or_else(|| full.clone()),
            };
            // "Helen" is Helen Achterberg; "Chargewell" is not its "REST API".
            if is_a_full_name(&full) {
                full
            } else {
                own()
            }
        }
        (None, None) => own(),
    };
    Node {
        name: shown,
        keys: keys.into_iter().collect(),
        notes: paths,
    }
}

/// A given name and a family name: two words, the second capitalised
/// and otherwise in lower case ("Helen Achterberg", not "Chargewell REST
/// API" or "Season 4").
fn is_a_full_name(name: &str) -> bool {
    let words: Vec<&str> = name.split_whitespace().collect();
    let [_, family] = words.as_slice() else {
        return false;
    };
    let mut chars = family.chars();
    chars.next().is_some_and(char::is_uppercase)
        && chars.clone().any(char::is_lowercase)
        && chars.all(|c| c.is_lowercase() || matches!(c, '\'' | '’' | '-'))
}

/// Nodes already resolved during one question (a hub is met many times).
struct Nodes<'g> {
    g: &'g GraphStore,
    known: std::collections::HashMap<String, Node>,
}

impl Nodes<'_> {
    fn get(&mut self, name: &str) -> Node {
        let k = key(name);
        if let Some(n) = self.known.get(&k) {
            return n.clone();
        }
        let n = node(self.g, name);
        self.known.insert(k, n.clone());
        n
    }
}

pub fn run(g: &GraphStore, q: &Query<'_>) -> Found {
    let mut nodes = Nodes {
        g,
        known: Default::default(),
    };
    let start = nodes.get(q.node);
    let target = q.to.map(|t| node(g, t));
    let wanted = |e: &StoredEdge| q.relations.is_empty() || q.relations.contains(&e.rel);
    let mut seen_keys: BTreeSet<String> = start.keys.iter().cloned().collect();
    let mut reached: Vec<(String, usize)> = Vec::new();
    let mut edges: Vec<(StoredEdge, usize)> = Vec::new();
    let mut edge_seen: BTreeSet<StoredEdge> = BTreeSet::new();
    // For the chain: how each node key was reached.
    let mut came_by: BTreeMap<String, StoredEdge> = BTreeMap::new();
    let mut queue: VecDeque<(Node, usize)> = VecDeque::from([(start.clone(), 0)]);
    let mut truncated = false;
    let mut found_path: Option<Vec<StoredEdge>> = None;
    let max_depth = if target.is_some() {
        q.depth.max(1)
    } else {
        q.depth
    };
    'bfs: while let Some((at, d)) = queue.pop_front() {
        if d >= max_depth {
            continue;
        }
        let mut next: Vec<(StoredEdge, String)> = Vec::new();
        if q.direction != Direction::In {
            for e in g.edges_at(&at.keys, true).into_iter().filter(|e| wanted(e)) {
                let other = e.to.clone();
                next.push((e, other));
            }
        }
        if q.direction != Direction::Out {
            for e in g
                .edges_at(&at.keys, false)
                .into_iter()
                .filter(|e| wanted(e))
            {
                let other = e.from.clone();
                next.push((e, other));
            }
        }
        for (e, other) in next {
            if !edge_seen.insert(e.clone()) {
                continue;
            }
            if edges.len() >= q.limit {
                truncated = true;
                break 'bfs;
            }
            edges.push((e.clone(), d + 1));
            let other_node = nodes.get(&other);
            if other_node.keys.iter().any(|k| seen_keys.contains(k)) {
                continue;
            }
            seen_keys.extend(other_node.keys.iter().cloned());
            let first_key = other_node.keys[0].clone();
            came_by.insert(first_key.clone(), e.clone());
            reached.push((other_node.name.clone(), d + 1));
            if let Some(t) = &target {
                if other_node.keys.iter().any(|k| t.keys.contains(k)) {
                    found_path = Some(chain(&came_by, &first_key, &start, &mut nodes));
                    break 'bfs;
                }
            }
            queue.push_back((other_node, d + 1));
        }
    }
    let known = !start.notes.is_empty() || !edges.is_empty() || g.spelling(&key(q.node)).is_some();
    let chain = match &found_path {
        Some(path) => {
            let mut names = vec![start.name.clone()];
            let mut at = start.keys.clone();
            for e in path {
                let other = if at.contains(&e.from_key) {
                    &e.to
                } else {
                    &e.from
                };
                let n = nodes.get(other);
                names.push(n.name.clone());
                at = n.keys;
            }
            Some(names)
        }
        None => None,
    };
    Found {
        node: start,
        known,
        edges,
        reached,
        path: found_path,
        chain,
        truncated,
    }
}

/// The edges from the start to the node first reached as `k`.
fn chain(
    came_by: &BTreeMap<String, StoredEdge>,
    k: &str,
    start: &Node,
    nodes: &mut Nodes<'_>,
) -> Vec<StoredEdge> {
    let mut out = Vec::new();
    let mut cur = k.to_string();
    while let Some(e) = came_by.get(&cur) {
        out.push(e.clone());
        // The edge's other end, toward the start.
        let back = if nodes.get(&e.to).keys.contains(&cur) {
            &e.from
        } else {
            &e.to
        };
        let n = nodes.get(back);
        if n.keys.iter().any(|x| start.keys.contains(x)) || out.len() > 64 {
            break;
        }
        cur = n.keys[0].clone();
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(notes: &[(&str, &str)]) -> GraphStore {
        let map: BTreeMap<String, String> = notes
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        let files: Vec<(String, String)> = notes
            .iter()
            .map(|(p, _)| (p.to_string(), "h".to_string()))
            .collect();
        let mut g = GraphStore::open(None).unwrap();
        g.sync(&files, &|p| map.get(p).cloned(), &|| false).unwrap();
        g
    }

    #[test]
    fn transitive_dependencies_backlinks_and_a_chain() {
        let g = graph(&[
            ("code/billing-service.md", "---\ntitle: Billing service\ndepends_on: [ledger-service, auth-service]\n---\n# Billing\n"),
            ("code/ledger-service.md", "The ledger service depends on Postgres.\n"),
            ("docs/team.md", "The Payments team owns the billing service. Priya reports to Dana.\n"),
        ]);
        let all = |name: &str, dir: Direction, rel: &str, depth: usize| {
            let rels = [rel.to_string()];
            let f = run(
                &g,
                &Query {
                    node: name,
                    direction: dir,
                    relations: &rels,
                    depth,
                    to: None,
                    limit: 100,
                },
            );
            f.reached
                .into_iter()
                .map(|(n, d)| format!("{n}@{d}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            all("billing-service", Direction::Out, "depends_on", 1),
            ["auth-service@1", "ledger-service@1"]
        );
        assert_eq!(
            all("Billing Service", Direction::Out, "depends_on", 5),
            ["auth-service@1", "ledger-service@1", "Postgres@2"]
        );
        assert_eq!(
            all("postgres", Direction::In, "depends_on", 5),
            ["ledger-service@1", "Billing service@2"]
        );
        assert_eq!(
            all("billing service", Direction::In, "owns", 1),
            ["Payments team@1"]
        );
        let f = run(
            &g,
            &Query {
                node: "Payments team",
                direction: Direction::Both,
                relations: &[],
                depth: 6,
                to: Some("postgres"),
                limit: 100,
            },
        );
        let chain: Vec<String> = f
            .path
            .unwrap()
            .iter()
            .map(|e| format!("{} {} {} ({}:{})", e.from, e.rel, e.to, e.path, e.line))
            .collect();
        assert_eq!(
            chain,
            [
                "Payments team owns billing service (docs/team.md:1)",
                "Billing service depends_on ledger-service (code/billing-service.md:3)",
                "ledger-service depends_on Postgres (code/ledger-service.md:1)",
            ]
        );
    }
}
