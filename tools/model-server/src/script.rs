//! The script a test gives the server, and the choice of the reply to each turn.
//!
//! A script is JSON:
//!
//! ```json
//! {"turns": [
//!    {"match": "say hi", "text": "HI-FROM-MODEL"},
//!    {"match": "make a file", "tool": {"command": "touch made"}, "then": {"text": "made it"}},
//!    {"text": "an answer to whatever comes next, used once"}
//!  ],
//!  "fallback": {"text": "no scripted turn left"}}
//! ```
//!
//! A turn with `match` answers every prompt whose last user message contains that substring
//! (the one found latest in the message wins, and it can answer again); the turns without `match` answer the other
//! prompts in order, each once. When none is left, `fallback` answers. A reply is `text`, a
//! `tool` call (a shell `command`, or an explicit native `name` and `input`), or an `error`
//! (`{"status": 500, "message": "…"}`); `then` is the reply to the request that carries the
//! tool's result; `delay_ms` paces the streamed pieces (so a test can see a turn streaming).
//! A named tool may also give a `namespace`, for a tool the request offers inside a tool
//! group (a Responses `namespace` tool): the call then carries that name beside the tool's
//! (the Responses `function_call` item's `namespace` field; the other wire APIs have no
//! groups and send the bare name), e.g.
//! `{"tool": {"namespace": "agents", "name": "spawn", "input": {"message": "…"}}}`.
//! A named tool's `input` answering a tool's result (in a `then`) may take a value from that
//! result: an object `{"$result": "/pointer"}` anywhere in it is replaced by the value the JSON
//! pointer finds in the result (parsed as JSON when it is JSON text), so a call can name what
//! the previous one returned (an id the harness made up), e.g.
//! `"then": {"tool": {"name": "wait", "input": {"targets": [{"$result": "/agent_id"}]}}}`.

use serde_json::Value;

use crate::wire::Usage;

/// One reply, as the script states it.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub text: Option<String>,
    pub tool: Option<ToolCall>,
    pub error: Option<ScriptedError>,
    pub then: Option<Box<Reply>>,
    /// The token counts the reply reports; `None` reports the default counts.
    pub usage: Option<Usage>,
    /// The usage window a successful reply reports in its headers, if any.
    pub window: Option<Window>,
    /// Milliseconds between streamed pieces of the text.
    pub delay_ms: u64,
}

/// An API error the reply fails with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedError {
    pub status: u16,
    pub message: String,
    pub reset: Option<Reset>,
}

/// A usage window's state: how much of it is used and when it resets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub used_percent: f64,
    pub window_minutes: u64,
    pub reset: Reset,
}

/// When a rate limit resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// At this many seconds since the epoch.
    At(u64),
    /// This many seconds after the reply is sent.
    After(u64),
}

impl Reset {
    /// The reset as seconds since the epoch, for a reply sent at `now`.
    pub fn at(self, now: u64) -> u64 {
        match self {
            Reset::At(at) => at,
            Reset::After(after) => now + after,
        }
    }
}

/// A tool call the model makes.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// A shell command, placed into whichever shell tool the request offers.
    pub command: Option<String>,
    /// An explicit native tool name and input, for any other tool.
    pub name: Option<String>,
    pub input: Option<Value>,
    /// The tool group the named tool belongs to, when the request offers it inside one.
    pub namespace: Option<String>,
}

struct Turn {
    matcher: Option<String>,
    reply: Reply,
    /// How many prompts the turn may still answer; `None` is without bound.
    times: Option<u64>,
}

/// The parsed script and how far the ordered turns have been used.
pub struct Script {
    turns: Vec<Turn>,
    fallback: Reply,
    used: Vec<bool>,
}

/// Which reply answered, for the request log.
pub struct Choice {
    pub reply: Reply,
    /// The index of the turn in the script, or `None` for the fallback.
    pub turn: Option<usize>,
}

