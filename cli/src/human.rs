//! Times and durations as a person reads them: `3 s ago`, `14:02:11`, `2 h 5 min`.
//!
//! The protocol carries wall-clock times as Unix milliseconds, which is right for programs
//! (`--json` prints them unchanged) and unreadable for people. Human output goes through this
//! module instead: a time of today is shown as the local clock time, an older one with its
//! date, and a time is shown relative to now where the age is what matters. Every function
//! takes `now` as an argument, so rendered output is deterministic under test.

use std::time::{SystemTime, UNIX_EPOCH};

use belfry_proto::program_status::StatusRecord;
use belfry_proto::reply::DingState;
use belfry_proto::Event;
use serde_json::Value;

use crate::cmd::escape_for_terminal;

/// The wall clock now, in Unix milliseconds (0 if the clock is before 1970).
pub(crate) fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// How long ago `then_ms` was, seen at `now_ms`: `just now`, `3 s ago`, `5 min ago`,
/// `2 h ago`, `4 d ago`. A time ahead of now (another host's clock) is `just now` when within a
/// second and `in 3 s` beyond.
pub(crate) fn ago(then_ms: u64, now_ms: u64) -> String {
    if then_ms > now_ms {
        let ahead = then_ms - now_ms;
        if ahead < 1_000 {
            return "just now".to_string();
        }
        return format!("in {}", duration(ahead));
    }
    let age = now_ms - then_ms;
    if age < 1_000 {
        return "just now".to_string();
    }
    format!("{} ago", coarse(age))
}

/// A duration in its largest unit: `3 s`, `5 min`, `2 h`, `4 d` (for ages in narrow columns).
pub(crate) fn coarse(ms: u64) -> String {
    let seconds = ms / 1_000;
    match seconds {
        0..=59 => format!("{seconds} s"),
        60..=3_599 => format!("{} min", seconds / 60),
        3_600..=86_399 => format!("{} h", seconds / 3_600),
        _ => format!("{} d", seconds / 86_400),
    }
}

/// A duration in at most two units: `250 ms`, `3 s`, `5 min 2 s`, `2 h 5 min`, `4 d 3 h`.
pub(crate) fn duration(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    let seconds = ms / 1_000;
    let (big, big_unit, small, small_unit) = match seconds {
        0..=59 => return format!("{seconds} s"),
        60..=3_599 => (seconds / 60, "min", seconds % 60, "s"),
        3_600..=86_399 => (seconds / 3_600, "h", seconds % 3_600 / 60, "min"),
        _ => (seconds / 86_400, "d", seconds % 86_400 / 3_600, "h"),
    };
    if small == 0 {
        format!("{big} {big_unit}")
    } else {
        format!("{big} {big_unit} {small} {small_unit}")
    }
}

/// A wall-clock time in the local time zone: `14:02:11` when it is on the same local day as
/// `now_ms`, else `2026-11-30 14:02:11`.
pub(crate) fn clock(then_ms: u64, now_ms: u64) -> String {
    let (Some(then), Some(now)) = (local(then_ms), local(now_ms)) else {
        return format!("{then_ms} ms since 1970");
    };
    let time = format!("{:02}:{:02}:{:02}", then.hour, then.minute, then.second);
    if (then.year, then.month, then.day) == (now.year, now.month, now.day) {
        time
    } else {
        format!("{:04}-{:02}-{:02} {time}", then.year, then.month, then.day)
    }
}

/// A wall-clock time both ways, for a line a person reads once: `14:02:11 (3 s ago)`.
pub(crate) fn when(then_ms: u64, now_ms: u64) -> String {
    format!("{} ({})", clock(then_ms, now_ms), ago(then_ms, now_ms))
}

