//! `belfry completions SHELL` and the pane names it completes. clap_complete writes the static
//! part (subcommands, options); for bash, zsh and fish a small function is added around it
//! that asks `belfry complete-panes -- WORDS…` (hidden) first. That command decides, from the
//! same clap definition, whether the word being completed is a pane NAME (`attach`, `send`,
//! `inbox post`, …): if so it prints the live pane names and exits 0, else it exits 1 and the
//! shell goes on with clap's own completion. So the logic lives once, here, for every shell.
//!
//! The names come from the running daemon only, connecting once with a short deadline: with
//! no daemon the connect fails at once and nothing is completed; a stopped daemon costs at most
//! [`DEADLINE`]. No daemon is ever started by a TAB.

use std::io::Write;
use std::time::Duration;

use clap::Command;

use belfry_proto::reply::Listing;
use belfry_proto::request as op;
use belfry_transport::client::Client;
use belfry_transport::paths;

/// The longest a TAB waits for the daemon's listing.
const DEADLINE: Duration = Duration::from_millis(300);

/// Subcommands whose first positional is a pane name that does not exist yet: nothing to
/// complete there.
const NEW_NAMES: &[&str] = &["new"];

/// Positional ids that name a pane.
const PANE_IDS: &[&str] = &["name", "session", "pane"];

/// Prints the completion script for `shell`: clap's, with pane names for bash, zsh and fish.
pub(crate) fn print(shell: clap_complete::Shell, mut cli: Command) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "belfry", &mut script);
    let script = String::from_utf8(script)?;
    let script = match shell {
        clap_complete::Shell::Bash => bash(&script),
        clap_complete::Shell::Zsh => zsh(&script),
        clap_complete::Shell::Fish => format!("{script}{FISH}"),
        _ => script,
    };
    std::io::stdout().write_all(script.as_bytes())?;
    Ok(())
}

/// clap's `_belfry` becomes `_belfry_clap`, and `_belfry`, still the function `complete -F`
/// names, asks for pane names first.
fn bash(script: &str) -> String {
    let script = script.replacen("_belfry() {", "_belfry_clap() {", 1);
    format!("{script}{BASH}")
}

/// As for bash: clap's `_belfry` becomes `_belfry_clap`; ours is defined before the script's
/// last lines, which call `_belfry` (autoloaded) or hand it to `compdef`.
fn zsh(script: &str) -> String {
    let script = script.replacen("\n_belfry() {", "\n_belfry_clap() {", 1);
    match script.rfind("\nif [ \"$funcstack[1]\" = \"_belfry\" ]") {
        Some(at) => format!("{}\n{ZSH}{}", &script[..at], &script[at..]),
        None => format!("{script}\n{ZSH}"),
    }
}

const BASH: &str = r#"
# Pane names, live from the running daemon, where a command takes one (`belfry
# complete-panes` says whether the word is one; nothing, at once, without a daemon).
_belfry() {
    local names
    if names=$(command belfry complete-panes -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null); then
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$names" -- "${COMP_WORDS[COMP_CWORD]}"))
        return 0
    fi
    _belfry_clap "$@"
}
"#;

const ZSH: &str = r#"# Pane names, live from the running daemon, where a command takes one (`belfry
# complete-panes` says whether the word is one; nothing, at once, without a daemon).
_belfry() {
    local names
    if names=$(command belfry complete-panes -- "${(@)words[2,CURRENT-1]}" 2>/dev/null); then
        local -a panes
        panes=(${(f)names})
        compadd -a panes
        return
    fi
    _belfry_clap "$@"
}
"#;

const FISH: &str = r#"
# Pane names, live from the running daemon, where a command takes one (`belfry
# complete-panes` says whether the word is one; nothing, at once, without a daemon).
complete -c belfry -n 'command belfry complete-panes -- (commandline -opc)[2..-1] >/dev/null 2>&1' -f -a '(command belfry complete-panes -- (commandline -opc)[2..-1] 2>/dev/null)'
"#;