impl Script {
    /// Parses a script; the error names the turn and field at fault.
    pub fn parse(text: &str) -> Result<Script, String> {
        let root: Value =
            serde_json::from_str(text).map_err(|err| format!("script is not JSON: {err}"))?;
        let turns_value = root
            .get("turns")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let Value::Array(items) = turns_value else {
            return Err("script field `turns` is not a list".into());
        };
        let mut turns = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let matcher = match item.get("match") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(other) => {
                    return Err(format!("turns[{index}].match is not a string: {other}"));
                }
            };
            let reply = parse_reply(item, &format!("turns[{index}]"))?;
            let times = match item.get("times") {
                None | Some(Value::Null) => None,
                Some(times) => {
                    Some(times.as_u64().filter(|times| *times > 0).ok_or_else(|| {
                        format!("turns[{index}].times is not a whole number above 0: {times}")
                    })?)
                }
            };
            turns.push(Turn {
                matcher,
                reply,
                times,
            });
        }
        let fallback = match root.get("fallback") {
            Some(value) => parse_reply(value, "fallback")?,
            None => Reply {
                text: Some("(the scripted model has no turn left)".into()),
                ..Reply::default()
            },
        };
        let used = vec![false; turns.len()];
        Ok(Script {
            turns,
            fallback,
            used,
        })
    }

    /// The reply to a prompt whose last user message is `last_user_text`.
    ///
    /// Of the `match` turns found in the message, the one found latest wins: a harness may
    /// send an unanswered prompt again inside the next one (after an API error, two prompts
    /// arrive as one user message), and the newest prompt is the one at the end.
    pub fn choose(&mut self, last_user_text: &str) -> Choice {
        let latest = self
            .turns
            .iter()
            .enumerate()
            // A turn that has answered as many times as it may is passed over.
            .filter(|(_, turn)| turn.times != Some(0))
            .filter_map(|(index, turn)| {
                let at = last_user_text.rfind(turn.matcher.as_deref()?)?;
                Some((at, index))
            })
            // The earlier turn wins a tie (two substrings ending the message at one place).
            .max_by(|(a_at, a_index), (b_at, b_index)| a_at.cmp(b_at).then(b_index.cmp(a_index)));
        if let Some((_, index)) = latest {
            if let Some(times) = self.turns[index].times.as_mut() {
                *times -= 1;
            }
            return Choice {
                reply: self.turns[index].reply.clone(),
                turn: Some(index),
            };
        }
        for (index, turn) in self.turns.iter().enumerate() {
            if turn.matcher.is_none() && !self.used[index] {
                self.used[index] = true;
                return Choice {
                    reply: turn.reply.clone(),
                    turn: Some(index),
                };
            }
        }
        Choice {
            reply: self.fallback.clone(),
            turn: None,
        }
    }
}

/// `input` with every `{"$result": "/pointer"}` object replaced by what the pointer finds in
/// `result`, the output of the tool call the reply answers; the error names the pointer that
/// found nothing.
pub fn fill_results(input: &Value, result: Option<&Value>) -> Result<Value, String> {
    match input {
        Value::Object(object) if object.len() == 1 && object.contains_key("$result") => {
            let pointer = object["$result"].as_str().unwrap_or_default();
            let result = result.ok_or_else(|| {
                format!("{{\"$result\": {pointer:?}}}: the request carries no tool result")
            })?;
            result.pointer(pointer).cloned().ok_or_else(|| {
                format!("{{\"$result\": {pointer:?}}} finds nothing in the tool result {result}")
            })
        }
        Value::Object(object) => object
            .iter()
            .map(|(key, value)| Ok((key.clone(), fill_results(value, result)?)))
            .collect::<Result<_, String>>()
            .map(Value::Object),
        Value::Array(items) => items
            .iter()
            .map(|item| fill_results(item, result))
            .collect::<Result<_, String>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn parse_reply(value: &Value, at: &str) -> Result<Reply, String> {
    if !value.is_object() {
        return Err(format!("{at} is not an object"));
    }
    let text = match value.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => return Err(format!("{at}.text is not a string: {other}")),
    };
    let tool = match value.get("tool") {
        None | Some(Value::Null) => None,
        Some(tool) => Some(parse_tool(tool, &format!("{at}.tool"))?),
    };
    let error = match value.get("error") {
        None | Some(Value::Null) => None,
        Some(error) => {
            let status = error.get("status").and_then(Value::as_u64).unwrap_or(500);
            let status = u16::try_from(status)
                .ok()
                .filter(|status| (400..600).contains(status))
                .ok_or_else(|| format!("{at}.error.status {status} is not 400..599"))?;
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("scripted error")
                .to_string();
            let whole = |name: &str| match error.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(value) => value
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("{at}.error.{name} is not a whole number: {value}")),
            };
            let reset = match (whole("resets_at")?, whole("reset_after_s")?) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "{at}.error has both `resets_at` and `reset_after_s`; give one"
                    ))
                }
                (Some(at), None) => Some(Reset::At(at)),
                (None, Some(after)) => Some(Reset::After(after)),
                (None, None) => None,
            };
            Some(ScriptedError {
                status,
                message,
                reset,
            })
        }
    };
    if text.is_none() && tool.is_none() && error.is_none() {
        return Err(format!("{at} has none of `text`, `tool` or `error`"));
    }
    let then = match value.get("then") {
        None | Some(Value::Null) => None,
        Some(then) => Some(Box::new(parse_reply(then, &format!("{at}.then"))?)),
    };
    let delay_ms = match value.get("delay_ms") {
        None | Some(Value::Null) => 0,
        Some(delay) => delay
            .as_u64()
            .ok_or_else(|| format!("{at}.delay_ms is not a whole number: {delay}"))?,
    };
    let usage = match value.get("usage") {
        None | Some(Value::Null) => None,
        Some(usage) => Some(parse_usage(usage, &format!("{at}.usage"))?),
    };
    let window = match value.get("window") {
        None | Some(Value::Null) => None,
        Some(window) => Some(parse_window(window, &format!("{at}.window"))?),
    };
    Ok(Reply {
        text,
        tool,
        error,
        then,
        usage,
        window,
        delay_ms,
    })
}

