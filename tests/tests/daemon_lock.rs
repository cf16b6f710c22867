//! One daemon per state directory and per runtime directory, whatever its socket. Two daemons
//! over the same directories would both adopt every pane and both run its DING worker, pasting
//! every notice twice. A second daemon on another socket refuses to start and names the pid of
//! the one that holds the lock.

use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use belfry_tests::{eventually, read_or_empty, Env};

/// A `belfry server` started on another socket over `env`'s runtime and state directories,
/// killed on drop if it is still running.
struct SecondDaemon(Child);

impl SecondDaemon {
    fn start(env: &Env) -> SecondDaemon {
        let child = env
            .cmd(&["server"])
            .env("BELFRY_SOCKET", env.path("second.sock"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a second belfry server");
        SecondDaemon(child)
    }

    /// Its exit code and stderr if it ended within `limit`; `None` if it is still running.
    fn ended_within(&mut self, limit: Duration) -> Option<(Option<i32>, String)> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.0.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.0.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                return Some((status.code(), stderr));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for SecondDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_daemon_on_another_socket_over_the_same_state_refuses_naming_the_holder_pid() {
    let env = Env::new();
    let first = env.daemon_pid();
    let mut second = SecondDaemon::start(&env);
    let (code, stderr) = second
        .ended_within(Duration::from_secs(10))
        .expect("the second daemon kept running beside the first");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("another belfry daemon (pid {first})")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&env.state().display().to_string()),
        "{stderr}"
    );
    assert!(
        !env.path("second.sock").exists(),
        "the refused daemon bound its socket"
    );
    assert_eq!(env.daemon_pid(), first, "the running daemon was disturbed");
}

/// Stops whatever daemon serves `second.sock` when the test ends, so a regression that lets
/// a second daemon start does not leave it running.
struct StopSecondSocket<'a>(&'a Env);

impl Drop for StopSecondSocket<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .cmd(&["shutdown"])
            .env("BELFRY_SOCKET", self.0.path("second.sock"))
            .output();
    }
}

#[test]
fn a_client_whose_daemon_cannot_start_says_so_at_once() {
    let env = Env::new();
    let _stop = StopSecondSocket(&env);
    let first = env.daemon_pid();
    let started = Instant::now();
    let out = env
        .cmd(&["kill", "nobody"])
        .env("BELFRY_SOCKET", env.path("second.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exited at start"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the client waited out its whole deadline: {:?}",
        started.elapsed()
    );
    // The log it points at names the holder.
    let log = env.path("xdg-state").join("belfry/log/daemon.log");
    assert!(
        String::from_utf8_lossy(&read_or_empty(&log)).contains(&format!("(pid {first})")),
        "daemon.log does not name the holder"
    );
}

fn post(env: &Env, subject: &str) {
    let mut child = env
        .cmd(&[
            "inbox",
            "post",
            "agent",
            "--from",
            "lead",
            "--subject",
            subject,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("inbox post");
    child.stdin.take().unwrap().write_all(b"body\n").unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
}

#[test]
fn five_posts_give_exactly_five_notices_when_a_second_daemon_is_started() {
    let env = Env::new();
    let log = env.recorder_pane("agent", &["--ding-delivery", "aggressive"]);
    let mut second = SecondDaemon::start(&env);
    // Give a second daemon that (wrongly) started the time to adopt the pane.
    let ended = second.ended_within(Duration::from_secs(4));
    let notices = || {
        String::from_utf8_lossy(&read_or_empty(&log))
            .matches("[DING]")
            .count()
    };
    for i in 0..5 {
        post(&env, &format!("message {i}"));
        assert!(
            eventually(Duration::from_secs(10), || notices() > i),
            "notice {i} never came"
        );
        // Let each transaction (paste, 500 ms, Enter) finish before the next post.
        assert!(eventually(Duration::from_secs(5), || read_or_empty(&log)
            .ends_with(b"\r")));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let got = String::from_utf8_lossy(&read_or_empty(&log)).into_owned();
    assert_eq!(notices(), 5, "five messages, five notices: {got:?}");
    assert_eq!(
        got.matches('\r').count(),
        5,
        "one Enter per notice: {got:?}"
    );
    let (code, stderr) = ended.expect("the second daemon kept running beside the first");
    assert_eq!(code, Some(2), "{stderr}");
}

/// Issue 39: with `BELFRY_STATE` a symbolic link, `belfry server` started and wrote its lock
/// (and pid) through it. It now refuses to start, naming the path, before anything is bound
/// or written: the link's target stays empty and no socket appears.
#[test]
fn a_daemon_whose_state_directory_is_a_symbolic_link_refuses_to_start_and_writes_nothing_through_it(
) {
    use std::os::unix::fs::{symlink, DirBuilderExt};
    let env = Env::new();
    let target = env.path("elsewhere");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&target)
        .unwrap();
    symlink(&target, env.state()).unwrap();
    let mut daemon = SecondDaemon::start(&env);
    let (code, stderr) = daemon
        .ended_within(Duration::from_secs(10))
        .expect("the daemon started over a state directory that is a symbolic link");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "directory {} is not safe to use: it is a symbolic link",
            env.state().display()
        )),
        "{stderr}"
    );
    let written: Vec<_> = std::fs::read_dir(&target).unwrap().collect();
    assert!(written.is_empty(), "written through the link: {written:?}");
    assert!(
        !env.path("second.sock").exists(),
        "the daemon bound its socket"
    );
}
