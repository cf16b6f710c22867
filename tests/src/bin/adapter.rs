//! `belfry-test-adapter FIXTURE.jsonl`: a DING activity adapter for tests. It replays a
//! fixture of protocol v1 events (with placeholders filled from the pane) and directives, so a
//! test can drive the rich delivery policy through every case with a real adapter process.
//!
//! Placeholders in string values: `$SESSION`, `$INCARNATION`, `$GENERATION`; `"$SEQ"` is the
//! next sequence number, `"$REVISION"` the pane's revision now, `"$CAPTURED"` the revision
//! taken by the last `capture_revision`; `["$UNREAD"]` every unread message name and
//! `"$FIRST_UNREAD"` the oldest. Directives: `{"sleep_ms":N}`, `{"wait_for_unread":true}`,
//! `{"wait_for_file":"NAME"}` (under `$BELFRY_STATE`), `{"once":true}` (on a restart of the
//! adapter, stop here and stay silent), `{"capture_revision":true}`, `{"pane":{…request…}}`,
//! `{"exit":N}`, `{"hang":true}`, `{"repeat":N,"event":{…}}` (the event N times, each filled
//! afresh), `{"on_rerun_skip_to":"MARK"}` (in a later process of the adapter for the same pane,
//! skip to the line `{"mark":"MARK"}`; the first process notes that it ran and goes on),
//! `{"until_file":"NAME","every_ms":N,"event":{…}}` (the event every N ms until `NAME` exists
//! under `$BELFRY_STATE`, for up to 30 s).
//! A line that is not JSON is written as it is.
//! After the last line the adapter stays silent with its output open.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn pane_request(request: Value) -> Value {
    let socket = env("BELFRY_PANE_SOCKET");
    let Ok(stream) = UnixStream::connect(&socket) else {
        return Value::Null;
    };
    let mut writer = stream.try_clone().expect("clone");
    let _ = writer.write_all(format!("{request}\n").as_bytes());
    let mut line = String::new();
    let _ = BufReader::new(stream).read_line(&mut line);
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

fn inbox_new() -> PathBuf {
    PathBuf::from(env("BELFRY_STATE"))
        .join("inbox")
        .join(env("BELFRY_SESSION"))
        .join("new")
}

fn unread() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(inbox_new())
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(".md"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

struct Filler {
    seq: u64,
    captured: u64,
}

impl Filler {
    fn fill(&mut self, value: &Value) -> Value {
        match value {
            Value::String(s) => match s.as_str() {
                "$SEQ" => {
                    self.seq += 1;
                    json!(self.seq)
                }
                "$REVISION" => pane_request(json!({"id":0,"op":"info"}))["revision"].clone(),
                "$CAPTURED" => json!(self.captured),
                "$FIRST_UNREAD" => json!(unread().first().cloned().unwrap_or_default()),
                _ => json!(s
                    .replace("$SESSION", &env("BELFRY_SESSION"))
                    .replace("$INCARNATION", &env("BELFRY_INCARNATION"))
                    .replace("$GENERATION", &env("BELFRY_GENERATION"))),
            },
            Value::Array(items) if items.len() == 1 && items[0] == "$UNREAD" => json!(unread()),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill(v)).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), self.fill(v))).collect())
            }
            other => other.clone(),
        }
    }
}

fn main() {
    let fixture = std::env::args()
        .nth(1)
        .expect("usage: belfry-test-adapter FIXTURE.jsonl");
    let text = std::fs::read_to_string(&fixture).expect("read fixture");
    let mut out = std::io::stdout();
    let mut filler = Filler {
        seq: 0,
        captured: 0,
    };
    let mut skip_to: Option<String> = None;
    for line in text.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(mark) = &skip_to {
            let value = serde_json::from_str::<Value>(line).unwrap_or(Value::Null);
            if value.get("mark").and_then(Value::as_str) == Some(mark.as_str()) {
                skip_to = None;
            }
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
            continue;
        };
        if let Some(ms) = value.get("sleep_ms").and_then(Value::as_u64) {
            std::thread::sleep(Duration::from_millis(ms));
        } else if value.get("wait_for_unread").is_some() {
            let start = Instant::now();
            while unread().is_empty() && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
        } else if let Some(name) = value.get("wait_for_file").and_then(Value::as_str) {
            let path = PathBuf::from(env("BELFRY_STATE")).join(name);
            let start = Instant::now();
            while !path.exists() && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
        } else if value.get("once").is_some() {
            let marker = PathBuf::from(env("BELFRY_STATE"))
                .join(format!("adapter-{}.ran", env("BELFRY_SESSION")));
            if marker.exists() {
                hang();
            }
            let _ = std::fs::write(&marker, b"1");
        } else if value.get("capture_revision").is_some() {
            filler.captured = pane_request(json!({"id":0,"op":"info"}))["revision"]
                .as_u64()
                .unwrap_or(0);
        } else if let Some(request) = value.get("pane") {
            pane_request(request.clone());
        } else if let Some(code) = value.get("exit").and_then(Value::as_i64) {
            std::process::exit(code as i32);
        } else if value.get("hang").is_some() {
            hang();
        } else if let Some(mark) = value.get("on_rerun_skip_to").and_then(Value::as_str) {
            let marker = PathBuf::from(env("BELFRY_STATE"))
                .join(format!("adapter-{}.reran", env("BELFRY_SESSION")));
            if marker.exists() {
                skip_to = Some(mark.to_string());
            } else {
                let _ = std::fs::write(&marker, b"1");
            }
        } else if let (Some(name), Some(event)) = (
            value.get("until_file").and_then(Value::as_str),
            value.get("event"),
        ) {
            let every = Duration::from_millis(value["every_ms"].as_u64().unwrap_or(300));
            let path = PathBuf::from(env("BELFRY_STATE")).join(name);
            let start = Instant::now();
            while !path.exists() && start.elapsed() < Duration::from_secs(30) {
                let event = filler.fill(event);
                let _ = writeln!(out, "{event}");
                let _ = out.flush();
                std::thread::sleep(every);
            }
        } else if value.get("mark").is_some() {
        } else if let (Some(times), Some(event)) = (
            value.get("repeat").and_then(Value::as_u64),
            value.get("event"),
        ) {
            for _ in 0..times {
                let event = filler.fill(event);
                let _ = writeln!(out, "{event}");
            }
            let _ = out.flush();
        } else {
            let event = filler.fill(&value);
            let _ = writeln!(out, "{event}");
            let _ = out.flush();
        }
    }
    hang();
}
