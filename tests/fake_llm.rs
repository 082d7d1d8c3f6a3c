//! A fake LLM HTTP server on 127.0.0.1 that answers in the Anthropic, OpenAI
//! and Ollama formats and records what it was asked. It stands in for the
//! paid providers only.

use crate::fake_service::{FakeService, Hit};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn model(&self) -> &str {
        self.body["model"].as_str().unwrap_or("")
    }
    /// The text of the last user message.
    pub fn prompt(&self) -> String {
        let msgs = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last = msgs.last().cloned().unwrap_or(Value::Null);
        match &last["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
}

pub type Reply = Arc<dyn Fn(&Request) -> (u16, String) + Send + Sync>;

/// A reply status meaning: send the text as the whole JSON body, with 200
/// (for replies the text-only shapes cannot express, such as tool calls).
pub const RAW: u16 = 0;

pub struct FakeLlm {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeLlm {
    /// Starts a server whose replies come from `reply(request) → (status, text)`.
    pub fn start(reply: Reply) -> FakeLlm {
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let rec = requests.clone();
        let service = FakeService::start(Arc::new(move |hit: &Hit, _| {
            let req = Request {
                path: hit.path.clone(),
                headers: hit.headers.clone(),
                body: hit.json(),
            };
            rec.lock().unwrap().push(req.clone());
            let path = &req.path;
            // Model lists (`GET /models`, Ollama's `/api/tags`) need no reply.
            let (status, text) = if path.ends_with("/models") || path.ends_with("/api/tags") {
                (200, String::new())
            } else {
                reply(&req)
            };
            let (status, payload) = if status == RAW {
                (
                    200,
                    serde_json::from_str(&text).expect("a RAW reply is JSON"),
                )
            } else {
                (status, shaped(path, &req, status, text))
            };
            (status, Vec::new(), payload.to_string())
        }));
        FakeLlm {
            base: service.base.clone(),
            requests,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// `text` in the reply shape of the API at `path`.
fn shaped(path: &str, req: &Request, status: u16, text: String) -> Value {
    if status != 200 {
        json!({"error": {"type": "fake_error", "message": text}})
    } else if path.ends_with("/messages") {
        json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": req.model(),
                   "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 1, "output_tokens": 1}})
    } else if path.ends_with("/chat/completions") {
        json!({"id": "cmpl_fake", "object": "chat.completion", "model": req.model(),
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
    } else if path.ends_with("/models") {
        json!({"object": "list", "data": [{"id": "fake-small", "owned_by": "fake-lab"}, {"id": "fake-large"}]})
    } else if path.ends_with("/api/tags") {
        json!({"models": [{"name": "llama3:8b"}, {"name": "qwen2.5:0.5b"}]})
    } else if path.ends_with("/api/chat") {
        json!({"model": req.model(), "message": {"role": "assistant", "content": text}, "done": true})
    } else {
        json!({"error": "unknown path"})
    }
}

/// Replies that make the LifeOS flagship work: a JSON analysis for step 1
/// (or plain prose when `json_analysis` is false) and a formatted answer.
pub fn lifeos_reply(json_analysis: bool, answer: &'static str) -> Reply {
    Arc::new(move |req: &Request| {
        let p = req.prompt();
        if p.contains("Analyze this query") {
            if json_analysis {
                // The prompt's own example JSON mentions Apollo: look at the query line.
                let query = p
                    .split("Query: \"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("");
                let analysis = if query.contains("Apollo") {
                    json!({"search_terms": ["api key", "apollo"], "entities": ["Apollo"], "time_context": null,
                           "query_type": "factual", "expected_location": "Work/Projects/Apollo"})
                } else {
                    json!({"search_terms": ["zzqx-vrrkt"], "entities": [], "time_context": null,
                           "query_type": "factual", "expected_location": null})
                };
                (
                    200,
                    format!("Here is the analysis:\n```json\n{analysis:#}\n```\n"),
                )
            } else {
                (
                    200,
                    "I think the user wants to know about the Apollo project key.".to_string(),
                )
            }
        } else {
            (200, answer.to_string())
        }
    })
}

/// The id (`E3`) of the first evidence item in an answer prompt whose
/// lines hold `needle`: the prompt lists items as `[E3] Title › Heading
/// (line 12)` followed by their lines.
pub fn evidence_id(prompt: &str, needle: &str) -> Option<String> {
    let at = prompt.find(needle)?;
    let head = prompt[..at]
        .rfind("\n[E")
        .or_else(|| prompt[..at].rfind("[E"))?;
    let rest = &prompt[head..];
    let start = rest.find("[E")? + 1;
    let end = start + rest[start..].find(']')?;
    Some(rest[start..end].to_string())
}

/// A provider that answers the flagship's answer prompt with `answer`,
/// citing the evidence item that holds `needle` (as a model that read the
/// lines would), in the reply shape the step's `output_schema` asks for.
pub fn evidence_reply(needle: &'static str, answer: &'static str) -> Reply {
    Arc::new(move |req: &Request| {
        let p = req.prompt();
        let id = evidence_id(&p, needle).unwrap_or_else(|| "E1".into());
        (
            200,
            json!({"answer": answer, "citations": [id], "found": true}).to_string(),
        )
    })
}
