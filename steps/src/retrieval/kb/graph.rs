//! `kb.graph`: the knowledge graph of a knowledge base (see
//! [`crate::retrieval::graph`]), brought up to date with the index first,
//! then asked about one node: its edges, what it reaches up to a depth, or
//! the chain of edges to another node. Every edge cites its note and line.

use super::{ensure_fresh, ms, open, stopper};
use crate::core::{action::Call, args::Args, error::ActionError};
use crate::retrieval::graph::{
    ask::{self, Reading},
    store::{GraphStore, StoredEdge},
    walk::{self, Direction, Query},
};
use serde_json::{json, Value};
use std::time::Instant;

/// Steps away a question may go: far enough for any chain of dependencies
/// people write down, near enough to stay quick.
const MAX_DEPTH: u64 = 10;

pub(super) async fn graph_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let started = Instant::now();
    let node = a.str("node")?.map(str::to_string);
    let question = a.str("question")?.map(str::to_string);
    if node.is_none() && question.is_none() {
        return Err(ActionError::Input(
            "`kb.graph` needs `node` (a name) or `question` (a question naming one)".into(),
        ));
    }
    // What is written wins over what the question is read as.
    let given = Asked {
        direction: a
            .is_given("direction")
            .then(|| a.chosen("direction"))
            .transpose()?
            .and_then(Direction::parse),
        relations: a.strings("relation")?,
        depth: a
            .count("depth", 1, MAX_DEPTH)?
            .filter(|_| a.is_given("depth")),
        to: a.str("to")?.map(str::to_string),
    };
    let limit = a.count("limit", 1, 10_000)?.unwrap_or(200);
    let tenant = super::inputs::tenant(a)?;
    let ix = open(call, a)?;
    ensure_fresh(call, &ix, a).await?;
    let stop = stopper(call);
    let ix2 = ix.clone();
    let answer = crate::core::blame::spawn_blocking(move || -> Result<Value, String> {
        let mut g = GraphStore::open(ix2.dir.as_deref())
            .map_err(|e| format!("the graph beside the index: {e}"))?
            .for_tenant(&tenant);
        let root = crate::core::confined::Dir::open_path(&ix2.root).map_err(|e| e.to_string())?;
        let read = |p: &str| root.read_rel(p).ok().and_then(|b| String::from_utf8(b).ok());
        let synced = g
            .sync(&ix2.file_hashes(), &read, &stop)
            .map_err(|e| format!("the graph beside the index: {e}"))?
            .ok_or_else(|| "stopped while the graph was being brought up to date".to_string())?;
        // What this tenant's questions see, not the whole graph.
        let synced = crate::retrieval::graph::store::SyncStats {
            notes: g.note_count(),
            ..synced
        };
        let reading = question.as_ref().map(|q| ask::read(&g, q));
        let node_from_question = node.is_none();
        let node = match (&node, &reading) {
            (Some(n), _) => n.clone(),
            (None, Some(r)) => match r.nodes.first() {
                Some(n) => n.clone(),
                None => {
                    return Ok(json!({
                        "node": null, "found": false, "count": 0, "edges": [], "nodes": [],
                        "path": null, "chain": null, "truncated": false, "suggestions": [], "hits": [],
                        "read": read_json(reading.as_ref()),
                        "graph": {"notes": synced.notes, "edges": synced.edges, "read": synced.read},
                    }))
                }
            },
            (None, None) => unreachable!("checked above"),
        };
        let relations = if given.relations.is_empty() {
            reading.as_ref().and_then(|r| r.relation.clone()).into_iter().collect()
        } else {
            given.relations.clone()
        };
        let to = given.to.clone().or_else(|| reading.as_ref().and_then(|r| r.to.clone()));
        let q = Query {
            node: &node,
            direction: given
                .direction
                .or(reading.as_ref().map(|r| r.direction))
                .unwrap_or(Direction::Both),
            relations: &relations,
            depth: given.depth.or(reading.as_ref().map(|r| r.depth)).unwrap_or(1),
            to: to.as_deref(),
            limit,
        };
        // A chain is looked for through what the notes state first (owners,
        // dependencies, reporting lines…), through mere links and tags only
        // when the statements do not connect the two.
        let stated: Vec<String> = if q.to.is_some() && relations.is_empty() {
            g.relations()
                .into_iter()
                .filter(|r| r != "links_to" && r != "tagged")
                .collect()
        } else {
            Vec::new()
        };
        // Of what they state, the relations of the topology come first: a
        // meeting both attended, or a property named after any key, makes
        // a short chain that says little.
        let structural: Vec<String> = stated
            .iter()
            .filter(|r| crate::retrieval::graph::extract::TOPOLOGY.contains(&r.as_str()))
            .cloned()
            .collect();
        let mut f = match q.to {
            Some(_) if relations.is_empty() && !stated.is_empty() => {
                let mut found = None;
                // (When every stated relation is one of them, one walk.)
                let tiers = if structural.len() < stated.len() {
                    vec![&structural, &stated]
                } else {
                    vec![&stated]
                };
                for tier in tiers {
                    if tier.is_empty() {
                        continue;
                    }
                    let typed = walk::run(&g, &Query { relations: tier, ..q });
                    if typed.path.is_some() {
                        found = Some(typed);
                        break;
                    }
                }
                match found {
                    Some(f) => f,
                    None => walk::run(&g, &q),
                }
            }
            _ => walk::run(&g, &q),
        };
        // A question naming several things, one of which has the edges it
        // asks about ("the INC-204 fix": `fix` is what is blocked).
        if f.edges.is_empty() && node_from_question && q.to.is_none() {
            for other in reading.iter().flat_map(|r| r.nodes.iter().skip(1)) {
                let again = walk::run(&g, &Query { node: other, ..q });
                if !again.edges.is_empty() {
                    f = again;
                    break;
                }
            }
        }
        let hits: Vec<Value> = f.edges.iter().map(|(e, d)| hit_json(e, *d)).collect();
        let suggestions: Vec<String> = if f.known {
            Vec::new()
        } else {
            let keys = g.all_keys();
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            crate::core::catalog::closest(&crate::retrieval::graph::extract::key(&node), names.iter().copied())
                .into_iter()
                .map(str::to_string)
                .collect()
        };
        Ok(json!({
            "node": {"name": f.node.name, "notes": f.node.notes},
            "found": f.known,
            "count": f.edges.len(),
            "edges": f.edges.iter().map(|(e, d)| edge_json(e, Some(*d))).collect::<Vec<_>>(),
            "nodes": f.reached.iter().map(|(n, d)| json!({"name": n, "depth": d})).collect::<Vec<_>>(),
            "path": f.path.as_ref().map(|p| p.iter().map(|e| edge_json(e, None)).collect::<Vec<_>>()),
            "chain": f.chain,
            "truncated": f.truncated,
            "suggestions": suggestions,
            "hits": hits,
            "read": read_json(reading.as_ref()),
            "graph": {"notes": synced.notes, "edges": synced.edges, "read": synced.read},
        }))
    })
    .await
    .map_err(|e| ActionError::failed(format!("kb.graph stopped: {e}")))?
    .map_err(ActionError::failed)?;
    let mut out = answer;
    out["took_ms"] = json!(ms(started.elapsed()));
    Ok(out)
}

