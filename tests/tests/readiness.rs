//! spec §10: an adapter's readiness rule holds DING until the pane's program accepts input. A
//! harness that takes seconds to start (OpenCode takes 6–10 s) loses a keystroke sent before
//! then; here the pane's program is a shell that, until a gate file appears, reads and records
//! whatever reaches it (the keystrokes a slow harness would lose), then becomes the recorder,
//! which draws `READY` — the line the test adapter's readiness rule waits for. Real daemon, real
//! pane host, real PTY, the real inbox.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use belfry_tests::{eventually, read_or_empty, recorder_bin, Env};

/// A test adapter whose declaration says only when its harness is ready.
const DECLARATION: &str = r#"{
  "adapter": "slow-start",
  "harness": "belfry test fixture (a harness that accepts input only once it draws READY)",
  "harness_version": "0",
  "source": "hand-written for tests/tests/readiness.rs",
  "readiness": {"screen": "(?m)^READY", "why": "the fixture draws READY once it reads input"}
}
"#;

fn post(env: &Env, session: &str, subject: &str) {
    let mut child = env
        .cmd(&["inbox", "post", session, "--subject", subject])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("inbox post");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"body\n")
        .expect("write body");
    assert!(child.wait().expect("wait").success(), "inbox post failed");
}

/// An environment whose adapters folder (`$BELFRY_ADAPTERS`) holds `declaration` as the
/// adapter `name`.
fn env_with_adapter(name: &str, declaration: &str) -> Env {
    let mut env = Env::new();
    let adapters = env.path("adapters");
    std::fs::create_dir_all(adapters.join(name)).expect("mkdir adapter");
    std::fs::write(adapters.join(name).join("declaration.json"), declaration).expect("write");
    env.extra = vec![(
        "BELFRY_ADAPTERS".to_string(),
        adapters.display().to_string(),
    )];
    env
}

/// The slow-starting program of these tests: it runs `prelude`, prints `starting`, records
/// whatever reaches it in `early` until `gate` exists, then becomes the recorder (logging to
/// `log`), which draws `READY`.
struct SlowStart {
    gate: std::path::PathBuf,
    early: std::path::PathBuf,
    log: std::path::PathBuf,
    script: std::path::PathBuf,
}

/// `belfry new agent --adapter slow-start -- SCRIPT`.
fn start_agent(env: &Env, script: &std::path::Path) {
    env.ok(&[
        "new",
        "agent",
        "--adapter",
        "slow-start",
        "--",
        &script.display().to_string(),
    ]);
}

