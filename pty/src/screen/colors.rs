//! The colours attached terminals report (OSC 4, 10, 11, 12 answers): read from a client's
//! input, learned by the model, and given as the answers to the program's colour queries while
//! no client is attached. A file of its own because it is a small parser with its own
//! defaults.

use alacritty_terminal::vte::ansi::Rgb;

use super::Screen;

/// The colour a query is answered with: xterm's defaults, light text on black.
pub(super) fn default_color(index: usize) -> Rgb {
    const BASE: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let (r, g, b) = match index {
        0..=15 => BASE[index],
        16..=231 => {
            let i = index - 16;
            let level = |v: usize| if v == 0 { 0 } else { (55 + v * 40) as u8 };
            (level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        232..=255 => {
            let v = (8 + (index - 232) * 10) as u8;
            (v, v, v)
        }
        257 => (0, 0, 0),
        _ => (229, 229, 229),
    };
    Rgb { r, g, b }
}

/// The colours an OSC colour answer reports (`ESC ] 10 ; rgb:… ST`, `ESC ] 4 ; N ; rgb:… ST`,
/// for OSC 10, 11, 12 and 4), as the terminal core's colour index (foreground 256, background
/// 257, cursor 258, palette 0-255) and the colour. Anything else in `bytes` is skipped.
pub fn color_answers(bytes: &[u8]) -> Vec<(usize, Rgb)> {
    let mut found = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    for part in text.split("\x1b]").skip(1) {
        let body = part.split(['\x07', '\x1b']).next().unwrap_or_default();
        let fields: Vec<&str> = body.split(';').collect();
        let (index, spec) = match fields.as_slice() {
            ["10", spec] => (256, *spec),
            ["11", spec] => (257, *spec),
            ["12", spec] => (258, *spec),
            ["4", n, spec] => match n.parse::<usize>() {
                Ok(n) if n < 256 => (n, *spec),
                _ => continue,
            },
            _ => continue,
        };
        if let Some(rgb) = parse_rgb(spec) {
            found.push((index, rgb));
        }
    }
    found
}

/// `rgb:R/G/B` with 1 to 4 hex digits a component (X11's colour syntax, as terminals answer),
/// scaled to 8 bits.
fn parse_rgb(spec: &str) -> Option<Rgb> {
    let parts: Vec<&str> = spec.strip_prefix("rgb:")?.split('/').collect();
    let [r, g, b] = parts.as_slice() else {
        return None;
    };
    let component = |hex: &str| -> Option<u8> {
        if hex.is_empty() || hex.len() > 4 {
            return None;
        }
        let value = u32::from_str_radix(hex, 16).ok()?;
        let max = (1u32 << (4 * hex.len())) - 1;
        u8::try_from((value * 255 + max / 2) / max).ok()
    };
    Some(Rgb {
        r: component(r)?,
        g: component(g)?,
        b: component(b)?,
    })
}

impl Screen {
    /// Remembers the colours an attached terminal reported (see [`color_answers`]), to answer
    /// the program's colour queries with them while no client is attached.
    pub fn learn_colors(&mut self, bytes: &[u8]) {
        let answers = color_answers(bytes);
        if !answers.is_empty() {
            self.listener.colors.lock().extend(answers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_answers_are_read_in_every_form_terminals_send() {
        let answers = color_answers(
            b"x\x1b]11;rgb:2828/2c2c/3434\x1b\\\x1b]10;rgb:ff/80/0\x07\x1b]4;1;rgb:cd/00/00\x1b\\\x1b]11;?\x07\x1b]10;bad\x07",
        );
        assert_eq!(
            answers,
            vec![
                (
                    257,
                    Rgb {
                        r: 0x28,
                        g: 0x2c,
                        b: 0x34
                    }
                ),
                (
                    256,
                    Rgb {
                        r: 0xff,
                        g: 0x80,
                        b: 0
                    }
                ),
                (
                    1,
                    Rgb {
                        r: 0xcd,
                        g: 0,
                        b: 0
                    }
                ),
            ]
        );
        // Once learned, the program's query is answered with the terminal's colour.
        let mut s = Screen::new(2, 10, 0);
        assert_eq!(
            s.apply(b"\x1b]11;?\x1b\\"),
            vec![b"\x1b]11;rgb:0000/0000/0000\x1b\\".to_vec()]
        );
        s.learn_colors(b"\x1b]11;rgb:2828/2c2c/3434\x1b\\");
        assert_eq!(
            s.apply(b"\x1b]11;?\x1b\\"),
            vec![b"\x1b]11;rgb:2828/2c2c/3434\x1b\\".to_vec()]
        );
    }
}
