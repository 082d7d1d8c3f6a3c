//! What a run's model calls spend (tokens in and out, as the providers'
//! replies say, and their cost by [`Prices`]), and its budget: a request
//! that would take the run, or the workflow's day, past `budget:` is not
//! made, and its step fails saying so.

use super::prices::Prices;
use super::{Event, EventSink, RunEvent};
use crate::format::model::Budget;
use marktoflow_steps::core::action::hosts::{ModelCall, Usage};
use marktoflow_steps::core::time::Clock;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// Tokens, calls and cost: a model call's, a step's, a run's or a day's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub calls: u64,
    /// US dollars; None when no call had a known price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The model of the last call (a step's); None for sums of several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Spend {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds `other` (the model is the last one's, when both name one).
    pub fn add(&mut self, other: &Spend) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.calls += other.calls;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        if other.model.is_some() {
            self.model = other.model.clone();
        }
    }

    /// The sum of `all`, without a model.
    pub fn total<'a>(all: impl IntoIterator<Item = &'a Spend>) -> Option<Spend> {
        let mut sum: Option<Spend> = None;
        for s in all {
            sum.get_or_insert_with(Spend::default).add(s);
        }
        sum.map(|s| Spend { model: None, ..s })
    }
}

impl std::fmt::Display for Spend {
    /// `1200 tokens in, 80 out (2 model calls, $0.0048)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.calls == 1 { "" } else { "s" };
        write!(
            f,
            "{} tokens in, {} out ({} model call{s}",
            self.input_tokens, self.output_tokens, self.calls
        )?;
        if let Some(c) = self.cost_usd {
            write!(f, ", {}", usd(c))?;
        }
        f.write_str(")")
    }
}

/// What a workflow's other runs spent today (UTC), from wherever runs are
/// recorded: one machine's store, or the store many servers share.
#[async_trait::async_trait]
pub trait DailySpend: Send + Sync {
    async fn today(&self) -> Result<Spend, String>;
}

/// One run's usage, its sub-workflows' and agents' included.
pub struct RunUsage {
    budget: Budget,
    prices: Prices,
    /// Where the workflow's day is counted (None: daily limits not kept).
    daily: Option<Arc<dyn DailySpend>>,
    spent: Mutex<Spend>,
}

impl RunUsage {
    /// The usage of a run under `budget` (its prices included); `daily`
    /// says what the workflow's other runs spent today.
    pub fn new(budget: Budget, daily: Option<Arc<dyn DailySpend>>) -> Self {
        RunUsage {
            prices: Prices::new(budget.prices.clone()),
            budget,
            daily,
            spent: Mutex::default(),
        }
    }

    /// What the run spent so far; None before any call.
    pub fn totals(&self) -> Option<Spend> {
        let s = self.spent();
        (s.calls > 0).then_some(Spend { model: None, ..s })
    }

