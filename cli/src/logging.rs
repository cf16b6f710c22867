//! The log file of a process with no terminal (the daemon, a pane host), shared by `belfry`
//! and the pane-host executable `belfry-pane`.

use std::io::Write;
use std::path::PathBuf;

use belfry_transport::paths;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub(crate) fn init_logging(file: &str) {
    let dir = paths::log_dir();
    if paths::ensure_private_dir(&dir).is_err() {
        return;
    }
    let appender = LazyLogFile {
        path: dir.join(file),
        file: std::sync::OnceLock::new(),
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(appender)
        .with_ansi(false)
        .finish()
        .with(filter())
        .try_init();
    // A daemon or pane host has no terminal: its stderr goes nowhere a user looks. A panic in
    // one of its threads (which may leave the process serving without that thread) is written
    // to its log too, with where it happened, so it is never silent.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        tracing::error!(
            "panic in thread {:?}: {info}",
            thread.name().unwrap_or("unnamed")
        );
        previous(info);
    }));
}

/// What `$BELFRY_LOG` asks to be logged: comma-separated `LEVEL`, `TARGET=LEVEL` or `TARGET`
/// directives (`debug`, `belfry_pty=trace,info`); `info` when it is unset, empty or does not
/// parse. Target
/// directives, not tracing's `EnvFilter`: that one's span and field matching needs a regex
/// engine in every pane host for a feature nobody filtering a log file uses.
fn filter() -> Targets {
    filter_of(std::env::var("BELFRY_LOG").ok().as_deref())
}

fn filter_of(directives: Option<&str>) -> Targets {
    directives
        .filter(|directives| !directives.trim().is_empty())
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO))
}

/// A log file opened on the first event, not before: a process that never logs (a pane host
/// whose program could not be started) leaves no empty `pane-<name>.log` behind, so bad input
/// has no side effect on disk (spec §12).
struct LazyLogFile {
    path: PathBuf,
    /// `None` once opening failed: the events are then dropped, as logging must never stop
    /// the process it describes.
    file: std::sync::OnceLock<Option<std::fs::File>>,
}

/// One event's writer: the log file, or nowhere if it could not be opened.
struct LogWriter<'a>(Option<&'a std::fs::File>);

impl Write for LogWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match &mut self.0 {
            Some(file) => file.write(bytes),
            None => Ok(bytes.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.0 {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LazyLogFile {
    type Writer = LogWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        use std::os::unix::fs::OpenOptionsExt;
        let file = self.file.get_or_init(|| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)
                .ok()
        });
        LogWriter(file.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::filter_of;
    use tracing::Level;

    #[test]
    fn belfry_log_takes_levels_per_target_and_falls_back_to_info() {
        let filter = filter_of(Some("belfry_pty=debug,warn"));
        assert!(filter.would_enable("belfry_pty::host", &Level::DEBUG));
        assert!(!filter.would_enable("belfry_pty::host", &Level::TRACE));
        assert!(filter.would_enable("belfry_mux", &Level::WARN));
        assert!(!filter.would_enable("belfry_mux", &Level::INFO));
        assert!(filter_of(Some("trace")).would_enable("anything", &Level::TRACE));
        // A bare word is a target (`belfry_pty` alone: everything of that crate), as in
        // tracing's own syntax.
        assert!(filter_of(Some("belfry_pty")).would_enable("belfry_pty::host", &Level::TRACE));
        assert!(!filter_of(Some("belfry_pty")).would_enable("belfry_mux", &Level::ERROR));
        for unset_or_wrong in [None, Some(""), Some(" "), Some("belfry_pty=loud")] {
            let filter = filter_of(unset_or_wrong);
            assert!(
                filter.would_enable("belfry_mux", &Level::INFO),
                "{unset_or_wrong:?}"
            );
            assert!(
                !filter.would_enable("belfry_mux", &Level::DEBUG),
                "{unset_or_wrong:?}"
            );
        }
    }
}
