//! spec §7.4 end to end: the real daemon runs `belfry-adapter --provider pi` as a pane's DING
//! adapter, and the pane runs a scripted program that draws a fake composer the way the pinned
//! harness's screen grammar describes it (an editor between two full-width rules, the cursor on
//! its row). Hook events reach the adapter through a real `belfry dispatch` in the pane's
//! environment. A notice is typed only into an idle, provably empty composer, exactly once; a
//! human's draft and a dialog are never touched.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use belfry_tests::{bin_dir, eventually, read_or_empty, Env};
use serde_json::{json, Value};

const RICH: &str = "turn-boundary+fresh-idle";

/// The fake harness: raw mode, an editor between two rules, Enter "submits" the editor's text
/// to the log, Backspace deletes, Ctrl-D opens (or closes) a dialog that replaces the editor;
/// Enter in the dialog approves it, which the log records. (`read -n1` may turn the terminal's
/// carriage return into a newline, so either is Enter.)
const FAKE_COMPOSER: &str = r#"
log=$1
rule=$(printf '─%.0s' $(seq 1 60))
buf=""
dialog=0
stty raw -echo
draw() {
  printf '\033[H\033[2J'
  printf 'READY fake composer\r\n\r\n'
  if [ "$dialog" = 1 ]; then
    printf 'Allow the command?\r\n> 1. Yes\r\n  2. No\r\n'
    printf '\033[4;1H'
    return
  fi
  printf '%s\r\n' "$rule"
  printf '%s\r\n' "$buf"
  printf '%s\r\n' "$rule"
  printf '/work\r\n'
  printf '\033[4;%dH' $(( ${#buf} + 1 ))
}
draw
while IFS= read -r -s -n1 -d '' c; do
  case "$c" in
    $'\r'|$'\n')
      if [ "$dialog" = 1 ]; then printf 'APPROVED\n' >> "$log"; dialog=0
      else printf 'SUBMIT %s\n' "$buf" >> "$log"; buf=""; fi ;;
    $'\x7f') buf=${buf%?} ;;
    $'\x04') dialog=$(( 1 - dialog )) ;;
    *) buf+=$c ;;
  esac
  draw
done
"#;

fn engine_adapter_bin() -> PathBuf {
    bin_dir().join("belfry-adapter")
}

/// A pane under the rich policy with the engine's adapter; returns the fake harness's log.
fn fake_harness_pane(env: &Env) -> PathBuf {
    let script = env.path("fake-composer.sh");
    std::fs::write(&script, FAKE_COMPOSER).unwrap();
    let log = env.path("submitted.log");
    let adapter = engine_adapter_bin();
    assert!(
        adapter.exists(),
        "build the binaries first: {}",
        adapter.display()
    );
    let (adapter, script_s, log_s) = (
        adapter.display().to_string(),
        script.display().to_string(),
        log.display().to_string(),
    );
    env.ok(&[
        "new",
        "agent",
        "--size",
        "24x100",
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        &adapter,
        "--ding-adapter=--provider",
        "--ding-adapter",
        "pi",
        "--",
        "bash",
        &script_s,
        &log_s,
    ]);
    env.wait_screen("agent", "READY fake composer");
    // A hook fired before the adapter subscribed would be lost (and the pane stay `unknown`,
    // which is safe but not what these tests are about): wait for its first event.
    let ok = eventually(Duration::from_secs(8), || {
        status(env)["last_event"]["kind"] == "activity"
    });
    assert!(ok, "the adapter never spoke; status: {}", status(env));
    log
}

