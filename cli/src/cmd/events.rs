//! `belfry events`: the daemon's event stream (one pane's or all), for a person or as JSON
//! lines, with `--since` and `--history`.

use std::io::Write;

use anyhow::Result;
use serde_json::Value;

use belfry_proto::reply::Subscribed;
use belfry_proto::request as op;
use belfry_proto::{Event, SessionName};

use super::ls::escape_for_terminal;
use super::{ask, NotFound};
use crate::remote;

/// `--since DURATION` of `belfry events`: how far back, in ms.
pub(super) fn parse_since(text: &str) -> std::result::Result<u64, String> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let scale = match unit {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if scale > 0 => Ok(n.saturating_mul(scale)),
        _ => Err(format!(
            "{text:?} is not a duration: a whole number and a unit (90s, 5m, 2h, 1d)"
        )),
    }
}

pub(super) fn events(
    name: Option<String>,
    json: bool,
    history: Option<u32>,
    since: Option<u64>,
) -> Result<i32> {
    // A subscription to one pane has always answered a name outside the grammar as it answers
    // any name no pane has: not found (exit 1). No pane can have such a name.
    let (place, session) = match name.as_deref() {
        Some(address) => {
            let (host, name) = match address.rsplit_once(':') {
                Some((host, name)) => (Some(host), name),
                None => (None, address),
            };
            let session = SessionName::parse(name)
                .map_err(|_| NotFound(format!("no pane named {name:?}")))?;
            let place = match host {
                Some(host) => remote::host_place(host)?,
                None => remote::default_place()?,
            };
            (place, Some(session))
        }
        None => (remote::default_place()?, None),
    };
    let mut client = place.daemon()?;
    let subscribe = op::Subscribe {
        session,
        revisions: None,
        exit_so_far: None,
        // With --since alone, every kept event of that time; with both, at most N of them.
        history: match (history, since) {
            (None, None) => Some(10),
            (history, _) => history,
        },
        since_ms: since.map(|ago| crate::human::now_unix_ms().saturating_sub(ago)),
    };
    let _: Subscribed = ask(&mut client, subscribe)?;
    loop {
        let event = client.read_event()?;
        let mut out = std::io::stdout().lock();
        if json {
            // As the daemon sent it, whatever this build knows of it.
            writeln!(out, "{event}")?;
        } else {
            writeln!(out, "{}", event_line(&event, crate::human::now_unix_ms()))?;
        }
        out.flush()?;
    }
}

/// One line of `belfry events`: when it arrived, the pane, the kind, and what happened in
/// words. An event this build does not know (from a newer daemon) is shown by its fields.
pub(super) fn event_line(raw: &Value, now_ms: u64) -> String {
    // A kept event the daemon sent first says when it happened; a live one happens now.
    let at_ms = raw["at_ms"].as_u64().unwrap_or(now_ms);
    let mut raw = raw.clone();
    if let Some(fields) = raw.as_object_mut() {
        fields.remove("history");
        fields.remove("at_ms");
    }
    let raw = &raw;
    let (kind, session, words) = match belfry_proto::de::from_value::<Event>(raw) {
        Ok(event) => (
            event.kind().to_string(),
            event.session().map(str::to_string),
            crate::human::event_words(&event, crate::human::Detail::Full),
        ),
        Err(_) => (
            raw["event"].as_str().unwrap_or("?").to_string(),
            raw["session"].as_str().map(str::to_string),
            crate::human::fields_words(raw, &["event", "session"]),
        ),
    };
    format!(
        "{}  {:<20} {:<10} {}",
        crate::human::clock(at_ms, now_ms),
        escape_for_terminal(session.as_deref().unwrap_or("-")),
        escape_for_terminal(&kind),
        words
    )
}
