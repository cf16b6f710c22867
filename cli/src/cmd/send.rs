//! `belfry send`: the input steps in the order given on the command line, checked against
//! the protocol's limits before anything is sent, and the guarded send's expectation.

use anyhow::{anyhow, bail, Result};
use clap::ArgMatches;
use serde_json::Value;

use belfry_proto::limits::MAX_DELAY_TOTAL_MS;
use belfry_proto::reply::Sent;
use belfry_proto::request as op;
use belfry_proto::Expect;
use belfry_transport::paths;

use super::args::SendArgs;
use super::{ask_whole, print_json};
use crate::direct;
use crate::exit::{EXIT_CONFLICT, EXIT_OK};
use crate::remote::{self, Place};

pub(super) fn send(args: &SendArgs, sub: &ArgMatches) -> Result<i32> {
    use belfry_proto::request::InputStep;
    // Steps run in the order they appear on the command line, whatever their kind.
    let mut steps: Vec<(usize, InputStep)> = Vec::new();
    let mut collect = |id: &str, make: &dyn Fn(&str) -> Result<InputStep>| -> Result<()> {
        if let (Some(indices), Some(values)) = (sub.indices_of(id), sub.get_raw(id)) {
            for (index, value) in indices.zip(values) {
                let value = value
                    .to_str()
                    .ok_or_else(|| anyhow!("--{id} is not UTF-8"))?;
                steps.push((index, make(value)?));
            }
        }
        Ok(())
    };
    collect("paste", &|v| Ok(InputStep::Paste(v.into())))?;
    collect("text", &|v| Ok(InputStep::Text(v.into())))?;
    collect("key", &|v| Ok(InputStep::Key(v.into())))?;
    collect("delay_ms", &|v| {
        let ms = v
            .parse::<u64>()
            .map_err(|_| anyhow!("--delay-ms {v:?} is not a number"))?;
        Ok(InputStep::DelayMs(ms))
    })?;
    steps.sort_by_key(|(index, _)| *index);
    if steps.is_empty() {
        bail!("nothing to send: give --paste, --text, --key or --delay-ms");
    }
    check_send_steps(steps.iter().map(|(_, step)| step))?;
    let (place, session) = remote::place_of(&args.name)?;
    let send = op::Send {
        session: Some(session.clone()),
        expect: send_expectation(args)?,
        input: steps.into_iter().map(|(_, step)| step).collect(),
        txn: None,
        notice: None,
        timeout_ms: args.timeout_ms,
    };
    // spec §6.2: over ssh the compare still happens in the pane host, so latency can only
    // make a conflict likelier, never a write against a screen the caller did not see.
    // Locally the send goes to the pane host itself when one answers at the pane's socket
    // (one round trip, no daemon in the path), else through the daemon.
    let quick = match &place {
        Place::Local => {
            paths::private_runtime_dir()?;
            direct::quick_send(&paths::runtime_dir(), &send, &session)?
        }
        Place::Remote(_) => None,
    };
    let (whole, sent): (Value, Sent) = match quick {
        Some(answer) => answer,
        None => ask_whole(&mut place.daemon()?, send)?,
    };
    let conflict = matches!(sent, Sent::Conflict { .. });
    if args.json {
        print_json(&whole);
    } else {
        match &sent {
            Sent::Conflict { actual, exited, .. } => eprintln!(
                "conflict: pane is at revision {} (incarnation {}){}; nothing was written",
                actual.revision,
                actual.incarnation,
                if *exited { ", exited" } else { "" }
            ),
            Sent::Sent { revision, .. } => println!("sent (revision {revision})"),
        }
    }
    Ok(if conflict { EXIT_CONFLICT } else { EXIT_OK })
}

/// Checks a send's steps as the pane host will check them, before anything is sent, so that
/// an error names the option the user gave (`--key "Foo": unknown key name …`) rather than
/// the request's fields (`input step 0`, `delay_ms`).
pub(super) fn check_send_steps<'a>(
    steps: impl Iterator<Item = &'a belfry_proto::request::InputStep>,
) -> Result<()> {
    use belfry_proto::request::InputStep;
    let mut total_delay = 0u64;
    for step in steps {
        let (option, value) = match step {
            InputStep::Paste(_) => ("--paste", None),
            InputStep::Text(_) | InputStep::Bytes(_) => ("--text", None),
            InputStep::Key(name) => ("--key", Some(format!("{name:?}"))),
            InputStep::DelayMs(ms) => {
                total_delay = total_delay.saturating_add(*ms);
                ("--delay-ms", Some(ms.to_string()))
            }
        };
        if let Err(belfry_pty::Error::InvalidInput { reason }) =
            belfry_pty::input::parse_steps(std::slice::from_ref(step))
        {
            // The pane host numbers the steps of a request; here there is one, and its option.
            let reason = reason.strip_prefix("input step 0: ").unwrap_or(&reason);
            match value {
                Some(value) => bail!("{option} {value}: {reason}"),
                None => bail!("{option}: {reason}"),
            }
        }
    }
    if total_delay > MAX_DELAY_TOTAL_MS {
        bail!(
            "--delay-ms: the delays add up to {total_delay} ms, over the {MAX_DELAY_TOTAL_MS} ms \
             one send may pause in all"
        );
    }
    Ok(())
}

/// `--regex` of `belfry wait`: compiled as the pane host will compile it, so a pattern it
/// would refuse is named here, as the option the user gave.
pub(super) fn parse_screen_regex(pattern: &str) -> std::result::Result<String, String> {
    belfry_pty::check_screen_regex(pattern)
        .map(|()| pattern.to_string())
        .map_err(|err| format!("{pattern:?} is not a regular expression: {err}"))
}

/// What the send expects of the pane (spec §3): the `--expect` token's identity, then any
/// `--expect-*` field over it; `None` for an unguarded send.
pub(super) fn send_expectation(args: &SendArgs) -> Result<Option<Expect>> {
    let mut expect = Expect::default();
    if let Some(token) = &args.expect {
        let parsed = belfry_proto::expect_token::decode(token).map_err(|err| anyhow!(err))?;
        expect = Expect {
            incarnation: parsed.incarnation,
            generation: parsed.generation,
            revision: parsed.revision,
        };
    }
    if let Some(revision) = args.expect_revision {
        expect.revision = Some(revision);
    }
    if let Some(incarnation) = &args.expect_incarnation {
        expect.incarnation = Some(incarnation.clone());
    }
    if let Some(generation) = &args.expect_generation {
        expect.generation = Some(generation.clone());
    }
    Ok((!expect.is_empty()).then_some(expect))
}
