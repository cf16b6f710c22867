//! The detach key and the filter that finds it in the keystrokes (spec §5). A program may ask
//! the outer terminal for an extended keyboard encoding (the kitty keyboard protocol, CSI-u,
//! or xterm's modifyOtherKeys), and the outer terminal then sends Ctrl-b as `ESC[98;5u` or
//! `ESC[27;5;98~` instead of the byte 0x02. The filter decodes each keystroke in every such
//! encoding to the byte the legacy encoding would have sent, so the detach key works whatever
//! the program asked for; everything that is not the detach key reaches the pane unchanged.

use anyhow::{bail, Result};

use crate::bindings::{Bindings, Command};

/// The key (or prefix and key) that detaches instead of reaching the pane, each as the byte
/// the legacy encoding sends for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetachKey {
    pub prefix: u8,
    pub then: Option<u8>,
}

impl DetachKey {
    /// Parses `"C-b d"` (a prefix, then a key) or `"C-q"` (one key).
    pub fn parse(spec: &str) -> Result<DetachKey> {
        let parts: Vec<&str> = spec.split_whitespace().collect();
        let key = |s: &str| -> Result<u8> {
            if let Some(letter) = s.strip_prefix("C-") {
                let b = letter.as_bytes();
                if b.len() == 1 {
                    return match b[0] {
                        b'a'..=b'z' | b'A'..=b'Z' => Ok(b[0].to_ascii_lowercase() - b'a' + 1),
                        b'\\' => Ok(0x1c),
                        b']' => Ok(0x1d),
                        _ => bail!("detach key {spec:?}: C-{letter} is not a control key"),
                    };
                }
            }
            if s.len() == 1 && s.is_ascii() {
                return Ok(s.as_bytes()[0]);
            }
            bail!("detach key {spec:?}: {s:?} is not C-<letter> or a single character")
        };
        match parts.as_slice() {
            [one] => Ok(DetachKey {
                prefix: key(one)?,
                then: None,
            }),
            [prefix, then] => Ok(DetachKey {
                prefix: key(prefix)?,
                then: Some(key(then)?),
            }),
            _ => bail!("detach key {spec:?}: expected \"C-b d\" or \"C-q\""),
        }
    }
}

/// The key as the user types it: `C-b`, `C-\`, `d`.
pub(crate) fn key_name(byte: u8) -> String {
    match byte {
        1..=26 => format!("C-{}", char::from(b'a' + byte - 1)),
        0x1c => "C-\\".into(),
        0x1d => "C-]".into(),
        _ => char::from(byte).to_string(),
    }
}

impl std::fmt::Display for DetachKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&key_name(self.prefix))?;
        if let Some(then) = self.then {
            write!(f, " {}", key_name(then))?;
        }
        Ok(())
    }
}

/// One keystroke, or one piece of input that is not a keystroke the filter understands.
#[derive(Debug, PartialEq, Eq)]
enum Keystroke {
    /// A key press (or repeat) with the byte the legacy encoding sends for it, if it has one.
    Press(Option<u8>),
    /// A key release or a modifier key on its own (kitty's "report event types" and "report
    /// all keys" flags): part of the gesture around a key, never a key of its own.
    Incidental,
}

/// The kitty keyboard protocol's key codes for the modifier keys themselves (Shift, Control,
/// Alt, Super, Hyper, Meta, each left and right, and the lock keys).
const MODIFIER_KEYS: std::ops::RangeInclusive<u32> = 57441..=57454;

/// The modifier bits that change the key (kitty: the parameter minus one): Shift 1, Alt 2,
/// Ctrl 4, Super 8, Hyper 16, Meta 32. Caps Lock (64) and Num Lock (128) are ignored, as a
/// legacy terminal ignores them for control keys.
const SHIFT: u32 = 1;
const CTRL: u32 = 4;
const KEY_MODIFIERS: u32 = 63;

/// Splits off the first keystroke of `input`: its length and what it is. A `CSI … u` (kitty,
/// CSI-u) or `CSI 27 ; mods ; key ~` (modifyOtherKeys) sequence is one keystroke; so is every
/// other whole `CSI` sequence (an arrow key), which has no legacy byte. Anything else is one
/// byte. A sequence cut off at the end of `input` is taken byte by byte here; the filter keeps
/// such a tail for the next read first ([`KeyFilter::feed`], at most [`ESCAPE_TIME`]).
fn next_keystroke(input: &[u8]) -> (usize, Keystroke) {
    if input.len() >= 2 && input[0] == 0x1b && input[1] == b'[' {
        let params = input[2..]
            .iter()
            .position(|b| !(0x30..=0x3f).contains(b))
            .map(|n| n + 2);
        if let Some(end) = params {
            let final_byte = input[end];
            if (0x40..=0x7e).contains(&final_byte) {
                let params = std::str::from_utf8(&input[2..end]).unwrap_or("");
                return (end + 1, decode_csi(params, final_byte));
            }
        }
    }
    (1, Keystroke::Press(input.first().copied()))
}

