#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The OpenAI-compatible client against a stand-in provider on loopback that speaks the real
//! wire format (HTTP/1.1, chat completions JSON), records every request and answers from a
//! queue of canned responses. Retries are counted by requests; sleeps are recorded, not slept.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use vouch_adapters::openai::{OpenAiConfig, OpenAiModel};
use vouch_runtime::model::OpenAiConfigError;
use vouch_runtime::model::{ChatMessage, Model, ModelError, ToolCall, ToolSpec};

/// What the stand-in does with one connection.
enum Reply {
    Http {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Read the request, then close without answering.
    Hangup,
    /// Read the request, then say nothing until the client gives up and closes.
    Stall,
}

fn ok(body: Value) -> Reply {
    status(200, body.to_string())
}

fn status(status: u16, body: impl Into<String>) -> Reply {
    Reply::Http {
        status,
        headers: Vec::new(),
        body: body.into(),
    }
}

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    /// Names lowercased.
    headers: Vec<(String, String)>,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct StandIn {
    base_url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    /// Serves one connection per canned reply, in order, then stops listening.
    fn start(replies: Vec<Reply>) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let mut queue: VecDeque<Reply> = replies.into();
        let thread = std::thread::spawn(move || {
            while let Some(reply) = queue.pop_front() {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                serve(stream, reply, &log);
            }
        });
        StandIn {
            base_url,
            requests,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    fn config(&self) -> OpenAiConfig {
        let mut c = OpenAiConfig::new(&self.base_url, "test-model");
        c.timeout_ms = 10_000;
        c.max_retries = 3;
        c.backoff_base_ms = 1;
        c.backoff_max_ms = 60_000;
        c.retry_after_max_ms = 60_000;
        c
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        // Only join when every reply was consumed; otherwise the thread waits in accept.
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                t.join().unwrap();
            }
        }
    }
}

fn serve(stream: TcpStream, reply: Reply, log: &Mutex<Vec<Request>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap();
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    log.lock().unwrap().push(Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let mut stream = stream;
    match reply {
        Reply::Hangup => {}
        Reply::Stall => {
            // Blocks until the client closes its end (its timeout) or the read timeout.
            let _ = stream.read(&mut [0u8; 1]);
        }
        Reply::Http {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Canned\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(body.as_bytes()).unwrap();
            stream.flush().unwrap();
        }
    }
}

/// A model whose sleeps are recorded instead of slept.
fn model(config: OpenAiConfig) -> (OpenAiModel, Arc<Mutex<Vec<Duration>>>) {
    let sleeps = Arc::new(Mutex::new(Vec::new()));
    let log = sleeps.clone();
    let m = OpenAiModel::with_sleeper(config, Box::new(move |d| log.lock().unwrap().push(d)));
    (m, sleeps)
}

fn hello() -> Vec<ChatMessage> {
    vec![
        ChatMessage::System {
            content: "You are careful.".into(),
        },
        ChatMessage::User {
            content: "Say hi.".into(),
        },
    ]
}

fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    })
}

#[test]
fn final_text() {
    let server = StandIn::start(vec![ok(completion(
        json!({"role": "assistant", "content": "Hi."}),
    ))]);
    let (mut m, sleeps) = model(server.config());
    let turn = m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(turn.content.as_deref(), Some("Hi."));
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.usage.prompt_tokens, 12);
    assert_eq!(turn.usage.completion_tokens, 5);
    assert_eq!(server.requests().len(), 1);
    assert!(sleeps.lock().unwrap().is_empty());
}

#[test]
fn tool_calls_keep_their_arguments_verbatim_even_when_malformed() {
    let good = r#"{"to": "ana@example.com",  "subject": "Hi"}"#;
    let bad = r#"{"to": "ana@example.com", "subject": "#;
    let server = StandIn::start(vec![ok(completion(json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "send_email", "arguments": good}},
            {"id": "call_b", "type": "function", "function": {"name": "send_email", "arguments": bad}}
        ]
    })))]);
    let (mut m, _) = model(server.config());
    let turn = m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(turn.content, None);
    assert_eq!(
        turn.tool_calls,
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "send_email".into(),
                arguments: good.into(),
            },
            ToolCall {
                id: "call_b".into(),
                name: "send_email".into(),
                arguments: bad.into(),
            },
        ]
    );
}

