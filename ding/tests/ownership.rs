//! Durable delivery ownership (spec §7.3, §7.4): staged before the paste, never pasted twice,
//! released by archiving, and derived state whose loss loses no message.

use std::fs;

use belfry_ding::ownership::{
    quarantine, ReceiptOutcome, StageOutcome, StoreOrigin, TurnBoundaryOutcome, OWNERSHIP_FILE,
};
use belfry_ding::protocol::ReceiptState;
use belfry_ding::{
    DeliveryState, Error, FrontMatter, Inbox, MessageName, OwnershipStore, SessionName,
};

fn session() -> SessionName {
    SessionName::parse("worker").unwrap()
}

fn name(text: &str) -> MessageName {
    MessageName::parse(text).unwrap()
}

fn post(inbox: &Inbox, subject: &str) -> MessageName {
    let front_matter = FrontMatter {
        subject: Some(subject.to_owned()),
        ..FrontMatter::default()
    };
    inbox.post(&front_matter, "body").unwrap()
}

#[test]
fn staged_ownership_is_durable_before_stage_returns() {
    let state = tempfile::tempdir().unwrap();
    let message = name("1785070000000-abc123.md");
    {
        let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
        assert_eq!(store.origin(), StoreOrigin::Missing);
        assert_eq!(
            store.stage(std::slice::from_ref(&message), 1).unwrap(),
            StageOutcome::Staged
        );
        // No explicit save, no drop-time flush: the file must already say so.
    }
    let path = state.path().join("ding/worker").join(OWNERSHIP_FILE);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"1785070000000-abc123.md\""), "{text}");
    assert!(text.contains("\"staged\""), "{text}");

    let mut reopened = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(reopened.origin(), StoreOrigin::Loaded);
    assert_eq!(reopened.state_of(&message), DeliveryState::Staged);
    assert_eq!(
        reopened.stage(std::slice::from_ref(&message), 2).unwrap(),
        StageOutcome::AlreadyOwned {
            name: message.clone(),
            state: DeliveryState::Staged
        },
        "a staged notice is never pasted twice, across restarts too"
    );
}

#[test]
fn staging_a_backlog_is_all_or_nothing() {
    let state = tempfile::tempdir().unwrap();
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    let first = name("1785070000000-aaaaaa.md");
    let second = name("1785070000001-bbbbbb.md");
    let third = name("1785070000002-cccccc.md");
    assert_eq!(
        store.stage(std::slice::from_ref(&second), 1).unwrap(),
        StageOutcome::Staged
    );
    let outcome = store
        .stage(&[first.clone(), second.clone(), third.clone()], 2)
        .unwrap();
    assert_eq!(
        outcome,
        StageOutcome::AlreadyOwned {
            name: second.clone(),
            state: DeliveryState::Staged
        }
    );
    assert_eq!(store.state_of(&first), DeliveryState::Pending);
    assert_eq!(store.state_of(&third), DeliveryState::Pending);
    assert_eq!(
        store.stage(&[first.clone(), third.clone()], 3).unwrap(),
        StageOutcome::Staged
    );
    let reopened = OwnershipStore::open(state.path(), &session()).unwrap();
    let owned: Vec<(String, DeliveryState)> = reopened
        .owned()
        .map(|(name, state, _)| (name.to_string(), state))
        .collect();
    assert_eq!(
        owned,
        [
            (first.to_string(), DeliveryState::Staged),
            (second.to_string(), DeliveryState::Staged),
            (third.to_string(), DeliveryState::Staged),
        ]
    );
}

#[test]
fn a_conflicted_send_returns_the_message_to_pending() {
    let state = tempfile::tempdir().unwrap();
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    let message = name("1785070000000-abc123.md");
    assert_eq!(
        store.stage(std::slice::from_ref(&message), 1).unwrap(),
        StageOutcome::Staged
    );
    store
        .release_unsent(std::slice::from_ref(&message))
        .unwrap();
    assert_eq!(store.state_of(&message), DeliveryState::Pending);
    let reopened = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(reopened.state_of(&message), DeliveryState::Pending);
}

#[test]
fn only_an_accepted_receipt_delivers_a_staged_notice() {
    let state = tempfile::tempdir().unwrap();
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    let message = name("1785070000000-abc123.md");
    let never_staged = name("1785070000001-zzzzzz.md");
    assert_eq!(
        store.stage(std::slice::from_ref(&message), 1).unwrap(),
        StageOutcome::Staged
    );
    for receipt in [
        ReceiptState::RetainedSafe,
        ReceiptState::RetainedBlocked,
        ReceiptState::NotRetained,
        ReceiptState::Unproven,
    ] {
        assert_eq!(
            store.record_receipt(&message, receipt, 2).unwrap(),
            ReceiptOutcome::Unchanged(DeliveryState::Staged)
        );
    }
    assert_eq!(
        store
            .record_receipt(&never_staged, ReceiptState::Accepted, 3)
            .unwrap(),
        ReceiptOutcome::NotStaged
    );
    assert_eq!(store.state_of(&never_staged), DeliveryState::Pending);
    assert_eq!(
        store
            .record_receipt(&message, ReceiptState::Accepted, 4)
            .unwrap(),
        ReceiptOutcome::Delivered
    );
    assert_eq!(
        OwnershipStore::open(state.path(), &session())
            .unwrap()
            .state_of(&message),
        DeliveryState::Delivered
    );
}