/// Decodes the parameters of a keyboard `CSI` sequence.
fn decode_csi(params: &str, final_byte: u8) -> Keystroke {
    let number = |field: Option<&str>, default: u32| -> Option<u32> {
        match field.and_then(|f| f.split(':').next()) {
            None | Some("") => Some(default),
            Some(digits) => digits.parse().ok(),
        }
    };
    let fields: Vec<&str> = params.split(';').collect();
    let (code, modifiers, event) = match final_byte {
        // kitty / CSI-u: `code[:alternates];modifiers[:event];text`.
        b'u' => {
            let event = fields
                .get(1)
                .and_then(|f| f.split(':').nth(1))
                .and_then(|e| e.parse().ok())
                .unwrap_or(1);
            (
                number(fields.first().copied(), 0),
                number(fields.get(1).copied(), 1),
                event,
            )
        }
        // modifyOtherKeys: `27;modifiers;code`.
        b'~' if fields.first() == Some(&"27") && fields.len() == 3 => (
            number(fields.get(2).copied(), 0),
            number(fields.get(1).copied(), 1),
            1,
        ),
        _ => return Keystroke::Press(None),
    };
    let (Some(code), Some(modifiers)) = (code, modifiers) else {
        return Keystroke::Press(None);
    };
    if event == 3 || MODIFIER_KEYS.contains(&code) {
        return Keystroke::Incidental;
    }
    Keystroke::Press(legacy_byte(
        code,
        modifiers.saturating_sub(1) & KEY_MODIFIERS,
    ))
}

/// The byte a legacy terminal sends for key `code` with `modifiers` held, if it sends one.
fn legacy_byte(code: u32, modifiers: u32) -> Option<u8> {
    let code = u8::try_from(code).ok().filter(u8::is_ascii)?;
    match modifiers {
        0 => Some(code),
        SHIFT if code.is_ascii_lowercase() => Some(code.to_ascii_uppercase()),
        SHIFT if !code.is_ascii_alphabetic() => Some(code),
        // Ctrl with a letter or one of `@[\]^_` is the matching C0 control byte.
        CTRL if (0x40..=0x5f).contains(&code.to_ascii_uppercase()) => {
            Some(code.to_ascii_uppercase() & 0x1f)
        }
        _ => None,
    }
}

/// What a read of keystrokes asks the client to do besides sending bytes to the pane.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: the bytes for the pane (if any) are all there is.
    None,
    /// The detach key was pressed; what followed it in the read is not looked at.
    Detach,
    /// A key after the prefix was a binding that shows a line (`prefix ?`) or no binding at
    /// all; the line is shown on the outer terminal and the key does not reach the pane.
    Show(String),
    /// A key after the prefix was one of the client's own views or moves; what followed it in
    /// the read is not filtered but kept for what the binding opens
    /// ([`KeyFilter::after_binding`]: the view, or the pane moved to).
    Bound(Binding),
}

/// The client's own bindings after the prefix, besides detach, `prefix prefix` and `prefix ?`
/// (their keys are in [`Bindings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// `prefix n`: attach to the next pane, by name.
    NextPane,
    /// `prefix p`: attach to the previous pane, by name.
    PreviousPane,
    /// `prefix s`: choose a pane from a list.
    ChoosePane,
    /// `prefix [`: the pane's history, scrolled and searched in a view of its own.
    History,
    /// `prefix S`: the status line under the pane, on or off.
    StatusLine,
    /// `prefix ]`: the paste buffer (what copy mode copied last) typed into the pane.
    Paste,
}

/// A key as the attach client's own views (the history view, the pane chooser) read it,
/// whatever keyboard encoding the pane left the outer terminal in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKey {
    /// A key that sends one byte in the legacy encoding: a character or a control key.
    Byte(u8),
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    /// A byte of pasted text (between a bracketed paste's markers): text for a view's search
    /// or filter, never a command, so a paste can neither leave a view nor choose a pane.
    Pasted(u8),
    /// Anything else (a function key, a release): ignored by the views.
    Other,
}

/// Splits `input` into the keys of [`ViewKey`]: arrows and paging keys in their CSI and SS3
/// forms (with or without modifiers), and every keystroke with a legacy byte, however encoded.
/// What comes between a bracketed paste's markers is [`ViewKey::Pasted`], byte by byte.
pub fn view_keys(input: &[u8]) -> Vec<ViewKey> {
    view_key_spans(input, &mut false)
        .into_iter()
        .map(|(key, _)| key)
        .collect()
}

