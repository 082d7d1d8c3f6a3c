//! `agent.*` against a fake LLM server on 127.0.0.1 (real HTTP).

use marktoflow_steps::agent::{AgentAction, AgentHub, AgentOverrides};
use marktoflow_steps::core::signals::{Cancel, LogLevel};
use marktoflow_steps::script::ScriptHost;
use marktoflow_steps::{Action, ActionError, Call, Capabilities, LogLine, Sandbox, ToolConfig};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

// ---------------------------------------------------------------- fake server

#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Reply {
    Reply {
        status: 200,
        headers: vec![],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

fn status(code: u16, body: Value) -> Reply {
    Reply {
        status: code,
        headers: vec![],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

struct Fake {
    base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Fake {
    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// Serves `replies` in order (the last one repeats), one per connection.
async fn fake(replies: Vec<Reply>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = requests.clone();
    let replies = Arc::new(Mutex::new(replies));
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let recorded = recorded.clone();
            let replies = replies.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.split("\r\n");
                let first: Vec<&str> = lines.next().unwrap().split(' ').collect();
                let mut headers = BTreeMap::new();
                for line in lines.filter(|l| !l.is_empty()) {
                    let (k, v) = line.split_once(':').unwrap();
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
                let len: usize = headers
                    .get("content-length")
                    .map(|v| v.parse().unwrap())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                recorded.lock().unwrap().push(Recorded {
                    method: first[0].to_string(),
                    path: first[1].to_string(),
                    headers,
                    body,
                });
                let reply = {
                    let mut r = replies.lock().unwrap();
                    if r.len() > 1 {
                        r.remove(0)
                    } else {
                        r[0].clone()
                    }
                };
                tokio::time::sleep(reply.delay).await;
                let mut out = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&reply.body);
                let _ = sock.write_all(out.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Fake { base, requests }
}

fn anthropic_reply(text: &str) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn"
    })
}

// ------------------------------------------------------------------- harness

type Logs = Arc<Mutex<Vec<LogLine>>>;

fn caps(env: &[(&str, &str)], overrides: AgentOverrides) -> (Capabilities, Logs) {
    let logs: Logs = Arc::new(Mutex::new(Vec::new()));
    let sink = logs.clone();
    let caps = Capabilities {
        clock: Arc::new(marktoflow_steps::core::time::SystemClock),
        caches: Default::default(),
        mcp: Default::default(),
        replies: None,
        approvals: None,
        workflows: None,
        usage: None,
        background: None,
        trace: None,
        step: None,
        sandbox: Arc::new(Sandbox::closed(std::env::temp_dir())),
        state: Arc::new(marktoflow_steps::core::state::StateDir {
            root: std::env::temp_dir().join("marktoflow-test-state"),
            project: false,
        }),
        log: Arc::new(move |l| sink.lock().unwrap().push(l)),
        progress: marktoflow_steps::core::signals::no_progress(),
        cancel: Cancel::default(),
        scripts: Arc::new(ScriptHost::new(PathBuf::from("/nonexistent"))),
        agents: Arc::new(AgentHub::new(overrides)),
        env: Arc::new(
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        allowed_hosts: None,
    };
    (caps, logs)
}

fn tool(sdk: &str, auth: Value, options: Value) -> ToolConfig {
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    ToolConfig {
        name: "agent".into(),
        sdk: sdk.into(),
        auth: obj(auth),
        options: obj(options),
    }
}

async fn run(
    caps: &Capabilities,
    tool: &ToolConfig,
    model: Option<&str>,
    inputs: Value,
) -> Result<Value, ActionError> {
    run_with(caps, tool, model, None, "run", inputs).await
}

async fn run_with(
    caps: &Capabilities,
    tool: &ToolConfig,
    model: Option<&str>,
    timeout: Option<Duration>,
    method: &str,
    inputs: Value,
) -> Result<Value, ActionError> {
    let action = format!("agent.{method}");
    let call = Call {
        globals: None,
        action: &action,
        method,
        tool: Some(tool),
        declared: &[],
        model,
        timeout,
        caps,
        idempotency_key: None,
    };
    AgentAction.call(&call, inputs).await
}

fn warns(logs: &Logs) -> Vec<String> {
    logs.lock()
        .unwrap()
        .iter()
        .filter(|l| l.level == LogLevel::Warn)
        .map(|l| l.message.clone())
        .collect()
}

fn message(e: &ActionError) -> String {
    e.to_string()
}

// --------------------------------------------------------------------- tests

#[tokio::test]
async fn anthropic_request_format_alias_and_reply() {
    let srv = fake(vec![ok(json!({
        "content": [{"type": "text", "text": "Answer: 42\n"}, {"type": "text", "text": "Confidence: high"}],
        "stop_reason": "end_turn"
    }))])
    .await;
    let (caps, _) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ],
        AgentOverrides::default(),
    );
    // The seed: tool claude-agent with options.model sonnet, step model haiku.
    let t = tool("claude-agent", json!({}), json!({"model": "sonnet"}));
    let out = run(
        &caps,
        &t,
        Some("haiku"),
        json!({"prompt": "What is 6*7?", "system": "Be brief", "temperature": 0.2}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("Answer: 42\nConfidence: high"));
    assert!(out.as_str().unwrap().contains("Confidence: high"));

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.headers["x-api-key"], "sk-ant-test");
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert!(r.headers["content-type"].starts_with("application/json"));
    assert_eq!(r.body["model"], "claude-haiku-4-5-20251001");
    assert_eq!(r.body["max_tokens"], 4096);
    assert_eq!(r.body["system"], "Be brief");
    assert_eq!(r.body["temperature"], 0.2);
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": "What is 6*7?"}])
    );
    assert!(r.body.get("stream").is_none());
}

#[tokio::test]
async fn anthropic_tool_model_alias_and_chat_messages() {
    let srv = fake(vec![ok(anthropic_reply("hi there"))]).await;
    let (caps, _) = caps(&[("ANTHROPIC_API_KEY", "k-env")], AgentOverrides::default());
    // auth.base_url and auth.api_key in the tool beat the environment.
    let t = tool(
        "anthropic",
        json!({"base_url": format!("{}/", srv.base), "api_key": "k-tool"}),
        json!({"model": "sonnet", "max_tokens": 100}),
    );
    let out = run_with(
        &caps,
        &t,
        None,
        None,
        "chat",
        json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hey"},
            {"role": "user", "content": "again"}
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("hi there"));
    let r = &srv.requests()[0];
    assert_eq!(r.headers["x-api-key"], "k-tool");
    assert_eq!(r.body["model"], "claude-sonnet-4-5-20250929");
    assert_eq!(r.body["max_tokens"], 100);
    assert_eq!(r.body["system"], "sys");
    assert_eq!(r.body["messages"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn openai_request_format_and_reply() {
    let srv = fake(vec![ok(json!({
        "id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}]
    }))])
    .await;
    let (caps, _) = caps(&[], AgentOverrides::default());
    let t = tool(
        "openai-compatible",
        json!({"base_url": format!("{}/v1", srv.base), "api_key": "sk-oai"}),
        json!({"model": "gpt-test"}),
    );
    let out = run_with(
        &caps,
        &t,
        None,
        None,
        "generate",
        json!({"prompt": {"q": "ping"}, "system": "sys", "max_tokens": 50}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("pong"));
    let r = &srv.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], "Bearer sk-oai");
    assert!(!r.headers.contains_key("x-api-key"));
    assert_eq!(r.body["model"], "gpt-test");
    assert_eq!(r.body["max_tokens"], 50);
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "{\"q\":\"ping\"}"}
        ])
    );
}

