//! A run's events read into step rows: one reading for the recorder that
//! writes them and for the API that shows a run still in memory.

use super::StepRow;
use crate::engine::{Event, RunEvent, Spend};
use std::collections::HashMap;

/// A step that started and has not finished.
#[derive(Debug, Clone, PartialEq)]
pub struct Going {
    pub id: String,
    pub name: String,
    pub depth: usize,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    /// Attempts so far, this one included.
    pub attempts: u32,
    /// What its model calls spent so far.
    pub usage: Option<Spend>,
}

/// Reads a run's events in order and gives each step's row as it finishes.
#[derive(Debug, Default)]
pub struct StepFold {
    top_index: usize,
    /// Retries seen per step id, until the step finishes.
    retries: HashMap<String, u32>,
    going: Vec<Going>,
}

impl StepFold {
    /// Takes the next event; the finished step's row when it ends one.
    pub fn push(&mut self, e: &Event) -> Option<StepRow> {
        match &e.kind {
            RunEvent::StepStarted {
                id,
                name,
                depth,
                index,
                ..
            } => {
                if *depth == 0 {
                    self.top_index = *index;
                }
                self.going.push(Going {
                    id: id.clone(),
                    name: name.clone(),
                    depth: *depth,
                    started_at: e.at_ms,
                    attempts: 1,
                    usage: None,
                });
                None
            }
            RunEvent::ModelCall {
                step,
                model,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                // The innermost step of that id (an agent inside a loop).
                if let Some(g) = self.going.iter_mut().rev().find(|g| g.id == *step) {
                    g.usage.get_or_insert_with(Spend::default).add(&Spend {
                        input_tokens: *input_tokens,
                        output_tokens: *output_tokens,
                        calls: 1,
                        cost_usd: *cost_usd,
                        model: Some(model.clone()),
                    });
                }
                None
            }
            RunEvent::StepRetry { id, attempt, .. } => {
                self.retries.insert(id.clone(), *attempt);
                None
            }
            RunEvent::StepFinished {
                id,
                name,
                depth,
                status,
                duration_ms,
                output,
                error,
                inputs,
            } => {
                let usage = self
                    .going
                    .iter()
                    .rposition(|g| g.id == *id && g.depth == *depth)
                    .and_then(|i| self.going.remove(i).usage);
                Some(StepRow {
                    step_id: id.clone(),
                    name: name.clone(),
                    depth: *depth,
                    top_index: self.top_index,
                    status: *status,
                    attempts: self.retries.remove(id).unwrap_or(0) + 1,
                    started_at: e.at_ms.saturating_sub(*duration_ms as i64),
                    duration_ms: *duration_ms,
                    output: output.clone(),
                    error: error.clone(),
                    reused: false,
                    inputs: inputs.clone(),
                    usage,
                })
            }
            _ => None,
        }
    }

    /// The steps still going, innermost first (so each gathers the steps
    /// inside it), with their attempts so far.
    pub fn going(&self) -> Vec<Going> {
        let mut going: Vec<Going> = self
            .going
            .iter()
            .map(|g| Going {
                attempts: self.retries.get(&g.id).copied().unwrap_or(0) + 1,
                ..g.clone()
            })
            .collect();
        going.sort_by_key(|g| std::cmp::Reverse(g.depth));
        going
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StepStatus;
    use serde_json::json;

    fn at(at_ms: i64, kind: RunEvent) -> Event {
        Event { at_ms, kind }
    }

    #[test]
    fn finished_steps_become_rows_and_the_rest_are_going() {
        let started = |id: &str, depth, index| RunEvent::StepStarted {
            id: id.into(),
            name: id.to_uppercase(),
            depth,
            index,
            kind: "action",
            detail: None,
        };
        let mut fold = StepFold::default();
        let events = [
            at(100, started("loop", 0, 2)),
            at(110, started("body", 1, 0)),
            at(
                120,
                RunEvent::StepRetry {
                    id: "body".into(),
                    attempt: 1,
                    error: "boom".into(),
                    delay_ms: 0,
                },
            ),
            at(
                150,
                RunEvent::StepFinished {
                    id: "body".into(),
                    name: "BODY".into(),
                    depth: 1,
                    status: StepStatus::Completed,
                    duration_ms: 40,
                    output: json!(7),
                    error: None,
                    inputs: None,
                },
            ),
            at(160, started("next", 1, 0)),
        ];
        let rows: Vec<StepRow> = events.iter().filter_map(|e| fold.push(e)).collect();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (
                r.step_id.as_str(),
                r.top_index,
                r.attempts,
                r.started_at,
                r.output.clone()
            ),
            ("body", 2, 2, 110, json!(7))
        );
        let going: Vec<(String, usize, i64)> = fold
            .going()
            .into_iter()
            .map(|g| (g.id, g.depth, g.started_at))
            .collect();
        assert_eq!(
            going,
            [("next".to_string(), 1, 160), ("loop".to_string(), 0, 100)]
        );
    }
}
