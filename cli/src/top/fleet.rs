//! What the live view knows of every pane: the daemon's listing, each pane's DING status, the
//! last event the daemon's stream carried for it, and the revision rate between two listings.
//!
//! [`Fleet`] only folds in what it is given (a listing, a status, an event, each with the time
//! it arrived); asking for them is the session loop's job, so the same state can be built by a
//! test from fixed values and rendered into a frame.

use std::collections::BTreeMap;

use belfry_proto::reply::PaneRecord;
use belfry_proto::Event;
use serde_json::Value;

use crate::human::{self, Detail};

/// One pane as the view shows it.
#[derive(Debug, Clone)]
pub(crate) struct PaneView {
    /// The pane as the daemon last listed it.
    pub(crate) record: PaneRecord,
    /// Its DING status (`belfry ding status --json`), once asked.
    pub(crate) ding: Option<Value>,
    /// Revisions per second between the last two listings, once there are two.
    pub(crate) rate: Option<f64>,
    /// The last event the stream carried for this pane, in words, and when it arrived.
    pub(crate) last_event: Option<(String, u64)>,
}

/// What an event asks the loop to ask again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refresh {
    /// Nothing: the event is shown as it is.
    Nothing,
    /// The listing (a pane came, went, restarted or exited) and this pane's DING status.
    Listing(String),
    /// This pane's DING status (a hook or DING event).
    Ding(String),
    /// Everything: events were missed.
    Everything,
}

/// Every pane, by name.
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    panes: BTreeMap<String, PaneView>,
    /// Each pane's revision at the last listing and when that listing arrived, for the rate.
    samples: BTreeMap<String, (u64, u64)>,
}

impl Fleet {
    /// The panes, by name.
    pub(crate) fn panes(&self) -> impl Iterator<Item = &PaneView> {
        self.panes.values()
    }

    /// How many panes there are.
    pub(crate) fn len(&self) -> usize {
        self.panes.len()
    }

    /// The names in order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.panes.keys().map(String::as_str)
    }

    /// Takes a listing that arrived at `now_ms`: panes not in it are gone, new ones are added,
    /// and each pane's revision rate is its revisions since the last listing over the time
    /// between the two (a restarted pane's revision continues, so the difference holds).
    pub(crate) fn update_listing(&mut self, listing: Vec<PaneRecord>, now_ms: u64) {
        let mut panes = BTreeMap::new();
        let mut samples = BTreeMap::new();
        for record in listing {
            let name = record.session.clone();
            let previous = self.panes.remove(&name);
            let rate = match (record.revision, self.samples.get(&name)) {
                (Some(revision), Some(&(before, at))) if now_ms > at && revision >= before => {
                    Some((revision - before) as f64 * 1_000.0 / (now_ms - at) as f64)
                }
                _ => previous.as_ref().and_then(|view| view.rate),
            };
            if let Some(revision) = record.revision {
                samples.insert(name.clone(), (revision, now_ms));
            }
            let (ding, last_event) = previous
                .map(|view| (view.ding, view.last_event))
                .unwrap_or_default();
            panes.insert(
                name,
                PaneView {
                    record,
                    ding,
                    rate,
                    last_event,
                },
            );
        }
        self.panes = panes;
        self.samples = samples;
    }

    /// Takes a pane's DING status; `None` when the daemon has none for it (no worker).
    pub(crate) fn update_ding(&mut self, session: &str, status: Option<Value>) {
        if let Some(view) = self.panes.get_mut(session) {
            view.ding = status;
        }
    }

    /// Notes an event from the daemon's stream that arrived at `now_ms`, and says what to ask
    /// again because of it.
    pub(crate) fn note_event(&mut self, raw: &Value, now_ms: u64) -> Refresh {
        let Ok(event) = belfry_proto::de::from_value::<Event>(raw) else {
            // An event of a newer daemon: the listing says what changed.
            return Refresh::Everything;
        };
        let Some(session) = event.session().map(str::to_string) else {
            return Refresh::Everything;
        };
        if let Some(view) = self.panes.get_mut(&session) {
            view.last_event = Some((human::event_words(&event, Detail::Short), now_ms));
        }
        match event {
            Event::Lagged { .. } => Refresh::Everything,
            Event::Revision { .. } => Refresh::Nothing,
            Event::Exit { .. } | Event::Lifecycle(_) | Event::ProgramStatus { .. } => {
                Refresh::Listing(session)
            }
            Event::Hook(_) | Event::Ding { .. } => Refresh::Ding(session),
        }
    }
}