/// `belfry ding status` for a person, from the daemon's status model (the same data
/// `--json` prints): one fact per line, times as local clock times with their age, never Unix
/// milliseconds. A pane whose policy is invalid has no model; the daemon's words say why.
pub(crate) fn ding_status_lines(state: &DingState, now_ms: u64) -> Vec<String> {
    let status = &state.status;
    if status.is_null() {
        let why = state.error.as_deref().unwrap_or(state.text.trim_end());
        return vec![escape_for_terminal(why)];
    }
    let text = |value: &Value| escape_for_terminal(value.as_str().unwrap_or("?"));
    let mut lines = vec![format!("ding status for {}", text(&status["session"]))];
    lines.push(format!("  policy:     {}", policy_words(&status["policy"])));
    if let Some(why) = status["rich_default"]["why"].as_str() {
        lines.push(format!(
            "  rich:       not the default here: {}",
            escape_for_terminal(why)
        ));
    }
    if let Some(why) = status["first_turn"]["why"].as_str() {
        lines.push(format!(
            "  first turn: mail waits for it: {}",
            escape_for_terminal(why)
        ));
    }
    lines.push(format!(
        "  adapter:    {}",
        adapter_words(&status["adapter"], &status["policy"])
    ));
    let presence = &status["presence"];
    if !presence.is_null() {
        lines.push(format!(
            "  presence:   {} since {}",
            text(&presence["state"]),
            at(&presence["since_unix_ms"], now_ms)
        ));
    }
    let event = &status["last_event"];
    if event.is_null() {
        lines.push("  last event: none".to_string());
    } else {
        let sequence = event["sequence"]
            .as_u64()
            .map_or_else(String::new, |sequence| format!("#{sequence} "));
        lines.push(format!(
            "  last event: {sequence}{} at {}: {}",
            text(&event["kind"]),
            at(&event["received_at_unix_ms"], now_ms),
            text(&event["summary"])
        ));
    }
    lines.push(format!(
        "  lease:      {}",
        lease_words(&status["lease"], &status["policy"])
    ));
    if let Some(reason) = status["not_ready"].as_str() {
        lines.push(format!(
            "  input:      held until the program is ready: {}",
            escape_for_terminal(reason)
        ));
    }
    let messages = status["messages"].as_array().map_or(&[][..], Vec::as_slice);
    lines.push(format!("  messages:   {} unread", messages.len()));
    for message in messages {
        let name = text(&message["name"]);
        // A message's name starts with the Unix ms it was written at: shown as its age too.
        let written = name
            .split('-')
            .next()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or_else(String::new, |ms| format!(", {}", ago(ms, now_ms)));
        lines.push(format!(
            "    {name}  {}  {} (from {}{written})",
            text(&message["state"]),
            text(&message["subject"]),
            text(&message["from"])
        ));
        // Why the notice of this message was told again (its earlier program went away).
        if message["sent_again"].is_string() {
            lines.push(format!("      {}", text(&message["sent_again"])));
        }
    }
    // The states are DING's own words: say once what each one shown means.
    let legend: Vec<&str> = ["pending", "staged", "hook-owned", "delivered"]
        .into_iter()
        .filter(|state| messages.iter().any(|message| message["state"] == *state))
        .map(state_meaning)
        .collect();
    if !legend.is_empty() {
        lines.push(format!("    ({})", legend.join("; ")));
    }
    lines.push(format!(
        "  counters:   {}",
        counters_words(&status["counters"])
    ));
    lines
}

/// What a message's delivery state means, for the legend under `ding status`'s messages.
fn state_meaning(state: &str) -> &'static str {
    match state {
        "pending" => "pending: no notice has announced it yet",
        "staged" => {
            "staged: its notice was typed into the pane once; unread until the agent reads it"
        }
        "hook-owned" => "hook-owned: handed to the agent at its turn boundary by its hooks",
        "delivered" => "delivered: the agent's harness took the notice; unread until read",
        _ => "",
    }
}

/// A Unix-ms field as `14:02:11 (3 s ago)`, or `?` when it is not a time.
fn at(value: &Value, now_ms: u64) -> String {
    value
        .as_u64()
        .map_or_else(|| "?".to_string(), |ms| when(ms, now_ms))
}

fn policy_words(policy: &Value) -> String {
    match policy["delivery"].as_str() {
        Some("none") => "none (not declared an agent)".to_string(),
        Some(token) => escape_for_terminal(token),
        None => "?".to_string(),
    }
}

fn adapter_words(adapter: &Value, policy: &Value) -> String {
    let pid = adapter["pid"].as_u64().unwrap_or_default();
    let state = match adapter["state"].as_str() {
        Some("not-configured") | None => return "not configured".to_string(),
        Some("starting") => format!("starting (pid {pid})"),
        Some("running") => format!("running (pid {pid})"),
        Some("backoff") => {
            let ended = match (adapter["exit_code"].as_i64(), adapter["signal"].as_i64()) {
                (_, Some(signal)) => format!("killed by signal {signal}"),
                (Some(code), None) => format!("exited with code {code}"),
                (None, None) => "exited".to_string(),
            };
            format!(
                "{ended}; restart {} in {}",
                adapter["restarts"].as_u64().unwrap_or_default(),
                duration(adapter["retry_in_ms"].as_u64().unwrap_or_default())
            )
        }
        Some("failed") => format!(
            "failed to start: {}",
            escape_for_terminal(adapter["error"].as_str().unwrap_or("?"))
        ),
        Some(other) => escape_for_terminal(other),
    };
    match policy["adapter_command"].as_array() {
        Some(argv) => {
            let argv: Vec<String> = argv
                .iter()
                .map(|arg| {
                    let arg = arg.as_str().unwrap_or_default();
                    if arg.is_empty() || arg.contains(char::is_whitespace) {
                        format!("{arg:?}")
                    } else {
                        escape_for_terminal(arg)
                    }
                })
                .collect();
            format!("{state}: {}", argv.join(" "))
        }
        None => state,
    }
}

