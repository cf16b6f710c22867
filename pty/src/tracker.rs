//! The emulator state a redraw needs but `alacritty_terminal` keeps private: the scroll region,
//! the active character set and the mouse encodings the core ignores (spec §5: "the redraw
//! restores … every mode that is on (and only those), the scroll region and pending wrap").
//!
//! [`Tracker`] sits between the escape-sequence parser and the terminal core: every call is
//! passed on to the core unchanged, and the few that set private state are also recorded in
//! [`Tracked`]. Recording at the handler, rather than parsing the output a second time, keeps
//! the record in step with the core even while a synchronized update holds bytes back.

use alacritty_terminal::event::EventListener;
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::term::{Term, TermMode};
use alacritty_terminal::vte::ansi::cursor_icon::CursorIcon;
use alacritty_terminal::vte::ansi::{
    Attr, CharsetIndex, ClearMode, CursorShape, CursorStyle, Handler, Hyperlink, KeyboardModes,
    KeyboardModesApplyBehavior, LineClearMode, Mode, ModifyOtherKeys, PrivateMode, Rgb,
    ScpCharPath, ScpUpdateMode, StandardCharset, TabulationClearMode,
};

/// The `?1015` (urxvt) mouse encoding, which the core does not implement but a program may set
/// and the attached terminal may honour.
pub const URXVT_MOUSE: u16 = 1015;

/// What the core does not expose, recorded as the program sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tracked {
    /// The scroll region as zero-based `(top, bottom)` rows, bottom exclusive; `None` is the
    /// whole screen.
    pub scroll_region: Option<(usize, usize)>,
    /// The character set slot `SI`/`SO`/`LS2`/`LS3` made active.
    pub active_charset: CharsetIndex,
    /// Whether `?1015` is set.
    pub urxvt_mouse: bool,
    /// Whether the program chose a cursor shape (`DECSCUSR` other than `CSI 0 SP q`): a
    /// redraw sets one only then, so attaching to a pane that chose none leaves the outer
    /// terminal's own shape alone.
    pub cursor_style_set: bool,
}

impl Tracked {
    /// The whole screen scrolls again after a resize or a reset, as it does in the core.
    pub fn reset_scroll_region(&mut self) {
        self.scroll_region = None;
    }
}

/// A [`Handler`] that forwards every call to the terminal core and records [`Tracked`] state.
pub struct Tracker<'a, L: EventListener> {
    pub term: &'a mut Term<L>,
    pub tracked: &'a mut Tracked,
    /// Set when the program cleared the primary screen's history (`CSI 3 J` outside the
    /// alternate screen, or a full reset), so the screen drops the rows it keeps outside the
    /// core too (see `crate::history`).
    pub history_cleared: &'a mut bool,
}

