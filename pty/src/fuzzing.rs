//! Entry points for the coverage-guided fuzz targets in `fuzz/` (feature `fuzzing`; never in a
//! release build).
//!
//! [`screen_against_core`] plays a script decoded from the fuzzer's bytes against two screen
//! models: the one the pane host runs (compact history, held tails, lines that skip the core)
//! and the reference whose history stays in the terminal core's grid. Every reader must give
//! the same answer from both, whatever the program printed and however it was cut into reads.
//! The property tests in `history.rs` check the same with generated output; the fuzzer finds
//! its own inputs, guided by which branches they reach.
//!
//! [`program_status`] finds the OSC 7501 strings in a program's output cut into reads any way,
//! and keeps the records they report: the strings found do not depend on the cuts, and every
//! record kept is within the protocol's limits, holds no control character, and written again
//! as a report reads back as itself.
//!
//! [`attach_frames`] reads an attach stream (what a pane host, or the far end of an ssh
//! connection, sends an attached client) with both frame readers, cut into reads any way and
//! with reads given up half-way, and panics where they disagree or where a frame does not read
//! back as written.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, ReadBuf};

use crate::restore::Outer;
use crate::screen::{PenOnlyRun, Screen};
use crate::wire::{Frame, FrameReader};

/// Reads `data` as a program's output: its first byte seeds where the output is cut into
/// reads, the rest is the output. Panics if the OSC 7501 strings found depend on the cuts, if
/// a record kept breaks the protocol's limits or holds a control character, if more records
/// are kept than the cap, or if a record written again as a report does not read back as
/// itself. Returns how many strings were found.
pub fn program_status(data: &[u8]) -> usize {
    use crate::program_status::{parse, Message, Records, MAX_RECORDS};
    use crate::queries::{Query, Scanner};
    let Some((&seed, output)) = data.split_first() else {
        return 0;
    };
    let strings = |cuts: &mut dyn FnMut(usize) -> usize| {
        let mut scanner = Scanner::default();
        let mut found = Vec::new();
        let mut rest = output;
        while !rest.is_empty() {
            let (read, tail) = rest.split_at(cuts(rest.len()).clamp(1, rest.len()));
            let mut start = 0;
            while let Some((at, query)) = scanner.find(&read[start..]) {
                if let Query::Status(string) = query {
                    found.push(string);
                }
                start += at + 1;
            }
            rest = tail;
        }
        found
    };
    let whole = strings(&mut |len| len);
    let mut state = u32::from(seed) | 1;
    let cut = strings(&mut |len| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        1 + state as usize % len.min(64)
    });
    assert_eq!(
        whole, cut,
        "the strings found depend on how the output was read"
    );
    let found = whole.len();
    let mut records = Records::default();
    let mut changes = Vec::new();
    for (revision, string) in whole.into_iter().enumerate() {
        records.take(string, revision as u64, "fuzz", 0, &mut changes);
    }
    let status = records.status();
    assert!(status.records.len() <= MAX_RECORDS);
    for record in &status.records {
        let texts = [&record.msg, &record.title, &record.app, &record.id];
        for text in texts.into_iter().flatten() {
            assert!(!text.chars().any(char::is_control), "{record:?}");
        }
        assert!(record.progress.is_none_or(|p| p <= 100));
        let body = report_of(record);
        match parse(body.as_bytes()) {
            Ok(Message::Report(report)) => {
                assert_eq!(
                    (&report.id, report.state, report.kind, &report.app),
                    (&record.id, record.state, record.kind, &record.app)
                );
                assert_eq!(
                    (&report.msg, &report.title, report.progress),
                    (&record.msg, &record.title, record.progress)
                );
            }
            other => panic!("{body:?} read back as {other:?}"),
        }
    }
    found
}

/// A record written as the report that makes it.
fn report_of(record: &belfry_proto::program_status::StatusRecord) -> String {
    use base64::Engine as _;
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let mut pairs = vec![format!("state={}", record.state.as_str())];
    pairs.extend(record.kind.map(|k| format!("kind={}", k.as_str())));
    pairs.extend(record.id.as_ref().map(|id| format!("id={id}")));
    pairs.extend(record.app.as_ref().map(|app| format!("app={app}")));
    pairs.extend(record.msg.as_deref().map(|m| format!("msg={}", encode(m))));
    pairs.extend(
        record
            .title
            .as_deref()
            .map(|t| format!("title={}", encode(t))),
    );
    pairs.extend(record.progress.map(|p| format!("progress={p}")));
    pairs.join(":")
}

