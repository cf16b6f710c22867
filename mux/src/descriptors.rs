//! The daemon's file descriptors: how many it may open, how many a pane takes, and the refusal
//! of a spawn that would not fit.
//!
//! Every pane costs the daemon descriptors for as long as it runs: its inbox's three checked
//! directory handles (the DING worker's, `belfry_ding::Inbox`: the inbox, `new/` and
//! `archive/`; `tmp/` is opened only to post), the subscription to its pane host's events, the
//! kept connection for requests to it, and the pidfd through which tokio reaps the pane host.
//! Measured in `/proc/<daemon>/fd` with 10 panes: 6 a pane (7 while the inbox kept `tmp/` open
//! too). Under the soft `RLIMIT_NOFILE` most systems start a session with, 1024, 7 a pane
//! stopped the daemon at 143 panes, the next spawn failing half-way with "Too many open files".
//!
//! So the daemon raises its soft limit to the hard limit when it starts ([`raise_soft_limit`]),
//! which an unprivileged process may always do, and says in its log how many panes fit. The
//! pane hosts it starts get the soft limit back as it was ([`restore_for_child`]): a pane's
//! program sees the limit it would have had without belfry (a program that `select(2)`s or
//! closes every descriptor up to the limit must not meet a limit of a million). And a spawn
//! that would leave fewer than [`RESERVED`] descriptors free is refused before anything is
//! started ([`check_room_for_a_pane`]), with an error that names the limit, the cost of a pane,
//! how many fit, and the fix.

use std::sync::atomic::{AtomicU64, Ordering};

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors one pane keeps open in the daemon: three inbox directories, one subscription
/// and one kept connection to its pane host, one pidfd (measured with 10 panes).
pub const PER_PANE: u64 = 6;

/// Descriptors kept free for what is not a pane: client connections, attaches, a request's
/// second connection to a pane host, a DING adapter's pipes, the log, a spawn in progress.
pub const RESERVED: u64 = 64;

/// The soft limit the daemon was started with, before it raised it; `u64::MAX` when unknown
/// (nothing to restore). Read in a forked child before `exec`, so it is a plain atomic.
static ORIGINAL_SOFT: AtomicU64 = AtomicU64::new(u64::MAX);

/// The daemon's descriptor limits, as [`raise_soft_limit`] left them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The soft limit it was started with.
    pub original_soft: u64,
    /// The soft limit now.
    pub soft: u64,
    /// The hard limit (`None`: unlimited).
    pub hard: Option<u64>,
}

impl Limits {
    /// The limits of this process now, with no raise.
    pub fn current() -> Limits {
        let limit = getrlimit(Resource::Nofile);
        let soft = limit.current.unwrap_or(u64::MAX);
        Limits {
            original_soft: soft,
            soft,
            hard: limit.maximum,
        }
    }

    /// How many panes fit in all, at [`PER_PANE`] each with [`RESERVED`] kept free, when
    /// `open` descriptors are open while `running` panes run.
    pub fn panes_that_fit(&self, open: u64, running: u64) -> u64 {
        let free = self.soft.saturating_sub(open).saturating_sub(RESERVED);
        running + free / PER_PANE
    }

    fn hard_text(&self) -> String {
        self.hard
            .map_or_else(|| "unlimited".to_owned(), |hard| hard.to_string())
    }