#[tokio::test]
async fn ollama_request_format_and_reply() {
    let srv = fake(vec![ok(json!({
        "model": "llama3.2", "message": {"role": "assistant", "content": "local answer"}, "done": true
    }))])
    .await;
    // OLLAMA_HOST without a scheme, as `ollama serve` accepts it.
    let host = srv.base.trim_start_matches("http://").to_string();
    let (caps, _) = caps(
        &[("OLLAMA_HOST", &host), ("OLLAMA_MODEL", "llama3.2")],
        AgentOverrides::default(),
    );
    // A Claude alias in the step is skipped for Ollama.
    let t = tool("ollama", json!({}), json!({}));
    let out = run(
        &caps,
        &t,
        Some("haiku"),
        json!({"prompt": "hi", "temperature": 0}),
    )
    .await
    .unwrap();
    assert_eq!(out, json!("local answer"));
    let r = &srv.requests()[0];
    assert_eq!(r.path, "/api/chat");
    assert_eq!(r.body["model"], "llama3.2");
    assert_eq!(r.body["stream"], false);
    assert_eq!(r.body["options"]["temperature"], 0.0);
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
    assert!(!r.headers.contains_key("authorization"));
}

#[tokio::test]
async fn agent_override_switches_provider_and_drops_file_models() {
    let srv = fake(vec![ok(
        json!({"choices": [{"message": {"content": "from vllm"}}]}),
    )])
    .await;
    let base = format!("{}/v1", srv.base);
    let (caps, _) = caps(
        &[("OPENAI_BASE_URL", &base), ("ANTHROPIC_API_KEY", "unused")],
        AgentOverrides {
            agent: Some("openai".into()),
            model: Some("qwen2.5".into()),
        },
    );
    // The file says claude-agent + sonnet, the step haiku: both dropped.
    let t = tool(
        "claude-agent",
        json!({"base_url": "http://127.0.0.1:9/never"}),
        json!({"model": "gpt-file-model"}),
    );
    let out = run(&caps, &t, Some("haiku"), json!({"prompt": "x"}))
        .await
        .unwrap();
    assert_eq!(out, json!("from vllm"));
    let r = &srv.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.body["model"], "qwen2.5");
    // A local server needs no key; none is sent.
    assert!(!r.headers.contains_key("authorization"));
}

