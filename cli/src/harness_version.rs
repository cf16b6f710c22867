//! Which version of a harness this machine runs: the adapter data names the command that
//! prints it (`matrix.json` `detect`, e.g. `<program> --version`), and this module runs it
//! with a deadline and reads the first dotted version it prints.
//!
//! A harness installed from the npm registry is answered without running it: the package the
//! program's real path lies in names its own version in its `package.json`, and the matrix
//! declares which package names are the harness's (`detect_packages`). That file is what npm
//! wrote for exactly the code that runs, so it cannot be stale, and it reads in well under a
//! millisecond where a JavaScript bundle takes seconds to print its version. A program in no
//! declared package (a wrapper script, a binary from elsewhere) is asked as below.
//!
//! Harnesses differ in where and how fast they answer: some print the version on stderr, not
//! stdout, and a large JavaScript bundle can take several seconds just to load. So both
//! streams are read (stdout first), each on its own thread so that neither pipe can fill and
//! stall the program, every adapter is asked at the same time, and the deadline is long
//! enough for the slowest harness seen (6.4 s) while the whole detection still ends within
//! it.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one harness may take to print its version. The slowest seen: 6.4 s (a CLI that
/// loads its whole bundle before it parses `--version`).
pub const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// How a harness's version is found: the argv that prints it, and the npm package names whose
/// `package.json` names it (read first, without running anything).
#[derive(Clone, Debug, Default)]
pub struct Detect {
    pub argv: Vec<String>,
    pub packages: Vec<String>,
}

/// The version of each of `commands` (name → how to detect it), all asked at once, each within
/// `deadline`; a command that is not there, fails or says no version is left out.
pub fn detect_all(
    commands: &BTreeMap<String, Detect>,
    deadline: Duration,
) -> BTreeMap<String, String> {
    let (sender, receiver) = mpsc::channel();
    let mut asked = 0;
    for (name, detect) in commands {
        let Some((program, args)) = detect.argv.split_first() else {
            continue;
        };
        let (sender, name, program, args, packages) = (
            sender.clone(),
            name.clone(),
            program.clone(),
            args.to_vec(),
            detect.packages.clone(),
        );
        asked += 1;
        std::thread::spawn(move || {
            let version = version_of(&program, &args, &packages, deadline);
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

/// The version of `program`: its package's `package.json` when its real path lies in a package
/// named in `packages`, else what `program args` prints within `deadline`.
pub fn version_of(
    program: &str,
    args: &[String],
    packages: &[String],
    deadline: Duration,
) -> Option<String> {
    if let Some(version) = resolve(program).and_then(|path| package_version(&path, packages)) {
        return Some(version);
    }
    run_version(program, args, deadline)
}

/// `program` as `Command::new` would find it: a path as it is, a bare name on `PATH`.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// The `version` of the nearest `package.json` above `program`'s real path (symbolic links
/// followed, as npm's `.bin` links are) whose `name` is one of `packages`. Only a package named
/// by the adapter counts: a program inside some other package (a wrapper's own) says nothing
/// of the harness. Bounded: eight folders up, package files of at most 1 MiB.
pub fn package_version(program: &Path, packages: &[String]) -> Option<String> {
    if packages.is_empty() {
        return None;
    }
    let real = std::fs::canonicalize(program).ok()?;
    for dir in real.ancestors().skip(1).take(8) {
        let manifest = dir.join("package.json");
        let Ok(meta) = std::fs::metadata(&manifest) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 1024 * 1024 {
            return None;
        }
        let text = std::fs::read_to_string(&manifest).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        let name = value["name"].as_str()?;
        // The nearest package.json is the program's own package: if it is not the harness's,
        // no package further up is asked (that would be some other tree holding it).
        if !packages.iter().any(|package| package == name) {
            return None;
        }
        return value["version"]
            .as_str()
            .and_then(|version| first_version(version.as_bytes()));
    }
    None
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
            commands.insert(
                name.to_string(),
                Detect {
                    argv: sh(&format!("sleep 1; echo {version}")),
                    packages: Vec::new(),
                },
            );
        }
        commands.insert(
            "missing".into(),
            Detect {
                argv: vec!["/nonexistent/harness".into()],
                packages: Vec::new(),
            },
        );
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

    /// An npm install of a harness: `node_modules/.bin/NAME` a link into the package, whose
    /// program prints `printed` after `delay` seconds.
    fn npm_tree(root: &Path, package: &str, version: &str, printed: &str, delay: u32) -> PathBuf {
        let package_dir = root.join("node_modules").join(package);
        std::fs::create_dir_all(package_dir.join("dist")).expect("package dir");
        std::fs::write(
            package_dir.join("package.json"),
            format!(
                r#"{{"name": "{package}", "version": "{version}", "bin": {{"h": "dist/cli.js"}}}}"#
            ),
        )
        .expect("package.json");
        let cli = package_dir.join("dist/cli.js");
        std::fs::write(&cli, format!("#!/bin/sh\nsleep {delay}\necho {printed}\n")).expect("cli");
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let bin = root.join("node_modules/.bin");
        std::fs::create_dir_all(&bin).expect(".bin");
        let link = bin.join("h");
        std::os::unix::fs::symlink(&cli, &link).expect("link");
        link
    }

    #[test]
    fn a_harness_in_its_declared_npm_package_is_read_from_its_package_json_without_running_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The program would take 5 s and print another version: neither may be seen.
        let link = npm_tree(dir.path(), "@scope/harness", "0.61.0", "9.9.9", 5);
        let start = Instant::now();
        let version = version_of(
            &link.display().to_string(),
            &["--version".to_string()],
            &["other-name".to_string(), "@scope/harness".to_string()],
            VERSION_DEADLINE,
        );
        assert_eq!(version.as_deref(), Some("0.61.0"));
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_program_in_a_package_the_adapter_does_not_name_is_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A wrapper shipped by some other package: its package.json says nothing of the
        // harness, so the program itself is asked.
        let link = npm_tree(dir.path(), "some-wrapper", "1.0.0", "2.2.5", 0);
        let version = version_of(
            &link.display().to_string(),
            &[],
            &["@scope/harness".to_string()],
            VERSION_DEADLINE,
        );
        assert_eq!(version.as_deref(), Some("2.2.5"));
        // And no declared package at all: asked too.
        assert_eq!(package_version(&link, &[]), None);
    }
}