#[test]
fn request_has_the_wire_shape() {
    let server = StandIn::start(vec![ok(completion(
        json!({"role": "assistant", "content": "Sent."}),
    ))]);
    let mut config = server.config();
    config.api_key = Some("sk-test".into());
    config.max_tokens = Some(256);
    let (mut m, _) = model(config);
    let messages = vec![
        ChatMessage::System {
            content: "sys".into(),
        },
        ChatMessage::User {
            content: "mail Ana".into(),
        },
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "send_email".into(),
                arguments: r#"{"to":"ana@example.com"}"#.into(),
            }],
        },
        ChatMessage::Tool {
            tool_call_id: "call_1".into(),
            content: "queued".into(),
        },
        ChatMessage::Assistant {
            content: Some("Anything else?".into()),
            tool_calls: vec![],
        },
    ];
    let schema =
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]});
    let tools = vec![ToolSpec {
        name: "send_email".into(),
        description: "Send an e-mail.".into(),
        parameters: schema.clone(),
    }];
    m.next_turn(&messages, &tools).unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(r.body["model"], "test-model");
    assert_eq!(r.body["tool_choice"], "auto");
    assert_eq!(r.body["max_tokens"], 256);
    assert_eq!(
        r.body["tools"],
        json!([{
            "type": "function",
            // Not strict: this schema breaks strict mode's rules (no `additionalProperties`).
            "function": {"name": "send_email", "description": "Send an e-mail.", "parameters": schema, "strict": false}
        }])
    );
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "mail Ana"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1",
                "type": "function",
                "function": {"name": "send_email", "arguments": "{\"to\":\"ana@example.com\"}"}
            }]},
            {"role": "tool", "tool_call_id": "call_1", "content": "queued"},
            {"role": "assistant", "content": "Anything else?"}
        ])
    );
}

#[test]
fn no_auth_header_and_no_tools_when_none_are_given() {
    let server = StandIn::start(vec![ok(completion(
        json!({"role": "assistant", "content": "ok"}),
    ))]);
    let (mut m, _) = model(server.config());
    m.next_turn(&hello(), &[]).unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), None);
    assert!(r.body.get("tools").is_none(), "{}", r.body);
    assert!(r.body.get("tool_choice").is_none(), "{}", r.body);
    assert!(r.body.get("max_tokens").is_none(), "{}", r.body);
}

#[test]
fn rate_limit_then_success_is_retried_honouring_retry_after() {
    let server = StandIn::start(vec![
        Reply::Http {
            status: 429,
            headers: vec![("Retry-After", "7".into())],
            body: json!({"error": {"message": "slow down"}}).to_string(),
        },
        status(429, json!({"error": {"message": "slow down"}}).to_string()),
        ok(completion(json!({"role": "assistant", "content": "Hi."}))),
    ]);
    let mut config = server.config();
    config.backoff_base_ms = 5;
    let (mut m, sleeps) = model(config);
    let turn = m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(turn.content.as_deref(), Some("Hi."));
    assert_eq!(server.requests().len(), 3);
    // Retry-After: 7 first; then exponential backoff for the second retry (5 ms × 2).
    assert_eq!(
        *sleeps.lock().unwrap(),
        [Duration::from_secs(7), Duration::from_millis(10)]
    );
}

#[test]
fn retry_after_longer_than_the_backoff_cap_is_honoured_up_to_its_own_cap() {
    // Regression: Retry-After was cut at the 30 s backoff cap with no way to raise it.
    let server = StandIn::start(vec![
        Reply::Http {
            status: 429,
            headers: vec![("Retry-After", "90".into())],
            body: json!({"error": {"message": "slow down"}}).to_string(),
        },
        Reply::Http {
            status: 503,
            headers: vec![("Retry-After", "45".into())],
            body: String::new(),
        },
        ok(completion(json!({"role": "assistant", "content": "Hi."}))),
    ]);
    let mut config = server.config();
    config.backoff_max_ms = 30_000;
    config.retry_after_max_ms = 120_000;
    let (mut m, sleeps) = model(config);
    m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        *sleeps.lock().unwrap(),
        [Duration::from_secs(90), Duration::from_secs(45)]
    );
}

#[test]
fn retry_after_is_capped() {
    let server = StandIn::start(vec![
        Reply::Http {
            status: 503,
            headers: vec![("Retry-After", "3600".into())],
            body: String::new(),
        },
        ok(completion(json!({"role": "assistant", "content": "Hi."}))),
    ]);
    let mut config = server.config();
    config.retry_after_max_ms = 2_000;
    let (mut m, sleeps) = model(config);
    m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(*sleeps.lock().unwrap(), [Duration::from_millis(2_000)]);
}

