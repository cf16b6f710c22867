//! Links planted in the state directory are never followed (spec §7.1, §12): a symbolic link or
//! a hard-linked file in place of a message is not listed, read or moved, and a symbolic link in
//! place of any directory of the inbox or the ownership state is refused with an error naming
//! it, while what the link points to keeps its mode and its contents. Real files in a temporary
//! directory.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use belfry_ding::presence::{Presence, PresenceState};
use belfry_ding::{Error, Inbox, MessageName, OwnershipStore, SessionName};

const NAME: &str = "1785070000000-abc123.md";
const SECRET: &str = "---\nsubject: secret\n---\nthe outside file\n";

/// A temporary directory holding `state/` and an `outside/` directory (mode 0755) with a
/// message-shaped file in it, the target links point to.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join(NAME), SECRET).unwrap();
        fs::set_permissions(outside.join(NAME), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o755)).unwrap();
        Fixture { dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    fn outside_file(&self) -> PathBuf {
        self.outside().join(NAME)
    }

    /// Every entry under `outside/` with its mode and contents.
    fn outside_snapshot(&self) -> BTreeMap<String, (u32, Vec<u8>)> {
        snapshot(&self.outside())
    }
}

fn snapshot(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut entries = BTreeMap::new();
    let mode = |path: &Path| fs::symlink_metadata(path).unwrap().mode() & 0o7777;
    entries.insert(".".to_owned(), (mode(root), Vec::new()));
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let key = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                entries.insert(format!("{key}/"), (mode(&path), Vec::new()));
                stack.push(path);
            } else {
                entries.insert(key, (mode(&path), fs::read(&path).unwrap()));
            }
        }
    }
    entries
}

fn name() -> MessageName {
    MessageName::parse(NAME).unwrap()
}

fn session() -> SessionName {
    SessionName::parse("worker").unwrap()
}

fn assert_refused(err: &Error, path: &Path) {
    let text = err.to_string();
    assert!(
        matches!(err, Error::RefusedPath { .. }),
        "not a refusal: {text}"
    );
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("symbolic link"), "{text}");
}

/// Plants a link to the outside file as `new/<NAME>` (or a hard link, with `hard`).
fn plant_message(fixture: &Fixture, inbox: &Inbox, hard: bool) -> PathBuf {
    let planted = inbox.dir().join("new").join(NAME);
    if hard {
        fs::hard_link(fixture.outside_file(), &planted).unwrap();
        assert_eq!(fs::metadata(&planted).unwrap().nlink(), 2);
    } else {
        symlink(fixture.outside_file(), &planted).unwrap();
    }
    planted
}

/// What every way in must do with a planted message: not list it (but say why), not read it,
/// not archive it, not remove it in reconcile; the outside file keeps its mode and contents.
fn assert_planted_message_is_inert(fixture: &Fixture, inbox: &Inbox, planted: &Path, why: &str) {
    let before = fixture.outside_snapshot();
    assert!(inbox.list_unread().unwrap().is_empty());
    let scan = inbox.scan_unread().unwrap();
    assert!(scan.unread.is_empty());
    assert_eq!(scan.refused.len(), 1, "{scan:?}");
    assert_eq!(scan.refused[0].path, planted);
    assert!(scan.refused[0].reason.contains(why), "{scan:?}");
    assert!(!inbox.is_unread(&name()).unwrap());

    let err = inbox.read(&name()).unwrap_err().to_string();
    assert!(err.contains(&planted.display().to_string()), "{err}");
    assert!(err.contains(why), "{err}");
    assert!(!err.contains("the outside file"), "{err}");

    let err = inbox.archive(&name()).unwrap_err();
    assert!(matches!(err, Error::RefusedPath { .. }), "{err}");
    assert!(err.to_string().contains(why), "{err}");
    assert!(!inbox.is_archived(&name()).unwrap());
    assert!(!inbox.dir().join("archive").join(NAME).exists());

    let report = inbox.reconcile(SystemTime::now(), Duration::ZERO).unwrap();
    assert_eq!(report.foreign_entries, [NAME]);
    assert!(
        fs::symlink_metadata(planted).is_ok(),
        "the entry was removed"
    );
    assert_eq!(fixture.outside_snapshot(), before);
    assert_eq!(fs::read_to_string(fixture.outside_file()).unwrap(), SECRET);
}

