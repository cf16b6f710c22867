//! The NDJSON wire protocol shared by the daemon and the pane hosts (SPEC §6.1).
//!
//! One JSON object per line. Requests carry an `id` that the reply echoes. Replies are
//! `{"id":…,"ok":true,…}` or `{"id":…,"ok":false,"error":{"code":…,"message":…}}`. A line longer
//! than [`MAX_LINE`] is an error and the connection is closed. Attach streams switch to framed
//! binary after their reply line (see [`Frame`]).

use serde_json::{json, Map, Value};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt,
};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u64 = 1;
/// The oldest protocol version this build still accepts (a newer daemon adopts older panes).
pub const MIN_PROTOCOL_VERSION: u64 = 1;
/// Longest accepted request line, newline excluded.
pub const MAX_LINE: usize = 1024 * 1024;

/// Error codes used in error replies.
pub mod code {
    pub const INVALID: &str = "invalid";
    pub const NOT_FOUND: &str = "not-found";
    pub const EXISTS: &str = "exists";
    pub const UNKNOWN_OP: &str = "unknown-op";
    pub const MALFORMED: &str = "malformed";
    pub const TOO_LONG: &str = "line-too-long";
    pub const UNSUPPORTED_VERSION: &str = "unsupported-version";
    pub const INTERNAL: &str = "internal";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const TIMEOUT: &str = "timeout";
    /// A send whose transaction a restart or kill ended; the error carries `written`.
    pub const ABORTED: &str = "aborted";
    pub const FORBIDDEN: &str = "forbidden";
    /// The socket already serves as many connections as it allows; this one is closed.
    pub const BUSY: &str = "busy";
}

/// One line read from a peer.
#[derive(Debug)]
pub enum Line {
    /// A complete line (without its newline).
    Text(Vec<u8>),
    /// The line exceeded [`MAX_LINE`]; the caller replies with an error and closes.
    TooLong,
    /// The peer closed the connection.
    Eof,
}

/// Reads one newline-terminated line, refusing lines longer than [`MAX_LINE`].
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut limited = reader.take(MAX_LINE as u64 + 1);
    let n = limited.read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Line::Text(buf));
    }
    if buf.len() > MAX_LINE {
        return Ok(Line::TooLong);
    }
    // EOF without a trailing newline: accept what we got.
    Ok(Line::Text(buf))
}

/// The two halves of an accepted, peer-checked connection.
pub type Conn = (
    tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    tokio::net::unix::OwnedWriteHalf,
);

/// Accepts a connection for serving: checks the peer's uid (SPEC §6.1) and splits it. A peer
/// of another uid gets one `forbidden` error reply and the connection is closed (`None`).
pub async fn accept_peer(stream: tokio::net::UnixStream) -> Option<Conn> {
    if let Err(reason) = crate::paths::peer_allowed(&stream) {
        tracing::warn!("{reason}");
        let (_, mut writer) = stream.into_split();
        let _ = write_json(
            &mut writer,
            &error_reply(&Value::Null, code::FORBIDDEN, reason),
        )
        .await;
        return None;
    }
    let (reader, writer) = stream.into_split();
    Some((tokio::io::BufReader::new(reader), writer))
}

/// Reads the next well-formed request of a connection. Blank lines are skipped; a malformed
/// line gets an error reply and the connection stays usable; a line over [`MAX_LINE`] gets
/// an error reply and ends the connection, as do EOF and I/O errors (`None`).
pub async fn next_request<R, W>(reader: &mut R, writer: &mut W) -> Option<Request>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let line = match read_line(reader).await {
            Ok(Line::Text(line)) => line,
            Ok(Line::Eof) | Err(_) => return None,
            Ok(Line::TooLong) => {
                let reply = error_reply(
                    &Value::Null,
                    code::TOO_LONG,
                    format!("request line exceeds {MAX_LINE} bytes; closing"),
                );
                let _ = write_json(writer, &reply).await;
                return None;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_request(&line) {
            Ok(request) => return Some(request),
            Err(bad) => {
                let reply = error_reply(&bad.id, bad.code, bad.message);
                write_json(writer, &reply).await.ok()?;
            }
        }
    }
}

/// A parsed request: its id (echoed in the reply), op name and the whole object.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: Value,
    pub op: String,
    pub body: Map<String, Value>,
}