/// Reads the script's bytes one at a time; an exhausted script reads zeros.
struct Script<'a> {
    bytes: &'a [u8],
}

impl<'a> Script<'a> {
    fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((first, rest)) => {
                self.bytes = rest;
                *first
            }
            None => 0,
        }
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = rest;
        taken
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A size the core accepts: two columns at least (with one, alacritty_terminal indexes past
/// the row on a wide character; the pane host's model survives that panic, see
/// [`Screen::apply`], but the two models could not be compared after it).
fn size(script: &mut Script) -> (u16, u16) {
    (
        1 + u16::from(script.byte() % 12),
        2 + u16::from(script.byte() % 40),
    )
}

/// Plays `data` against the pane host's screen model and the reference model, and panics at
/// the first reader whose answers differ.
///
/// The script: a size and a line cap, then operations until the bytes run out. An operation
/// byte `op` picks, by `op % 16`: a resize (0), the release of spare rows (1), a clear (2, one
/// time in four), every reader compared (3), otherwise output: the next byte is its length,
/// and it is applied in one piece, as `Screen::apply` (odd `op`) or as the pane host's reader
/// applies it (`apply_deferring`, even `op`), the turn then ended when `op >= 128`.
///
/// Returns how many operations it played.
pub fn screen_against_core(data: &[u8]) -> usize {
    let mut script = Script { bytes: data };
    let (rows, cols) = size(&mut script);
    let cap = usize::from(script.byte() % 150);
    let mut compact = Screen::new(rows, cols, cap);
    let mut core = Screen::with_core_history(rows, cols, cap);
    play(&mut compact, &mut core, script)
}

fn play(compact: &mut Screen, core: &mut Screen, mut script: Script) -> usize {
    let mut step = 0;
    while !script.is_empty() {
        step += 1;
        let op = script.byte();
        match op % 16 {
            0 => {
                let (rows, cols) = size(&mut script);
                compact.resize(rows, cols);
                core.resize(rows, cols);
            }
            1 => {
                compact.release_spare_rows();
            }
            2 => {
                if script.byte().is_multiple_of(4) {
                    compact.clear();
                    core.clear();
                }
            }
            3 => assert_agree(compact, core, &format!("step {step}")),
            _ => {
                let len = usize::from(script.byte());
                let piece = script.take(len);
                let theirs = core.apply(piece);
                let ours = if op % 2 == 1 {
                    compact.apply(piece)
                } else {
                    compact.apply_deferring(piece)
                };
                assert_eq!(
                    ours,
                    theirs,
                    "step {step}: answers to {:?}",
                    String::from_utf8_lossy(piece)
                );
                if op >= 128 {
                    compact.end_turn();
                }
            }
        }
    }
    assert_agree(compact, core, "end");
    step
}

/// Output written to an attached client's terminal, recorded as the pane host records it:
/// the screen model reports the ranges of each reader turn it read as plain or styled lines,
/// the record skips their inside ([`Outer::observe_output`]), and must end the same as the
/// record that scans every byte ([`Outer::observe`]): what detaching restores, and the bytes
/// that restore it. Each range holds only text and whole SGRs, as promised.
///
/// The script: a column count and a count of reads per turn, then reads until the bytes run
/// out, each a length byte and that many bytes of output. Returns how many bytes the ranges
/// claimed.
pub fn pen_only_record(data: &[u8]) -> usize {
    let mut script = Script { bytes: data };
    let cols = 1 + u16::from(script.byte() % 40);
    let per_turn = 1 + usize::from(script.byte() % 4);
    let mut stream = Vec::new();
    let mut reads = Vec::new();
    while !script.is_empty() {
        let len = usize::from(script.byte());
        let read = script.take(len);
        stream.extend_from_slice(read);
        reads.push(read.len().max(1));
    }
    let mut reads = reads.into_iter();
    let mut screen = Screen::new(4, cols, 50);
    let (mut scanned, mut told) = (Outer::default(), Outer::default());
    let mut claimed = 0;
    for (bytes, ranges) in turns(&mut screen, &stream, || reads.next().unwrap_or(1), per_turn) {
        let bytes = &stream[bytes];
        for range in &ranges {
            assert!(
                only_text_and_sgr(&bytes[range.clone()]),
                "{range:?} of {:?}",
                String::from_utf8_lossy(bytes)
            );
            claimed += range.len();
        }
        scanned.observe(bytes);
        told.observe_output(bytes, ranges);
    }
    let shown = String::from_utf8_lossy(&stream).into_owned();
    assert_eq!(told.modes(), scanned.modes(), "{shown:?}");
    assert_eq!(told.undo(), scanned.undo(), "{shown:?}");
    claimed
}

/// `stream` applied to `screen` in reads of the sizes `read` gives, `per_turn` reads to a
/// turn, as the pane host's reader applies output: each turn's bytes (a range of
/// `stream`) and the ranges of them the model reported.
pub(crate) fn turns(
    screen: &mut Screen,
    stream: &[u8],
    mut read: impl FnMut() -> usize,
    per_turn: usize,
) -> Vec<(Range<usize>, Vec<Range<usize>>)> {
    let mut turns = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let start = at;
        let mut run = PenOnlyRun::default();
        for _ in 0..per_turn {
            let n = read().min(stream.len() - at);
            let _ = screen.apply_deferring(&stream[at..at + n]);
            run.applied(screen, n);
            at += n;
        }
        turns.push((start..at, run.ranges().collect()));
    }
    turns
}

