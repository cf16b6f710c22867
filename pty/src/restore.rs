//! What attaching changed in the outer terminal, and the bytes that undo exactly that on
//! detach (spec §5: the local terminal is restored on every way out).
//!
//! The pane's redraw and live output reach the outer terminal unchanged (written by the pane
//! host's terminal writer when the client handed its terminal over, by the client otherwise),
//! so the outer terminal's modes are whatever those bytes set. [`Outer`] parses the same bytes with
//! the escape-sequence parser the pane's model uses and records only the state a shell would
//! notice afterwards; [`Outer::undo`] resets what is on and nothing else. Resetting blindly
//! does harm: `?1049l` outside the alternate screen moves the cursor to an old saved position,
//! so the shell's prompt lands on top of earlier output.

use alacritty_terminal::vte::ansi::{
    Attr, CharsetIndex, CursorShape, CursorStyle, Handler, KeyboardModes,
    KeyboardModesApplyBehavior, Mode, ModifyOtherKeys, PrivateMode, Processor, StandardCharset,
};

/// The alternate screen modes: `?1049` (xterm's, with a cursor save), `?1047` and `?47`.
const ALTERNATE_SCREENS: [u16; 3] = [1049, 1047, 47];

/// The private modes that change what the terminal sends or how it shows the cursor, each
/// reset on detach when on: cursor keys, mouse tracking and its encodings, focus events and
/// bracketed paste. Resetting any of `?1000`, `?1002`, `?1003` ends all mouse tracking.
const INPUT_MODES: [u16; 9] = [1, 1000, 1002, 1003, 1005, 1006, 1015, 1004, 2004];

/// The outer terminal's state as the bytes written to it left it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Modes {
    /// The alternate screen mode that is on, if any.
    pub alternate: Option<u16>,
    /// A scroll region other than the whole screen was set and not reset.
    pub scroll_region: bool,
    /// Autowrap (`?7`) is off.
    pub autowrap_off: bool,
    /// Insert mode (`IRM`, `CSI 4 h`) is on.
    pub insert: bool,
    /// A character set other than ASCII was designated or a slot other than G0 made active.
    pub charsets: bool,
    /// modifyOtherKeys is on.
    pub modify_other_keys: bool,
    /// Kitty keyboard flags pushed and not popped.
    pub keyboard_pushed: u16,
    /// Kitty keyboard flags set without a push.
    pub keyboard_set: bool,
    /// The cursor is hidden (`?25l`).
    pub cursor_hidden: bool,
    /// The cursor's shape was changed (`DECSCUSR`).
    pub cursor_style: bool,
    /// Application keypad (`DECKPAM`) is on.
    pub keypad: bool,
    /// The pen has attributes or colours.
    pub pen: bool,
    /// The [`INPUT_MODES`] that are on, in that order.
    pub input_modes: Vec<u16>,
}

impl Modes {
    fn set_private(&mut self, code: u16, on: bool) {
        if ALTERNATE_SCREENS.contains(&code) {
            self.alternate = on.then_some(code);
        } else if code == 7 {
            self.autowrap_off = !on;
        } else if code == 25 {
            self.cursor_hidden = !on;
        } else if INPUT_MODES.contains(&code) {
            self.input_modes.retain(|&mode| mode != code);
            if on {
                self.input_modes.push(code);
            }
        }
    }
}