/// [`view_keys`], each key with the offset in `input` where its bytes end. `pasting` says
/// whether `input` starts inside a paste, and is left saying whether it ends inside one.
fn view_key_spans(mut input: &[u8], pasting: &mut bool) -> Vec<(ViewKey, usize)> {
    let whole = input.len();
    let mut keys = Vec::new();
    while !input.is_empty() {
        if *pasting {
            if input.starts_with(PASTE_END) {
                *pasting = false;
                input = &input[PASTE_END.len()..];
            } else {
                keys.push((ViewKey::Pasted(input[0]), whole - input.len() + 1));
                input = &input[1..];
            }
            continue;
        }
        if input.starts_with(PASTE_START) {
            *pasting = true;
            input = &input[PASTE_START.len()..];
            continue;
        }
        // SS3: `ESC O` and a final byte (anything else after `ESC O` is not one).
        if let [0x1b, b'O', last @ 0x40..=0x7e, ..] = input {
            input = &input[3..];
            keys.push((cursor_key(*last), whole - input.len()));
            continue;
        }
        let (len, keystroke) = next_keystroke(input);
        let raw = &input[..len];
        input = &input[len..];
        let key = match keystroke {
            Keystroke::Incidental => continue,
            Keystroke::Press(Some(byte)) if len == 1 || raw.ends_with(b"u") => ViewKey::Byte(byte),
            Keystroke::Press(Some(byte)) if raw.starts_with(b"\x1b[27;") => ViewKey::Byte(byte),
            Keystroke::Press(_) if raw.len() >= 3 && raw.starts_with(b"\x1b[") => {
                let params = &raw[2..raw.len() - 1];
                match (raw[raw.len() - 1], params.split(|&b| b == b';').next()) {
                    (b'~', Some(b"5")) => ViewKey::PageUp,
                    (b'~', Some(b"6")) => ViewKey::PageDown,
                    (b'~', Some(b"1" | b"7")) => ViewKey::Home,
                    (b'~', Some(b"4" | b"8")) => ViewKey::End,
                    (last, _) => cursor_key(last),
                }
            }
            _ => ViewKey::Other,
        };
        keys.push((key, whole - input.len()));
    }
    keys
}

/// The keys of the client's views read from one read after another: an escape sequence cut
/// off at the end of a read waits for the rest, as in [`KeyFilter::feed`], so an arrow key the
/// terminal (or ssh, or a multiplexer around the client) split across two reads is still one
/// key, not an Escape that closes the view; and a paste is text however its reads are cut.
#[derive(Debug, Default)]
pub struct ViewKeys {
    /// The start of an escape sequence that ended a read.
    partial: Vec<u8>,
    /// Inside a bracketed paste: what comes until its end is [`ViewKey::Pasted`].
    pasting: bool,
}

/// What one read (or a flush) gives a view: its keys, and the bytes each came as, so that
/// what follows a key that closes the view can go on to the pane ([`ViewRead::after`]).
#[derive(Debug, Default)]
pub struct ViewRead {
    bytes: Vec<u8>,
    /// Each key, with the offset in `bytes` where it ends.
    keys: Vec<(ViewKey, usize)>,
}

impl ViewRead {
    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = ViewKey> + '_ {
        self.keys.iter().map(|&(key, _)| key)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The bytes of the read after its key `index` (none past the last key).
    pub fn after(&self, index: usize) -> &[u8] {
        let end = self
            .keys
            .get(index)
            .map_or(self.bytes.len(), |&(_, end)| end);
        &self.bytes[end..]
    }
}

impl ViewKeys {
    /// The keys of `input`, after what the last read left waiting; the start of an escape
    /// sequence at its end waits for the next read, or [`ViewKeys::flush`].
    pub fn feed(&mut self, input: &[u8]) -> ViewRead {
        let bytes = take_whole(&mut self.partial, input);
        let keys = view_key_spans(&bytes, &mut self.pasting);
        ViewRead { bytes, keys }
    }

    /// True if the start of an escape sequence waits for the rest of it, or a paste for its
    /// end.
    pub fn has_partial(&self) -> bool {
        !self.partial.is_empty() || self.pasting
    }

    /// Takes the start of an escape sequence that got no rest within [`ESCAPE_TIME`] as the
    /// keys it is (a lone Escape), and ends a paste whose end did not come in that time, as
    /// [`KeyFilter::flush`] does.
    pub fn flush(&mut self) -> ViewRead {
        let bytes = std::mem::take(&mut self.partial);
        let keys = view_key_spans(&bytes, &mut self.pasting);
        self.pasting = false;
        ViewRead { bytes, keys }
    }

    /// What the view leaves unread when it closes at key `index` of `read`: the bytes after
    /// that key and the start of an escape sequence still waiting, for the pane's filter.
    /// The reader starts afresh.
    pub fn leave(&mut self, read: &ViewRead, index: usize) -> Vec<u8> {
        let mut rest = read.after(index).to_vec();
        rest.append(&mut self.partial);
        self.pasting = false;
        rest
    }
}

/// What a key did to a filter on pane names being typed ([`edit_name_filter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterEdit {
    /// Text typed or pasted, or the last character taken back: the filter changed.
    Changed,
    /// Enter: the filter is kept and typing ends.
    Kept,
    /// Escape: the filter is dropped and typing ends.
    Dropped,
    /// Any other key: nothing changed.
    Ignored,
}

