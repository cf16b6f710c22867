//! The model server over real TCP: each API's streamed reply as a harness's HTTP client reads
//! it (chunked transfer, SSE events, two requests on one kept-alive connection), a tool call
//! followed by the reply to its result, the request log, and a bad script refused by name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

struct Server {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(script: &Value) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).expect("script");
        let log = dir.path().join("log.ndjson");
        let mut child = Command::new(env!("CARGO_BIN_EXE_belfry-model-server"))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the port line");
        let port = line.trim().parse().expect("a port number");
        Server {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    fn connect(&self) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        }
    }

    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON log line"))
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Sends one POST and returns (status, body), reading a chunked or sized body.
    fn post(&mut self, path: &str, body: &Value) -> (u16, String) {
        let (status, _, body) = self.exchange(path, body);
        (status, body)
    }

    /// Sends one POST and returns (status, headers lowercased, body).
    fn exchange(&mut self, path: &str, body: &Value) -> (u16, Vec<(String, String)>, String) {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.writer.write_all(request.as_bytes()).expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .expect("status")
            .parse()
            .expect("code");
        let mut chunked = false;
        let mut length = 0usize;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            let header = line.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(": ") {
                headers.push((name.to_string(), value.to_string()));
            }
            if header == "transfer-encoding: chunked" {
                chunked = true;
            }
            if let Some(value) = header.strip_prefix("content-length: ") {
                length = value.parse().expect("length");
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).expect("chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("hex size");
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).expect("chunk");
                if size == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..size]);
            }
        } else {
            out.resize(length, 0);
            self.reader.read_exact(&mut out).expect("body");
        }
        (status, headers, String::from_utf8(out).expect("UTF-8 body"))
    }
}

/// The `data:` payloads of an SSE body, parsed (the `[DONE]` line left out).
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).expect("JSON event"))
        .collect()
}

const BASH: &str = r#"{"name":"Bash","input_schema":{"properties":{"command":{"type":"string"}}}}"#;

#[test]
fn each_api_streams_the_scripted_text() {
    let server = Server::start(&json!({"turns": [{"match": "hello", "text": "HELLO-BACK"}]}));
    let mut client = server.connect();
    let bash: Value = serde_json::from_str(BASH).unwrap();
    let user = json!([{"role": "user", "content": "say hello"}]);

    let (status, body) = client.post(
        "/v1/messages?beta=true",
        &json!({"model": "m", "stream": true, "tools": [bash], "messages": user}),
    );
    assert_eq!(status, 200);
    let kinds: Vec<String> = events(&body)
        .iter()
        .map(|event| event["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(body.contains("HELLO-BACK"));

    // The same connection, kept alive, for the next API.
    let (status, body) = client.post(
        "/v1/responses",
        &json!({"model": "m", "stream": true,
            "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
            "input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "hello"}]}]}),
    );
    assert_eq!(status, 200);
    let last = events(&body).pop().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(
        last["response"]["output"][0]["content"][0]["text"],
        "HELLO-BACK"
    );

    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true,
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
            "messages": user}),
    );
    assert!(body.trim_end().ends_with("data: [DONE]"));
    let text: String = events(&body)
        .iter()
        .filter_map(|event| event["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "HELLO-BACK");

    let (_, body) = client.post(
        "/v1beta/models/g-model:streamGenerateContent?alt=sse",
        &json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}),
    );
    let all = events(&body);
    assert_eq!(
        all[0]["candidates"][0]["content"]["parts"][0]["text"],
        "HELLO-BACK"
    );
    assert_eq!(all.last().unwrap()["candidates"][0]["finishReason"], "STOP");

    let log = server.log();
    assert_eq!(log.len(), 4, "one log line per request: {log:?}");
    assert!(log
        .iter()
        .all(|line| line["kind"] == "turn" && line["turn"] == 0));
    assert_eq!(log[0]["query"], "beta=true");
}

#[test]
fn a_tool_call_then_the_reply_to_its_result() {
    let server = Server::start(&json!({"turns": [{"match": "run it",
        "tool": {"command": "echo made > file"}, "then": {"text": "RAN-IT"}}]}));
    let mut client = server.connect();
    let tools = json!([{"type": "function", "function": {"name": "bash",
        "parameters": {"properties": {"command": {"type": "string"},
            "description": {"type": "string"}}, "required": ["command", "description"]}}}]);
    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true, "tools": tools,
            "messages": [{"role": "user", "content": "please run it"}]}),
    );
    let call = events(&body)
        .into_iter()
        .find_map(|event| {
            event["choices"][0]["delta"]["tool_calls"][0]
                .as_object()
                .cloned()
        })
        .expect("a tool call");
    assert_eq!(call["function"]["name"], "bash");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({"command": "echo made > file", "description": "Scripted command"})
    );
    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": false, "tools": tools, "messages": [
            {"role": "user", "content": "please run it"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "TOOL-OUTPUT"}]}),
    );
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "RAN-IT");
    let log = server.log();
    assert_eq!(log[1]["kind"], "tool-result");
    assert!(log[1]["body"].to_string().contains("TOOL-OUTPUT"));
}