    fn spent(&self) -> Spend {
        self.spent.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// Why a request is not made: `what` would pass `limit`.
fn over(what: &str, limit: String, spent: String, asked: String, raise: &str) -> String {
    format!("{what} of {limit} would be passed: {spent} spent, about {asked} more asked ({raise})")
}

#[async_trait::async_trait]
impl Usage for RunUsage {
    async fn before(&self, provider: &str, model: &str, input_tokens: u64) -> Result<(), String> {
        let b = &self.budget;
        let spent = self.spent();
        let price = self.prices.of(provider, model);
        if let Some(limit) = b.tokens {
            if spent.tokens() + input_tokens > limit {
                return Err(over(
                    "the run's budget",
                    format!("{limit} tokens"),
                    spent.tokens().to_string(),
                    input_tokens.to_string(),
                    "raise `budget: {tokens: …}`, or run with `--budget N`",
                ));
            }
        }
        let wants_cost = b.cost_usd.is_some() || b.daily_cost_usd.is_some();
        let price = match price {
            Some(p) => p,
            None if wants_cost => {
                return Err(format!(
                    "the run has a budget in US dollars, and `{model}` has no known price: give it one under `budget.prices` (`{model}: {{input: 3.0, output: 15.0}}`, dollars per million tokens)"
                ))
            }
            None => crate::format::model::Price {
                input: 0.0,
                output: 0.0,
            },
        };
        let asked_cost = Prices::cost(price, input_tokens, 0);
        let cost = spent.cost_usd.unwrap_or(0.0);
        if let Some(limit) = b.cost_usd {
            if cost + asked_cost > limit {
                return Err(over(
                    "the run's budget",
                    usd(limit),
                    usd(cost),
                    usd(asked_cost),
                    "raise `budget: {cost_usd: …}`, or run with `--budget '$N'`",
                ));
            }
        }
        if let (Some(daily), true) = (
            &self.daily,
            b.daily_tokens.is_some() || b.daily_cost_usd.is_some(),
        ) {
            let others = daily
                .today()
                .await
                .map_err(|e| format!("the workflow's daily budget could not be checked: {e}"))?;
            if let Some(limit) = b.daily_tokens {
                let day = others.tokens() + spent.tokens();
                if day + input_tokens > limit {
                    return Err(over(
                        "the workflow's daily budget",
                        format!("{limit} tokens"),
                        format!("{day} tokens today"),
                        input_tokens.to_string(),
                        "raise `budget: {daily_tokens: …}`, or wait for tomorrow (UTC)",
                    ));
                }
            }
            if let Some(limit) = b.daily_cost_usd {
                let day = others.cost_usd.unwrap_or(0.0) + cost;
                if day + asked_cost > limit {
                    return Err(over(
                        "the workflow's daily budget",
                        usd(limit),
                        format!("{} today", usd(day)),
                        usd(asked_cost),
                        "raise `budget: {daily_cost_usd: …}`, or wait for tomorrow (UTC)",
                    ));
                }
            }
        }
        Ok(())
    }

    fn after(&self, call: &ModelCall) -> Option<f64> {
        let cost = self
            .prices
            .of(&call.provider, &call.model)
            .map(|p| Prices::cost(p, call.input_tokens, call.output_tokens));
        if let Ok(mut s) = self.spent.lock() {
            s.add(&Spend {
                input_tokens: call.input_tokens,
                output_tokens: call.output_tokens,
                calls: 1,
                cost_usd: cost,
                model: None,
            });
        }
        cost
    }
}

/// Dollars as people read them: at least to the cent, at most four places.
pub fn usd(x: f64) -> String {
    if x > 0.0 && x < 0.00005 {
        return "<$0.0001".into();
    }
    let s = format!("{x:.4}");
    let (whole, frac) = s.split_once('.').unwrap_or((&s, "0000"));
    let frac = frac.trim_end_matches('0');
    format!("${whole}.{frac:0<2}")
}

/// A step's view of the run's usage: the same budget, and each call told
/// to the run's events as this step's ([`RunEvent::ModelCall`]).
pub(super) struct StepUsage {
    pub run: Arc<dyn Usage>,
    pub step: String,
    pub events: EventSink,
    pub clock: Arc<dyn Clock>,
}

#[async_trait::async_trait]
impl Usage for StepUsage {
    async fn before(&self, provider: &str, model: &str, input_tokens: u64) -> Result<(), String> {
        self.run.before(provider, model, input_tokens).await
    }

    fn after(&self, call: &ModelCall) -> Option<f64> {
        let cost_usd = self.run.after(call);
        let kind = RunEvent::ModelCall {
            step: self.step.clone(),
            provider: call.provider.clone(),
            model: call.model.clone(),
            input_tokens: call.input_tokens,
            output_tokens: call.output_tokens,
            cost_usd,
            duration_ms: call.duration_ms,
        };
        (self.events)(&Event::now(self.clock.as_ref(), kind));
        cost_usd
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::Price;

    fn call(model: &str, input: u64, output: u64) -> ModelCall {
        ModelCall {
            provider: "anthropic".into(),
            model: model.into(),
            input_tokens: input,
            output_tokens: output,
            started_ms: 0,
            duration_ms: 5,
        }
    }

    struct Day(Spend);

    #[async_trait::async_trait]
    impl DailySpend for Day {
        async fn today(&self) -> Result<Spend, String> {
            Ok(self.0.clone())
        }
    }

    #[tokio::test]
    async fn a_request_past_the_budget_is_refused_before_it_is_made() {
        let budget = Budget {
            tokens: Some(1000),
            ..Default::default()
        };
        let u = RunUsage::new(budget, None);
        assert_eq!(u.totals(), None);
        assert_eq!(u.before("anthropic", "m", 300).await, Ok(()));
        assert_eq!(u.after(&call("m", 300, 200)), None);
        assert_eq!(u.before("anthropic", "m", 400).await, Ok(()));
        u.after(&call("m", 400, 50));
        assert_eq!(
            u.before("anthropic", "m", 100).await,
            Err("the run's budget of 1000 tokens would be passed: 950 spent, about 100 more asked (raise `budget: {tokens: …}`, or run with `--budget N`)".into())
        );
        assert_eq!(
            u.totals(),
            Some(Spend {
                input_tokens: 700,
                output_tokens: 250,
                calls: 2,
                cost_usd: None,
                model: None
            })
        );
        let free = RunUsage::new(Budget::default(), None);
        assert_eq!(free.before("openai", "x", u64::MAX / 2).await, Ok(()));
    }

    #[test]
    fn dollars_read_to_the_cent_at_least_and_four_places_at_most() {
        let shown: Vec<String> = [0.0, 0.00001, 0.0042, 0.05, 1.0, 12.3456789]
            .into_iter()
            .map(usd)
            .collect();
        assert_eq!(
            shown,
            ["$0.00", "<$0.0001", "$0.0042", "$0.05", "$1.00", "$12.3457"]
        );
    }

    #[tokio::test]
    async fn dollars_are_reckoned_by_price_and_a_day_counts_the_other_runs() {
        let budget = Budget {
            cost_usd: Some(0.05),
            daily_cost_usd: Some(1.0),
            daily_tokens: Some(100_000),
            prices: vec![(
                "house-model".into(),
                Price {
                    input: 10.0,
                    output: 30.0,
                },
            )],
            ..Default::default()
        };
        let today = Spend {
            input_tokens: 90_000,
            output_tokens: 5_000,
            calls: 7,
            cost_usd: Some(0.99),
            model: None,
        };
        let u = RunUsage::new(budget.clone(), Some(Arc::new(Day(today))));
        // 1000 in, 500 out at 10/30 per million: $0.025.
        let cost = u.after(&call("house-model", 1000, 500)).unwrap();
        assert!((cost - 0.025).abs() < 1e-12, "{cost}");
        assert_eq!(
            u.before("anthropic", "house-model", 100).await,
            Err("the workflow's daily budget of $1.00 would be passed: $1.015 today spent, about $0.001 more asked (raise `budget: {daily_cost_usd: …}`, or wait for tomorrow (UTC))".into())
        );
        assert_eq!(
            u.before("anthropic", "unpriced", 10).await,
            Err("the run has a budget in US dollars, and `unpriced` has no known price: give it one under `budget.prices` (`unpriced: {input: 3.0, output: 15.0}`, dollars per million tokens)".into())
        );
        let alone = RunUsage::new(budget, None);
        alone.after(&call("house-model", 2000, 1000));
        assert_eq!(
            alone.before("anthropic", "house-model", 1000).await,
            Err("the run's budget of $0.05 would be passed: $0.05 spent, about $0.01 more asked (raise `budget: {cost_usd: …}`, or run with `--budget '$N'`)".into())
        );
    }
}