/// Why a line is not a request; carries the id when one could be read.
#[derive(Debug)]
pub struct BadRequest {
    pub id: Value,
    pub code: &'static str,
    pub message: String,
}

/// Parses a request line.
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    let value: Value = serde_json::from_slice(line).map_err(|err| BadRequest {
        id: Value::Null,
        code: code::MALFORMED,
        message: format!("malformed JSON: {err}"),
    })?;
    let Value::Object(body) = value else {
        return Err(BadRequest {
            id: Value::Null,
            code: code::MALFORMED,
            message: "a request must be a JSON object".into(),
        });
    };
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let op = match body.get("op") {
        Some(Value::String(op)) => op.clone(),
        Some(_) => {
            return Err(BadRequest {
                id,
                code: code::INVALID,
                message: "field \"op\" must be a string".into(),
            })
        }
        None => {
            return Err(BadRequest {
                id,
                code: code::INVALID,
                message: "missing field \"op\"".into(),
            })
        }
    };
    Ok(Request { id, op, body })
}

/// A successful reply: `fields` merged with `id` and `ok:true`.
pub fn ok_reply(id: &Value, fields: Value) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), id.clone());
    out.insert("ok".into(), Value::Bool(true));
    if let Value::Object(extra) = fields {
        for (k, v) in extra {
            out.insert(k, v);
        }
    }
    Value::Object(out)
}

/// An error reply.
pub fn error_reply(id: &Value, code: &str, message: impl Into<String>) -> Value {
    json!({"id": id, "ok": false, "error": {"code": code, "message": message.into()}})
}

/// Writes one JSON value as a line.
pub async fn write_json<W: AsyncWrite + Unpin>(
    writer: &mut W,
    value: &Value,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    writer.write_all(&bytes).await?;
    writer.flush().await
}

/// Field helpers that produce errors naming the field.
pub fn get_str<'a>(body: &'a Map<String, Value>, field: &str) -> Result<&'a str, String> {
    match body.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("field {field:?} must be a string")),
        None => Err(format!("missing field {field:?}")),
    }
}

pub fn opt_str<'a>(body: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("field {field:?} must be a string")),
    }
}

pub fn opt_u64(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("field {field:?} must be a non-negative integer")),
    }
}

pub fn opt_bool(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, String> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("field {field:?} must be true or false")),
    }
}

/// Present-but-null is refused for fields that guard something (the `expect` fields of a send,
/// attach's `read_only`, the pane host's `session` check): reading `null` as "absent" would
/// silently drop the guard, so it is a bad request naming the field. `name` is how the error
/// shows the field (`expect.revision`); `wanted` says what a valid value is.
fn not_null<'a>(
    body: &'a Map<String, Value>,
    field: &str,
    name: &str,
    wanted: &str,
) -> Result<Option<&'a Value>, String> {
    match body.get(field) {
        None => Ok(None),
        Some(Value::Null) => Err(format!(
            "field {name:?} is null: give {wanted}, or leave the field out"
        )),
        Some(value) => Ok(Some(value)),
    }
}

/// An optional string guard: absent is `None`, `null` or another type is an error.
pub fn strict_str<'a>(
    body: &'a Map<String, Value>,
    field: &str,
    name: &str,
) -> Result<Option<&'a str>, String> {
    match not_null(body, field, name, "a string")? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("field {name:?} must be a string")),
    }
}

/// An optional integer guard: absent is `None`, `null` or another type is an error.
pub fn strict_u64(
    body: &Map<String, Value>,
    field: &str,
    name: &str,
) -> Result<Option<u64>, String> {
    match not_null(body, field, name, "a non-negative integer")? {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("field {name:?} must be a non-negative integer")),
    }
}

/// An optional boolean guard: absent is `None`, `null` or another type is an error.
pub fn strict_bool(
    body: &Map<String, Value>,
    field: &str,
    name: &str,
) -> Result<Option<bool>, String> {
    match not_null(body, field, name, "true or false")? {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("field {name:?} must be true or false")),
    }
}

/// Frame types of an attach stream (after the attach reply line).
///
/// A frame is one type byte, a big-endian `u32` length and the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Terminal bytes: pane output to the client, keystrokes to the pane.
    Data(Vec<u8>),
    /// A JSON control message (resize, detach, exited).
    Control(Value),
}

const FRAME_DATA: u8 = 1;
const FRAME_CONTROL: u8 = 2;
/// Largest frame payload accepted.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

