//! The hot path of parsing: a command line of one of the hot subcommands (`dispatch`, `peek`,
//! `send`, `wait`, `inbox`: run many times a minute) is parsed against that subcommand alone,
//! and a parse error of `new`/`run` gets a tip saying where the program goes. Its tests check
//! that the short path accepts exactly what the whole tree accepts.

use clap::{ArgMatches, FromArgMatches};

use super::args::{
    subcommand_name, Cli, DispatchArgs, GlobalArgs, InboxArgs, PeekArgs, SendArgs, WaitArgs,
};

/// A parse error of `belfry new NAME CMD …` or `belfry run NAME CMD …`, the program given
/// without `--`, with a tip that says where it goes: clap alone says only that `CMD` is an
/// unexpected argument.
pub(super) fn with_program_tip(mut err: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let sub = subcommand_name(words.iter().cloned());
    if sub != "new" && sub != "run" {
        return err;
    }
    let Some(ContextValue::String(unexpected)) = err.get(ContextKind::InvalidArg).cloned() else {
        return err;
    };
    // Only a bare word is a program given without `--`; a mistyped `--flag` is clap's to
    // explain.
    if unexpected.starts_with('-') || words.iter().any(|word| word == "--") {
        return err;
    }
    let Some(at) = words.iter().position(|word| *word == unexpected) else {
        return err;
    };
    let quoted: Vec<String> = words.iter().map(|word| shell_word(word)).collect();
    let (before, program) = quoted.split_at(at);
    let tip = format!(
        "the program goes after `--`: belfry {} -- {}",
        before.join(" "),
        program.join(" ")
    );
    err.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    err
}

/// `word` as a POSIX shell reads it back: as it is when it has nothing a shell would treat
/// specially, else in single quotes.
pub(super) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Adds a subcommand's arguments to its command (`clap::Args::augment_args`).
pub(super) type Augment = fn(clap::Command) -> clap::Command;

/// The subcommands that hooks, agents and supervisors run many times a minute: `dispatch`
/// (every hook of every harness), `peek`, `send`, `wait` and `inbox` (DING mail: `post`,
/// `read`, `archive`).
pub(super) const HOT: [(&str, Augment); 5] = [
    ("dispatch", <DispatchArgs as clap::Args>::augment_args),
    ("peek", <PeekArgs as clap::Args>::augment_args),
    ("send", <SendArgs as clap::Args>::augment_args),
    ("wait", <WaitArgs as clap::Args>::augment_args),
    ("inbox", <InboxArgs as clap::Args>::augment_args),
];

/// A command line of one hot subcommand, given first (`belfry peek NAME …`), parsed by a root
/// that has the root's options and that subcommand alone. Building every subcommand's
/// arguments is a third of a millisecond and 80 page faults of the CLI's start (measured in
/// `docs/performance.md`, 3b), as much as the rest of a `peek`'s work in the CLI.
///
/// `None` for anything else, and for a line this root does not accept as a whole: `--help`,
/// a mistake, anything the whole tree must say or explain. That line is then parsed by the
/// whole tree, which prints what it prints today, so this root never prints or decides
/// anything the whole tree would not. The arguments are the same types, so a line it accepts
/// parses to the same values (`hot_lines_parse_as_the_whole_tree_parses_them`).
pub(super) fn parse_hot(args: &[std::ffi::OsString]) -> Option<(Cli, ArgMatches)> {
    let first = args.get(1)?.to_str()?;
    let (name, augment) = HOT.into_iter().find(|(name, _)| *name == first)?;
    let root = <GlobalArgs as clap::Args>::augment_args(clap::Command::new("belfry"))
        .subcommand(augment(clap::Command::new(name)))
        .subcommand_required(true);
    let matches = root.try_get_matches_from(args).ok()?;
    let cli = Cli::from_arg_matches(&matches).ok()?;
    Some((cli, matches))
}

#[cfg(test)]
mod hot_tests {
    use super::{parse_hot, Cli, HOT};
    use clap::{CommandFactory, FromArgMatches};