fn edge_json(e: &StoredEdge, depth: Option<usize>) -> Value {
    let mut v = json!({
        "from": e.from,
        "relation": e.rel,
        "to": e.to,
        "path": e.path,
        "line": e.line,
        "text": e.text,
        "how": e.how,
    });
    if let Some(d) = depth {
        v["depth"] = json!(d);
    }
    v
}

/// What the step's inputs say, before a question is read.
struct Asked {
    direction: Option<Direction>,
    relations: Vec<String>,
    depth: Option<usize>,
    to: Option<String>,
}

fn read_json(r: Option<&Reading>) -> Value {
    match r {
        None => Value::Null,
        Some(r) => json!({
            "nodes": r.nodes,
            "relation": r.relation,
            "direction": match r.direction {
                Direction::Out => "out",
                Direction::In => "in",
                Direction::Both => "both",
            },
            "depth": r.depth,
            "to": r.to,
        }),
    }
}

/// An edge as a search hit (`kb.search`'s shape), so that `rank.fuse`,
/// `rank.rerank` and `context.pack` take graph results as they take
/// searches': the sentence or line it comes from is the text, nearer
/// edges score higher.
fn hit_json(e: &StoredEdge, depth: usize) -> Value {
    json!({
        "id": format!("{}#L{}", e.path, e.line),
        "path": e.path,
        "title": e.path,
        "section": "",
        "text": e.text,
        "snippet": e.text,
        "score": 1.0 / depth as f64,
        "metadata": {"relation": e.rel, "from": e.from, "to": e.to, "line": e.line, "how": e.how, "depth": depth},
    })
}
