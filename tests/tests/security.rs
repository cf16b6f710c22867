//! spec §6.1, §12: the runtime directory is 0700, sockets are 0600, and a connection from
//! another uid is refused by the daemon and by every pane host (SO_PEERCRED).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use belfry_tests::Env;

/// Connects to `socket` as `nobody` and prints the first line the server sends.
fn connect_as_nobody(socket: &std::path::Path) -> Option<std::process::Output> {
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('CONNECT-ERROR', e.errno); sys.exit(0)\ntry:\n s.sendall(b'{\"id\":1,\"op\":\"list\"}\\n')\nexcept BrokenPipeError:\n pass\nprint(s.makefile().readline().strip())\n";
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            // The system interpreter: a per-user shim (pyenv under /root) is not reachable
            // for another uid, and the test would silently skip.
            if std::path::Path::new("/usr/bin/python3").exists() {
                "/usr/bin/python3"
            } else {
                "python3"
            },
            "-c",
            script,
        ])
        .arg(socket)
        .output()
        .ok()?;
    out.status.success().then_some(out)
}

#[test]
fn runtime_dir_and_sockets_are_private_and_other_uids_are_refused() {
    let env = Env::new();
    env.spawn("w", "24x80", &["sleep", "600"], None);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&env.runtime()), 0o700);
    assert_eq!(mode(&env.runtime().join("panes")), 0o700);
    assert_eq!(
        mode(&env.socket()) & 0o077,
        0,
        "daemon socket mode {:o}",
        mode(&env.socket())
    );
    assert_eq!(mode(&env.pane_socket("w")) & 0o077, 0);

    if rustix_uid() != 0 {
        eprintln!("SKIP: not root, cannot run a client as another uid");
        return;
    }
    // First line of defence: another uid cannot even reach the sockets.
    let Some(out) = connect_as_nobody(&env.socket()) else {
        eprintln!("SKIP: setpriv/python3 as nobody unavailable");
        return;
    };
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CONNECT-ERROR 13"),
        "{out:?}"
    );

    // Second line: even with the directory and sockets opened up, the server checks the peer
    // uid and refuses.
    for dir in [
        env.dir.path().to_path_buf(),
        env.runtime(),
        env.runtime().join("panes"),
    ] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for socket in [env.socket(), env.pane_socket("w")] {
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = connect_as_nobody(&socket).expect("run as nobody");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("\"forbidden\""),
            "{}: {stdout}",
            socket.display()
        );
        assert!(stdout.contains("uid 65534 refused"), "{stdout}");
        assert!(!stdout.contains("\"panes\""), "{stdout}");
    }
    std::fs::set_permissions(env.runtime(), std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn rustix_uid() -> u32 {
    // SAFETY: getuid(2) cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

#[test]
fn secrets_in_the_environment_never_reach_a_command_line_or_a_readable_file() {
    let env = Env::new();
    let mut cmd = env.cmd(&[
        "new",
        "w",
        "--env",
        "DECLARED_TOKEN=declared-secret-123",
        "--",
        "sleep",
        "600",
    ]);
    cmd.env("INHERITED_TOKEN", "inherited-secret-456");
    assert!(cmd.output().unwrap().status.success());
    let info = env.snapshot("w");
    let host_pid = info["pid"].as_u64().unwrap();
    let cmdline = std::fs::read(format!("/proc/{host_pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        !cmdline.contains("secret"),
        "pane host command line leaks the environment: {cmdline}"
    );
    let record = env.runtime().join("panes/w.json");
    assert_eq!(std::fs::metadata(&record).unwrap().mode() & 0o777, 0o600);
    // The program itself still gets both.
    let child = info["child_pid"].as_u64().unwrap();
    let environ =
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{child}/environ")).unwrap())
            .into_owned();
    assert!(environ.contains("DECLARED_TOKEN=declared-secret-123"));
    assert!(environ.contains("INHERITED_TOKEN=inherited-secret-456"));
}
