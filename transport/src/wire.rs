//! The NDJSON transport shared by the daemon and the pane hosts (spec §6.1): reading bounded
//! lines, accepting peer-checked connections, turning each line into a typed
//! [`belfry_proto::Request`] once, writing replies, and the framed binary of attach streams.
//!
//! One JSON object per line. What the lines mean — requests, replies, events, error codes,
//! limits — is `belfry_proto`'s; this module only moves them. A line longer than [`MAX_LINE`] is
//! an error and the connection is closed. Attach streams switch to framed binary after their
//! reply line (see [`Frame`]).

use std::io::IoSlice;
use std::sync::Arc;

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
///
/// A data payload is shared (`Arc<[u8]>`): the pane host copies each output chunk once, out
/// of its read buffer, and every attached client's queue holds the same bytes; writing puts
/// the header and the payload into one vectored write ([`write_frames`]), so the payload is
/// never copied again on its way to the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Terminal bytes: pane output to the client, keystrokes to the pane. The [`PenOnly`]
    /// range is known only inside the pane host, for output; it is not sent.
    Data(Arc<[u8]>, PenOnly),
    /// A control message (resize, detach, exited, ...), parsed once where it is read.
    Control(Control),
}

/// Of a data frame's bytes, the ranges the pane's screen model read as whole plain or styled
/// lines ([`crate::screen::Screen::pen_only`]), in order: the pane host's terminal writer
/// records what they change without scanning them ([`crate::restore::Outer::observe_output`]).
/// None for every other frame, and for every frame read from a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PenOnly(Option<Arc<[(u32, u32)]>>);

impl PenOnly {
    /// No such range.
    pub const NONE: PenOnly = PenOnly(None);

    /// The ranges a screen model reported (in order, apart), those that fit.
    pub fn of(ranges: impl IntoIterator<Item = std::ops::Range<usize>>) -> PenOnly {
        let ranges: Vec<(u32, u32)> = ranges
            .into_iter()
            .filter(|r| r.start < r.end)
            .filter_map(|r| Some((u32::try_from(r.start).ok()?, u32::try_from(r.end).ok()?)))
            .collect();
        PenOnly((!ranges.is_empty()).then(|| Arc::from(ranges)))
    }

    /// The ranges, as offsets into the frame's bytes.
    pub fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.0
            .iter()
            .flat_map(|ranges| ranges.iter())
            .map(|&(start, end)| start as usize..end as usize)
    }

    /// The ranges after the first `n` bytes are cut off the frame.
    pub fn after(&self, n: usize) -> PenOnly {
        PenOnly::of(
            self.ranges()
                .map(|r| r.start.saturating_sub(n)..r.end.saturating_sub(n)),
        )
    }
}

const FRAME_DATA: u8 = 1;
const FRAME_CONTROL: u8 = 2;
const HEADER: usize = 5;

/// Most frames [`write_frames`] puts into one vectored write (two slices each), well under
/// the kernel's `IOV_MAX` of 1024.
pub const MAX_BATCH: usize = 64;

impl Frame {
    /// A data frame holding a copy of `bytes`.
    pub fn data(bytes: &[u8]) -> Frame {
        Frame::Data(Arc::from(bytes), PenOnly::NONE)
    }

    /// The frame's header and its payload (a control frame's JSON is encoded here).
    fn parts(&self) -> ([u8; HEADER], Payload<'_>) {
        let (kind, payload) = match self {
            Frame::Data(bytes, _) => (FRAME_DATA, Payload::Shared(bytes)),
            Frame::Control(control) => (
                FRAME_CONTROL,
                Payload::Owned(serde_json::to_vec(&control.to_value()).unwrap_or_default()),
            ),
        };
        let len = (payload.as_ref().len() as u32).to_be_bytes();
        ([kind, len[0], len[1], len[2], len[3]], payload)
    }

