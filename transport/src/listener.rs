//! The accept loop shared by the daemon and every pane host: a cap on concurrent connections
//! per socket, and back-off when the process runs out of file descriptors.
//!
//! Without the back-off, `accept(2)` failing with `EMFILE` leaves the pending connection in the
//! backlog, the listener stays readable, and the loop retries at once: a full core and a log
//! line per attempt until the disk fills. So every accept error waits (10 ms, doubling up to
//! 500 ms, reset by the next success) and is logged at most once per [`LOG_INTERVAL`], with a
//! count of the errors not logged. The cap keeps one client from eating every descriptor: a
//! connection over it gets one `busy` error reply naming the socket and the limit, and is
//! closed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::retry::Backoff;
use crate::wire;
use belfry_proto::{reply, ErrorCode};

/// The first pause after a failed accept.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between accept attempts: short enough that a process whose descriptors
/// were released serves again within half a second.
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// At most one log line per this interval for each kind of accept trouble.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How long a refused client gets to take its `busy` reply.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(1);

/// A listening socket that hands out connections with a permit each.
pub struct Listener {
    inner: UnixListener,
    path: PathBuf,
    limit: usize,
    permits: Arc<Semaphore>,
    backoff: Backoff,
    accept_errors: RateLimited,
    refusals: RateLimited,
}

/// An accepted connection. The permit counts it against the socket's cap until dropped, so
/// the task serving the connection keeps it for as long as the connection lives.
pub struct Accepted {
    pub stream: UnixStream,
    pub permit: OwnedSemaphorePermit,
}

impl Listener {
    /// Wraps a bound listener; at most `limit` connections are served at once.
    pub fn new(inner: UnixListener, path: &Path, limit: usize) -> Listener {
        Listener {
            inner,
            path: path.to_path_buf(),
            limit,
            permits: Arc::new(Semaphore::new(limit)),
            backoff: Backoff::doubling(FIRST_BACKOFF, MAX_BACKOFF),
            accept_errors: RateLimited::default(),
            refusals: RateLimited::default(),
        }
    }

    /// Waits for the next connection that is within the cap. Connections over the cap are
    /// refused on the way (`busy`), and accept errors are waited out; neither ends the loop.
    /// Cancel-safe: nothing is lost if the future is dropped while it waits.
    pub async fn accept(&mut self) -> Accepted {
        loop {
            match self.inner.accept().await {
                Ok((stream, _)) => {
                    self.backoff.reset();
                    match Arc::clone(&self.permits).try_acquire_owned() {
                        Ok(permit) => return Accepted { stream, permit },
                        Err(_) => self.refuse(stream),
                    }
                }
                Err(err) => {
                    let exhausted = matches!(
                        err.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    );
                    let pause = self.backoff.pause();
                    self.accept_errors.log(|suppressed| {
                        let hint = if exhausted {
                            "out of file descriptors or memory; "
                        } else {
                            ""
                        };
                        tracing::warn!(
                            "accept on {} failed: {err} ({hint}retrying with back-off up to \
                             {} ms; {suppressed} similar errors since the last report)",
                            self.path.display(),
                            MAX_BACKOFF.as_millis()
                        );
                    });
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// Answers a connection over the cap with one `busy` error and closes it.
    fn refuse(&mut self, stream: UnixStream) {
        let message = format!(
            "{} already serves {} connections, its limit; close one or try again later",
            self.path.display(),
            self.limit
        );
        self.refusals.log(|suppressed| {
            tracing::warn!("{message} ({suppressed} similar refusals since the last report)");
        });
        tokio::spawn(async move {
            let (_, mut writer) = stream.into_split();
            let reply = reply::error(&Value::Null, ErrorCode::Busy, message);
            let _ =
                tokio::time::timeout(REFUSAL_DEADLINE, wire::write_json(&mut writer, &reply)).await;
        });
    }
}

/// Lets one report through per [`LOG_INTERVAL`] and counts the ones held back.
#[derive(Default)]
struct RateLimited {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    /// Calls `report` with the number of events held back since the last report, unless one
    /// was made less than [`LOG_INTERVAL`] ago.
    fn log(&mut self, report: impl FnOnce(u64)) {
        let due = self.last.is_none_or(|last| last.elapsed() >= LOG_INTERVAL);
        if due {
            report(self.suppressed);
            self.suppressed = 0;
            self.last = Some(Instant::now());
        } else {
            self.suppressed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limited_reports_once_per_interval_and_counts_the_rest() {
        let mut limited = RateLimited::default();
        let mut reports = Vec::new();
        for _ in 0..1000 {
            limited.log(|suppressed| reports.push(suppressed));
        }
        assert_eq!(reports, vec![0]);
        assert_eq!(limited.suppressed, 999);
        limited.last = Some(Instant::now() - LOG_INTERVAL);
        limited.log(|suppressed| reports.push(suppressed));
        assert_eq!(reports, vec![0, 999]);
    }
}