fn lease_words(lease: &Value, policy: &Value) -> String {
    match lease["state"].as_str() {
        Some("leased") => format!(
            "leased at revision {}, {} left",
            lease["revision"].as_u64().unwrap_or_default(),
            duration(lease["expires_in_ms"].as_u64().unwrap_or_default())
        ),
        Some("held") => format!(
            "held: {}",
            escape_for_terminal(lease["reason"].as_str().unwrap_or("?"))
        ),
        _ => format!(
            "not applicable ({} policy)",
            escape_for_terminal(policy["delivery"].as_str().unwrap_or("?"))
        ),
    }
}

fn counters_words(counters: &Value) -> String {
    let holds = match counters["holds"].as_object() {
        Some(holds) if !holds.is_empty() => holds
            .iter()
            .map(|(reason, count)| format!("{} {count}", escape_for_terminal(reason)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_string(),
    };
    format!(
        "sends {}, conflicts {}, holds: {holds}",
        counters["sends"].as_u64().unwrap_or_default(),
        counters["conflicts"].as_u64().unwrap_or_default()
    )
}

/// How much of an event to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// What happened, for a narrow column.
    Short,
    /// What happened and the identity it happened to, for a line of its own.
    Full,
}

/// An event in words: `spawned`, `exited with code 0`, `hook before-tool (Bash)`; with
/// [`Detail::Full`] also the pid, incarnation and revision a lifecycle event carries and a DING
/// event's outcome.
/// A program status record as `ls` and `top` show it: its state in words and how long it has
/// been in it (`working 12s`, `needs you: permission 3m`).
pub(crate) fn status_words(record: &StatusRecord, now_ms: u64) -> String {
    format!(
        "{} {}",
        record.words(),
        coarse(now_ms.saturating_sub(record.since))
    )
}

pub(crate) fn event_words(event: &Event, detail: Detail) -> String {
    let words = match event {
        Event::ProgramStatus {
            id,
            old,
            new,
            cause,
            revision,
            ..
        } => {
            let record = id.as_deref().unwrap_or("root");
            let state =
                |r: &Option<StatusRecord>| r.as_ref().map_or("-".to_string(), StatusRecord::words);
            let cause = serde_json::to_value(cause)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let mut words = format!("program status {record}: {} -> {}", state(old), state(new));
            if detail == Detail::Full {
                words.push_str(&format!(" ({cause}, revision {revision})"));
                if let Some(msg) = new.as_ref().and_then(|r| r.msg.as_deref()) {
                    words.push_str(&format!(": {msg}"));
                }
            }
            words
        }
        Event::Revision { revision, .. } => format!("revision {revision}"),
        Event::Exit {
            code,
            signal,
            revision,
            ..
        } => {
            let how = match (code, signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "exited".to_string(),
            };
            match detail {
                Detail::Short => how,
                Detail::Full => format!("{how} at revision {revision}"),
            }
        }
        Event::Lifecycle(lifecycle) => {
            let mut words = lifecycle.what.clone();
            if let Some(reason) = &lifecycle.reason {
                words.push_str(&format!(": {reason}"));
            }
            if detail == Detail::Full {
                let mut facts = Vec::new();
                facts.extend(lifecycle.pid.map(|pid| format!("pid {pid}")));
                facts.extend(
                    lifecycle
                        .incarnation
                        .as_ref()
                        .map(|i| format!("incarnation {i}")),
                );
                facts.extend(lifecycle.revision.map(|r| format!("revision {r}")));
                if !facts.is_empty() {
                    words.push_str(&format!(" ({})", facts.join(", ")));
                }
            }
            words
        }
        Event::Hook(hook) => match &hook.tool_name {
            Some(tool) => format!("hook {} ({tool})", hook.hook),
            None => format!("hook {}", hook.hook),
        },
        Event::Ding { what, outcome, .. } => match detail {
            Detail::Full if !outcome.is_null() => {
                format!("ding {what}: {}", plain_words(outcome, &[]))
            }
            _ => format!("ding {what}"),
        },
        Event::Lagged { missed, .. } => {
            format!("missed {missed} event(s): this reader fell behind")
        }
    };
    escape_for_terminal(&words)
}

/// A JSON value in words rather than JSON: an object's fields as `key value` separated by
/// commas (leaving out `skip` and nulls), a list as its items joined by commas.
pub(crate) fn fields_words(value: &Value, skip: &[&str]) -> String {
    escape_for_terminal(&plain_words(value, skip))
}

/// [`fields_words`] before the escaping, which is done once for the whole text.
fn plain_words(value: &Value, skip: &[&str]) -> String {
    match value {
        Value::Null => "none".to_string(),
        Value::Bool(flag) => if *flag { "yes" } else { "no" }.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => text.clone(),
        Value::Array(items) if items.is_empty() => "none".to_string(),
        Value::Array(items) => items
            .iter()
            .map(|item| plain_words(item, &[]))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(fields) => fields
            .iter()
            .filter(|(key, value)| !skip.contains(&key.as_str()) && !value.is_null())
            .map(|(key, value)| match value {
                Value::Object(_) => format!("{key} ({})", plain_words(value, &[])),
                Value::Array(items) if items.len() > 1 => {
                    format!("{key} [{}]", plain_words(value, &[]))
                }
                _ => format!("{key} {}", plain_words(value, &[])),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A local calendar time, to the second.
struct LocalTime {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

/// `unix_ms` in the local time zone (the C library's `localtime_r`, which reads `TZ` and the
/// system zone), or `None` for a time it cannot represent.
fn local(unix_ms: u64) -> Option<LocalTime> {
    let seconds = libc::time_t::try_from(unix_ms / 1_000).ok()?;
    // SAFETY: `tm` is plain old data, for which all zeroes is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals of the right types; localtime_r is the
    // thread-safe variant and writes only into `tm`.
    let filled = unsafe { libc::localtime_r(&seconds, &mut tm) };
    if filled.is_null() {
        return None;
    }
    Some(LocalTime {
        year: tm.tm_year + 1900,
        month: u32::try_from(tm.tm_mon + 1).ok()?,
        day: u32::try_from(tm.tm_mday).ok()?,
        hour: u32::try_from(tm.tm_hour).ok()?,
        minute: u32::try_from(tm.tm_min).ok()?,
        second: u32::try_from(tm.tm_sec).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_said_in_the_largest_unit() {
        let now = 1_785_070_000_000;
        assert_eq!(ago(now - 200, now), "just now");
        assert_eq!(ago(now - 3_000, now), "3 s ago");
        assert_eq!(ago(now - 5 * 60_000 - 10, now), "5 min ago");
        assert_eq!(ago(now - 2 * 3_600_000, now), "2 h ago");
        assert_eq!(ago(now - 4 * 86_400_000, now), "4 d ago");
        assert_eq!(ago(now + 3_000, now), "in 3 s");
        assert_eq!(ago(now + 300, now), "just now");
    }

    #[test]
    fn durations_keep_two_units() {
        assert_eq!(duration(250), "250 ms");
        assert_eq!(duration(3_400), "3 s");
        assert_eq!(duration(302_000), "5 min 2 s");
        assert_eq!(duration(7_500_000), "2 h 5 min");
        assert_eq!(duration(3 * 86_400_000 + 3_600_000), "3 d 1 h");
        assert_eq!(duration(120_000), "2 min");
    }

    #[test]
    fn a_clock_time_of_today_has_no_date_and_an_older_one_has() {
        let now = now_unix_ms();
        let today = clock(now, now);
        assert_eq!(today.len(), 8, "{today}");
        assert_eq!(today.matches(':').count(), 2, "{today}");
        let old = clock(now - 40 * 86_400_000, now);
        assert_eq!(old.len(), 19, "{old}");
        assert!(old.ends_with(&old[11..]), "{old}");
        assert!(when(now - 3_000, now).ends_with("(3 s ago)"));
    }

    #[test]
    fn a_program_status_is_said_with_what_it_waits_for_and_how_long() {
        use belfry_proto::program_status::{BlockedKind, ProgramState, StatusCause};
        let record = StatusRecord {
            id: Some("build/test".into()),
            state: ProgramState::Blocked,
            kind: Some(BlockedKind::Permission),
            app: Some("tool".into()),
            msg: Some("run \u{1b}[2J?".into()),
            title: None,
            progress: None,
            revision: 9,
            since: 1_000,
            incarnation: "i".into(),
        };
        assert_eq!(
            status_words(&record, 1_000 + 3 * 60_000),
            format!("needs you: permission {}", coarse(3 * 60_000))
        );
        let event = Event::ProgramStatus {
            session: "w".into(),
            id: record.id.clone(),
            old: None,
            new: Some(record),
            cause: StatusCause::Report,
            revision: 9,
        };
        assert_eq!(
            event_words(&event, Detail::Short),
            "program status build/test: - -> needs you: permission"
        );
        let full = event_words(&event, Detail::Full);
        assert!(
            full.ends_with("(report, revision 9): run \\u{1b}[2J?"),
            "a message is shown escaped: {full}"
        );
    }
}