    /// Encodes the frame into bytes (for small frames; output goes through [`write_frames`]).
    pub fn encode(&self) -> Vec<u8> {
        let (header, payload) = self.parts();
        let mut out = Vec::with_capacity(HEADER + payload.as_ref().len());
        out.extend_from_slice(&header);
        out.extend_from_slice(payload.as_ref());
        out
    }

    /// The payload of a complete data frame at the front of `buf`, borrowed, and the bytes
    /// the frame takes; `None` when `buf` does not start with a whole data frame (a control
    /// frame, a malformed one or a partial one is left for [`Frame::read`]). A reader with
    /// bytes buffered uses it to take every data frame already there without copying them
    /// (the attach client writes consecutive data frames to its terminal in one `writev`).
    pub fn buffered_data(buf: &[u8]) -> Option<(&[u8], usize)> {
        match whole_frame(buf) {
            Ok(Some((FRAME_DATA, payload, used))) => Some((payload, used)),
            _ => None,
        }
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

    /// Reads one frame, or the reason a control frame was not understood. Not cancel-safe
    /// (a read dropped half-way loses the bytes it took): a reader that waits for anything
    /// else at the same time uses a [`FrameReader`].
    async fn read_one<R: AsyncRead + Unpin>(
        reader: &mut R,
    ) -> std::io::Result<Option<Result<Frame, String>>> {
        let mut header = [0u8; HEADER];
        match reader.read_exact(&mut header).await {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(err) => return Err(err),
        }
        let len = payload_len(&header)?;
        match header[0] {
            FRAME_DATA => {
                // Read straight into the shared allocation (collecting a sized iterator into
                // an `Arc<[u8]>` allocates once), so the payload is not copied again.
                let mut payload: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
                let Some(buf) = Arc::get_mut(&mut payload) else {
                    return Err(std::io::Error::other("a new frame buffer is shared"));
                };
                reader.read_exact(buf).await?;
                Ok(Some(Ok(Frame::Data(payload, PenOnly::NONE))))
            }
            kind => {
                let mut payload = vec![0u8; len];
                reader.read_exact(&mut payload).await?;
                decode(kind, &payload).map(Some)
            }
        }
    }
}

/// The payload length a frame header gives, refused over [`MAX_FRAME`].
fn payload_len(header: &[u8]) -> std::io::Result<usize> {
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("attach frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
        ));
    }
    Ok(len)
}

/// The frame of type `kind` whose payload is `payload`, or the reason a control frame was not
/// understood (passed over by the readers).
fn decode(kind: u8, payload: &[u8]) -> std::io::Result<Result<Frame, String>> {
    match kind {
        FRAME_DATA => Ok(Ok(Frame::data(payload))),
        FRAME_CONTROL => {
            let value = serde_json::from_slice(payload).map_err(|err| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("attach control frame is not JSON: {err}"),
                )
            })?;
            Ok(Control::from_value(value).map(Frame::Control))
        }
        other => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unknown attach frame type {other}"),
        )),
    }
}

/// The frame whole at the front of `buf`: its type, its payload and the bytes it takes;
/// `None` while it is not all there, an error when its header is over [`MAX_FRAME`].
fn whole_frame(buf: &[u8]) -> std::io::Result<Option<(u8, &[u8], usize)>> {
    if buf.len() < HEADER {
        return Ok(None);
    }
    let len = payload_len(buf)?;
    if buf.len() < HEADER + len {
        return Ok(None);
    }
    Ok(Some((buf[0], &buf[HEADER..HEADER + len], HEADER + len)))
}

/// Spare room a [`FrameReader`] keeps for each read.
const MIN_READ: usize = 64 * 1024;

