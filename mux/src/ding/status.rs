//! `belfry ding status` of one pane: the worker's state as [`DingStatus`], each unread
//! message with the state its ownership record and the lease give it. A file of its own
//! because it only reads the worker's state, which every other file changes.

use belfry_ding::presence::Presence;
use belfry_ding::status::{DingStatus, LeaseStatus, MessageState, MessageStatus};
use belfry_ding::DeliveryPolicy;
use belfry_proto::reply::DingState;
use serde_json::Value;

use super::worker::Worker;

impl Worker {
    pub(super) fn status(&mut self) -> DingState {
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
                    // A status of strings and numbers always serializes; `null` would say
                    // "invalid policy" to a reader, so a failure is logged and says so too.
                    status: serde_json::to_value(&status).unwrap_or_else(|err| {
                        tracing::error!(
                            "DING status of {} did not serialize: {err}",
                            status.session
                        );
                        Value::Null
                    }),
                    error: None,
                }
            }
            Err(reason) => DingState {
                status: Value::Null,
                text: format!("invalid DING policy: {reason}; every message is held"),
                error: Some(reason.clone()),
            },
        }
    }
}
