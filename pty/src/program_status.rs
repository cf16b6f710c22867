//! OSC 7501, the Program Status Protocol (revision 0.4): a program says what it is doing
//! (`idle`, `working`, `blocked` with a kind, `done`, `error`) in a string the terminal keeps
//! and does not show. The pane host speaks it as a terminal that supports it: it answers the
//! query (`ESC ] 7501 ; ? ST`) with the same sequence, whether a client is attached or not,
//! and keeps the last report for each record id, stamped with the revision it arrived at.
//!
//! [`crate::queries`] finds the strings in the output; [`parse`] reads a body; [`Records`]
//! keeps what the reports say. The grammar implemented (`docs/decisions.md` has it whole):
//! `BODY = "?" | PAIR *(":" PAIR)`, `PAIR = KEY "=" VALUE`, keys of `a-z`, values of
//! `A-Za-z0-9_.,+/=-`. A pair that breaks the grammar and an unknown key are skipped; a
//! repeated key's last value wins; a report without a known `state`, or with a bad `id`,
//! `app`, `progress`, `msg` or `title`, is dropped whole and counted.

use base64::Engine as _;
use belfry_proto::program_status::{
    BlockedKind, ProgramState, ProgramStatus, StatusCause, StatusRecord,
};

pub use crate::queries::{StatusString, Terminator, MAX_STATUS_SEQUENCE};

/// The records a pane host keeps at most; the least recently reported goes first. The
/// protocol asks a terminal to keep at least 64 (and at most 256).
pub const MAX_RECORDS: usize = 64;

/// Key length in bytes (revision 0.4 "Limits").
const MAX_KEY: usize = 16;
/// `app`, bytes.
const MAX_APP: usize = 32;
/// `id`, bytes in all, bytes a segment, and segments.
const MAX_ID: usize = 128;
const MAX_ID_SEGMENT: usize = 32;
const MAX_ID_DEPTH: usize = 8;
/// `msg` and `title`: base64 bytes, and decoded bytes.
const MAX_MSG_ENCODED: usize = 2732;
const MAX_MSG: usize = 2048;
const MAX_TITLE_ENCODED: usize = 256;
const MAX_TITLE: usize = 192;

/// What one OSC 7501 body says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `?`: the program asks whether the terminal speaks the protocol.
    Query,
    /// A report for the record `id` (`None`: the root record).
    Report(Report),
    /// `state=clear`: the record `id` and every record beneath it go.
    Clear { id: Option<String> },
}

/// A report, checked: every field within the protocol's grammar and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub id: Option<String>,
    pub state: ProgramState,
    pub kind: Option<BlockedKind>,
    pub app: Option<String>,
    pub msg: Option<String>,
    pub title: Option<String>,
    pub progress: Option<u8>,
}

