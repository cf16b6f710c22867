//! Adapter protocol v1 validation (spec §7.4): every line is an event or a named hold.

use belfry_ding::protocol::{
    parse_event, ActivityState, ComposerState, EventBody, ReceiptState, MAX_EVENT_LINE_BYTES,
};
use belfry_ding::{EventValidator, HoldReason, MessageName};
use proptest::prelude::*;
use serde_json::{json, Value};

const HEADER: &str =
    r#""session":"worker","incarnation":"9f3c","generation":"sha256:0a1b","sequence":7"#;

fn line(kind_and_fields: &str) -> String {
    format!(r#"{{"v":1,{HEADER},{kind_and_fields}}}"#)
}

#[test]
fn validation_table() {
    let idle = r#""kind":"activity","state":"idle","composer":"empty""#;
    let cases: Vec<(&str, String, Option<HoldReason>)> = vec![
        ("fresh idle", line(idle), None),
        ("valid for and revision", line(&format!(r#"{idle},"validForMs":250,"revision":42"#)), None),
        // Issue 39: a null optional field is a bug in the adapter, not a field left out.
        ("null validForMs", line(&format!(r#"{idle},"validForMs":null"#)), Some(HoldReason::Malformed)),
        ("null revision", line(&format!(r#"{idle},"revision":null"#)), Some(HoldReason::Malformed)),
        ("extra opaque fields", line(&format!(r#"{idle},"reason":"x","debug":{{"a":1}}"#)), None),
        ("active", line(r#""kind":"activity","state":"active","composer":"unknown""#), None),
        ("turn boundary", line(r#""kind":"turn-boundary","messages":["1785070000000-abc123.md"]"#), None),
        ("empty turn boundary", line(r#""kind":"turn-boundary","messages":[]"#), None),
        ("receipt", line(r#""kind":"receipt","message":"1785070000000-abc123.md","state":"retained-safe""#), None),
        ("not json", "{not json".to_owned(), Some(HoldReason::Malformed)),
        ("empty line", String::new(), Some(HoldReason::Malformed)),
        ("array", "[1,2]".to_owned(), Some(HoldReason::Malformed)),
        ("missing v", format!(r#"{{{HEADER},{idle}}}"#), Some(HoldReason::Malformed)),
        ("string v", format!(r#"{{"v":"1",{HEADER},{idle}}}"#), Some(HoldReason::Malformed)),
        ("version 2", format!(r#"{{"v":2,{HEADER},{idle}}}"#), Some(HoldReason::UnsupportedVersion)),
        ("version 0", format!(r#"{{"v":0,{HEADER},{idle}}}"#), Some(HoldReason::UnsupportedVersion)),
        ("unknown kind", line(r#""kind":"heartbeat""#), Some(HoldReason::UnknownKind)),
        ("missing kind", line(r#""state":"idle""#), Some(HoldReason::Malformed)),
        ("missing session", r#"{"v":1,"kind":"activity","incarnation":"9f","generation":"g","sequence":1,"state":"idle","composer":"empty"}"#.to_owned(), Some(HoldReason::Malformed)),
        ("bad session", r#"{"v":1,"kind":"activity","session":"../w","incarnation":"9f","generation":"g","sequence":1,"state":"idle","composer":"empty"}"#.to_owned(), Some(HoldReason::Malformed)),
        ("empty incarnation", r#"{"v":1,"kind":"activity","session":"w","incarnation":"","generation":"g","sequence":1,"state":"idle","composer":"empty"}"#.to_owned(), Some(HoldReason::Malformed)),
        ("negative sequence", r#"{"v":1,"kind":"activity","session":"w","incarnation":"9f","generation":"g","sequence":-1,"state":"idle","composer":"empty"}"#.to_owned(), Some(HoldReason::Malformed)),
        ("fractional sequence", r#"{"v":1,"kind":"activity","session":"w","incarnation":"9f","generation":"g","sequence":1.5,"state":"idle","composer":"empty"}"#.to_owned(), Some(HoldReason::Malformed)),
        ("missing state", line(r#""kind":"activity","composer":"empty""#), Some(HoldReason::Malformed)),
        ("missing composer", line(r#""kind":"activity","state":"idle""#), Some(HoldReason::Malformed)),
        ("bad state", line(r#""kind":"activity","state":"IDLE","composer":"empty""#), Some(HoldReason::Malformed)),
        ("bad composer", line(r#""kind":"activity","state":"idle","composer":"clear""#), Some(HoldReason::Malformed)),
        ("negative validForMs", line(&format!(r#"{idle},"validForMs":-5"#)), Some(HoldReason::Malformed)),
        ("string revision", line(&format!(r#"{idle},"revision":"42""#)), Some(HoldReason::Malformed)),
        ("messages not array", line(r#""kind":"turn-boundary","messages":"a.md""#), Some(HoldReason::Malformed)),
        ("messages non-string", line(r#""kind":"turn-boundary","messages":[1]"#), Some(HoldReason::Malformed)),
        ("path separator", line(r#""kind":"turn-boundary","messages":["1785070000000-abc123.md","a/b.md"]"#), Some(HoldReason::Malformed)),
        ("dot dot", line(r#""kind":"turn-boundary","messages":["../1785070000000-abc123.md"]"#), Some(HoldReason::Malformed)),
        ("backslash", line(r#""kind":"turn-boundary","messages":["a\\b.md"]"#), Some(HoldReason::Malformed)),
        ("receipt bad name", line(r#""kind":"receipt","message":"x.md","state":"accepted""#), Some(HoldReason::Malformed)),
        ("receipt bad state", line(r#""kind":"receipt","message":"1785070000000-abc123.md","state":"ok""#), Some(HoldReason::Malformed)),
        ("too long", format!("{{\"pad\":\"{}\"}}", " ".repeat(MAX_EVENT_LINE_BYTES)), Some(HoldReason::Malformed)),
    ];
    for (case, text, expected) in cases {
        let result = parse_event(&text);
        match (result, expected) {
            (Ok(_), None) => {}
            (Err(err), Some(reason)) => {
                assert_eq!(err.hold_reason(), Some(reason), "{case}: {err}");
                assert!(
                    err.to_string()
                        .starts_with(&format!("adapter event held as {reason}: ")),
                    "{case}: {err}"
                );
            }
            (Ok(event), Some(reason)) => panic!("{case}: accepted {event:?}, expected {reason}"),
            (Err(err), None) => panic!("{case}: rejected: {err}"),
        }
    }
}

#[test]
fn kinds_parse_into_their_bodies() {
    let event = parse_event(&line(
        r#""kind":"turn-boundary","messages":["1785070000000-abc123.md","notes.md"]"#,
    ))
    .unwrap();
    assert_eq!(
        event.body,
        EventBody::TurnBoundary {
            messages: vec![MessageName::parse("1785070000000-abc123.md").unwrap()],
            unrecognized: vec!["notes.md".to_owned()],
        }
    );
    let event = parse_event(&line(
        r#""kind":"receipt","message":"1785070000000-abc123.md","state":"accepted""#,
    ))
    .unwrap();
    assert_eq!(event.kind(), "receipt");
    assert_eq!(
        event.body,
        EventBody::Receipt {
            message: MessageName::parse("1785070000000-abc123.md").unwrap(),
            state: ReceiptState::Accepted,
        }
    );
    let event = parse_event(&line(
        r#""kind":"activity","state":"child","composer":"nonempty""#,
    ))
    .unwrap();
    assert!(matches!(
        event.body,
        EventBody::Activity {
            state: ActivityState::Child,
            composer: ComposerState::Nonempty,
            valid_for_ms: None,
            revision: None,
            reason: None,
        }
    ));
}

#[test]
fn stale_sequence_holds_as_out_of_order() {
    let mut validator = EventValidator::new();
    let at = |sequence: u64| {
        format!(
            r#"{{"v":1,"kind":"activity","session":"worker","incarnation":"9f","generation":"g","sequence":{sequence},"state":"idle","composer":"empty"}}"#
        )
    };
    validator.validate(&at(7)).unwrap();
    for stale in [7, 6, 0] {
        let err = validator.validate(&at(stale)).unwrap_err();
        assert_eq!(err.hold_reason(), Some(HoldReason::OutOfOrder));
        assert!(err.to_string().contains(&format!(
            "sequence {stale} is not greater than the previous 7"
        )));
    }
    validator.validate(&at(100)).unwrap();
    assert_eq!(validator.last_sequence(), Some(100));
}

#[test]
fn unknown_kind_error_is_sanitized() {
    let err = parse_event(&line(r#""kind":"\u001b[201~evil""#)).unwrap_err();
    assert_eq!(err.hold_reason(), Some(HoldReason::UnknownKind));
    let detail = match &err {
        belfry_ding::Error::AdapterEvent { detail, .. } => detail.clone(),
        other => panic!("unexpected {other}"),
    };
    assert_eq!(
        detail,
        "kind \"[201~evil\" is not one of activity, turn-boundary, receipt"
    );
}

fn activity_json(sequence: u64) -> Value {
    json!({"v":1,"kind":"activity","session":"worker","incarnation":"9f","generation":"g",
           "sequence":sequence,"state":"idle","composer":"empty"})
}

proptest! {
    #[test]
    fn arbitrary_lines_never_panic(text in any::<String>()) {
        if let Err(err) = parse_event(&text) {
            prop_assert!(err.hold_reason().is_some());
        }
    }

    #[test]
    fn mutated_valid_events_are_events_or_holds(
        key in proptest::sample::select(vec!["v","kind","session","incarnation","generation","sequence","state","composer","validForMs","revision"]),
        replacement in prop_oneof![
            Just(Value::Null), any::<i64>().prop_map(Value::from), any::<String>().prop_map(Value::from),
            Just(json!([])), Just(json!({})), any::<bool>().prop_map(Value::from),
        ],
    ) {
        let mut event = activity_json(1);
        event[key] = replacement;
        match parse_event(&event.to_string()) {
            Ok(parsed) => prop_assert_eq!(parsed.header.sequence, event["sequence"].as_u64().unwrap()),
            Err(err) => prop_assert!(err.hold_reason().is_some()),
        }
    }

    #[test]
    fn validator_accepts_exactly_strictly_increasing_sequences(
        sequences in proptest::collection::vec(0u64..20, 1..30),
    ) {
        let mut validator = EventValidator::new();
        let mut highest: Option<u64> = None;
        for sequence in sequences {
            let accepted = validator.validate(&activity_json(sequence).to_string()).is_ok();
            let expected = highest.is_none_or(|last| sequence > last);
            prop_assert_eq!(accepted, expected);
            if accepted {
                highest = Some(sequence);
            }
            prop_assert_eq!(validator.last_sequence(), highest);
        }
    }
}