/// `belfry complete-panes -- WORDS…`: `words` are the command line's words after `belfry`
/// and before the one being completed. Prints the live pane names and returns 0 when that
/// word is a pane name, else returns 1 and prints nothing.
pub(crate) fn complete_panes(cli: Command, words: &[String]) -> i32 {
    if !is_pane_position(cli, words) {
        return 1;
    }
    // Local panes only: a far host's would take an ssh connection per TAB.
    if std::env::var_os("BELFRY_HOST").is_some_and(|host| !host.is_empty()) {
        return 0;
    }
    let socket = paths::daemon_socket();
    let Ok(mut client) = Client::connect_once(&socket, DEADLINE) else {
        return 0;
    };
    if let Ok(reply) = client.call::<Listing>(op::List {}) {
        if let Ok(listing) = reply.into_result() {
            let mut out = std::io::stdout().lock();
            for pane in listing.panes {
                let _ = writeln!(out, "{}", pane.session);
            }
        }
    }
    0
}

/// Whether the word after `words` is a positional that names an existing pane, as the
/// subcommand `words` reach defines it.
fn is_pane_position(mut cli: Command, words: &[String]) -> bool {
    cli.build();
    let mut current = &cli;
    let mut positionals = 0usize;
    let mut index = 0;
    while let Some(word) = words.get(index) {
        index += 1;
        if word == "--" {
            // What follows is a program's command line.
            return false;
        }
        if let Some(long) = word.strip_prefix("--") {
            let takes_value = !long.contains('=')
                && current
                    .get_arguments()
                    .find(|arg| arg.get_long() == Some(long))
                    .is_some_and(|arg| arg.get_action().takes_values());
            if takes_value && index == words.len() {
                // The word being completed is this option's value.
                return false;
            }
            index += usize::from(takes_value);
            continue;
        }
        if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // `-f` takes no value; the last of a cluster may (`-xVALUE` is one word).
            let takes_value = shorts.chars().count() == 1
                && shorts.chars().next().is_some_and(|short| {
                    current
                        .get_arguments()
                        .find(|arg| arg.get_short() == Some(short))
                        .is_some_and(|arg| arg.get_action().takes_values())
                });
            if takes_value && index == words.len() {
                return false;
            }
            index += usize::from(takes_value);
            continue;
        }
        if positionals == 0 {
            if let Some(sub) = current.find_subcommand(word) {
                current = sub;
                continue;
            }
        }
        positionals += 1;
    }
    if current.has_subcommands() || NEW_NAMES.contains(&current.get_name()) {
        return false;
    }
    current
        .get_positionals()
        .nth(positionals)
        .is_some_and(|arg| PANE_IDS.contains(&arg.get_id().as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        Command::new("belfry")
            .arg(clap::Arg::new("host").long("host").global(true))
            .subcommand(
                Command::new("send")
                    .arg(clap::Arg::new("name"))
                    .arg(clap::Arg::new("text").long("text")),
            )
            .subcommand(Command::new("new").arg(clap::Arg::new("name")))
            .subcommand(
                Command::new("inbox").subcommand(
                    Command::new("post")
                        .arg(clap::Arg::new("session"))
                        .arg(clap::Arg::new("file")),
                ),
            )
    }

    fn at(words: &[&str]) -> bool {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        is_pane_position(cli(), &words)
    }

    #[test]
    fn a_pane_name_is_completed_where_a_command_takes_an_existing_one() {
        assert!(at(&["send"]));
        assert!(at(&["--host", "box", "send"]));
        assert!(at(&["inbox", "post"]));
        assert!(!at(&[]), "the subcommand itself");
        assert!(!at(&["inbox"]), "a subcommand of inbox");
        assert!(!at(&["send", "agent"]), "past the name");
        assert!(!at(&["send", "--text"]), "the value of --text");
        assert!(at(&["send", "--text", "hi"]), "after an option's value");
        assert!(!at(&["new"]), "a name that does not exist yet");
        assert!(!at(&["inbox", "post", "agent"]), "the message file");
        assert!(!at(&["send", "--", "x"]), "a program's command line");
    }
}
