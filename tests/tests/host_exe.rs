//! The daemon and the pane hosts run `belfry-host` when it is installed beside `belfry`
//! (the install builds it position-independent, so the long-running processes keep
//! address-space randomisation, and `belfry` as a fixed-address executable that starts each
//! command sooner), and `belfry` itself when it is not. The pane's program still finds `belfry`
//! first on its `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use belfry_tests::{belfry_bin, Env};

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
    let mut cmd = Command::new(dir.join("belfry"));
    cmd.args(args)
        .env_remove("BELFRY_SOCKET")
        .env_remove("BELFRY_SESSION");
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the copied belfry");
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

/// Starts pane `p` with the `belfry` in `dir` and says what the daemon, the pane host and the
/// program run.
fn start_and_look(env: &Env, dir: &Path) -> (PathBuf, PathBuf, String) {
    run(env, dir, &["new", "p", "--", "sleep", "100000"]);
    let info = env.snapshot("p");
    let child = info["child_pid"].as_u64().map(|p| p as u32);
    let daemon = exe_of(env.daemon_pid());
    let host = exe_of(env.pane_host_pid("p"));
    let path = child.map(first_on_path).unwrap_or_else(|| {
        let pid = env.ok(&["peek", "p", "--json"]);
        panic!("no child pid in the snapshot: {pid}")
    });
    env.shutdown();
    (daemon, host, path)
}

#[test]
fn the_daemon_and_pane_hosts_run_belfry_host_when_it_is_beside_belfry() {
    let env = Env::new();
    let dir = install(&env, "both", Some(0o755));
    let (daemon, host, path) = start_and_look(&env, &dir);
    assert_eq!(daemon, dir.join("belfry-host"), "the daemon's executable");
    assert_eq!(host, dir.join("belfry-host"), "the pane host's executable");
    assert_eq!(
        path,
        dir.display().to_string(),
        "the pane's PATH starts with belfry's directory"
    );
}

#[test]
fn without_belfry_host_or_with_one_that_cannot_run_belfry_runs_everything() {
    for (name, host_mode) in [("alone", None), ("not-executable", Some(0o644))] {
        let env = Env::new();
        let dir = install(&env, name, host_mode);
        let (daemon, host, path) = start_and_look(&env, &dir);
        assert_eq!(
            daemon,
            dir.join("belfry"),
            "{name}: the daemon's executable"
        );
        assert_eq!(
            host,
            dir.join("belfry"),
            "{name}: the pane host's executable"
        );
        assert_eq!(path, dir.display().to_string(), "{name}: the pane's PATH");
    }
}
