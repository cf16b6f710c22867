//! `belfry-model-server`: the scripted model the live harness tests run real harnesses
//! against, offline, on 127.0.0.1.
//!
//! ```text
//! belfry-model-server --script SCRIPT.json --log REQUESTS.ndjson [--port N] [--host ADDR]
//! ```
//!
//! It speaks the four wire APIs the harnesses use (`wire.rs`): Anthropic Messages
//! (`POST …/messages`), OpenAI Responses (`POST …/responses`), Chat Completions
//! (`POST …/chat/completions`) and Gemini (`POST …/models/{m}:streamGenerateContent?alt=sse`,
//! `:generateContent`), each streamed as SSE when asked. It answers a model turn from the
//! script (`script.rs`), a request with a tool's result with the scripted `then`, and whatever
//! else a harness asks (title generation and other tool-less requests, token counts, model
//! lists) plausibly, so a harness never stalls on a side request. Every request is logged as one
//! NDJSON line before it is answered (`seq`, `ms`, `unix_ms`, `method`, `path`, `api`, `kind`,
//! `turn`, `last_user_text`, `body`), so a test asserts what the model saw. A streamed reply
//! the harness stopped reading before its end (the harness aborted the turn) adds one line of
//! kind `stream-cut` naming the request's `seq` (`of_seq`) and how many of its pieces were
//! written (`pieces_written` of `pieces`): the A/B evaluation counts aborted turns from it.
//!
//! When it listens it prints its port on a line of stdout. Every read has a deadline
//! (`http::READ_DEADLINE`); a connection is served on a thread of its own.

mod http;
mod script;
mod wire;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http::{Connection, Request};
use crate::script::{Reply, Script};
use crate::wire::{Api, Ask, Part};

/// The state every connection shares.
struct Shared {
    script: Script,
    /// The reply to the next request that carries a tool's result: the `then` of the last
    /// tool call made.
    pending_then: Option<Reply>,
    seq: u64,
    next_id: u64,
    log: File,
    started: Instant,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A connection thread that panicked mid-request leaves valid state: every field is
    // updated whole.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Args {
    script: String,
    log: String,
    host: String,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut script = None;
    let mut log = None;
    let mut host = "127.0.0.1".to_string();
    let mut port = 0u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--script" => script = Some(value("--script")?),
            "--log" => log = Some(value("--log")?),
            "--host" => host = value("--host")?,
            "--port" => {
                let text = value("--port")?;
                port = text
                    .parse()
                    .map_err(|_| format!("--port {text:?} is not a port number"))?;
            }
            "-h" | "--help" => {
                return Err(
                    "usage: belfry-model-server --script FILE --log FILE [--port N] [--host ADDR]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    Ok(Args {
        script: script.ok_or("--script FILE is required")?,
        log: log.ok_or("--log FILE is required")?,
        host,
        port,
    })
}

fn main() {
    if let Err(err) = run() {
        eprintln!("belfry-model-server: {err}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let text = std::fs::read_to_string(&args.script)
        .map_err(|err| format!("cannot read the script {}: {err}", args.script))?;
    let script = Script::parse(&text).map_err(|err| format!("{}: {err}", args.script))?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .map_err(|err| format!("cannot open the log {}: {err}", args.log))?;
    let listener = TcpListener::bind((args.host.as_str(), args.port))
        .map_err(|err| format!("cannot listen on {}:{}: {err}", args.host, args.port))?;
    let port = listener
        .local_addr()
        .map_err(|err| format!("no local address: {err}"))?
        .port();
    let shared = Arc::new(Mutex::new(Shared {
        script,
        pending_then: None,
        seq: 0,
        next_id: 1,
        log,
        started: Instant::now(),
    }));
    println!("{port}");
    io::stdout()
        .flush()
        .map_err(|err| format!("cannot print the port: {err}"))?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            if let Ok(mut connection) = Connection::new(stream) {
                serve(&mut connection, &shared);
            }
        });
    }
    Ok(())
}

/// Serves requests on one connection until the peer closes it, goes silent past the deadline,
/// or sends something that is not HTTP.
fn serve(connection: &mut Connection, shared: &Mutex<Shared>) {
    while let Ok(Some(request)) = connection.read_request() {
        if answer(connection, shared, &request).is_err() {
            return;
        }
    }
}

/// What a request is, from its method and path.
enum Route {
    Model {
        api: Api,
        model: Option<String>,
        gemini_stream: bool,
    },
    CountTokens {
        api: Api,
    },
    Models,
    Health,
    Unknown,
}

