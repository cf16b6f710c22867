//! `belfry proxy`: this process's stdin and stdout bridged to a belfry socket of this machine,
//! the far end of `belfry --host` (spec §6.2).
//!
//! Without `--pane` it bridges to the daemon's socket, starting the daemon on demand like any
//! command; with `--pane NAME` to that pane's host, for attach and its history view, which
//! talk to the pane host directly as they do locally (spec §6.0). The connection is made by
//! belfry's one client, so the socket's owner is checked (spec §6.1) before any byte of the
//! caller's goes to it; the SSH login is the user. After that, bytes are copied both ways
//! unchanged: NDJSON lines and the binary frames of an attach stream alike. The proxy opens
//! no listener and serves nobody but its own stdin.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::Result;

use belfry_proto::reply::AttachTarget;
use belfry_proto::request as op;
use belfry_proto::SessionName;
use belfry_transport::paths;

use crate::exit::EXIT_OK;

/// How long, after its stdin ends, the proxy still passes on what the socket sends: the
/// replies to the last requests. The longest of them, a `wait`, is bounded by the daemon's own
/// deadline; a stream that never ends (a subscription) is cut here.
const DRAIN_AFTER_EOF: Duration = Duration::from_secs(65);

/// Runs the bridge until either side ends.
pub fn run(pane: Option<&str>) -> Result<i32> {
    let runtime = paths::private_runtime_dir()?;
    let client = match pane {
        None => crate::cmd::daemon()?,
        Some(name) => {
            let session = SessionName::parse(name)?;
            let mut socket = paths::pane_socket(&runtime, name);
            if !socket.exists() {
                let target: AttachTarget = crate::cmd::ask(
                    &mut crate::cmd::daemon()?,
                    op::Attach {
                        session: Some(session),
                        ..op::Attach::default()
                    },
                )?;
                socket = target.socket.into();
            }
            belfry_mux::client::Client::connect(&socket)?
        }
    };
    let (reader, writer) = client.into_parts();
    bridge(reader, writer)
}

/// Copies stdin to the socket and the socket to stdout. The socket's end (or a failed write
/// to stdout: the ssh connection went away) ends the proxy; stdin's end is passed on as a
/// half-close, and the socket's last replies are still copied for [`DRAIN_AFTER_EOF`].
fn bridge(mut from_socket: std::io::BufReader<UnixStream>, to_socket: UnixStream) -> Result<i32> {
    let mut upstream = to_socket;
    let (eof_tx, eof_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if upstream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                // A descriptor left non-blocking by whoever shares it: wait, do not end.
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => break,
            }
        }
        let _ = upstream.shutdown(Shutdown::Write);
        let _ = eof_tx.send(());
    });
    // Once stdin has ended, the copy below gets a deadline: a watchdog ends the process.
    std::thread::spawn(move || {
        if eof_rx.recv().is_ok() {
            std::thread::sleep(DRAIN_AFTER_EOF);
            std::process::exit(EXIT_OK);
        }
    });
    let stdout = rustix::stdio::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // What the client's BufReader already holds comes first, then the socket.
        let n = match from_socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            match rustix::io::write(stdout, rest) {
                Ok(written) => rest = &rest[written..],
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => std::thread::sleep(Duration::from_millis(1)),
                // The far end of stdout (ssh) is gone: nobody reads any more.
                Err(_) => return Ok(EXIT_OK),
            }
        }
    }
    Ok(EXIT_OK)
}
