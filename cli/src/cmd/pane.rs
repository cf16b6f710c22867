//! The one-line commands on one pane: `detach`, `kill`, `restart`, `resize` (with the
//! `ROWSxCOLS` grammar `belfry new --size` shares) and `clear`.

use anyhow::{anyhow, bail, Result};

use belfry_proto::limits::{MAX_DIMENSION, MIN_DIMENSION};
use belfry_proto::reply::{Cleared, Detached, Killed, Resized, Restarted};
use belfry_proto::request as op;
use belfry_proto::Size;

use super::{ask, print_json, simple};
use crate::exit::EXIT_OK;
use crate::remote;

/// `belfry detach NAME`: detaches the pane's clients.
pub(super) fn detach(name: &str) -> Result<i32> {
    let (place, name) = remote::place_of(name)?;
    simple(&place, op::Detach::of(name), |r: Detached| {
        format!("detached {} client(s)", r.detached)
    })
}

/// `belfry kill NAME`: ends the pane.
pub(super) fn kill(name: &str) -> Result<i32> {
    let (place, name) = remote::place_of(name)?;
    simple(&place, op::Kill::of(name), |r: Killed| {
        format!("killed {}", r.killed)
    })
}

/// `belfry restart NAME`: restarts the pane's program, a new incarnation.
pub(super) fn restart(name: &str, json: bool) -> Result<i32> {
    let (place, session) = remote::place_of(name)?;
    let restarted: Restarted = ask(&mut place.daemon()?, op::Restart::of(session))?;
    if json {
        print_json(&restarted.identity);
    } else {
        println!(
            "restarted {name}: incarnation {} revision {}",
            restarted.identity.incarnation, restarted.identity.revision
        );
    }
    Ok(EXIT_OK)
}

/// `belfry resize NAME ROWSxCOLS`.
pub(super) fn resize(name: &str, size: &str) -> Result<i32> {
    let size = parse_size(size)?;
    let (place, name) = remote::place_of(name)?;
    let resize = op::Resize {
        session: Some(name),
        rows: size.rows().into(),
        cols: size.cols().into(),
    };
    simple(&place, resize, |r: Resized| {
        format!("resized to {size} (revision {})", r.revision)
    })
}

/// `belfry clear NAME`: clears the pane's screen and scrollback.
pub(super) fn clear(name: &str) -> Result<i32> {
    let (place, name) = remote::place_of(name)?;
    simple(&place, op::Clear::of(name), |r: Cleared| {
        format!("cleared (revision {})", r.revision)
    })
}

/// A `ROWSxCOLS` argument, each side within the protocol's pane size range.
pub(super) fn parse_size(size: &str) -> Result<Size> {
    let (rows, cols) = size
        .split_once(['x', 'X'])
        .ok_or_else(|| anyhow!("size {size:?} is not ROWSxCOLS (for example 24x80)"))?;
    let (rows, cols) = (
        size_part(size, "rows", rows)?,
        size_part(size, "cols", cols)?,
    );
    Ok(Size::new(rows, cols)?)
}

/// One side of a size: digits only, then 1..=1000. A number too large for any integer type is
/// still a number, and is said to be out of range, not "not a number". The message names the
/// side, which [`Size::new`]'s does not.
pub(super) fn size_part(size: &str, what: &str, text: &str) -> Result<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        bail!("size {size:?}: {what} {text:?} is not a number");
    }
    let range = u64::from(MIN_DIMENSION)..=u64::from(MAX_DIMENSION);
    match text.parse::<u64>() {
        Ok(value) if range.contains(&value) => Ok(value),
        _ => bail!(
            "size {size:?}: {what} {text} is out of range ({MIN_DIMENSION}..={MAX_DIMENSION})"
        ),
    }
}