fn slow_start(env: &Env, prelude: &str) -> SlowStart {
    let program = SlowStart {
        gate: env.path("gate"),
        early: env.path("early.log"),
        log: env.path("pane.log"),
        script: env.path("slow-start.sh"),
    };
    std::fs::write(
        &program.script,
        format!(
            "#!/bin/bash\n{prelude}echo starting\n\
             while [ ! -e '{gate}' ]; do\n\
               IFS= read -r -t 0.1 line; [ -n \"$line\" ] && printf '%s\\n' \"$line\" >> '{early}'\n\
             done\n\
             exec '{rec}' --log '{log}'\n",
            gate = program.gate.display(),
            early = program.early.display(),
            rec = recorder_bin().display(),
            log = program.log.display(),
        ),
    )
    .expect("write script");
    std::fs::set_permissions(&program.script, std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    program
}

#[test]
fn ding_sends_nothing_before_the_adapter_says_the_harness_is_ready() {
    let env = env_with_adapter("slow-start", DECLARATION);
    let SlowStart {
        gate,
        early,
        log,
        script,
    } = slow_start(&env, "");
    start_agent(&env, &script);
    env.wait_screen("agent", "starting");
    post(&env, "agent", "before-ready");

    // The aggressive policy announces a message within about a second of its post; held by
    // readiness, nothing reaches the pane in three.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&early)),
        "",
        "a notice was typed before the harness was ready"
    );
    let doctor = env.run(&["doctor", "agent", "--json"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("\"not-ready\""), "{text}");
    // `belfry ding status` says why the message waits, in its text and its JSON.
    let status =
        String::from_utf8_lossy(&env.run(&["ding", "status", "agent"]).stdout).into_owned();
    assert!(
        status.contains("  input:      held until the program is ready: "),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&env.run(&["ding", "status", "agent", "--json"]).stdout)
            .expect("ding status --json");
    assert!(json["not_ready"].is_string(), "{json}");

    std::fs::write(&gate, "").expect("open the gate");
    env.wait_screen("agent", "(?m)^READY");
    assert!(
        eventually(Duration::from_secs(10), || {
            String::from_utf8_lossy(&read_or_empty(&log)).contains("before-ready")
        }),
        "the held notice was never delivered once the harness was ready"
    );
    std::thread::sleep(Duration::from_millis(800));
    let typed = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert_eq!(typed.matches("[DING]").count(), 1, "{typed:?}");
    assert_eq!(String::from_utf8_lossy(&read_or_empty(&early)), "");
    let json: serde_json::Value =
        serde_json::from_slice(&env.run(&["ding", "status", "agent", "--json"]).stdout)
            .expect("ding status --json");
    assert!(json.get("not_ready").is_none(), "{json}");
}

/// spec §7.3: an adapter may declare that its harness takes a notice's Enter late and submits
/// the keys that arrive right after it too (`notice_settle`); the notice's transaction then
/// keeps the pane's input that long after its Enter, so a human's keys queued behind it wait.
/// Here a send started once the Enter is in waits for the input until the 2 s settle is
/// over: far longer than the few milliseconds it takes on a free pane (shorter only by however
/// late the test saw the Enter).
#[test]
fn a_declared_notice_settle_keeps_the_input_after_the_enter() {
    const SETTLING: &str = r#"{
  "adapter": "late-enter",
  "harness": "belfry test fixture (a harness that takes the Enter late)",
  "harness_version": "0",
  "source": "hand-written for tests/tests/readiness.rs",
  "notice_settle": {"ms": 2000, "why": "the fixture's harness submits keys typed right after the Enter"}
}
"#;
    let env = env_with_adapter("late-enter", SETTLING);
    let log = env.recorder_pane("agent", &["--adapter", "late-enter"]);
    post(&env, "agent", "settle");
    assert!(
        eventually(Duration::from_secs(10), || read_or_empty(&log)
            .ends_with(b"\r")),
        "the notice never arrived: {:?}",
        String::from_utf8_lossy(&read_or_empty(&log))
    );
    let started = std::time::Instant::now();
    env.ok(&["send", "agent", "--text", "HUMAN"]);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "a send right after the notice's Enter was written after {waited:?}: the input was \
         not kept"
    );
    assert!(eventually(Duration::from_secs(5), || {
        String::from_utf8_lossy(&read_or_empty(&log)).ends_with("\rHUMAN")
    }));
}

/// spec §10 after a restart: the new program is judged ready again, by its own start-up. Until
/// it has drawn anything the screen is the old program's (whose ready screen would match), so
/// nothing is typed until the new program's screen matches the rule. Here the restarted
/// program clears the screen, as a full-screen harness does when it starts, and is slow again
/// (it first sets the terminal's modes back: the recorder before it left them raw).
#[test]
fn after_a_restart_ding_waits_for_the_new_program_to_be_ready() {
    let env = env_with_adapter("slow-start", DECLARATION);
    let SlowStart {
        gate,
        early,
        log,
        script,
    } = slow_start(&env, "stty sane; printf '\\033[2J\\033[H'; ");
    std::fs::write(&gate, "").expect("open the gate");
    start_agent(&env, &script);
    env.wait_screen("agent", "(?m)^READY");
    post(&env, "agent", "before-restart");
    // The whole notice, its Enter included: a restart in the middle would abort it.
    assert!(
        eventually(Duration::from_secs(10), || {
            let text = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
            text.contains("before-restart") && text.ends_with('\r')
        }),
        "the first notice never arrived"
    );

    std::fs::remove_file(&gate).expect("close the gate");
    env.ok(&["restart", "agent"]);
    env.wait_screen("agent", "starting");
    post(&env, "agent", "after-restart");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        String::from_utf8_lossy(&read_or_empty(&early)),
        "",
        "a notice was typed into the restarted program before it was ready"
    );
    std::fs::write(&gate, "").expect("open the gate again");
    env.wait_screen("agent", "(?m)^READY");
    assert!(
        eventually(Duration::from_secs(10), || {
            String::from_utf8_lossy(&read_or_empty(&log)).contains("after-restart")
        }),
        "the held notice never arrived once the new program was ready"
    );
    assert_eq!(String::from_utf8_lossy(&read_or_empty(&early)), "");
}
