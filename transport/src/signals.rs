//! Signal set-up for the processes belfry starts and runs: a child program starts with every
//! signal at its default and unblocked, and a daemon or pane host unblocks what it inherited.

/// Sets every signal the kernel lets a process change to its default action and unblocks them
/// all: the start of a pane's program (see `Pane::spawn_child`) and of a DING adapter. Through
/// the system call itself, because the C library refuses to touch signals 32 and 33, which it
/// keeps for its threads, and an ignored one would pass to the program too; nothing runs
/// between this and the exec to need them. Errors are ignored: a signal that cannot be set
/// keeps what it had. Async-signal-safe (two system calls per signal, nothing allocated), for
/// a `pre_exec`.
pub fn default_signals() -> std::io::Result<()> {
    // Linux numbers its signals 1 to 64; the kernel's sigset is 8 bytes.
    const LAST_SIGNAL: libc::c_long = 64;
    const SIGSET_BYTES: libc::c_long = 8;
    // The kernel's `struct sigaction` (handler, flags, restorer where the architecture has
    // one, mask), all words: zeroed, it is SIG_DFL with no flags and an empty mask.
    let default_action = [0u64; 4];
    let none = 0u64;
    for signal in 1..=LAST_SIGNAL {
        if signal == libc::SIGKILL as libc::c_long || signal == libc::SIGSTOP as libc::c_long {
            continue;
        }
        // SAFETY: rt_sigaction reads `default_action` (alive for the call, at least as large as
        // the kernel's struct) and writes nothing (null old action); a raw system call is
        // async-signal-safe.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                default_action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                SIGSET_BYTES,
            );
        }
    }
    // SAFETY: rt_sigprocmask reads the 8-byte empty set `none` (alive for the call) and
    // writes nothing (null old set).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as libc::c_long,
            &none as *const u64,
            std::ptr::null_mut::<u64>(),
            SIGSET_BYTES,
        );
    }
    Ok(())
}

/// Unblocks every signal in the calling thread, for a process that handles its own (the
/// daemon and the pane host: SIGTERM ends them in order). A signal blocked by whatever started
/// belfry would otherwise stay blocked through the exec and in every thread started after
/// this, so a `kill` of the daemon or a pane host would stay pending for ever. Call it before
/// any other thread exists. Dispositions are left as they are: what the process was started
/// ignoring (`nohup`'s SIGHUP) it may go on ignoring, and its own handlers replace the rest.
pub fn unblock_signals() {
    // SAFETY: sigemptyset initialises the set it is given; pthread_sigmask reads that set
    // (alive for the call) and writes nothing (null old set).
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}
