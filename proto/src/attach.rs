//! The control messages of an attach stream (spec §6.1).
//!
//! After the attach reply, a client and its pane host exchange binary frames (`pty::wire`):
//! terminal bytes, or a control frame holding one JSON object with a single key. A control is
//! parsed once, where the frame is read, into a [`Control`]. The JSON is the one every belfry
//! version has sent, so an attach client and a pane host of different versions (a pane host
//! outlives upgrades) still understand each other; a control this side does not know is an
//! error the reader logs and ignores, never a reason to end the attach.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::identity::ExitStatus;
use crate::limits::Size;

/// One control message of an attach stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(arbitrary::Arbitrary))]
pub enum Control {
    /// Client to host: the client is leaving (`{"detach":true}`). Host to client: the pane host
    /// let the client go, for `reason` (`{"detach":"requested"}`, after `belfry detach`).
    Detach { reason: Option<String> },
    /// Client to host: draw the whole screen again, after the client drew over it
    /// (`{"redraw":true}`).
    Redraw,
    /// Client to host: the terminal's answers to colour queries, as the terminal sent them
    /// (`{"colors":"…"}`).
    Colors(String),
    /// Client to host: the size of the client's terminal (`{"resize":{"rows":R,"cols":C}}`).
    Resize(Size),
    /// Host to client: the program ended (`{"exited":{"code":C,"signal":S}}`).
    Exited(ExitStatus),
    /// Client to host, for a client whose terminal the pane host writes: stop writing the
    /// pane's output to the terminal (`{"pause":true}`), so the client can draw over it; the
    /// host answers [`Control::Paused`] once its last write has finished. Output meanwhile is
    /// held (up to 64 KiB). `{"pause":false}` goes on writing output where the pane is: what
    /// was held, or a redraw when more came; [`Control::Redraw`] goes on with a redraw.
    Pause(bool),
    /// Host to client: nothing more is written to the terminal until the client says
    /// otherwise (`{"paused":true}`), the answer to `{"pause":true}`.
    Paused,
    /// Host to client, for a client whose terminal the pane host writes: the bytes that undo
    /// what the pane's redraw and output turned on in that terminal (`{"restore":"…"}`), sent
    /// before `exited` and in answer to the client's `detach`, after the last write.
    Restore(String),
    /// Client to host, for a client that handed its keyboard: read the keystrokes from it and
    /// write them to the pane (`{"keyboard":true}`), until a read holds the client's prefix
    /// byte or an escape.
    Keyboard,
    /// Host to client: a read of the keyboard that holds the client's prefix byte or an escape
    /// (`{"keys":[…]}`, the bytes as numbers), for the client to filter and send on; the
    /// keyboard is the client's again until it says [`Control::Keyboard`]. Empty when the
    /// keyboard could not be read (the terminal went away).
    Keys(Vec<u8>),
    /// Client to host: the client draws (`{"status":true}`) or stops drawing
    /// (`{"status":false}`) a status line on its terminal's last row. While it does, its size
    /// (the attach request's, then [`Control::Resize`]) is the rows left to the pane, and it is
    /// shown the pane from its model, painted in place in those rows, instead of the pane's
    /// output, which could scroll over the status line.
    Status(bool),
}

/// The one-key objects of the wire, for serde.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Wire {
    Detach(Value),
    Redraw(Value),
    Colors(String),
    Resize(Size),
    Exited(ExitStatus),
    Pause(bool),
    Paused(Value),
    Restore(String),
    Keyboard(bool),
    Keys(Vec<u8>),
    Status(bool),
}

impl Control {
    /// The JSON object of this control, as it goes in a frame.
    pub fn to_value(&self) -> Value {
        let wire = match self {
            // A client says `true`; a pane host gives its reason.
            Control::Detach { reason: None } => Wire::Detach(Value::Bool(true)),
            Control::Detach {
                reason: Some(reason),
            } => Wire::Detach(Value::String(reason.clone())),
            Control::Redraw => Wire::Redraw(Value::Bool(true)),
            Control::Colors(answers) => Wire::Colors(answers.clone()),
            Control::Resize(size) => Wire::Resize(*size),
            Control::Exited(status) => Wire::Exited(*status),
            Control::Pause(on) => Wire::Pause(*on),
            Control::Paused => Wire::Paused(Value::Bool(true)),
            Control::Restore(bytes) => Wire::Restore(bytes.clone()),
            Control::Keyboard => Wire::Keyboard(true),
            Control::Keys(bytes) => Wire::Keys(bytes.clone()),
            Control::Status(on) => Wire::Status(*on),
        };
        serde_json::to_value(wire).unwrap_or(Value::Null)
    }