/// Why a body was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("no state")]
    NoState,
    #[error("the value of {0:?} holds a byte outside A-Za-z0-9_.,+/=-")]
    Value(String),
    #[error("unknown state {0:?}")]
    UnknownState(String),
    #[error("bad id: {0}")]
    Id(&'static str),
    #[error("bad app: {0}")]
    App(&'static str),
    #[error("bad progress {0:?}: 0 to 100")]
    Progress(String),
    #[error("bad {field}: {why}")]
    Text {
        field: &'static str,
        why: &'static str,
    },
}

/// Reads one OSC 7501 body (what lies between `ESC ] 7501 ;` and the terminator).
pub fn parse(body: &[u8]) -> Result<Message, Malformed> {
    if body == b"?" {
        return Ok(Message::Query);
    }
    let mut fields = Fields::default();
    for pair in body.split(|&b| b == b':') {
        let Some(eq) = pair.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (key, value) = (&pair[..eq], &pair[eq + 1..]);
        let key_ok =
            !key.is_empty() && key.len() <= MAX_KEY && key.iter().all(u8::is_ascii_lowercase);
        if !key_ok {
            continue;
        }
        let field = match key {
            b"state" => &mut fields.state,
            b"kind" => &mut fields.kind,
            b"app" => &mut fields.app,
            b"msg" => &mut fields.msg,
            b"title" => &mut fields.title,
            b"id" => &mut fields.id,
            b"progress" => &mut fields.progress,
            // Keys of later revisions are skipped, as the spec asks.
            _ => continue,
        };
        // A known key whose value breaks the grammar drops the report: what it would say
        // without that value is not what the program said.
        if !value.iter().copied().all(is_value_byte) {
            return Err(Malformed::Value(String::from_utf8_lossy(key).into_owned()));
        }
        // Every byte is ASCII by now.
        *field = Some(String::from_utf8_lossy(value).into_owned());
    }
    fields.message()
}

/// The known keys of a body, raw, the last value of each.
#[derive(Default)]
struct Fields {
    state: Option<String>,
    kind: Option<String>,
    app: Option<String>,
    msg: Option<String>,
    title: Option<String>,
    id: Option<String>,
    progress: Option<String>,
}

impl Fields {
    fn message(self) -> Result<Message, Malformed> {
        let state = self.state.ok_or(Malformed::NoState)?;
        let id = self.id.map(checked_id).transpose()?;
        if state == "clear" {
            return Ok(Message::Clear { id });
        }
        let state = ProgramState::parse(&state).ok_or(Malformed::UnknownState(state))?;
        // A kind belongs to `blocked`; an unknown one (a later revision's) leaves the
        // record blocked for a reason not said.
        let kind = match state {
            ProgramState::Blocked => self.kind.as_deref().and_then(BlockedKind::parse),
            _ => None,
        };
        let app = self.app.map(checked_app).transpose()?;
        let progress = self
            .progress
            .map(|p| match p.parse::<u8>() {
                Ok(n) if n <= 100 => Ok(n),
                _ => Err(Malformed::Progress(p)),
            })
            .transpose()?;
        let msg = self
            .msg
            .map(|m| decoded("msg", &m, MAX_MSG_ENCODED, MAX_MSG))
            .transpose()?;
        let title = self
            .title
            .map(|t| decoded("title", &t, MAX_TITLE_ENCODED, MAX_TITLE))
            .transpose()?;
        Ok(Message::Report(Report {
            id,
            state,
            kind,
            app,
            msg,
            title,
            progress,
        }))
    }
}

/// A value byte: the protocol's set, which holds base64's alphabet, ids and app names.
fn is_value_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b',' | b'+' | b'/' | b'=' | b'-')
}