/// A Chat request whose `tool` message is followed by a user message (text a harness keeps
/// beside the tool's result: Qwen Code 0.24.4's prompt-submit hook context) still carries the
/// tool's result: it gets the scripted `then`, not the fallback.
#[test]
fn a_chat_tool_result_followed_by_user_text_gets_the_then_reply() {
    let server = Server::start(&json!({"turns": [{"match": "run it",
        "tool": {"command": "true"}, "then": {"text": "RAN-IT"}}],
        "fallback": {"text": "FALLBACK"}}));
    let mut client = server.connect();
    let tools = json!([{"type": "function", "function": {"name": "run_shell_command",
        "parameters": {"properties": {"command": {"type": "string"}}, "required": ["command"]}}}]);
    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": false, "tools": tools,
            "messages": [{"role": "user", "content": "please run it"}]}),
    );
    let reply: Value = serde_json::from_str(&body).unwrap();
    let call = reply["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "run_shell_command", "{body}");
    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": false, "tools": tools, "messages": [
            {"role": "user", "content": "please run it"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": [{"type": "text", "text": "TOOL-OUTPUT"}]},
            {"role": "user", "content": [{"type": "text", "text": "<ctx>NOTE</ctx>"}]}]}),
    );
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"], "RAN-IT",
        "{body}"
    );
    let log = server.log();
    assert_eq!(log[1]["kind"], "tool-result");
    assert_eq!(log[1]["last_user_text"], "<ctx>NOTE</ctx>");
    // A new prompt after the model answered the tool's result is a turn again.
    let (_, body) = client.post(
        "/v1/chat/completions",
        &json!({"model": "m", "stream": false, "tools": tools, "messages": [
            {"role": "user", "content": "please run it"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "TOOL-OUTPUT"},
            {"role": "assistant", "content": "RAN-IT"},
            {"role": "user", "content": "something else"}]}),
    );
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"], "FALLBACK",
        "{body}"
    );
}

