//! The entry point of the coverage-guided fuzz target `attach_keys` in `fuzz/` (feature
//! `fuzzing`; never in a release build).
//!
//! [`attach_keys`] gives the attach client's keystroke readers ([`KeyFilter`] and
//! [`ViewKeys`]) what a terminal may send, cut into reads any way, and panics where they would
//! answer it wrongly:
//! - **however it is cut**: the bytes for the pane, and whether and how the client leaves
//!   (detach, a binding), are the same as when all of it came in one read; so are the keys a
//!   view reads, and the keys after a binding, which go to what the binding opens;
//! - **a view hands on what is not its own**: the bytes after a key that closes a view, read
//!   afresh, are the keys that followed it;
//! - **nothing invented**: what reaches the pane is the keystrokes typed, in order, with some
//!   left out (the detach key, the bindings);
//! - **nothing lost**: keys with no Escape and no prefix byte in them all reach the pane;
//! - **the way out always works**: after any input that did not end the session, the detach
//!   key, typed as the legacy encoding sends it, detaches.

use crate::keys::{Action, DetachKey, KeyFilter, ViewKey, ViewKeys};

/// The detach keys the script picks from by its first byte: a prefix with a key after it, a
/// key alone, each control key the parser accepts, and a digit that an escape sequence's
/// parameters also hold.
const DETACH_KEYS: [&str; 6] = ["C-b d", "C-b", "C-a q", "C-q", "C-\\ x", "C-] 1"];

/// Plays `data` as keystrokes through the attach client's readers and panics at the first
/// property that does not hold (see the module's documentation).
///
/// The script: a byte that picks the detach key, then reads until the bytes run out, each a
/// length byte and that many bytes of input. Returns how many reads it played.
pub fn attach_keys(data: &[u8]) -> usize {
    let Some((&pick, mut rest)) = data.split_first() else {
        return 0;
    };
    let spec = DETACH_KEYS[usize::from(pick) % DETACH_KEYS.len()];
    let key = match DetachKey::parse(spec) {
        Ok(key) => key,
        Err(err) => panic!("{spec:?} does not parse: {err:#}"),
    };
    let mut reads: Vec<&[u8]> = Vec::new();
    while let Some((&len, after)) = rest.split_first() {
        let (read, after) = after.split_at(usize::from(len).min(after.len()));
        reads.push(read);
        rest = after;
    }
    let stream = reads.concat();
    let shown = String::from_utf8_lossy(&stream).into_owned();

    let (cut, cut_ended, cut_filter, cut_after) = filter_reads(key, &reads);
    let (whole, whole_ended, _, whole_after) = filter_reads(key, &[&stream]);
    assert_eq!(
        cut, whole,
        "{spec}: the pane's bytes depend on the reads, {shown:?}"
    );
    assert_eq!(
        cut_ended, whole_ended,
        "{spec}: leaving depends on the reads, {shown:?}"
    );
    assert_eq!(
        cut_after, whole_after,
        "{spec}: the keys after a binding depend on the reads, {shown:?}"
    );
    assert!(
        stream.ends_with(&cut_after),
        "{spec}: the keys after a binding are not what was typed after it, {shown:?}"
    );
    assert!(
        is_subsequence(&cut, &stream),
        "{spec}: bytes reached the pane that were not typed in that order, {shown:?} gave {:?}",
        String::from_utf8_lossy(&cut)
    );
    if !stream.contains(&0x1b) && !stream.contains(&key.prefix) {
        assert_eq!(cut, stream, "{spec}: plain keys were held back");
        assert_eq!(
            cut_ended,
            Action::None,
            "{spec}: plain keys left, {shown:?}"
        );
    }
    if cut_ended == Action::None {
        let mut filter = cut_filter;
        if !filter.holds_keys() {
            let mut typed = vec![key.prefix];
            typed.extend(key.then);
            let mut out = Vec::new();
            let action = filter.feed(&typed, &mut out);
            assert_eq!(
                (action, out.as_slice()),
                (Action::Detach, &b""[..]),
                "{spec}: the detach key did not detach after {shown:?}"
            );
        }
    }

    let cut_keys = view_reads(&reads);
    let whole_keys = view_reads(&[&stream]);
    assert_eq!(
        cut_keys, whole_keys,
        "the view's keys depend on the reads, {shown:?}"
    );
    assert!(cut_keys.len() <= stream.len(), "more keys than bytes");
    if !cut_keys.is_empty() {
        let index = usize::from(pick) % cut_keys.len();
        if let Some(rest) = view_leaving_at(&reads, index) {
            assert_eq!(
                view_reads(&[&rest]),
                whole_keys[index + 1..],
                "the bytes after a view's key {index} are not the keys after it, {shown:?}"
            );
        }
    }
    reads.len()
}

/// The keystrokes fed to a new filter one read after another, as the attach client feeds
/// them (no pause between reads, then a flush once no more come): the bytes sent to the pane,
/// the action that ended the session or opened a view (`Action::None` if none did), the
/// filter, and after a binding what the binding's view or pane reads next (the keys after it
/// in its read and every read after that).
fn filter_reads(key: DetachKey, reads: &[&[u8]]) -> (Vec<u8>, Action, KeyFilter, Vec<u8>) {
    let mut filter = KeyFilter::new(key);
    let mut out = Vec::new();
    for (at, read) in reads.iter().enumerate() {
        match filter.feed(read, &mut out) {
            ended @ Action::Detach => return (out, ended, filter, Vec::new()),
            ended @ Action::Bound(_) => {
                let mut after = filter.after_binding();
                after.extend(reads[at + 1..].concat());
                return (out, ended, filter, after);
            }
            Action::None | Action::Show(_) => {}
        }
    }
    let ended = match filter.flush(&mut out) {
        ended @ (Action::Detach | Action::Bound(_)) => ended,
        Action::None | Action::Show(_) => Action::None,
    };
    let after = filter.after_binding();
    (out, ended, filter, after)
}

