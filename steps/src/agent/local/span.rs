//! Reading with a chat model whose every answer is a verbatim span of the
//! given passages: decoding is constrained, token by token, to continuations
//! of the passages' own tokens, and the first step may instead choose the
//! no-answer token. What comes back are the span and the model's
//! probabilities (of the span, of answering nothing), not generated text:
//! whether to trust the span is decided from those numbers by the caller.
//!
//! Several prompts that share a beginning (the same passages, other
//! questions) are read in one context: the shared tokens are decoded once.

use super::engine::{Halt, LocalError, LocalModel};
pub use crate::core::reading::{Span, SpanReading};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::collections::HashSet;
use std::time::Instant;

/// Tokens decoded per call while reading a prompt.
const CHUNK: usize = 256;

/// What the model may answer from, and how it is asked.
#[derive(Debug, Clone)]
pub struct SpanPrompt {
    /// The whole prompt, chat template applied, ending where the answer's
    /// first word goes (after a cue such as `Answer:`).
    pub prompt: String,
    /// The passages whose spans may be answered; each is matched as
    /// written, one line at a time.
    pub sources: Vec<String>,
    /// The word that means "not in the passages", as the prompt names it.
    pub none_word: String,
    /// Longest span, in tokens.
    pub max_tokens: usize,
    /// Asked once the span is read, in the same context: the model's
    /// judgement of the best span.
    pub judge: Option<Judge>,
}

/// A second prompt about the span read: `before` + the span + `after`
/// (sharing its beginning with the first prompt, so the passages stay
/// decoded), and the words whose log-probabilities as the next word are
/// wanted (`yes`, `no`).
#[derive(Debug, Clone)]
pub struct Judge {
    pub before: String,
    pub after: String,
    pub choices: Vec<String>,
}

/// One source tokenized for matching: per line, the tokens of " " + line
/// (so a line's first word is spelled as mid-sentence words are), with the
/// byte range of each token in the source.
struct Matcher {
    tokens: Vec<LlamaToken>,
    /// Byte range of each token in the source text.
    ranges: Vec<(usize, usize)>,
    /// Whether a span may start at this token (it begins a word).
    starts: Vec<bool>,
    /// Whether a span may end after this token (the next is no letter or
    /// digit of the same word).
    ends: Vec<bool>,
}

impl LocalModel {
    fn matcher(&self, source: &str) -> Matcher {
        let vocab = self.model().vocab();
        let mut m = Matcher {
            tokens: Vec::new(),
            ranges: Vec::new(),
            starts: Vec::new(),
            ends: Vec::new(),
        };
        let mut line_start = 0usize;
        for line in source.split('\n') {
            let spaced = format!(" {line}");
            let toks = vocab.tokenize(spaced.as_bytes(), false, false);
            let mut at = 0usize; // bytes of `spaced` consumed
            let first = m.tokens.len();
            for t in &toks {
                let piece = vocab.token_to_piece(*t, false, None);
                let (s, e) = (at, at + piece.len());
                at = e;
                // Offsets in the source: `spaced` has one extra leading byte.
                let src_s = line_start + s.saturating_sub(1);
                let src_e = line_start + e.saturating_sub(1);
                // A word's first token carries the space before it; a lone
                // space is one too (numbers are read digit by digit after it).
                let begins_word = piece.first() == Some(&b' ')
                    && piece.get(1).is_none_or(|b| !b.is_ascii_whitespace());
                m.tokens.push(*t);
                m.ranges.push((src_s, src_e.min(line_start + line.len())));
                m.starts.push(begins_word);
                m.ends.push(false);
            }
            // A span may end before a token that does not continue a word.
            for i in first..m.tokens.len() {
                let next_continues = m.tokens.get(i + 1).is_some_and(|_| {
                    let (ns, ne) = m.ranges[i + 1];
                    source
                        .get(ns..ne)
                        .and_then(|p| p.chars().next())
                        .is_some_and(char::is_alphanumeric)
                });
                m.ends[i] = i + 1 == m.tokens.len() || !next_continues;
            }
            // Lines are separate: a span never continues into the next one.
            m.tokens.push(LlamaToken(-1));
            m.ranges
                .push((line_start + line.len(), line_start + line.len()));
            m.starts.push(false);
            m.ends.push(false);
            line_start += line.len() + 1;
        }
        m
    }