#[test]
fn side_requests_get_plausible_answers() {
    let server = Server::start(&json!({"turns": []}));
    let mut client = server.connect();
    // A title request: no tools, a JSON schema for the answer.
    let (status, body) = client.post(
        "/v1/responses",
        &json!({"model": "m", "input": "title this", "text": {"format": {"type": "json_schema",
            "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}),
    );
    assert_eq!(status, 200);
    let reply: Value = serde_json::from_str(&body).unwrap();
    let text = reply["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"title": "Live test"})
    );
    let (status, body) = client.post("/v1/messages/count_tokens", &json!({"messages": []}));
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<Value>(&body).unwrap()["input_tokens"].is_u64());
    let (status, _) = client.post("/no/such/endpoint", &json!({}));
    assert_eq!(status, 404);
    let kinds: Vec<Value> = server
        .log()
        .iter()
        .map(|line| line["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        [json!("auxiliary"), json!("count-tokens"), json!("unknown")]
    );
}

#[test]
fn a_bad_script_is_refused_naming_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"match":"a","text":"ok"},{"match":"b"}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_belfry-model-server"))
        .arg("--script")
        .arg(&script)
        .arg("--log")
        .arg(dir.path().join("log"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.json: turns[1] has none of `text`, `tool` or `error`"),
        "{stderr}"
    );
}

#[test]
fn a_reply_the_client_stops_reading_is_logged_as_cut_with_what_was_written() {
    let words: Vec<String> = (0..40).map(|n| format!("w{n}")).collect();
    let server = Server::start(
        &json!({"turns": [{"match": "stream", "text": words.join(" "),
        "delay_ms": 50}]}),
    );
    let tools = json!([{"type": "function", "function": {"name": "bash",
        "parameters": {"properties": {"command": {"type": "string"}}}}}]);
    let body = json!({"model": "m", "stream": true, "tools": tools,
        "messages": [{"role": "user", "content": "please stream"}]})
    .to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    // Read the start of the reply, then hang up mid-answer, as a harness aborting its turn.
    let mut first = [0u8; 64];
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = stream.read(&mut first).expect("the reply starts");
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let cut = loop {
        if let Some(cut) = server.log().into_iter().find(|l| l["kind"] == "stream-cut") {
            break cut;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no stream-cut line within 10 s: {:?}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = server.log();
    assert_eq!(cut["of_seq"], log[0]["seq"], "{cut}");
    let (written, total) = (
        cut["pieces_written"].as_u64().unwrap(),
        cut["pieces"].as_u64().unwrap(),
    );
    assert!(written < total, "cut mid-answer: {cut}");
    assert!(log[0]["unix_ms"].as_u64().unwrap() > 1_700_000_000_000);
}

/// The four APIs' requests for one user prompt, each offering a shell tool, streamed.
fn prompts(text: &str) -> [(&'static str, Value); 4] {
    let user = json!([{"role": "user", "content": text}]);
    let bash: Value = serde_json::from_str(BASH).unwrap();
    [
        (
            "/v1/messages?beta=true",
            json!({"model": "m", "stream": true, "tools": [bash], "messages": user}),
        ),
        (
            "/v1/responses",
            json!({"model": "m", "stream": true,
                "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
                "input": [{"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "m", "stream": true,
                "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
                "messages": user}),
        ),
        (
            "/v1beta/models/g-model:streamGenerateContent?alt=sse",
            json!({"contents": [{"role": "user", "parts": [{"text": text}]}],
                "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}),
        ),
    ]
}

#[test]
fn each_api_reports_the_scripted_usage_in_its_native_fields() {
    let server = Server::start(&json!({"turns": [{"match": "count", "text": "COUNTED",
        "usage": {"input": 1200, "output": 34, "cache_read": 5000, "cache_write": 700}}]}));
    let mut client = server.connect();
    let [anthropic, responses, chat, gemini] = prompts("count me");

    // Anthropic reports fresh input, cache reads and cache writes apart, in the message's
    // start and again, whole, in its closing delta.
    let (status, body) = client.post(anthropic.0, &anthropic.1);
    assert_eq!(status, 200);
    let all = events(&body);
    let expected = json!({"input_tokens": 1200, "output_tokens": 34,
        "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 700});
    assert_eq!(all[0]["message"]["usage"], expected);
    let delta = all.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(delta["usage"], expected);

    // The OpenAI and Gemini APIs report one prompt total with the cached part inside it.
    let (_, body) = client.post(responses.0, &responses.1);
    let usage = events(&body).pop().unwrap()["response"]["usage"].clone();
    assert_eq!(usage["input_tokens"], 6900);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 5000);
    assert_eq!(usage["output_tokens"], 34);
    assert_eq!(usage["total_tokens"], 6934);

    let (_, body) = client.post(chat.0, &chat.1);
    let usage = events(&body).pop().unwrap()["usage"].clone();
    assert_eq!(usage["prompt_tokens"], 6900);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 5000);
    assert_eq!(usage["completion_tokens"], 34);

    let (_, body) = client.post(gemini.0, &gemini.1);
    let usage = events(&body).pop().unwrap()["usageMetadata"].clone();
    assert_eq!(usage["promptTokenCount"], 6900);
    assert_eq!(usage["cachedContentTokenCount"], 5000);
    assert_eq!(usage["candidatesTokenCount"], 34);
    assert_eq!(usage["totalTokenCount"], 6934);

    // A whole (non-streamed) reply reports the same counts.
    let (_, body) = client.post(
        "/v1/messages",
        &json!({"model": "m", "tools": [serde_json::from_str::<Value>(BASH).unwrap()],
            "messages": [{"role": "user", "content": "count"}]}),
    );
    let whole: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(whole["usage"], expected);
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

#[test]
fn a_rate_limit_reply_carries_its_reset_time_where_each_api_reads_it() {
    let server = Server::start(&json!({"turns": [{"match": "limit", "error":
        {"status": 429, "message": "usage limit reached", "reset_after_s": 120}}]}));
    let mut client = server.connect();
    let [anthropic, responses, chat, gemini] = prompts("over the limit");
    let before = unix_now();

    let (status, headers, body) = client.exchange(anthropic.0, &anthropic.1);
    let after = unix_now();
    assert_eq!(status, 429);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(header(&headers, "retry-after"), Some("120"));
    assert_eq!(
        header(&headers, "anthropic-ratelimit-unified-status"),
        Some("rejected")
    );
    let reset: u64 = header(&headers, "anthropic-ratelimit-unified-reset")
        .expect("the reset header")
        .parse()
        .expect("seconds since the epoch");
    assert!(
        (before + 120..=after + 120).contains(&reset),
        "reset {reset} is 120 s after the reply ({before}..={after})"
    );

    let (status, headers, body) = client.exchange(responses.0, &responses.1);
    assert_eq!(status, 429);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "usage_limit_reached");
    let resets_at = body["error"]["resets_at"].as_u64().expect("resets_at");
    assert!((before + 120..=unix_now() + 120).contains(&resets_at));
    assert_eq!(
        header(&headers, "x-codex-primary-reset-at"),
        Some(resets_at.to_string().as_str())
    );
    assert_eq!(
        header(&headers, "x-codex-primary-used-percent"),
        Some("100")
    );

    let (status, headers, body) = client.exchange(chat.0, &chat.1);
    assert_eq!(status, 429);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_exceeded");
    assert_eq!(header(&headers, "x-ratelimit-reset-requests"), Some("120s"));

    let (status, _, body) = client.exchange(gemini.0, &gemini.1);
    assert_eq!(status, 429);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(body["error"]["details"][0]["retryDelay"], "120s");
}

#[test]
fn a_turn_scripted_to_fail_once_fails_then_answers_the_same_prompt_sent_again() {
    let server = Server::start(&json!({"turns": [
        {"match": "flaky", "times": 1, "error": {"status": 529, "message": "Overloaded"}},
        {"match": "flaky", "text": "RECOVERED"}]}));
    let mut client = server.connect();
    let [anthropic, _, _, gemini] = prompts("a flaky turn");
    let (status, body) = client.post(anthropic.0, &anthropic.1);
    assert_eq!(status, 529);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
    // The retry of the same prompt gets the next matching turn, and so does every later one.
    let (status, body) = client.post(anthropic.0, &anthropic.1);
    assert_eq!(status, 200);
    assert!(body.contains("RECOVERED"));
    let (status, body) = client.post(gemini.0, &gemini.1);
    assert_eq!(status, 200);
    assert!(body.contains("RECOVERED"));

    // A 500 in Gemini's dialect names its status as the API does.
    let server = Server::start(&json!({"turns": [{"match": "x", "error": {"status": 500}}]}));
    let (status, body) = server.connect().post(gemini.0, &prompts("x")[3].1);
    assert_eq!(status, 500);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["status"], "INTERNAL");
}

#[test]
fn a_successful_reply_reports_its_scripted_usage_window_in_headers() {
    let server = Server::start(&json!({"turns": [{"match": "fill", "text": "FILLING",
        "window": {"used_percent": 85, "window_minutes": 300, "reset_after_s": 600}}]}));
    let mut client = server.connect();
    let [anthropic, responses, chat, gemini] = prompts("fill it");
    let before = unix_now();

    let (status, headers, body) = client.exchange(responses.0, &responses.1);
    assert_eq!(status, 200);
    assert!(body.contains("FILLING"));
    assert_eq!(header(&headers, "x-codex-primary-used-percent"), Some("85"));
    assert_eq!(
        header(&headers, "x-codex-primary-window-minutes"),
        Some("300")
    );
    let reset: u64 = header(&headers, "x-codex-primary-reset-at")
        .expect("the reset header")
        .parse()
        .unwrap();
    assert!((before + 600..=unix_now() + 600).contains(&reset));

    let (_, headers, _) = client.exchange(anthropic.0, &anthropic.1);
    assert_eq!(
        header(&headers, "anthropic-ratelimit-unified-5h-utilization"),
        Some("0.85")
    );
    assert_eq!(
        header(&headers, "anthropic-ratelimit-unified-status"),
        Some("allowed")
    );
    let (_, headers, _) = client.exchange(chat.0, &chat.1);
    assert_eq!(
        header(&headers, "x-ratelimit-remaining-requests"),
        Some("15")
    );
    // Gemini's API reports no window on success.
    let (status, headers, _) = client.exchange(gemini.0, &gemini.1);
    assert_eq!(status, 200);
    assert!(!headers.iter().any(|(name, _)| name.contains("ratelimit")));
}
