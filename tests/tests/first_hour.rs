//! The smaller first-hour surprises of issue 47, each through the real binaries: attach
//! inside tmux says how to reach belfry's prefix, pane names complete from the running daemon,
//! revisions say what they are made of, errors speak of what the user typed, and `inbox post`
//! reads a pipe without a word.

use std::time::Duration;

use belfry_tests::Env;

/// An outer pane whose program is `ENV belfry attach inner`, then a line with its exit code.
fn attach_from(env: &Env, outer: &str, vars: &str) {
    let script = format!("{vars} \"$BELFRY_BIN\" attach inner; echo \"ATTACH-EXIT=$?\"; sleep 600");
    env.spawn(outer, "24x100", &["sh", "-c", &script], None);
}

/// Inside tmux (`$TMUX` set) tmux takes C-b before belfry sees it: attach says, over the pane,
/// how to reach belfry through tmux and how to move belfry's prefix; `BELFRY_DETACH` moves
/// it (and then there is nothing to say). Outside tmux it says nothing. Before, a user in tmux
/// found no word of either.
#[test]
fn attach_inside_tmux_says_once_how_to_move_the_prefix() {
    let env = Env::new();
    env.spawn(
        "inner",
        "24x80",
        &["sh", "-c", "echo INNER-READY; sleep 600"],
        Some("INNER-READY"),
    );
    attach_from(&env, "intmux", "TMUX=/tmp/tmux-0/default,1,0");
    env.wait_screen("intmux", "INNER-READY");
    env.wait_screen("intmux", "C-b C-b d detaches from belfry");
    env.wait_screen("intmux", "BELFRY_DETACH='C-a d'");

    // Moved: no note, and C-a d detaches.
    attach_from(
        &env,
        "moved",
        "TMUX=/tmp/tmux-0/default,1,0 BELFRY_DETACH='C-a d'",
    );
    env.wait_screen("moved", "INNER-READY");
    // Outside tmux: no note either.
    attach_from(&env, "plain", "");
    env.wait_screen("plain", "INNER-READY");
    std::thread::sleep(Duration::from_millis(800));
    for outer in ["moved", "plain"] {
        let screen = env.lines(outer).join("\n");
        assert!(!screen.contains("tmux"), "{outer}: {screen}");
    }
    env.ok(&["send", "moved", "--key", "C-a", "--text", "d"]);
    env.wait_screen("moved", "ATTACH-EXIT=0");
    env.ok(&["shutdown", "--kill-panes"]);
}

/// A revision is a 16-digit number, not the `42` the README once showed: `send --help` and
/// the README say what it is made of (the clock in microseconds when the pane host started,
/// then one up per event), and a real pane's revision is that.
#[test]
fn send_help_and_the_readme_say_what_a_revision_is_made_of() {
    let env = Env::new();
    let help = env.ok(&["send", "--help"]);
    assert!(
        help.contains("A revision is a 16-digit number")
            && help.contains("microseconds since 1970"),
        "{help}"
    );
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .expect("README.md");
    assert!(
        !readme.contains("--expect-revision 42 "),
        "the README still shows 42"
    );
    assert!(
        readme.contains("hence 16 digits"),
        "the README does not say why"
    );

    let before_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    env.spawn(
        "agent",
        "24x80",
        &["sh", "-c", "echo up; sleep 600"],
        Some("up"),
    );
    let revision = env.snapshot("agent")["revision"]
        .as_u64()
        .expect("a revision");
    assert_eq!(revision.to_string().len(), 16, "{revision}");
    // The pane host started after `before_us` and its revision has moved a little since.
    assert!(
        revision >= before_us && revision < before_us + 60_000_000,
        "revision {revision}, clock at the start {before_us}"
    );
    env.ok(&["shutdown", "--kill-panes"]);
}

/// Errors name what the user typed, not the request's fields: `--key "Foo"`, not `input step
/// 0`; `--timeout-ms`, not `field "timeout_ms"`; `--delay-ms`, not `delay_ms`; `--regex`, not
/// `field "regex"`. Each is refused before anything reaches the pane (exit 2, the pane's
/// revision unmoved). Before, all of these printed the daemon's words about its fields.
#[test]
fn send_and_wait_errors_name_the_option_the_user_gave_not_a_protocol_field() {
    let env = Env::new();
    env.spawn(
        "agent",
        "24x80",
        &["sh", "-c", "echo up; sleep 600"],
        Some("up"),
    );
    let revision = env.snapshot("agent")["revision"].clone();
    let cases: [(&[&str], &str); 7] = [
        (
            &["send", "agent", "--key", "Foo"],
            "--key \"Foo\": unknown key name \"Foo\"",
        ),
        (
            &["send", "agent", "--paste", "a\u{1b}b"],
            "--paste: paste contains ESC",
        ),
        (
            &["send", "agent", "--delay-ms", "99999"],
            "'--delay-ms <MS>': 99999 is not in 0..=2000",
        ),
        (
            &[
                "send",
                "agent",
                "--text",
                "x",
                "--delay-ms",
                "2000",
                "--delay-ms",
                "2000",
                "--delay-ms",
                "2000",
            ],
            "--delay-ms: the delays add up to 6000 ms, over the 5000 ms",
        ),
        (
            &["send", "agent", "--text", "x", "--timeout-ms", "9999999"],
            "'--timeout-ms <MS>': 9999999 is not in 1..=60000",
        ),
        (
            &["wait", "agent", "--timeout-ms", "999999999999"],
            "'--timeout-ms <MS>'",
        ),
        (
            &["wait", "agent", "--regex", "("],
            "'--regex <REGEX>': \"(\" is not a regular expression",
        ),
    ];
    for (args, wanted) in cases {
        let out = env.run(args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(wanted),
            "{args:?}: wanted {wanted:?} in {said}"
        );
        for internal in ["input step", "delay_ms", "timeout_ms", "field \""] {
            assert!(
                !said.contains(internal),
                "{args:?} names {internal:?}: {said}"
            );
        }
    }
    assert_eq!(env.snapshot("agent")["revision"], revision);
    env.ok(&["shutdown", "--kill-panes"]);
}

