//! What model calls cost: a built-in table of list prices (US dollars per
//! million tokens, as the providers publish them), which a workflow's
//! `budget.prices` overrides. Prices change; the table is an estimate, and
//! the override is how a team keeps its own.

use crate::format::model::Price;

/// Models by the beginning of their name (a dated release such as
/// `claude-sonnet-4-20250514` is priced as `claude-sonnet-4`), as listed
/// by their providers in 2026.
const LIST_PRICES: &[(&str, f64, f64)] = &[
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-opus-4-1", 15.0, 75.0),
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-haiku-4-5", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("claude-3-haiku", 0.25, 1.25),
    ("gpt-5-nano", 0.05, 0.4),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5", 1.25, 10.0),
    ("gpt-4.1-nano", 0.1, 0.4),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("gpt-4o", 2.5, 10.0),
    ("o4-mini", 1.1, 4.4),
    ("o3-mini", 1.1, 4.4),
    ("o3", 2.0, 8.0),
    ("gemini-2.5-pro", 1.25, 10.0),
    ("gemini-2.5-flash", 0.3, 2.5),
];

/// Providers whose calls cost nothing: the model runs on this machine or
/// one of the user's own.
const FREE_PROVIDERS: &[&str] = &["local", "ollama"];

/// The prices a run's costs are reckoned with.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    /// The workflow's `budget.prices`, looked at before the table.
    own: Vec<(String, Price)>,
}

impl Prices {
    pub fn new(own: Vec<(String, Price)>) -> Prices {
        Prices { own }
    }

    /// What `model`, served by `provider`, costs; None when neither the
    /// workflow nor the table knows it. The longest matching name wins,
    /// the workflow's before the table's.
    pub fn of(&self, provider: &str, model: &str) -> Option<Price> {
        if FREE_PROVIDERS.contains(&provider) {
            return Some(Price {
                input: 0.0,
                output: 0.0,
            });
        }
        // `anthropic/claude-…` (a gateway's spelling) is priced as the model.
        let bare = model.rsplit('/').next().unwrap_or(model);
        let longest = |names: &mut dyn Iterator<Item = (&str, Price)>| {
            names
                .filter(|(name, _)| model == *name || bare.starts_with(name))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, p)| p)
        };
        longest(&mut self.own.iter().map(|(n, p)| (n.as_str(), *p))).or_else(|| {
            longest(&mut LIST_PRICES.iter().map(|(n, input, output)| {
                (
                    *n,
                    Price {
                        input: *input,
                        output: *output,
                    },
                )
            }))
        })
    }

    /// The cost of `input` and `output` tokens at `price`, in US dollars.
    pub fn cost(price: Price, input: u64, output: u64) -> f64 {
        (input as f64 * price.input + output as f64 * price.output) / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_name_that_begins_the_model_prices_it_the_workflows_first() {
        let table = Prices::default();
        let p = |m: &str| table.of("anthropic", m).map(|p| (p.input, p.output));
        assert_eq!(p("claude-sonnet-4-20250514"), Some((3.0, 15.0)));
        assert_eq!(p("claude-opus-4-5-20251101"), Some((5.0, 25.0)));
        assert_eq!(p("claude-opus-4-20250514"), Some((15.0, 75.0)));
        assert_eq!(p("anthropic/claude-3-5-haiku-latest"), Some((0.8, 4.0)));
        assert_eq!(p("my-fine-tune"), None);
        let own = Prices::new(vec![
            (
                "claude-sonnet-4".into(),
                Price {
                    input: 2.0,
                    output: 10.0,
                },
            ),
            (
                "my-fine-tune".into(),
                Price {
                    input: 1.0,
                    output: 1.0,
                },
            ),
        ]);
        assert_eq!(own.of("openai", "my-fine-tune").map(|p| p.input), Some(1.0));
        assert_eq!(
            own.of("anthropic", "claude-sonnet-4-5").map(|p| p.output),
            Some(10.0)
        );
        assert_eq!(own.of("openai", "gpt-4o-mini").map(|p| p.input), Some(0.15));
        assert_eq!(
            table
                .of("local", "qwen2.5-coder")
                .map(|p| p.input + p.output),
            Some(0.0)
        );
        let c = Prices::cost(
            Price {
                input: 3.0,
                output: 15.0,
            },
            1000,
            200,
        );
        assert!((c - 0.006).abs() < 1e-12, "{c}");
    }
}
