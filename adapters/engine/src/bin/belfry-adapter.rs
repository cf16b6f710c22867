//! `belfry-adapter --provider NAME`: the activity adapter a pane with the rich DING policy
//! runs (spec §7.4), started by the daemon with the pane's `BELFRY_*` environment and read on
//! its stdout as protocol v1 events.
//!
//! One thread holds a subscription to the pane's events at the daemon (revisions, hook events
//! `belfry dispatch` forwards, exits); the main thread, on each batch of events or every
//! refresh interval, asks for a snapshot with cells, judges the composer by the provider's
//! screen grammar, and writes one `activity` event naming the snapshot's identity and revision.
//! The lease the daemon grants from it authorizes a guarded send that expects exactly that
//! revision, so a screen that moved since is a conflict, never a typed-over draft.
//!
//! Exit codes: 0 when the pane's program or the subscription ended, 1 when the daemon could
//! not be reached or refused a request, 2 on bad arguments or environment.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use belfry_adapter_engine::activity::{
    activity_event, FreshStart, PaneSeen, ProgramView, Turn, TurnSources,
};
use belfry_adapter_engine::{classify, embedded, Grammar, Screen};
use belfry_transport::client::Client;
use serde_json::{json, Value};

/// How long a lease from one event lasts, unless `--valid-for-ms` says otherwise.
const DEFAULT_VALID_FOR_MS: u64 = 1000;
/// How often the adapter looks again when nothing happens, unless `--refresh-ms` says.
const DEFAULT_REFRESH_MS: u64 = 300;
/// A burst of events is gathered for this long before one snapshot answers them all.
const COALESCE: Duration = Duration::from_millis(20);

/// What the subscription thread passes on.
enum Seen {
    /// The screen moved.
    Revision,
    /// A hook event of this incarnation (or of an unnamed one).
    Hook {
        hook: String,
        source: Option<String>,
        incarnation: Option<String>,
    },
    /// The subscription fell behind and missed events, hook events perhaps among them.
    Lagged,
    /// The subscription ended: the daemon went away or refused it.
    Gone(String),
}

struct Options {
    grammar: Grammar,
    /// The declared fresh-start signal (`--provider`'s declaration, or `--declaration FILE`).
    fresh: Option<FreshStart>,
    valid_for_ms: u64,
    refresh: Duration,
}

fn main() {
    let options = match parse_args(std::env::args().skip(1).collect()) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("belfry-adapter: {message}");
            std::process::exit(2);
        }
    };
    let (session, socket) = match (
        std::env::var(belfry_proto::env::SESSION),
        std::env::var_os(belfry_proto::env::SOCKET),
    ) {
        (Ok(session), Some(socket)) => (session, PathBuf::from(socket)),
        _ => {
            eprintln!(
                "belfry-adapter: {} and {} must be set (the daemon sets them for a pane's adapter)",
                belfry_proto::env::SESSION,
                belfry_proto::env::SOCKET
            );
            std::process::exit(2);
        }
    };
    let (code, reason) = match run(&options, &session, &socket) {
        End::Gone(reason) => (0, reason),
        End::Failed(reason) => (1, reason),
    };
    eprintln!("belfry-adapter: {reason}");
    std::process::exit(code);
}

/// Why the adapter stopped.
enum End {
    /// What it speaks about went away (the program exited, the subscription ended).
    Gone(String),
    /// The daemon could not be reached or refused a request.
    Failed(String),
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let mut grammar = None;
    let mut fresh = None;
    let mut valid_for_ms = DEFAULT_VALID_FOR_MS;
    let mut refresh_ms = DEFAULT_REFRESH_MS;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--provider" => {
                let name = value("--provider")?;
                grammar = Some(embedded::grammar(&name).map_err(|e| e.to_string())?);
                fresh = embedded::fresh_start(&name).map_err(|e| e.to_string())?;
            }
            "--declaration" => {
                let path = value("--declaration")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read declaration {path}: {e}"))?;
                fresh = FreshStart::from_declaration(&path, &text).map_err(|e| e.to_string())?;
            }
            "--grammar" => {
                let path = value("--grammar")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read grammar {path}: {e}"))?;
                grammar = Some(Grammar::parse(&path, &text).map_err(|e| e.to_string())?);
            }
            "--valid-for-ms" => valid_for_ms = number(&value("--valid-for-ms")?)?,
            "--refresh-ms" => refresh_ms = number(&value("--refresh-ms")?)?.max(10),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: belfry-adapter (--provider NAME | \
                     --grammar FILE [--declaration FILE]) [--valid-for-ms N] [--refresh-ms N]"
                ))
            }
        }
    }
    let Some(grammar) = grammar else {
        return Err(format!(
            "give --provider NAME (one of: {}) or --grammar FILE",
            embedded::names().join(", ")
        ));
    };
    Ok(Options {
        grammar,
        fresh,
        valid_for_ms,
        refresh: Duration::from_millis(refresh_ms),
    })
}

fn number(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number of milliseconds"))
}