fn parse_window(value: &Value, at: &str) -> Result<Window, String> {
    let used_percent = value
        .get("used_percent")
        .and_then(Value::as_f64)
        .filter(|used| (0.0..=100.0).contains(used))
        .ok_or_else(|| format!("{at}.used_percent is not a number from 0 to 100"))?;
    let window_minutes = match value.get("window_minutes") {
        None => 300,
        Some(minutes) => minutes
            .as_u64()
            .ok_or_else(|| format!("{at}.window_minutes is not a whole number: {minutes}"))?,
    };
    let reset = match (
        value.get("resets_at").and_then(Value::as_u64),
        value.get("reset_after_s").and_then(Value::as_u64),
    ) {
        (Some(at_s), None) => Reset::At(at_s),
        (None, Some(after)) => Reset::After(after),
        _ => {
            return Err(format!(
                "{at} needs one of `resets_at` or `reset_after_s` (whole seconds)"
            ))
        }
    };
    Ok(Window {
        used_percent,
        window_minutes,
        reset,
    })
}

fn parse_usage(value: &Value, at: &str) -> Result<Usage, String> {
    let Value::Object(fields) = value else {
        return Err(format!("{at} is not an object"));
    };
    if let Some(name) = fields
        .keys()
        .find(|name| !["input", "output", "cache_read", "cache_write"].contains(&name.as_str()))
    {
        return Err(format!(
            "{at}.{name} is not a count this server reports (input, output, cache_read, cache_write)"
        ));
    }
    let count = |name: &str| match fields.get(name) {
        None => Ok(0),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| format!("{at}.{name} is not a whole number: {value}")),
    };
    Ok(Usage {
        input: count("input")?,
        output: count("output")?,
        cache_read: count("cache_read")?,
        cache_write: count("cache_write")?,
    })
}

