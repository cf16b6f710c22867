//! The NDJSON transport shared by the daemon and the pane hosts (spec §6.1): reading bounded
//! lines, accepting peer-checked connections, turning each line into a typed
//! [`belfry_proto::Request`] once, writing replies, and the framed binary of attach streams.
//!
//! One JSON object per line. What the lines mean — requests, replies, events, error codes,
//! limits — is `belfry_proto`'s; this module only moves them. A line longer than [`MAX_LINE`] is
//! an error and the connection is closed. Attach streams switch to framed binary after their
//! reply line (see [`Frame`]).

use belfry_proto::{reply, Control, ErrorCode, Request, Side};
use serde_json::Value;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt,
};

pub use belfry_proto::limits::{MAX_FRAME, MAX_LINE, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

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

/// Accepts a connection for serving: checks the peer's uid (spec §6.1) and splits it. A peer
/// of another uid gets one `forbidden` error reply and the connection is closed (`None`).
pub async fn accept_peer(stream: tokio::net::UnixStream) -> Option<Conn> {
    if let Err(reason) = crate::paths::peer_allowed(&stream) {
        tracing::warn!("{reason}");
        let (_, mut writer) = stream.into_split();
        let _ = write_json(
            &mut writer,
            &reply::error(&Value::Null, ErrorCode::Forbidden, reason),
        )
        .await;
        return None;
    }
    let (reader, writer) = stream.into_split();
    Some((tokio::io::BufReader::new(reader), writer))
}

/// Reads the next well-formed request of a connection. Blank lines are skipped; a malformed
/// line gets an error reply and the connection stays usable; a line over [`MAX_LINE`] gets
/// an error reply and ends the connection, as do EOF and I/O errors (`None`). An op that `side`
/// does not serve is `unknown-op` before its fields are read.
pub async fn next_request<R, W>(reader: &mut R, writer: &mut W, side: Side) -> Option<Request>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let line = match read_line(reader).await {
            Ok(Line::Text(line)) => line,
            Ok(Line::Eof) | Err(_) => return None,
            Ok(Line::TooLong) => {
                let reply = reply::error(
                    &Value::Null,
                    ErrorCode::TooLong,
                    format!("request line exceeds {MAX_LINE} bytes; closing"),
                );
                let _ = write_json(writer, &reply).await;
                return None;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Request::parse_at(&line, Some(side)) {
            Ok(request) => return Some(request),
            Err(bad) => {
                let reply = reply::error(&bad.id, bad.code, bad.message);
                write_json(writer, &reply).await.ok()?;
            }
        }
    }
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

/// Frame types of an attach stream (after the attach reply line).
///
/// A frame is one type byte, a big-endian `u32` length and the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Terminal bytes: pane output to the client, keystrokes to the pane.
    Data(Vec<u8>),
    /// A control message (resize, detach, exited, ...), parsed once where it is read.
    Control(Control),
}

const FRAME_DATA: u8 = 1;
const FRAME_CONTROL: u8 = 2;

impl Frame {
    /// Encodes the frame into bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload) = match self {
            Frame::Data(bytes) => (FRAME_DATA, bytes.clone()),
            Frame::Control(control) => (
                FRAME_CONTROL,
                serde_json::to_vec(&control.to_value()).unwrap_or_default(),
            ),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(kind);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Reads one frame; `Ok(None)` on a clean EOF. A control frame whose JSON is not a control
    /// this version knows (one from a newer peer, or a size out of range) is logged and passed
    /// over: the peers of an attach may be of different versions, and an attach is not ended
    /// for a message it can do without.
    pub async fn read<R: AsyncRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Frame>> {
        loop {
            match Self::read_one(reader).await? {
                Some(Err(ignored)) => tracing::warn!("{ignored}; ignored"),
                Some(Ok(frame)) => return Ok(Some(frame)),
                None => return Ok(None),
            }
        }
    }

    /// Reads one frame, or the reason a control frame was not understood.
    async fn read_one<R: AsyncRead + Unpin>(
        reader: &mut R,
    ) -> std::io::Result<Option<Result<Frame, String>>> {
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
            FRAME_DATA => Ok(Some(Ok(Frame::Data(payload)))),
            FRAME_CONTROL => {
                let value = serde_json::from_slice(&payload).map_err(|err| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("attach control frame is not JSON: {err}"),
                    )
                })?;
                Ok(Some(Control::from_value(value).map(Frame::Control)))
            }
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("unknown attach frame type {other}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn frames_round_trip_and_a_control_not_understood_is_passed_over() {
        let frames = [
            Frame::Data(b"abc".to_vec()),
            Frame::Control(Control::Resize(
                belfry_proto::Size::new(3, 9).expect("in range"),
            )),
            Frame::Control(Control::Detach { reason: None }),
        ];
        let mut bytes = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            // Before each frame, a control this version does not read: a newer peer's, and a
            // resize out of range.
            let unknown = [
                json!({"zoom": i}),
                json!({"resize": {"rows": 0, "cols": 9}}),
            ];
            let payload = serde_json::to_vec(&unknown[i % 2]).unwrap();
            bytes.push(FRAME_CONTROL);
            bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&payload);
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
