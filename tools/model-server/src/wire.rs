//! The four wire APIs the harnesses speak: reading what a request asks (the last user message,
//! whether it carries a tool's result, the tools offered, a JSON schema the answer must meet)
//! and rendering a reply in that API's shape, streamed as server-sent events or whole.
//!
//! The shapes are those of the public API references: Anthropic Messages (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`), OpenAI Responses (`response.created`,
//! `response.output_item.*`, `response.output_text.delta`, `response.completed`), OpenAI Chat
//! Completions (`chat.completion.chunk` lines, then `[DONE]`) and Gemini
//! `streamGenerateContent?alt=sse` (one `GenerateContentResponse` per event).

use serde_json::{json, Map, Value};

/// Which API a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    Responses,
    Chat,
    Gemini,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic-messages",
            Api::Responses => "openai-responses",
            Api::Chat => "openai-chat",
            Api::Gemini => "gemini",
        }
    }
}

/// A tool the request offers the model.
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

/// What a model request asks, read from its body.
pub struct Ask {
    pub stream: bool,
    pub model: String,
    /// All the text of the last user message (system reminders and injected context included,
    /// since a harness puts those there too).
    pub last_user_text: String,
    /// True when the request carries a tool's result rather than a new prompt (for Chat: a
    /// `tool` message after the model's last message, with or without user text after it).
    pub tool_result: bool,
    /// The output of the tool call the last message answers (parsed as JSON when it is JSON
    /// text), for a scripted input that names part of it.
    pub tool_output: Option<Value>,
    pub tools: Vec<Tool>,
    /// A JSON schema the answer must follow (structured output), if the request names one.
    pub json_schema: Option<Value>,
}

/// One piece of a reply.
pub enum Part {
    Text(String),
    Call {
        id: String,
        name: String,
        arguments: Value,
        /// The tool group the tool belongs to, if any: only the Responses API has groups
        /// (its `namespace` tools), so only its `function_call` item carries it.
        namespace: Option<String>,
    },
}

/// One piece of a streamed reply; `paced` pieces are the ones a scripted delay goes before.
pub struct Piece {
    pub bytes: Vec<u8>,
    pub paced: bool,
}

/// Reads a request body of `api`; `gemini_stream` says the path asked for a stream.
pub fn read_ask(api: Api, body: &Value, model_from_path: Option<&str>, gemini_stream: bool) -> Ask {
    let model = model_from_path
        .map(String::from)
        .or_else(|| body.get("model").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| "scripted-model".into());
    let stream = match api {
        Api::Gemini => gemini_stream,
        _ => body.get("stream").and_then(Value::as_bool).unwrap_or(false),
    };
    let (last_user_text, tool_result) = match api {
        Api::Anthropic => last_anthropic(body),
        Api::Responses => last_responses(body),
        Api::Chat => last_chat(body),
        Api::Gemini => last_gemini(body),
    };
    Ask {
        stream,
        model,
        last_user_text,
        tool_result,
        tool_output: tool_result.then(|| tool_output(api, body)).flatten(),
        tools: tools(api, body),
        json_schema: json_schema(api, body),
    }
}

/// The text of a content value: a string, or a list of parts with `text` fields.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn list<'a>(body: &'a Value, key: &str) -> &'a [Value] {
    body.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn last_anthropic(body: &Value) -> (String, bool) {
    for message in list(body, "messages").iter().rev() {
        if message.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        let tool_result = content.as_array().is_some_and(|blocks| {
            blocks
                .iter()
                .any(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
        });
        return (text_of(content), tool_result);
    }
    (String::new(), false)
}

fn last_responses(body: &Value) -> (String, bool) {
    if let Some(text) = body.get("input").and_then(Value::as_str) {
        return (text.to_string(), false);
    }
    for item in list(body, "input").iter().rev() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        if kind.ends_with("_call_output") {
            return (String::new(), true);
        }
        if kind == "message" && item.get("role").and_then(Value::as_str) == Some("user") {
            return (text_of(item.get("content").unwrap_or(&Value::Null)), false);
        }
    }
    (String::new(), false)
}