/// `inbox post` reads its body from stdin; on a terminal it says what it waits for
/// (`silent_surprises.rs::inbox_post_on_a_terminal_says_what_it_waits_for`, through a real
/// PTY), and from a pipe it says nothing: stderr stays empty and the body is posted whole.
#[test]
fn inbox_post_from_a_pipe_posts_without_a_word_on_stderr() {
    use std::io::Write as _;
    let env = Env::new();
    env.spawn("worker", "24x80", &["sleep", "600"], None);
    let mut post = env
        .cmd(&["inbox", "post", "worker", "--subject", "piped"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start inbox post");
    post.stdin
        .take()
        .expect("stdin")
        .write_all(b"the body\n")
        .expect("write the body");
    let out = post.wait_with_output().expect("inbox post");
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = env.ok(&["inbox", "ls", "worker"]);
    assert!(listed.contains("piped"), "{listed}");
    env.ok(&["shutdown", "--kill-panes"]);
}

/// The completion scripts complete live pane names where a command takes one, in the shells
/// themselves: bash (the function `complete -F` names, called as bash calls it), fish
/// (`complete -C`) and zsh (typed into a real `zsh -f` in a pane, with compinit, Tab and the
/// list it shows). Elsewhere they complete as before (`belfry se` gives `send`; the value of
/// `--text` is no pane). Without a daemon they complete nothing, within a second, and start
/// none. Before, no pane name was ever completed.
#[test]
fn completions_offer_live_pane_names_where_a_command_takes_one() {
    let env = Env::new();
    let bin_dir = belfry_tests::belfry_bin()
        .parent()
        .expect("the binaries' directory")
        .to_path_buf();
    let path = belfry_tests::path_with(&bin_dir);
    let script = |shell: &str| {
        let file = env.path(&format!("belfry.{shell}"));
        std::fs::write(&file, env.ok(&["completions", shell])).expect("write the script");
        file
    };
    let bash_file = script("bash");
    let bash = |line: &str, cword: usize| -> String {
        let check = format!(
            "source {}; COMP_WORDS=({line}); COMP_CWORD={cword}; \
             _belfry belfry \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[*]}}\"",
            bash_file.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &check])
            .envs(env.vars())
            .env("PATH", &path)
            .output()
            .expect("bash");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };

    // No daemon: nothing, at once, and none started.
    let started = std::time::Instant::now();
    assert_eq!(bash("belfry send ''", 2), "");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(!env.socket().exists(), "a TAB started a daemon");

    env.spawn("alpha", "24x80", &["sleep", "600"], None);
    env.spawn("beta", "24x80", &["sleep", "600"], None);
    assert_eq!(bash("belfry send ''", 2), "alpha beta");
    assert_eq!(bash("belfry attach al", 2), "alpha");
    assert_eq!(bash("belfry inbox post ''", 3), "alpha beta");
    assert_eq!(bash("belfry --json send --text hi ''", 5), "alpha beta");
    let mut clap_words: Vec<String> = bash("belfry se", 1)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    clap_words.sort();
    assert_eq!(clap_words, ["send", "server"], "clap's own completion");
    // clap's own completion there (files), never a pane.
    let text_value = bash("belfry send --text ''", 3);
    assert!(
        !text_value.contains("alpha"),
        "the value of --text: {text_value}"
    );
    let new_name = bash("belfry new ''", 2);
    assert!(!new_name.contains("alpha"), "a new pane's name: {new_name}");

    // fish, as it completes a command line.
    let fish_file = script("fish");
    let out = std::process::Command::new("fish")
        .args([
            "-c",
            &format!("source {}; complete -C 'belfry peek '", fish_file.display()),
        ])
        .envs(env.vars())
        .env("PATH", &path)
        .output()
        .expect("fish (scripts/test-deps installs it)");
    let fish = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = fish.lines().collect();
    assert!(
        names.contains(&"alpha") && names.contains(&"beta"),
        "{fish}"
    );

    // zsh, typed into: Tab after `belfry send ` lists the panes.
    let zsh_dir = env.path("zfunc");
    std::fs::create_dir_all(&zsh_dir).expect("zfunc");
    std::fs::write(zsh_dir.join("_belfry"), env.ok(&["completions", "zsh"])).expect("_belfry");
    env.ok(&[
        "new",
        "shell",
        "--size",
        "24x100",
        "--env",
        &format!("PATH={path}"),
        "--",
        "zsh",
        "-f",
    ]);
    // zsh drops what was typed before its first prompt.
    env.wait_screen("shell", "(?m)[%#] *$");
    env.ok(&[
        "send",
        "shell",
        "--text",
        &format!(
            "fpath=({} $fpath); autoload -U compinit; compinit -u; PS1='Z> '",
            zsh_dir.display()
        ),
        "--key",
        "Enter",
    ]);
    env.wait_screen("shell", "(?m)^Z>");
    env.ok(&["send", "shell", "--text", "belfry send ", "--key", "Tab"]);
    env.wait_screen("shell", "alpha +beta +shell");
    env.ok(&["shutdown", "--kill-panes"]);
}