fn parse_tool(value: &Value, at: &str) -> Result<ToolCall, String> {
    let command = value
        .get("command")
        .and_then(Value::as_str)
        .map(String::from);
    let name = value.get("name").and_then(Value::as_str).map(String::from);
    let input = value.get("input").cloned();
    if command.is_none() && name.is_none() {
        return Err(format!("{at} has neither `command` nor `name`"));
    }
    let namespace = match value.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(namespace)) if command.is_none() => Some(namespace.clone()),
        Some(Value::String(_)) => {
            return Err(format!(
                "{at}.namespace goes with a `name`, not a shell `command` (which names no tool of a group)"
            ))
        }
        Some(other) => return Err(format!("{at}.namespace is not a string: {other}")),
    };
    Ok(ToolCall {
        command,
        name,
        input,
        namespace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_turns_repeat_and_ordered_turns_are_used_once() {
        let mut script = Script::parse(
            r#"{"turns":[{"match":"ping","text":"pong"},{"text":"first"},{"text":"second"}],
                "fallback":{"text":"empty"}}"#,
        )
        .unwrap();
        assert_eq!(script.choose("a ping").reply.text.as_deref(), Some("pong"));
        assert_eq!(script.choose("x").reply.text.as_deref(), Some("first"));
        assert_eq!(script.choose("ping").reply.text.as_deref(), Some("pong"));
        assert_eq!(script.choose("y").reply.text.as_deref(), Some("second"));
        // Two prompts in one message (an unanswered one sent again): the later one answers.
        let mut two = Script::parse(
            r#"{"turns":[{"match":"FIRST","text":"one"},{"match":"SECOND","text":"two"}]}"#,
        )
        .unwrap();
        assert_eq!(
            two.choose("FIRST x\nSECOND y").reply.text.as_deref(),
            Some("two")
        );
        assert_eq!(
            two.choose("SECOND x\nFIRST y").reply.text.as_deref(),
            Some("one")
        );
        let last = script.choose("z");
        assert_eq!(last.reply.text.as_deref(), Some("empty"));
        assert_eq!(last.turn, None);
    }

    #[test]
    fn a_bad_turn_is_named() {
        let err = Script::parse(r#"{"turns":[{"text":"ok"},{"match":3,"text":"x"}]}"#)
            .err()
            .unwrap();
        assert_eq!(err, "turns[1].match is not a string: 3");
        let err = Script::parse(r#"{"turns":[{"match":"a"}]}"#).err().unwrap();
        assert_eq!(err, "turns[0] has none of `text`, `tool` or `error`");
        let err = Script::parse(
            r#"{"turns":[{"tool":{"command":"x"},"then":{"delay_ms":"a","text":"b"}}]}"#,
        )
        .err()
        .unwrap();
        assert_eq!(err, "turns[0].then.delay_ms is not a whole number: \"a\"");
        let err = Script::parse(r#"{"turns":[{"tool":{"name":"x","namespace":7}}]}"#)
            .err()
            .unwrap();
        assert_eq!(err, "turns[0].tool.namespace is not a string: 7");
        let err = Script::parse(r#"{"turns":[{"tool":{"command":"ls","namespace":"g"}}]}"#)
            .err()
            .unwrap();
        assert_eq!(
            err,
            "turns[0].tool.namespace goes with a `name`, not a shell `command` (which names no tool of a group)"
        );
    }

    #[test]
    fn bad_usage_resets_and_times_are_named() {
        let err = |text: &str| Script::parse(text).err().unwrap();
        assert_eq!(
            err(r#"{"turns":[{"text":"a","usage":{"input":1,"cached":2}}]}"#),
            "turns[0].usage.cached is not a count this server reports (input, output, cache_read, cache_write)"
        );
        assert_eq!(
            err(r#"{"turns":[{"text":"a","usage":{"output":-3}}]}"#),
            "turns[0].usage.output is not a whole number: -3"
        );
        assert_eq!(
            err(r#"{"turns":[{"error":{"status":429,"resets_at":5,"reset_after_s":6}}]}"#),
            "turns[0].error has both `resets_at` and `reset_after_s`; give one"
        );
        assert_eq!(
            err(r#"{"turns":[{"match":"a","times":0,"text":"a"}]}"#),
            "turns[0].times is not a whole number above 0: 0"
        );
        let mut script = Script::parse(
            r#"{"turns":[{"text":"a","usage":{"input":7,"cache_write":2}},
                {"error":{"status":429,"resets_at":1800000000}}]}"#,
        )
        .unwrap();
        assert_eq!(
            script.choose("x").reply.usage,
            Some(Usage {
                input: 7,
                output: 0,
                cache_read: 0,
                cache_write: 2
            })
        );
        let error = script.choose("y").reply.error.unwrap();
        assert_eq!(error.reset.map(|reset| reset.at(5)), Some(1_800_000_000));
        assert_eq!(
            err(r#"{"turns":[{"text":"a","window":{"used_percent":120,"reset_after_s":5}}]}"#),
            "turns[0].window.used_percent is not a number from 0 to 100"
        );
        assert_eq!(
            err(r#"{"turns":[{"text":"a","window":{"used_percent":50}}]}"#),
            "turns[0].window needs one of `resets_at` or `reset_after_s` (whole seconds)"
        );
    }

    #[test]
    fn a_result_placeholder_takes_the_value_from_the_tool_result() {
        let input = serde_json::json!({"targets": [{"$result": "/agent_id"}], "timeout_ms": 5});
        let result = serde_json::json!({"agent_id": "a-1", "nickname": "N"});
        assert_eq!(
            fill_results(&input, Some(&result)).unwrap(),
            serde_json::json!({"targets": ["a-1"], "timeout_ms": 5})
        );
        let err = fill_results(&input, Some(&serde_json::json!({"id": 1})))
            .err()
            .unwrap();
        assert_eq!(
            err,
            "{\"$result\": \"/agent_id\"} finds nothing in the tool result {\"id\":1}"
        );
        let err = fill_results(&input, None).err().unwrap();
        assert_eq!(
            err,
            "{\"$result\": \"/agent_id\"}: the request carries no tool result"
        );
    }

    #[test]
    fn a_named_tool_keeps_its_namespace() {
        let mut script = Script::parse(
            r#"{"turns":[{"match":"go","tool":{"namespace":"agents","name":"spawn","input":{"message":"m"}}}]}"#,
        )
        .unwrap();
        let tool = script.choose("go").reply.tool.unwrap();
        assert_eq!(tool.namespace.as_deref(), Some("agents"));
        assert_eq!(tool.name.as_deref(), Some("spawn"));
    }
}