/// The last user text of a Chat request, and whether the request carries a tool's result.
///
/// A request carries a tool's result when a `tool` message follows the model's last message,
/// whatever user messages come after it: a harness whose own history keeps text beside a
/// tool's result in one user turn (as the Anthropic and Gemini wires do) sends that text as a
/// `user` message after the `tool` one when it speaks Chat (Qwen Code 0.24.4 sends its
/// prompt-submit hook's context there on every follow-up). The user text is then that text.
fn last_chat(body: &Value) -> (String, bool) {
    let mut user_text = None;
    for message in list(body, "messages").iter().rev() {
        match message.get("role").and_then(Value::as_str) {
            Some("tool") => return (user_text.unwrap_or_default(), true),
            Some("user") if user_text.is_none() => {
                user_text = Some(text_of(message.get("content").unwrap_or(&Value::Null)));
            }
            Some("assistant") => break,
            _ => {}
        }
    }
    (user_text.unwrap_or_default(), false)
}

fn last_gemini(body: &Value) -> (String, bool) {
    for content in list(body, "contents").iter().rev() {
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        if role != "user" {
            continue;
        }
        let parts = list(content, "parts");
        if parts
            .iter()
            .any(|part| part.get("functionResponse").is_some())
        {
            return (String::new(), true);
        }
        return (text_of(content.get("parts").unwrap_or(&Value::Null)), false);
    }
    (String::new(), false)
}

/// The output of the tool call the request's last message answers, per API: the Responses
/// `*_call_output` item's `output`, the Chat `tool` message's content, the Anthropic
/// `tool_result` block's content, the Gemini `functionResponse.response`. Text that is JSON
/// is parsed.
fn tool_output(api: Api, body: &Value) -> Option<Value> {
    let output = match api {
        Api::Responses => list(body, "input")
            .last()?
            .get("output")
            .map(|output| match output {
                Value::String(_) => output.clone(),
                parts => Value::String(text_of(parts)),
            }),
        // The last `tool` message before any user text the harness put after it.
        Api::Chat => list(body, "messages")
            .iter()
            .rev()
            .find(|message| message.get("role").and_then(Value::as_str) != Some("user"))
            .filter(|message| message.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|message| Value::String(text_of(message.get("content").unwrap_or(&Value::Null)))),
        Api::Anthropic => list(list(body, "messages").last()?, "content")
            .iter()
            .rev()
            .find(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|block| Value::String(text_of(block.get("content").unwrap_or(&Value::Null)))),
        Api::Gemini => list(list(body, "contents").last()?, "parts")
            .iter()
            .rev()
            .find_map(|part| part.pointer("/functionResponse/response").cloned()),
    }?;
    Some(match &output {
        Value::String(text) => serde_json::from_str(text).unwrap_or(output),
        _ => output,
    })
}

fn tools(api: Api, body: &Value) -> Vec<Tool> {
    let mut found = Vec::new();
    for tool in list(body, "tools") {
        match api {
            Api::Anthropic => push_tool(&mut found, tool.get("name"), tool.get("input_schema")),
            Api::Responses => push_tool(&mut found, tool.get("name"), tool.get("parameters")),
            Api::Chat => {
                let function = tool.get("function").unwrap_or(&Value::Null);
                push_tool(&mut found, function.get("name"), function.get("parameters"));
            }
            Api::Gemini => {
                for declaration in list(tool, "functionDeclarations") {
                    let parameters = declaration
                        .get("parametersJsonSchema")
                        .or_else(|| declaration.get("parameters"));
                    push_tool(&mut found, declaration.get("name"), parameters);
                }
            }
        }
    }
    found
}

fn push_tool(found: &mut Vec<Tool>, name: Option<&Value>, parameters: Option<&Value>) {
    if let Some(name) = name.and_then(Value::as_str) {
        found.push(Tool {
            name: name.to_string(),
            parameters: parameters.cloned().unwrap_or(Value::Null),
        });
    }
}

fn json_schema(api: Api, body: &Value) -> Option<Value> {
    let schema = match api {
        Api::Responses => body
            .pointer("/text/format")
            .filter(|format| format.get("type").and_then(Value::as_str) == Some("json_schema"))?
            .get("schema"),
        Api::Chat => body.pointer("/response_format/json_schema/schema"),
        Api::Gemini => body
            .pointer("/generationConfig/responseJsonSchema")
            .or_else(|| body.pointer("/generationConfig/responseSchema")),
        Api::Anthropic => body.pointer("/output_format/schema"),
    };
    schema.cloned()
}