#[test]
fn server_errors_exhaust_the_retries() {
    let server = StandIn::start(
        (0..3)
            .map(|_| status(500, json!({"error": {"message": "boom"}}).to_string()))
            .collect(),
    );
    let mut config = server.config();
    config.max_retries = 2;
    let (mut m, sleeps) = model(config);
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    match &err {
        ModelError::Unavailable { attempts, last } => {
            assert_eq!(*attempts, 3, "max_retries + 1");
            assert!(last.contains("500") && last.contains("boom"), "{last}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        *sleeps.lock().unwrap(),
        [Duration::from_millis(1), Duration::from_millis(2)]
    );
}

#[test]
fn unauthorized_is_rejected_with_the_servers_message_and_not_retried() {
    let server = StandIn::start(vec![status(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            .to_string(),
    )]);
    let (mut m, sleeps) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    match &err {
        ModelError::Unauthorized { status, message } => {
            assert_eq!(*status, 401);
            assert!(message.contains("Incorrect API key provided"), "{message}");
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("401") && text.contains("VOUCH_API_KEY"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(sleeps.lock().unwrap().is_empty());
}

#[test]
fn ollama_style_error_body_is_quoted() {
    let server = StandIn::start(vec![status(
        404,
        json!({"error": "model \"nope\" not found, try pulling it first"}).to_string(),
    )]);
    let (mut m, _) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(&err, ModelError::NotFound { message, model } if message.contains("try pulling it first") && model == "test-model"),
        "{err:?}"
    );
    assert!(err.to_string().contains("VOUCH_MODEL_URL"), "{err}");
}

#[test]
fn bad_request_is_its_own_cause_and_not_retried() {
    let server = StandIn::start(vec![status(
        400,
        json!({"error": {"message": "tools[0].function.parameters: array schema missing items"}})
            .to_string(),
    )]);
    let (mut m, sleeps) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(&err, ModelError::BadRequest { status: 400, message } if message.contains("missing items")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(sleeps.lock().unwrap().is_empty());
}

#[test]
fn forbidden_is_a_credentials_cause() {
    let server = StandIn::start(vec![status(403, json!({"error": "no"}).to_string())]);
    let (mut m, _) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(err, ModelError::Unauthorized { status: 403, .. }),
        "{err:?}"
    );
}

#[test]
fn a_server_that_never_answers_ends_in_timeout() {
    let server = StandIn::start(vec![Reply::Stall]);
    let mut config = server.config();
    config.timeout_ms = 300;
    config.max_retries = 0;
    let (mut m, _) = model(config);
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                attempts: 1,
                timeout_ms: 300
            }
        ),
        "{err:?}"
    );
}

#[test]
fn garbage_body_is_a_protocol_error() {
    let server = StandIn::start(vec![status(200, "<html>gateway</html>")]);
    let (mut m, _) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(&err, ModelError::Protocol(msg) if msg.contains("gateway")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn missing_choices_is_a_protocol_error() {
    let server = StandIn::start(vec![ok(json!({"id": "x", "choices": []}))]);
    let (mut m, _) = model(server.config());
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(matches!(err, ModelError::Protocol(_)), "{err:?}");
}

#[test]
fn missing_usage_counts_zero() {
    let server = StandIn::start(vec![ok(json!({
        "choices": [{"message": {"role": "assistant", "content": "Hi."}}]
    }))]);
    let (mut m, _) = model(server.config());
    let turn = m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(turn.usage.prompt_tokens, 0);
    assert_eq!(turn.usage.completion_tokens, 0);
    assert_eq!(turn.content.as_deref(), Some("Hi."));
}

#[test]
fn a_dropped_connection_is_retried() {
    let server = StandIn::start(vec![
        Reply::Hangup,
        ok(completion(json!({"role": "assistant", "content": "Hi."}))),
    ]);
    let (mut m, sleeps) = model(server.config());
    let turn = m.next_turn(&hello(), &[]).unwrap();
    assert_eq!(turn.content.as_deref(), Some("Hi."));
    assert_eq!(server.requests().len(), 2);
    assert_eq!(sleeps.lock().unwrap().len(), 1);
}

#[test]
fn connection_refused_ends_unreachable() {
    // Bind and drop to get a loopback port with nothing listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m");
    config.max_retries = 1;
    config.backoff_base_ms = 1;
    config.timeout_ms = 5_000;
    let (mut m, sleeps) = model(config);
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(err, ModelError::Unreachable { attempts: 2, .. }),
        "{err:?}"
    );
    assert_eq!(sleeps.lock().unwrap().len(), 1);
}

#[test]
fn from_env_names_the_missing_variable() {
    let err = OpenAiConfig::from_lookup(|_| None).unwrap_err();
    assert!(matches!(
        err,
        OpenAiConfigError::Missing {
            var: "VOUCH_MODEL_URL",
            ..
        }
    ));
    let text = err.to_string();
    assert!(text.contains("VOUCH_MODEL_URL is not set"), "{text}");
    assert!(text.contains("http://127.0.0.1:8080/v1"), "{text}");

    let err = OpenAiConfig::from_lookup(|k| {
        (k == "VOUCH_MODEL_URL").then(|| "http://127.0.0.1:8080/v1".to_string())
    })
    .unwrap_err();
    assert!(err.to_string().contains("VOUCH_MODEL is not set"), "{err}");

    let config = OpenAiConfig::from_lookup(|k| match k {
        "VOUCH_MODEL_URL" => Some("http://127.0.0.1:8080/v1".into()),
        "VOUCH_MODEL" => Some("qwen".into()),
        "VOUCH_API_KEY" => Some(String::new()),
        "VOUCH_MODEL_MAX_TOKENS" => Some("512".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(config.model, "qwen");
    assert_eq!(config.api_key, None, "an empty key counts as unset");
    assert_eq!(config.max_tokens, Some(512));

    // The process environment itself: the only test in this binary that touches it.
    std::env::remove_var("VOUCH_MODEL_URL");
    let err = OpenAiConfig::from_env().unwrap_err();
    assert!(err.to_string().contains("VOUCH_MODEL_URL"), "{err}");
}