/// Reads frames, cancel-safe: the one await is a read into the reader's own buffer, which
/// either completes (the bytes are kept) or takes nothing, and a frame is taken out of the
/// buffer only whole. A [`FrameReader::read`] dropped half-way — another branch of a
/// `select!` won, a timeout passed — therefore loses nothing, and the next one goes on where
/// it stopped. The attach client waits for the pane host's frames, its keyboard, signals and
/// timers at once, and [`Frame::read`] lost the part of a frame it had read whenever one of
/// those came first, after which every frame was read from the wrong place.
pub struct FrameReader<R> {
    inner: R,
    /// Bytes read and not yet taken, from `start`.
    buf: Vec<u8>,
    start: usize,
    /// The capacity the buffer goes back to once empty after a large frame.
    capacity: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Reads from `inner`; `buffered` is what an earlier reader of the same stream had read
    /// past its last line (the attach handshake), taken first.
    pub fn new(inner: R, buffered: &[u8], capacity: usize) -> FrameReader<R> {
        let mut buf = Vec::with_capacity(capacity.max(buffered.len()));
        buf.extend_from_slice(buffered);
        FrameReader {
            inner,
            buf,
            start: 0,
            capacity,
        }
    }

    /// The next frame; `Ok(None)` at the end of the stream between frames (or inside a
    /// header, as [`Frame::read`] has it). A control frame this version does not understand
    /// is logged and passed over.
    pub async fn read(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some((kind, payload, used)) = whole_frame(self.buffered())? {
                let frame = decode(kind, payload)?;
                self.start += used;
                match frame {
                    Ok(frame) => return Ok(Some(frame)),
                    Err(ignored) => {
                        tracing::warn!("{ignored}; ignored");
                        continue;
                    }
                }
            }
            self.make_room();
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                if self.buffered().len() < HEADER {
                    return Ok(None);
                }
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the attach stream ended inside a frame",
                ));
            }
        }
    }

    /// Room for the next read: the taken bytes dropped, and at least [`MIN_READ`] spare.
    fn make_room(&mut self) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            if self.buf.capacity() > 4 * self.capacity {
                self.buf.shrink_to(self.capacity);
            }
        } else if self.start > 0 && self.buf.capacity() - self.buf.len() < MIN_READ {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(MIN_READ);
    }

    /// The bytes read and not yet taken: whole frames a caller may take without copying them
    /// ([`Frame::buffered_data`], then [`FrameReader::consume`]), and the start of the next.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Takes `n` bytes of [`FrameReader::buffered`] (whole frames the caller took).
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }
}

/// A frame's payload: shared output bytes, or a control frame's freshly encoded JSON.
enum Payload<'a> {
    Shared(&'a Arc<[u8]>),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Payload<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Payload::Shared(bytes) => bytes,
            Payload::Owned(bytes) => bytes,
        }
    }
}

