//! Issue 40 items 3 and 4 end to end: the real daemon runs `belfry-adapter --provider pi` as a
//! pane's DING adapter, and the pane runs a scripted program that draws a fake composer the way
//! that grammar describes it and writes OSC 7501 program status reports of itself (the report
//! it is told to in a control file, each once). No hook ever fires: the program's own `idle`
//! is what lets the notice through, its `working` and `blocked` hold it (named so in `ding
//! status`), and a busy row the grammar knows holds it whatever the program said.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use belfry_tests::{bin_dir, eventually, read_or_empty, Env};
use serde_json::Value;

const RICH: &str = "turn-boundary+fresh-idle";

/// The fake harness: raw mode, an editor between two rules, Enter submits the editor's text
/// to the log. Every 100 ms it reads `ctl`: a new line there is written as the body of one
/// OSC 7501 report; while `busy` exists it draws a spinner row "Working..." above the editor.
const FAKE_HARNESS: &str = r#"
log=$1; ctl=$2; busy=$3
rule=$(printf '─%.0s' $(seq 1 60))
buf=""; last=""; drawn_busy=0
stty raw -echo
draw() {
  printf '\033[H\033[2J'
  printf 'READY fake harness\r\n'
  if [ -e "$busy" ]; then printf ' ⠋ Working...\r\n'; else printf '\r\n'; fi
  printf '%s\r\n' "$rule"
  printf '%s\r\n' "$buf"
  printf '%s\r\n' "$rule"
  printf '/work\r\n'
  printf '\033[4;%dH' $(( ${#buf} + 1 ))
}
draw
while :; do
  # `read -t 0` only asks whether input waits; the read that takes it then blocks. A read
  # with a timeout can lose the byte that arrives as the timeout fires (a notice's Enter).
  if read -t 0; then
    IFS= read -r -s -n1 -d '' c
    case "$c" in
      $'\r'|$'\n') printf 'SUBMIT %s\n' "$buf" >> "$log"; buf="" ;;
      $'\x7f') buf=${buf%?} ;;
      *) buf+=$c ;;
    esac
    draw
  else
    sleep 0.05
  fi
  want=$(cat "$ctl" 2>/dev/null)
  if [ "$want" != "$last" ]; then
    last=$want
    [ -n "$want" ] && printf '\033]7501;%s\033\\' "$want"
  fi
  now_busy=0; [ -e "$busy" ] && now_busy=1
  if [ "$now_busy" != "$drawn_busy" ]; then drawn_busy=$now_busy; draw; fi
done
"#;

struct Harness {
    log: PathBuf,
    ctl: PathBuf,
    busy: PathBuf,
}

impl Harness {
    /// Makes the program report `body` (`state=idle`, `state=blocked:kind=permission`, …).
    fn report(&self, body: &str) {
        std::fs::write(&self.ctl, body).unwrap();
    }

    fn submitted(&self) -> String {
        String::from_utf8_lossy(&read_or_empty(&self.log)).into_owned()
    }
}

fn fake_harness_pane(env: &Env) -> Harness {
    let script = env.path("fake-harness.sh");
    std::fs::write(&script, FAKE_HARNESS).unwrap();
    let harness = Harness {
        log: env.path("submitted.log"),
        ctl: env.path("report"),
        busy: env.path("busy"),
    };
    let adapter = bin_dir().join("belfry-adapter");
    assert!(
        adapter.exists(),
        "build the binaries first: {}",
        adapter.display()
    );
    let arg = |p: &Path| p.display().to_string();
    env.ok(&[
        "new",
        "agent",
        "--size",
        "24x100",
        "--ding-delivery",
        RICH,
        "--ding-adapter",
        &arg(&adapter),
        "--ding-adapter=--provider",
        "--ding-adapter",
        "pi",
        "--",
        "bash",
        &arg(&script),
        &arg(&harness.log),
        &arg(&harness.ctl),
        &arg(&harness.busy),
    ]);
    env.wait_screen("agent", "READY fake harness");
    let ok = eventually(Duration::from_secs(8), || {
        status(env)["last_event"]["kind"] == "activity"
    });
    assert!(ok, "the adapter never spoke; status: {}", status(env));
    harness
}

fn post(env: &Env, subject: &str) -> String {
    env.post_mail("agent", "lead", subject, "body\n")
}

fn status(env: &Env) -> Value {
    env.ding_status("agent")
}

fn wait_for_state(env: &Env, want: &str) {
    env.wait_for_mail_state("agent", want);
}

fn submitted_notice(name: &str, subject: &str) -> String {
    let id = &name[name.len() - 9..name.len() - 3];
    format!("SUBMIT [DING] new message: [id:{id}] {subject} (from lead); check your inbox\n")
}

/// How long the notice took to be submitted after `from`, if it was within `within`.
fn delivered_within(
    harness: &Harness,
    want: &str,
    from: Instant,
    within: Duration,
) -> Option<Duration> {
    eventually(within, || harness.submitted() == want).then(|| from.elapsed())
}

#[test]
fn a_fresh_program_reporting_idle_gets_its_notice_with_no_hook_ever_fired() {
    let env = Env::new();
    let harness = fake_harness_pane(&env);
    // Silent and hookless: nothing proves it waits for input.
    let name = post(&env, "start the task");
    wait_for_state(&env, "held:unknown");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        harness.submitted(),
        "",
        "nothing is typed before the program speaks"
    );
    let from = Instant::now();
    harness.report("state=idle:app=fake");
    let want = submitted_notice(&name, "start the task");
    let took = delivered_within(&harness, &want, from, Duration::from_secs(8));
    assert!(
        took.is_some(),
        "pane got {:?}; status: {}",
        harness.submitted(),
        status(&env)
    );
    eprintln!(
        "delivered {:?} after the program reported idle",
        took.unwrap()
    );
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(harness.submitted(), want, "exactly one notice");
}

#[test]
fn working_and_blocked_program_status_hold_and_name_the_status() {
    let env = Env::new();
    let harness = fake_harness_pane(&env);
    harness.report("state=working:app=fake");
    let name = post(&env, "review the patch");
    wait_for_state(&env, "held:working");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(harness.submitted(), "", "nothing is typed while it works");
    harness.report("state=blocked:kind=permission:app=fake");
    wait_for_state(&env, "held:blocked");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        harness.submitted(),
        "",
        "nothing is typed while it waits for a person"
    );
    harness.report("state=idle:app=fake");
    let want = submitted_notice(&name, "review the patch");
    assert!(
        eventually(Duration::from_secs(8), || harness.submitted() == want),
        "pane got {:?}; status: {}",
        harness.submitted(),
        status(&env)
    );
}

#[test]
fn a_busy_screen_row_holds_the_notice_whatever_the_program_reported() {
    let env = Env::new();
    let harness = fake_harness_pane(&env);
    std::fs::write(&harness.busy, "").unwrap();
    env.wait_screen("agent", "Working...");
    harness.report("state=idle:app=fake");
    let name = post(&env, "run the tests");
    wait_for_state(&env, "held:active");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        harness.submitted(),
        "",
        "the busy row vetoes the reported idle"
    );
    std::fs::remove_file(&harness.busy).unwrap();
    let want = submitted_notice(&name, "run the tests");
    assert!(
        eventually(Duration::from_secs(8), || harness.submitted() == want),
        "pane got {:?}; status: {}",
        harness.submitted(),
        status(&env)
    );
}
