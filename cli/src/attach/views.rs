//! The client's own views, drawn over the pane while it keeps running: the pane chooser
//! (`prefix s`) and the history view (`prefix [`). docs/attach.md lists their keys.
//!
//! A view owns the outer terminal while it is open: the pane's output is not drawn (the pane
//! host keeps it, in its model), and leaving a view asks the pane host for a full redraw, which
//! puts the pane's screen and modes back exactly. A view is plain text: it never depends on
//! what the pane left the terminal in, and it reads keys in every encoding ([`view_keys`]).
//!
//! [`view_keys`]: belfry_cli::keys::view_keys

use belfry_cli::keys::{edit_name_filter, FilterEdit, ViewKey};

/// One pane the chooser offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaneEntry {
    /// The pane's name.
    pub name: String,
    /// What the chooser shows after the name: state, revision, unread mail.
    pub detail: String,
    /// The pane's revision (it moves with every output and input), when its host answered.
    pub revision: Option<u64>,
    /// The pane printed (or was typed into) since this client last looked at it: marked `#`.
    pub active: bool,
}

/// Marks the entries whose pane's revision moved since this client last looked at it, and
/// remembers what it sees now: the pane attached to (`current`) counts as looked at, and a pane
/// seen for the first time is not marked (there is nothing to compare with).
pub fn mark_activity(
    entries: &mut [PaneEntry],
    current: &str,
    seen: &mut std::collections::HashMap<String, u64>,
) {
    for entry in entries {
        let Some(revision) = entry.revision else {
            continue;
        };
        entry.active = match seen.get(&entry.name) {
            Some(&before) if entry.name != current => revision > before,
            _ => {
                seen.insert(entry.name.clone(), revision);
                false
            }
        };
    }
}

/// What a view asks of the client after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Stay in the view; draw it again.
    Stay,
    /// Close the view and show the pane.
    Leave,
    /// Close the view and attach to this pane instead.
    Switch(String),
    /// Close the view; this text was selected and copied (copy mode).
    Copy(String),
}

/// Escape, alone: every view closes on it.
const ESCAPE: u8 = 0x1b;

/// The pane chooser: every pane, one per line, the one attached to marked; `/` narrows the
/// list to the names holding what is typed.
#[derive(Debug)]
pub struct Chooser {
    entries: Vec<PaneEntry>,
    /// The selected line, among those the filter shows.
    selected: usize,
    current: String,
    /// The names shown hold this (in any case); empty, every pane is shown.
    filter: String,
    /// Whether keys go to the filter (after `/`, until Enter or Escape).
    typing: bool,
}

impl Chooser {
    /// A chooser over `entries` with `current` (the pane attached to) selected.
    pub fn new(entries: Vec<PaneEntry>, current: &str) -> Chooser {
        let selected = entries.iter().position(|e| e.name == current).unwrap_or(0);
        Chooser {
            entries,
            selected,
            current: current.to_string(),
            filter: String::new(),
            typing: false,
        }
    }

    /// The entries the filter lets through, as indexes into all of them.
    fn shown(&self) -> Vec<usize> {
        let filter = self.filter.to_lowercase();
        (0..self.entries.len())
            .filter(|&at| self.entries[at].name.to_lowercase().contains(&filter))
            .collect()
    }

    /// Moves the selection, switches on Enter, leaves on `q` or Escape; `/` starts a filter,
    /// which Enter keeps and Escape drops. A paste is text for the filter (and starts one),
    /// never a key that moves, chooses or leaves.
    pub fn key(&mut self, key: ViewKey) -> Outcome {
        // A paste is text for the filter, and starts one.
        if self.typing || matches!(key, ViewKey::Pasted(_)) {
            self.typing = true;
            match edit_name_filter(&mut self.filter, key) {
                FilterEdit::Changed => self.selected = 0,
                FilterEdit::Kept => self.typing = false,
                FilterEdit::Dropped => {
                    self.typing = false;
                    self.selected = 0;
                }
                FilterEdit::Ignored => {}
            }
            return Outcome::Stay;
        }
        let shown = self.shown();
        let last = shown.len().saturating_sub(1);
        match key {
            ViewKey::Up | ViewKey::Byte(b'k') => self.selected = self.selected.saturating_sub(1),
            ViewKey::Down | ViewKey::Byte(b'j') => self.selected = (self.selected + 1).min(last),
            ViewKey::Home | ViewKey::Byte(b'g') => self.selected = 0,
            ViewKey::End | ViewKey::Byte(b'G') => self.selected = last,
            ViewKey::Byte(b'/') => self.typing = true,
            ViewKey::Byte(b'\r' | b'\n') => {
                let chosen = shown.get(self.selected).map(|&at| &self.entries[at]);
                return match chosen {
                    Some(entry) if entry.name != self.current => {
                        Outcome::Switch(entry.name.clone())
                    }
                    _ => Outcome::Leave,
                };
            }
            ViewKey::Byte(b'q' | ESCAPE) => return Outcome::Leave,
            _ => {}
        }
        Outcome::Stay
    }