#[test]
fn a_symlinked_message_is_not_listed_read_or_moved() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    let planted = plant_message(&fixture, &inbox, false);
    assert_planted_message_is_inert(&fixture, &inbox, &planted, "symbolic link");
}

#[test]
fn a_hard_linked_message_file_is_not_listed_read_or_moved() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    let planted = plant_message(&fixture, &inbox, true);
    assert_planted_message_is_inert(&fixture, &inbox, &planted, "hard link");
}

#[test]
fn a_symlinked_archived_message_is_not_read() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    symlink(
        fixture.outside_file(),
        inbox.dir().join("archive").join(NAME),
    )
    .unwrap();
    let err = inbox.read(&name()).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!err.contains("the outside file"), "{err}");
}

#[test]
fn a_symlinked_temporary_file_is_removed_as_a_link_and_its_target_kept() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    let before = fixture.outside_snapshot();
    let planted = inbox.dir().join("tmp").join(NAME);
    symlink(fixture.outside_file(), &planted).unwrap();
    let report = inbox
        .reconcile(
            SystemTime::now() + Duration::from_secs(3600),
            Duration::ZERO,
        )
        .unwrap();
    assert_eq!(report.removed_temporary, [NAME]);
    assert!(fs::symlink_metadata(&planted).is_err());
    assert_eq!(fixture.outside_snapshot(), before);
}

/// Where a link to `outside/` is planted, relative to the state directory's parent; everything
/// above it exists as real directories.
const LINKED_DIRECTORIES: &[&str] = &[
    "state",
    "state/inbox",
    "state/inbox/worker",
    "state/inbox/worker/new",
    "state/inbox/worker/tmp",
    "state/inbox/worker/archive",
];

/// Creates the real directories above `link` and plants `link` → `outside/`.
fn plant_directory(fixture: &Fixture, link: &str) -> PathBuf {
    let link = fixture.dir.path().join(link);
    fs::create_dir_all(link.parent().unwrap()).unwrap();
    if link.ends_with("new") || link.ends_with("tmp") || link.ends_with("archive") {
        // The other subdirectories are real, so only the planted one can be refused.
        for sub in ["new", "tmp", "archive"] {
            let _ = fs::create_dir(link.parent().unwrap().join(sub));
        }
        fs::remove_dir(&link).unwrap();
    }
    symlink(fixture.outside(), &link).unwrap();
    link
}

#[test]
fn a_symlinked_inbox_directory_is_refused_naming_it_and_its_target_is_untouched() {
    for planted in LINKED_DIRECTORIES {
        let fixture = Fixture::new();
        let link = plant_directory(&fixture, planted);
        let before = fixture.outside_snapshot();
        for result in [
            Inbox::open(&fixture.state(), "worker"),
            Inbox::open_existing(&fixture.state(), "worker"),
        ] {
            let err = result.unwrap_err();
            assert_refused(&err, &link);
        }
        assert_eq!(
            fixture.outside_snapshot(),
            before,
            "{planted}: target changed"
        );
        assert_eq!(
            fs::metadata(fixture.outside()).unwrap().mode() & 0o777,
            0o755,
            "{planted}: the link's target was chmod'ed"
        );
    }
}

#[test]
fn a_symlinked_ownership_directory_is_refused_naming_it_and_its_target_is_untouched() {
    for planted in ["state", "state/ding", "state/ding/worker"] {
        let fixture = Fixture::new();
        let link = plant_directory(&fixture, planted);
        let before = fixture.outside_snapshot();
        let err = OwnershipStore::open(&fixture.state(), &session()).unwrap_err();
        assert_refused(&err, &link);
        let err = belfry_ding::ownership::quarantine(&fixture.state(), &session(), 1).unwrap_err();
        assert_refused(&err, &link);
        assert_eq!(
            fixture.outside_snapshot(),
            before,
            "{planted}: target changed"
        );
    }
}