/// Whether `bytes` holds only text and whole SGR sequences of digits and `;`: what a
/// [`Screen::pen_only`] range promises.
pub(crate) fn only_text_and_sgr(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            0x0e | 0x0f => return false,
            0x1b => {
                let Some(params) = bytes[at + 1..].strip_prefix(b"[") else {
                    return false;
                };
                let len = params
                    .iter()
                    .position(|&b| !matches!(b, b'0'..=b'9' | b';'))
                    .unwrap_or(params.len());
                if params.get(len) != Some(&b'm') {
                    return false;
                }
                at += 3 + len;
            }
            _ => at += 1,
        }
    }
    true
}

/// Every reader of the screen, compared between the pane host's model and the reference.
pub(crate) fn assert_agree(compact: &mut Screen, core: &mut Screen, context: &str) {
    assert_eq!(compact.lines(), core.lines(), "{context}: lines");
    assert_eq!(compact.ansi_lines(), core.ansi_lines(), "{context}: ansi");
    assert_eq!(compact.cells(), core.cells(), "{context}: cells");
    assert_eq!(compact.cursor(), core.cursor(), "{context}: cursor");
    // Counted first (as a snapshot counts, without encoding when it need not), then read.
    assert_eq!(
        compact.history_count(),
        core.history_len(),
        "{context}: history counted"
    );
    assert_eq!(
        compact.history_len(),
        core.history_len(),
        "{context}: history"
    );
    assert_eq!(
        compact.scrollback(0, usize::MAX),
        core.scrollback(0, usize::MAX),
        "{context}: scrollback"
    );
    let start = core.history_len() / 2;
    assert_eq!(
        compact.scrollback(start, 7),
        core.scrollback(start, 7),
        "{context}: scrollback from {start}"
    );
    assert_eq!(compact.redraw(), core.redraw(), "{context}: redraw");
    assert_eq!(compact.modes(), core.modes(), "{context}: modes");
}