/// Serves until the daemon or the pane goes away; returns why.
fn run(options: &Options, session: &str, socket: &std::path::Path) -> End {
    let (tx, rx) = mpsc::channel();
    let mut subscription = match Client::connect(socket) {
        Ok(client) => client,
        Err(err) => return End::Failed(format!("cannot reach the daemon: {err}")),
    };
    match subscription.request(json!({"op": "subscribe", "session": session})) {
        Ok(reply) if reply["ok"] == Value::Bool(true) => {}
        Ok(reply) => return End::Failed(format!("subscribe refused: {reply}")),
        Err(err) => return End::Failed(format!("subscribe failed: {err}")),
    }
    std::thread::spawn(move || forward_events(subscription, &tx));
    let mut snapshots = match Client::connect(socket) {
        Ok(client) => client,
        Err(err) => return End::Failed(format!("cannot reach the daemon: {err}")),
    };
    // The program's arguments decide whether its own start can be a fresh one (a program
    // started with a prompt runs that turn at once); asked of the pane host once.
    let fresh_sources = options.fresh.as_ref().map_or(Vec::new(), |fresh| {
        fresh.sources_for(program_args().as_deref())
    });
    let mut sources = TurnSources::with_fresh_start(&fresh_sources);
    let mut incarnation: Option<String> = None;
    let mut sequence = 0u64;
    let mut stdout = std::io::stdout().lock();
    loop {
        // Either something happened or the refresh interval passed; both end in one event.
        // Hook events wait for the snapshot, which says which incarnation is current.
        let mut hooks: Vec<(String, Option<String>, Option<String>)> = Vec::new();
        sources.next_look();
        match rx.recv_timeout(options.refresh) {
            Ok(seen) => {
                let deadline = Instant::now() + COALESCE;
                let mut batch = vec![seen];
                while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                    match rx.recv_timeout(left) {
                        Ok(seen) => batch.push(seen),
                        Err(_) => break,
                    }
                }
                for seen in batch {
                    match seen {
                        Seen::Revision => {}
                        Seen::Hook {
                            hook,
                            source,
                            incarnation,
                        } => hooks.push((hook, source, incarnation)),
                        // A missed prompt-submit would leave a running turn reported idle;
                        // after a gap nothing is known until the next turn-stop.
                        Seen::Lagged => {
                            hooks.clear();
                            sources.hooks_lost();
                        }
                        Seen::Gone(why) => return End::Gone(why),
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return End::Gone("the subscription ended".into())
            }
        }
        let snapshot =
            match snapshots.request(json!({"op": "snapshot", "session": session, "cells": true})) {
                Ok(reply) if reply["ok"] == Value::Bool(true) => reply,
                Ok(reply) => return End::Failed(format!("snapshot refused: {}", reply["error"])),
                Err(err) => return End::Failed(format!("snapshot failed: {err}")),
            };
        let (Some(pane), Ok(screen)) = (
            PaneSeen::from_snapshot(&snapshot),
            Screen::from_value(&snapshot),
        ) else {
            // A snapshot this build cannot read proves nothing; say nothing rather than guess,
            // and the daemon's lease simply expires. Hook events of this batch cannot be placed
            // in an incarnation, so the turn is unknown again.
            if !hooks.is_empty() {
                sources.hooks_lost();
            }
            continue;
        };
        if incarnation.as_deref() != Some(pane.incarnation.as_str()) {
            // A new program incarnation has proved nothing about its turns yet.
            sources = TurnSources::with_fresh_start(&fresh_sources);
            incarnation = Some(pane.incarnation.clone());
        }
        for (hook, source, of) in hooks {
            // A hook of another incarnation speaks of a program that is gone.
            if of.is_none() || of.as_deref() == Some(pane.incarnation.as_str()) {
                sources.hook_with_source(&hook, source.as_deref());
            }
        }
        // The program's own status, at this snapshot's revision: the event names that
        // revision, so a report that came after it makes the send a conflict.
        sources.program(ProgramView::from_snapshot(&snapshot, &pane.incarnation));
        let (turn, why) = sources.turn();
        let verdict = classify(&options.grammar, &screen);
        // A declared fresh start is judged with this very screen: idle only on the ready
        // screen with a provably empty composer.
        let (turn, why) = match (turn, &options.fresh) {
            (Turn::Fresh, Some(fresh)) => fresh.settle(&screen.lines, &verdict),
            (turn, _) => (turn, why),
        };
        sequence += 1;
        let event = activity_event(&pane, sequence, turn, &why, &verdict, options.valid_for_ms);
        if writeln!(stdout, "{event}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return End::Gone("the daemon stopped reading".into());
        }
    }
}

/// The arguments of the pane's program (its argv without the program), as its pane host has
/// them; `None` when they cannot be had, which no fresh start is granted on.
fn program_args() -> Option<Vec<String>> {
    let socket = std::env::var_os(belfry_proto::env::PANE_SOCKET)?;
    let mut client = Client::connect(std::path::Path::new(&socket)).ok()?;
    let reply = client.request(json!({"op": "info"})).ok()?;
    let argv = reply["argv"].as_array()?;
    argv.iter()
        .skip(1)
        .map(|arg| arg.as_str().map(str::to_string))
        .collect()
}

/// Passes the subscription's events on until it ends.
fn forward_events(mut client: Client, tx: &mpsc::Sender<Seen>) {
    loop {
        let event = match client.read_event() {
            Ok(event) => event,
            Err(err) => {
                let _ = tx.send(Seen::Gone(format!("the subscription ended: {err}")));
                return;
            }
        };
        let seen = match event["event"].as_str() {
            // A program status change is looked at at once, in the snapshot that carries it.
            Some("revision" | "program-status") => Seen::Revision,
            Some("hook") => match event["hook"].as_str() {
                Some(hook) => Seen::Hook {
                    hook: hook.to_string(),
                    source: event["source"].as_str().map(str::to_string),
                    incarnation: event["incarnation"].as_str().map(str::to_string),
                },
                None => continue,
            },
            // The program ended: its screen proves nothing more, and the daemon restarts the
            // adapter with the next incarnation's environment.
            Some("exit") => Seen::Gone("the pane's program exited".into()),
            Some("lagged") => Seen::Lagged,
            _ => continue,
        };
        if tx.send(seen).is_err() {
            return;
        }
    }
}