/// A value that meets `schema`, for structured-output requests (titles, routing checks): the
/// first enum value, every property of an object, empty lists, a short fixed string.
pub fn instance(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            return instance(first);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.to_ascii_lowercase(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("string")
            .to_ascii_lowercase(),
        _ if schema.get("properties").is_some() => "object".into(),
        _ => "string".into(),
    };
    match kind.as_str() {
        "object" => {
            let mut object = Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    object.insert(name.clone(), instance(property));
                }
            }
            Value::Object(object)
        }
        "array" => json!([]),
        "integer" | "number" => json!(0),
        "boolean" => json!(false),
        _ => json!("Live test"),
    }
}

/// The names under which the harnesses offer their shell tool, in the order tried.
const SHELL_TOOLS: &[&str] = &[
    "Bash",
    "bash",
    "exec_command",
    "shell",
    "shell_command",
    "run_shell_command",
];

/// The native tool name and arguments for a scripted shell `command`, shaped by the schema of
/// the shell tool the request offers (`command` as a string or an argv list, or `cmd`), with
/// every other required field filled. `None` when the request offers no shell tool.
pub fn shell_call(tools: &[Tool], command: &str) -> Option<(String, Value)> {
    let tool = SHELL_TOOLS
        .iter()
        .find_map(|name| tools.iter().find(|tool| tool.name == *name))?;
    let properties = tool
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut arguments = Map::new();
    let key = if properties.contains_key("command") || !properties.contains_key("cmd") {
        "command"
    } else {
        "cmd"
    };
    let argv = properties
        .get(key)
        .and_then(|p| p.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.eq_ignore_ascii_case("array"));
    let value = if argv {
        json!(["bash", "-lc", command])
    } else {
        json!(command)
    };
    arguments.insert(key.to_string(), value);
    for name in list(&tool.parameters, "required")
        .iter()
        .filter_map(Value::as_str)
    {
        if arguments.contains_key(name) {
            continue;
        }
        let filled = match name {
            "description" => json!("Scripted command"),
            _ => instance(properties.get(name).unwrap_or(&Value::Null)),
        };
        arguments.insert(name.to_string(), filled);
    }
    Some((tool.name.clone(), Value::Object(arguments)))
}

fn sse(event: Option<&str>, data: &Value) -> Vec<u8> {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n").into_bytes(),
        None => format!("data: {data}\n\n").into_bytes(),
    }
}

/// Splits text into the pieces it streams as: words with their following space when the reply
/// is paced, else one piece.
pub fn pieces(text: &str, paced: bool) -> Vec<String> {
    if !paced {
        return vec![text.to_string()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' || ch == '\n' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The token counts a reply reports, each API writing them in its own native fields.
///
/// `input` is the prompt tokens read fresh, `cache_read` those served from the prompt cache
/// and `cache_write` those written to it. The Anthropic API reports the three apart; the
/// OpenAI and Gemini APIs report one prompt total (fresh plus cached) with the cached part
/// inside it, and have no field for a cache write, so `cache_write` is counted in their prompt
/// total as fresh input and nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Default for Usage {
    /// The counts every reply reported before a script could choose them.
    fn default() -> Usage {
        Usage {
            input: 12,
            output: 8,
            cache_read: 0,
            cache_write: 0,
        }
    }
}

impl Usage {
    /// The prompt total of the OpenAI and Gemini APIs: every input token, cached or not.
    fn prompt_total(self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    fn anthropic(self) -> Value {
        json!({"input_tokens": self.input, "output_tokens": self.output,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read})
    }

    fn responses(self) -> Value {
        json!({"input_tokens": self.prompt_total(),
            "input_tokens_details": {"cached_tokens": self.cache_read},
            "output_tokens": self.output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_total() + self.output})
    }

    fn chat(self) -> Value {
        json!({"prompt_tokens": self.prompt_total(), "completion_tokens": self.output,
            "total_tokens": self.prompt_total() + self.output,
            "prompt_tokens_details": {"cached_tokens": self.cache_read}})
    }

    fn gemini(self) -> Value {
        json!({"promptTokenCount": self.prompt_total(), "candidatesTokenCount": self.output,
            "cachedContentTokenCount": self.cache_read,
            "totalTokenCount": self.prompt_total() + self.output})
    }
}

/// The streamed events of a reply.
pub fn stream(
    api: Api,
    model: &str,
    id: &str,
    parts: &[Part],
    paced: bool,
    usage: Usage,
) -> Vec<Piece> {
    match api {
        Api::Anthropic => stream_anthropic(model, id, parts, paced, usage),
        Api::Responses => stream_responses(model, id, parts, paced, usage),
        Api::Chat => stream_chat(model, id, parts, paced, usage),
        Api::Gemini => stream_gemini(model, parts, paced, usage),
    }
}

fn piece(bytes: Vec<u8>) -> Piece {
    Piece {
        bytes,
        paced: false,
    }
}

fn stream_anthropic(
    model: &str,
    id: &str,
    parts: &[Part],
    paced: bool,
    usage: Usage,
) -> Vec<Piece> {
    let mut out = vec![piece(sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": usage.anthropic()}}),
    ))];
    let mut stop = "end_turn";
    for (index, part) in parts.iter().enumerate() {
        match part {
            Part::Text(text) => {
                out.push(piece(sse(
                    Some("content_block_start"),
                    &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}),
                )));
                for chunk in pieces(text, paced) {
                    out.push(Piece {
                        bytes: sse(
                            Some("content_block_delta"),
                            &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "text_delta", "text": chunk}}),
                        ),
                        paced,
                    });
                }
            }
            Part::Call {
                id,
                name,
                arguments,
                ..
            } => {
                stop = "tool_use";
                out.push(piece(sse(
                    Some("content_block_start"),
                    &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                )));
                out.push(piece(sse(
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": arguments.to_string()}}),
                )));
            }
        }
        out.push(piece(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        )));
    }
    out.push(piece(sse(
        Some("message_delta"),
        // The closing delta repeats the whole count, as the API does: a client keeps the
        // last count it saw.
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": usage.anthropic()}),
    )));
    out.push(piece(sse(
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    )));
    out
}

