//! `belfry-pane`: the pane host alone, the process the daemon starts for each pane.
//!
//! `belfry pane-host` runs the same code, but from the whole `belfry` program: every pane host
//! then maps the pages of a 14 MB executable it never calls (the command line, the daemon,
//! hooks, DING, attach), and those count in each pane's resident size. This executable holds
//! only what a pane host runs, so a pane costs the pages of its own code. The daemon starts it
//! when it is installed beside the daemon's executable (docs/decisions.md).
//!
//! Its arguments are `belfry pane-host`'s: `[pane-host] --runtime DIR --daemon-socket PATH
//! --state DIR`, with the launch spec on stdin.

mod logging;
mod pane_host;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code for an error, as `belfry`'s.
const EXIT_ERROR: u8 = 2;

/// The three directories a pane host is started with.
#[derive(Debug, PartialEq)]
struct Args {
    runtime: PathBuf,
    daemon_socket: PathBuf,
    state: PathBuf,
}

/// Parses `[pane-host] --runtime DIR --daemon-socket PATH --state DIR` (each flag also as
/// `--flag=VALUE`), or says which argument is wrong.
fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|first| first == "pane-host") {
        args.next();
    }
    let (mut runtime, mut daemon_socket, mut state) = (None, None, None);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        let (flag, inline) = match text.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value)),
            _ => (text.clone(), None),
        };
        let slot = match flag.as_str() {
            "--runtime" => &mut runtime,
            "--daemon-socket" => &mut daemon_socket,
            "--state" => &mut state,
            _ => return Err(format!("unexpected argument '{text}'")),
        };
        let value = match inline {
            Some(value) => OsString::from(value),
            None => args.next().ok_or_else(|| format!("{flag} needs a value"))?,
        };
        if value.is_empty() {
            return Err(format!("{flag} needs a value, not an empty one"));
        }
        if slot.replace(PathBuf::from(value)).is_some() {
            return Err(format!("{flag} is given twice"));
        }
    }
    Ok(Args {
        runtime: runtime.ok_or("--runtime DIR is required")?,
        daemon_socket: daemon_socket.ok_or("--daemon-socket PATH is required")?,
        state: state.ok_or("--state DIR is required")?,
    })
}

fn run(args: Args) -> Result<(), String> {
    pane_host::serve(args.runtime, args.daemon_socket, args.state)
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == "--version") {
        println!("belfry-pane {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let outcome = parse(args).and_then(run);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("belfry-pane: {err}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn takes_the_daemons_arguments_with_or_without_the_subcommand_word() {
        let want = Args {
            runtime: "/r".into(),
            daemon_socket: "/d.sock".into(),
            state: "/s".into(),
        };
        let spaced = [
            "--runtime",
            "/r",
            "--daemon-socket",
            "/d.sock",
            "--state",
            "/s",
        ];
        assert_eq!(parsed(&spaced), Ok(want));
        let mut worded = vec!["pane-host"];
        worded.extend(spaced);
        assert_eq!(parsed(&worded).map(|a| a.state), Ok("/s".into()));
        assert_eq!(
            parsed(&["--state=/s", "--runtime=/r", "--daemon-socket=/d"]).map(|a| a.runtime),
            Ok("/r".into())
        );
    }

    #[test]
    fn a_wrong_argument_is_named() {
        assert_eq!(
            parsed(&["--runtime", "/r", "--bogus"]).err().as_deref(),
            Some("unexpected argument '--bogus'")
        );
        assert_eq!(
            parsed(&["--runtime"]).err().as_deref(),
            Some("--runtime needs a value")
        );
        assert_eq!(
            parsed(&["--runtime", "/r", "--runtime", "/q"])
                .err()
                .as_deref(),
            Some("--runtime is given twice")
        );
        assert_eq!(
            parsed(&["--runtime", "/r", "--state", "/s"])
                .err()
                .as_deref(),
            Some("--daemon-socket PATH is required")
        );
        assert_eq!(
            parsed(&["--state="]).err().as_deref(),
            Some("--state needs a value, not an empty one")
        );
    }
}
