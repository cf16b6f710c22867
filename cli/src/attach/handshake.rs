//! The start of an attach: the connection to the pane host (a socket here, or ssh to
//! another machine), the NDJSON handshake (hello, then attach, each with a deadline), and
//! what the pane host took of what was offered (the terminal to write the output to, the
//! keyboard to read). A file of its own because it ends where the frames begin: everything
//! after it is the [`super::session::Session`]'s.

use anyhow::{anyhow, bail, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use belfry_proto::reply::{Attached, Hello};
use belfry_proto::request as op;
use belfry_proto::{Reply, Request};
use belfry_transport::wire::{FrameReader, PROTOCOL_VERSION};

use super::session::Target;
use super::terminal::{keyboard_handover, output_terminal, Keyboard, READ_BUFFER};
use super::{Endpoint, Link};

/// An attach whose handshake is done: the frame stream both ways, what the pane host took,
/// and the ssh process of a remote pane (ended when this is dropped).
pub(super) struct Connected {
    pub(super) reader: FrameReader<OwnedReadHalf>,
    pub(super) writer: OwnedWriteHalf,
    /// The pane host writes the pane's output to the terminal itself.
    pub(super) handed: bool,
    /// The pane host reads the keyboard as well.
    pub(super) keyboard_handed: bool,
    /// The terminal to send the pane host when it took it (`handed`).
    pub(super) terminal: Option<std::os::fd::OwnedFd>,
    /// Whether there is a keyboard to read at all.
    pub(super) keyboard: bool,
    /// Whether the pane host knows the status line.
    pub(super) status_known: bool,
    pub(super) ssh: Option<belfry_mux::remote::SshChild>,
}

/// Connects to the pane host of `target` and makes the handshake: an error naming the pane
/// host when it fails or does not answer in time, and the refusal of an attach without a
/// terminal on stdin.
pub(super) async fn handshake(
    target: &Target<'_>,
    keyboard: Option<&Keyboard>,
) -> Result<Connected> {
    let Link {
        stream,
        pid: pane_host_pid,
        mut ssh,
    } = target.socket.connect().await?;
    let (reader, mut writer) = stream.into_split();
    // For the handshake's lines; the frames after them are read by a `FrameReader`.
    let mut reader = BufReader::new(reader);
    let hello = op::Hello {
        versions: Some(vec![PROTOCOL_VERSION]),
        version: None,
    };
    // A local pane host is handed this terminal and writes the pane's output to it itself
    // (`belfry_pty::terminal`); a remote one sends it in frames.
    let terminal = match target.socket {
        Endpoint::Socket(_) if target.interactive => output_terminal(),
        _ => None,
    };
    // The pane host may read the keyboard too, and give the client only the reads its own
    // keys may be in; a watching client sends no keys.
    let offer_keyboard =
        terminal.is_some() && !target.read_only && keyboard.is_some() && keyboard_handover();
    // With the status line on, the pane is given the rows above it.
    let status_line = target.status_line.get();
    let size = target
        .size
        .map(|(rows, cols)| (pane_rows(rows, status_line), cols));
    let attach = op::Attach {
        session: None,
        read_only: Some(target.read_only),
        rows: size.map(|(rows, _)| rows.into()),
        cols: size.map(|(_, cols)| cols.into()),
        terminal: terminal.is_some().then_some(true),
        keyboard: offer_keyboard.then_some(target.detach.prefix),
        status: status_line.then_some(true),
    };
    // The handshake has a deadline: a stopped or hung pane host is an error naming it, not a
    // terminal that silently hangs. Once attached, a quiet pane may stay quiet for hours.
    let handshake = async {
        let _: Hello = exchange(&mut reader, &mut writer, &Request::new(0, hello)).await?;
        if !target.interactive {
            // Attaching puts stdin in raw mode and reads keystrokes from it; from a pipe or
            // /dev/null it would only wait for the pane to end. Refused before the attach
            // request, so the pane gains no client and keeps its size.
            bail!(
                "stdin is not a terminal: attach reads keystrokes from a terminal; run it in \
                 one, or use `belfry peek` and `belfry send` from a script"
            );
        }
        let attached: Attached =
            exchange(&mut reader, &mut writer, &Request::new(1, attach)).await?;
        anyhow::Ok((attached.terminal, attached.keyboard, attached.status))
    };
    let handshake_deadline = target.socket.handshake_deadline();
    let mut handed = false;
    // Whether the pane host takes the keyboard as well.
    let mut keyboard_handed = false;
    let mut status_known = false;
    match tokio::time::timeout(handshake_deadline, handshake).await {
        // A remote handshake that failed because ssh did says what ssh said.
        Ok(Err(err)) => match ssh.as_mut() {
            Some(ssh) if err.is::<NoReply>() => return Err(ssh.failure(None).into()),
            _ => return Err(err),
        },
        Ok(Ok((taken, keys, status))) => {
            handed = taken && terminal.is_some();
            keyboard_handed = handed && keys && offer_keyboard;
            status_known = status;
        }
        Err(_) if ssh.is_some() => {
            if let Some(ssh) = ssh.as_mut() {
                return Err(ssh.failure(Some(handshake_deadline)).into());
            }
        }
        Err(_) => {
            bail!(
            "the pane host{} serving {} did not answer the attach handshake within {} s; it may \
             be stopped or hung",
            pane_host_pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
            target.socket,
            handshake_deadline.as_secs()
        )
        }
    }

    // From here on the stream is frames, read by a reader that is cancel-safe: the loop below
    // waits for frames, keys, signals and timers at once, and a frame read half-way when one
    // of those comes first is kept, not lost. What the handshake's reader read past its last
    // line is the start of the frames.
    let reader = {
        let buffered = reader.buffer().to_vec();
        FrameReader::new(reader.into_inner(), &buffered, READ_BUFFER)
    };
    Ok(Connected {
        reader,
        writer,
        handed,
        keyboard_handed,
        status_known,
        terminal: if handed { terminal } else { None },
        keyboard: keyboard.is_some(),
        ssh,
    })
}

/// The pane host (or the ssh connection to it) gave no reply to a handshake request: the
/// connection failed, as opposed to a reply that refused.
#[derive(Debug)]
struct NoReply {
    op: &'static str,
    reason: String,
}

impl std::fmt::Display for NoReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no reply from the pane host to {:?}: {}",
            self.op, self.reason
        )
    }
}