impl<L: EventListener> Handler for Tracker<'_, L> {
    fn set_scrolling_region(&mut self, top: usize, bottom: Option<usize>) {
        // The same rules as the core's: the bottom defaults to the last line, an empty or
        // inverted region is ignored, and both ends are clamped to the screen.
        let lines = self.term.screen_lines();
        let bottom_row = bottom.unwrap_or(lines);
        if top < bottom_row {
            let start = top.saturating_sub(1).min(lines);
            let end = bottom_row.min(lines);
            self.tracked.scroll_region = if start == 0 && end == lines {
                None
            } else {
                Some((start, end))
            };
        }
        Handler::set_scrolling_region(&mut *self.term, top, bottom)
    }
    fn set_active_charset(&mut self, a0: CharsetIndex) {
        self.tracked.active_charset = a0;
        Handler::set_active_charset(&mut *self.term, a0)
    }
    fn reset_state(&mut self) {
        *self.tracked = Tracked::default();
        *self.history_cleared = true;
        Handler::reset_state(&mut *self.term)
    }
    fn set_private_mode(&mut self, a0: PrivateMode) {
        if a0.raw() == URXVT_MOUSE {
            self.tracked.urxvt_mouse = true;
        }
        Handler::set_private_mode(&mut *self.term, a0)
    }
    fn unset_private_mode(&mut self, a0: PrivateMode) {
        if a0.raw() == URXVT_MOUSE {
            self.tracked.urxvt_mouse = false;
        }
        Handler::unset_private_mode(&mut *self.term, a0)
    }
    fn set_title(&mut self, a0: Option<String>) {
        Handler::set_title(&mut *self.term, a0)
    }
    fn set_cursor_style(&mut self, a0: Option<CursorStyle>) {
        self.tracked.cursor_style_set = a0.is_some();
        Handler::set_cursor_style(&mut *self.term, a0)
    }
    fn set_cursor_shape(&mut self, a0: CursorShape) {
        self.tracked.cursor_style_set = true;
        Handler::set_cursor_shape(&mut *self.term, a0)
    }
    fn input(&mut self, a0: char) {
        Handler::input(&mut *self.term, a0)
    }
    fn goto(&mut self, a0: i32, a1: usize) {
        Handler::goto(&mut *self.term, a0, a1)
    }
    fn goto_line(&mut self, a0: i32) {
        Handler::goto_line(&mut *self.term, a0)
    }
    fn goto_col(&mut self, a0: usize) {
        Handler::goto_col(&mut *self.term, a0)
    }
    fn insert_blank(&mut self, a0: usize) {
        Handler::insert_blank(&mut *self.term, a0)
    }
    fn move_up(&mut self, a0: usize) {
        Handler::move_up(&mut *self.term, a0)
    }
    fn move_down(&mut self, a0: usize) {
        Handler::move_down(&mut *self.term, a0)
    }
    fn identify_terminal(&mut self, a0: Option<char>) {
        Handler::identify_terminal(&mut *self.term, a0)
    }
    fn device_status(&mut self, a0: usize) {
        Handler::device_status(&mut *self.term, a0)
    }
    fn move_forward(&mut self, a0: usize) {
        Handler::move_forward(&mut *self.term, a0)
    }
    fn move_backward(&mut self, a0: usize) {
        Handler::move_backward(&mut *self.term, a0)
    }
    fn move_down_and_cr(&mut self, a0: usize) {
        Handler::move_down_and_cr(&mut *self.term, a0)
    }
    fn move_up_and_cr(&mut self, a0: usize) {
        Handler::move_up_and_cr(&mut *self.term, a0)
    }
    fn put_tab(&mut self, a0: u16) {
        Handler::put_tab(&mut *self.term, a0)
    }
    fn backspace(&mut self) {
        Handler::backspace(&mut *self.term)
    }
    fn carriage_return(&mut self) {
        Handler::carriage_return(&mut *self.term)
    }
    fn linefeed(&mut self) {
        Handler::linefeed(&mut *self.term)
    }
    fn bell(&mut self) {
        Handler::bell(&mut *self.term)
    }
    fn substitute(&mut self) {
        Handler::substitute(&mut *self.term)
    }
    fn newline(&mut self) {
        Handler::newline(&mut *self.term)
    }
    fn set_horizontal_tabstop(&mut self) {
        Handler::set_horizontal_tabstop(&mut *self.term)
    }
    fn scroll_up(&mut self, a0: usize) {
        Handler::scroll_up(&mut *self.term, a0)
    }
    fn scroll_down(&mut self, a0: usize) {
        Handler::scroll_down(&mut *self.term, a0)
    }
    fn insert_blank_lines(&mut self, a0: usize) {
        Handler::insert_blank_lines(&mut *self.term, a0)
    }
    fn delete_lines(&mut self, a0: usize) {
        Handler::delete_lines(&mut *self.term, a0)
    }
    fn erase_chars(&mut self, a0: usize) {
        Handler::erase_chars(&mut *self.term, a0)
    }
    fn delete_chars(&mut self, a0: usize) {
        Handler::delete_chars(&mut *self.term, a0)
    }
    fn move_backward_tabs(&mut self, a0: u16) {
        Handler::move_backward_tabs(&mut *self.term, a0)
    }
    fn move_forward_tabs(&mut self, a0: u16) {
        Handler::move_forward_tabs(&mut *self.term, a0)
    }
    fn save_cursor_position(&mut self) {
        Handler::save_cursor_position(&mut *self.term)
    }
    fn restore_cursor_position(&mut self) {
        Handler::restore_cursor_position(&mut *self.term)
    }
    fn clear_line(&mut self, a0: LineClearMode) {
        Handler::clear_line(&mut *self.term, a0)
    }
    fn clear_screen(&mut self, a0: ClearMode) {
        // The core clears the history of the grid in use only: in the alternate screen that
        // is the alternate grid's, which has none, and the primary's history stays.
        if matches!(a0, ClearMode::Saved) && !self.term.mode().contains(TermMode::ALT_SCREEN) {
            *self.history_cleared = true;
        }
        Handler::clear_screen(&mut *self.term, a0)
    }
    fn clear_tabs(&mut self, a0: TabulationClearMode) {
        Handler::clear_tabs(&mut *self.term, a0)
    }
    fn set_tabs(&mut self, a0: u16) {
        Handler::set_tabs(&mut *self.term, a0)
    }
    fn reverse_index(&mut self) {
        Handler::reverse_index(&mut *self.term)
    }
    fn terminal_attribute(&mut self, a0: Attr) {
        Handler::terminal_attribute(&mut *self.term, a0)
    }
    fn set_mode(&mut self, a0: Mode) {
        Handler::set_mode(&mut *self.term, a0)
    }
    fn unset_mode(&mut self, a0: Mode) {
        Handler::unset_mode(&mut *self.term, a0)
    }
    fn report_mode(&mut self, a0: Mode) {
        Handler::report_mode(&mut *self.term, a0)
    }
    fn report_private_mode(&mut self, a0: PrivateMode) {
        Handler::report_private_mode(&mut *self.term, a0)
    }
    fn set_keypad_application_mode(&mut self) {
        Handler::set_keypad_application_mode(&mut *self.term)
    }
    fn unset_keypad_application_mode(&mut self) {
        Handler::unset_keypad_application_mode(&mut *self.term)
    }
    fn configure_charset(&mut self, a0: CharsetIndex, a1: StandardCharset) {
        Handler::configure_charset(&mut *self.term, a0, a1)
    }
    fn set_color(&mut self, a0: usize, a1: Rgb) {
        Handler::set_color(&mut *self.term, a0, a1)
    }
    fn dynamic_color_sequence(&mut self, a0: String, a1: usize, a2: &str) {
        Handler::dynamic_color_sequence(&mut *self.term, a0, a1, a2)
    }
    fn reset_color(&mut self, a0: usize) {
        Handler::reset_color(&mut *self.term, a0)
    }
    fn clipboard_store(&mut self, a0: u8, a1: &[u8]) {
        Handler::clipboard_store(&mut *self.term, a0, a1)
    }
    fn clipboard_load(&mut self, a0: u8, a1: &str) {
        Handler::clipboard_load(&mut *self.term, a0, a1)
    }
    fn decaln(&mut self) {
        Handler::decaln(&mut *self.term)
    }
    fn push_title(&mut self) {
        Handler::push_title(&mut *self.term)
    }
    fn pop_title(&mut self) {
        Handler::pop_title(&mut *self.term)
    }
    fn text_area_size_pixels(&mut self) {
        Handler::text_area_size_pixels(&mut *self.term)
    }
    fn text_area_size_chars(&mut self) {
        Handler::text_area_size_chars(&mut *self.term)
    }
    fn set_hyperlink(&mut self, a0: Option<Hyperlink>) {
        Handler::set_hyperlink(&mut *self.term, a0)
    }
    fn set_mouse_cursor_icon(&mut self, a0: CursorIcon) {
        Handler::set_mouse_cursor_icon(&mut *self.term, a0)
    }
    fn report_keyboard_mode(&mut self) {
        Handler::report_keyboard_mode(&mut *self.term)
    }
    fn push_keyboard_mode(&mut self, a0: KeyboardModes) {
        Handler::push_keyboard_mode(&mut *self.term, a0)
    }
    fn pop_keyboard_modes(&mut self, a0: u16) {
        Handler::pop_keyboard_modes(&mut *self.term, a0)
    }
    fn set_keyboard_mode(&mut self, a0: KeyboardModes, a1: KeyboardModesApplyBehavior) {
        Handler::set_keyboard_mode(&mut *self.term, a0, a1)
    }
    fn set_modify_other_keys(&mut self, a0: ModifyOtherKeys) {
        Handler::set_modify_other_keys(&mut *self.term, a0)
    }
    fn report_modify_other_keys(&mut self) {
        Handler::report_modify_other_keys(&mut *self.term)
    }
    fn set_scp(&mut self, a0: ScpCharPath, a1: ScpUpdateMode) {
        Handler::set_scp(&mut *self.term, a0, a1)
    }
}
