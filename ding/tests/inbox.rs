//! The inbox on real files in a temporary state directory (spec §7.1, §12).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use belfry_ding::inbox::{ArchiveOutcome, DEFAULT_TMP_MAX_AGE};
use belfry_ding::{Error, FrontMatter, Inbox, MessageName, MessageStatus};

fn front_matter(subject: &str, from: &str) -> FrontMatter {
    FrontMatter {
        subject: Some(subject.to_owned()),
        from: Some(from.to_owned()),
        ..FrontMatter::default()
    }
}

/// Every file under `root` with its contents, to prove that an operation changed nothing.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let key = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                files.insert(format!("{key}/"), Vec::new());
                stack.push(path);
            } else {
                files.insert(key, fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn post_list_read_archive_in_fifo_order() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let first = inbox.post(&front_matter("first", "a"), "one\n").unwrap();
    let second = inbox.post(&front_matter("second", "b"), "two\n").unwrap();
    let third = inbox.post(&FrontMatter::default(), "three\n").unwrap();
    assert_eq!(
        inbox.list_unread().unwrap(),
        [first.clone(), second.clone(), third.clone()]
    );
    assert!(first.as_str() < second.as_str() && second.as_str() < third.as_str());

    let message = inbox.read(&second).unwrap();
    assert_eq!(message.status, MessageStatus::Unread);
    assert_eq!(message.front_matter, front_matter("second", "b"));
    assert_eq!(message.body, "two\n");
    let on_disk = fs::read_to_string(inbox.dir().join("new").join(second.as_str())).unwrap();
    assert_eq!(on_disk, "---\nfrom: b\nsubject: second\n---\ntwo\n");

    assert_eq!(inbox.archive(&first).unwrap(), ArchiveOutcome::Archived);
    assert_eq!(inbox.list_unread().unwrap(), [second.clone(), third]);
    assert!(inbox.dir().join("archive").join(first.as_str()).is_file());
    assert!(!inbox.dir().join("new").join(first.as_str()).exists());

    let archived = inbox.read(&first).unwrap();
    assert_eq!(archived.status, MessageStatus::Archived);
    assert_eq!(archived.body, "one\n");
    assert!(inbox.is_archived(&first).unwrap());
    assert!(inbox.is_unread(&second).unwrap());
    assert!(!inbox.is_unread(&first).unwrap());
}

#[test]
fn archiving_twice_is_a_no_op() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let name = inbox.post(&front_matter("s", "f"), "body").unwrap();
    assert_eq!(inbox.archive(&name).unwrap(), ArchiveOutcome::Archived);
    let before = tree(state.path());
    assert_eq!(
        inbox.archive(&name).unwrap(),
        ArchiveOutcome::AlreadyArchived
    );
    assert_eq!(tree(state.path()), before);
}

#[test]
fn posted_messages_survive_reopening() {
    let state = tempfile::tempdir().unwrap();
    let name = {
        let inbox = Inbox::open(state.path(), "worker").unwrap();
        inbox.post(&front_matter("durable", "me"), "kept").unwrap()
    };
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    assert_eq!(inbox.list_unread().unwrap(), std::slice::from_ref(&name));
    assert_eq!(inbox.read(&name).unwrap().body, "kept");
}

#[test]
fn archived_copy_reappearing_in_new_is_suppressed_and_cleaned() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let name = inbox.post(&front_matter("once", "a"), "body").unwrap();
    let other = inbox.post(&front_matter("other", "a"), "body").unwrap();
    inbox.archive(&name).unwrap();

    // A synchronising tool or a restored backup puts the archived message back into new/.
    let copy = inbox.dir().join("new").join(name.as_str());
    fs::copy(inbox.dir().join("archive").join(name.as_str()), &copy).unwrap();

    assert_eq!(inbox.list_unread().unwrap(), std::slice::from_ref(&other));
    assert!(!inbox.is_unread(&name).unwrap());
    assert_eq!(inbox.read(&name).unwrap().status, MessageStatus::Archived);

    let report = inbox
        .reconcile(SystemTime::now(), DEFAULT_TMP_MAX_AGE)
        .unwrap();
    assert_eq!(report.removed_duplicates, std::slice::from_ref(&name));
    assert!(!copy.exists());
    assert!(inbox.dir().join("archive").join(name.as_str()).is_file());
    assert_eq!(inbox.list_unread().unwrap(), [other]);
}

#[test]
fn archiving_a_reappeared_copy_keeps_the_receipt() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let name = inbox
        .post(&front_matter("original", "a"), "original")
        .unwrap();
    inbox.archive(&name).unwrap();
    let copy = inbox.dir().join("new").join(name.as_str());
    fs::write(&copy, "an impostor").unwrap();
    assert_eq!(
        inbox.archive(&name).unwrap(),
        ArchiveOutcome::AlreadyArchived
    );
    assert!(!copy.exists());
    assert_eq!(inbox.read(&name).unwrap().body, "original");
}

