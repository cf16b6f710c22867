//! A minimal PTY toolkit for the benchmarks: open a PTY pair, start a program on its slave as
//! the session leader with the PTY as its controlling terminal, and read the master with a
//! timeout. Plain libc, so the measurement carries no async runtime or terminal model.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A PTY pair. Both descriptors are close-on-exec.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens a PTY of `rows` × `cols`.
pub fn open(rows: u16, cols: u16) -> io::Result<Pty> {
    // SAFETY: plain libc calls on descriptors this function owns; each returned descriptor is
    // wrapped in an `OwnedFd` as soon as it exists, and `name` is a NUL-terminated buffer that
    // outlives the `open` call reading it.
    unsafe {
        let m = check(libc::posix_openpt(
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?;
        let master = OwnedFd::from_raw_fd(m);
        check(libc::grantpt(m))?;
        check(libc::unlockpt(m))?;
        let mut name = [0 as libc::c_char; 128];
        let err = libc::ptsname_r(m, name.as_mut_ptr(), name.len());
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
        let s = check(libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        ))?;
        let slave = OwnedFd::from_raw_fd(s);
        let ws = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        check(libc::ioctl(m, libc::TIOCSWINSZ, &ws))?;
        Ok(Pty { master, slave })
    }
}

/// Puts a terminal in raw mode (`cfmakeraw`: no echo, no line discipline, no output
/// processing), as an attach client does to its own terminal.
pub fn make_raw(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: `tio` is a valid, writable termios for both calls; `fd` is an open descriptor.
    unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        check(libc::tcgetattr(fd.as_raw_fd(), &mut tio))?;
        libc::cfmakeraw(&mut tio);
        check(libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, &tio))?;
    }
    Ok(())
}

/// Starts `argv` with the slave as stdin, stdout, stderr and controlling terminal.
pub fn spawn(argv: &[String], slave: &OwnedFd, env: &[(String, String)]) -> io::Result<Child> {
    let Some(program) = argv.first() else {
        return Err(io::Error::other("empty command"));
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..])
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    for (key, value) in env {
        cmd.env(key, value);
    }
    // SAFETY: setsid and ioctl are async-signal-safe and allocate nothing; fd 0 is the slave
    // (stdio is set up before pre_exec runs).
    unsafe {
        cmd.pre_exec(|| {
            check(libc::setsid())?;
            check(libc::ioctl(0, libc::TIOCSCTTY, 0))?;
            Ok(())
        });
    }
    cmd.spawn()
}

/// What one bounded read of the master gave.
pub enum Read {
    Data(usize),
    /// End of output: EOF or EIO (every slave descriptor is closed).
    End,
    Timeout,
}

/// Waits up to `timeout` for the master to be readable, then reads once.
pub fn read_timeout(fd: RawFd, buf: &mut [u8], timeout: Duration) -> io::Result<Read> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `pfd` is a valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
    if ready < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(Read::Timeout);
        }
        return Err(err);
    }
    if ready == 0 {
        return Ok(Read::Timeout);
    }
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EIO) => Ok(Read::End),
            Some(libc::EINTR) | Some(libc::EAGAIN) => Ok(Read::Data(0)),
            _ => Err(err),
        };
    }
    if n == 0 {
        return Ok(Read::End);
    }
    Ok(Read::Data(n as usize))
}

/// Reads and discards everything available right now (non-blocking). Returns the byte count.
pub fn drain(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut total = 0;
    for _ in 0..10_000 {
        match read_timeout(fd, buf, Duration::ZERO)? {
            Read::Data(n) if n > 0 => total += n,
            _ => break,
        }
    }
    Ok(total)
}

/// Writes all of `bytes`.
pub fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    for _ in 0..100_000 {
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: `bytes` is valid for reads of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        bytes = &bytes[n as usize..];
    }
    Err(io::Error::other("write made no progress"))
}

/// Waits up to `grace` for the child, then kills it. Returns its status when it ended.
pub fn reap(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// Set by SIGTERM / SIGINT / SIGHUP: the long-running subcommands stop at their next poll.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the stop handler for SIGTERM, SIGINT and SIGHUP.
pub fn install_stop_handler() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(signal, on_stop as *const () as libc::sighandler_t);
        }
    }
}

pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The raw descriptor of an owned one (for the poll helpers).
pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}
