//! The pages about belfry itself: `belfry man` (the main page, or every page into a
//! directory, with the FILES and ENVIRONMENT sections clap_mangen has no place for) and
//! `belfry completions`.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::args::Cli;
use crate::exit::EXIT_OK;

/// The main man page's FILES and ENVIRONMENT sections, which clap_mangen has no place for:
/// where the sockets, the state and the logs are, and which variables move them
/// (`belfry_transport::paths`, the one place that decides it).
pub(super) const MAN_FILES_AND_ENVIRONMENT: &str = r#".SH FILES
.TP
\fIRUNTIME\fR/default.sock
The daemon's socket (\fIRUNTIME\fR is the runtime directory: $BELFRY_RUNTIME_DIR, else
$XDG_RUNTIME_DIR/belfry, else /tmp/belfry\-\fIUID\fR).
.TP
\fIRUNTIME\fR/panes/\fINAME\fR.sock, \fIRUNTIME\fR/panes/\fINAME\fR.json
Each pane host's socket and record.
.TP
\fISTATE\fR/inbox/\fINAME\fR/
A pane's durable inbox (new/, archive/), and \fISTATE\fR/ding/ the delivery state (\fISTATE\fR
is $BELFRY_STATE, else $XDG_STATE_HOME/belfry, else ~/.local/state/belfry).
.TP
$XDG_STATE_HOME/belfry/log/daemon.log, $XDG_STATE_HOME/belfry/log/pane\-\fINAME\fR.log
The daemon's log and each pane host's (default ~/.local/state/belfry/log/); \fBbelfry logs\fR
prints them.
.TP
$XDG_CONFIG_HOME/belfry/config.kdl
The user config (its \fBhosts\fR and \fBattach\fR sections: remote hosts; the prefix, escape time and history limit); default ~/.config/belfry/config.kdl.
.TP
\&./belfry.kdl, ./belfry\-hooks.kdl
The declarations of \fBbelfry up\fR and \fBdown\fR, and the canonical hooks of \fBbelfry hooks\fR.
.SH ENVIRONMENT
.TP
BELFRY_RUNTIME_DIR
The runtime directory (sockets and pane records).
.TP
BELFRY_SOCKET
The daemon's socket; set inside every pane.
.TP
BELFRY_STATE
The state directory (inboxes, delivery state).
.TP
XDG_RUNTIME_DIR, XDG_STATE_HOME, XDG_CONFIG_HOME
The defaults of the runtime directory, of the state directory and the logs, and of the user
config.
.TP
BELFRY_SESSION
Set inside every pane to its name: the default SESSION of \fBinbox\fR, \fBpresence\fR and
\fBding\fR.
.TP
BELFRY_HOST
The machine commands go to, as \-\-host.
.TP
BELFRY_ADAPTERS
A folder of adapters used instead of the built\-in ones.
.TP
BELFRY_HOOKS_FILE
The hooks file of \fBbelfry dispatch\fR when \-\-hooks\-file is not given.
.TP
BELFRY_ESCAPE_TIME_MS
How long \fBattach\fR waits for the rest of an escape sequence (0 to 5000, default 25).
.TP
BELFRY_DETACH
The detach key of \fBattach\fR and \fBrun\fR, as \-\-detach\-key (default "C\-b d"; inside tmux, "C\-a d").
"#;

/// `belfry man --dir DIR`: every page, named as the references between them name them
/// (`belfry-inbox-post.1` for `belfry-inbox-post(1)`); hidden subcommands get none.
pub(super) fn man_pages(dir: &std::path::Path) -> Result<i32> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the man page directory {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    let main_page = dir.join("belfry.1");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&main_page)
        .and_then(|mut file| file.write_all(MAN_FILES_AND_ENVIRONMENT.as_bytes()))
        .with_context(|| format!("cannot write {}", main_page.display()))?;
    let pages = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".1"))
        .count();
    println!(
        "{pages} man pages in {} (read one with `man -l {}/belfry.1`, or add the directory's \
         parent to MANPATH as man1/)",
        dir.display(),
        dir.display()
    );
    Ok(EXIT_OK)
}

/// `belfry man`: the main page on stdout.
pub(super) fn page() -> Result<i32> {
    // As `man --dir` renders it: `belfry help` is clap's, with no page of its own, so
    // the page does not list it as a `belfry-help(1)` that cannot be found.
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command().disable_help_subcommand(true)).render(&mut page)?;
    page.extend_from_slice(MAN_FILES_AND_ENVIRONMENT.as_bytes());
    std::io::stdout().write_all(&page)?;
    Ok(EXIT_OK)
}

/// `belfry completions SHELL`: the shell's completion script on stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<i32> {
    crate::completions::print(shell, Cli::command())?;
    Ok(EXIT_OK)
}
