//! Copy mode's ends (issue 46): what the history view's selection becomes when copied (the
//! client's paste buffer, and the outer terminal's clipboard through OSC 52), and what
//! `prefix ]` types into the pane from that buffer.

use base64::Engine;

/// The most the paste buffer keeps, and the most sent through OSC 52 (terminals cap it too:
/// tmux at about 1 MB, xterm by its `maxBufSize`).
pub(super) const COPY_MAX: usize = 1 << 20;

/// The bytes that put `text` on the outer terminal's clipboard: OSC 52 for the clipboard
/// (`c`), the text in base64, ended with BEL, which every terminal that knows OSC 52 takes.
pub(super) fn osc52(text: &str) -> Vec<u8> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("\x1b]52;c;{encoded}\x07").into_bytes()
}

/// The text copied, as the paste buffer keeps it: at most [`COPY_MAX`] bytes, cut at a
/// character's start.
pub(super) fn kept(mut text: String) -> String {
    if text.len() > COPY_MAX {
        let mut end = COPY_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// What `prefix ]` sends the pane for the buffer `text`: its lines ended with a carriage
/// return (Enter, as a terminal pastes them), between the bracketed paste markers when the
/// program asked for them. The text's own controls are dropped (a tab stays), so what was
/// copied from the screen can never end the paste early or type an escape sequence.
pub(super) fn paste_bytes(text: &str, bracketed: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 12);
    if bracketed {
        out.extend_from_slice(b"\x1b[200~");
    }
    for c in text.chars() {
        match c {
            '\n' => out.push(b'\r'),
            '\t' => out.push(b'\t'),
            c if c.is_control() => {}
            c => {
                let mut utf8 = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
    if bracketed {
        out.extend_from_slice(b"\x1b[201~");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_goes_to_the_clipboard_in_osc_52_and_pastes_back_bracketed_without_controls() {
        assert_eq!(osc52("hi\nyou"), b"\x1b]52;c;aGkKeW91\x07");
        assert_eq!(paste_bytes("ls -l\ncd é", false), b"ls -l\rcd \xc3\xa9");
        assert_eq!(
            paste_bytes("a\x1b[201~b\x07\tc", true),
            b"\x1b[200~a[201~b\tc\x1b[201~"
        );
        let long = "é".repeat(COPY_MAX);
        let cut = kept(long);
        assert!(cut.len() <= COPY_MAX && cut.chars().all(|c| c == 'é'));
    }
}
