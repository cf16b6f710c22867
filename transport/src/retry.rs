//! The one way belfry waits for something to become true: a pause schedule ([`Backoff`]) and
//! bounded polls ([`poll_until`], [`poll_until_blocking`]).
//!
//! Nothing waits forever (spec §12): a poll has a deadline and says when it passed (`None`), and
//! a loop that retries for as long as something lives (a pane host that may resume) still
//! sleeps through a [`Backoff`], so every retry in the tree has its pauses written in one place.

use std::time::{Duration, Instant};

/// Pauses between attempts: the first, doubled after each attempt up to a ceiling.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `first` and doubles up to `max`.
    pub fn doubling(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            next: first,
            max: max.max(first),
        }
    }

    /// The same pause every time.
    pub fn constant(pause: Duration) -> Backoff {
        Backoff::doubling(pause, pause)
    }

    /// The pause before the next attempt.
    pub fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        pause
    }

    /// Back to the first pause (after an attempt that worked).
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// Sleeps the next pause.
    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.pause()).await;
    }
}

/// Calls `check` until it returns `Some` or `within` has passed (`None`), pausing as `backoff`
/// says between calls. `check` runs at least once, and once more at the deadline.
pub async fn poll_until<T>(
    within: Duration,
    mut backoff: Backoff,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now().checked_add(within);
    loop {
        if let Some(done) = check() {
            return Some(done);
        }
        let now = Instant::now();
        let Some(left) = deadline.map(|d| d.saturating_duration_since(now)) else {
            backoff.sleep().await;
            continue;
        };
        if left.is_zero() {
            return None;
        }
        tokio::time::sleep(backoff.pause().min(left)).await;
    }
}

/// [`poll_until`] for threads that do not run an async runtime.
pub fn poll_until_blocking<T>(
    within: Duration,
    mut backoff: Backoff,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now().checked_add(within);
    loop {
        if let Some(done) = check() {
            return Some(done);
        }
        let pause = backoff.pause();
        match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
            Some(left) if left.is_zero() => return None,
            Some(left) => std::thread::sleep(pause.min(left)),
            None => std::thread::sleep(pause),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_doubles_to_its_ceiling_and_resets() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::doubling(ms(10), ms(35));
        let pauses: Vec<_> = (0..4).map(|_| backoff.pause()).collect();
        assert_eq!(pauses, [ms(10), ms(20), ms(35), ms(35)]);
        backoff.reset();
        assert_eq!(backoff.pause(), ms(10));
        let mut constant = Backoff::constant(ms(5));
        assert_eq!((constant.pause(), constant.pause()), (ms(5), ms(5)));
    }

    #[test]
    fn a_poll_returns_what_it_found_or_none_at_its_deadline() {
        let ms = Duration::from_millis;
        let mut calls = 0;
        let found = poll_until_blocking(ms(1000), Backoff::constant(ms(1)), || {
            calls += 1;
            (calls == 3).then_some(calls)
        });
        assert_eq!(found, Some(3));
        let started = Instant::now();
        let never = poll_until_blocking(ms(50), Backoff::constant(ms(5)), || None::<()>);
        assert_eq!(never, None);
        let took = started.elapsed();
        assert!(took >= ms(50) && took < ms(1000), "{took:?}");
    }

    #[tokio::test]
    async fn an_async_poll_ends_at_its_deadline() {
        let ms = Duration::from_millis;
        let started = Instant::now();
        assert_eq!(
            poll_until(ms(40), Backoff::constant(ms(5)), || None::<()>).await,
            None
        );
        assert!(started.elapsed() >= ms(40));
        assert_eq!(
            poll_until(ms(40), Backoff::constant(ms(5)), || Some(1)).await,
            Some(1)
        );
    }
}
