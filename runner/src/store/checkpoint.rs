//! Checkpoint rows: what the store keeps of a run's state between steps.
//!
//! Every checkpoint is kept (`retry --from N` starts from the one before
//! step N), but only the first a process writes for a run holds the whole
//! state; the next ones hold what changed since the previous one. A 5 MB
//! variable set once is then stored once, not once per step. Reading a
//! checkpoint folds the rows up to it onto the nearest whole one.

use crate::engine::Checkpoint;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// What changed between two consecutive checkpoints of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CheckpointDelta {
    pub next_step: usize,
    /// Variables set or changed.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub variables: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset_variables: Vec<String>,
    /// `steps.<id>` entries set or changed.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub steps: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset_steps: Vec<String>,
    /// Present when changed (neither ever goes back to unset: when one
    /// would, the row is written whole instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_outputs: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output: Option<Value>,
}

/// One stored checkpoint. Rows written before deltas existed are whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CheckpointRow {
    Delta {
        delta: Box<CheckpointDelta>,
    },
    /// Shared with the event it came from: the state is not copied.
    Whole(Arc<Checkpoint>),
}

/// The entries of `next` that are not the same in `prev`, and the keys of
/// `prev` that `next` no longer has.
fn changed(
    prev: &Map<String, Value>,
    next: &Map<String, Value>,
) -> (Map<String, Value>, Vec<String>) {
    let set = next
        .iter()
        .filter(|(k, v)| prev.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let unset = prev
        .keys()
        .filter(|k| !next.contains_key(*k))
        .cloned()
        .collect();
    (set, unset)
}

/// A value that changed, `Err` when it went back to unset.
fn changed_opt(prev: &Option<Value>, next: &Option<Value>) -> Result<Option<Value>, ()> {
    match (prev, next) {
        (p, n) if p == n => Ok(None),
        (_, Some(n)) => Ok(Some(n.clone())),
        (Some(_), None) => Err(()),
        (None, None) => Ok(None),
    }
}

impl CheckpointRow {
    /// The row for `next`, given the checkpoint this process wrote before it
    /// for the same run (`None`: the row is whole).
    pub fn between(prev: Option<&Checkpoint>, next: &Arc<Checkpoint>) -> CheckpointRow {
        let Some(prev) = prev else {
            return CheckpointRow::Whole(next.clone());
        };
        let (Ok(set_outputs), Ok(last_output)) = (
            changed_opt(&prev.set_outputs, &next.set_outputs),
            changed_opt(&prev.last_output, &next.last_output),
        ) else {
            return CheckpointRow::Whole(next.clone());
        };
        let (variables, unset_variables) = changed(&prev.variables, &next.variables);
        let (steps, unset_steps) = changed(&prev.steps, &next.steps);
        CheckpointRow::Delta {
            delta: Box::new(CheckpointDelta {
                next_step: next.next_step,
                variables,
                unset_variables,
                steps,
                unset_steps,
                set_outputs,
                last_output,
            }),
        }
    }

    pub fn next_step(&self) -> usize {
        match self {
            CheckpointRow::Delta { delta } => delta.next_step,
            CheckpointRow::Whole(cp) => cp.next_step,
        }
    }
}

/// The checkpoint that `rows` (a run's rows up to it, latest first) come
/// to: the latest whole row with the deltas after it applied in order.
/// `None` when no whole row precedes the deltas (a damaged store).
pub fn fold(rows_latest_first: impl IntoIterator<Item = CheckpointRow>) -> Option<Checkpoint> {
    let mut deltas = Vec::new();
    let mut base = None;
    for row in rows_latest_first {
        match row {
            CheckpointRow::Delta { delta } => deltas.push(*delta),
            CheckpointRow::Whole(cp) => {
                base = Some(Arc::unwrap_or_clone(cp));
                break;
            }
        }
    }
    let mut cp = base?;
    for d in deltas.into_iter().rev() {
        cp.next_step = d.next_step;
        for k in d.unset_variables {
            cp.variables.remove(&k);
        }
        cp.variables.extend(d.variables);
        for k in d.unset_steps {
            cp.steps.remove(&k);
        }
        cp.steps.extend(d.steps);
        if d.set_outputs.is_some() {
            cp.set_outputs = d.set_outputs;
        }
        if d.last_output.is_some() {
            cp.last_output = d.last_output;
        }
    }
    Some(cp)
}

/// The checkpoint a store's rows make: `texts` are the run's rows up to the
/// one wanted, latest first (their `next_step` and JSON), and `want` the
/// `next_step` asked for (None: the latest). Rows are read down to the
/// nearest whole one.
pub fn from_rows(
    run_id: &str,
    want: Option<usize>,
    texts: &[(i64, String)],
) -> Result<Option<Checkpoint>, super::StoreError> {
    let unreadable = |why: String| {
        super::StoreError::Db(format!("checkpoint of run `{run_id}` is unreadable: {why}"))
    };
    match (texts.first(), want) {
        (None, _) => return Ok(None),
        (Some((n, _)), Some(want)) if *n != want as i64 => return Ok(None),
        _ => {}
    }
    let mut rows = Vec::new();
    for (_, text) in texts {
        let row: CheckpointRow =
            serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
        let whole = matches!(row, CheckpointRow::Whole(_));
        rows.push(row);
        if whole {
            break;
        }
    }
    fold(rows)
        .map(Some)
        .ok_or_else(|| unreadable("its earlier rows are missing".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cp(next_step: usize, vars: Value, steps: Value, last: Option<Value>) -> Checkpoint {
        Checkpoint {
            next_step,
            variables: vars.as_object().unwrap().clone(),
            steps: steps.as_object().unwrap().clone(),
            set_outputs: None,
            last_output: last,
        }
    }

    #[test]
    fn deltas_hold_only_what_changed_and_fold_back_to_every_checkpoint() {
        let big = "x".repeat(100_000);
        let states = [
            cp(
                1,
                json!({"big": big}),
                json!({"a": {"status": "completed"}}),
                Some(json!(1)),
            ),
            cp(
                2,
                json!({"big": big, "n": 1}),
                json!({"a": {"status": "completed"}, "b": {"status": "skipped"}}),
                Some(json!(1)),
            ),
            cp(
                3,
                json!({"big": big, "n": 2}),
                json!({"a": {"status": "completed"}, "b": {"status": "skipped"}}),
                Some(json!({"k": 2})),
            ),
            // A loop variable gone again.
            cp(
                4,
                json!({"big": big}),
                json!({"a": {"status": "completed"}, "b": {"status": "failed"}}),
                Some(json!({"k": 2})),
            ),
        ];
        let mut rows = Vec::new();
        let mut prev: Option<&Checkpoint> = None;
        for s in &states {
            rows.push(CheckpointRow::between(prev, &Arc::new(s.clone())));
            prev = Some(s);
        }
        assert!(matches!(rows[0], CheckpointRow::Whole(_)));
        for r in &rows[1..] {
            let text = serde_json::to_string(r).unwrap();
            assert!(text.len() < 200, "a delta repeats unchanged state: {text}");
            // Stored as JSON and read back as the same row.
            assert_eq!(&serde_json::from_str::<CheckpointRow>(&text).unwrap(), r);
        }
        for (i, s) in states.iter().enumerate() {
            let upto: Vec<CheckpointRow> = rows[..=i].iter().rev().cloned().collect();
            assert_eq!(fold(upto).as_ref(), Some(s), "checkpoint {}", i + 1);
        }
        // Deltas with no whole row under them are not a checkpoint.
        assert_eq!(fold(rows[1..].iter().rev().cloned()), None);
    }

    #[test]
    fn a_value_going_back_to_unset_makes_a_whole_row() {
        let a = cp(1, json!({}), json!({}), Some(json!(1)));
        let b = cp(2, json!({}), json!({}), None);
        assert_eq!(
            CheckpointRow::between(Some(&a), &Arc::new(b.clone())),
            CheckpointRow::Whole(Arc::new(b))
        );
    }

    #[test]
    fn rows_stored_before_deltas_read_as_whole() {
        let old = r#"{"next_step":2,"variables":{"x":1},"steps":{},"set_outputs":null,"last_output":null}"#;
        let row: CheckpointRow = serde_json::from_str(old).unwrap();
        assert_eq!(row.next_step(), 2);
        assert!(matches!(row, CheckpointRow::Whole(_)));
    }
}