    /// The whole view for a terminal of `rows` x `cols`.
    pub fn render(&self, rows: u16, cols: u16) -> Vec<u8> {
        let rows = usize::from(rows.max(2));
        let cols = usize::from(cols.max(1));
        let shown = self.shown();
        let title = if self.typing || !self.filter.is_empty() {
            format!(
                "filter: {}{}  ({} of {} panes; Enter keeps it, Escape drops it)",
                self.filter,
                if self.typing { "_" } else { "" },
                shown.len(),
                self.entries.len()
            )
        } else {
            "choose a pane: up/down or j/k, / filters, Enter attaches, q leaves".to_string()
        };
        let mut lines = vec![(title, Style::Title)];
        let width = self
            .entries
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(0);
        if shown.is_empty() {
            lines.push(("  no pane's name holds that".to_string(), Style::Plain));
        }
        // The list scrolls to keep the selection in view below the title.
        let room = rows - 1;
        let first = self.selected.saturating_sub(room.saturating_sub(1));
        for (index, &at) in shown.iter().enumerate().skip(first).take(room) {
            let entry = &self.entries[at];
            let mark = match (entry.name == self.current, entry.active) {
                (true, _) => '*',
                (false, true) => '#',
                (false, false) => ' ',
            };
            let text = format!("{mark} {:width$}  {}", entry.name, entry.detail);
            let style = if index == self.selected {
                Style::Selected
            } else {
                Style::Plain
            };
            lines.push((text, style));
        }
        paint(&lines, rows, cols)
    }
}

/// How one line of a view is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Plain,
    Title,
    Selected,
}

/// Draws `lines` from the top of a cleared screen, each cut to `cols` characters, the cursor
/// hidden (the pane's redraw shows it again as the pane has it).
fn paint(lines: &[(String, Style)], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = b"\x1b[?25l\x1b[0m\x1b[H\x1b[2J".to_vec();
    for (row, (text, style)) in lines.iter().take(rows).enumerate() {
        out.extend_from_slice(format!("\x1b[{};1H", row + 1).as_bytes());
        let text: String = text.chars().take(cols).collect();
        let text = match style {
            Style::Plain => text,
            Style::Title => format!("\x1b[1m{text}\x1b[0m"),
            Style::Selected => format!("\x1b[7m{text:cols$}\x1b[0m"),
        };
        out.extend_from_slice(text.as_bytes());
    }
    out
}

/// The history view: the pane's scrollback and screen as one text, scrolled and searched.
#[derive(Debug)]
pub struct History {
    /// The scrollback, oldest first, then the screen's lines.
    lines: Vec<String>,
    /// The first line shown.
    top: usize,
    /// Lines shown at once (the terminal's rows less the status line).
    height: usize,
    /// The search being typed, and whether it goes toward older lines (`?`).
    prompt: Option<(String, bool)>,
    /// The bytes of a character of the search not all typed yet (UTF-8 comes a byte a key).
    pending: Vec<u8>,
    /// The last search, for `n` and `N`: its text and its direction.
    last_search: Option<(String, bool)>,
    /// A line for the status bar instead of the position (a search that found nothing).
    note: Option<String>,
    /// Copy mode's cursor: its row in the view (from the top line shown) and its column, in
    /// characters. Scrolling keeps its row; it moves within the view only where the text
    /// ends, so the keys that scroll the view move it line by line through the text.
    cursor: (usize, usize),
    /// Where the selection started (a line of `lines` and a column), while one is made.
    mark: Option<(usize, usize)>,
}

