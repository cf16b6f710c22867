//! Refusing an attach that would show a pane inside itself (spec §5). A client inside pane A
//! attached to A copies A's output into A, which the client then copies again: the pane spins
//! at thousands of revisions a second and the user cannot see to detach. The same loop closes
//! through other panes: a client inside A showing B while a client inside B shows A.
//!
//! Every pane's program starts with `$BELFRY_SESSION` naming its pane, and the attach clients
//! are ordinary processes, so both questions are answered from `/proc` without asking the pane
//! hosts: which pane this terminal is (the `$BELFRY_SESSION` of this process or of the nearest
//! ancestor that has one, so a shell that cleared its environment is still caught, and failing
//! that whether stdin is the PTY the pane's processes run on), and which pane each running
//! attach client shows and from inside which pane.

use std::collections::{BTreeSet, VecDeque};

use anyhow::{bail, Result};
use belfry_proto::env::SESSION;

/// How many ancestors are walked at most: far more than any real process tree, and a bound in
/// case `/proc` shows a parent loop while processes come and go.
const MAX_ANCESTORS: usize = 64;

/// Refuses to attach `target` from here when that would show a pane inside itself, directly
/// or through a chain of attached clients.
pub fn refuse_cycle(target: &str) -> Result<()> {
    let here = pane_of(std::process::id());
    if here.as_deref() == Some(target) {
        bail!(
            "cannot attach {target} to itself: this terminal is pane {target} \
             ($BELFRY_SESSION={target}), so its output would be copied back into it forever; \
             attach from a terminal outside the pane"
        );
    }
    if terminal_is_the_pty_of(target) {
        bail!(
            "cannot attach {target} to itself: this terminal is pane {target}'s own PTY, so its \
             output would be copied back into it forever; attach from a terminal outside the \
             pane"
        );
    }
    let Some(here) = here else {
        // Not inside a belfry pane: no loop can close through this terminal.
        return Ok(());
    };
    if let Some(chain) = shown_inside(target, &here, &attach_clients()) {
        bail!(
            "cannot attach {target} here: this terminal is pane {here}, which {target} already \
             shows through attached clients ({}), so each pane's output would be copied into \
             the other forever; detach one of those clients first",
            chain.join(" shows ")
        );
    }
    Ok(())
}

/// One running attach client: the pane it runs inside and the pane it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub inside: String,
    pub shows: String,
}

/// The chain `target shows … shows here`, if the clients already show `here` inside `target`.
fn shown_inside(target: &str, here: &str, clients: &[Client]) -> Option<Vec<String>> {
    // A breadth-first walk from the target along "pane X shows pane Y", keeping the way back.
    let mut seen: BTreeSet<&str> = BTreeSet::from([target]);
    let mut queue: VecDeque<Vec<&str>> = VecDeque::from([vec![target]]);
    while let Some(path) = queue.pop_front() {
        let last = path[path.len() - 1];
        for client in clients.iter().filter(|c| c.inside == last) {
            let mut next = path.clone();
            next.push(&client.shows);
            if client.shows == here {
                return Some(next.into_iter().map(String::from).collect());
            }
            if seen.insert(&client.shows) {
                queue.push_back(next);
            }
        }
    }
    None
}

/// The pane a process runs inside: its own `$BELFRY_SESSION` or its nearest ancestor's.
fn pane_of(pid: u32) -> Option<String> {
    let mut pid = pid;
    for _ in 0..MAX_ANCESTORS {
        if let Some(session) = environ_session(pid) {
            return Some(session);
        }
        pid = parent_of(pid)?;
        if pid <= 1 {
            return None;
        }
    }
    None
}

/// Whether this client's terminal (its controlling terminal, or stdin when that is a terminal
/// device) is the terminal of a process that runs in pane `session` (its own `$BELFRY_SESSION`
/// names it): the pane's PTY. This catches a client whose environment and ancestors no longer
/// say where it runs (a process reparented after its shell exited).
fn terminal_is_the_pty_of(session: &str) -> bool {
    let mine: Vec<(u32, u32)> = [process_tty(std::process::id()), stdin_tty()]
        .into_iter()
        .flatten()
        .collect();
    if mine.is_empty() {
        return false;
    }
    pids()
        .filter(|&pid| environ_session(pid).as_deref() == Some(session))
        .any(|pid| process_tty(pid).is_some_and(|tty| mine.contains(&tty)))
}