/// The output items of a Responses reply, complete.
fn responses_items(id: &str, parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .enumerate()
        .map(|(index, part)| match part {
            Part::Text(text) => json!({"type": "message", "id": format!("msg_{id}_{index}"),
                "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            Part::Call {
                id: call,
                name,
                arguments,
                namespace,
            } => {
                let mut item = json!({"type": "function_call", "id": format!("fc_{call}"),
                    "call_id": call, "name": name, "arguments": arguments.to_string(),
                    "status": "completed"});
                if let Some(namespace) = namespace {
                    item["namespace"] = json!(namespace);
                }
                item
            }
        })
        .collect()
}

fn responses_body(model: &str, id: &str, parts: &[Part], status: &str, usage: Usage) -> Value {
    let output = if status == "completed" {
        responses_items(id, parts)
    } else {
        Vec::new()
    };
    json!({"id": id, "object": "response", "created_at": 0, "status": status, "model": model,
        "output": output, "usage": usage.responses()})
}

fn stream_responses(
    model: &str,
    id: &str,
    parts: &[Part],
    paced: bool,
    usage: Usage,
) -> Vec<Piece> {
    let mut out = vec![piece(sse(
        Some("response.created"),
        &json!({"type": "response.created",
            "response": responses_body(model, id, parts, "in_progress", usage)}),
    ))];
    let items = responses_items(id, parts);
    for (index, (part, item)) in parts.iter().zip(&items).enumerate() {
        let mut added = item.clone();
        if let Part::Text(text) = part {
            added["status"] = json!("in_progress");
            added["content"] = json!([]);
            out.push(piece(sse(
                Some("response.output_item.added"),
                &json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            )));
            let item_id = item["id"].clone();
            out.push(piece(sse(
                Some("response.content_part.added"),
                &json!({"type": "response.content_part.added", "item_id": item_id,
                    "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            )));
            for chunk in pieces(text, paced) {
                out.push(Piece {
                    bytes: sse(
                        Some("response.output_text.delta"),
                        &json!({"type": "response.output_text.delta", "item_id": item_id,
                            "output_index": index, "content_index": 0, "delta": chunk}),
                    ),
                    paced,
                });
            }
            out.push(piece(sse(
                Some("response.output_text.done"),
                &json!({"type": "response.output_text.done", "item_id": item_id,
                    "output_index": index, "content_index": 0, "text": text}),
            )));
        } else {
            out.push(piece(sse(
                Some("response.output_item.added"),
                &json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            )));
        }
        out.push(piece(sse(
            Some("response.output_item.done"),
            &json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        )));
    }
    out.push(piece(sse(
        Some("response.completed"),
        &json!({"type": "response.completed",
            "response": responses_body(model, id, parts, "completed", usage)}),
    )));
    out
}

fn chat_chunk(model: &str, id: &str, delta: Value, finish: Value) -> Vec<u8> {
    sse(
        None,
        &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

fn stream_chat(model: &str, id: &str, parts: &[Part], paced: bool, usage: Usage) -> Vec<Piece> {
    let mut out = vec![piece(chat_chunk(
        model,
        id,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ))];
    let mut finish = "stop";
    let mut call_index = 0;
    for part in parts {
        match part {
            Part::Text(text) => {
                for chunk in pieces(text, paced) {
                    out.push(Piece {
                        bytes: chat_chunk(model, id, json!({"content": chunk}), Value::Null),
                        paced,
                    });
                }
            }
            Part::Call {
                id: call,
                name,
                arguments,
                ..
            } => {
                finish = "tool_calls";
                out.push(piece(chat_chunk(
                    model,
                    id,
                    json!({"tool_calls": [{"index": call_index, "id": call, "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()}}]}),
                    Value::Null,
                )));
                call_index += 1;
            }
        }
    }
    out.push(piece(chat_chunk(model, id, json!({}), json!(finish))));
    out.push(piece(sse(
        None,
        &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [], "usage": usage.chat()}),
    )));
    out.push(piece(b"data: [DONE]\n\n".to_vec()));
    out
}

fn gemini_part(part: &Part) -> Value {
    match part {
        Part::Text(text) => json!({"text": text}),
        Part::Call {
            id,
            name,
            arguments,
            ..
        } => json!({"functionCall": {"id": id, "name": name, "args": arguments}}),
    }
}

fn stream_gemini(model: &str, parts: &[Part], paced: bool, usage: Usage) -> Vec<Piece> {
    let mut out = Vec::new();
    let candidate = |parts: Vec<Value>, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        sse(
            None,
            &json!({"candidates": [candidate], "usageMetadata": usage.gemini(), "modelVersion": model}),
        )
    };
    for part in parts {
        match part {
            Part::Text(text) => {
                for chunk in pieces(text, paced) {
                    out.push(Piece {
                        bytes: candidate(vec![json!({"text": chunk})], None),
                        paced,
                    });
                }
            }
            Part::Call { .. } => out.push(piece(candidate(vec![gemini_part(part)], None))),
        }
    }
    out.push(piece(candidate(vec![json!({"text": ""})], Some("STOP"))));
    out
}

/// A whole (non-streamed) reply body.
pub fn whole(api: Api, model: &str, id: &str, parts: &[Part], usage: Usage) -> Value {
    match api {
        Api::Anthropic => {
            let mut stop = "end_turn";
            let content: Vec<Value> = parts
                .iter()
                .map(|part| match part {
                    Part::Text(text) => json!({"type": "text", "text": text}),
                    Part::Call {
                        id,
                        name,
                        arguments,
                        ..
                    } => {
                        stop = "tool_use";
                        json!({"type": "tool_use", "id": id, "name": name, "input": arguments})
                    }
                })
                .collect();
            json!({"id": id, "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": usage.anthropic()})
        }
        Api::Responses => responses_body(model, id, parts, "completed", usage),
        Api::Chat => {
            let text: String = parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text(text) => Some(text.as_str()),
                    Part::Call { .. } => None,
                })
                .collect();
            let calls: Vec<Value> = parts
                .iter()
                .filter_map(|part| match part {
                    Part::Call {
                        id,
                        name,
                        arguments,
                        ..
                    } => Some(json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()}})),
                    Part::Text(_) => None,
                })
                .collect();
            let finish = if calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = json!(calls);
            }
            json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage.chat()})
        }
        Api::Gemini => {
            let parts: Vec<Value> = parts.iter().map(gemini_part).collect();
            json!({"candidates": [{"content": {"role": "model", "parts": parts},
                "finishReason": "STOP", "index": 0}], "usageMetadata": usage.gemini(),
                "modelVersion": model})
        }
    }
}

/// An error body in the API's own shape, so the harness shows its API-error state.
pub fn error_body(api: Api, status: u16, message: &str) -> Value {
    error_reply(api, status, message, None, 0).1
}

/// A failed reply in the API's own shape: its headers and body.
///
/// The error's type follows the status the way each API names it (429 a rate limit, 529 or
/// 503 an overload, 500 a server error). A rate-limit reply with a reset time (`resets_at`,
/// seconds since the epoch, `now` the time of the reply) carries it where each API's clients
/// read it: `retry-after` for all; Anthropic's `anthropic-ratelimit-unified-status` and
/// `-reset` headers; the Responses API's `x-codex-primary-*` headers and a
/// `usage_limit_reached` body with `resets_at` and `resets_in_seconds`; the Chat API's
/// `x-ratelimit-*` headers; Gemini's `RESOURCE_EXHAUSTED` with a `RetryInfo` delay.
pub fn error_reply(
    api: Api,
    status: u16,
    message: &str,
    resets_at: Option<u64>,
    now: u64,
) -> (Vec<(String, String)>, Value) {
    let mut headers = Vec::new();
    let after = resets_at.map(|at| at.saturating_sub(now));
    if let Some(after) = after {
        headers.push(("retry-after".to_string(), after.to_string()));
    }
    let body = match api {
        Api::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                429 => "rate_limit_error",
                529 | 503 => "overloaded_error",
                _ => "api_error",
            };
            if let (429, Some(at)) = (status, resets_at) {
                headers.push((
                    "anthropic-ratelimit-unified-status".to_string(),
                    "rejected".to_string(),
                ));
                headers.push((
                    "anthropic-ratelimit-unified-reset".to_string(),
                    at.to_string(),
                ));
            }
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Api::Responses => match (status, resets_at, after) {
            (429, Some(at), Some(after)) => {
                headers.push(("x-codex-primary-used-percent".into(), "100".into()));
                headers.push(("x-codex-primary-window-minutes".into(), "300".into()));
                headers.push(("x-codex-primary-reset-at".into(), at.to_string()));
                json!({"error": {"type": "usage_limit_reached", "message": message,
                    "resets_at": at, "resets_in_seconds": after}})
            }
            _ => json!({"error": {"message": message, "type": openai_error_type(status),
                "code": status}}),
        },
        Api::Chat => {
            if let (429, Some(after)) = (status, after) {
                headers.push(("x-ratelimit-remaining-requests".into(), "0".into()));
                headers.push(("x-ratelimit-reset-requests".into(), format!("{after}s")));
            }
            json!({"error": {"message": message, "type": openai_error_type(status),
                "code": status}})
        }
        Api::Gemini => {
            let state = match status {
                429 => "RESOURCE_EXHAUSTED",
                503 | 529 => "UNAVAILABLE",
                400 => "INVALID_ARGUMENT",
                _ => "INTERNAL",
            };
            let mut error = json!({"code": status, "message": message, "status": state});
            if let (429, Some(after)) = (status, after) {
                error["details"] = json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": format!("{after}s")}]);
            }
            json!({ "error": error })
        }
    };
    (headers, body)
}