impl History {
    /// A view of `lines` (history, then the screen) for a terminal of `rows` rows, showing
    /// the end, where the pane is now.
    pub fn new(lines: Vec<String>, rows: u16) -> History {
        let height = usize::from(rows.max(2)) - 1;
        let top = lines.len().saturating_sub(height);
        // The cursor starts on the last line shown: the pane's last line.
        let cursor = (lines.len().min(height).saturating_sub(1), 0);
        History {
            lines,
            top,
            height,
            prompt: None,
            pending: Vec::new(),
            last_search: None,
            note: None,
            cursor,
            mark: None,
        }
    }

    /// The last line `top` may be.
    fn max_top(&self) -> usize {
        self.lines.len().saturating_sub(self.height)
    }

    /// Follows a new terminal height, keeping the first line shown.
    pub fn resize(&mut self, rows: u16) {
        self.height = usize::from(rows.max(2)) - 1;
        self.top = self.top.min(self.max_top());
        self.cursor.0 = self.cursor.0.min(self.height.saturating_sub(1));
    }

    /// The line of `lines` the cursor is on.
    fn cursor_line(&self) -> usize {
        (self.top + self.cursor.0).min(self.lines.len().saturating_sub(1))
    }

    /// Moves the cursor `by` lines (up when negative): the view scrolls while it can, and the
    /// cursor moves within it where the text ends.
    fn move_lines(&mut self, by: isize) {
        let want = self.cursor_line().saturating_add_signed(by);
        let want = want.min(self.lines.len().saturating_sub(1));
        // The view scrolls as far as the key asks, while the text allows; the cursor keeps
        // its row unless the scroll stopped at an end of the text.
        let top = self.top.saturating_add_signed(by).min(self.max_top());
        self.top = if want < top {
            want
        } else if want >= top + self.height {
            (want + 1 - self.height).min(self.max_top())
        } else {
            top
        };
        self.cursor.0 = want - self.top;
    }

    /// The selected text: from the mark to the cursor (either may come first), both ends
    /// included, each line's trailing blanks cut, lines joined with `\n`.
    fn selection(&self) -> Option<String> {
        let mark = self.mark?;
        let here = (self.cursor_line(), self.cursor.1);
        let (from, to) = if mark <= here {
            (mark, here)
        } else {
            (here, mark)
        };
        let mut text = Vec::new();
        for line in from.0..=to.0 {
            let chars: Vec<char> = self.lines.get(line)?.chars().collect();
            let start = if line == from.0 { from.1 } else { 0 };
            let end = if line == to.0 { to.1 + 1 } else { chars.len() };
            let part: String = chars
                .get(start.min(chars.len())..end.min(chars.len()))
                .unwrap_or_default()
                .iter()
                .collect();
            text.push(part.trim_end().to_string());
        }
        Some(text.join("\n"))
    }

    /// The columns of line `line` that are selected, as a range of characters.
    fn selected_columns(&self, line: usize) -> Option<std::ops::Range<usize>> {
        let mark = self.mark?;
        let here = (self.cursor_line(), self.cursor.1);
        let (from, to) = if mark <= here {
            (mark, here)
        } else {
            (here, mark)
        };
        if line < from.0 || line > to.0 {
            return None;
        }
        let start = if line == from.0 { from.1 } else { 0 };
        let end = if line == to.0 { to.1 + 1 } else { usize::MAX };
        Some(start..end)
    }

    /// Copy mode's own keys: the cursor's column, starting the selection, copying it.
    /// `None` for a key that is not one of them.
    fn copy_key(&mut self, key: ViewKey) -> Option<Outcome> {
        let width = |view: &History| {
            view.lines
                .get(view.cursor_line())
                .map_or(0, |line| line.chars().count())
        };
        match key {
            ViewKey::Left | ViewKey::Byte(b'h') => self.cursor.1 = self.cursor.1.saturating_sub(1),
            ViewKey::Right | ViewKey::Byte(b'l') => self.cursor.1 += 1,
            ViewKey::Byte(b'0') => self.cursor.1 = 0,
            ViewKey::Byte(b'$') => self.cursor.1 = width(self).saturating_sub(1),
            // v or Space starts the selection where the cursor is (again: starts it over).
            ViewKey::Byte(b'v' | b' ') => self.mark = Some((self.cursor_line(), self.cursor.1)),
            ViewKey::Byte(b'y' | b'\r') => {
                return Some(match self.selection() {
                    Some(text) => Outcome::Copy(text),
                    None => {
                        self.note = Some("nothing selected: v or space starts a selection".into());
                        Outcome::Stay
                    }
                })
            }
            // Escape drops a selection first; the view stays.
            ViewKey::Byte(ESCAPE) if self.mark.is_some() => self.mark = None,
            _ => return None,
        }
        Some(Outcome::Stay)
    }