/// `/dev/tty`, which names the opening process's controlling terminal rather than a device of
/// its own.
const DEV_TTY: (u32, u32) = (5, 0);

/// The `(major, minor)` device of stdin when it is a terminal device (not `/dev/tty`).
fn stdin_tty() -> Option<(u32, u32)> {
    let stdin = rustix::stdio::stdin();
    if !rustix::termios::isatty(stdin) {
        return None;
    }
    let rdev = rustix::fs::fstat(stdin).ok()?.st_rdev;
    Some((rustix::fs::major(rdev), rustix::fs::minor(rdev))).filter(|&dev| dev != DEV_TTY)
}

/// The `(major, minor)` device of a process's controlling terminal, from `tty_nr` in
/// `/proc/PID/stat` (proc(5): the minor in bits 0-7 and 20-31, the major in bits 8-15).
fn process_tty(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last `)` are
    // state, ppid, pgrp, session, tty_nr.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let tty_nr: u32 = after_name.split_whitespace().nth(4)?.parse().ok()?;
    if tty_nr == 0 {
        return None;
    }
    Some((
        (tty_nr >> 8) & 0xff,
        (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00),
    ))
}

/// Every process id in `/proc` at the moment.
fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

fn environ_session(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{SESSION}=");
    environ
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .filter(|value| !value.is_empty())
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|ppid| ppid.trim().parse().ok())
}

/// Every other running `belfry attach` or `belfry run` process of this binary that runs inside
/// a pane. Processes that vanish or cannot be read mid-scan are skipped.
fn attach_clients() -> Vec<Client> {
    let Ok(me) = std::fs::read_link("/proc/self/exe") else {
        return Vec::new();
    };
    let own_pid = std::process::id();
    pids()
        .filter(|&pid| pid != own_pid)
        .filter(|&pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok() == Some(me.clone()))
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect();
            Some(Client {
                shows: shown_pane(&args)?,
                inside: pane_of(pid)?,
            })
        })
        .collect()
}

/// The pane a `belfry attach NAME` or `belfry run NAME -- …` command line shows, from its
/// arguments (`argv[0]` first). Options that take a value are skipped with their value.
pub fn shown_pane(argv: &[String]) -> Option<String> {
    let (command, rest) = argv.get(1..)?.split_first()?;
    let takes_value: &[&str] = match command.as_str() {
        "attach" => &["--detach-key"],
        "run" => &[
            "--cwd",
            "--env",
            "--size",
            "--size-policy",
            "--adapter",
            "--ding-delivery",
            "--ding-adapter",
            "--detach-key",
        ],
        _ => return None,
    };
    let mut args = rest.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            return None;
        }
        if takes_value.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            return Some(arg.clone());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn shown_pane_reads_attach_and_run_command_lines() {
        assert_eq!(
            shown_pane(&argv("belfry attach --read-only --detach-key C-q web")),
            Some("web".into())
        );
        assert_eq!(
            shown_pane(&argv("belfry run --env A=B --size 24x80 agent -- sh -c x")),
            Some("agent".into())
        );
        assert_eq!(shown_pane(&argv("belfry peek web")), None);
        assert_eq!(shown_pane(&argv("belfry attach")), None);
    }

    fn client(inside: &str, shows: &str) -> Client {
        Client {
            inside: inside.into(),
            shows: shows.into(),
        }
    }

    #[test]
    fn a_chain_of_clients_back_to_this_pane_is_a_cycle() {
        // Inside A, attaching to B: B already shows C, which shows A.
        let clients = [client("B", "C"), client("C", "A"), client("X", "B")];
        assert_eq!(
            shown_inside("B", "A", &clients),
            Some(vec!["B".into(), "C".into(), "A".into()])
        );
        // Inside A, attaching to X: nothing inside X shows A.
        assert_eq!(shown_inside("X", "A", &[client("A", "X")]), None);
        // A loop elsewhere does not stop the walk.
        assert_eq!(
            shown_inside("B", "A", &[client("B", "C"), client("C", "B")]),
            None
        );
    }
}