/// Reads `data` as an attach stream with [`Frame::read`] (the whole stream at once) and with a
/// [`FrameReader`] (the stream cut into reads, some reads given up half-way, as the attach
/// client's `select!` does when a key or a timer comes first), and panics when:
/// - the two read other frames, or end differently (a clean end, or an error of another kind);
/// - a data frame the reader holds whole is not what [`Frame::buffered_data`] borrows for it;
/// - a frame, written again and read back, is not the same frame (a control that does not
///   survive its own encoding).
///
/// The script: a count `k` (the first byte, up to 8) and `k` bytes that cut the rest into
/// reads: each read takes `b % 61 + 1` bytes for the next byte `b` of them in turn, and the
/// read of the reader that gets it is given up after its first poll when `b >= 128`. With `k`
/// = 0 the stream comes in one read. Returns the frames read.
pub fn attach_frames(data: &[u8]) -> usize {
    let k = usize::from(data.first().copied().unwrap_or(0) % 9);
    let cuts = data.get(1..1 + k).unwrap_or_default();
    let stream = data.get(1 + k..).unwrap_or_default();
    let whole = read_all_at_once(stream);
    let mut reader = FrameReader::new(Chunked::new(stream, cuts), &[], 1024);
    let mut frames = Vec::new();
    let mut turn = 0usize;
    let end = loop {
        if let Some((payload, _)) = Frame::buffered_data(reader.buffered()) {
            let payload = payload.to_vec();
            match ready(reader.read()) {
                Ok(Some(Frame::Data(read, _))) => assert_eq!(&read[..], &payload[..]),
                other => panic!("buffered a data frame of {payload:?}, read {other:?}"),
            }
            frames.push(Frame::data(&payload));
            continue;
        }
        let give_up = cuts.get(turn % k.max(1)).is_some_and(|&b| b >= 128);
        turn += 1;
        let read = {
            let mut future = std::pin::pin!(reader.read());
            match poll_once(future.as_mut()) {
                Poll::Ready(read) => Some(read),
                // Dropped half-way: whatever it read stays in the reader.
                Poll::Pending if give_up => None,
                Poll::Pending => Some(ready(future)),
            }
        };
        match read {
            None => {}
            Some(Ok(Some(frame))) => frames.push(frame),
            Some(Ok(None)) => break Ok(()),
            Some(Err(err)) => break Err(err.kind()),
        }
    };
    assert_eq!(
        (&frames, &end),
        (&whole.0, &whole.1),
        "the frame reader read {stream:?} otherwise than Frame::read"
    );
    for frame in &frames {
        let written = frame.encode();
        let (again, again_end) = read_all_at_once(&written);
        assert_eq!(
            again,
            std::slice::from_ref(frame),
            "{frame:?} did not read back"
        );
        assert_eq!(again_end, Ok(()));
    }
    frames.len()
}

/// The frames [`Frame::read`] reads from `stream` given whole, and how it ended: cleanly, or
/// with an error of that kind.
fn read_all_at_once(mut stream: &[u8]) -> (Vec<Frame>, Result<(), std::io::ErrorKind>) {
    let mut frames = Vec::new();
    loop {
        match ready(Frame::read(&mut stream)) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, Ok(())),
            Err(err) => return (frames, Err(err.kind())),
        }
    }
}

/// Polls `future` once.
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls `future` until it is ready. The readers here wait on nothing but a [`Chunked`] stream
/// or a slice, which is ready again at the next poll, so each poll makes progress.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = poll_once(future.as_mut()) {
            return output;
        }
    }
}

/// A stream that gives its bytes in reads of the sizes its cuts say, each after a poll that
/// is not ready (as a socket is, until the bytes arrive).
struct Chunked<'a> {
    rest: &'a [u8],
    cuts: &'a [u8],
    turn: usize,
    arrived: bool,
}