    /// The first line shown.
    #[cfg(test)]
    fn top(&self) -> usize {
        self.top
    }

    /// Scrolls, searches, or leaves on `q` or Escape. A paste is text for the search being
    /// typed, and nothing without one: never a key that scrolls or leaves.
    pub fn key(&mut self, key: ViewKey) -> Outcome {
        if self.prompt.is_some() {
            self.prompt_key(key);
            return Outcome::Stay;
        }
        if let ViewKey::Pasted(_) = key {
            return Outcome::Stay;
        }
        self.note = None;
        if let Some(outcome) = self.copy_key(key) {
            return outcome;
        }
        let page = isize::try_from(self.height.max(1)).unwrap_or(isize::MAX);
        match key {
            ViewKey::Up | ViewKey::Byte(b'k') => self.move_lines(-1),
            ViewKey::Down | ViewKey::Byte(b'j') => self.move_lines(1),
            // PgUp, Ctrl-B, and b as in less.
            ViewKey::PageUp | ViewKey::Byte(0x02 | b'b') => self.move_lines(-page),
            // PgDn and Ctrl-F as in less (space starts a selection, as in tmux's copy mode).
            ViewKey::PageDown | ViewKey::Byte(0x06) => self.move_lines(page),
            ViewKey::Home | ViewKey::Byte(b'g') => {
                self.top = 0;
                self.cursor.0 = 0;
            }
            ViewKey::End | ViewKey::Byte(b'G') => {
                self.top = self.max_top();
                self.cursor.0 = self.lines.len().min(self.height).saturating_sub(1);
            }
            ViewKey::Byte(b'/') => self.prompt = Some((String::new(), false)),
            ViewKey::Byte(b'?') => self.prompt = Some((String::new(), true)),
            ViewKey::Byte(b'n') => self.repeat_search(false),
            ViewKey::Byte(b'N') => self.repeat_search(true),
            ViewKey::Byte(b'q' | ESCAPE) => return Outcome::Leave,
            _ => {}
        }
        Outcome::Stay
    }

    /// A key while a search is typed: text (any, in UTF-8, typed or pasted), Backspace, Enter
    /// to search, Escape to give up. A line break or other control in a paste is dropped.
    fn prompt_key(&mut self, key: ViewKey) {
        let Some((text, backward)) = &mut self.prompt else {
            return;
        };
        if let ViewKey::Byte(byte @ 0x80..) | ViewKey::Pasted(byte @ 0x80..) = key {
            self.pending.push(byte);
            match std::str::from_utf8(&self.pending) {
                Ok(character) => {
                    text.push_str(character);
                    self.pending.clear();
                }
                // Not UTF-8 at all: dropped, as any other key that is not text.
                Err(err) if err.error_len().is_some() => self.pending.clear(),
                // The rest of the character is still to come.
                Err(_) => {}
            }
            return;
        }
        self.pending.clear();
        match key {
            ViewKey::Byte(b'\r' | b'\n') => {
                let (text, backward) = (text.clone(), *backward);
                self.prompt = None;
                if !text.is_empty() {
                    self.last_search = Some((text, backward));
                }
                self.repeat_search(false);
            }
            ViewKey::Byte(ESCAPE) => self.prompt = None,
            ViewKey::Byte(0x7f | 0x08) => {
                text.pop();
            }
            ViewKey::Byte(byte) | ViewKey::Pasted(byte) if (0x20..0x7f).contains(&byte) => {
                text.push(char::from(byte))
            }
            _ => {}
        }
    }

    /// Looks for the last search again, the same way (`n`) or the other way (`N`), from the
    /// line after (or before) the first one shown, and brings the line found to the top.
    fn repeat_search(&mut self, reverse: bool) {
        let Some((text, backward)) = self.last_search.clone() else {
            self.note = Some("no search yet: / searches down, ? up".to_string());
            return;
        };
        let backward = backward != reverse;
        let found = if backward {
            (0..self.top)
                .rev()
                .find(|&i| contains(&self.lines[i], &text))
        } else {
            (self.top + 1..self.lines.len()).find(|&i| contains(&self.lines[i], &text))
        };
        match found {
            // The line found goes to the top, or as near it as the end of the text allows,
            // with the cursor on the match.
            Some(line) => {
                self.top = line.min(self.max_top());
                let column = self.lines[line].find(&text).map_or(0, |at| {
                    self.lines[line]
                        .get(..at)
                        .map_or(0, |before| before.chars().count())
                });
                self.cursor = (line - self.top, column);
            }
            None => self.note = Some(format!("not found: {text}")),
        }
    }

