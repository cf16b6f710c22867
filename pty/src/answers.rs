//! Terminal answers in attached clients' input (spec §4: a query is answered exactly once).
//! Every attached writable client's terminal sees the program's query in the output and
//! answers it; with two clients the program would get two answers. The pane host keeps the
//! answers from one client and uses this module to take them out of the others' input,
//! leaving their keystrokes.
//!
//! An answer is recognised by its shape, not by matching it to a query, so the caller only
//! asks for this shortly after the program sent a query: a cursor position report
//! (`CSI 1 ; 5 R`) has the shape of Ctrl-F3 in xterm's encoding.

/// Splits `input` into what is left after every terminal answer is taken out, and whether
/// it held anything but answers (keystrokes, which count as the client being active).
///
/// Answers: device attributes (`CSI ? … c`, `CSI > … c`), the cursor position
/// (`CSI row ; col R`, `CSI ? row ; col R`), a device status (`CSI … n`), a mode report
/// (`CSI ? … $ y`), the kitty keyboard flags (`CSI ? flags u`), window reports (`CSI … t`),
/// and every OSC (`ESC ] … BEL/ST`) and DCS (`ESC P … ST`) string. A sequence cut off at the
/// end of `input` is left in: it is more likely a key than an answer split across reads.
pub fn without_answers(input: &[u8]) -> (Vec<u8>, bool) {
    let mut kept = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match answer_len(&input[i..]) {
            Some(len) => i += len,
            None => {
                kept.push(input[i]);
                i += 1;
            }
        }
    }
    let keystrokes = !kept.is_empty();
    (kept, keystrokes)
}

/// The length of the terminal answer `input` starts with, if it starts with one.
fn answer_len(input: &[u8]) -> Option<usize> {
    match input {
        [0x1b, b'[', rest @ ..] => {
            let params = rest.iter().position(|b| !(0x30..=0x3f).contains(b))?;
            let inter = rest[params..]
                .iter()
                .position(|b| !(0x20..=0x2f).contains(b))?;
            let final_byte = *rest.get(params + inter)?;
            let (p, im) = (&rest[..params], &rest[params..params + inter]);
            let private = p.first().copied();
            let digits = |s: &[u8]| s.iter().all(|b| b.is_ascii_digit() || *b == b';');
            let answer = match (final_byte, im) {
                (b'c', []) => matches!(private, Some(b'?' | b'>')),
                (b'R', []) => {
                    let body = p.strip_prefix(b"?").unwrap_or(p);
                    body.contains(&b';') && digits(body)
                }
                (b'n', []) => digits(p),
                (b'y', [b'$']) => private == Some(b'?') || digits(p),
                (b'u', []) => private == Some(b'?'),
                (b't', []) => digits(p) && !p.is_empty(),
                _ => false,
            };
            answer.then_some(2 + params + inter + 1)
        }
        [0x1b, b']', rest @ ..] => string_end(rest, true).map(|n| 2 + n),
        [0x1b, b'P', rest @ ..] => string_end(rest, false).map(|n| 2 + n),
        _ => None,
    }
}

/// `input` without the OSC 7501 strings in it: a terminal's answers to the program status
/// query, which the pane host answers itself. A string cut off at the end of `input` stays,
/// as in [`without_answers`].
pub fn without_status_answers(input: Vec<u8>) -> Vec<u8> {
    const START: &[u8] = b"\x1b]7501;";
    if memchr::memmem::find(&input, START).is_none() {
        return input;
    }
    let mut kept = Vec::with_capacity(input.len());
    let mut rest = input.as_slice();
    while let Some(at) = memchr::memmem::find(rest, START) {
        kept.extend_from_slice(&rest[..at]);
        match string_end(&rest[at + 2..], true) {
            Some(len) => rest = &rest[at + 2 + len..],
            None => {
                rest = &rest[at..];
                break;
            }
        }
    }
    kept.extend_from_slice(rest);
    kept
}

/// The length of a control string's body and terminator (`ESC \`, or `BEL` for OSC).
fn string_end(body: &[u8], bel_ends: bool) -> Option<usize> {
    for (i, &b) in body.iter().enumerate() {
        match b {
            0x07 if bel_ends => return Some(i + 1),
            0x1b => return (body.get(i + 1) == Some(&b'\\')).then_some(i + 2),
            0x18 | 0x1a => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_taken_out_and_keystrokes_kept() {
        for answer in [
            &b"\x1b[?62;22c"[..],
            b"\x1b[>1;10;0c",
            b"\x1b[12;40R",
            b"\x1b[?12;40;1R",
            b"\x1b[0n",
            b"\x1b[?2004;1$y",
            b"\x1b[?1u",
            b"\x1b[8;24;80t",
            b"\x1b]11;rgb:0000/0000/0000\x1b\\",
            b"\x1b]10;rgb:ffff/ffff/ffff\x07",
            b"\x1bP>|tmux 3.3a\x1b\\",
            b"\x1bP0+r\x1b\\",
        ] {
            assert_eq!(without_answers(answer), (Vec::new(), false), "{answer:?}");
            let mut typed = b"a".to_vec();
            typed.extend_from_slice(answer);
            typed.push(b'b');
            assert_eq!(
                without_answers(&typed),
                (b"ab".to_vec(), true),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn a_terminals_program_status_answer_is_taken_out_and_the_rest_kept() {
        assert_eq!(
            without_status_answers(
                b"a\x1b]7501;?\x1b\\b\x1b]7501;?\x07c\x1b]11;rgb:0/0/0\x07".to_vec()
            ),
            b"abc\x1b]11;rgb:0/0/0\x07".to_vec()
        );
        assert_eq!(
            without_status_answers(b"x\x1b]7501;?".to_vec()),
            b"x\x1b]7501;?".to_vec()
        );
    }

    #[test]
    fn keys_are_not_answers() {
        for key in [
            &b"\x1b[A"[..],
            b"\x1b[1;5C",
            b"\x1b[98;5u",
            b"\x1b[27;5;98~",
            b"\x1b[200~text\x1b[201~",
            b"\x1bP",
            b"\x1b]",
            b"\x1b[12;40",
            b"\x1b",
            b"\x02d",
        ] {
            assert_eq!(without_answers(key), (key.to_vec(), true), "{key:?}");
        }
    }
}
