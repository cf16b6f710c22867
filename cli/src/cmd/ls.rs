//! `belfry ls` (this machine's panes, or every host's with `--all-hosts`), its table, and the
//! live view `belfry top` / `ls --watch` starts; `escape_for_terminal`, which makes a pane's
//! text safe to print, lives here with the table that first needed it.

use anyhow::{bail, Result};
use serde_json::{json, Value};

use belfry_proto::reply::{Listing, PaneRecord};
use belfry_proto::request as op;
use belfry_transport::paths;

use super::{ask, print_json, without_repeats};
use crate::direct;
use crate::exit::{EXIT_ERROR, EXIT_OK};
use crate::remote::{self, Place};

/// The live view's slow tick: at least 100 ms, so a typo cannot make it ask the daemon for
/// everything in a busy loop.
pub(super) fn watch_interval(interval_ms: u64) -> Result<std::time::Duration> {
    if interval_ms < 100 {
        bail!("--interval-ms {interval_ms} is too short: give 100 or more");
    }
    Ok(std::time::Duration::from_millis(interval_ms))
}

/// `belfry top` and `belfry ls --watch`: the live view, on this machine only.
pub(super) fn live(interval_ms: u64) -> Result<i32> {
    if let Some(remote) = remote::default_place()?.remote() {
        bail!(
            "the live view does not work over --host yet: `belfry --host {} ls` lists \
             that machine's panes, and `ssh -t {} belfry top` shows its view",
            remote.label,
            remote.host
        );
    }
    crate::top::run(watch_interval(interval_ms)?)
}

/// `belfry ls`: the daemon's listing, or with no daemon running the pane hosts asked directly
/// (marked as such on the first line, or on stderr with `--json` so the JSON stays the same
/// data); a read-only command never starts a daemon.
pub(super) fn ls(json: bool, all_hosts: bool) -> Result<i32> {
    if all_hosts {
        return ls_all_hosts(json);
    }
    if let Place::Remote(remote) = remote::default_place()? {
        let panes = ask::<Listing>(&mut remote.daemon()?, op::List {})?.panes;
        return print_panes(&panes, json);
    }
    paths::private_runtime_dir()?;
    let socket = paths::daemon_socket();
    let panes = match direct::running_daemon(&socket)? {
        Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
        None => {
            let note = direct::no_daemon_note(&socket);
            if json {
                eprintln!("belfry: {note}");
            } else {
                println!("{note}");
            }
            direct::list(&paths::runtime_dir())
        }
    };
    print_panes(&panes, json)
}

/// Prints a listing: JSON, or the table.
pub(super) fn print_panes(panes: &[PaneRecord], json: bool) -> Result<i32> {
    if json {
        print_json(&panes);
        return Ok(EXIT_OK);
    }
    if panes.is_empty() {
        println!("no panes");
        return Ok(EXIT_OK);
    }
    print!("{}", ls_table(panes, crate::human::now_unix_ms()));
    Ok(EXIT_OK)
}