/// Writes `frames` (at most [`MAX_BATCH`] are taken at a time) with vectored writes: every
/// header and payload of a batch go to the kernel in one `writev`, with no copy of the
/// payloads, and the rest of a partial write follows until all of it is written.
pub async fn write_frames<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frames: &[Frame],
) -> std::io::Result<()> {
    for batch in frames.chunks(MAX_BATCH) {
        let parts: Vec<_> = batch.iter().map(Frame::parts).collect();
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(parts.len() * 2);
        for (header, payload) in &parts {
            slices.push(IoSlice::new(header));
            if !payload.as_ref().is_empty() {
                slices.push(IoSlice::new(payload.as_ref()));
            }
        }
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            let n = writer.write_vectored(rest).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut rest, n);
        }
    }
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn frames_round_trip_and_a_control_not_understood_is_passed_over() {
        let frames = [
            Frame::data(b"abc"),
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

    /// A writer that takes at most 7 bytes per call, so vectored writes end mid-slice.
    struct Trickle(Vec<u8>);

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(7);
            self.0.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let first = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &b[..]);
            self.poll_write(cx, first)
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn vectored_batches_survive_partial_writes_and_are_taken_from_a_buffer() {
        // More frames than one batch, an empty payload, and a control frame between data.
        let mut frames: Vec<Frame> = (0..150u32)
            .map(|i| Frame::data(&vec![i as u8; (i % 13) as usize]))
            .collect();
        frames.insert(70, Frame::Control(Control::Detach { reason: None }));
        let mut out = Trickle(Vec::new());
        write_frames(&mut out, &frames).await.unwrap();
        let expected: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        assert_eq!(out.0, expected);
        // The data frames before the control one come off the buffer at once; the control
        // frame (and a partial frame) are left for `Frame::read`.
        let mut at = 0;
        for f in &frames[..70] {
            let (got, used) = Frame::buffered_data(&out.0[at..]).unwrap();
            assert_eq!(&Frame::data(got), f);
            at += used;
        }
        assert!(Frame::buffered_data(&out.0[at..]).is_none());
        let mut reader = &out.0[at..];
        assert_eq!(
            Frame::read(&mut reader).await.unwrap().as_ref(),
            Some(&frames[70])
        );
        let bytes = Frame::data(b"partial").encode();
        assert!(Frame::buffered_data(&bytes[..bytes.len() - 1]).is_none());
        assert_eq!(
            Frame::buffered_data(&bytes),
            Some((&b"partial"[..], bytes.len()))
        );
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

    /// A [`FrameReader::read`] dropped at any point (here: polled once and dropped whenever
    /// the frame is not whole yet, as a `select!` or a timeout drops it) loses nothing: every frame comes out whole and
    /// in order, data frames of up to 300 KiB written in pieces of random size among control
    /// frames, one not understood, and the bytes a handshake had read ahead first.
    #[tokio::test]
    async fn frames_survive_reads_dropped_half_way() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut frames = Vec::new();
        for i in 0..200 {
            frames.push(match next(5) {
                0 => Frame::Control(Control::Paused),
                _ => {
                    let len = if next(10) == 0 {
                        1 + next(300 * 1024)
                    } else {
                        1 + next(3000)
                    };
                    Frame::data(&vec![(i % 251) as u8; len])
                }
            });
        }
        let mut stream: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        // A control frame from a newer peer, in the middle: passed over.
        let unknown = {
            let json = br#"{"from_the_future":true}"#;
            let mut bytes = vec![FRAME_CONTROL];
            bytes.extend_from_slice(&(json.len() as u32).to_be_bytes());
            bytes.extend_from_slice(json);
            bytes
        };
        let middle = frames[..100]
            .iter()
            .map(|f| f.encode().len())
            .sum::<usize>();
        stream.splice(middle..middle, unknown);
        let ahead = 7 + next(20);
        let (near, mut far) = tokio::io::duplex(4096);
        let mut pieces = Vec::new();
        let mut at = ahead;
        while at < stream.len() {
            let n = (1 + next(9000)).min(stream.len() - at);
            pieces.push(stream[at..at + n].to_vec());
            at += n;
        }
        let writer = tokio::spawn(async move {
            for piece in pieces {
                far.write_all(&piece).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut reader = FrameReader::new(near, &stream[..ahead], 16 * 1024);
        let mut got = Vec::new();
        let mut dropped = 0;
        while got.len() < frames.len() {
            // Polled once, and dropped if the frame is not whole yet; then the writer goes on.
            let polled = {
                let read = reader.read();
                tokio::pin!(read);
                std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(std::future::Future::poll(read.as_mut(), cx))
                })
                .await
            };
            match polled {
                std::task::Poll::Ready(frame) => {
                    got.push(frame.unwrap().expect("a frame, not the end"));
                }
                std::task::Poll::Pending => {
                    dropped += 1;
                    tokio::task::yield_now().await;
                }
            }
        }
        writer.await.unwrap();
        assert!(dropped > 10, "only {dropped} reads were dropped half-way");
        assert_eq!(got.len(), frames.len());
        for (i, (got, want)) in got.iter().zip(&frames).enumerate() {
            assert!(got == want, "frame {i} differs");
        }
        assert_eq!(reader.read().await.unwrap(), None, "the end of the stream");
    }
}
