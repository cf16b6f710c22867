//! The keys after the prefix and what each does (issue 46: key bindings in the config file).
//! tmux's keys are the defaults; the config's `attach` section changes them with
//! `bind "KEY" "ACTION"`. The detach key itself (the prefix, then its key) and `prefix prefix`
//! are not in the table: they always do what they do, whatever is bound.

use anyhow::{anyhow, bail, Result};

use crate::keys::{key_name, Binding, DetachKey};

/// What a key after the prefix does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// One of the client's own bindings (a view, a pane switch, the status line, the paste).
    Bound(Binding),
    /// Detach, as the detach key does.
    Detach,
    /// The list of the bindings on the last line.
    Help,
    /// The prefix itself, sent to the program (as `prefix prefix` sends it).
    SendPrefix,
}

/// Every action `bind` takes, by name, in the order `prefix ?` lists them, with the word it
/// says for each.
const ACTIONS: &[(&str, Command, &str)] = &[
    ("detach", Command::Detach, "detach"),
    ("history", Command::Bound(Binding::History), "history"),
    ("paste", Command::Bound(Binding::Paste), "paste"),
    ("choose-pane", Command::Bound(Binding::ChoosePane), "panes"),
    ("next-pane", Command::Bound(Binding::NextPane), "next"),
    (
        "previous-pane",
        Command::Bound(Binding::PreviousPane),
        "prev",
    ),
    ("status", Command::Bound(Binding::StatusLine), "status"),
    ("send-prefix", Command::SendPrefix, "send"),
    ("help", Command::Help, "help"),
];

/// The names `bind` takes for its action, for the error that lists them.
pub fn action_names() -> String {
    let mut names: Vec<&str> = ACTIONS.iter().map(|(name, _, _)| *name).collect();
    names.push("none");
    names.join(", ")
}

/// The table of the keys after the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bindings {
    keys: Vec<(u8, Command)>,
}

impl Default for Bindings {
    /// tmux's keys for the same things, and `S` for the status line.
    fn default() -> Bindings {
        Bindings {
            keys: vec![
                (b'[', Command::Bound(Binding::History)),
                (b']', Command::Bound(Binding::Paste)),
                (b's', Command::Bound(Binding::ChoosePane)),
                (b'n', Command::Bound(Binding::NextPane)),
                (b'p', Command::Bound(Binding::PreviousPane)),
                (b'S', Command::Bound(Binding::StatusLine)),
                (b'?', Command::Help),
            ],
        }
    }
}

impl Bindings {
    /// What `key` after the prefix does; `None` when nothing is bound to it.
    pub fn get(&self, key: u8) -> Option<Command> {
        self.keys
            .iter()
            .find(|(bound, _)| *bound == key)
            .map(|(_, command)| *command)
    }

    /// Binds `key` to `command`, or unbinds it (`None`), in place of what it did.
    pub fn bind(&mut self, key: u8, command: Option<Command>) {
        self.keys.retain(|(bound, _)| *bound != key);
        if let Some(command) = command {
            self.keys.push((key, command));
        }
    }

    /// The key of a `bind`: one key, as the detach key's are written (`x`, `C-x`, `C-\`).
    pub fn parse_key(spec: &str) -> Result<u8> {
        match DetachKey::parse(spec) {
            Ok(DetachKey {
                prefix: key,
                then: None,
            }) => Ok(key),
            Ok(_) => bail!("key {spec:?}: one key, such as \"x\" or \"C-x\", not two"),
            Err(err) => Err(anyhow!("key {spec:?}: {err:#}")),
        }
    }

    /// The action of a `bind` by name; `None` for `none` (the key does nothing).
    pub fn parse_action(name: &str) -> Result<Option<Command>> {
        if name == "none" {
            return Ok(None);
        }
        ACTIONS
            .iter()
            .find(|(known, _, _)| *known == name)
            .map(|(_, command, _)| Some(*command))
            .ok_or_else(|| {
                anyhow!(
                    "unknown action {name:?}; the actions are {}",
                    action_names()
                )
            })
    }

    /// The one-line list of the bindings (`prefix ?`): the prefix once, then each action
    /// with its keys, the detach key's first.
    pub fn help(&self, key: DetachKey) -> String {
        let prefix = key_name(key.prefix);
        let Some(then) = key.then else {
            return format!("{prefix} detach");
        };
        let mut parts = Vec::new();
        for (_, command, word) in ACTIONS {
            let mut keys: Vec<String> = Vec::new();
            match command {
                Command::Detach => keys.push(key_name(then)),
                Command::SendPrefix => keys.push(prefix.clone()),
                _ => {}
            }
            keys.extend(
                self.keys
                    .iter()
                    .filter(|(bound, bound_to)| bound_to == command && *bound != then)
                    .map(|(bound, _)| key_name(*bound)),
            );
            if keys.is_empty() {
                continue;
            }
            let word = match command {
                Command::SendPrefix => format!("{word} {prefix}"),
                _ => (*word).to_string(),
            };
            parts.push(format!("{} {word}", keys.join("/")));
        }
        format!("{prefix}: {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_are_rebound_and_listed_with_their_keys() {
        let key = DetachKey::parse("C-b d").unwrap();
        let mut table = Bindings::default();
        assert_eq!(
            table.help(key),
            "C-b: d detach, [ history, ] paste, s panes, n next, p prev, S status, C-b send \
             C-b, ? help"
        );
        table.bind(b'x', Some(Command::Detach));
        table.bind(b'[', None);
        table.bind(b'v', Some(Command::Bound(Binding::History)));
        table.bind(b'n', Some(Command::Bound(Binding::StatusLine)));
        assert_eq!(table.get(b'['), None);
        assert_eq!(table.get(b'x'), Some(Command::Detach));
        assert_eq!(table.get(b'n'), Some(Command::Bound(Binding::StatusLine)));
        assert_eq!(
            table.help(key),
            "C-b: d/x detach, v history, ] paste, s panes, p prev, S/n status, C-b send C-b, \
             ? help"
        );
        assert_eq!(Bindings::parse_key("C-t").unwrap(), 0x14);
        assert!(Bindings::parse_key("C-b d").is_err());
        assert!(Bindings::parse_key("C-1").is_err());
        assert_eq!(Bindings::parse_action("none").unwrap(), None);
        let err = Bindings::parse_action("zoom").unwrap_err().to_string();
        assert!(
            err.contains("unknown action \"zoom\"") && err.contains("choose-pane"),
            "{err}"
        );
    }
}
