//! What the client draws on the terminal's last rows: its messages ([`show_message`]) and
//! the status line (issue 46): one row under the pane, drawn by the client, saying which pane
//! this is, what its program is doing (as `belfry ls` says it: working, idle, needs you:
//! permission, done), its unread mail and the time. Off unless the config's `attach` section
//! says `status on`; `prefix S` turns it on and off. While it is on the pane is given the rows
//! above it, and the pane host paints the pane from its model in those rows (never its raw
//! output, which could scroll over the line), so the line is drawn in place and nothing is
//! pushed into the terminal's own history.

use std::cell::Cell;
use std::time::Duration;

use tokio::time::Instant;

use super::record::SharedOuter;
use super::terminal::Terminal;

/// The status line of one attach: whether it is on (shared with the pane switched to), what it
/// showed last (empty: to be drawn at its next turn) and when its words are asked for again.
pub(super) struct StatusLine<'a> {
    on: &'a Cell<bool>,
    /// Whether the pane host knows the status line; one that predates it draws none.
    known: bool,
    shown: String,
    pub(super) until: Option<Instant>,
}

impl<'a> StatusLine<'a> {
    /// A status line as `on` has it, over a pane host that knows it or not (`known`); when
    /// on, drawn at the loop's first turn.
    pub(super) fn new(on: &'a Cell<bool>, known: bool) -> StatusLine<'a> {
        StatusLine {
            on,
            known,
            shown: String::new(),
            until: (known && on.get()).then(Instant::now),
        }
    }

    /// Whether the line is drawn (it is on, and the pane host knows it).
    pub(super) fn is_on(&self) -> bool {
        self.known && self.on.get()
    }

    /// Whether the pane host knows the status line.
    pub(super) fn known(&self) -> bool {
        self.known
    }

    /// Drawn again at the loop's next turn (something drew over it).
    pub(super) fn due_now(&mut self) {
        if self.is_on() {
            self.shown.clear();
            self.until = Some(Instant::now());
        }
    }

    /// On when it was off, off when it was on; whether it is on now.
    pub(super) fn toggle(&mut self) -> bool {
        let on = !self.on.get();
        self.on.set(on);
        self.shown.clear();
        self.until = None;
        self.due_now();
        on
    }

    /// Its time came: the bytes that draw it on the last row of a terminal of `size`, when
    /// `words()` (asked only then; `None` when they could not be had) or the clock changed
    /// what it says; `None` while it is off, unchanged, or `covered` (a view or a message is on
    /// that row). The next time is set.
    pub(super) fn due(
        &mut self,
        name: &str,
        words: impl FnOnce() -> Option<String>,
        covered: bool,
        (rows, cols): (u16, u16),
    ) -> Option<Vec<u8>> {
        self.until = None;
        if !self.is_on() {
            return None;
        }
        self.until = Some(Instant::now() + STATUS_REFRESH);
        if covered {
            return None;
        }
        let asked = Instant::now();
        let words = words();
        if words.is_none() || asked.elapsed() > STATUS_SLOW {
            self.until = Some(Instant::now() + STATUS_BACKOFF);
        }
        let text = status_text(name, &words.unwrap_or_default(), &clock_now(), cols);
        if text == self.shown {
            return None;
        }
        let bytes = status_bytes(rows, cols, &text);
        self.shown = text;
        Some(bytes)
    }
}

/// How often the status line's words are asked for again (the program's state, the mail, the
/// clock); the line is drawn again only when they changed.
pub(super) const STATUS_REFRESH: Duration = Duration::from_secs(2);

/// Asking for the words blocks the client's loop (keys wait meanwhile): when an answer takes
/// longer than [`STATUS_SLOW`], or fails (a daemon that hangs, a pane host that does not
/// answer), they are asked for again only after [`STATUS_BACKOFF`], the line showing the name
/// and the clock meanwhile.
const STATUS_SLOW: Duration = Duration::from_millis(250);
const STATUS_BACKOFF: Duration = Duration::from_secs(30);

/// The status line's text for pane `name`, `words` about it and the clock `time`, fitted to
/// a row of `cols` columns less its last (see [`status_bytes`]): the name and words on the
/// left, the time on the right.
pub(super) fn status_text(name: &str, words: &str, time: &str, cols: u16) -> String {
    let cols = usize::from(cols.saturating_sub(1));
    let left = if words.is_empty() {
        format!("[{name}]")
    } else {
        format!("[{name}] {words}")
    };
    // Control characters in a pane's words never reach the terminal as controls.
    let left: String = left
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let left_len = left.chars().count();
    let time_len = time.chars().count();
    if left_len + 1 + time_len <= cols {
        let gap = cols - left_len - time_len;
        format!("{left}{}{time}", " ".repeat(gap))
    } else {
        let mut cut: String = left.chars().take(cols).collect();
        let pad = cols.saturating_sub(cut.chars().count());
        cut.push_str(&" ".repeat(pad));
        cut
    }
}

/// The bytes that draw `text` on the terminal's last row (`rows`), in reverse video, with the
/// cursor and pen saved and put back. The text is one column short of the row's end, so the
/// terminal never wraps or scrolls, whatever its autowrap.
pub(super) fn status_bytes(rows: u16, cols: u16, text: &str) -> Vec<u8> {
    let fitted: String = text
        .chars()
        .take(usize::from(cols.saturating_sub(1)))
        .collect();
    format!("\x1b7\x1b[{rows};1H\x1b[0m\x1b[7m{fitted}\x1b[0m\x1b[K\x1b8").into_bytes()
}

/// `message` in rows of at most `cols` characters, broken at a blank where one is in the
/// row (the blank dropped), else in the middle of the word.
pub(super) fn wrap(message: &str, cols: u16) -> Vec<String> {
    let cols = usize::from(cols.max(1));
    let mut rows = Vec::new();
    let mut rest: Vec<char> = message.chars().collect();
    while rest.len() > cols {
        let cut = rest[..=cols]
            .iter()
            .rposition(|&c| c == ' ')
            .filter(|&at| at > 0);
        let (row, skip) = match cut {
            Some(at) => (rest[..at].iter().collect(), at + 1),
            None => (rest[..cols].iter().collect(), cols),
        };
        rows.push(row);
        rest.drain(..skip);
    }
    rows.push(rest.into_iter().collect());
    rows
}

/// The clock the status line shows: the local time, hours and minutes.
pub(super) fn clock_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let time = crate::human::clock(now, now);
    time.chars().take(5).collect()
}