    /// The whole view for a terminal of `cols` columns; matches of the last search are shown
    /// in reverse video.
    pub fn render(&self, cols: u16) -> Vec<u8> {
        let cols = usize::from(cols.max(1));
        let mut out = b"\x1b[?25l\x1b[0m\x1b[H\x1b[2J".to_vec();
        let search = self.last_search.as_ref().map(|(text, _)| text.as_str());
        for (row, line) in self
            .lines
            .iter()
            .skip(self.top)
            .take(self.height)
            .enumerate()
        {
            out.extend_from_slice(format!("\x1b[{};1H", row + 1).as_bytes());
            let line: String = line.chars().take(cols).collect();
            match self.selected_columns(self.top + row) {
                Some(range) => out.extend_from_slice(selected(&line, range).as_bytes()),
                None => out.extend_from_slice(highlight(&line, search).as_bytes()),
            }
        }
        let status = match (&self.prompt, &self.note) {
            (Some((text, backward)), _) => format!("{}{text}", if *backward { '?' } else { '/' }),
            (None, Some(note)) => note.clone(),
            (None, None) => {
                let last = (self.top + self.height).min(self.lines.len());
                format!(
                    "[history] lines {}-{last} of {}   arrows PgUp/PgDn g/G, / ? n/N search, \
                     v select, y copy, q leaves",
                    (self.top + 1).min(last),
                    self.lines.len()
                )
            }
        };
        let status: String = status.chars().take(cols).collect();
        out.extend_from_slice(
            format!("\x1b[{};1H\x1b[7m{status:cols$}\x1b[0m", self.height + 1).as_bytes(),
        );
        if self.prompt.is_none() {
            // Copy mode's cursor.
            let column = self.cursor.1.min(cols - 1) + 1;
            out.extend_from_slice(
                format!("\x1b[{};{column}H\x1b[?25h", self.cursor.0 + 1).as_bytes(),
            );
        } else {
            // Typing a search shows where the text goes.
            out.extend_from_slice(
                format!(
                    "\x1b[{};{}H\x1b[?25h",
                    self.height + 1,
                    (status.chars().count() + 1).min(cols)
                )
                .as_bytes(),
            );
        }
        out
    }
}

/// `line` with the characters in `range` in reverse video (copy mode's selection).
fn selected(line: &str, range: std::ops::Range<usize>) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let chars: Vec<char> = line.chars().collect();
    let start = range.start.min(chars.len());
    let end = range.end.min(chars.len());
    out.extend(&chars[..start]);
    out.push_str("\x1b[7m");
    out.extend(&chars[start..end]);
    // A selection past the line's end shows as one reversed blank.
    if range.end > chars.len() && start == end {
        out.push(' ');
    }
    out.push_str("\x1b[27m");
    out.extend(&chars[end..]);
    out
}

/// Whether `line` contains `text`, ignoring case unless `text` has a capital (smart case, as
/// in vim and less).
fn contains(line: &str, text: &str) -> bool {
    if text.chars().any(char::is_uppercase) {
        line.contains(text)
    } else {
        line.to_lowercase().contains(&text.to_lowercase())
    }
}

