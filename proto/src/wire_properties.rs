//! Property tests of the replies and events: every wire type survives a trip through JSON
//! (typed value → JSON → typed value, equal, and the JSON the same both times), and the real
//! replies and events of docs/protocol.md read into their types and write back the same JSON.
//! Attach controls are checked the same way. A file apart from `properties` (requests) because
//! it needs the arbitrary values of the reply side: sizes within range, error codes, open JSON.
//!
//! Each run draws fresh cases from a seed it prints on failure, so a failure is replayed with
//! `BELFRY_PROTO_SEED`, as the request properties are.

use arbitrary::{Arbitrary, Unstructured};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::attach::Control;
use crate::code::ErrorCode;
use crate::event::{Event, Kept};
use crate::limits::{Size, MAX_DIMENSION, MIN_DIMENSION};
use crate::properties::Rng;
use crate::reply::{self, *};

/// Cases per type.
const CASES: usize = 2_000;

impl<'a> Arbitrary<'a> for Size {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Size> {
        let rows = u.int_in_range(u64::from(MIN_DIMENSION)..=u64::from(MAX_DIMENSION))?;
        let cols = u.int_in_range(u64::from(MIN_DIMENSION)..=u64::from(MAX_DIMENSION))?;
        Size::new(rows, cols).map_err(|_| arbitrary::Error::IncorrectFormat)
    }
}

impl<'a> Arbitrary<'a> for ErrorCode {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<ErrorCode> {
        // A code this build does not know is kept as its text; one it knows reads as itself.
        Ok(ErrorCode::from_wire(&String::arbitrary(u)?))
    }
}

/// Small JSON values (no floats: they need not round-trip exactly).
pub(crate) fn arbitrary_json(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<u32>()?),
        3 => Value::String(u.arbitrary()?),
        4 => Value::Array(vec![Value::String(u.arbitrary()?)]),
        _ => {
            let mut map = Map::new();
            map.insert(u.arbitrary()?, Value::from(u.arbitrary::<i32>()?));
            Value::Object(map)
        }
    })
}

/// An optional open JSON field (a launch spec, a grid of cells): absent, or a value that is not
/// `null`. A present `null` is written as `null` and read back as absent; no server writes one.
pub(crate) fn arbitrary_some_json(u: &mut Unstructured<'_>) -> arbitrary::Result<Option<Value>> {
    if u.arbitrary()? {
        return Ok(None);
    }
    Ok(Some(match arbitrary_json(u)? {
        Value::Null => Value::Bool(false),
        other => other,
    }))
}

/// A `ding.status` answer as a reader that has not moved to the typed status reads it.
fn arbitrary_ding_state(u: &mut Unstructured<'_>) -> arbitrary::Result<DingState> {
    Ok(DingState {
        status: arbitrary_json(u)?,
        text: u.arbitrary()?,
        error: u.arbitrary()?,
    })
}

/// Writes `value` as the servers do (through a JSON value, so keys are in order) and reads it
/// back as a client does ([`crate::de::from_value`]); both must give back what was written.
fn assert_round_trips<T>(value: &T, at: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).unwrap_or_else(|err| panic!("{at}: {err}"));
    let read: T = crate::de::from_value(&json)
        .unwrap_or_else(|err| panic!("{at}: {json} did not read back: {err}"));
    assert_eq!(&read, value, "{at}: {json}");
    assert_eq!(serde_json::to_value(&read).ok(), Some(json), "{at}");
}

