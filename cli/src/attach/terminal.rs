//! The outer terminal, as the attach client sees it: the [`Terminal`] trait the session
//! writes to and asks the size of ([`Stdout`] is the real one; the session's tests use a
//! recording one), the [`Keyboard`] it reads, and the descriptors offered to the pane host
//! (the terminal opened again for its output, the keyboard). A file of its own so the
//! session's logic is apart from the system calls that reach a real terminal.

use super::record::SharedOuter;
use super::terminal_size;

/// What the attach session writes to and asks of the outer terminal.
pub(super) trait Terminal {
    /// Writes `bytes` as they are (recording them is the caller's).
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Writes `parts` in order, in as few system calls as it takes.
    fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()>;
    /// The terminal's size as `(rows, cols)`; `None` when it cannot be read.
    fn size(&self) -> Option<(u16, u16)>;
}

/// The terminal on this process's stdout.
pub(super) struct Stdout;

impl Terminal for Stdout {
    /// One `write(2)` per chunk where the terminal takes it, with no line buffering (std's
    /// stdout would split every chunk at its last newline) and no blocking-pool hop.
    fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        let stdout = rustix::stdio::stdout();
        while !bytes.is_empty() {
            match rustix::io::write(stdout, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut slices = belfry_pty::terminal::io_slices(parts.iter().copied());
        let mut rest = &mut slices[..];
        belfry_pty::terminal::writev_some(rustix::stdio::stdout(), &mut rest)?;
        if !rest.is_empty() {
            // stdout is blocking; only a descriptor some other program made non-blocking stops here.
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(())
    }

    fn size(&self) -> Option<(u16, u16)> {
        terminal_size()
    }
}

/// Writes `bytes` to the terminal on stdout, recorded in `outer`.
pub(super) fn write_terminal(bytes: &[u8], outer: &SharedOuter) -> std::io::Result<()> {
    if let Ok(mut outer) = outer.lock() {
        outer.observe(bytes);
    }
    Stdout.write(bytes)
}

/// The terminal the pane host is handed on attach: the terminal on stdout opened again as a
/// new open file description (`/proc/self/fd/1`), non-blocking, so the pane host's writes
/// never change the flags of the descriptor the shell shares. `None` (the output then comes
/// in frames) when stdout is not a terminal, cannot be opened again, or
/// `BELFRY_ATTACH_HANDOVER=0` asks for frames.
pub(super) fn output_terminal() -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    if std::env::var_os("BELFRY_ATTACH_HANDOVER").is_some_and(|v| v == "0") {
        return None;
    }
    if !rustix::termios::isatty(rustix::stdio::stdout()) {
        return None;
    }
    let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    rustix::fs::open("/proc/self/fd/1", flags, Mode::empty()).ok()
}

/// Whether the pane host may read the keyboard as well as write the terminal (the default);
/// `BELFRY_ATTACH_INPUT=0` keeps every keystroke in this client.
pub(super) fn keyboard_handover() -> bool {
    std::env::var_os("BELFRY_ATTACH_INPUT").is_none_or(|v| v != "0")
}

/// Capacity of the attach stream's frame reader: several batches of a pane host's output, so
/// the frames a pane host writes in one batch arrive in one read and go to the terminal in one
/// write (see `write_output`).
pub(super) const READ_BUFFER: usize = 256 * 1024;

/// The terminal's input, read on the runtime. The terminal is opened again
/// (`/proc/self/fd/0`) as a new open file description, so it can be non-blocking without
/// changing the descriptor the shell shares; where that is impossible, stdin itself is made
/// non-blocking and its flags are put back when the keyboard is dropped.
pub(super) struct Keyboard {
    pub(super) fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    /// stdin's flags before they were changed (only when stdin itself is read).
    restore: Option<rustix::fs::OFlags>,
    buf: Box<[u8; 4096]>,
}

impl Keyboard {
    /// Must run inside the runtime (the descriptor is registered with its reactor).
    pub(super) fn open() -> std::io::Result<Keyboard> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let (fd, restore) = match rustix::fs::open("/proc/self/fd/0", flags, Mode::empty()) {
            Ok(fd) => (fd, None),
            Err(_) => {
                let stdin = rustix::stdio::stdin();
                let before = rustix::fs::fcntl_getfl(stdin)?;
                let fd = rustix::io::fcntl_dupfd_cloexec(stdin, 3)?;
                rustix::fs::fcntl_setfl(&fd, before | OFlags::NONBLOCK)?;
                (fd, Some(before))
            }
        };
        let fd = belfry_pty::terminal::register_reader(fd)?;
        Ok(Keyboard {
            fd,
            restore,
            buf: Box::new([0; 4096]),
        })
    }

    /// The next keystrokes; `None` once the terminal gives no more input. Cancel-safe: the
    /// read happens only after readiness, inside one poll.
    async fn read(&mut self) -> Option<Vec<u8>> {
        let n = belfry_pty::terminal::read_ready(&self.fd, &mut self.buf[..]).await?;
        Some(self.buf[..n].to_vec())
    }
}

impl Drop for Keyboard {
    fn drop(&mut self) {
        if let Some(flags) = self.restore {
            let _ = rustix::fs::fcntl_setfl(rustix::stdio::stdin(), flags);
        }
    }
}

/// The next keystrokes of the keyboard, or never when there is none.
pub(super) async fn read_keys(keyboard: &mut Option<Keyboard>) -> Option<Vec<u8>> {
    match keyboard.as_mut() {
        Some(keyboard) => keyboard.read().await,
        None => std::future::pending().await,
    }
}

/// Splits the terminal's OSC 10 and 11 answers (`ESC ] 10 ; … BEL/ST`) out of `input`: the
/// rest is keystrokes.
pub(super) fn take_color_answers(input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut rest, mut answers) = (Vec::with_capacity(input.len()), Vec::new());
    let mut i = 0;
    while i < input.len() {
        let tail = &input[i..];
        if tail.starts_with(b"\x1b]10;") || tail.starts_with(b"\x1b]11;") {
            let end = tail
                .iter()
                .enumerate()
                .skip(2)
                .find_map(|(at, &b)| match b {
                    0x07 => Some(at + 1),
                    0x1b if tail.get(at + 1) == Some(&b'\\') => Some(at + 2),
                    _ => None,
                });
            if let Some(end) = end {
                answers.extend_from_slice(&tail[..end]);
                i += end;
                continue;
            }
        }
        rest.push(input[i]);
        i += 1;
    }
    (rest, answers)
}