impl Handler for Modes {
    fn set_private_mode(&mut self, mode: PrivateMode) {
        self.set_private(mode.raw(), true);
    }
    fn unset_private_mode(&mut self, mode: PrivateMode) {
        self.set_private(mode.raw(), false);
    }
    fn set_mode(&mut self, mode: Mode) {
        if mode.raw() == 4 {
            self.insert = true;
        }
    }
    fn unset_mode(&mut self, mode: Mode) {
        if mode.raw() == 4 {
            self.insert = false;
        }
    }
    fn set_scrolling_region(&mut self, top: usize, bottom: Option<usize>) {
        // `CSI r` and `CSI 1 r` are the whole screen; any other region is reset on detach,
        // even one that happens to cover the screen, since the client does not know its size
        // at every moment.
        self.scroll_region = !(top <= 1 && bottom.is_none());
    }
    fn configure_charset(&mut self, _index: CharsetIndex, charset: StandardCharset) {
        if charset != StandardCharset::Ascii {
            self.charsets = true;
        }
    }
    fn set_active_charset(&mut self, index: CharsetIndex) {
        if index != CharsetIndex::G0 {
            self.charsets = true;
        }
    }
    fn set_modify_other_keys(&mut self, mode: ModifyOtherKeys) {
        self.modify_other_keys = mode != ModifyOtherKeys::Reset;
    }
    fn push_keyboard_mode(&mut self, _mode: KeyboardModes) {
        self.keyboard_pushed = self.keyboard_pushed.saturating_add(1);
    }
    fn pop_keyboard_modes(&mut self, to_pop: u16) {
        self.keyboard_pushed = self.keyboard_pushed.saturating_sub(to_pop);
    }
    fn set_keyboard_mode(&mut self, mode: KeyboardModes, _how: KeyboardModesApplyBehavior) {
        if self.keyboard_pushed == 0 {
            self.keyboard_set = mode != KeyboardModes::NO_MODE;
        }
    }
    fn set_cursor_style(&mut self, style: Option<CursorStyle>) {
        self.cursor_style = style.is_some();
    }
    fn set_cursor_shape(&mut self, _shape: CursorShape) {
        self.cursor_style = true;
    }
    fn set_keypad_application_mode(&mut self) {
        self.keypad = true;
    }
    fn unset_keypad_application_mode(&mut self) {
        self.keypad = false;
    }
    fn terminal_attribute(&mut self, attr: Attr) {
        self.pen = attr != Attr::Reset;
    }
    fn reset_state(&mut self) {
        // RIS puts the outer terminal back to its power-on state, as if nothing was changed.
        *self = Modes::default();
    }
}

/// The outer terminal as seen through the bytes the client wrote to it.
#[derive(Default)]
pub struct Outer {
    parser: Processor,
    modes: Modes,
    wrote: bool,
}

impl Outer {
    /// Records what `bytes`, about to be written to the outer terminal, change.
    pub fn observe(&mut self, bytes: &[u8]) {
        self.wrote |= !bytes.is_empty();
        self.parser.advance(&mut self.modes, bytes);
    }

    /// The modes the written bytes left on, counting a synchronized update still open (the
    /// outer terminal applies it when its own timeout ends it).
    pub fn modes(&mut self) -> Modes {
        if self.parser.sync_bytes_count() > 0 {
            self.parser.stop_sync(&mut self.modes);
        }
        self.modes.clone()
    }

    /// The bytes that undo what was written, then a line break; nothing if nothing was written.
    pub fn undo(&mut self) -> Vec<u8> {
        if !self.wrote {
            return Vec::new();
        }
        let mut out = undo(&self.modes());
        out.extend_from_slice(b"\r\n");
        out
    }
}

/// The bytes that reset every mode in `modes` that differs from a fresh terminal's, in an order
/// that keeps the cursor where the pane left it.
pub fn undo(modes: &Modes) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(code) = modes.alternate {
        // Leaving the alternate screen comes first: `?1049l` restores the cursor (and pen and
        // character sets) saved on entering it, which the resets below then clear.
        out.extend_from_slice(format!("\x1b[?{code}l").as_bytes());
    }
    if modes.scroll_region {
        // Setting the scroll region homes the cursor, so it is reset between a save and a
        // restore.
        out.extend_from_slice(b"\x1b7\x1b[r\x1b8");
    }
    if modes.autowrap_off {
        out.extend_from_slice(b"\x1b[?7h");
    }
    if modes.insert {
        out.extend_from_slice(b"\x1b[4l");
    }
    if modes.charsets {
        // After the restore above, which brings back the character sets it saved.
        out.extend_from_slice(b"\x1b(B\x1b)B\x0f");
    }
    if modes.modify_other_keys {
        out.extend_from_slice(b"\x1b[>4m");
    }
    if modes.keyboard_pushed > 0 {
        out.extend_from_slice(format!("\x1b[<{}u", modes.keyboard_pushed).as_bytes());
    }
    if modes.keyboard_set {
        out.extend_from_slice(b"\x1b[=0;1u");
    }
    for code in &modes.input_modes {
        out.extend_from_slice(format!("\x1b[?{code}l").as_bytes());
    }
    if modes.keypad {
        out.extend_from_slice(b"\x1b>");
    }
    if modes.cursor_style {
        out.extend_from_slice(b"\x1b[0 q");
    }
    if modes.pen {
        out.extend_from_slice(b"\x1b[0m");
    }
    if modes.cursor_hidden {
        out.extend_from_slice(b"\x1b[?25h");
    }
    out
}

