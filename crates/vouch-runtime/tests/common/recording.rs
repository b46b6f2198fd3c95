#![allow(dead_code)] // each test file uses part of it
//! A recording OpenAI-compatible server on loopback: it answers `POST …/chat/completions`
//! from a queue of scripted replies (status, headers, body) and records every request body,
//! so a test reads from the wire what the model was told. When the queue is empty it answers
//! a final text.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Reply {
    /// A 200 whose message calls `name` with `args`.
    pub fn call(name: &str, args: Value) -> Reply {
        Reply::ok(
            json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{name}_{}", args.to_string().len()), "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]}),
        )
    }
    /// A 200 whose message is final text.
    pub fn text(t: &str) -> Reply {
        Reply::ok(json!({"role": "assistant", "content": t}))
    }
    fn ok(message: Value) -> Reply {
        Reply {
            status: 200,
            headers: vec![],
            body: json!({"id": "r", "object": "chat.completion", "choices": [{"index": 0,
                "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
        }
    }
    pub fn status(status: u16, headers: &[(&str, &str)]) -> Reply {
        Reply {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: json!({"error": {"message": format!("scripted {status}")}}),
        }
    }
}

/// A request as the server saw it: when, its `Authorization` header, its JSON body.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub authorization: Option<String>,
    pub body: Value,
}

pub struct Recording {
    pub base_url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    replies: Arc<Mutex<std::collections::VecDeque<Reply>>>,
}

impl Recording {
    pub fn start(replies: Vec<Reply>) -> Recording {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(replies.into_iter().collect()));
        let (s, r) = (seen.clone(), Arc::clone(&replies));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &s, &r);
            }
        });
        Recording {
            base_url,
            seen,
            replies,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.replies.lock().expect("replies").push_back(reply);
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

fn serve(
    stream: std::net::TcpStream,
    seen: &Mutex<Vec<Seen>>,
    replies: &Mutex<std::collections::VecDeque<Reply>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let (mut len, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    seen.lock().expect("seen").push(Seen {
        at: Instant::now(),
        authorization,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = replies
        .lock()
        .expect("replies")
        .pop_front()
        .unwrap_or_else(|| Reply::text("Done."));
    let text = reply.body.to_string();
    let mut out = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        text.len()
    );
    for (k, v) in &reply.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&text);
    let mut stream = stream;
    stream.write_all(out.as_bytes())?;
    stream.flush()
}