fn checked_id(id: String) -> Result<String, Malformed> {
    if id.len() > MAX_ID {
        return Err(Malformed::Id("longer than 128 bytes"));
    }
    let segments = id.split('/');
    if segments.clone().count() > MAX_ID_DEPTH {
        return Err(Malformed::Id("more than 8 segments"));
    }
    for segment in segments {
        if segment.is_empty() || segment.len() > MAX_ID_SEGMENT {
            return Err(Malformed::Id("a segment is empty or longer than 32 bytes"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        {
            return Err(Malformed::Id("a segment holds a byte outside A-Za-z0-9_.-"));
        }
    }
    Ok(id)
}

fn checked_app(app: String) -> Result<String, Malformed> {
    if app.is_empty() || app.len() > MAX_APP {
        return Err(Malformed::App("empty or longer than 32 bytes"));
    }
    if !app
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(Malformed::App("a byte outside A-Za-z0-9_.-"));
    }
    Ok(app)
}

/// Standard base64 (padded) of UTF-8 text without control characters: what `msg` and `title`
/// carry. Text with a control character is dropped rather than cleaned, so nothing a
/// program writes here can act on the terminal of whoever reads it later.
fn decoded(
    field: &'static str,
    value: &str,
    max_encoded: usize,
    max_decoded: usize,
) -> Result<String, Malformed> {
    let bad = |why| Malformed::Text { field, why };
    if value.len() > max_encoded {
        return Err(bad("too long"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|_| bad("not standard base64"))?;
    if bytes.len() > max_decoded {
        return Err(bad("too long decoded"));
    }
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    if text.chars().any(char::is_control) {
        return Err(bad("holds a control character"));
    }
    Ok(text)
}

/// Whether `id` is `ancestor` or beneath it; every id is beneath the root (`None`).
fn within(id: Option<&str>, ancestor: Option<&str>) -> bool {
    match (id, ancestor) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(id), Some(ancestor)) => {
            id == ancestor
                || id
                    .strip_prefix(ancestor)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }
}

/// One change to the records: the record's id, before and after, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub id: Option<String>,
    pub old: Option<StatusRecord>,
    pub new: Option<StatusRecord>,
    pub cause: StatusCause,
}

/// The records of one pane, oldest report first, and what was dropped.
#[derive(Debug, Default)]
pub struct Records {
    records: Vec<StatusRecord>,
    malformed: u64,
    oversized: u64,
    queries: u64,
}

impl Records {
    /// Takes one string the scan found at `revision` (a report of the program `incarnation`,
    /// at unix ms `now`), pushing the changes it makes to `changes`. A query is only counted:
    /// the screen model answered it in order with the other queries ([`answer_to`]).
    pub fn take(
        &mut self,
        found: StatusString,
        revision: u64,
        incarnation: &str,
        now: u64,
        changes: &mut Vec<Change>,
    ) {
        let body = match found {
            StatusString::Whole { body, .. } => body,
            StatusString::Oversized => {
                self.oversized += 1;
                return;
            }
            StatusString::Cancelled => {
                self.malformed += 1;
                return;
            }
        };
        match parse(&body) {
            Ok(Message::Query) => self.queries += 1,
            Ok(Message::Clear { id }) => {
                let doomed = |r: &StatusRecord| within(r.id.as_deref(), id.as_deref());
                self.remove(doomed, StatusCause::Clear, changes);
            }
            Ok(Message::Report(report)) => {
                self.report(report, revision, incarnation, now, changes);
            }
            Err(why) => {
                tracing::debug!("OSC 7501 report dropped: {why}");
                self.malformed += 1;
            }
        }
    }

    fn report(
        &mut self,
        report: Report,
        revision: u64,
        incarnation: &str,
        now: u64,
        changes: &mut Vec<Change>,
    ) {
        let old = self
            .records
            .iter()
            .position(|r| r.id == report.id)
            .map(|at| self.records.remove(at));
        let since = match &old {
            Some(old) if old.state == report.state && old.kind == report.kind => old.since,
            _ => now,
        };
        let new = StatusRecord {
            id: report.id,
            state: report.state,
            kind: report.kind,
            app: report.app,
            msg: report.msg,
            title: report.title,
            progress: report.progress,
            revision,
            since,
            incarnation: incarnation.to_string(),
        };
        if old.is_none() && self.records.len() >= MAX_RECORDS {
            // The least recently reported: the records are kept in report order.
            let evicted = self.records.remove(0);
            changes.push(Change {
                id: evicted.id.clone(),
                old: Some(evicted),
                new: None,
                cause: StatusCause::Evicted,
            });
        }
        if old.as_ref().is_none_or(|old| !old.same_report(&new)) {
            changes.push(Change {
                id: new.id.clone(),
                old,
                new: Some(new.clone()),
                cause: StatusCause::Report,
            });
        }
        self.records.push(new);
    }

    /// The program ended: `working`, `blocked` and `idle` end with it; `done` and `error`
    /// outlast it, until the pane's next program starts ([`Records::restarted`]).
    pub fn exited(&mut self, changes: &mut Vec<Change>) {
        self.remove(
            |r| {
                matches!(
                    r.state,
                    ProgramState::Working | ProgramState::Blocked | ProgramState::Idle
                )
            },
            StatusCause::Exit,
            changes,
        );
    }

    /// A restart starts a new program, which has reported nothing yet: every record goes.
    pub fn restarted(&mut self, changes: &mut Vec<Change>) {
        self.remove(|_| true, StatusCause::Restart, changes);
    }

    fn remove(
        &mut self,
        doomed: impl Fn(&StatusRecord) -> bool,
        cause: StatusCause,
        changes: &mut Vec<Change>,
    ) {
        let (gone, kept) = std::mem::take(&mut self.records)
            .into_iter()
            .partition(|r| doomed(r));
        self.records = kept;
        let gone: Vec<StatusRecord> = gone;
        changes.extend(gone.into_iter().map(|old| Change {
            id: old.id.clone(),
            old: Some(old),
            new: None,
            cause,
        }));
    }

    /// The records and counts as the wire carries them.
    pub fn status(&self) -> ProgramStatus {
        ProgramStatus {
            records: self.records.clone(),
            malformed: self.malformed,
            oversized: self.oversized,
            queries: self.queries,
        }
    }

    /// The record the pane is shown by ([`belfry_proto::program_status::summary`]).
    pub fn summary(&self) -> Option<&StatusRecord> {
        belfry_proto::program_status::summary(&self.records)
    }
}

/// The start of every answer the pane host gives a program status query.
pub const ANSWER_PREFIX: &[u8] = b"\x1b]7501;";

/// The answer `found` is owed, if it is the protocol's query: the same sequence, which says
/// the terminal supports every state and kind of revision 0.4 (a reply that lists none
/// means the defaults), ended as the query was.
pub fn answer_to(found: &StatusString) -> Option<Vec<u8>> {
    match found {
        StatusString::Whole { body, terminator } if body == b"?" => {
            let mut answer = ANSWER_PREFIX.to_vec();
            answer.push(b'?');
            answer.extend_from_slice(terminator.bytes());
            Some(answer)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queries::{Query, Scanner};

    /// Every OSC 7501 string in `chunks`, found the way the screen model finds them.
    fn strings(chunks: &[&[u8]]) -> Vec<StatusString> {
        let mut scanner = Scanner::default();
        let mut out = Vec::new();
        for chunk in chunks {
            let mut start = 0;
            while let Some((at, query)) = scanner.find(&chunk[start..]) {
                if let Query::Status(found) = query {
                    out.push(found);
                }
                start += at + 1;
            }
        }
        out
    }

    /// The records after `chunks`, each chunk at its own revision (its index + 1).
    fn records_after(chunks: &[&[u8]]) -> (Records, Vec<Change>, Vec<Vec<u8>>) {
        let mut scanner = Scanner::default();
        let mut records = Records::default();
        let mut changes = Vec::new();
        let mut answers = Vec::new();
        for (n, chunk) in chunks.iter().enumerate() {
            let mut start = 0;
            while let Some((at, query)) = scanner.find(&chunk[start..]) {
                if let Query::Status(found) = query {
                    answers.extend(answer_to(&found));
                    records.take(found, n as u64 + 1, "inc", 1000, &mut changes);
                }
                start += at + 1;
            }
        }
        (records, changes, answers)
    }

    const WORKING: &[u8] = b"\x1b]7501;state=working:app=tool:progress=40:msg=aGVsbG8=\x1b\\";

    fn working() -> Report {
        Report {
            id: None,
            state: ProgramState::Working,
            kind: None,
            app: Some("tool".into()),
            msg: Some("hello".into()),
            title: None,
            progress: Some(40),
        }
    }

    #[test]
    fn a_report_split_across_reads_at_every_offset_is_read_whole() {
        let mut stream = b"before\x1b[1;31mred\x1b[0m ".to_vec();
        stream.extend_from_slice(WORKING);
        stream.extend_from_slice(b" after\x1b]0;title\x07\x1b]7501;?\x07 end");
        for cut in 0..=stream.len() {
            for second in cut..=stream.len() {
                let (a, rest) = stream.split_at(cut);
                let (b, c) = rest.split_at(second - cut);
                let (records, _, answers) = records_after(&[a, b, c]);
                let status = records.status();
                assert_eq!(status.records.len(), 1, "cut at {cut} and {second}");
                assert_eq!(status.records[0].state, ProgramState::Working);
                assert_eq!(status.records[0].msg.as_deref(), Some("hello"));
                assert_eq!(answers, vec![b"\x1b]7501;?\x07".to_vec()], "cut at {cut}");
                assert_eq!((status.malformed, status.oversized), (0, 0));
            }
        }
    }

    #[test]
    fn reports_interleaved_with_other_output_are_found_and_the_rest_is_not() {
        let stream = [
            &b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"[..],
            b"\x1b]133;A\x07$ ",
            b"\x1b]75010;state=idle\x07",
            b"\x1b]750;state=idle\x07",
            WORKING,
            b"\x1bP+q544e\x1b\\\x1b[>0q",
            b"\x1b]7501;id=build/test:state=blocked:kind=permission\x07",
        ]
        .concat();
        let found = strings(&[&stream]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            parse(b"state=working:app=tool:progress=40:msg=aGVsbG8="),
            Ok(Message::Report(working()))
        );
    }

    #[test]
    fn a_query_is_answered_with_the_terminator_it_used() {
        let (_, _, answers) = records_after(&[b"\x1b]7501;?\x1b\\", b"\x1b]7501;?\x07"]);
        assert_eq!(
            answers,
            vec![b"\x1b]7501;?\x1b\\".to_vec(), b"\x1b]7501;?\x07".to_vec()]
        );
    }

    #[test]
    fn malformed_reports_are_dropped_and_counted() {
        let bad: &[&[u8]] = &[
            b"\x1b]7501;app=tool\x07",
            b"\x1b]7501;state=sleeping\x07",
            b"\x1b]7501;state=idle:id=a//b\x07",
            b"\x1b]7501;state=idle:id=a/b/c/d/e/f/g/h/i\x07",
            b"\x1b]7501;state=idle:progress=101\x07",
            b"\x1b]7501;state=idle:progress=-1\x07",
            b"\x1b]7501;state=idle:msg=!!!\x07",
            // Base64 of "a\x1b[2Jb": a control character inside the text.
            b"\x1b]7501;state=idle:msg=YRtbMkpi\x07",
            // Base64 of the bytes ff fe: not UTF-8.
            b"\x1b]7501;state=idle:title=//4=\x07",
            b"\x1b]7501;state=idle:app=\x07",
            // Cut off by CAN, and by an ESC that starts no ST.
            b"\x1b]7501;state=idle\x18",
            b"\x1b]7501;state=idle\x1b[0m",
        ];
        let (records, changes, _) = records_after(bad);
        let status = records.status();
        assert!(status.records.is_empty(), "{:?}", status.records);
        assert!(changes.is_empty());
        assert_eq!(status.malformed, bad.len() as u64);
        // A pair that breaks the grammar, and an unknown key, are skipped, not fatal.
        assert_eq!(
            parse(b"state=idle:nonsense:Key=x:future=1:later=a b:=x"),
            Ok(Message::Report(Report {
                id: None,
                state: ProgramState::Idle,
                kind: None,
                app: None,
                msg: None,
                title: None,
                progress: None
            }))
        );
    }

    #[test]
    fn an_oversized_report_is_dropped_and_counted_and_the_next_is_read() {
        let mut long = b"\x1b]7501;state=working:msg=".to_vec();
        long.extend(std::iter::repeat_n(b'A', 8000));
        long.extend_from_slice(b"\x1b\\");
        // Exactly at the limit (4096 bytes with ST) passes; one more byte does not.
        let mut at_limit = b"\x1b]7501;state=idle:future=".to_vec();
        at_limit.resize(4096 - 2, b'x');
        at_limit.extend_from_slice(b"\x1b\\");
        let mut over = at_limit.clone();
        over.insert(30, b'x');
        for cut in [1, 100, 4000, 8020] {
            let (a, b) = long.split_at(cut);
            let (records, _, _) = records_after(&[a, b, WORKING]);
            let status = records.status();
            assert_eq!(status.oversized, 1);
            assert_eq!(status.records.len(), 1);
        }
        let (records, _, _) = records_after(&[&at_limit]);
        assert_eq!(records.status().records.len(), 1);
        let (records, _, _) = records_after(&[&over]);
        assert_eq!(
            (records.status().records.len(), records.status().oversized),
            (0, 1)
        );
    }

    #[test]
    fn each_id_keeps_its_last_report_and_clear_takes_descendants() {
        let (records, changes, _) = records_after(&[
            b"\x1b]7501;state=working\x07",
            b"\x1b]7501;id=build:state=working\x07",
            b"\x1b]7501;id=build/test:state=working\x07",
            b"\x1b]7501;id=buildx:state=done\x07",
            b"\x1b]7501;id=build/test:state=blocked:kind=question\x07",
            b"\x1b]7501;id=build:state=clear\x07",
        ]);
        let status = records.status();
        let ids: Vec<_> = status.records.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids, vec![None, Some("buildx".to_string())]);
        assert_eq!(status.records[1].revision, 4);
        let test_changes: Vec<_> = changes
            .iter()
            .filter(|c| c.id.as_deref() == Some("build/test"))
            .map(|c| {
                (
                    c.old.as_ref().map(|r| r.state),
                    c.new.as_ref().map(|r| r.state),
                    c.cause,
                )
            })
            .collect();
        assert_eq!(
            test_changes,
            vec![
                (None, Some(ProgramState::Working), StatusCause::Report),
                (
                    Some(ProgramState::Working),
                    Some(ProgramState::Blocked),
                    StatusCause::Report
                ),
                (Some(ProgramState::Blocked), None, StatusCause::Clear),
            ]
        );
        let (records, _, _) = records_after(&[
            b"\x1b]7501;id=a:state=idle\x07",
            b"\x1b]7501;state=idle\x07",
            b"\x1b]7501;state=clear\x07",
        ]);
        assert!(
            records.status().records.is_empty(),
            "a clear of the root clears all"
        );
    }

    #[test]
    fn the_least_recently_reported_record_is_evicted_past_the_cap() {
        let reports: Vec<Vec<u8>> = (0..=MAX_RECORDS)
            .map(|n| format!("\x1b]7501;id=r{n}:state=working\x07").into_bytes())
            .collect();
        let mut chunks: Vec<&[u8]> = reports.iter().map(Vec::as_slice).collect();
        // r0 reported again: r1 is now the least recently reported.
        let again = b"\x1b]7501;id=r0:state=done\x07".to_vec();
        chunks.insert(MAX_RECORDS, &again);
        let (records, changes, _) = records_after(&chunks);
        let status = records.status();
        assert_eq!(status.records.len(), MAX_RECORDS);
        assert!(status.records.iter().all(|r| r.id.as_deref() != Some("r1")));
        assert!(status.records.iter().any(|r| r.id.as_deref() == Some("r0")));
        assert!(changes
            .iter()
            .any(|c| c.cause == StatusCause::Evicted && c.id.as_deref() == Some("r1")));
    }

    #[test]
    fn exit_ends_working_blocked_and_idle_but_done_and_error_outlast_it() {
        let (mut records, _, _) = records_after(&[
            b"\x1b]7501;id=a:state=working\x07",
            b"\x1b]7501;id=b:state=blocked:kind=auth\x07",
            b"\x1b]7501;id=c:state=idle\x07",
            b"\x1b]7501;id=d:state=done\x07",
            b"\x1b]7501;id=e:state=error\x07",
        ]);
        let mut changes = Vec::new();
        records.exited(&mut changes);
        let left: Vec<_> = records.status().records.iter().map(|r| r.state).collect();
        assert_eq!(left, vec![ProgramState::Done, ProgramState::Error]);
        assert_eq!(changes.len(), 3);
        records.restarted(&mut changes);
        assert!(records.status().records.is_empty());
    }

    #[test]
    fn a_repeated_report_keeps_its_since_and_makes_no_change() {
        let mut records = Records::default();
        let mut changes = Vec::new();
        let found = |b: &[u8]| StatusString::Whole {
            body: b.to_vec(),
            terminator: Terminator::Bel,
        };
        records.take(
            found(b"state=working:progress=1"),
            1,
            "i",
            100,
            &mut changes,
        );
        records.take(
            found(b"state=working:progress=2"),
            2,
            "i",
            200,
            &mut changes,
        );
        records.take(
            found(b"state=working:progress=2"),
            3,
            "i",
            300,
            &mut changes,
        );
        assert_eq!(changes.len(), 2);
        let record = &records.status().records[0];
        assert_eq!(
            (record.since, record.revision, record.progress),
            (100, 3, Some(2))
        );
    }
}