#[test]
fn turn_boundary_owns_only_unread_messages() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let unread = post(&inbox, "one");
    let staged = post(&inbox, "two");
    let archived = post(&inbox, "three");
    inbox.archive(&archived).unwrap();
    let never_existed = name("1785070000000-nope00.md");

    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(
        store.stage(std::slice::from_ref(&staged), 1).unwrap(),
        StageOutcome::Staged
    );
    let outcome = store
        .record_turn_boundary(
            &[
                unread.clone(),
                staged.clone(),
                archived.clone(),
                never_existed.clone(),
            ],
            &inbox.list_unread().unwrap(),
            2,
        )
        .unwrap();
    assert_eq!(
        outcome,
        TurnBoundaryOutcome {
            hook_owned: vec![unread.clone(), staged.clone()],
            not_unread: vec![archived.clone(), never_existed.clone()],
        }
    );
    assert_eq!(store.state_of(&unread), DeliveryState::HookOwned);
    assert_eq!(store.state_of(&staged), DeliveryState::HookOwned);
    assert_eq!(store.state_of(&archived), DeliveryState::Pending);
    assert!(store.pending(&inbox.list_unread().unwrap()).is_empty());
    assert_eq!(
        store.stage(std::slice::from_ref(&unread), 3).unwrap(),
        StageOutcome::AlreadyOwned {
            name: unread.clone(),
            state: DeliveryState::HookOwned
        },
        "a hook-owned message gets no PTY input"
    );
}

#[test]
fn archiving_releases_ownership() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let staged = post(&inbox, "staged");
    let hooked = post(&inbox, "hooked");
    let kept = post(&inbox, "kept");
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(
        store.stage(&[staged.clone(), kept.clone()], 1).unwrap(),
        StageOutcome::Staged
    );
    store
        .record_turn_boundary(
            std::slice::from_ref(&hooked),
            &inbox.list_unread().unwrap(),
            2,
        )
        .unwrap();

    inbox.archive(&staged).unwrap();
    inbox.archive(&hooked).unwrap();
    let released = store.reconcile(&inbox.list_unread().unwrap()).unwrap();
    assert_eq!(released, [staged.clone(), hooked.clone()]);
    assert_eq!(store.state_of(&staged), DeliveryState::Pending);
    assert_eq!(store.state_of(&kept), DeliveryState::Staged);
    let reopened = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(reopened.owned().count(), 1);
    assert_eq!(reopened.state_of(&kept), DeliveryState::Staged);
}

#[test]
fn deleting_the_state_file_loses_no_message() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let first = post(&inbox, "first");
    let second = post(&inbox, "second");
    {
        let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
        assert_eq!(
            store.stage(std::slice::from_ref(&first), 1).unwrap(),
            StageOutcome::Staged
        );
    }
    fs::remove_file(state.path().join("ding/worker").join(OWNERSHIP_FILE)).unwrap();

    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(store.origin(), StoreOrigin::Missing);
    let unread = inbox.list_unread().unwrap();
    assert_eq!(unread, [first.clone(), second.clone()]);
    // The documented recovery: everything pending is one backlog, staged as a whole.
    let backlog: Vec<MessageName> = store.pending(&unread).into_iter().cloned().collect();
    assert_eq!(backlog, [first, second]);
    assert_eq!(store.stage(&backlog, 2).unwrap(), StageOutcome::Staged);
}

#[test]
fn corrupt_state_is_a_clear_error_and_touches_nothing() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let message = post(&inbox, "precious");
    let dir = state.path().join("ding/worker");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(OWNERSHIP_FILE);
    for garbage in [
        "{ not json",
        "[]",
        r#"{"version":9,"session":"worker","messages":{}}"#,
        r#"{"version":1,"session":"reviewer","messages":{}}"#,
        r#"{"version":1,"session":"worker","messages":{"../x":{"state":"staged","since_unix_ms":1}}}"#,
        r#"{"version":1,"session":"worker","messages":{"1785070000000-abc123.md":{"state":"owned","since_unix_ms":1}}}"#,
    ] {
        fs::write(&path, garbage).unwrap();
        let err = OwnershipStore::open(state.path(), &session()).unwrap_err();
        assert!(
            matches!(err, Error::CorruptOwnershipState { .. }),
            "{garbage}: {err}"
        );
        let text = err.to_string();
        assert!(text.starts_with("DING ownership state "), "{text}");
        assert!(text.contains("no message is lost"), "{text}");
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            garbage,
            "the file is left alone"
        );
        assert_eq!(inbox.list_unread().unwrap(), std::slice::from_ref(&message));
    }

    let aside = quarantine(state.path(), &session(), 1_785_070_000_000).unwrap();
    assert_eq!(
        aside.file_name().unwrap().to_str().unwrap(),
        "ownership.json.corrupt-1785070000000"
    );
    assert!(aside.is_file());
    let store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(store.origin(), StoreOrigin::Missing);
    assert_eq!(inbox.read(&message).unwrap().body, "body");
}