/// Draws [`CASES`] values of `T` with `draw` and checks each round-trips; returns how many
/// were drawn (a type whose values are never drawn would prove nothing).
fn property<T>(name: &str, draw: impl Fn(&mut Unstructured<'_>) -> arbitrary::Result<T>)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let (mut rng, seed) = Rng::seeded();
    let mut made = 0;
    for case in 0..CASES {
        let bytes = rng.bytes(64 + case % 512);
        let Ok(value) = draw(&mut Unstructured::new(&bytes)) else {
            continue;
        };
        assert_round_trips(&value, &format!("{name}, seed {seed}, case {case}"));
        made += 1;
    }
    assert!(made > CASES / 2, "{name}, seed {seed}: only {made} drawn");
}

macro_rules! round_trips {
    ($($test:ident: $ty:ty,)*) => {$(
        #[test]
        fn $test() {
            property::<$ty>(stringify!($ty), |u| <$ty>::arbitrary(u));
        }
    )*};
}

round_trips! {
    an_error_body_round_trips: ErrorBody,
    a_hello_reply_round_trips: Hello,
    a_pane_record_round_trips: PaneRecord,
    a_listing_round_trips: Listing,
    an_attach_target_round_trips: AttachTarget,
    a_bound_reply_round_trips: Bound,
    an_attached_reply_round_trips: Attached,
    a_killed_reply_round_trips: Killed,
    a_shutdown_reply_round_trips: Shutdown,
    a_sent_reply_round_trips: Sent,
    a_snapshot_round_trips: Screen,
    a_scrollback_reply_round_trips: History,
    a_resized_reply_round_trips: Resized,
    a_cleared_reply_round_trips: Cleared,
    a_restarted_reply_round_trips: Restarted,
    a_detached_reply_round_trips: Detached,
    a_waited_reply_round_trips: Waited,
    a_txn_reply_round_trips: TxnState,
    a_subscribed_reply_round_trips: Subscribed,
    a_published_reply_round_trips: Published,
    a_nudged_reply_round_trips: Nudged,
    a_claimed_reply_round_trips: Claimed,
    a_start_up_line_round_trips: Announced,
    an_event_round_trips: Event,
    a_kept_event_round_trips: Kept,
}

#[test]
fn a_ding_state_reply_round_trips() {
    property::<DingState>("DingState", arbitrary_ding_state);
}

/// Every control of an attach stream (client to pane host and back) is read back from the JSON
/// it is written as, and writes the same JSON again.
#[test]
fn an_attach_control_round_trips() {
    let (mut rng, seed) = Rng::seeded();
    let mut made = 0;
    for case in 0..CASES {
        let bytes = rng.bytes(16 + case % 256);
        let Ok(control) = Control::arbitrary(&mut Unstructured::new(&bytes)) else {
            continue;
        };
        let json = control.to_value();
        let read = Control::from_value(json.clone());
        assert_eq!(read, Ok(control), "seed {seed}, case {case}: {json}");
        assert_eq!(read.map(|read| read.to_value()), Ok(json), "seed {seed}");
        made += 1;
    }
    assert!(made > CASES / 2, "seed {seed}: only {made} controls drawn");
}

/// Every reply envelope the servers write (`reply::ok` around a body, `reply::error`) reads
/// back as the body or the error it was made of.
#[test]
fn an_envelope_reads_back_as_its_body_or_its_error() {
    property::<Killed>("envelope", |u| {
        let body = Killed::arbitrary(u)?;
        let id = arbitrary_json(u)?;
        let written = reply::ok(&id, &body);
        assert_eq!(written["id"], id);
        match Reply::<Killed>::read(&written) {
            Ok(Reply::Ok(read)) => assert_eq!(read, body),
            other => panic!("{written}: {other:?}"),
        }
        let err = ErrorBody::arbitrary(u)?;
        let written = reply::error_with(&id, err.clone());
        match Reply::<Killed>::read(&written) {
            Ok(Reply::Err(read)) => assert_eq!(read, err),
            other => panic!("{written}: {other:?}"),
        }
        Ok(body)
    });
}

/// Reads `line` (a real reply or event, as docs/protocol.md shows it) into `T` and writes it
/// back: the same JSON, every field and every absent field as it was.
fn reads_and_writes_back<T>(line: &str)
where
    T: Serialize + DeserializeOwned + std::fmt::Debug,
{
    let mut today: Value = serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}"));
    if let Some(fields) = today.as_object_mut() {
        // The envelope is not the body's: `id` and `ok` are the reply's own.
        if fields.remove("ok").is_some() {
            fields.remove("id");
        }
    }
    let typed: T = crate::de::from_value(&today).unwrap_or_else(|err| panic!("{line}: {err}"));
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        today,
        "{line} as {typed:?}"
    );
}

