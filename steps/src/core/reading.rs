//! Reading with a model, as data: what a retrieval step asks a model to
//! read (a span to copy from given passages, then a judgement of it) and
//! what comes back. The agent family answers it
//! ([`Llm::read_spans`](crate::core::action::hosts::Llm::read_spans)).

use std::time::Duration;

/// Where the span goes in a [`JudgeAsk`]'s user message.
pub const SPAN_SLOT: &str = "\u{1}span\u{1}";

/// One span reading: a chat (system and user message), the words the
/// reply starts with, and the passages it may copy from.
#[derive(Debug, Clone)]
pub struct SpanAsk {
    pub system: String,
    pub user: String,
    /// Written after the template's reply cue (`Answer:`).
    pub reply_prefix: String,
    /// The passages whose spans may be answered, matched line by line.
    pub sources: Vec<String>,
    /// The word that means "not in the passages", as the prompt names it.
    pub none_word: String,
    /// Longest span, in tokens.
    pub max_tokens: usize,
    /// A judgement of the span read, asked right after it.
    pub judge: Option<JudgeAsk>,
}

/// A question about the span read ([`SPAN_SLOT`] in `user` marks where it
/// goes), and the words whose probabilities as the reply's next word are
/// wanted (`yes`, `no`).
#[derive(Debug, Clone)]
pub struct JudgeAsk {
    pub system: String,
    pub user: String,
    pub reply_prefix: String,
    pub choices: Vec<String>,
}

/// A span: which source, and its byte range there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub source: usize,
    pub start: usize,
    pub end: usize,
}

/// What the model read.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanReading {
    /// The span chosen, or `None` when the model chose the no-answer word.
    pub span: Option<Span>,
    /// The best span even when the model chose no answer (its start chosen
    /// among the passages' words), for the caller's decision.
    pub best: Option<Span>,
    /// log p(no-answer word) at the first step, over the whole vocabulary.
    pub none_logprob: f32,
    /// log p of the span's first token, over the whole vocabulary.
    pub start_logprob: f32,
    /// Mean log p of the span's tokens and its end, over the whole vocabulary.
    pub mean_logprob: f32,
    /// log of the share of the first step's probability that falls on
    /// allowed span starts (how much the model wanted to copy at all).
    pub copy_logmass: f32,
    /// Tokens in the span.
    pub tokens: usize,
    /// log p of each of the judgement's choices, over the whole vocabulary
    /// (empty without a judgement or a span).
    pub judged: Vec<f32>,
    /// Tokens decoded for this prompt (those shared with the previous one
    /// were not decoded again).
    pub prompt_tokens: usize,
    pub time: Duration,
}
