#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The OpenAI-compatible client against a server vouch did not write: LiteLLM's proxy, from
//! PyPI, installed into `target/venv` by scripts/test.sh, answering with its mock responses.
//! The proxy is started on a free loopback port and killed at the end.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vouch_adapters::openai::{OpenAiConfig, OpenAiModel};
use vouch_runtime::model::{ChatMessage, Model, ModelError};

/// Bound on the proxy's start-up (it imports a lot); a readiness wait, not an assertion.
const STARTUP_WAIT_S: u64 = 120;

fn litellm() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/venv/bin/litellm");
    assert!(
        bin.exists(),
        "{} is missing; run scripts/test.sh, which creates target/venv with LiteLLM's proxy",
        bin.display()
    );
    bin
}

struct Proxy {
    child: Child,
    base_url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(master_key: &str) -> Proxy {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: test-model\n    litellm_params:\n      model: openai/test-model\n      api_key: unused\n      mock_response: \"Hi from the proxy.\"\n  - model_name: tool-model\n    litellm_params:\n      model: openai/tool-model\n      api_key: unused\n      mock_response: \"\"\n      mock_tool_calls:\n        - id: call_1\n          type: function\n          function:\n            name: declare\n            arguments: '{{\"deliveries\": [], \"forbid\": null, \"order\": null}}'\ngeneral_settings:\n  master_key: {master_key}\n"
        ),
    )
    .unwrap();
    let child = Command::new(litellm())
        .arg("--config")
        .arg(&config)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("LITELLM_TELEMETRY", "False")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the LiteLLM proxy");
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let proxy = Proxy {
        child,
        base_url,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(STARTUP_WAIT_S);
    let health = format!("http://127.0.0.1:{port}/health/liveliness");
    while ureq::get(&health).call().is_err() {
        assert!(Instant::now() < deadline, "the proxy did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    proxy
}

fn hello() -> Vec<ChatMessage> {
    vec![ChatMessage::User {
        content: "Say hi.".into(),
    }]
}

#[test]
fn a_turn_against_litellms_proxy_completes_and_an_unknown_model_is_refused() {
    let proxy = start("sk-vouch-test");
    let mut config = OpenAiConfig::new(&proxy.base_url, "test-model");
    config.api_key = Some("sk-vouch-test".into());
    config.max_retries = 0;
    let mut m = OpenAiModel::new(config.clone());
    let turn = m.next_turn(&hello(), &[]).expect("a completion");
    assert_eq!(turn.content.as_deref(), Some("Hi from the proxy."));
    assert!(turn.tool_calls.is_empty());

    // A tool call comes back with its arguments, and the tool's answer goes back in.
    let mut tc = config.clone();
    tc.model = "tool-model".into();
    let mut m = OpenAiModel::new(tc);
    // Every host tool as the loop sends it (strict mode, each kind's payload schema): the
    // proxy takes them all.
    let spec = |name: &str, parameters| vouch_runtime::model::ToolSpec {
        name: name.into(),
        description: format!("The `{name}` tool."),
        parameters,
    };
    let mut tools = vec![
        spec("declare", vouch_runtime::schemas::declare()),
        spec("clarify", vouch_runtime::schemas::clarify()),
    ];
    for v in vouch_core::Verb::ALL {
        tools.push(spec(v.as_str(), vouch_runtime::schemas::perform()));
    }
    let turn = m.next_turn(&hello(), &tools).expect("a tool call");
    assert_eq!(turn.tool_calls.len(), 1, "{turn:?}");
    assert_eq!(turn.tool_calls[0].name, "declare");
    let args: serde_json::Value = serde_json::from_str(&turn.tool_calls[0].arguments).unwrap();
    let manifest: vouch_core::Manifest =
        serde_json::from_value(vouch_runtime::schemas::without_nulls(&args)).unwrap();
    assert!(manifest.deliveries.is_empty());
    let mut msgs = hello();
    msgs.push(ChatMessage::Assistant {
        content: None,
        tool_calls: turn.tool_calls.clone(),
    });
    msgs.push(ChatMessage::Tool {
        tool_call_id: turn.tool_calls[0].id.clone(),
        content: "manifest accepted".into(),
    });
    m.next_turn(&msgs, &tools)
        .expect("the proxy takes the tool result");

    // A model the proxy does not serve is refused, typed, and not retried.
    config.model = "no-such-model".into();
    let mut m = OpenAiModel::new(config);
    let err = m.next_turn(&hello(), &[]).unwrap_err();
    assert!(
        matches!(
            &err,
            ModelError::BadRequest { message, .. } | ModelError::NotFound { message, .. }
                if message.contains("no-such-model")
        ),
        "{err:?}"
    );
}