#[tokio::test]
async fn retry_after_429_then_success() {
    let mut limited = status(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
    );
    limited.headers.push(("retry-after", "1".into()));
    let srv = fake(vec![limited, ok(anthropic_reply("done"))]).await;
    let (caps, logs) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "k"),
            ("MARKTOFLOW_RETRY_BASE_MS", "1"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("claude", json!({}), json!({}));
    let start = Instant::now();
    let out = run(&caps, &t, None, json!({"prompt": "p"})).await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(out, json!("done"));
    assert_eq!(srv.requests().len(), 2);
    // Retry-After (1 s) wins over the 1 ms backoff base.
    assert!(elapsed >= Duration::from_millis(950), "{elapsed:?}");
    let w = warns(&logs);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("429") && w[0].contains("slow down") && w[0].contains("Retry-After"),
        "{}",
        w[0]
    );
    assert!(w[0].contains("retry 1 of 3"), "{}", w[0]);
}

#[tokio::test]
async fn server_errors_twice_then_success() {
    let srv = fake(vec![
        status(500, json!({"error": {"message": "boom"}})),
        status(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ok(anthropic_reply("third time")),
    ])
    .await;
    let (caps, logs) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "k"),
            ("MARKTOFLOW_RETRY_BASE_MS", "1"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("claude-code", json!({}), json!({}));
    let out = run(&caps, &t, None, json!({"prompt": "p"})).await.unwrap();
    assert_eq!(out, json!("third time"));
    assert_eq!(srv.requests().len(), 3);
    let w = warns(&logs);
    assert_eq!(w.len(), 2, "{w:?}");
    // The waits follow MARKTOFLOW_RETRY_BASE_MS (1 ms), as each warning says.
    for line in &w {
        let wait = line.rsplit(" in ").next().unwrap_or("");
        let ms: u64 = wait.trim_end_matches("ms").parse().unwrap_or(u64::MAX);
        assert!(wait.ends_with("ms") && ms < 100, "{line}");
    }
    assert!(w[0].contains("500") && w[0].contains("boom"));
    assert!(w[1].contains("529") && w[1].contains("retry 2 of 3"));
}

#[tokio::test]
async fn retries_exhausted_is_a_retryable_failure() {
    let srv = fake(vec![status(503, json!({"error": "busy"}))]).await;
    let (caps, logs) = caps(
        &[
            ("OPENAI_BASE_URL", &srv.base),
            ("OPENAI_MODEL", "m"),
            ("MARKTOFLOW_RETRY_BASE_MS", "1"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("vllm", json!({}), json!({"max_retries": 2}));
    let err = run(&caps, &t, None, json!({"prompt": "p"}))
        .await
        .unwrap_err();
    assert_eq!(srv.requests().len(), 3);
    assert_eq!(warns(&logs).len(), 2);
    match &err {
        ActionError::Failed { message, retryable } => {
            assert!(*retryable);
            assert!(
                message.contains("after 3 requests")
                    && message.contains("503")
                    && message.contains("busy"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unauthorized_fails_at_once_with_hint_and_no_key() {
    let key = "sk-ant-secret-123456";
    let srv = fake(vec![status(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {key}")}}),
    )])
    .await;
    let (caps, logs) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", key),
            ("MARKTOFLOW_RETRY_BASE_MS", "1"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("claude-agent", json!({}), json!({}));
    let err = run(&caps, &t, None, json!({"prompt": "p"}))
        .await
        .unwrap_err();
    assert_eq!(srv.requests().len(), 1);
    assert!(warns(&logs).is_empty());
    let m = message(&err);
    assert!(matches!(
        err,
        ActionError::Failed {
            retryable: false,
            ..
        }
    ));
    assert!(m.contains("401"), "{m}");
    assert!(m.contains("invalid x-api-key"), "{m}");
    assert!(m.contains("ANTHROPIC_API_KEY"), "{m}");
    assert!(!m.contains(key), "{m}");
}

#[tokio::test]
async fn not_found_fails_at_once_with_model_hint() {
    let srv = fake(vec![status(
        404,
        json!({"error": "model \"nope\" not found, try pulling it first"}),
    )])
    .await;
    let (caps, _) = caps(&[("OLLAMA_HOST", &srv.base)], AgentOverrides::default());
    let t = tool("ollama", json!({}), json!({"model": "nope"}));
    let m = message(
        &run(&caps, &t, None, json!({"prompt": "p"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(srv.requests().len(), 1);
    assert!(
        m.contains("404") && m.contains("not found") && m.contains("ollama pull nope"),
        "{m}"
    );
}

#[tokio::test]
async fn connection_errors_are_retried() {
    // A port with nothing listening.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let (caps, logs) = caps(
        &[
            ("OPENAI_BASE_URL", &base),
            ("MARKTOFLOW_RETRY_BASE_MS", "1"),
        ],
        AgentOverrides {
            agent: None,
            model: Some("m".into()),
        },
    );
    let t = tool("openai", json!({}), json!({"max_retries": 1}));
    let err = run(&caps, &t, None, json!({"prompt": "p"}))
        .await
        .unwrap_err();
    assert_eq!(warns(&logs).len(), 1);
    let m = message(&err);
    assert!(m.contains("after 2 requests"), "{m}");
}

#[tokio::test]
async fn per_request_timeout_from_step() {
    let mut slow = ok(anthropic_reply("late"));
    slow.delay = Duration::from_secs(3);
    let srv = fake(vec![slow]).await;
    let (caps, _) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "k"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("claude", json!({}), json!({"max_retries": 0}));
    let err = run_with(
        &caps,
        &t,
        None,
        Some(Duration::from_millis(200)),
        "run",
        json!({"prompt": "p"}),
    )
    .await
    .unwrap_err();
    let m = message(&err);
    assert!(m.contains("no reply within 200ms"), "{m}");
}

#[tokio::test]
async fn cancellation_stops_a_request() {
    let mut slow = ok(anthropic_reply("late"));
    slow.delay = Duration::from_secs(5);
    let srv = fake(vec![slow]).await;
    let (caps, _) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "k"),
        ],
        AgentOverrides::default(),
    );
    let cancel = caps.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let t = tool("claude", json!({}), json!({}));
    // The reply comes after 5 s: a request that was not stopped would
    // return it instead of the cancellation.
    let err = run(&caps, &t, None, json!({"prompt": "p"}))
        .await
        .unwrap_err();
    assert_eq!(err, ActionError::Cancelled);
}

#[tokio::test]
async fn missing_prompt_is_an_input_error() {
    let srv = fake(vec![ok(anthropic_reply("x"))]).await;
    let (caps, _) = caps(
        &[
            ("ANTHROPIC_BASE_URL", &srv.base),
            ("ANTHROPIC_API_KEY", "k"),
        ],
        AgentOverrides::default(),
    );
    let t = tool("claude", json!({}), json!({}));
    let err = run(&caps, &t, None, json!({"system": "s"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ActionError::Input(_)), "{err:?}");
    let err = run(&caps, &t, None, json!({"messages": "nope"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ActionError::Input(_)), "{err:?}");
    assert!(srv.requests().is_empty());
}

// ----------------------------------------------------------------- preflight

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn hub(agent: Option<&str>, model: Option<&str>) -> AgentHub {
    AgentHub::new(AgentOverrides {
        agent: agent.map(str::to_string),
        model: model.map(str::to_string),
    })
}

#[test]
fn preflight_describes_the_seed() {
    let t = tool("claude-agent", json!({}), json!({"model": "sonnet"}));
    let e = env(&[("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(
        hub(None, None).preflight(&t, Some("haiku"), &e).unwrap(),
        "anthropic claude-haiku-4-5-20251001"
    );
    assert_eq!(
        hub(None, None).preflight(&t, None, &e).unwrap(),
        "anthropic claude-sonnet-4-5-20250929"
    );
}

#[test]
fn preflight_anthropic_without_key() {
    let t = tool("claude-agent", json!({}), json!({"model": "sonnet"}));
    let m = hub(None, None).preflight(&t, None, &env(&[])).unwrap_err();
    assert_eq!(
        m,
        "tool `agent` uses sdk `claude-agent` (Anthropic), but ANTHROPIC_API_KEY is not set. \
         Set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy or a compatible server), \
         or pick another provider: `--agent openai` with OPENAI_API_KEY or OPENAI_BASE_URL, \
         `--agent ollama` with OLLAMA_HOST; or install the local model: `marktoflow model install` \
         (the built-in local model, about 490 MB; no key or network needed afterwards)"
    );
    // With a proxy URL but no key, the message says so.
    let m = hub(None, None)
        .preflight(
            &t,
            None,
            &env(&[("ANTHROPIC_BASE_URL", "http://u:pw@proxy.local:8080")]),
        )
        .unwrap_err();
    assert!(
        m.contains("http://proxy.local:8080") && m.contains("any value"),
        "{m}"
    );
    assert!(!m.contains("pw@"), "{m}");
    // ANTHROPIC_AUTH_TOKEN is enough.
    assert!(hub(None, None)
        .preflight(&t, None, &env(&[("ANTHROPIC_AUTH_TOKEN", "t")]))
        .is_ok());
}

#[test]
fn preflight_openai_needs_key_or_base_and_a_model() {
    let t = tool("openai", json!({}), json!({}));
    let m = hub(None, Some("gpt-4o"))
        .preflight(&t, None, &env(&[]))
        .unwrap_err();
    assert!(m.starts_with("tool `agent` uses sdk `openai` (OpenAI), but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"), "{m}");
    assert_eq!(
        hub(None, Some("gpt-4o"))
            .preflight(&t, None, &env(&[("OPENAI_API_KEY", "k")]))
            .unwrap(),
        "openai gpt-4o"
    );
    // A local server: no key needed; a Claude alias is no model for it.
    let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")]);
    let m = hub(None, None)
        .preflight(&t, Some("haiku"), &e)
        .unwrap_err();
    assert!(
        m.contains("no model is set") && m.contains("--model") && m.contains("OPENAI_MODEL"),
        "{m}"
    );
    assert!(m.contains("`haiku`"), "the skipped alias is named: {m}");
    // Naming none there, the server's first model is used when the step runs.
    assert_eq!(
        hub(None, None).preflight(&t, None, &e).unwrap(),
        "openai auto"
    );
    let e = env(&[
        ("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        ("OPENAI_MODEL", "qwen"),
    ]);
    assert_eq!(
        hub(None, None).preflight(&t, Some("haiku"), &e).unwrap(),
        "openai qwen"
    );
}

#[test]
fn preflight_ollama_and_overrides() {
    let t = tool("claude-agent", json!({}), json!({"model": "sonnet"}));
    // --agent ollama: always configured, but needs a model; file models dropped.
    let m = hub(Some("ollama"), None)
        .preflight(&t, Some("haiku"), &env(&[]))
        .unwrap_err();
    assert!(
        m.starts_with("`--agent ollama` selects Ollama for tool `agent`, but no model is set"),
        "{m}"
    );
    assert!(m.contains("OLLAMA_MODEL"), "{m}");
    assert_eq!(
        hub(Some("ollama"), Some("llama3.2"))
            .preflight(&t, Some("haiku"), &env(&[]))
            .unwrap(),
        "ollama llama3.2"
    );
    assert_eq!(
        hub(Some("ollama"), None)
            .preflight(&t, None, &env(&[("OLLAMA_MODEL", "mistral")]))
            .unwrap(),
        "ollama mistral"
    );
    // --agent naming the file's own provider keeps the file's models.
    assert_eq!(
        hub(Some("anthropic"), Some("opus"))
            .preflight(&t, Some("haiku"), &env(&[("ANTHROPIC_API_KEY", "k")]))
            .unwrap(),
        "anthropic claude-haiku-4-5-20251001"
    );
    // --agent anthropic over an openai tool: the file's gpt model is dropped.
    let o = tool("openai", json!({}), json!({"model": "gpt-4o"}));
    assert_eq!(
        hub(Some("claude"), None)
            .preflight(&o, None, &env(&[("ANTHROPIC_API_KEY", "k")]))
            .unwrap(),
        "anthropic claude-sonnet-4-5-20250929"
    );
    let m = hub(Some("gemini"), None)
        .preflight(&t, None, &env(&[]))
        .unwrap_err();
    assert!(
        m.contains("unknown `--agent gemini`") && m.contains("ollama"),
        "{m}"
    );
}

#[test]
fn model_resolution_order() {
    let e = env(&[
        ("ANTHROPIC_API_KEY", "k"),
        ("ANTHROPIC_MODEL", "claude-env-model"),
    ]);
    let with_opt = tool("claude", json!({}), json!({"model": "opus"}));
    let without = tool("claude", json!({}), json!({}));
    let h = hub(None, Some("haiku"));
    // step > tool options.model > --model > env.
    assert_eq!(
        h.preflight(&with_opt, Some("sonnet"), &e).unwrap(),
        "anthropic claude-sonnet-4-5-20250929"
    );
    assert_eq!(
        h.preflight(&with_opt, None, &e).unwrap(),
        "anthropic claude-opus-4-5-20251101"
    );
    assert_eq!(
        h.preflight(&without, None, &e).unwrap(),
        "anthropic claude-haiku-4-5-20251001"
    );
    assert_eq!(
        hub(None, None).preflight(&without, None, &e).unwrap(),
        "anthropic claude-env-model"
    );
    // Full ids pass through; `auto` counts as unset.
    assert_eq!(
        hub(None, None)
            .preflight(
                &tool("claude", json!({}), json!({"model": "auto"})),
                Some("claude-3-5-haiku-20241022"),
                &e
            )
            .unwrap(),
        "anthropic claude-3-5-haiku-20241022"
    );
    let r = hub(None, None).resolve(&with_opt, None, &e).unwrap();
    assert_eq!(r.model_source, "tool `agent` options.model");
    // Debug output never shows the key.
    let e = env(&[("ANTHROPIC_API_KEY", "sk-very-secret")]);
    let r = hub(None, None).resolve(&without, None, &e).unwrap();
    assert!(!format!("{r:?}").contains("sk-very-secret"));
}

#[test]
fn preflight_unknown_sdk_lists_supported() {
    let t = tool("gemini-cli", json!({}), json!({}));
    let m = hub(None, None).preflight(&t, None, &env(&[])).unwrap_err();
    assert!(m.contains("`gemini-cli`"), "{m}");
    for sdk in [
        "claude-agent",
        "claude-code",
        "anthropic",
        "openai-compatible",
        "vllm",
        "ollama",
        "--agent",
    ] {
        assert!(m.contains(sdk), "{sdk} missing from: {m}");
    }
    // ... and --agent fixes it.
    assert!(hub(Some("anthropic"), None)
        .preflight(&t, None, &env(&[("ANTHROPIC_API_KEY", "k")]))
        .is_ok());
}