    /// Reads each prompt, in order; prompts sharing a beginning with the
    /// one before share its decoded tokens. `halt` is asked between chunks
    /// and steps.
    pub fn read_spans(
        &self,
        prompts: &[SpanPrompt],
        halt: &dyn Fn() -> Option<Halt>,
    ) -> Result<Vec<SpanReading>, LocalError> {
        let check = || match halt() {
            Some(Halt::Cancelled) => Err(LocalError::Cancelled),
            Some(Halt::TimedOut) => Err(LocalError::TimedOut),
            None => Ok(()),
        };
        check()?;
        let vocab = self.model().vocab();
        let tokenized: Vec<Vec<LlamaToken>> = prompts
            .iter()
            .map(|p| vocab.tokenize(p.prompt.as_bytes(), false, true))
            .collect();
        // Room for the prompt and its span, and for the judgement after it.
        let longest = prompts
            .iter()
            .zip(&tokenized)
            .map(|(p, t)| {
                let judge = p.judge.as_ref().map_or(0, |j| {
                    vocab
                        .tokenize(format!("{}{}", j.before, j.after).as_bytes(), false, true)
                        .len()
                });
                t.len().max(judge) + p.max_tokens + 1
            })
            .max()
            .unwrap_or(0);
        if longest == 0 {
            return Ok(Vec::new());
        }
        let limit = self.context_limit() as usize;
        if longest > limit {
            return Err(LocalError::TooLong {
                prompt: longest,
                reply: 0,
                limit: limit as u32,
            });
        }
        let mut ctx = self.context(
            (longest as u32).next_multiple_of(256).min(limit as u32),
            CHUNK,
        )?;
        let end_set = self.span_ends.get_or_init(|| {
            // The end of an answer: the end of the reply, or a new line.
            (0..self.model().n_vocab())
                .map(LlamaToken)
                .filter(|t| {
                    vocab.is_eog(*t)
                        || matches!(
                            vocab.token_to_piece(*t, false, None).first(),
                            Some(b'\n' | b'\r')
                        )
                })
                .collect()
        });

        let mut in_cache: Vec<LlamaToken> = Vec::new();
        let mut batch = LlamaBatch::new(CHUNK, 1);
        let mut out = Vec::with_capacity(prompts.len());
        for (p, tokens) in prompts.iter().zip(&tokenized) {
            check()?;
            let started = Instant::now();
            if tokens.is_empty() {
                return Err(LocalError::Decode("the prompt has no tokens".into()));
            }
            let decoded = feed(&mut ctx, &mut batch, &mut in_cache, tokens, &check)?;

            let matchers: Vec<Matcher> = p.sources.iter().map(|s| self.matcher(s)).collect();
            let none = vocab
                .tokenize(format!(" {}", p.none_word).as_bytes(), false, false)
                .first()
                .copied();

            // First step: the no-answer word, or a word that starts a span.
            let logits = ctx.get_logits_ith(batch.n_tokens() - 1).to_vec();
            let norm = log_sum_exp(&logits);
            let mut allowed: HashSet<i32> = HashSet::new();
            for m in &matchers {
                for (i, t) in m.tokens.iter().enumerate() {
                    if m.starts[i] && t.0 >= 0 {
                        allowed.insert(t.0);
                    }
                }
            }
            let none_logprob = none.map_or(f32::NEG_INFINITY, |t| logits[t.0 as usize] - norm);
            let copy: Vec<f32> = allowed.iter().map(|t| logits[*t as usize]).collect();
            let copy_logmass = if copy.is_empty() {
                f32::NEG_INFINITY
            } else {
                log_sum_exp(&copy) - norm
            };
            let first = allowed
                .iter()
                .copied()
                .max_by(|a, b| logits[*a as usize].total_cmp(&logits[*b as usize]));
            let Some(first) = first else {
                out.push(SpanReading {
                    span: None,
                    best: None,
                    none_logprob,
                    start_logprob: f32::NEG_INFINITY,
                    mean_logprob: f32::NEG_INFINITY,
                    copy_logmass,
                    tokens: 0,
                    judged: Vec::new(),
                    prompt_tokens: decoded,
                    time: started.elapsed(),
                });
                continue;
            };
            let start_logprob = logits[first as usize] - norm;
            let chose_none = none.is_some_and(|t| logits[t.0 as usize] > logits[first as usize]);

            // Continue the span greedily among the positions still matching.
            let mut active: Vec<(usize, usize)> = Vec::new(); // (source, token index)
            for (s, m) in matchers.iter().enumerate() {
                for (i, t) in m.tokens.iter().enumerate() {
                    if m.starts[i] && t.0 == first {
                        active.push((s, i));
                    }
                }
            }
            let mut sum = start_logprob;
            let mut n = 1usize;
            let mut pos = in_cache.len();
            let mut next = LlamaToken(first);
            let mut span_len = 1usize;
            loop {
                check()?;
                batch.clear();
                batch
                    .add(next, pos as i32, &[0], true)
                    .map_err(|e| LocalError::Decode(e.to_string()))?;
                ctx.decode(&mut batch)
                    .map_err(|e| LocalError::Decode(e.to_string()))?;
                in_cache.push(next);
                pos += 1;
                let logits = ctx.get_logits_ith(0);
                let norm = log_sum_exp(logits);
                let can_end = active
                    .iter()
                    .any(|(s, i)| matchers[*s].ends[*i + span_len - 1]);
                let end_logit = if can_end {
                    end_set
                        .iter()
                        .map(|t| logits[t.0 as usize])
                        .fold(f32::NEG_INFINITY, f32::max)
                } else {
                    f32::NEG_INFINITY
                };
                let mut best: Option<(i32, f32)> = None;
                if span_len < p.max_tokens {
                    for (s, i) in &active {
                        let t = matchers[*s].tokens[*i + span_len];
                        if t.0 < 0 {
                            continue;
                        }
                        let l = logits[t.0 as usize];
                        if best.is_none_or(|(_, b)| l > b) {
                            best = Some((t.0, l));
                        }
                    }
                }
                match best {
                    Some((t, l)) if l > end_logit => {
                        sum += l - norm;
                        n += 1;
                        active.retain(|(s, i)| matchers[*s].tokens[*i + span_len].0 == t);
                        span_len += 1;
                        next = LlamaToken(t);
                    }
                    _ => {
                        if end_logit.is_finite() {
                            sum += end_logit - norm;
                            n += 1;
                        }
                        break;
                    }
                }
            }
            // The first position still matching that may end here.
            let (s, i) = active
                .iter()
                .copied()
                .find(|(s, i)| matchers[*s].ends[*i + span_len - 1])
                .unwrap_or(active[0]);
            let m = &matchers[s];
            let span = Span {
                source: s,
                start: m.ranges[i].0,
                end: m.ranges[i + span_len - 1].1,
            };
            let mut judged = Vec::new();
            if let Some(j) = &p.judge {
                let text = p.sources[s]
                    .get(span.start..span.end)
                    .unwrap_or_default()
                    .trim();
                let tokens = vocab.tokenize(
                    format!("{}{text}{}", j.before, j.after).as_bytes(),
                    false,
                    true,
                );
                if !tokens.is_empty() && tokens.len() < ctx.n_ctx() as usize {
                    feed(&mut ctx, &mut batch, &mut in_cache, &tokens, &check)?;
                    let logits = ctx.get_logits_ith(batch.n_tokens() - 1);
                    let norm = log_sum_exp(logits);
                    judged = j
                        .choices
                        .iter()
                        .map(|c| {
                            vocab
                                .tokenize(format!(" {c}").as_bytes(), false, false)
                                .first()
                                .map_or(f32::NEG_INFINITY, |t| logits[t.0 as usize] - norm)
                        })
                        .collect();
                }
            }
            out.push(SpanReading {
                span: (!chose_none).then_some(span),
                best: Some(span),
                none_logprob,
                start_logprob,
                mean_logprob: sum / n as f32,
                copy_logmass,
                tokens: span_len,
                judged,
                prompt_tokens: decoded,
                time: started.elapsed(),
            });
        }
        Ok(out)
    }
}

