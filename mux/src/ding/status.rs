//! `belfry ding status` of one pane: the worker's state as [`DingStatus`], each unread
//! message with the state its ownership record and the lease give it. A file of its own
//! because it only reads the worker's state, which every other file changes.

use belfry_ding::presence::Presence;
use belfry_ding::status::{DingStatus, LeaseStatus, MessageState, MessageStatus};
use belfry_ding::DeliveryPolicy;
use belfry_proto::reply::DingState;

use super::worker::Worker;
use super::DingReply;

impl Worker {
    pub(super) fn status(&mut self) -> DingReply {
        let now = self.clock.now();
        let lease = match self.policy {
            Ok(DeliveryPolicy::Aggressive | DeliveryPolicy::Undeclared) => {
                LeaseStatus::NotApplicable
            }
            _ => LeaseStatus::from_state(self.lease.state(now), now),
        };
        let unread = self.unread_reconciled();
        let messages = unread
            .iter()
            .map(|name| {
                let front = self
                    .inbox
                    .read(name)
                    .map(|m| m.front_matter)
                    .unwrap_or_default();
                let state = MessageState::derive(self.ownership.state_of(name), lease);
                let mut status = MessageStatus::new(name.clone(), &front, state);
                status.sent_again = self.ownership.sent_again_because(name).map(str::to_owned);
                status
            })
            .collect();
        let presence = Presence::load(&self.inbox).ok().flatten();
        match &self.policy {
            Ok(policy) => {
                let status = DingStatus {
                    session: self.lease.identity().session.clone(),
                    policy: policy.clone(),
                    adapter: self.adapter_state.clone(),
                    presence,
                    last_event: self.last_event.clone(),
                    lease,
                    not_ready: if self.ready {
                        None
                    } else {
                        self.not_ready_logged.clone()
                    },
                    messages,
                    counters: self.counters.clone(),
                };
                DingState {
                    text: status.render_text(),
                    status: Some(status),
                    error: None,
                }
            }
            Err(reason) => DingState {
                status: None,
                text: format!("invalid DING policy: {reason}; every message is held"),
                error: Some(reason.clone()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use belfry_ding::hold::HoldReason;
    use belfry_ding::names::{MessageName, SessionName};
    use belfry_ding::status::{
        AdapterProcessState, Counters, DingStatus, LeaseStatus, MessageState, MessageStatus,
    };
    use belfry_ding::DeliveryPolicy;
    use belfry_proto::reply::{self, DingState};
    use serde_json::{json, Value};

    use crate::ding::DingReply;

    /// `ding.status` wrote the status model turned into a JSON value, or `null` for an invalid
    /// policy; the daemon now writes the typed model, and the reply is the same bytes.
    #[test]
    fn a_typed_ding_status_reply_is_the_bytes_the_value_reply_was() {
        let mut counters = Counters::default();
        counters.record_send();
        counters.record_conflict();
        let status = DingStatus {
            session: SessionName::parse("w").unwrap(),
            policy: DeliveryPolicy::Rich {
                adapter_command: vec!["adapter".into(), "--x".into()],
            },
            adapter: AdapterProcessState::Running { pid: 12 },
            presence: None,
            last_event: None,
            lease: LeaseStatus::Held {
                reason: HoldReason::Stale,
            },
            not_ready: None,
            messages: vec![MessageStatus::new(
                MessageName::parse("1785070000000-abc123.md").unwrap(),
                &Default::default(),
                MessageState::Held(HoldReason::Stale),
            )],
            counters,
        };
        let typed: DingReply = DingState {
            text: status.render_text(),
            status: Some(status.clone()),
            error: None,
        };
        let before: DingState = DingState {
            text: status.render_text(),
            status: serde_json::to_value(&status).unwrap(),
            error: None,
        };
        let id = json!(3);
        assert_eq!(
            serde_json::to_string(&reply::ok(&id, &typed)).unwrap(),
            serde_json::to_string(&reply::ok(&id, &before)).unwrap()
        );
        // A reader reads it back through the type it was written with.
        assert_eq!(
            reply::Reply::<DingReply>::read(&reply::ok(&id, &typed)).unwrap(),
            reply::Reply::Ok(typed.clone())
        );
        let invalid: DingReply = DingState {
            status: None,
            text: "invalid DING policy: x; every message is held".into(),
            error: Some("x".into()),
        };
        let invalid_before: DingState = DingState {
            status: Value::Null,
            text: invalid.text.clone(),
            error: invalid.error.clone(),
        };
        assert_eq!(
            serde_json::to_string(&reply::ok(&id, &invalid)).unwrap(),
            serde_json::to_string(&reply::ok(&id, &invalid_before)).unwrap()
        );
    }
}