/// The headers of a successful reply that report a usage window `used_percent` full, resetting
/// at `resets_at` (seconds since the epoch): Anthropic's unified 5-hour headers, the Responses
/// API's `x-codex-primary-*` headers, the Chat API's `x-ratelimit-*` request counts (out of
/// 100). Gemini's API reports no window on success, so it gets none.
pub fn window_headers(
    api: Api,
    used_percent: f64,
    window_minutes: u64,
    resets_at: u64,
    now: u64,
) -> Vec<(String, String)> {
    let header = |name: &str, value: String| (name.to_string(), value);
    match api {
        Api::Anthropic => vec![
            header("anthropic-ratelimit-unified-status", "allowed".into()),
            header(
                "anthropic-ratelimit-unified-5h-utilization",
                format!("{}", used_percent / 100.0),
            ),
            header(
                "anthropic-ratelimit-unified-5h-reset",
                resets_at.to_string(),
            ),
        ],
        Api::Responses => vec![
            header("x-codex-primary-used-percent", format!("{used_percent}")),
            header("x-codex-primary-window-minutes", window_minutes.to_string()),
            header("x-codex-primary-reset-at", resets_at.to_string()),
        ],
        Api::Chat => vec![
            header("x-ratelimit-limit-requests", "100".into()),
            header(
                "x-ratelimit-remaining-requests",
                format!("{}", (100.0 - used_percent).max(0.0).floor()),
            ),
            header(
                "x-ratelimit-reset-requests",
                format!("{}s", resets_at.saturating_sub(now)),
            ),
        ],
        Api::Gemini => Vec::new(),
    }
}