impl Frame {
    /// Encodes the frame into bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload) = match self {
            Frame::Data(bytes) => (FRAME_DATA, bytes.clone()),
            Frame::Control(value) => (FRAME_CONTROL, serde_json::to_vec(value).unwrap_or_default()),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(kind);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Reads one frame; `Ok(None)` on a clean EOF.
    pub async fn read<R: AsyncRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Frame>> {
        let mut header = [0u8; 5];
        match reader.read_exact(&mut header).await {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(err) => return Err(err),
        }
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if len > MAX_FRAME {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("attach frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
            ));
        }
        let mut payload = vec![0u8; len];
        reader.read_exact(&mut payload).await?;
        match header[0] {
            FRAME_DATA => Ok(Some(Frame::Data(payload))),
            FRAME_CONTROL => {
                let value = serde_json::from_slice(&payload).map_err(|err| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("attach control frame is not JSON: {err}"),
                    )
                })?;
                Ok(Some(Frame::Control(value)))
            }
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("unknown attach frame type {other}"),
            )),
        }
    }
}

/// Picks the protocol version for a `hello` request: the highest version both sides speak.
pub fn negotiate(body: &Map<String, Value>) -> Result<u64, String> {
    let offered: Vec<u64> = match body.get("versions") {
        None | Some(Value::Null) => match body.get("version").and_then(Value::as_u64) {
            Some(v) => vec![v],
            None => vec![PROTOCOL_VERSION],
        },
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_u64).collect(),
        Some(_) => return Err("field \"versions\" must be an array of integers".into()),
    };
    offered
        .into_iter()
        .filter(|v| (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(v))
        .max()
        .ok_or_else(|| {
            format!(
                "no common protocol version: this side speaks {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_the_problem() {
        assert!(parse_request(b"{")
            .unwrap_err()
            .message
            .contains("malformed JSON"));
        assert!(parse_request(b"[]")
            .unwrap_err()
            .message
            .contains("JSON object"));
        let err = parse_request(br#"{"id":7}"#).unwrap_err();
        assert_eq!(err.id, json!(7));
        assert!(err.message.contains("\"op\""));
        let ok = parse_request(br#"{"id":"a","op":"list"}"#).unwrap();
        assert_eq!(ok.op, "list");
    }

    #[test]
    fn null_guard_fields_are_errors_naming_the_field() {
        let body = json!({"revision": null, "read_only": null, "session": null, "ok": 3});
        let body = body.as_object().unwrap();
        let err = strict_u64(body, "revision", "expect.revision").unwrap_err();
        assert!(err.contains("\"expect.revision\" is null"), "{err}");
        let err = strict_bool(body, "read_only", "read_only").unwrap_err();
        assert!(err.contains("\"read_only\" is null"), "{err}");
        let err = strict_str(body, "session", "session").unwrap_err();
        assert!(err.contains("\"session\" is null"), "{err}");
        assert_eq!(strict_u64(body, "absent", "absent"), Ok(None));
        assert_eq!(strict_u64(body, "ok", "ok"), Ok(Some(3)));
        assert!(strict_str(body, "ok", "ok")
            .unwrap_err()
            .contains("must be a string"));
    }

    #[test]
    fn negotiation() {
        let body = json!({"versions":[1, 99]});
        assert_eq!(negotiate(body.as_object().unwrap()), Ok(1));
        let body = json!({"versions":[99]});
        assert!(negotiate(body.as_object().unwrap()).is_err());
    }

    #[tokio::test]
    async fn frames_round_trip() {
        let frames = [
            Frame::Data(b"abc".to_vec()),
            Frame::Control(json!({"resize":{"rows":3}})),
        ];
        let mut bytes = Vec::new();
        for f in &frames {
            bytes.extend(f.encode());
        }
        let mut reader = &bytes[..];
        for f in &frames {
            assert_eq!(Frame::read(&mut reader).await.unwrap().as_ref(), Some(f));
        }
        assert_eq!(Frame::read(&mut reader).await.unwrap(), None);
    }

    #[tokio::test]
    async fn long_lines_are_refused() {
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.push(b'\n');
        let mut reader = tokio::io::BufReader::new(&data[..]);
        assert!(matches!(
            read_line(&mut reader).await.unwrap(),
            Line::TooLong
        ));
    }
}