/// Runs `belfry dispatch --event EVENT` as a hook inside the pane would.
fn hook(env: &Env, event: &str) {
    let snap = env.snapshot("agent");
    let mut cmd = env.cmd(&["dispatch", "--event", event]);
    cmd.env("BELFRY_SESSION", "agent")
        .env("BELFRY_SOCKET", env.socket())
        .env("BELFRY_INCARNATION", snap["incarnation"].as_str().unwrap())
        .env("BELFRY_GENERATION", snap["generation"].as_str().unwrap())
        .env("BELFRY_INBOX", env.state().join("inbox").join("agent"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("dispatch");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            json!({"hook_event_name": "test", "session_id": "s1"})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "dispatch --event {event}");
}

fn post(env: &Env, subject: &str) -> String {
    env.post_mail("agent", "lead", subject, "body\n")
}

fn status(env: &Env) -> Value {
    env.ding_status("agent")
}

fn states(env: &Env) -> Vec<String> {
    env.mail_states("agent")
}

fn log_text(log: &Path) -> String {
    String::from_utf8_lossy(&read_or_empty(log)).into_owned()
}

/// The notice line the fake harness logs when a notice for `name` is submitted.
fn submitted_notice(name: &str, subject: &str) -> String {
    let id = &name[name.len() - 9..name.len() - 3];
    format!("SUBMIT [DING] new message: [id:{id}] {subject} (from lead); check your inbox\n")
}

fn wait_for_state(env: &Env, want: &str) {
    env.wait_for_mail_state("agent", want);
}

fn wait_for_summary(env: &Env, prefix: &str) {
    let ok = eventually(Duration::from_secs(8), || {
        status(env)["last_event"]["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with(prefix))
    });
    assert!(ok, "expected an event {prefix:?}; status: {}", status(env));
}

#[test]
fn idle_and_empty_gets_exactly_one_guarded_send() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    // No hook has said the harness is idle: an empty composer alone is no lease.
    let name = post(&env, "fix the build");
    wait_for_state(&env, "held:unknown");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(log_text(&log), "", "nothing is typed before a turn-stop");
    hook(&env, "turn-stop");
    let want = submitted_notice(&name, "fix the build");
    assert!(
        eventually(Duration::from_secs(8), || log_text(&log) == want),
        "pane got {:?}; status: {}",
        log_text(&log),
        status(&env)
    );
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(log_text(&log), want, "exactly one notice");
    assert_eq!(status(&env)["counters"]["sends"], 1);
}

#[test]
fn a_draft_is_never_touched_and_the_notice_waits_for_it() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    hook(&env, "turn-stop");
    env.ok(&["send", "agent", "--text", "my draft"]);
    env.wait_screen("agent", "my draft");
    let name = post(&env, "review the patch");
    wait_for_state(&env, "held:composer-nonempty");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(log_text(&log), "", "the draft was not submitted");
    assert!(
        env.lines("agent").iter().any(|line| line == "my draft"),
        "the draft is intact: {:?}",
        env.lines("agent")
    );
    assert_eq!(status(&env)["counters"]["sends"], 0);
    // The human clears the draft: the composer is provably empty again and the notice goes.
    for _ in 0.."my draft".len() {
        env.ok(&["send", "agent", "--key", "BSpace"]);
    }
    let want = submitted_notice(&name, "review the patch");
    assert!(
        eventually(Duration::from_secs(8), || log_text(&log) == want),
        "pane got {:?}; status: {}",
        log_text(&log),
        status(&env)
    );
}

#[test]
fn a_dialog_holds_with_composer_unknown_and_stays_pending() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    hook(&env, "turn-stop");
    env.ok(&["send", "agent", "--key", "C-d"]);
    env.wait_screen("agent", "Allow the command");
    post(&env, "run the tests");
    wait_for_state(&env, "held:composer-unknown");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(log_text(&log), "", "the dialog was not answered");
    assert!(env
        .lines("agent")
        .iter()
        .any(|l| l.contains("Allow the command")));
    assert_eq!(status(&env)["counters"]["sends"], 0);
}

#[test]
fn a_turn_that_starts_again_holds_as_active() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    hook(&env, "turn-stop");
    wait_for_summary(&env, "idle, composer empty");
    hook(&env, "prompt-submit");
    // The idle lease granted a moment ago is superseded only once the adapter has seen the
    // hook; a real harness also redraws at submit, which moves the revision the lease names.
    wait_for_summary(&env, "active, composer empty");
    post(&env, "later");
    wait_for_state(&env, "held:active");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(log_text(&log), "");
}