/// Today's replies, copied from docs/protocol.md's transcripts, read into their types and
/// written back unchanged.
#[test]
fn the_replies_of_the_protocol_document_read_into_their_types_and_write_back_the_same() {
    reads_and_writes_back::<Hello>(
        r#"{"build":"0.1.0","id":1,"ok":true,"pid":31568,"role":"daemon","version":1}"#,
    );
    reads_and_writes_back::<Hello>(
        r#"{"build":"0.1.0","id":1,"ok":true,"role":"pane-host","session":"demo","version":1}"#,
    );
    reads_and_writes_back::<PaneRecord>(
        r#"{"argv":["sh"],"build":"0.1.0","child_pid":7374,"clients":0,"cwd":"/tmp","exited":null,"generation":"sha256:af677743e72b7031146ff98776ef2d9b7cbdfcb218fee92acf7f3980379b961f","id":2,"incarnation":"6bfd15b8e1a2179e83e6d4e9d9b2b0ed","ok":true,"pid":7373,"protocol":1,"revision":1,"session":"demo","size":{"cols":30,"rows":5},"socket":"/tmp/bx/env/run/panes/demo.sock","spec":{"adapter":null,"adapter_command":null,"argv":["sh"],"base_env":{"HOME":"/tmp","PATH":"/usr/bin:/bin"},"cols":30,"cwd":"/tmp","ding_policy":null,"env":{"PS1":"$ "},"extra_args":[],"extra_env":{},"rows":5,"scrollback":2000,"session":"demo","size_policy":"latest"},"started_at":1796014097127,"title":""}"#,
    );
    reads_and_writes_back::<Listing>(
        r#"{"id":4,"ok":true,"panes":[{"error":"pane host of \"slow\" (pid 7411) did not answer \"info\" within 5 s; it may be stopped or hung (`kill -CONT 7411` resumes a stopped process)","pid":7411,"session":"slow","state":"unresponsive"}]}"#,
    );
    reads_and_writes_back::<Listing>(
        r#"{"id":3,"ok":true,"panes":[{"argv":["sh"],"build":"0.1.0","child_pid":7374,"clients":0,"cwd":"/tmp","exited":null,"generation":"sha256:af677743e72b7031146ff98776ef2d9b7cbdfcb218fee92acf7f3980379b961f","incarnation":"6bfd15b8e1a2179e83e6d4e9d9b2b0ed","pid":7373,"protocol":1,"revision":1,"session":"demo","size":{"cols":30,"rows":5},"socket":"/tmp/bx/env/run/panes/demo.sock","started_at":1796014097127,"title":""}]}"#,
    );
    reads_and_writes_back::<Killed>(r#"{"id":7,"killed":"short","ok":true}"#);
    reads_and_writes_back::<AttachTarget>(
        r#"{"id":20,"ok":true,"session":"demo","socket":"/tmp/bx/env/run/panes/demo.sock"}"#,
    );
    reads_and_writes_back::<Bound>(
        r#"{"id":2,"ok":true,"pid":24106,"role":"pane-host","session":"demo","socket":"/tmp/px/rt/panes/demo.sock"}"#,
    );
    reads_and_writes_back::<Sent>(
        r#"{"id":4,"ok":true,"result":"sent","revision":1796398790982992}"#,
    );
    reads_and_writes_back::<Sent>(
        r#"{"actual":{"generation":"sha256:262c91e27e235ec19b33eb61d3bd513bcd1dea991bb5aab6d4e066137ce8eb54","incarnation":"7e67ac233401c3a7e6139f3044a4e0ff","revision":1},"exited":true,"id":5,"ok":true,"result":"conflict"}"#,
    );
    reads_and_writes_back::<Shutdown>(
        r#"{"id":4,"killed":["att","demo"],"ok":true,"shutdown":true}"#,
    );
    reads_and_writes_back::<Subscribed>(r#"{"id":3,"ok":true,"session":null,"subscribed":true}"#);
    reads_and_writes_back::<Subscribed>(
        r#"{"id":3,"identity":{"generation":"sha256:af67","incarnation":"e29d","revision":16},"ok":true,"session":null,"subscribed":true}"#,
    );
    reads_and_writes_back::<History>(
        r#"{"history":8,"id":11,"lines":["red","$ seq 1 8","1","2"],"ok":true,"revision":11,"start":2,"total":13}"#,
    );
    reads_and_writes_back::<TxnState>(
        r#"{"id":1,"ok":true,"state":"never-written","txn":"ding-4242-1796014000000-7.4243-1796013990000"}"#,
    );
    reads_and_writes_back::<Resized>(
        r#"{"id":16,"ok":true,"revision":12,"size":{"cols":40,"rows":6}}"#,
    );
    reads_and_writes_back::<Cleared>(r#"{"id":17,"ok":true,"revision":13}"#);
    reads_and_writes_back::<Restarted>(
        r#"{"id":18,"identity":{"generation":"sha256:af67","incarnation":"e29d","revision":15},"ok":true}"#,
    );
    reads_and_writes_back::<Detached>(r#"{"detached":1,"id":1,"ok":true}"#);
    reads_and_writes_back::<Waited>(
        r#"{"id":4,"ok":true,"result":"matched","state":{"exited":{"code":3,"signal":null},"incarnation":"7e67ac233401c3a7e6139f3044a4e0ff","revision":1}}"#,
    );
    reads_and_writes_back::<Claimed>(
        r#"{"claim":"c1","hook_owned":[],"id":2,"ok":true,"refused":["m2"],"reserved":["m1"]}"#,
    );
    reads_and_writes_back::<Announced>(
        r#"{"pid":7373,"ready":true,"socket":"/tmp/bx/env/run/panes/demo.sock"}"#,
    );
    reads_and_writes_back::<Announced>(r#"{"error":"cannot bind /tmp/x.sock: in use"}"#);
    reads_and_writes_back::<DingState>(
        r#"{"error":"unknown delivery","id":1,"ok":true,"status":null,"text":"invalid DING policy"}"#,
    );
}

/// Today's events, copied from docs/protocol.md's transcripts (live and kept), read into
/// their types and written back unchanged.
#[test]
fn the_events_of_the_protocol_document_read_into_their_types_and_write_back_the_same() {
    for line in [
        r#"{"event":"lifecycle","generation":"sha256:262c","incarnation":"7e67","pid":7457,"session":"short","what":"spawned"}"#,
        r#"{"code":null,"event":"exit","incarnation":"e29d","revision":20,"session":"demo","signal":1}"#,
        r#"{"event":"lifecycle","incarnation":"7734","revision":21,"session":"demo","what":"restart"}"#,
        r#"{"event":"lifecycle","pid":7457,"session":"short","what":"killed"}"#,
        r#"{"event":"revision","revision":18,"session":"demo"}"#,
        r#"{"event":"lagged","missed":12}"#,
        r#"{"event":"ding","outcome":{"hook_owned":["m1"],"refused":[]},"session":"w","what":"turn-boundary"}"#,
    ] {
        reads_and_writes_back::<Event>(line);
    }
    for line in [
        r#"{"at_ms":1767225600123,"event":"lifecycle","generation":"sha256:…","history":true,"incarnation":"…","pid":7457,"session":"short","what":"spawned"}"#,
        r#"{"at_ms":1767225600190,"code":3,"event":"exit","history":true,"incarnation":"…","revision":1,"session":"short","signal":null}"#,
    ] {
        reads_and_writes_back::<Kept>(line);
    }
    let kept = Kept::at(
        Event::Revision {
            session: "w".into(),
            revision: 3,
        },
        9,
    );
    assert_eq!(
        kept.to_value(),
        json!({"event": "revision", "session": "w", "revision": 3, "history": true, "at_ms": 9})
    );
}