fn route(request: &Request) -> Route {
    let path = request.path.trim_end_matches('/');
    if request.method == "GET" {
        if path.ends_with("/models") || path.contains("/models/") {
            return Route::Models;
        }
        return if path.is_empty() || path == "/health" {
            Route::Health
        } else {
            Route::Unknown
        };
    }
    if let Some((prefix, action)) = path.rsplit_once(':') {
        let model = prefix.rsplit('/').next().map(String::from);
        return match action {
            "streamGenerateContent" | "generateContent" => Route::Model {
                api: Api::Gemini,
                model,
                gemini_stream: action == "streamGenerateContent",
            },
            "countTokens" => Route::CountTokens { api: Api::Gemini },
            _ => Route::Unknown,
        };
    }
    let model = |api| Route::Model {
        api,
        model: None,
        gemini_stream: false,
    };
    if path.ends_with("/messages/count_tokens") {
        Route::CountTokens {
            api: Api::Anthropic,
        }
    } else if path.ends_with("/messages") {
        model(Api::Anthropic)
    } else if path.ends_with("/responses") {
        model(Api::Responses)
    } else if path.ends_with("/chat/completions") {
        model(Api::Chat)
    } else {
        Route::Unknown
    }
}

fn answer(
    connection: &mut Connection,
    shared: &Mutex<Shared>,
    request: &Request,
) -> io::Result<()> {
    let body_text = String::from_utf8_lossy(&request.body).into_owned();
    let body: Value = if body_text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body_text).unwrap_or(Value::String(body_text.clone()))
    };
    match route(request) {
        Route::Model {
            api,
            model,
            gemini_stream,
        } => {
            if !body.is_object() {
                log(shared, request, Some(api), "bad-body", None, "", &body);
                let error = wire::error_body(api, 400, "the request body is not a JSON object");
                return connection.respond(400, "application/json", error.to_string().as_bytes());
            }
            let ask = wire::read_ask(api, &body, model.as_deref(), gemini_stream);
            model_turn(connection, shared, request, api, &ask, &body)
        }
        Route::CountTokens { api } => {
            log(shared, request, Some(api), "count-tokens", None, "", &body);
            let tokens = (request.body.len() / 4).max(1);
            let reply = match api {
                Api::Gemini => json!({"totalTokens": tokens}),
                _ => json!({"input_tokens": tokens}),
            };
            connection.respond(200, "application/json", reply.to_string().as_bytes())
        }
        Route::Models => {
            log(shared, request, None, "models", None, "", &body);
            // One list that reads as an OpenAI, an Anthropic and a Gemini model list.
            let reply = json!({"object": "list", "has_more": false,
                "data": [{"id": "scripted-model", "object": "model", "type": "model",
                    "display_name": "Scripted model", "created": 0, "owned_by": "belfry"}],
                "models": [{"name": "models/scripted-model", "displayName": "Scripted model",
                    "supportedGenerationMethods": ["generateContent", "streamGenerateContent"]}]});
            connection.respond(200, "application/json", reply.to_string().as_bytes())
        }
        Route::Health => {
            log(shared, request, None, "health", None, "", &body);
            connection.respond(200, "application/json", b"{\"ok\":true}")
        }
        Route::Unknown => {
            log(shared, request, None, "unknown", None, "", &body);
            let reply = json!({"error": {"message": format!("no such endpoint: {} {}", request.method, request.path)}});
            connection.respond(404, "application/json", reply.to_string().as_bytes())
        }
    }
}