    /// One line for the daemon's log at start: the limits and how many panes fit.
    pub fn describe(&self, open: u64) -> String {
        let raised = if self.soft > self.original_soft {
            format!("raised from {} to {}", self.original_soft, self.soft)
        } else {
            format!("{} (the hard limit; it cannot be raised)", self.soft)
        };
        format!(
            "descriptor limit (RLIMIT_NOFILE): soft {raised}, hard {}; {open} open at start, \
             about {PER_PANE} a pane and {RESERVED} kept free, so about {} panes fit",
            self.hard_text(),
            self.panes_that_fit(open, 0)
        )
    }
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (an unprivileged process may)
/// and remembers the one it had, for [`restore_for_child`]. An unlimited hard limit is met with
/// the kernel's own ceiling (`/proc/sys/fs/nr_open`), the most `setrlimit` accepts.
pub fn raise_soft_limit() -> Limits {
    let before = getrlimit(Resource::Nofile);
    let Some(original) = before.current else {
        // Already unlimited: nothing to raise, nothing to restore.
        return Limits::current();
    };
    ORIGINAL_SOFT.store(original, Ordering::Relaxed);
    let target = before.maximum.unwrap_or_else(kernel_ceiling);
    if target > original {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(target),
                maximum: before.maximum,
            },
        );
    }
    Limits {
        original_soft: original,
        ..Limits::current()
    }
}

/// The most descriptors one process may have, whatever its hard limit (`fs.nr_open`).
fn kernel_ceiling() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// Gives a child the soft limit the daemon was started with, in the child after `fork` and
/// before `exec`.
///
/// # Safety
///
/// Only for a `pre_exec` hook: it reads an atomic and makes one `prlimit64` system call, both
/// async-signal-safe, and allocates nothing.
pub unsafe fn restore_for_child() -> std::io::Result<()> {
    let original = ORIGINAL_SOFT.load(Ordering::Relaxed);
    if original == u64::MAX {
        return Ok(());
    }
    let now = getrlimit(Resource::Nofile);
    if now.current.is_some_and(|current| current > original) {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(original),
                maximum: now.maximum,
            },
        )?;
    }
    Ok(())
}

/// How many descriptors this process has open (`/proc/self/fd`, less the one reading it);
/// `None` where that cannot be read.
pub fn open_now() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some((entries.count() as u64).saturating_sub(1))
}

/// Refuses a spawn that would leave the daemon fewer than [`RESERVED`] descriptors free, while
/// `running` panes run, with an error that says why and how many panes fit. `Ok` where the
/// count cannot be read: the spawn then meets the limit itself, as before.
pub fn check_room_for_a_pane(session: &str, running: u64) -> Result<(), String> {
    let Some(open) = open_now() else {
        return Ok(());
    };
    let limits = Limits {
        original_soft: ORIGINAL_SOFT.load(Ordering::Relaxed),
        ..Limits::current()
    };
    if open + PER_PANE + RESERVED <= limits.soft {
        return Ok(());
    }
    let fit = limits.panes_that_fit(open, running);
    let raise = if limits.hard.is_some_and(|hard| hard <= limits.soft) {
        "raise the hard limit (`ulimit -Hn`, or LimitNOFILE= for a service) and start the \
         daemon again (belfry raises its soft limit to the hard one itself)"
    } else {
        "start the daemon again where its soft limit can be raised"
    };
    Err(format!(
        "cannot start pane {session:?}: too few descriptors left for it: the daemon has \
         {open} of its {} open (RLIMIT_NOFILE soft {}, hard {}), a pane takes about {PER_PANE} (its \
         inbox directories, two connections to its pane host, a watch on its exit) and \
         {RESERVED} are kept free for clients, so {fit} panes fit and {running} run; stop a \
         pane, or {raise}",
        limits.soft,
        limits.soft,
        limits.hard_text(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panes_that_fit_are_the_free_descriptors_over_the_cost_of_one() {
        let limits = Limits {
            original_soft: 1024,
            soft: 1024,
            hard: Some(1024),
        };
        // 22 open at start: (1024 - 22 - 64) / 6 = 156.
        assert_eq!(limits.panes_that_fit(22, 0), 156);
        assert_eq!(limits.panes_that_fit(22 + 6 * 156, 156), 156);
        assert_eq!(limits.panes_that_fit(2000, 5), 5);
        assert!(limits.describe(22).contains("cannot be raised"));
        let raised = Limits {
            soft: 4096,
            hard: Some(4096),
            ..limits
        };
        assert!(raised.describe(22).contains("raised from 1024 to 4096"));
    }
}