/// Decodes `tokens` after what they share with the tokens in the cache
/// (always at least the last, for its logits, which end up at the batch's
/// last index); the tokens decoded.
fn feed(
    ctx: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch,
    in_cache: &mut Vec<LlamaToken>,
    tokens: &[LlamaToken],
    check: &dyn Fn() -> Result<(), LocalError>,
) -> Result<usize, LocalError> {
    let shared = in_cache
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(tokens.len() - 1);
    ctx.clear_kv_cache_seq(Some(0), Some(shared as u32), None)
        .map_err(|e| LocalError::Decode(e.to_string()))?;
    in_cache.truncate(shared);
    let rest = &tokens[shared..];
    let last = rest.len() - 1;
    for (c, chunk) in rest.chunks(CHUNK).enumerate() {
        check()?;
        batch.clear();
        for (i, t) in chunk.iter().enumerate() {
            let k = c * CHUNK + i;
            batch
                .add(*t, (shared + k) as i32, &[0], k == last)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
        }
        ctx.decode(batch)
            .map_err(|e| LocalError::Decode(e.to_string()))?;
    }
    in_cache.extend_from_slice(rest);
    Ok(rest.len())
}

fn log_sum_exp(xs: &[f32]) -> f32 {
    let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    max + xs.iter().map(|x| (x - max).exp()).sum::<f32>().ln()
}