/// The reset used when the record cannot be read (a panic while it was being updated): every
/// mode attaching may have changed, as the client always did before it kept a record.
pub const RESET_ALL: &[u8] = b"\x1b[?1049l\x1b[?25h\x1b[0m\x1b7\x1b[r\x1b8\x1b[?7h\x1b[4l\x1b(B\x1b)B\x0f\x1b[>4m\x1b[?2004l\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1005l\x1b[?1015l\x1b[?1004l\x1b[0 q\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn modes_after(bytes: &[u8]) -> Modes {
        let mut outer = Outer::default();
        outer.observe(bytes);
        outer.modes()
    }

    #[test]
    fn nothing_is_reset_that_was_not_set() {
        let mut outer = Outer::default();
        assert_eq!(outer.undo(), b"");
        // Entering and leaving the alternate screen leaves nothing to undo but the line break.
        outer.observe(b"hello\x1b[?1049hfull\x1b[?1049l\x1b[1mbold\x1b[0m");
        assert_eq!(outer.undo(), b"\r\n");
    }

    #[test]
    fn each_mode_that_is_on_is_reset() {
        let modes = modes_after(
            b"\x1b[?1049h\x1b[2;20r\x1b[?7l\x1b[4h\x1b(0\x1b[>4;2m\x1b[>1u\x1b[>3u\x1b[<1u\
              \x1b[?1002h\x1b[?1006h\x1b[?2004h\x1b[?1004h\x1b[?25l\x1b[5 q\x1b=\x1b[31m",
        );
        assert_eq!(modes.alternate, Some(1049));
        assert!(modes.scroll_region && modes.autowrap_off && modes.insert && modes.charsets);
        assert!(modes.modify_other_keys && modes.cursor_hidden && modes.cursor_style);
        assert!(modes.keypad && modes.pen);
        assert_eq!(modes.keyboard_pushed, 1);
        assert_eq!(modes.input_modes, [1002, 1006, 2004, 1004]);
        assert_eq!(
            String::from_utf8_lossy(&undo(&modes)),
            "\x1b[?1049l\x1b7\x1b[r\x1b8\x1b[?7h\x1b[4l\x1b(B\x1b)B\x0f\x1b[>4m\x1b[<1u\
             \x1b[?1002l\x1b[?1006l\x1b[?2004l\x1b[?1004l\x1b>\x1b[0 q\x1b[0m\x1b[?25h"
        );
    }

    #[test]
    fn modes_turned_off_again_are_not_reset() {
        let modes = modes_after(
            b"\x1b[2;20r\x1b[r\x1b[?7l\x1b[?7h\x1b[4h\x1b[4l\x1b[>4;1m\x1b[>4;0m\
              \x1b[?1000h\x1b[?1000l\x1b[?25l\x1b[?25h\x1b[>1u\x1b[<u",
        );
        assert_eq!(modes, Modes::default());
    }

    #[test]
    fn an_open_synchronized_update_counts() {
        let modes = modes_after(b"\x1b[?2026h\x1b[?1049h\x1b[?1000h");
        assert_eq!(modes.alternate, Some(1049));
        assert_eq!(modes.input_modes, [1000]);
    }
}