#[test]
fn torn_write_in_tmp_is_never_listed_and_is_cleaned_when_stale() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let kept = inbox.post(&front_matter("whole", "a"), "whole").unwrap();

    // A crash between write and rename leaves a partial file in tmp/, under a valid name.
    let torn = inbox.dir().join("tmp").join("1785070000000-torn00.md");
    fs::write(&torn, "---\nsubject: half a mess").unwrap();
    let fresh = inbox.dir().join("tmp").join("junk-being-written");
    fs::write(&fresh, "still being written").unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(2 * 60 * 60);
    fs::File::options()
        .write(true)
        .open(&torn)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();

    assert_eq!(inbox.list_unread().unwrap(), std::slice::from_ref(&kept));
    let report = inbox
        .reconcile(SystemTime::now(), DEFAULT_TMP_MAX_AGE)
        .unwrap();
    assert_eq!(report.removed_temporary, ["1785070000000-torn00.md"]);
    assert!(!torn.exists());
    assert!(fresh.exists(), "a fresh temporary file may still be in use");
    assert_eq!(inbox.list_unread().unwrap(), [kept]);
}

#[test]
fn foreign_entries_in_new_are_ignored_and_reported() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let name = inbox.post(&front_matter("real", "a"), "real").unwrap();
    let new = inbox.dir().join("new");
    fs::write(new.join("notes.txt"), "not a message").unwrap();
    fs::write(new.join("123-ABCDEF.md"), "wrong grammar").unwrap();
    fs::create_dir(new.join("1785070000000-dir000.md")).unwrap();
    assert_eq!(inbox.list_unread().unwrap(), [name]);
    let report = inbox
        .reconcile(SystemTime::now(), DEFAULT_TMP_MAX_AGE)
        .unwrap();
    assert_eq!(
        report.foreign_entries,
        ["123-ABCDEF.md", "1785070000000-dir000.md", "notes.txt"]
    );
    assert!(
        new.join("notes.txt").exists(),
        "foreign entries are left alone"
    );
    let squatter = MessageName::parse("1785070000000-dir000.md").unwrap();
    assert!(!inbox.is_unread(&squatter).unwrap());
    assert!(matches!(
        inbox.archive(&squatter).unwrap_err(),
        Error::MessageNotFound { .. }
    ));
    assert!(new.join("1785070000000-dir000.md").is_dir());
}

#[test]
fn bad_names_are_clear_errors_and_change_nothing() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    inbox.post(&front_matter("keep", "a"), "keep").unwrap();
    // Files an attacker would like a bad name to reach.
    fs::write(state.path().join("inbox").join("x"), "outside").unwrap();
    fs::write(inbox.dir().join("new").join("x.md"), "not in the grammar").unwrap();
    let before = tree(state.path());

    for bad in ["../x", "a/b.md", "123-ABCDEF.md", "x.md"] {
        let err = MessageName::parse(bad).unwrap_err();
        assert!(matches!(&err, Error::InvalidMessageName { name } if name == bad));
        assert_eq!(
            err.to_string(),
            format!("inbox name \"{bad}\" is not a message file name (<unix-ms>-<rand6>.md)")
        );
    }
    assert_eq!(
        MessageName::parse("../x").unwrap_err().to_string(),
        "inbox name \"../x\" is not a message file name (<unix-ms>-<rand6>.md)"
    );
    assert_eq!(tree(state.path()), before);
}

#[test]
fn missing_messages_are_named_in_the_error() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let before = tree(state.path());
    let ghost = MessageName::parse("1785070000000-ghost1.md").unwrap();
    let err = inbox.read(&ghost).unwrap_err();
    assert_eq!(
        err.to_string(),
        "inbox \"worker\" has no message \"1785070000000-ghost1.md\" (neither unread nor archived)"
    );
    assert!(matches!(
        inbox.archive(&ghost).unwrap_err(),
        Error::MessageNotFound { .. }
    ));
    assert_eq!(tree(state.path()), before);
}

#[test]
fn front_matter_survives_posting_verbatim() {
    let state = tempfile::tempdir().unwrap();
    let inbox = Inbox::open(state.path(), "worker").unwrap();
    let front_matter = FrontMatter {
        from: Some("reviewer".into()),
        subject: Some("line one\nline two: \x1b[201~".into()),
        in_reply_to: Some("1785070000000-abc123.md".into()),
        tags: vec!["a".into(), "b, c".into()],
        priority: Some("high".into()),
        extra: vec![("x-thread".into(), "42".into())],
    };
    let name = inbox.post(&front_matter, "# Title\n\nbody\n").unwrap();
    let message = inbox.read(&name).unwrap();
    assert_eq!(message.front_matter, front_matter);
    assert_eq!(message.body, "# Title\n\nbody\n");
}

#[test]
fn inboxes_of_different_sessions_are_separate() {
    let state = tempfile::tempdir().unwrap();
    let worker = Inbox::open(state.path(), "worker").unwrap();
    let reviewer = Inbox::open(state.path(), "reviewer").unwrap();
    let name = worker.post(&front_matter("for worker", "a"), "x").unwrap();
    assert!(reviewer.list_unread().unwrap().is_empty());
    assert!(matches!(
        reviewer.read(&name).unwrap_err(),
        Error::MessageNotFound { .. }
    ));
}