/// The keys a view reads from `reads`, then from its flush.
fn view_reads(reads: &[&[u8]]) -> Vec<ViewKey> {
    let mut keys = ViewKeys::default();
    let mut read = Vec::new();
    for input in reads {
        read.extend(keys.feed(input).keys());
    }
    read.extend(keys.flush().keys());
    read
}

/// A view reading `reads` that closes at its key `index` (counting every key it read, the
/// flush's too): what it hands on ([`ViewKeys::leave`]) with every read after, or `None` when
/// that key is pasted text, which never closes a view.
fn view_leaving_at(reads: &[&[u8]], index: usize) -> Option<Vec<u8>> {
    let mut keys = ViewKeys::default();
    let mut seen = 0;
    for (at, input) in reads.iter().enumerate() {
        let read = keys.feed(input);
        let count = read.keys().count();
        if index < seen + count {
            let key = read.keys().nth(index - seen)?;
            if matches!(key, ViewKey::Pasted(_)) {
                return None;
            }
            let mut rest = keys.leave(&read, index - seen);
            rest.extend(reads[at + 1..].concat());
            return Some(rest);
        }
        seen += count;
    }
    let read = keys.flush();
    let key = read.keys().nth(index - seen)?;
    if matches!(key, ViewKey::Pasted(_)) {
        return None;
    }
    Some(keys.leave(&read, index - seen))
}

/// Whether `part` is `whole` with some bytes left out, the rest in order.
fn is_subsequence(part: &[u8], whole: &[u8]) -> bool {
    let mut whole = whole.iter();
    part.iter().all(|b| whole.any(|w| w == b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script: the detach key's index, then each read with its length in front.
    fn script(key: u8, reads: &[&[u8]]) -> Vec<u8> {
        let mut data = vec![key];
        for read in reads {
            data.push(read.len() as u8);
            data.extend_from_slice(read);
        }
        data
    }

    #[test]
    fn the_target_plays_every_read() {
        // Typing, the prefix in the kitty encoding cut in its parameters, `prefix ?`, an
        // arrow key cut after `ESC [` and an SS3 one after `ESC O`.
        let reads: [&[u8]; 7] = [
            b"ls -l",
            b"\x1b[98;",
            b"5u?",
            b"\r\x1b[",
            b"A\x1bO",
            b"B",
            b"\x1b",
        ];
        for key in 0..DETACH_KEYS.len() as u8 {
            assert_eq!(attach_keys(&script(key, &reads)), 7, "{key}");
        }
        // Detaching ends it: what follows is not looked at, however it is cut.
        assert_eq!(attach_keys(&script(0, &[b"ab\x02", b"dcd"])), 2);
        assert_eq!(attach_keys(b""), 0);
    }

    #[test]
    fn a_view_reads_a_key_cut_across_reads_as_one() {
        use ViewKey::*;
        assert_eq!(view_reads(&[b"\x1b[", b"A"]), vec![Up]);
        assert_eq!(view_reads(&[b"\x1bO", b"B"]), vec![Down]);
        assert_eq!(
            view_reads(&[b"\x1b", b"[5", b"~q"]),
            vec![PageUp, Byte(b'q')]
        );
        // A lone Escape, flushed: the view closes on it.
        assert_eq!(view_reads(&[b"q\x1b"]), vec![Byte(b'q'), Byte(0x1b)]);
    }

    /// Found by the fuzz target: `ESC O` then an Escape was read as one SS3 key (with the
    /// Escape as its final byte) in one read, and as Escape and `O` when the reads were cut
    /// between `ESC O` and the next Escape.
    #[test]
    fn an_escape_after_esc_o_is_a_key_of_its_own_however_cut() {
        let found = [
            0xfe, 0x02, 0x7e, 0x1b, 0x02, 0x4f, 0x1b, 0xff, 0xff, 0x1b, 0x02, 0xff, 0x5d, 0x0b,
            0x4f, 0x41,
        ];
        assert_eq!(attach_keys(&found), 3);
        use ViewKey::*;
        assert_eq!(
            view_reads(&[b"\x1bO\x1b[A"]),
            vec![Byte(0x1b), Byte(b'O'), Up]
        );
    }

    /// Random reads of keystroke pieces (the bytes a fuzzer would try first), through every
    /// property above: a seeded generator, so a failure repeats.
    #[test]
    fn random_keystrokes_cut_any_way() {
        const PIECES: [&[u8]; 16] = [
            b"\x1b", b"[", b"O", b"98", b";5", b"u", b"~", b"27;5;98", b":3", b"\x02", b"\x01",
            b"d", b"?", b"[A", b"x", b"57442",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let mut data = vec![(next() % 6) as u8];
            for _ in 0..(next() % 6) {
                let mut read = Vec::new();
                for _ in 0..(next() % 5) {
                    read.extend_from_slice(PIECES[(next() % 16) as usize]);
                }
                data.push(read.len() as u8);
                data.extend_from_slice(&read);
            }
            attach_keys(&data);
        }
    }
}