/// `line` with each match of `search` in reverse video. Matching is exact here (the search
/// itself may ignore case; a case-different match is then shown plain).
fn highlight(line: &str, search: Option<&str>) -> String {
    match search {
        Some(text) if !text.is_empty() && line.contains(text) => {
            line.replace(text, &format!("\x1b[7m{text}\x1b[27m"))
        }
        _ => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ViewKey::Byte;

    /// A view's keys, one after another until one closes it.
    trait Keys {
        fn one(&mut self, key: ViewKey) -> Outcome;

        fn keys(&mut self, keys: &[ViewKey]) -> Outcome {
            for &key in keys {
                match self.one(key) {
                    Outcome::Stay => {}
                    outcome => return outcome,
                }
            }
            Outcome::Stay
        }
    }

    impl Keys for Chooser {
        fn one(&mut self, key: ViewKey) -> Outcome {
            self.key(key)
        }
    }

    impl Keys for History {
        fn one(&mut self, key: ViewKey) -> Outcome {
            self.key(key)
        }
    }

    fn entries(names: &[&str]) -> Vec<PaneEntry> {
        names
            .iter()
            .map(|name| PaneEntry {
                name: name.to_string(),
                detail: format!("running, revision 1 ({name})"),
                revision: Some(1),
                active: false,
            })
            .collect()
    }

    fn typed(text: &str) -> Vec<ViewKey> {
        text.bytes().map(Byte).collect()
    }

    /// A pane whose revision moved since the client last looked is marked `#`, once: the
    /// chooser's look counts. The pane attached to and a pane seen first are never marked.
    #[test]
    fn the_chooser_marks_the_panes_that_moved_since_the_client_last_looked() {
        let mut seen = std::collections::HashMap::new();
        let mut first = entries(&["a", "b", "c"]);
        mark_activity(&mut first, "a", &mut seen);
        assert!(first.iter().all(|entry| !entry.active));
        let mut later = entries(&["a", "b", "c"]);
        later[0].revision = Some(9);
        later[1].revision = Some(5);
        mark_activity(&mut later, "a", &mut seen);
        let active: Vec<bool> = later.iter().map(|entry| entry.active).collect();
        assert_eq!(active, [false, true, false]);
        let screen = String::from_utf8(Chooser::new(later, "a").render(10, 60)).unwrap();
        assert!(
            screen.contains("# b ") && screen.contains("  c "),
            "{screen:?}"
        );
        // Looked at from b: b's revision is the one seen now; a's move since is marked.
        let mut from_b = entries(&["a", "b", "c"]);
        from_b[0].revision = Some(12);
        from_b[1].revision = Some(6);
        mark_activity(&mut from_b, "b", &mut seen);
        let active: Vec<bool> = from_b.iter().map(|entry| entry.active).collect();
        assert_eq!(active, [true, false, false]);
    }

    #[test]
    fn the_chooser_starts_on_the_current_pane_and_switches_to_the_chosen_one() {
        let mut chooser = Chooser::new(entries(&["a", "b", "c"]), "b");
        let screen = String::from_utf8(chooser.render(10, 60)).unwrap();
        assert!(screen.contains("\x1b[7m* b"), "{screen:?}");
        assert_eq!(chooser.keys(&[ViewKey::Down]), Outcome::Stay);
        assert_eq!(chooser.keys(&[ViewKey::Down]), Outcome::Stay);
        assert_eq!(chooser.keys(&typed("\r")), Outcome::Switch("c".into()));
        // Enter on the pane already attached to only closes the chooser.
        let mut chooser = Chooser::new(entries(&["a", "b"]), "a");
        assert_eq!(chooser.keys(&typed("jk\r")), Outcome::Leave);
        assert_eq!(chooser.keys(&typed("q")), Outcome::Leave);
        assert_eq!(chooser.keys(&[Byte(ESCAPE)]), Outcome::Leave);
    }

    /// `/` narrows the list to the names holding what is typed (in any case); Enter keeps
    /// the filter and Enter again attaches to the selected pane; Escape drops the filter.
    #[test]
    fn the_chooser_filters_by_name() {
        let mut chooser = Chooser::new(
            entries(&["api-worker", "docs", "Web-Worker", "shell"]),
            "shell",
        );
        assert_eq!(chooser.keys(&typed("/work")), Outcome::Stay);
        let screen = String::from_utf8(chooser.render(10, 80)).unwrap();
        assert!(
            screen.contains("filter: work_  (2 of 4 panes"),
            "{screen:?}"
        );
        assert!(screen.contains("\x1b[7m  api-worker"), "{screen:?}");
        assert!(
            screen.contains("Web-Worker") && !screen.contains("docs"),
            "{screen:?}"
        );
        // Backspace edits the filter; Enter keeps it, and Enter again attaches.
        assert_eq!(chooser.keys(&typed("\x7f\x7f\x7f\x7fweb\r")), Outcome::Stay);
        assert_eq!(
            chooser.keys(&typed("\r")),
            Outcome::Switch("Web-Worker".into())
        );
        // Nothing matches: the list says so and Enter only leaves.
        let mut chooser = Chooser::new(entries(&["a", "b"]), "a");
        chooser.keys(&typed("/zz\r"));
        let screen = String::from_utf8(chooser.render(10, 80)).unwrap();
        assert!(screen.contains("no pane's name holds that"), "{screen:?}");
        assert_eq!(chooser.keys(&typed("\r")), Outcome::Leave);
        // Escape while typing drops the filter; every pane is back.
        let mut chooser = Chooser::new(entries(&["a", "b", "c"]), "a");
        chooser.keys(&typed("/c"));
        chooser.keys(&[Byte(ESCAPE)]);
        assert_eq!(chooser.keys(&typed("jj\r")), Outcome::Switch("c".into()));
    }

    #[test]
    fn a_long_chooser_scrolls_to_keep_the_selection_in_view() {
        let names: Vec<String> = (0..30).map(|i| format!("p{i:02}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut chooser = Chooser::new(entries(&names), "p00");
        chooser.keys(&[ViewKey::End]);
        let screen = String::from_utf8(chooser.render(5, 40)).unwrap();
        assert!(screen.contains("p29"), "{screen:?}");
        assert!(!screen.contains("p00"), "{screen:?}");
    }

    fn history(lines: usize, rows: u16) -> History {
        History::new((0..lines).map(|i| format!("line {i}")).collect(), rows)
    }

    #[test]
    fn history_opens_at_the_end_and_scrolls_within_the_text() {
        let mut view = history(100, 11);
        assert_eq!(view.top(), 90);
        view.keys(&[ViewKey::PageUp]);
        assert_eq!(view.top(), 80);
        view.keys(&typed("kk"));
        assert_eq!(view.top(), 78);
        view.keys(&typed("g"));
        assert_eq!(view.top(), 0);
        view.keys(&[ViewKey::Up, ViewKey::PageDown, ViewKey::PageDown]);
        assert_eq!(view.top(), 20);
        view.keys(&typed("G"));
        assert_eq!(view.top(), 90);
        view.keys(&[ViewKey::Down, ViewKey::PageDown]);
        assert_eq!(view.top(), 90, "scrolled past the end");
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(
            screen.contains("line 99") && !screen.contains("line 89"),
            "{screen:?}"
        );
        assert!(screen.contains("lines 91-100 of 100"), "{screen:?}");
        assert_eq!(view.keys(&typed("q")), Outcome::Leave);
    }

    /// Copy mode: the cursor starts on the last line, moves by line and column, `v` (or
    /// space) starts a selection, `y` (or Enter) copies it from the mark to the cursor
    /// whichever comes first, and a search puts the cursor on its match.
    #[test]
    fn copy_mode_selects_from_the_mark_to_the_cursor_and_copies_it() {
        let mut lines: Vec<String> = (0..30).map(|i| format!("line {i}   ")).collect();
        lines[20] = "the answer is 42, said the machine".into();
        let mut view = History::new(lines, 11);
        assert_eq!(view.cursor_line(), 29);
        // Nothing selected: y says so and stays.
        assert_eq!(view.keys(&typed("y")), Outcome::Stay);
        assert!(view.note.is_some());
        // Two lines up, two columns right, select, one line down to its end: copied with the
        // trailing blanks cut.
        view.keys(&[ViewKey::Up, ViewKey::Up, ViewKey::Right, ViewKey::Right]);
        view.keys(&typed("v"));
        assert_eq!(
            view.keys(&typed("j$y")),
            Outcome::Copy("ne 27\nline 28".into())
        );
        // Upwards: the cursor before the mark.
        let mut view = history(30, 11);
        view.keys(&typed(" kk0"));
        assert_eq!(
            view.keys(&typed("\r")),
            Outcome::Copy("line 27\nline 28\nl".into())
        );
        // A search puts the cursor on the match; the selection is drawn reversed.
        let mut lines: Vec<String> = (0..30).map(|i| format!("line {i}")).collect();
        lines[5] = "the answer is 42, said the machine".into();
        let mut view = History::new(lines, 11);
        view.keys(&typed("?42\r"));
        assert_eq!((view.cursor_line(), view.cursor.1), (5, 14));
        view.keys(&typed("vll"));
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(screen.contains("is \x1b[7m42,\x1b[27m said"), "{screen:?}");
        // Escape drops the selection and stays; the next Escape leaves.
        assert_eq!(view.keys(&[Byte(ESCAPE)]), Outcome::Stay);
        assert!(view.mark.is_none());
        assert_eq!(view.keys(&[Byte(ESCAPE)]), Outcome::Leave);
    }

    /// A search is any text, not only ASCII: its UTF-8 comes a byte a key. It used to keep
    /// only printable ASCII, so `?größe` searched for `gre`.
    #[test]
    fn history_searches_for_text_in_any_script() {
        let mut lines: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
        lines[12] = "Die größe: 文字 ✓".into();
        lines[40] = "die grosse".into();
        let mut view = History::new(lines, 6);
        view.keys(&typed("?größe\r"));
        assert_eq!(view.top(), 12, "{:?}", view.last_search);
        view.keys(&typed("G/文字 ✓\r"));
        assert_eq!(view.top(), 45, "searching down from the end finds nothing");
        view.keys(&typed("?文字 ✓\r"));
        assert_eq!(view.top(), 12);
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(screen.contains("\x1b[7m文字 ✓\x1b[27m"), "{screen:?}");
        // A byte that is not UTF-8 is dropped; the search goes on.
        view.keys(&typed("/x"));
        view.keys(&[Byte(0xff)]);
        view.keys(&typed("y\r"));
        assert_eq!(view.last_search, Some(("xy".to_string(), false)));
    }

    #[test]
    fn history_searches_up_and_down_and_says_when_nothing_matches() {
        let mut lines: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
        lines[10] = "an ERROR here".into();
        lines[30] = "another error".into();
        let mut view = History::new(lines, 6);
        assert_eq!(view.top(), 45);
        view.keys(&typed("?error\r"));
        assert_eq!(view.top(), 30);
        view.keys(&typed("n"));
        assert_eq!(view.top(), 10, "smart case: lower-case text ignores case");
        view.keys(&typed("N"));
        assert_eq!(view.top(), 30);
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(screen.contains("\x1b[7merror\x1b[27m"), "{screen:?}");
        view.keys(&typed("/ERROR\r"));
        assert_eq!(
            view.top(),
            30,
            "a capital makes the search exact: nothing below"
        );
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(screen.contains("not found: ERROR"), "{screen:?}");
        // Escape gives up a search being typed; Backspace edits it.
        view.keys(&typed("/xyz"));
        view.keys(&[Byte(0x7f)]);
        let screen = String::from_utf8(view.render(40)).unwrap();
        assert!(screen.contains("/xy"), "{screen:?}");
        view.keys(&[Byte(ESCAPE)]);
        assert_eq!(view.keys(&typed("q")), Outcome::Leave);
    }

    #[test]
    fn history_follows_a_resize() {
        let mut view = history(100, 11);
        view.resize(51);
        assert_eq!(view.top(), 50);
        view.resize(200);
        assert_eq!(view.top(), 0);
    }

    #[test]
    fn a_paste_is_text_and_never_a_command() {
        use ViewKey::Pasted;
        let pasted = |text: &[u8]| text.iter().map(|&b| Pasted(b)).collect::<Vec<_>>();
        // The chooser: a paste filters (Enter and `q` in it move, choose and leave nothing).
        let mut chooser = Chooser::new(entries(&["alpha", "beta", "worker"]), "alpha");
        assert_eq!(chooser.keys(&pasted(b"wor\rq")), Outcome::Stay);
        assert_eq!(chooser.filter, "worq");
        assert_eq!(chooser.keys(&[Pasted(0x7f)]), Outcome::Stay);
        assert_eq!(chooser.filter, "worq", "a pasted control is dropped");
        // The history view: a paste outside a search does nothing, inside one it is the text.
        let lines: Vec<String> = (1..=100).map(|n| n.to_string()).collect();
        let mut view = History::new(lines, 11);
        let top = view.top();
        assert_eq!(view.keys(&pasted(b"gq")), Outcome::Stay);
        assert_eq!(view.top(), top);
        let mut keys = vec![ViewKey::Byte(b'?')];
        keys.extend(pasted("4\u{e9}2\n".as_bytes()));
        assert_eq!(view.keys(&keys), Outcome::Stay);
        assert_eq!(view.prompt, Some(("4\u{e9}2".to_string(), true)));
        view.keys(&[
            ViewKey::Byte(0x7f),
            ViewKey::Byte(0x7f),
            ViewKey::Byte(b'2'),
        ]);
        view.keys(&[ViewKey::Byte(b'\r')]);
        assert_eq!(view.top(), 41, "the line 42 at the top");
    }
}