/// An interrupt (a person pressed Escape: Claude Code's and Codex's `Interrupt`, dispatched as
/// `interrupt`) ends the turn, which no turn-stop will (neither harness fires one for an
/// interrupted turn), and is a person's presence: the mail held while the turn ran is first
/// held as `typed`, as after their keystrokes, and goes once the settle time has passed.
#[test]
fn an_interrupt_ends_the_turn_and_holds_mail_as_a_person_present() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    hook(&env, "turn-stop");
    wait_for_summary(&env, "idle, composer empty");
    hook(&env, "prompt-submit");
    wait_for_summary(&env, "active, composer empty");
    let name = post(&env, "after the interrupt");
    wait_for_state(&env, "held:active");
    hook(&env, "interrupt");
    wait_for_state(&env, "held:typed");
    let want = submitted_notice(&name, "after the interrupt");
    assert!(
        eventually(Duration::from_secs(8), || log_text(&log) == want),
        "after the interrupt the pane got {:?}; status: {}",
        log_text(&log),
        status(&env)
    );
}

/// Bad input gets a clear error and exit 2, never a hang: an unknown provider names the ones
/// built in, a missing pane environment names the variables.
#[test]
fn bad_arguments_are_refused_in_words() {
    let run = |args: &[&str], with_env: bool| {
        let mut cmd = std::process::Command::new(engine_adapter_bin());
        cmd.args(args)
            .env_remove("BELFRY_SESSION")
            .env_remove("BELFRY_SOCKET");
        if with_env {
            cmd.env("BELFRY_SESSION", "agent")
                .env("BELFRY_SOCKET", "/nonexistent/belfry.sock");
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--provider", "nosuch"], true);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no screen grammar named \"nosuch\"") && err.contains("pi"),
        "{err}"
    );
    let (code, err) = run(&[], true);
    assert_eq!(code, Some(2));
    assert!(err.contains("give --provider NAME"), "{err}");
    let (code, err) = run(&["--provider", "pi"], false);
    assert_eq!(code, Some(2));
    assert!(err.contains("BELFRY_SESSION"), "{err}");
    let (code, err) = run(&["--provider", "pi", "--valid-for-ms", "soon"], true);
    assert_eq!(code, Some(2));
    assert!(err.contains("\"soon\" is not a whole number"), "{err}");
    // No daemon at the socket: it says so and fails (the daemon restarts it with backoff).
    let (code, err) = run(&["--provider", "pi"], true);
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach the daemon"), "{err}");
}

/// A restarted program (a new incarnation) has proved nothing about its turns: the idle its
/// predecessor reported does not carry over, and nothing is typed until a turn-stop of the new
/// incarnation.
#[test]
fn a_restarted_program_is_unknown_until_its_own_turn_stop() {
    let env = Env::new();
    let log = fake_harness_pane(&env);
    hook(&env, "turn-stop");
    wait_for_summary(&env, "idle, composer empty");
    let before = env.snapshot("agent")["incarnation"].clone();
    env.ok(&["restart", "agent"]);
    let ok = eventually(Duration::from_secs(8), || {
        env.snapshot("agent")["incarnation"] != before
    });
    assert!(ok, "the pane got a new incarnation");
    env.wait_screen("agent", "READY fake composer");
    let name = post(&env, "after restart");
    let ok = eventually(Duration::from_secs(8), || {
        states(&env)
            .iter()
            .all(|s| s.starts_with("held:") && s != "held:composer-nonempty")
    });
    assert!(ok, "held after the restart; status: {}", status(&env));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(log_text(&log), "", "nothing typed into the new incarnation");
    // The new incarnation's own turn-stop makes it idle.
    wait_for_summary(&env, "unknown, composer empty");
    hook(&env, "turn-stop");
    let want = submitted_notice(&name, "after restart");
    assert!(
        eventually(Duration::from_secs(8), || log_text(&log) == want),
        "pane got {:?}; status: {}",
        log_text(&log),
        status(&env)
    );
}