/// The OpenAI APIs' error type for a status.
fn openai_error_type(status: u16) -> &'static str {
    match status {
        429 => "rate_limit_exceeded",
        400 => "invalid_request_error",
        503 | 529 => "server_overloaded",
        _ => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_call_follows_the_offered_schema() {
        let tools = vec![
            Tool {
                name: "read".into(),
                parameters: json!({}),
            },
            Tool {
                name: "bash".into(),
                parameters: json!({"properties": {"command": {"type": "string"},
                    "description": {"type": "string"}}, "required": ["command", "description"]}),
            },
        ];
        let (name, arguments) = shell_call(&tools, "echo hi").unwrap();
        assert_eq!(name, "bash");
        assert_eq!(
            arguments,
            json!({"command": "echo hi", "description": "Scripted command"})
        );
        let tools = vec![Tool {
            name: "exec_command".into(),
            parameters: json!({"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
        }];
        assert_eq!(shell_call(&tools, "ls").unwrap().1, json!({"cmd": "ls"}));
        let tools = vec![Tool {
            name: "shell".into(),
            parameters: json!({"properties": {"command": {"type": "array"}}}),
        }];
        assert_eq!(
            shell_call(&tools, "ls").unwrap().1,
            json!({"command": ["bash", "-lc", "ls"]})
        );
        assert!(shell_call(&[], "ls").is_none());
    }

    #[test]
    fn last_message_is_read_per_api() {
        let body = json!({"messages": [{"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
            {"role": "system", "content": "trailing"}]});
        assert_eq!(last_anthropic(&body), ("second".into(), false));
        let body = json!({"input": [{"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "go"}]},
            {"type": "function_call", "call_id": "c"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"}]});
        assert_eq!(last_responses(&body), (String::new(), true));
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]});
        assert_eq!(last_gemini(&body), ("hello".into(), false));
    }

    #[test]
    fn a_namespaced_call_names_its_group_only_in_the_responses_api() {
        let call = |namespace: Option<&str>| {
            vec![Part::Call {
                id: "call_1".into(),
                name: "spawn".into(),
                arguments: json!({"message": "m"}),
                namespace: namespace.map(String::from),
            }]
        };
        let item = &whole(
            Api::Responses,
            "m",
            "r",
            &call(Some("agents")),
            Usage::default(),
        )["output"][0];
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["name"], "spawn");
        assert_eq!(item["namespace"], "agents");
        // Streamed, both the added and the done item carry it.
        let streamed: Vec<String> = stream(
            Api::Responses,
            "m",
            "r",
            &call(Some("agents")),
            false,
            Usage::default(),
        )
        .into_iter()
        .map(|piece| String::from_utf8_lossy(&piece.bytes).into_owned())
        .filter(|event| event.contains("response.output_item."))
        .collect();
        assert_eq!(streamed.len(), 2);
        assert!(streamed
            .iter()
            .all(|event| event.contains(r#""namespace":"agents""#)));
        // Without one, the item has no namespace field at all.
        let bare = &whole(Api::Responses, "m", "r", &call(None), Usage::default())["output"][0];
        assert!(bare.get("namespace").is_none());
        // The other APIs have no tool groups: the same call is sent by its bare name.
        for api in [Api::Anthropic, Api::Chat, Api::Gemini] {
            let body = whole(api, "m", "r", &call(Some("agents")), Usage::default()).to_string();
            assert!(body.contains("spawn"), "{}: {body}", api.name());
            assert!(!body.contains("namespace"), "{}: {body}", api.name());
        }
    }

    #[test]
    fn the_answered_tool_output_is_read_and_parsed() {
        let body = json!({"input": [{"type": "function_call", "call_id": "c"},
            {"type": "function_call_output", "call_id": "c",
                "output": "{\"agent_id\":\"a-1\"}"}]});
        let ask = read_ask(Api::Responses, &body, None, false);
        assert_eq!(ask.tool_output, Some(json!({"agent_id": "a-1"})));
        let body = json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "plain"}]});
        let ask = read_ask(Api::Chat, &body, None, false);
        assert_eq!(ask.tool_output, Some(json!("plain")));
        let body = json!({"messages": [{"role": "user", "content": "no tool here"}]});
        assert_eq!(
            read_ask(Api::Anthropic, &body, None, false).tool_output,
            None
        );
    }

    #[test]
    fn schema_instances_meet_simple_schemas() {
        let schema = json!({"type": "OBJECT", "properties": {"title": {"type": "STRING"},
            "next": {"type": "string", "enum": ["user", "model"]}}});
        assert_eq!(
            instance(&schema),
            json!({"title": "Live test", "next": "user"})
        );
    }
}
