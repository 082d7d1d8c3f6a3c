//! What a run's model calls spend (tokens in and out, as the providers'
//! replies say), and its budget: a request that would take the run past
//! `budget: {tokens: N}` is not made, and its step fails saying so.

use marktoflow_steps::core::action::hosts::Usage;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// One run's usage, its sub-workflows' and agents' included.
#[derive(Debug, Default)]
pub struct RunUsage {
    /// The most tokens (in and out) the run may spend; None: no limit.
    limit: Option<u64>,
    input: AtomicU64,
    output: AtomicU64,
    calls: AtomicU64,
}

impl RunUsage {
    pub fn new(limit: Option<u64>) -> Self {
        RunUsage {
            limit,
            ..Default::default()
        }
    }

    /// `{input_tokens, output_tokens, calls}`; None before any call.
    pub fn totals(&self) -> Option<Value> {
        let calls = self.calls.load(Ordering::SeqCst);
        (calls > 0).then(|| {
            json!({
                "input_tokens": self.input.load(Ordering::SeqCst),
                "output_tokens": self.output.load(Ordering::SeqCst),
                "calls": calls,
            })
        })
    }

    fn used(&self) -> u64 {
        self.input.load(Ordering::SeqCst) + self.output.load(Ordering::SeqCst)
    }
}

impl Usage for RunUsage {
    fn before(&self, input_tokens: u64) -> Result<(), String> {
        match self.limit {
            Some(limit) if self.used() + input_tokens > limit => Err(format!(
                "the run's budget of {limit} tokens would be passed: {} spent, about {input_tokens} more asked (raise `budget: {{tokens: …}}`, or run with `--budget N`)",
                self.used()
            )),
            _ => Ok(()),
        }
    }

    fn after(&self, _model: &str, input_tokens: u64, output_tokens: u64) {
        self.input.fetch_add(input_tokens, Ordering::SeqCst);
        self.output.fetch_add(output_tokens, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_past_the_budget_is_refused_before_it_is_made() {
        let u = RunUsage::new(Some(1000));
        assert_eq!(u.totals(), None);
        assert_eq!(u.before(300), Ok(()));
        u.after("m", 300, 200);
        assert_eq!(u.before(400), Ok(()));
        u.after("m", 400, 50);
        assert_eq!(
            u.before(100),
            Err("the run's budget of 1000 tokens would be passed: 950 spent, about 100 more asked (raise `budget: {tokens: …}`, or run with `--budget N`)".into())
        );
        assert_eq!(
            u.totals(),
            Some(json!({"input_tokens": 700, "output_tokens": 250, "calls": 2}))
        );
        assert_eq!(RunUsage::new(None).before(u64::MAX / 2), Ok(()));
    }
}
