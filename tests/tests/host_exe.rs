//! The daemon, the pane hosts and the other processes that stay up (`attach`, `run`, `proxy`,
//! `top`) run `belfry-host` when it is installed beside `belfry`
//! (the install builds it position-independent, so the long-running processes keep
//! address-space randomisation, and `belfry` as a fixed-address executable that starts each
//! command sooner), and `belfry` itself when it is not. The pane's program still finds `belfry`
//! first on its `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use belfry_tests::{belfry_bin, eventually, Env};

/// A directory holding a copy of `belfry`, and of it as `belfry-host` with `host_mode`.
fn install(env: &Env, name: &str, host_mode: Option<u32>) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(belfry_bin(), dir.join("belfry")).unwrap();
    if let Some(mode) = host_mode {
        let host = dir.join("belfry-host");
        std::fs::copy(belfry_bin(), &host).unwrap();
        std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode)).unwrap();
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
    let dir = install(&env, "both", Some(0o755));
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
        let dir = install(&env, name, host_mode);
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