impl<'a> Chunked<'a> {
    fn new(stream: &'a [u8], cuts: &'a [u8]) -> Chunked<'a> {
        Chunked {
            rest: stream,
            cuts,
            turn: 0,
            arrived: false,
        }
    }
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.arrived {
            self.arrived = true;
            return Poll::Pending;
        }
        self.arrived = false;
        let size = match self.cuts.get(self.turn % self.cuts.len().max(1)) {
            Some(&b) => usize::from(b % 61) + 1,
            None => self.rest.len(),
        };
        self.turn += 1;
        let n = size.min(self.rest.len()).min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script: rows, columns and line cap bytes, then each operation and what follows
    /// it: an output's bytes (its length is put in front), a resize's two size bytes, a
    /// clear's one.
    fn script(size: [u8; 3], ops: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = size.to_vec();
        for (op, follows) in ops {
            out.push(*op);
            if op % 16 >= 4 {
                out.push(follows.len() as u8);
            }
            out.extend_from_slice(follows);
        }
        out
    }

    fn lines(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("line {i}\r\n").into_bytes())
            .collect()
    }

    #[test]
    fn the_program_status_target_reads_reports_however_cut() {
        let mut data = vec![7u8];
        data.extend_from_slice(
            b"x\x1b]7501;state=blocked:kind=auth:id=a/b:app=t:msg=aGk=:progress=5\x07",
        );
        data.extend_from_slice(
            b"\x1b]7501;?\x1b\\\x1b]7501;state=nope\x1b\\\x1b]7501;state=idle\x18",
        );
        for seed in 0..=255u8 {
            data[0] = seed;
            assert_eq!(program_status(&data), 4);
        }
        assert_eq!(program_status(&[]), 0);
    }

    #[test]
    fn the_screen_target_plays_every_operation() {
        let many = lines(24);
        let styled = b"\x1b[31mred\x1b[0m plain\r\n\x1b[1;42mbold\x1b[m\r\n".repeat(4);
        let data = script(
            [3, 8, 20],
            &[
                (4, &many),
                (3, b""),
                (132, &styled),
                (5, b"\x1b[?1049hin the alternate screen\x1b[?1049l"),
                (0, &[5, 20]),
                (1, b""),
                (6, &many),
                (3, b""),
                (2, &[0]),
                (4, &many),
            ],
        );
        assert_eq!(screen_against_core(&data), 10);
        // An empty or short script is a blank screen of the smallest size, compared.
        assert_eq!(screen_against_core(b""), 0);
    }

    /// The comparison fails when the pane host's model is wrong: here it drops everything
    /// it had at a byte (as after a panic inside the terminal core), the reference does not.
    #[test]
    fn the_record_target_claims_coloured_lines() {
        let lines = b"\x1b[31mred\x1b[0m and plain\r\n".repeat(6);
        let mut data = vec![20, 1];
        for piece in lines.chunks(50) {
            data.push(piece.len() as u8);
            data.extend_from_slice(piece);
        }
        data.extend_from_slice(&[9, 0x1b, b'[', b'?', b'1', b'0', b'4', b'9', b'h', b'x']);
        assert!(pen_only_record(&data) > 100);
    }

    /// Frames of every kind, an unknown control (passed over) and a frame cut off by the
    /// end, read whole, cut into reads of 1 to 61 bytes and with reads given up half-way.
    #[test]
    fn the_frame_target_reads_every_kind_of_frame_however_cut() {
        use belfry_proto::{Control, ExitStatus, Size};
        let mut stream = Vec::new();
        for frame in [
            Frame::data(b"output \x1b[31mred\x1b[m"),
            Frame::Control(Control::Resize(Size::new(30, 100).expect("a size"))),
            Frame::Control(Control::Keys(vec![2, 100])),
            Frame::Control(Control::Detach {
                reason: Some("requested".into()),
            }),
            Frame::data(&[7; 300]),
            Frame::Control(Control::Exited(ExitStatus {
                code: Some(3),
                signal: None,
            })),
        ] {
            stream.extend_from_slice(&frame.encode());
        }
        let unknown = br#"{"from-a-newer-peer":1}"#;
        stream.push(2);
        stream.extend_from_slice(&(unknown.len() as u32).to_be_bytes());
        stream.extend_from_slice(unknown);
        stream.extend_from_slice(&Frame::data(b"after it").encode());
        for cuts in [&[][..], &[0], &[5, 200, 60], &[130, 1, 255, 17]] {
            let mut data = vec![cuts.len() as u8];
            data.extend_from_slice(cuts);
            data.extend_from_slice(&stream);
            assert_eq!(attach_frames(&data), 7, "cuts {cuts:?}");
            // Cut off inside the last frame: both readers read six and fail alike.
            data.truncate(data.len() - 3);
            assert_eq!(attach_frames(&data), 6, "cuts {cuts:?}, cut off");
        }
    }

    #[test]
    fn a_model_that_loses_its_screen_is_found() {
        let mut compact = Screen::new(4, 10, 50);
        let mut core = Screen::with_core_history(4, 10, 50);
        compact.panic_on = Some(b'!');
        let data = script([0; 3], &[(4, b"kept\r\n"), (4, b"!"), (3, b"")]);
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            play(&mut compact, &mut core, Script { bytes: &data[3..] })
        }));
        assert!(found.is_err(), "the lost screen was not noticed");
    }
}