/// Answers one model request: a scripted turn, a tool result's follow-up, or a side request.
fn model_turn(
    connection: &mut Connection,
    shared: &Mutex<Shared>,
    request: &Request,
    api: Api,
    ask: &Ask,
    body: &Value,
) -> io::Result<()> {
    let (kind, reply, turn, id, call_id) = {
        let mut state = lock(shared);
        let (kind, reply, turn) = if ask.tools.is_empty() {
            // A request that offers no tools is a harness's side request (a title, a topic
            // check, a routing decision), never the agent's turn: answer it plausibly, and in
            // the schema it asks for, if any.
            let text = match &ask.json_schema {
                Some(schema) => wire::instance(schema).to_string(),
                None => "Live test".to_string(),
            };
            let reply = Reply {
                text: Some(text),
                ..Reply::default()
            };
            ("auxiliary", reply, None)
        } else if ask.tool_result {
            let reply = state.pending_then.clone().unwrap_or(Reply {
                text: Some("Done.".into()),
                ..Reply::default()
            });
            ("tool-result", reply, None)
        } else {
            let choice = state.script.choose(&ask.last_user_text);
            ("turn", choice.reply, choice.turn)
        };
        if reply.tool.is_some() {
            state.pending_then = reply.then.as_deref().cloned();
        }
        let id = state.next_id;
        state.next_id += 2;
        (
            kind,
            reply,
            turn,
            format!("live_{id}"),
            format!("call_live_{}", id + 1),
        )
    };
    let seq = log(
        shared,
        request,
        Some(api),
        kind,
        turn,
        &ask.last_user_text,
        body,
    );
    if let Some(error) = &reply.error {
        let now = unix_ms() / 1000;
        let resets_at = error.reset.map(|reset| reset.at(now));
        let (headers, body) = wire::error_reply(api, error.status, &error.message, resets_at, now);
        return connection.respond_with(
            error.status,
            "application/json",
            &headers,
            body.to_string().as_bytes(),
        );
    }
    let usage = reply.usage.unwrap_or_default();
    let now = unix_ms() / 1000;
    let window = reply
        .window
        .map(|window| {
            wire::window_headers(
                api,
                window.used_percent,
                window.window_minutes,
                window.reset.at(now),
                now,
            )
        })
        .unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(text) = &reply.text {
        parts.push(Part::Text(text.clone()));
    }
    if let Some(tool) = &reply.tool {
        let input = tool.input.clone().unwrap_or(json!({}));
        let call = match (&tool.command, &tool.name) {
            (Some(command), _) => Ok(wire::shell_call(&ask.tools, command)),
            (None, Some(name)) => script::fill_results(&input, ask.tool_output.as_ref())
                .map(|input| Some((name.clone(), input))),
            (None, None) => Ok(None),
        };
        match call {
            // A placeholder that found nothing is said in the answer, where the test sees it.
            Err(err) => parts.push(Part::Text(format!("(the scripted tool input: {err})"))),
            Ok(Some((name, arguments))) => parts.push(Part::Call {
                id: call_id,
                name,
                arguments,
                // A shell command goes to a top-level tool; only a named tool has a group.
                namespace: tool
                    .command
                    .is_none()
                    .then(|| tool.namespace.clone())
                    .flatten(),
            }),
            Ok(None) => parts.push(Part::Text(
                "(the scripted tool call found no shell tool in the request)".into(),
            )),
        }
    }
    if !ask.stream {
        let whole = wire::whole(api, &ask.model, &id, &parts, usage);
        return connection.respond_with(
            200,
            "application/json",
            &window,
            whole.to_string().as_bytes(),
        );
    }
    let paced = reply.delay_ms > 0;
    connection.start_stream(&window)?;
    let pieces = wire::stream(api, &ask.model, &id, &parts, paced, usage);
    let total = pieces.len();
    for (written, piece) in pieces.into_iter().enumerate() {
        if piece.paced {
            std::thread::sleep(Duration::from_millis(reply.delay_ms));
        }
        if let Err(err) = connection.chunk(&piece.bytes) {
            log_cut(shared, seq, written, total, &err);
            return Err(err);
        }
    }
    connection.end_chunks().inspect_err(|err| {
        log_cut(shared, seq, total, total, err);
    })
}

/// Logs that the harness stopped reading the streamed reply to request `of_seq` after
/// `written` of its `total` pieces: it closed the connection mid-turn (an abort).
fn log_cut(shared: &Mutex<Shared>, of_seq: u64, written: usize, total: usize, err: &io::Error) {
    let mut state = lock(shared);
    state.seq += 1;
    let line = json!({
        "seq": state.seq,
        "ms": state.started.elapsed().as_millis() as u64,
        "unix_ms": unix_ms(),
        "kind": "stream-cut",
        "of_seq": of_seq,
        "pieces_written": written,
        "pieces": total,
        "error": err.to_string(),
    });
    append_line(&mut state.log, &line);
}

/// Wall-clock milliseconds since the Unix epoch: lets a driver relate a logged request to its
/// own clock (the delivery latency of a notice).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_millis() as u64)
        .unwrap_or(0)
}

/// Appends one request to the log as an NDJSON line; returns its `seq`.
fn log(
    shared: &Mutex<Shared>,
    request: &Request,
    api: Option<Api>,
    kind: &str,
    turn: Option<usize>,
    last_user_text: &str,
    body: &Value,
) -> u64 {
    let mut state = lock(shared);
    state.seq += 1;
    let line = json!({
        "seq": state.seq,
        "ms": state.started.elapsed().as_millis() as u64,
        "unix_ms": unix_ms(),
        "method": request.method,
        "path": request.path,
        "query": request.query,
        "api": api.map(Api::name),
        "kind": kind,
        "turn": turn,
        "last_user_text": last_user_text,
        "content_encoding": request.header("content-encoding"),
        "body": body,
    });
    append_line(&mut state.log, &line);
    state.seq
}

/// Appends `line` and its newline to the log in one write. Formatted straight into the file, a
/// JSON value goes out in many small writes, and a reader of the log (a test waiting for a
/// line) could read half a line. A write that fails cannot be reported to anyone but stderr;
/// the reply still goes out.
fn append_line(log: &mut impl Write, line: &Value) {
    let mut text = line.to_string();
    text.push('\n');
    if let Err(err) = log.write_all(text.as_bytes()) {
        eprintln!("belfry-model-server: cannot write the request log: {err}");
    }
}