/// `belfry ls --all-hosts`: this machine's panes (or the `--host` one's), then every host of
/// the user config's `hosts`, asked at once, one ssh connection each. A pane of a host is
/// named `HOST:NAME`, the address every command takes; a host that cannot be reached is one
/// line (or one `{"host", "error"}` object) saying why, and the others are still listed.
/// The exit code is 2 when any host failed, after everything was printed.
pub(super) fn ls_all_hosts(json: bool) -> Result<i32> {
    let place = remote::default_place()?;
    // The `--host` machine is listed first, as "here"; a configured host that is the same
    // destination is not asked again (it would list every pane of it twice).
    let here_host = match &place {
        Place::Remote(remote) => Some(remote.host.clone()),
        Place::Local => None,
    };
    let hosts = remote::configured_hosts()?;
    let asked: Vec<_> = hosts
        .into_iter()
        .filter(|host| here_host.as_ref() != Some(&host.host))
        .map(|host| {
            std::thread::spawn(move || {
                let panes = host
                    .daemon()
                    .and_then(|mut client| Ok(ask::<Listing>(&mut client, op::List {})?.panes));
                (host.label, panes)
            })
        })
        .collect();
    let here = match place {
        Place::Remote(remote) => {
            let label = remote.label.clone();
            (
                Some(label),
                remote
                    .daemon()
                    .and_then(|mut client| Ok(ask::<Listing>(&mut client, op::List {})?.panes)),
            )
        }
        Place::Local => {
            paths::private_runtime_dir()?;
            let socket = paths::daemon_socket();
            let panes = match direct::running_daemon(&socket)? {
                Some(mut client) => ask::<Listing>(&mut client, op::List {})?.panes,
                None => direct::list(&paths::runtime_dir()),
            };
            (None, Ok(panes))
        }
    };
    let mut results = vec![here];
    for handle in asked {
        match handle.join() {
            Ok((label, panes)) => results.push((Some(label), panes)),
            Err(_) => bail!("listing a host failed unexpectedly"),
        }
    }
    let mut panes = Vec::new();
    let mut failures = Vec::new();
    for (label, listed) in results {
        match (label, listed) {
            (None, Ok(listed)) => panes.extend(listed),
            (Some(label), Ok(listed)) => panes.extend(listed.into_iter().map(|mut pane| {
                pane.session = format!("{label}:{}", pane.session);
                pane
            })),
            (label, Err(err)) => {
                failures.push((label.unwrap_or_else(|| "this machine".into()), err))
            }
        }
    }
    if json {
        let mut shown: Vec<Value> = panes
            .iter()
            .map(|pane| serde_json::to_value(pane).unwrap_or(Value::Null))
            .collect();
        for (host, err) in &failures {
            shown.push(json!({"host": host, "error": without_repeats(err)}));
        }
        print_json(&shown);
    } else {
        if panes.is_empty() {
            println!("no panes");
        } else {
            print!("{}", ls_table(&panes, crate::human::now_unix_ms()));
        }
        for (host, err) in &failures {
            println!("{host}: {}", without_repeats(err));
        }
    }
    Ok(if failures.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    })
}

/// The `belfry ls` table at `now_ms` (for the panes' ages): a heading, then one row a pane.
pub(super) fn ls_table(panes: &[PaneRecord], now_ms: u64) -> String {
    let mut table = format!(
        "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  COMMAND\n",
        "NAME", "HOSTPID", "PID", "REVISION", "SIZE", "CLIENTS", "STATE", "STATUS", "AGE"
    );
    for pane in panes {
        table.push_str(&ls_row(pane, now_ms));
        table.push('\n');
    }
    table
}

/// One row of `belfry ls`. A pane host that did not answer is listed by name and pid with its
/// state and the reason in place of the command. A field the pane host did not give is `-`.
pub(super) fn ls_row(pane: &PaneRecord, now_ms: u64) -> String {
    let dash = || "-".to_string();
    if let Some(error) = &pane.error {
        return format!(
            "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  ({})",
            pane.session,
            pane.pid,
            "-",
            "-",
            "-",
            "-",
            pane.state.as_deref().unwrap_or("error"),
            "-",
            "-",
            escape_for_terminal(error)
        );
    }
    let state = match pane.exited.flatten() {
        None => "running".to_string(),
        Some(exit) => match (exit.code, exit.signal) {
            (Some(code), _) => format!("exited {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "exited".to_string(),
        },
    };
    let argv = pane.argv.as_deref().unwrap_or_default().join(" ");
    let status = pane
        .program_status
        .as_ref()
        .map_or_else(dash, |record| crate::human::status_words(record, now_ms));
    format!(
        "{:<20} {:>8} {:>8} {:>16} {:>9} {:>7}  {:<12} {:<26} {:>6}  {}",
        pane.session,
        pane.pid,
        pane.child_pid.map_or_else(dash, |pid| pid.to_string()),
        pane.revision
            .map_or_else(dash, |revision| revision.to_string()),
        pane.size.map_or_else(dash, |size| size.to_string()),
        pane.clients
            .map_or_else(dash, |clients| clients.to_string()),
        state,
        status,
        pane.started_at
            .map_or_else(dash, |at| crate::human::coarse(now_ms.saturating_sub(at))),
        escape_for_terminal(&argv)
    )
}

/// Text from a pane's spec (its argv comes from whoever spawned it, or from a `belfry.kdl`)
/// made safe to print in a table on the user's terminal: control characters (an `ESC ] 2 ; …
/// BEL` title sequence, a newline that breaks the table) and the invisible characters that
/// reorder or hide text are shown as escapes instead of acting. A backslash is doubled, so the
/// escaped text reads back unambiguously.
pub(crate) fn escape_for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_invisible_format(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// Bidirectional controls and other zero-width format characters, which can make a command
/// look like another one.
pub(super) fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}'
    )
}