    /// Lines of every hot subcommand, each with whether the whole tree accepts it: well-formed
    /// ones in each form an option takes, and mistakes, help and version requests, which must
    /// be left to the whole tree.
    const LINES: &[(bool, &[&str])] = &[
        (true, &["dispatch", "--event", "before-tool"]),
        (
            true,
            &[
                "dispatch",
                "--event=after-tool",
                "--spool",
                "--native",
                "d1",
            ],
        ),
        (
            true,
            &[
                "dispatch",
                "--event",
                "x",
                "--hooks-file",
                "/h.json",
                "--dialects",
                "/d",
            ],
        ),
        (true, &["dispatch", "--turn-boundary", "--event", "stop"]),
        (false, &["dispatch"]),
        (false, &["dispatch", "--event"]),
        (false, &["dispatch", "--event", "a", "--event", "b"]),
        (false, &["dispatch", "--event", "x", "--bogus"]),
        (false, &["dispatch", "--event", "x", "extra"]),
        (false, &["dispatch", "--help"]),
        (false, &["dispatch", "-h"]),
        (false, &["dispatch", "--version"]),
        (true, &["peek", "p1"]),
        (
            true,
            &[
                "peek",
                "p1",
                "--ansi",
                "--json",
                "--scrollback",
                "10",
                "--cells",
            ],
        ),
        (true, &["peek", "box:p1", "--scrollback=3"]),
        (true, &["peek", "--", "-p"]),
        (false, &["peek"]),
        (false, &["peek", "p1", "p2"]),
        (false, &["peek", "p1", "--scrollback", "-1"]),
        (false, &["peek", "p1", "--scrollback", "ten"]),
        (false, &["peek", "p1", "--json", "--json"]),
        (false, &["peek", "--help"]),
        (false, &["peek", "p1", "-V"]),
        (true, &["send", "p1", "--text", "hi"]),
        (true, &["send", "p1", "--text", "-x", "--paste", "--y"]),
        (
            true,
            &[
                "send",
                "p1",
                "--paste",
                "a",
                "--key",
                "Enter",
                "--delay-ms",
                "5",
                "--text",
                "b",
            ],
        ),
        (
            true,
            &[
                "send",
                "p1",
                "--expect-revision",
                "3",
                "--expect-incarnation",
                "i",
                "--expect-generation",
                "g",
                "--json",
                "--timeout-ms",
                "100",
            ],
        ),
        (true, &["send", "p1", "--expect", "tok", "--text", "x"]),
        (
            false,
            &["send", "p1", "--expect", "tok", "--expect-revision", "3"],
        ),
        (false, &["send", "p1", "--delay-ms", "soon"]),
        (false, &["send"]),
        (false, &["send", "p1", "--key"]),
        (false, &["send", "--help"]),
        (true, &["send", "help"]),
        (true, &["wait", "p1", "--quiet-ms", "200"]),
        (
            true,
            &["wait", "p1", "--regex", "-x", "--timeout-ms", "5", "--json"],
        ),
        (true, &["wait", "p1", "--exit", "--revision", "3"]),
        (false, &["wait"]),
        (false, &["wait", "p1", "--timeout-ms", "-1"]),
        (false, &["wait", "p1", "--regex"]),
        (false, &["wait", "--help"]),
        (
            true,
            &["inbox", "post", "p1", "--subject", "-hi", "--from", "me"],
        ),
        (true, &["inbox", "post", "p1", "note.md", "--json"]),
        (true, &["inbox", "read", "p1", "1-a.md"]),
        (true, &["inbox", "read", "--session", "p1", "--json"]),
        (true, &["inbox", "archive", "p1", "1-a.md"]),
        (true, &["inbox", "ls"]),
        (false, &["inbox"]),
        (false, &["inbox", "post"]),
        (false, &["inbox", "archive"]),
        (false, &["inbox", "frob"]),
        (false, &["inbox", "post", "p1", "--help"]),
        (false, &["inbox", "help", "post"]),
    ];

    fn line(words: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("belfry")
            .chain(words.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn hot_lines_parse_as_the_whole_tree_parses_them() {
        for (accepted, words) in LINES {
            let args = line(words);
            let whole = Cli::command()
                .try_get_matches_from(&args)
                .ok()
                .and_then(|m| Cli::from_arg_matches(&m).ok().map(|cli| (cli, m)));
            let hot = parse_hot(&args);
            match (whole, hot) {
                (Some((cli, matches)), Some((hot_cli, hot_matches))) => {
                    assert_eq!(format!("{hot_cli:?}"), format!("{cli:?}"), "{words:?}");
                    let (name, sub) = matches.subcommand().expect("a subcommand");
                    let (hot_name, hot_sub) = hot_matches.subcommand().expect("a subcommand");
                    assert_eq!(hot_name, name, "{words:?}");
                    assert_eq!(format!("{hot_sub:?}"), format!("{sub:?}"), "{words:?}");
                    assert_eq!(
                        hot_matches.value_source("host"),
                        matches.value_source("host"),
                        "{words:?}"
                    );
                    assert!(accepted, "{words:?}: the whole tree accepts it");
                }
                (None, None) => assert!(!accepted, "{words:?}: the whole tree refuses it"),
                (Some(_), None) => {
                    panic!("{words:?}: the whole tree parses it, the hot root does not")
                }
                (None, Some((cli, _))) => {
                    panic!("{words:?}: only the hot root accepts it, as {cli:?}")
                }
            }
        }
    }

    #[test]
    fn only_a_hot_subcommand_given_first_takes_the_hot_path() {
        for words in [
            &["ls"][..],
            &["--host", "h", "peek", "p1"],
            &["info", "p1"],
            &["--help"],
            &[],
        ] {
            assert!(parse_hot(&line(words)).is_none(), "{words:?}");
        }
        // Every hot name is a subcommand of the whole tree.
        let whole = Cli::command();
        for (name, _) in HOT {
            assert!(whole.find_subcommand(name).is_some(), "{name}");
        }
    }
}