/// One key typed into a filter on pane names, the same in the attach client's chooser and in
/// `belfry top`: printable ASCII (pane names are ASCII), typed or pasted, is added; Backspace
/// takes the last character back; Enter keeps the filter, Escape drops it; a pasted line break
/// or any other key changes nothing.
pub fn edit_name_filter(filter: &mut String, key: ViewKey) -> FilterEdit {
    match key {
        ViewKey::Byte(b'\r' | b'\n') => FilterEdit::Kept,
        ViewKey::Byte(0x1b) => {
            filter.clear();
            FilterEdit::Dropped
        }
        ViewKey::Byte(0x7f | 0x08) => {
            filter.pop();
            FilterEdit::Changed
        }
        ViewKey::Byte(byte @ 0x20..0x7f) | ViewKey::Pasted(byte @ 0x20..0x7f) => {
            filter.push(char::from(byte));
            FilterEdit::Changed
        }
        _ => FilterEdit::Ignored,
    }
}

/// The cursor or paging key a CSI or SS3 sequence ends with.
fn cursor_key(last: u8) -> ViewKey {
    match last {
        b'A' => ViewKey::Up,
        b'B' => ViewKey::Down,
        b'C' => ViewKey::Right,
        b'D' => ViewKey::Left,
        b'H' => ViewKey::Home,
        b'F' => ViewKey::End,
        _ => ViewKey::Other,
    }
}

/// Splits keystrokes into what goes to the pane and what the client itself does with them:
/// the prefix bindings of docs/attach.md.
pub struct KeyFilter {
    key: DetachKey,
    /// After the prefix: the bytes it came as, then any incidental keystrokes since. The
    /// prefix is sent on only as `prefix prefix`; the incidental keystrokes (releases, a
    /// modifier pressed alone) always reach the pane, so it never misses half a gesture.
    held: Option<(Vec<u8>, Vec<u8>)>,
    /// The start of an escape sequence that ended a read (a terminal's writes, or the
    /// multiplexer around the client, may split one keystroke across reads). It is joined to
    /// the next read, or taken byte by byte by [`KeyFilter::flush`] once no more input came
    /// within [`ESCAPE_TIME`].
    partial: Vec<u8>,
    /// Inside a bracketed paste: what comes until its end is text for the pane, never the
    /// prefix or the detach key.
    pasting: bool,
    /// What followed the last binding ([`Action::Bound`]), unfiltered.
    after_binding: Vec<u8>,
    /// What each key after the prefix does.
    table: Bindings,
}

/// The markers a terminal puts around pasted text once the program turned on bracketed paste
/// (mode 2004).
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// How long the start of an escape sequence at the end of a read waits for the rest before
/// it is taken as the keys it is (a lone Escape): far below tmux's 500 ms `escape-time`, so
/// Escape in an editor is not felt to lag, and far above the gap between the parts of one
/// keystroke split across reads.
pub const ESCAPE_TIME: std::time::Duration = std::time::Duration::from_millis(25);

/// What a read of keys makes whole: `partial` (the start of an escape sequence the last read
/// ended with) and `input`, less the incomplete escape sequence they end with, which is left
/// in `partial` for the next read.
fn take_whole(partial: &mut Vec<u8>, input: &[u8]) -> Vec<u8> {
    let mut joined = std::mem::take(partial);
    joined.extend_from_slice(input);
    let whole = joined.len() - incomplete_tail(&joined);
    *partial = joined.split_off(whole);
    joined
}

/// The length of the incomplete escape sequence that ends `input`, if it ends with one: a
/// lone `ESC`, `ESC O` (an SS3 cursor key) with no final byte yet, or `ESC [` and parameter or
/// intermediate bytes with no final byte yet.
fn incomplete_tail(input: &[u8]) -> usize {
    let Some(start) = input.iter().rposition(|&b| b == 0x1b) else {
        return 0;
    };
    let tail = &input[start..];
    let incomplete = match tail {
        [_] | [_, b'O'] => true,
        [_, b'[', rest @ ..] => rest.iter().all(|b| (0x20..=0x3f).contains(b)),
        _ => false,
    };
    if incomplete {
        tail.len()
    } else {
        0
    }
}

impl KeyFilter {
    /// A filter with the default bindings.
    pub fn new(key: DetachKey) -> KeyFilter {
        KeyFilter::with_bindings(key, Bindings::default())
    }

    /// A filter whose keys after the prefix do what `table` says.
    pub fn with_bindings(key: DetachKey, table: Bindings) -> KeyFilter {
        KeyFilter {
            key,
            held: None,
            partial: Vec::new(),
            pasting: false,
            after_binding: Vec::new(),
            table,
        }
    }

    /// The one-line list of the bindings (`prefix ?`).
    pub fn bindings(&self) -> String {
        self.table.help(self.key)
    }