#[test]
fn a_symlinked_ownership_file_is_not_read_and_is_replaced_as_a_link() {
    let fixture = Fixture::new();
    let dir = fixture.state().join("ding").join("worker");
    fs::create_dir_all(&dir).unwrap();
    let outside_state = fixture.outside().join("ownership.json");
    fs::write(
        &outside_state,
        "{\"version\":1,\"session\":\"worker\",\"messages\":{}}",
    )
    .unwrap();
    symlink(&outside_state, dir.join("ownership.json")).unwrap();
    let before = fixture.outside_snapshot();
    let err = OwnershipStore::open(&fixture.state(), &session()).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    // The engine sets an unreadable state file aside: the link itself moves, not its target.
    let aside = belfry_ding::ownership::quarantine(&fixture.state(), &session(), 7).unwrap();
    assert!(fs::symlink_metadata(&aside)
        .unwrap()
        .file_type()
        .is_symlink());
    let mut store = OwnershipStore::open(&fixture.state(), &session()).unwrap();
    let _ = store.stage(&[name()], 1).unwrap();
    assert!(fs::symlink_metadata(store.path()).unwrap().is_file());
    assert_eq!(fixture.outside_snapshot(), before);
}

#[test]
fn a_symlinked_presence_file_is_not_read_and_storing_replaces_the_link_not_its_target() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    let outside_presence = fixture.outside().join("presence.json");
    fs::write(
        &outside_presence,
        "{\"state\":\"dnd\",\"since_unix_ms\":1}\n",
    )
    .unwrap();
    symlink(&outside_presence, inbox.dir().join("presence.json")).unwrap();
    let before = fixture.outside_snapshot();
    let err = Presence::load(&inbox).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    Presence {
        state: PresenceState::Busy,
        since_unix_ms: 2,
    }
    .store(&inbox)
    .unwrap();
    assert_eq!(fixture.outside_snapshot(), before);
    assert_eq!(
        Presence::load(&inbox).unwrap().map(|p| p.state),
        Some(PresenceState::Busy)
    );
}

#[test]
fn opening_an_unknown_inbox_without_creating_creates_nothing() {
    let fixture = Fixture::new();
    let err = Inbox::open_existing(&fixture.state(), "ghost").unwrap_err();
    assert!(matches!(err, Error::NoInbox { .. }), "{err}");
    assert!(err.to_string().contains("\"ghost\""), "{err}");
    assert!(!fixture.state().exists(), "the state directory was created");
    fs::create_dir_all(fixture.state().join("inbox")).unwrap();
    let before = snapshot(&fixture.state());
    let err = Inbox::open_existing(&fixture.state(), "ghost").unwrap_err();
    assert!(matches!(err, Error::NoInbox { .. }), "{err}");
    assert_eq!(snapshot(&fixture.state()), before);
    // Once something was posted, the inbox opens.
    Inbox::open(&fixture.state(), "ghost").unwrap();
    Inbox::open_existing(&fixture.state(), "ghost").unwrap();
}

#[test]
fn a_directory_owned_by_another_user_is_refused() {
    // Root's /tmp-independent directories give us one owned by someone else: `/` itself is
    // root's, so a state directory there is refused unless the tests run as root.
    if rustix::process::geteuid().is_root() {
        return;
    }
    let err = Inbox::open(Path::new("/"), "worker").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::RefusedPath { .. }), "{text}");
    assert!(text.contains("owned by uid 0"), "{text}");
}

#[test]
fn an_inbox_removed_while_open_says_so_and_opens_again() {
    let fixture = Fixture::new();
    let inbox = Inbox::open(&fixture.state(), "worker").unwrap();
    assert!(!inbox.is_removed());
    fs::remove_dir_all(inbox.dir()).unwrap();
    assert!(inbox.is_removed());
    let again = Inbox::open(&fixture.state(), "worker").unwrap();
    assert!(!again.is_removed());
    let name = again
        .post(&belfry_ding::FrontMatter::default(), "after")
        .unwrap();
    assert_eq!(again.list_unread().unwrap(), [name]);
}

#[test]
fn ownership_records_are_written_again_after_their_directory_was_removed() {
    let fixture = Fixture::new();
    let mut store = OwnershipStore::open(&fixture.state(), &session()).unwrap();
    let first = name();
    let second = MessageName::parse("1785070000001-abc124.md").unwrap();
    let _ = store.stage(std::slice::from_ref(&first), 1).unwrap();
    fs::remove_dir_all(fixture.state().join("ding").join("worker")).unwrap();
    let _ = store.stage(std::slice::from_ref(&second), 2).unwrap();
    let reopened = OwnershipStore::open(&fixture.state(), &session()).unwrap();
    assert_eq!(
        reopened
            .owned()
            .map(|(name, ..)| name.clone())
            .collect::<Vec<_>>(),
        [first, second]
    );
}
