//! The daemon, the pane hosts and the other processes that stay up (`attach`, `run`, `proxy`,
//! `top`) run `belfry-host` when it is installed beside `belfry`
//! (the install builds it position-independent, so the long-running processes keep
//! address-space randomisation, and `belfry` as a fixed-address executable that starts each
//! command sooner), and `belfry` itself when it is not. The pane's program still finds `belfry`
//! first on its `PATH`. A pane host runs `belfry-pane`, the pane host alone, when it is beside
//! the daemon's executable (a pane then maps only its own code), and the daemon's executable as
//! `pane-host` when it is not.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use belfry_tests::{belfry_bin, copy_executable, eventually, Env};

/// A directory holding a copy of `belfry`, of it as `belfry-host` with `host_mode`, and of the
/// build's `belfry-pane` with `pane_mode`.
fn install(env: &Env, name: &str, host_mode: Option<u32>, pane_mode: Option<u32>) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    copy_executable(&belfry_bin(), &dir.join("belfry"));
    let pane_bin = belfry_bin().with_file_name("belfry-pane");
    for (from, to, mode) in [
        (belfry_bin(), "belfry-host", host_mode),
        (pane_bin, "belfry-pane", pane_mode),
    ] {
        if let Some(mode) = mode {
            let copy = dir.join(to);
            copy_executable(&from, &copy);
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    dir
}

fn run(env: &Env, dir: &Path, args: &[&str]) {
    let out = env
        .cmd_of(&dir.join("belfry"), args)
        .output()
        .expect("run the copied belfry");
    assert!(
        out.status.success(),
        "belfry {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).expect("/proc/PID/exe")
}

/// The first directory on the `PATH` of process `pid`.
fn first_on_path(pid: u32) -> String {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("/proc/PID/environ");
    environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"PATH="))
        .map(|path| {
            String::from_utf8_lossy(path)
                .split(':')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .expect("the program has a PATH")
}

/// What the processes of one pane and one attached client run.
struct Seen {
    daemon: PathBuf,
    pane_host: PathBuf,
    /// The first directory on the pane program's `PATH`.
    path: String,
    /// `belfry attach`, started as `DIR/belfry attach p` (the program of pane `term`), once it
    /// runs.
    attach: PathBuf,
}

/// Starts pane `p` with the `belfry` in `dir`, and pane `term` whose program is `DIR/belfry
/// attach p`, and says what each runs.
fn start_and_look(env: &Env, dir: &Path) -> Seen {
    run(env, dir, &["new", "p", "--", "sleep", "100000"]);
    let child = |session: &str| {
        env.snapshot(session)["child_pid"]
            .as_u64()
            .expect("the snapshot has the program's pid") as u32
    };
    let path = first_on_path(child("p"));
    let belfry = dir.join("belfry").display().to_string();
    run(env, dir, &["new", "term", "--", &belfry, "attach", "p"]);
    let attach_pid = child("term");
    // An attach client that execs another executable does so as it starts.
    assert!(
        eventually(Duration::from_secs(10), || env.snapshot("p")["clients"]
            == 1),
        "the attach client never attached"
    );
    let seen = Seen {
        daemon: exe_of(env.daemon_pid()),
        pane_host: exe_of(env.pane_host_pid("p")),
        path,
        attach: exe_of(attach_pid),
    };
    env.shutdown();
    seen
}

#[test]
fn the_daemon_pane_hosts_and_attach_run_belfry_host_when_it_is_beside_belfry() {
    let env = Env::new();
    let dir = install(&env, "both", Some(0o755), None);
    let seen = start_and_look(&env, &dir);
    let host = dir.join("belfry-host");
    assert_eq!(seen.daemon, host, "the daemon's executable");
    assert_eq!(seen.pane_host, host, "the pane host's executable");
    assert_eq!(seen.attach, host, "the attach client's executable");
    let dir = dir.display().to_string();
    assert_eq!(
        seen.path, dir,
        "the pane's PATH starts with belfry's directory"
    );
}

#[test]
fn without_belfry_host_or_with_one_that_cannot_run_belfry_runs_everything() {
    for (name, host_mode) in [("alone", None), ("not-executable", Some(0o644))] {
        let env = Env::new();
        let dir = install(&env, name, host_mode, None);
        let seen = start_and_look(&env, &dir);
        let belfry = dir.join("belfry");
        assert_eq!(seen.daemon, belfry, "{name}: the daemon's executable");
        assert_eq!(seen.pane_host, belfry, "{name}: the pane host's executable");
        assert_eq!(
            seen.attach, belfry,
            "{name}: the attach client's executable"
        );
        let dir = dir.display().to_string();
        assert_eq!(seen.path, dir, "{name}: the pane's PATH");
    }
}

#[test]
fn pane_hosts_run_belfry_pane_when_it_is_beside_the_daemons_executable() {
    // Installed as scripts/install --static installs it: `belfry-pane` beside `belfry` and `belfry-host`.
    let env = Env::new();
    let dir = install(&env, "all", Some(0o755), Some(0o755));
    let seen = start_and_look(&env, &dir);
    assert_eq!(
        seen.daemon,
        dir.join("belfry-host"),
        "the daemon's executable"
    );
    assert_eq!(
        seen.pane_host,
        dir.join("belfry-pane"),
        "the pane host's executable"
    );
    assert_eq!(seen.attach, dir.join("belfry-host"), "the attach client");
    assert_eq!(seen.path, dir.display().to_string(), "the pane's PATH");

    // With `belfry` alone beside it, as a dynamic build without the pair installs it.
    let env = Env::new();
    let dir = install(&env, "pane-only", None, Some(0o755));
    let seen = start_and_look(&env, &dir);
    assert_eq!(seen.daemon, dir.join("belfry"), "the daemon's executable");
    assert_eq!(seen.pane_host, dir.join("belfry-pane"), "the pane host's");

    // A `belfry-pane` that cannot run is passed over: the daemon's executable serves the pane.
    let env = Env::new();
    let dir = install(&env, "pane-not-executable", Some(0o755), Some(0o644));
    let seen = start_and_look(&env, &dir);
    assert_eq!(seen.pane_host, dir.join("belfry-host"), "the pane host's");
}

#[test]
fn belfry_pane_names_a_wrong_argument_and_a_bad_launch_spec() {
    let pane = belfry_bin().with_file_name("belfry-pane");
    let out = std::process::Command::new(&pane)
        .args(["pane-host", "--runtime", "/tmp", "--bogus"])
        .output()
        .expect("run belfry-pane");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "belfry-pane: unexpected argument '--bogus'\n"
    );
    let env = Env::new();
    let args = env.pane_host_args();
    let mut child = env
        .cmd_of(&pane, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start belfry-pane");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"{\"session\": 7}")
            .expect("write the spec");
    }
    let out = child.wait_with_output().expect("belfry-pane ends");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("belfry-pane: stdin is not a launch spec: "),
        "{stderr}"
    );
}