/// A pane's DING mail: unread messages, how many of them are held and staged, and why the
/// lease is held, from its status.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Mail {
    pub(crate) unread: usize,
    pub(crate) held: usize,
    pub(crate) staged: usize,
    pub(crate) hold_reason: Option<String>,
}

impl Mail {
    /// The mail a DING status shows (see `belfry ding status --json`).
    pub(crate) fn of(status: &Value) -> Mail {
        let messages = status["messages"].as_array().map_or(&[][..], Vec::as_slice);
        let state = |message: &Value| message["state"].as_str().unwrap_or_default().to_string();
        let hold_reason = match status["lease"]["state"].as_str() {
            Some("held") => status["lease"]["reason"].as_str().map(str::to_string),
            _ => None,
        };
        Mail {
            unread: messages.len(),
            held: messages
                .iter()
                .filter(|m| state(m).starts_with("held:"))
                .count(),
            staged: messages.iter().filter(|m| state(m) == "staged").count(),
            hold_reason,
        }
    }
}

/// What the pane's adapter last said it is doing (`idle`, `active`, `child`, `unknown`), from
/// the last adapter line its DING status shows; `unknown` for a pane with an adapter that has
/// not said yet, `None` for a pane with none.
pub(crate) fn adapter_state(status: &Value) -> Option<String> {
    let adapter = status["adapter"]["state"].as_str()?;
    if adapter == "not-configured" {
        return None;
    }
    let event = &status["last_event"];
    if event["kind"].as_str() == Some("activity") {
        // The summary starts with the activity word (`idle, composer empty, …`).
        if let Some(word) = event["summary"].as_str().and_then(|s| s.split(',').next()) {
            return Some(word.trim().to_string());
        }
    }
    Some("unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(session: &str, revision: u64) -> PaneRecord {
        let mut record = PaneRecord::unanswered(session, 1, "", String::new());
        record.state = None;
        record.error = None;
        record.revision = Some(revision);
        record
    }

    #[test]
    fn the_rate_is_revisions_between_two_listings_over_their_distance() {
        let mut fleet = Fleet::default();
        fleet.update_listing(vec![record("a", 10)], 1_000);
        assert_eq!(fleet.panes().next().and_then(|p| p.rate), None);
        fleet.update_listing(vec![record("a", 40)], 3_000);
        assert_eq!(fleet.panes().next().and_then(|p| p.rate), Some(15.0));
        fleet.update_listing(vec![record("b", 1)], 4_000);
        assert_eq!(
            fleet.names().collect::<Vec<_>>(),
            ["b"],
            "a gone pane is gone"
        );
    }

    #[test]
    fn an_event_names_what_to_ask_again() {
        let mut fleet = Fleet::default();
        fleet.update_listing(vec![record("a", 1)], 1_000);
        let spawned = json!({"event": "lifecycle", "session": "a", "what": "spawned"});
        assert_eq!(
            fleet.note_event(&spawned, 2_000),
            Refresh::Listing("a".into())
        );
        let hook = json!({"event": "hook", "session": "a", "hook": "before-tool"});
        assert_eq!(fleet.note_event(&hook, 2_500), Refresh::Ding("a".into()));
        let lagged = json!({"event": "lagged", "missed": 3});
        assert_eq!(fleet.note_event(&lagged, 3_000), Refresh::Everything);
        let shown = fleet.panes().next().and_then(|p| p.last_event.clone());
        assert_eq!(shown, Some(("hook before-tool".into(), 2_500)));
    }

    #[test]
    fn mail_and_adapter_state_come_from_the_ding_status() {
        let status = json!({
            "adapter": {"state": "running", "pid": 4},
            "last_event": {"kind": "activity", "summary": "idle, composer nonempty"},
            "lease": {"state": "held", "reason": "composer-nonempty"},
            "messages": [{"state": "held:composer-nonempty"}, {"state": "staged"},
                         {"state": "hook-owned"}],
        });
        assert_eq!(
            Mail::of(&status),
            Mail {
                unread: 3,
                held: 1,
                staged: 1,
                hold_reason: Some("composer-nonempty".into())
            }
        );
        assert_eq!(adapter_state(&status).as_deref(), Some("idle"));
        let quiet = json!({"adapter": {"state": "starting", "pid": 4}, "last_event": null});
        assert_eq!(adapter_state(&quiet).as_deref(), Some("unknown"));
        let none = json!({"adapter": {"state": "not-configured"}});
        assert_eq!(adapter_state(&none), None);
    }
}
