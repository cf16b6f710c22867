//! Which version of a harness this machine runs: the adapter data names the command that
//! prints it (`matrix.json` `detect`, e.g. `<program> --version`), and this module runs it
//! with a deadline and reads the first dotted version it prints.
//!
//! Harnesses differ in where and how fast they answer: some print the version on stderr, not
//! stdout, and a large JavaScript bundle can take several seconds just to load. So both
//! streams are read (stdout first), each on its own thread so that neither pipe can fill and
//! stall the program, every adapter is asked at the same time, and the deadline is long
//! enough for the slowest harness seen (6.4 s) while the whole detection still ends within
//! it.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one harness may take to print its version. The slowest seen: 6.4 s (a CLI that
/// loads its whole bundle before it parses `--version`).
pub const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// The version each of `commands` (name → argv) prints, all asked at once, each within
/// `deadline`; a command that is not there, fails or says no version is left out.
pub fn detect_all(
    commands: &BTreeMap<String, Vec<String>>,
    deadline: Duration,
) -> BTreeMap<String, String> {
    let (sender, receiver) = mpsc::channel();
    let mut asked = 0;
    for (name, argv) in commands {
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let (sender, name, program, args) =
            (sender.clone(), name.clone(), program.clone(), args.to_vec());
        asked += 1;
        std::thread::spawn(move || {
            let version = run_version(&program, &args, deadline);
            let _ = sender.send((name, version));
        });
    }
    drop(sender);
    let start = Instant::now();
    let mut versions = BTreeMap::new();
    for _ in 0..asked {
        // Every thread ends within its deadline (the program is killed then); the margin
        // covers the kill and the reads, and a thread that still has not answered is not
        // waited for.
        let left = (deadline + Duration::from_secs(1)).saturating_sub(start.elapsed());
        match receiver.recv_timeout(left) {
            Ok((name, Some(version))) => {
                versions.insert(name, version);
            }
            Ok((_, None)) => {}
            Err(_) => break,
        }
    }
    versions
}

/// The first dotted version (`1.2.3`) `program args` prints within `deadline`, on stdout, or
/// else on stderr. The program runs in its own process group, which is killed whole when the
/// deadline passes (a launcher script's children too).
pub fn run_version(program: &str, args: &[String], deadline: Duration) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .ok()?;
    let stdout = read_in_background(child.stdout.take());
    let stderr = read_in_background(child.stderr.take());
    let start = Instant::now();
    let exited = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if start.elapsed() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => break false,
        }
    };
    if !exited {
        if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    // A child the program left behind may hold a pipe open: its reader is given a moment, not
    // waited for.
    let grace = Duration::from_millis(200);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    if let Some(version) = first_version(&out) {
        return Some(version);
    }
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    first_version(&err)
}

fn read_in_background(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            // At most 64 KiB is kept: a version is on the first lines.
            let mut text = Vec::new();
            let mut chunk = [0u8; 8192];
            while let Ok(read) = pipe.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                if text.len() < 64 * 1024 {
                    text.extend_from_slice(&chunk[..read]);
                }
            }
            let _ = sender.send(text);
        });
    }
    receiver
}

/// The first word of at least three dot-separated digit groups in `bytes`.
fn first_version(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|word| word.split('.').count() >= 3 && word.split('.').all(|p| !p.is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_version_printed_on_stderr_is_found() {
        let argv = sh("echo 'harness 1.6.0' >&2");
        assert_eq!(
            run_version(&argv[0], &argv[1..], VERSION_DEADLINE).as_deref(),
            Some("1.6.0")
        );
    }

    #[test]
    fn stdout_wins_over_stderr_and_a_flood_does_not_stall_the_program() {
        // 1 MiB on stderr first: a reader that left the pipe unread would stall the program
        // past the deadline.
        let argv = sh("head -c 1048576 /dev/zero >&2; echo 'tool 2.1.337'");
        assert_eq!(
            run_version(&argv[0], &argv[1..], Duration::from_secs(5)).as_deref(),
            Some("2.1.337")
        );
    }

    #[test]
    fn a_program_past_its_deadline_is_killed_with_its_children_and_gives_no_version() {
        let argv = sh("sleep 30 & sleep 30; echo 1.2.3");
        let start = Instant::now();
        assert_eq!(
            run_version(&argv[0], &argv[1..], Duration::from_millis(300)),
            None
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn every_harness_is_asked_at_once() {
        let mut commands = BTreeMap::new();
        for (name, version) in [("a", "1.0.0"), ("b", "2.0.0"), ("c", "3.0.0")] {
            commands.insert(name.to_string(), sh(&format!("sleep 1; echo {version}")));
        }
        commands.insert("missing".into(), vec!["/nonexistent/harness".into()]);
        let start = Instant::now();
        let found = detect_all(&commands, VERSION_DEADLINE);
        let took = start.elapsed();
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [
                ("a".to_string(), "1.0.0".to_string()),
                ("b".into(), "2.0.0".into()),
                ("c".into(), "3.0.0".into())
            ]
        );
        // Asked one after another they would take 3 s.
        assert!(took < Duration::from_millis(2500), "{took:?}");
    }
}
