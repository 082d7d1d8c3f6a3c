//! `kb.graph`: the knowledge graph of a knowledge base (see
//! [`crate::retrieval::graph`]), brought up to date with the index first,
//! then asked about one node: its edges, what it reaches up to a depth, or
//! the chain of edges to another node. Every edge cites its note and line.

use super::{ensure_fresh, ms, open, stopper};
use crate::core::{action::Call, args::Args, error::ActionError};
use crate::retrieval::graph::{
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
    let node = a.required_str("node")?.to_string();
    let direction = Direction::parse(a.chosen("direction")?).unwrap_or(Direction::Both);
    let relations = a.strings("relation")?;
    let depth = a.count("depth", 1, MAX_DEPTH)?.unwrap_or(1);
    let to = a.str("to")?.map(str::to_string);
    let limit = a.count("limit", 1, 10_000)?.unwrap_or(200);
    let ix = open(call, a)?;
    ensure_fresh(call, &ix, a).await?;
    let stop = stopper(call);
    let ix2 = ix.clone();
    let answer = crate::core::blame::spawn_blocking(move || -> Result<Value, String> {
        let mut g = GraphStore::open(ix2.dir.as_deref()).map_err(|e| format!("the graph beside the index: {e}"))?;
        let root = crate::core::confined::Dir::open_path(&ix2.root).map_err(|e| e.to_string())?;
        let read = |p: &str| root.read_rel(p).ok().and_then(|b| String::from_utf8(b).ok());
        let synced = g
            .sync(&ix2.file_hashes(), &read, &stop)
            .map_err(|e| format!("the graph beside the index: {e}"))?
            .ok_or_else(|| "stopped while the graph was being brought up to date".to_string())?;
        let q = Query {
            node: &node,
            direction,
            relations: &relations,
            depth,
            to: to.as_deref(),
            limit,
        };
        let f = walk::run(&g, &q).map_err(|e| e.to_string())?;
        let suggestions: Vec<String> = if f.known {
            Vec::new()
        } else {
            let keys = g.all_keys().map_err(|e| e.to_string())?;
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
            "truncated": f.truncated,
            "suggestions": suggestions,
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