    /// Appends to `out` what `input` sends to the pane and says what else to do. After a
    /// `Show`, the rest of the read is still filtered (into `out`); after `Detach` it is not.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Action {
        let whole = take_whole(&mut self.partial, input);
        let action = self.filter(&whole, out);
        match action {
            Action::Detach => self.partial.clear(),
            Action::Bound(_) => self.after_binding.append(&mut self.partial),
            Action::None | Action::Show(_) => {}
        }
        action
    }

    /// The keys that followed the last binding in its read, not filtered: the keys a user
    /// typed after `prefix [` or `prefix n` faster than the terminal's reads come, which the
    /// view or the pane moved to reads next. Taken once; the filter starts afresh.
    pub fn after_binding(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.after_binding)
    }

    /// True if the start of an escape sequence waits for the rest of it, or a paste for its
    /// end (see [`KeyFilter::flush`]).
    pub fn has_partial(&self) -> bool {
        !self.partial.is_empty() || self.pasting
    }

    /// True while the filter holds keys of a keystroke or binding not yet complete: the start
    /// of an escape sequence, a paste not ended yet, or the prefix waiting for the key after
    /// it.
    pub fn holds_keys(&self) -> bool {
        self.held.is_some() || self.has_partial()
    }

    /// Takes the start of an escape sequence that got no rest within [`ESCAPE_TIME`] as the
    /// keys it is (a lone Escape, or bytes no keyboard sends), and ends a paste whose end did
    /// not come in that time: the keys after it are keys again, so a paste cut off (a
    /// connection lost in the middle of one) never leaves the detach key dead.
    pub fn flush(&mut self, out: &mut Vec<u8>) -> Action {
        let partial = std::mem::take(&mut self.partial);
        let action = self.filter(&partial, out);
        self.pasting = false;
        action
    }

    fn filter(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Action {
        let mut action = Action::None;
        while !input.is_empty() {
            let (len, keystroke) = next_keystroke(input);
            let (raw, rest) = input.split_at(len);
            input = rest;
            // A paste is text: it goes to the pane whole, the prefix in it included.
            if self.pasting {
                out.extend_from_slice(raw);
                self.pasting = raw != PASTE_END;
                continue;
            }
            if raw == PASTE_START {
                if let Some((_, incidental)) = self.held.take() {
                    // A paste is not a key after the prefix: the prefix is swallowed, as
                    // before an unbound key, and the paste goes to the pane.
                    out.extend_from_slice(&incidental);
                    action = Action::Show(format!(
                        "{} then a paste: the paste went to the pane, the prefix did not",
                        key_name(self.key.prefix)
                    ));
                }
                out.extend_from_slice(raw);
                self.pasting = true;
                continue;
            }
            let pressed = match keystroke {
                Keystroke::Incidental => {
                    match &mut self.held {
                        Some((_, incidental)) => incidental.extend_from_slice(raw),
                        None => out.extend_from_slice(raw),
                    }
                    continue;
                }
                Keystroke::Press(pressed) => pressed,
            };
            if let Some((prefix, incidental)) = self.held.take() {
                if pressed.is_some() && pressed == self.key.then {
                    return Action::Detach;
                }
                let command = if pressed == Some(self.key.prefix) {
                    Some(Command::SendPrefix)
                } else {
                    pressed.and_then(|key| self.table.get(key))
                };
                if command == Some(Command::SendPrefix) {
                    // The prefix twice sends the prefix once, as it first came.
                    out.extend_from_slice(&prefix);
                    out.extend_from_slice(&incidental);
                } else if command == Some(Command::Detach) {
                    return Action::Detach;
                } else if let Some(Command::Bound(binding)) = command {
                    out.extend_from_slice(&incidental);
                    self.after_binding = input.to_vec();
                    return Action::Bound(binding);
                } else if command == Some(Command::Help) {
                    out.extend_from_slice(&incidental);
                    action = Action::Show(self.bindings());
                } else {
                    // An unbound key is swallowed, as tmux does, so a mistyped binding never
                    // reaches the program as a stray keystroke.
                    out.extend_from_slice(&incidental);
                    let key = match pressed {
                        Some(byte @ (1..=26 | 0x1c | 0x1d | 0x21..=0x7e)) => key_name(byte),
                        _ => "that key".to_string(),
                    };
                    action = Action::Show(format!(
                        "{} {key} is not bound; {} ? lists the bindings",
                        key_name(self.key.prefix),
                        key_name(self.key.prefix)
                    ));
                }
                continue;
            }
            if pressed == Some(self.key.prefix) {
                match self.key.then {
                    None => return Action::Detach,
                    Some(_) => self.held = Some((raw.to_vec(), Vec::new())),
                }
                continue;
            }
            out.extend_from_slice(raw);
        }
        action
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(spec: &str) -> KeyFilter {
        KeyFilter::new(DetachKey::parse(spec).unwrap())
    }

    /// Feeds each chunk in turn; returns what reached the pane and whether it detached.
    fn feed(f: &mut KeyFilter, chunks: &[&[u8]]) -> (Vec<u8>, bool) {
        let (out, action) = feed_action(f, chunks);
        (out, action == Action::Detach)
    }

    /// Feeds each chunk in turn; returns what reached the pane and the last action asked for.
    /// Then, as the client does when no more input comes within `ESCAPE_TIME`, flushes the
    /// start of an escape sequence the last chunk ended with.
    fn feed_action(f: &mut KeyFilter, chunks: &[&[u8]]) -> (Vec<u8>, Action) {
        let mut out = Vec::new();
        let mut last = Action::None;
        for chunk in chunks {
            match f.feed(chunk, &mut out) {
                Action::None => {}
                Action::Detach => return (out, Action::Detach),
                shown => last = shown,
            }
        }
        match f.flush(&mut out) {
            Action::None => {}
            action => last = action,
        }
        (out, last)
    }

    #[test]
    fn a_keystroke_split_across_reads_is_still_one_keystroke() {
        let mut f = filter("C-b d");
        let mut out = Vec::new();
        // The kitty prefix, cut after ESC and again in its parameters, then `d`.
        for part in [&b"\x1b"[..], b"[98;", b"5u", b"d"] {
            let action = f.feed(part, &mut out);
            if part == b"d" {
                assert_eq!(action, Action::Detach);
            } else {
                assert_eq!(action, Action::None, "{part:?}");
            }
        }
        assert_eq!(out, b"", "a part of the prefix reached the pane");
        // A lone Escape waits for more, then goes out as itself when nothing follows.
        let mut f = filter("C-b d");
        let mut out = Vec::new();
        assert_eq!(f.feed(b"x\x1b", &mut out), Action::None);
        assert_eq!((out.as_slice(), f.has_partial()), (&b"x"[..], true));
        assert_eq!(f.flush(&mut out), Action::None);
        assert_eq!((out.as_slice(), f.has_partial()), (&b"x\x1b"[..], false));
        // An arrow key split after `ESC [` arrives whole with its last byte.
        let mut out = Vec::new();
        f.feed(b"\x1b[", &mut out);
        f.feed(b"A", &mut out);
        assert_eq!(out, b"\x1b[A");
    }

    #[test]
    fn detach_key_filter() {
        let key = DetachKey::parse("C-b d").unwrap();
        assert_eq!(
            key,
            DetachKey {
                prefix: 2,
                then: Some(b'd')
            }
        );
        assert_eq!(key.to_string(), "C-b d");
        assert_eq!(
            feed(&mut filter("C-b d"), &[b"ab\x02xc"]),
            (b"abc".to_vec(), false)
        );
        assert_eq!(
            feed(&mut filter("C-b d"), &[b"\x02", b"d"]),
            (Vec::new(), true)
        );
        assert_eq!(
            feed(&mut filter("C-b d"), &[b"\x02\x02"]),
            (b"\x02".to_vec(), false)
        );
        assert_eq!(
            DetachKey::parse("C-q").unwrap(),
            DetachKey {
                prefix: 17,
                then: None
            }
        );
        assert_eq!(DetachKey::parse("C-\\").unwrap().to_string(), "C-\\");
        assert!(DetachKey::parse("C-b d e").is_err());
    }

    #[test]
    fn the_prefix_is_recognised_in_every_keyboard_encoding() {
        for (encoding, prefix) in [
            ("legacy", &b"\x02"[..]),
            ("kitty / CSI-u", b"\x1b[98;5u"),
            ("kitty with event type", b"\x1b[98;5:1u"),
            ("kitty with Caps Lock on", b"\x1b[98;69u"),
            ("kitty with alternate keys", b"\x1b[98:66;5u"),
            ("modifyOtherKeys", b"\x1b[27;5;98~"),
        ] {
            for then in [&b"d"[..], b"\x1b[100u", b"\x1b[100;1u", b"\x1b[27;1;100~"] {
                let detached = feed(&mut filter("C-b d"), &[prefix, then]);
                assert_eq!(detached, (Vec::new(), true), "{encoding} then {then:?}");
                let mut both = prefix.to_vec();
                both.extend_from_slice(then);
                let detached = feed(&mut filter("C-b d"), &[&both]);
                assert_eq!(
                    detached,
                    (Vec::new(), true),
                    "{encoding} then {then:?}, one read"
                );
            }
            // Followed by an unbound key: neither reaches the pane.
            let mut sent = prefix.to_vec();
            sent.extend_from_slice(b"\x1b[120;5u");
            assert_eq!(
                feed_action(&mut filter("C-b d"), &[&sent]),
                (
                    Vec::new(),
                    Action::Show("C-b C-x is not bound; C-b ? lists the bindings".into())
                ),
                "{encoding}"
            );
            // Twice: the prefix reaches the pane once, as the terminal sent it.
            let mut twice = prefix.to_vec();
            twice.extend_from_slice(prefix);
            assert_eq!(
                feed(&mut filter("C-b d"), &[&twice]),
                (prefix.to_vec(), false),
                "{encoding}"
            );
            // A one-key detach key.
            assert_eq!(
                feed(&mut filter("C-b"), &[prefix]),
                (Vec::new(), true),
                "{encoding}"
            );
        }
    }

    #[test]
    fn releases_and_modifier_keys_between_prefix_and_key_do_not_count() {
        // kitty with every flag: Ctrl pressed, b pressed, b and Ctrl released, d pressed.
        let gesture: &[&[u8]] = &[
            b"\x1b[57442;5u",
            b"\x1b[98;5u",
            b"\x1b[98;5:3u",
            b"\x1b[57442;1:3u",
            b"\x1b[100u",
        ];
        assert_eq!(
            feed(&mut filter("C-b d"), gesture),
            (b"\x1b[57442;5u".to_vec(), true)
        );
        // The same gesture ending in an unbound x swallows the prefix and the x; the Ctrl
        // press and the releases still reach the pane.
        let mut typed: Vec<&[u8]> = gesture[..4].to_vec();
        typed.push(b"\x1b[120u");
        let (out, action) = feed_action(&mut filter("C-b d"), &typed);
        assert_eq!(
            action,
            Action::Show("C-b x is not bound; C-b ? lists the bindings".into())
        );
        assert_eq!(out, [gesture[0], gesture[2], gesture[3]].concat());
    }

    /// A bracketed paste is text: the prefix and the detach key inside it reach the pane, in
    /// one read or cut across several, and the detach key works again after its end.
    #[test]
    fn a_paste_is_text_even_when_it_holds_the_prefix() {
        let paste: &[u8] = b"\x1b[200~ls \x02d and \x02? \x1b[98;5ud\x1b[201~";
        let mut f = filter("C-b d");
        let mut out = Vec::new();
        assert_eq!(f.feed(paste, &mut out), Action::None);
        assert_eq!(out, paste);
        assert!(!f.holds_keys());
        assert_eq!(f.feed(b"\x02d", &mut out), Action::Detach);
        // Cut across reads, the end marker too.
        for cut in 1..paste.len() {
            let mut f = filter("C-b d");
            let mut out = Vec::new();
            assert_eq!(
                f.feed(&paste[..cut], &mut out),
                Action::None,
                "cut at {cut}"
            );
            assert!(f.holds_keys(), "cut at {cut}: the paste is not over");
            assert_eq!(
                f.feed(&paste[cut..], &mut out),
                Action::None,
                "cut at {cut}"
            );
            assert_eq!(out, paste, "cut at {cut}");
            assert_eq!(f.feed(b"\x02", &mut out), Action::None);
            assert_eq!(f.feed(b"d", &mut out), Action::Detach, "cut at {cut}");
        }
        // The prefix, then a paste: the prefix is swallowed with a note, the paste goes on.
        let (out, action) = feed_action(&mut filter("C-b d"), &[b"\x02", paste]);
        assert_eq!(out, paste);
        assert_eq!(
            action,
            Action::Show("C-b then a paste: the paste went to the pane, the prefix did not".into())
        );
        // A paste whose end never comes is over at the flush (no input for ESCAPE_TIME): the
        // detach key works again.
        let mut f = filter("C-b d");
        let mut out = Vec::new();
        f.feed(b"\x1b[200~cut off \x02", &mut out);
        assert!(f.has_partial(), "the flush timer must run");
        assert_eq!(f.flush(&mut out), Action::None);
        assert_eq!(out, b"\x1b[200~cut off \x02");
        assert_eq!(f.feed(b"\x02d", &mut out), Action::Detach);
    }

    #[test]
    fn prefix_bindings() {
        // `prefix prefix` sends the prefix byte itself, and typing goes on as usual.
        assert_eq!(
            feed_action(&mut filter("C-b d"), &[b"\x02", b"\x02", b"ls"]),
            (b"\x02ls".to_vec(), Action::None)
        );
        // An unbound key after the prefix is swallowed with a message; the next keys are not.
        assert_eq!(
            feed_action(&mut filter("C-b d"), &[b"\x02x", b"yz"]),
            (
                b"yz".to_vec(),
                Action::Show("C-b x is not bound; C-b ? lists the bindings".into())
            )
        );
        assert_eq!(
            feed_action(&mut filter("C-b d"), &[b"a\x02\x1b[Ab"]),
            (
                b"ab".to_vec(),
                Action::Show("C-b that key is not bound; C-b ? lists the bindings".into())
            )
        );
        // `prefix ?` lists the bindings, under the configured keys.
        assert_eq!(
            feed_action(&mut filter("C-b d"), &[b"\x02?"]),
            (
                Vec::new(),
                Action::Show(
                    "C-b: d detach, [ history, ] paste, s panes, n next, p prev, S status, C-b send \
                     C-b, ? help"
                        .into()
                )
            )
        );
        assert_eq!(
            feed_action(&mut filter("C-a q"), &[b"\x01", b"?"]),
            (
                Vec::new(),
                Action::Show(
                    "C-a: q detach, [ history, ] paste, s panes, n next, p prev, S status, C-a send \
                     C-a, ? help"
                        .into()
                )
            )
        );
        // A one-key detach key has no prefix bindings: `?` is an ordinary key.
        assert_eq!(
            feed_action(&mut filter("C-q"), &[b"?x"]),
            (b"?x".to_vec(), Action::None)
        );
        // After the message the filter is back to its plain state: the prefix works again.
        let mut f = filter("C-b d");
        assert_eq!(feed_action(&mut f, &[b"\x02x"]).0, Vec::<u8>::new());
        assert_eq!(feed(&mut f, &[b"\x02d"]), (Vec::new(), true));
    }

    #[test]
    fn view_and_pane_bindings_in_every_encoding() {
        for (then, binding) in [
            (&b"n"[..], Binding::NextPane),
            (b"\x1b[110u", Binding::NextPane),
            (b"p", Binding::PreviousPane),
            (b"\x1b[27;1;115~", Binding::ChoosePane),
            (b"[", Binding::History),
        ] {
            let mut f = filter("C-b d");
            let mut out = Vec::new();
            assert_eq!(f.feed(b"ab\x1b[98;5u", &mut out), Action::None);
            assert_eq!(f.feed(then, &mut out), Action::Bound(binding), "{then:?}");
            assert_eq!(out, b"ab".to_vec(), "the binding reached the pane");
        }
        // The detach key wins over a binding of the same key.
        assert_eq!(feed(&mut filter("C-b n"), &[b"\x02n"]), (Vec::new(), true));
    }

    #[test]
    fn view_keys_in_every_encoding() {
        use ViewKey::*;
        assert_eq!(
            view_keys(b"q\x1b[A\x1bOB\x1b[5~\x1b[6;5~\x1b[H\x1b[1;2F\x1b[113u\x1b[113;1:3u\x1b[27;1;47~\x1b[15~\r\x1b"),
            vec![
                Byte(b'q'),
                Up,
                Down,
                PageUp,
                PageDown,
                Home,
                End,
                Byte(b'q'),
                Byte(b'/'),
                Other,
                Byte(b'\r'),
                Byte(0x1b)
            ]
        );
    }

    #[test]
    fn the_keys_after_a_binding_are_kept_for_what_it_opens() {
        let mut f = filter("C-b d");
        let mut out = Vec::new();
        // The history binding, then keys for the view and a cut-off arrow key, in one read.
        assert_eq!(
            f.feed(b"ab\x02[kq\x1b[", &mut out),
            Action::Bound(Binding::History)
        );
        assert_eq!(out, b"ab");
        assert_eq!(f.after_binding(), b"kq\x1b[");
        assert_eq!(f.after_binding(), b"", "taken once");
        assert!(!f.has_partial(), "the cut-off key went with the rest");
        // A binding with nothing after it leaves nothing.
        assert_eq!(f.feed(b"\x02n", &mut out), Action::Bound(Binding::NextPane));
        assert_eq!(f.after_binding(), b"");
        // After the detach key nothing is kept: it is not the pane's, nor a view's.
        assert_eq!(f.feed(b"\x02dls\r", &mut out), Action::Detach);
        assert_eq!(f.after_binding(), b"");
    }

    #[test]
    fn a_paste_is_text_to_a_view_however_cut() {
        use ViewKey::*;
        let keys: &[u8] = b"j\x1b[200~q\r\x1b[201~k";
        let expected = vec![Byte(b'j'), Pasted(b'q'), Pasted(b'\r'), Byte(b'k')];
        assert_eq!(view_keys(keys), expected);
        for cut in 1..keys.len() {
            let mut reader = ViewKeys::default();
            let mut read: Vec<ViewKey> = reader.feed(&keys[..cut]).keys().collect();
            read.extend(reader.feed(&keys[cut..]).keys());
            read.extend(reader.flush().keys());
            assert_eq!(read, expected, "cut at {cut}");
        }
        // A paste whose end never came ends at the flush, as in the filter.
        let mut reader = ViewKeys::default();
        let read: Vec<ViewKey> = reader.feed(b"\x1b[200~ab").keys().collect();
        assert_eq!(read, [Pasted(b'a'), Pasted(b'b')]);
        assert!(reader.has_partial());
        assert!(reader.flush().is_empty());
        assert_eq!(reader.feed(b"q").keys().collect::<Vec<_>>(), [Byte(b'q')]);
    }

    #[test]
    fn a_view_hands_on_the_bytes_after_its_last_key() {
        let mut reader = ViewKeys::default();
        let read = reader.feed(b"j\x1b[Aqls\r\x1b[");
        let keys: Vec<ViewKey> = read.keys().collect();
        assert_eq!(
            keys[..3],
            [ViewKey::Byte(b'j'), ViewKey::Up, ViewKey::Byte(b'q')]
        );
        assert_eq!(read.after(0), b"\x1b[Aqls\r");
        // Closing at `q`: the rest of the read and the cut-off sequence waiting.
        assert_eq!(reader.leave(&read, 2), b"ls\r\x1b[");
        assert!(!reader.has_partial());
    }

    #[test]
    fn other_keys_pass_through_unchanged() {
        let keys: &[u8] =
            b"\x1b[A\x1b[1;5C\x1bOP\x1b[97;5u\x1b[27;5;13~\x1b[200~paste\x1b[201~\x1b";
        assert_eq!(feed(&mut filter("C-b d"), &[keys]), (keys.to_vec(), false));
        // A sequence cut off by the end of a read and never completed is passed on as it is.
        assert_eq!(
            feed(&mut filter("C-b d"), &[b"\x1b[98;5"]),
            (b"\x1b[98;5".to_vec(), false)
        );
    }
}
