//! `marktoflow replay RUN`: a stored run executed again offline — its
//! agent, HTTP and program steps answered as they were (see
//! [`super::record`]) — and, step by step, where the workflow as it is now
//! does otherwise.

use crate::engine::StepRecord;
use crate::store::StepRow;
use serde_json::{json, Value};

/// One step, as the stored run had it and as the replay has it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDiff {
    pub id: String,
    /// Status and output; None: not run then (or now).
    pub was: Option<(String, Value)>,
    pub now: Option<(String, Value)>,
}

impl StepDiff {
    pub fn same(&self) -> bool {
        self.was == self.now
    }

    pub fn json(&self) -> Value {
        let side = |s: &Option<(String, Value)>| match s {
            Some((status, output)) => json!({"status": status, "output": output}),
            None => Value::Null,
        };
        json!({"id": self.id, "same": self.same(), "was": side(&self.was), "now": side(&self.now)})
    }
}

/// The steps of both runs, paired by id in the order each ran them (the
/// k-th run of a step with the k-th): the stored run's order, then the
/// steps only the replay ran.
pub fn diff(was: &[StepRow], now: &[StepRecord]) -> Vec<StepDiff> {
    let mut taken = vec![false; now.len()];
    let mut out = Vec::new();
    for w in was {
        let found = now
            .iter()
            .enumerate()
            .find(|(i, n)| !taken[*i] && n.id == w.step_id)
            .map(|(i, n)| {
                taken[i] = true;
                (n.status.as_str().to_string(), n.output.clone())
            });
        out.push(StepDiff {
            id: w.step_id.clone(),
            was: Some((w.status.as_str().to_string(), w.output.clone())),
            now: found,
        });
    }
    for n in now
        .iter()
        .enumerate()
        .filter(|(i, _)| !taken[*i])
        .map(|(_, n)| n)
    {
        out.push(StepDiff {
            id: n.id.clone(),
            was: None,
            now: Some((n.status.as_str().to_string(), n.output.clone())),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StepStatus;

    fn row(id: &str, output: Value) -> StepRow {
        StepRow {
            step_id: id.into(),
            name: id.into(),
            depth: 0,
            top_index: 1,
            status: StepStatus::Completed,
            attempts: 1,
            started_at: 0,
            duration_ms: 0,
            output,
            error: None,
            reused: false,
            inputs: None,
            usage: None,
        }
    }

    fn record(id: &str, status: StepStatus, output: Value) -> StepRecord {
        StepRecord {
            id: id.into(),
            name: id.into(),
            status,
            output,
            error: None,
            duration_ms: 0,
            retries: 0,
            depth: 0,
        }
    }

    #[test]
    fn steps_pair_by_id_in_order_and_what_changed_shows() {
        let was = [
            row("a", json!(1)),
            row("loop", json!("x")),
            row("loop", json!("y")),
            row("gone", json!(null)),
        ];
        let now = [
            record("a", StepStatus::Completed, json!(1)),
            record("loop", StepStatus::Completed, json!("x")),
            record("loop", StepStatus::Completed, json!("z")),
            record("new", StepStatus::Skipped, Value::Null),
        ];
        let d = diff(&was, &now);
        let same: Vec<(&str, bool)> = d.iter().map(|s| (s.id.as_str(), s.same())).collect();
        assert_eq!(
            same,
            [
                ("a", true),
                ("loop", true),
                ("loop", false),
                ("gone", false),
                ("new", false)
            ]
        );
        assert_eq!(d[3].now, None);
        assert_eq!(d[4].was, None);
    }
}