/// Writes `message` over the outer terminal's last lines, in reverse video, on as many
/// lines as its width needs (at most the terminal's rows), and puts the cursor and pen back
/// (DECSC/DECRC). The lines it covers are the pane's: the pane host's redraw (asked for on
/// the next key or after [`super::session::MESSAGE_TIME`]) paints them back, and the saved cursor with it;
/// until then they are erased on the way out (`Record::cover_rows`).
pub(super) fn show_message(
    message: &str,
    outer: &SharedOuter,
    terminal: &mut impl Terminal,
) -> std::io::Result<()> {
    let (rows, cols) = terminal.size().unwrap_or((24, 80));
    let mut lines = wrap(message, cols);
    lines.truncate(usize::from(rows));
    let count = u16::try_from(lines.len()).unwrap_or(rows).max(1);
    let mut out = String::from("\x1b7");
    for (at, text) in (rows - count + 1..).zip(&lines) {
        out.push_str(&format!("\x1b[{at};1H\x1b[0m\x1b[2K\x1b[7m{text}\x1b[0m"));
    }
    out.push_str("\x1b8");
    if let Ok(mut outer) = outer.lock() {
        outer.observe(out.as_bytes());
    }
    terminal.write(out.as_bytes())?;
    if let Ok(mut outer) = outer.lock() {
        outer.cover_rows = outer.cover_rows.max(count);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words that could not be had are asked for again only after the back-off, and the line
    /// still shows the pane's name; words that came are asked for again at the refresh.
    #[test]
    fn status_words_that_fail_are_asked_for_again_only_after_the_back_off() {
        let on = Cell::new(true);
        let mut line = StatusLine::new(&on, true);
        let bytes = line.due("agent", || None, false, (24, 80)).expect("drawn");
        assert!(String::from_utf8_lossy(&bytes).contains("[agent]"));
        let wait = line.until.expect("asked again") - Instant::now();
        assert!(wait > STATUS_BACKOFF - Duration::from_secs(1), "{wait:?}");
        line.due("agent", || Some("idle 3s".into()), false, (24, 80));
        let wait = line.until.expect("asked again") - Instant::now();
        assert!(wait <= STATUS_REFRESH, "{wait:?}");
        // Covered (a view, a message): nothing drawn, asked again later.
        assert!(line
            .due("agent", || Some("x".into()), true, (24, 80))
            .is_none());
    }

    #[test]
    fn the_status_line_fits_its_row_with_the_clock_on_the_right() {
        let line = status_text("agent", "working 3s, 2 unread", "14:02", 40);
        assert_eq!(line.chars().count(), 39);
        assert!(line.starts_with("[agent] working 3s, 2 unread"), "{line:?}");
        assert!(line.ends_with("14:02"), "{line:?}");
        // Too narrow for both: the left part, cut, and no clock.
        let narrow = status_text("agent", "needs you: permission", "14:02", 13);
        assert_eq!(narrow, "[agent] need");
        // A control character in the words is shown, never sent.
        assert!(!status_text("a", "x\x1b[2Jy", "", 20).contains('\x1b'));
        // Drawn on the last row, the cursor put back, never in the last column.
        let bytes = String::from_utf8(status_bytes(24, 12, &narrow)).unwrap();
        // Messages wrap at blanks, and in a word only when it is wider than the row.
        assert_eq!(wrap("one two three", 8), ["one two", "three"]);
        assert_eq!(wrap("abcdefghij k", 4), ["abcd", "efgh", "ij k"]);
        assert_eq!(wrap("short", 80), ["short"]);
        assert_eq!(
            bytes,
            "\x1b7\x1b[24;1H\x1b[0m\x1b[7m[agent] nee\x1b[0m\x1b[K\x1b8"
        );
    }
}