#[test]
fn a_staged_transaction_survives_a_restart_until_its_outcome_is_recorded() {
    let state = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        name("1785070000000-abc123.md"),
        name("1785070000100-def456.md"),
        name("1785070000200-ghi789.md"),
    );
    {
        let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
        let backlog = [a.clone(), b.clone()];
        assert_eq!(
            store.stage_transaction(&backlog, Some("t-1"), 1).unwrap(),
            StageOutcome::Staged
        );
        assert_eq!(
            store
                .stage_transaction(std::slice::from_ref(&c), Some("t-2"), 2)
                .unwrap(),
            StageOutcome::Staged
        );
    }
    // A daemon killed here leaves both outcomes unknown; the next one finds them.
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(
        store.unresolved_transactions(),
        vec![
            ("t-1".to_owned(), vec![a.clone(), b.clone()]),
            ("t-2".to_owned(), vec![c.clone()]),
        ]
    );
    // Proof of "never written" releases the whole notice; proof of "written" keeps it staged.
    store.release_unsent(&[a.clone(), b.clone()]).unwrap();
    store.confirm_written(std::slice::from_ref(&c)).unwrap();
    let store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert!(store.unresolved_transactions().is_empty());
    assert_eq!(store.state_of(&a), DeliveryState::Pending);
    assert_eq!(store.state_of(&b), DeliveryState::Pending);
    assert_eq!(store.state_of(&c), DeliveryState::Staged);
}

#[test]
fn a_state_file_without_transactions_still_loads() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("ding/worker");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(OWNERSHIP_FILE),
        r#"{"version":1,"session":"worker","messages":{"1785070000000-abc123.md":{"state":"staged","since_unix_ms":1}}}"#,
    )
    .unwrap();
    let store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(
        store.state_of(&name("1785070000000-abc123.md")),
        DeliveryState::Staged
    );
    assert!(
        store.unresolved_transactions().is_empty(),
        "a record without a transaction stays staged: nothing can prove it unwritten"
    );
}

/// Issue 39, item 10: a notice cut off part-way is kept with the incarnation it was addressed
/// to, and made pending again (durably, with the reason) only by `requeue`; the reason stays
/// while the message is unread and goes with its archiving.
#[test]
fn a_cut_off_notice_remembers_its_incarnation_and_a_requeue_says_why_until_archived() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (
        name("1785070000000-abc123.md"),
        name("1785070000100-def456.md"),
    );
    {
        let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
        let outcome = store
            .stage_for(std::slice::from_ref(&a), Some("t-1"), Some("inc-1"), 1)
            .unwrap();
        assert_eq!(outcome, StageOutcome::Staged);
        let outcome = store
            .stage_for(std::slice::from_ref(&b), Some("t-2"), Some("inc-1"), 2)
            .unwrap();
        assert_eq!(outcome, StageOutcome::Staged);
        store.confirm_cut_off(std::slice::from_ref(&a)).unwrap();
        store.confirm_written(std::slice::from_ref(&b)).unwrap();
    }
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    let staged = store.staged();
    assert_eq!(staged.len(), 2);
    assert_eq!(
        (staged[0].cut_off, staged[0].incarnation.as_deref()),
        (true, Some("inc-1"))
    );
    assert_eq!((staged[1].cut_off, staged[1].txn.as_deref()), (false, None));
    store.requeue(std::slice::from_ref(&a), "cut off").unwrap();
    let mut store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(store.state_of(&a), DeliveryState::Pending);
    assert_eq!(store.state_of(&b), DeliveryState::Staged);
    assert_eq!(store.sent_again_because(&a), Some("cut off"));
    // Staged again, it keeps the reason; archived, it has none.
    let outcome = store.stage(std::slice::from_ref(&a), 3).unwrap();
    assert_eq!(outcome, StageOutcome::Staged);
    assert_eq!(store.sent_again_because(&a), Some("cut off"));
    store.reconcile(std::slice::from_ref(&b)).unwrap();
    let store = OwnershipStore::open(state.path(), &session()).unwrap();
    assert_eq!(store.sent_again_because(&a), None);
    assert_eq!(store.state_of(&a), DeliveryState::Pending);
}