    /// Parses a control frame's JSON (`detach` and `redraw` take any value, as they always
    /// have). The error names the problem: not an object of one key, a
    /// key this version does not know, or a value that is not what the key takes (a size out of
    /// range among them).
    pub fn from_value(value: Value) -> Result<Control, String> {
        let shown = value.to_string();
        match &value {
            Value::Object(map) if map.len() == 1 => {}
            _ => {
                return Err(format!(
                    "attach control {shown} is not an object of one key"
                ))
            }
        }
        let wire: Wire = serde_json::from_value(value)
            .map_err(|err| format!("attach control {shown}: {err}"))?;
        if let Wire::Keyboard(false) = wire {
            return Err(format!(
                "attach control {shown}: only the pane host gives the keyboard back (with keys)"
            ));
        }
        Ok(match wire {
            // `detach` and `redraw` have always taken any value.
            Wire::Detach(Value::String(reason)) => Control::Detach {
                reason: Some(reason),
            },
            Wire::Detach(_) => Control::Detach { reason: None },
            Wire::Redraw(_) => Control::Redraw,
            Wire::Colors(answers) => Control::Colors(answers),
            Wire::Resize(size) => Control::Resize(size),
            Wire::Exited(status) => Control::Exited(status),
            Wire::Pause(on) => Control::Pause(on),
            Wire::Paused(_) => Control::Paused,
            Wire::Restore(bytes) => Control::Restore(bytes),
            Wire::Keyboard(_) => Control::Keyboard,
            Wire::Keys(bytes) => Control::Keys(bytes),
            Wire::Status(on) => Control::Status(on),
        })
    }

    /// True for the controls after which the sender ends the stream (a detach).
    pub fn is_last(&self) -> bool {
        matches!(self, Control::Detach { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_control_keeps_the_bytes_every_version_has_sent() {
        let cases = [
            (Control::Detach { reason: None }, json!({"detach": true})),
            (
                Control::Detach {
                    reason: Some("requested".into()),
                },
                json!({"detach": "requested"}),
            ),
            (Control::Redraw, json!({"redraw": true})),
            (
                Control::Colors("\u{1b}]11;rgb:0000/0000/0000\u{7}".into()),
                json!({"colors": "\u{1b}]11;rgb:0000/0000/0000\u{7}"}),
            ),
            (
                Control::Resize(Size::new(40, 120).expect("in range")),
                json!({"resize": {"rows": 40, "cols": 120}}),
            ),
            (
                Control::Exited(ExitStatus {
                    code: Some(3),
                    signal: None,
                }),
                json!({"exited": {"code": 3, "signal": null}}),
            ),
            (Control::Pause(true), json!({"pause": true})),
            (Control::Pause(false), json!({"pause": false})),
            (Control::Paused, json!({"paused": true})),
            (
                Control::Restore("\u{1b}[?25h".into()),
                json!({"restore": "\u{1b}[?25h"}),
            ),
            (Control::Keyboard, json!({"keyboard": true})),
            (
                Control::Keys(vec![0x1b, b'[', b'A', 0x02]),
                json!({"keys": [27, 91, 65, 2]}),
            ),
            (Control::Keys(Vec::new()), json!({"keys": []})),
            (Control::Status(true), json!({"status": true})),
            (Control::Status(false), json!({"status": false})),
        ];
        for (control, wire) in cases {
            assert_eq!(control.to_value(), wire, "{control:?}");
            assert_eq!(Control::from_value(wire.clone()), Ok(control), "{wire}");
        }
        for any in [json!(null), json!(1), json!({"x": []})] {
            assert_eq!(
                Control::from_value(json!({ "detach": any })),
                Ok(Control::Detach { reason: None })
            );
            assert_eq!(
                Control::from_value(json!({ "redraw": any })),
                Ok(Control::Redraw)
            );
        }
    }

    #[test]
    fn a_control_that_does_not_parse_names_the_problem() {
        for (wire, part) in [
            (json!({"resize": {"rows": 0, "cols": 80}}), "1..=1000"),
            (json!({"zoom": true}), "unknown variant `zoom`"),
            (
                json!({"redraw": true, "detach": true}),
                "not an object of one key",
            ),
            (json!([1]), "not an object of one key"),
            (json!({"colors": 7}), "attach control {\"colors\":7}"),
            (
                json!({"pause": "yes"}),
                "attach control {\"pause\":\"yes\"}",
            ),
            (
                json!({"keyboard": false}),
                "only the pane host gives the keyboard back",
            ),
            (json!({"keys": [256]}), "attach control {\"keys\":[256]}"),
            (json!({"keys": "abc"}), "attach control {\"keys\":\"abc\"}"),
        ] {
            let err = Control::from_value(wire.clone()).expect_err("must not parse");
            assert!(err.contains(part), "{wire}: {err}");
        }
    }
}