impl std::error::Error for NoReply {}

/// One request of the attach handshake and its reply, read as `T`.
async fn exchange<T: DeserializeOwned>(
    reader: &mut (impl AsyncBufRead + Unpin),
    writer: &mut (impl AsyncWrite + Unpin),
    request: &Request,
) -> Result<T> {
    let no_reply = |reason: String| NoReply {
        op: request.op.name(),
        reason,
    };
    writer
        .write_all(&request.to_line())
        .await
        .map_err(|err| no_reply(err.to_string()))?;
    let mut line = String::new();
    match reader.read_line(&mut line).await {
        Ok(0) => return Err(no_reply("the connection closed".to_owned()).into()),
        Ok(_) => {}
        Err(err) => return Err(no_reply(err.to_string()).into()),
    }
    let reply: Value =
        serde_json::from_str(&line).map_err(|err| anyhow!("pane host reply is not JSON: {err}"))?;
    match Reply::<T>::read(&reply) {
        Ok(Reply::Ok(body)) => Ok(body),
        // The message is shown as JSON text, quoted, as it always has been.
        Ok(Reply::Err(err)) => bail!("pane host refused: {}", Value::from(err.message)),
        Err(err) => bail!(
            "pane host reply to {:?} is not what the protocol says: {err}",
            request.op.name()
        ),
    }
}

/// The rows a terminal of `rows` gives the pane: one less with the status line under it (a
/// terminal of one row keeps it for the pane).
pub(super) fn pane_rows(rows: u16, status_line: bool) -> u16 {
    if status_line && rows > 1 {
        rows - 1
    } else {
        rows
    }
}
