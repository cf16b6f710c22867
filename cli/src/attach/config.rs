//! The `attach` section of the user's config, `$XDG_CONFIG_HOME/belfry/config.kdl` (else
//! `~/.config/belfry/config.kdl`), the file whose `hosts` section names remote hosts (issue
//! 46: a tmux user reaches for a config file first). Read when `belfry attach` or `belfry run`
//! starts, and by `belfry new` for the history limit:
//!
//! ```kdl
//! attach {
//!     prefix "C-a"          // the prefix key; detaching is then C-a d
//!     escape-time 10        // ms a lone Escape waits for the rest of a sequence
//!     history-limit 10000   // lines of history a pane started by new or run keeps
//! }
//! ```
//!
//! What is given on the command line or in the environment wins over the file:
//! `--detach-key` over `prefix` and `detach-key`, `BELFRY_ESCAPE_TIME_MS` over `escape-time`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use belfry_cli::bindings::{action_names, Bindings, Command};
use belfry_cli::keys::DetachKey;

/// The detach key when neither the command line nor the config gives one.
pub const DEFAULT_DETACH_KEY: &str = "C-b d";

/// The most history lines `history-limit` may ask for: the daemon's own cap.
const HISTORY_LIMIT_MAX: u64 = 1_000_000;

/// The longest `escape-time`: as for `BELFRY_ESCAPE_TIME_MS`.
const ESCAPE_TIME_MAX_MS: u64 = 5000;

/// What the `attach` section sets; `None` for what it leaves out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AttachConfig {
    /// The detach key (`prefix` with `d`, or `detach-key` whole), as the user wrote it.
    pub detach_key: Option<String>,
    pub escape_time: Option<Duration>,
    pub history_limit: Option<u64>,
    /// Whether the status line is drawn under the pane (`status on`).
    pub status: Option<bool>,
    /// `bind "KEY" "ACTION"`, in the file's order: the key after the prefix and what it does
    /// (`None`: nothing, for `none`).
    pub bindings: Vec<(u8, Option<Command>)>,
}

impl AttachConfig {
    /// The user's config file: `$XDG_CONFIG_HOME/belfry/config.kdl`, else
    /// `~/.config/belfry/config.kdl`.
    pub fn path() -> Option<PathBuf> {
        belfry_mux::remote::HostsConfig::path()
    }

    /// Reads the user's config; a missing file (or none to look for) sets nothing.
    pub fn load() -> Result<AttachConfig> {
        match AttachConfig::path() {
            Some(path) if path.exists() => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|err| anyhow!("cannot read {}: {err}", path.display()))?;
                AttachConfig::parse(&text, &path)
            }
            _ => Ok(AttachConfig::default()),
        }
    }

    /// Parses a config's text, as if read from `path`: its `attach` node (others are other
    /// sections' business). Errors name `path:line:column`.
    pub fn parse(text: &str, path: &Path) -> Result<AttachConfig> {
        if text.len() > 1 << 20 {
            bail!(
                "{}: the file is over 1 MiB; it is not a config",
                path.display()
            );
        }
        let at = |offset: usize| {
            let offset = offset.min(text.len());
            let before = text.get(..offset).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!("{}:{line}:{column}", path.display())
        };
        belfry_mux::kdl_depth::check_nesting(text, belfry_mux::kdl_depth::MAX_NESTING)
            .map_err(|_| anyhow!("{}: nested too deeply", at(0)))?;
        let document = kdl::KdlDocument::parse_v2(text).map_err(|err| {
            let first = err.diagnostics.first();
            let offset = first.map_or(0, |d| d.span.offset());
            let message = first.map_or_else(|| "not valid KDL v2".to_owned(), ToString::to_string);
            anyhow!("{}: not valid KDL v2: {message}", at(offset))
        })?;
        let mut config = AttachConfig::default();
        let mut prefix_at = None;
        for node in document.nodes() {
            if node.name().value() != "attach" {
                continue;
            }
            let Some(children) = node.children() else {
                bail!(
                    "{}: `attach` takes a block: attach {{ prefix \"C-a\" }}",
                    at(node.span().offset())
                );
            };
            for option in children.nodes() {
                let here = at(option.span().offset());
                let name = option.name().value();
                if name == "bind" {
                    config.bindings.push(parse_bind(option, &here)?);
                    continue;
                }
                let value = match option.entries() {
                    [entry] if entry.name().is_none() => entry.value(),
                    _ => bail!("{here}: `{name}` takes one value"),
                };
                match name {
                    "prefix" | "detach-key" => {
                        let Some(given) = value.as_string() else {
                            bail!("{here}: `{name}` takes a string, such as \"C-a\"");
                        };
                        if let Some(earlier) = prefix_at.replace(here.clone()) {
                            bail!(
                                "{here}: the detach key is given twice (also at {earlier}); give \
                                 `prefix` or `detach-key`, once"
                            );
                        }
                        let spec = if name == "prefix" {
                            if given.split_whitespace().count() != 1 {
                                bail!(
                                    "{here}: `prefix` takes one key, such as \"C-a\" (a whole \
                                     detach key goes in `detach-key`)"
                                );
                            }
                            format!("{} d", given.trim())
                        } else {
                            given.to_owned()
                        };
                        DetachKey::parse(&spec).map_err(|err| anyhow!("{here}: {err}"))?;
                        config.detach_key = Some(spec);
                    }
                    "escape-time" => {
                        let ms = value
                            .as_integer()
                            .and_then(|ms| u64::try_from(ms).ok())
                            .filter(|ms| *ms <= ESCAPE_TIME_MAX_MS)
                            .ok_or_else(|| {
                                anyhow!(
                                    "{here}: `escape-time` takes a whole number of \
                                     milliseconds from 0 to {ESCAPE_TIME_MAX_MS}, not {value}"
                                )
                            })?;
                        config.escape_time = Some(Duration::from_millis(ms));
                    }
                    "history-limit" => {
                        let lines = value
                            .as_integer()
                            .and_then(|n| u64::try_from(n).ok())
                            .filter(|n| (1..=HISTORY_LIMIT_MAX).contains(n))
                            .ok_or_else(|| {
                                anyhow!(
                                    "{here}: `history-limit` takes a number of lines from 1 to \
                                     {HISTORY_LIMIT_MAX}, not {value}"
                                )
                            })?;
                        config.history_limit = Some(lines);
                    }
                    "status" => {
                        let on = match (value.as_string(), value.as_bool()) {
                            (Some("on"), _) | (_, Some(true)) => true,
                            (Some("off"), _) | (_, Some(false)) => false,
                            _ => bail!("{here}: `status` takes on or off, not {value}"),
                        };
                        config.status = Some(on);
                    }
                    other => bail!(
                        "{here}: unknown option {other:?} in `attach` (it takes prefix, \
                         detach-key, escape-time, history-limit, status and bind)"
                    ),
                }
            }
        }
        Ok(config)
    }
}

/// One `bind "KEY" "ACTION"` (at `here`): the key and what it does.
fn parse_bind(option: &kdl::KdlNode, here: &str) -> Result<(u8, Option<Command>)> {
    let strings: Vec<Option<&str>> = option
        .entries()
        .iter()
        .map(|entry| {
            entry
                .name()
                .is_none()
                .then(|| entry.value().as_string())
                .flatten()
        })
        .collect();
    let [Some(key), Some(action)] = strings[..] else {
        bail!(
            "{here}: `bind` takes a key and an action, both strings: bind \"v\" \"history\" \
             (the actions are {})",
            action_names()
        );
    };
    let key = Bindings::parse_key(key).map_err(|err| anyhow!("{here}: `bind` {err:#}"))?;
    let action = Bindings::parse_action(action).map_err(|err| anyhow!("{here}: `bind` {err:#}"))?;
    Ok((key, action))
}

/// The key bindings of the user's config: the defaults, changed by its `bind` lines.
pub fn bindings(config: &AttachConfig) -> Bindings {
    let mut table = Bindings::default();
    for (key, action) in &config.bindings {
        table.bind(*key, *action);
    }
    table
}

/// The detach key for a command given `flag` (`--detach-key`), as written: the flag, else the
/// user's config's (read only then), else `C-b d`.
pub fn detach_key_spec(flag: Option<&str>) -> Result<String> {
    match flag {
        Some(flag) => Ok(flag.to_owned()),
        None => Ok(AttachConfig::load()?
            .detach_key
            .unwrap_or_else(|| DEFAULT_DETACH_KEY.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AttachConfig> {
        AttachConfig::parse(text, Path::new("/c/config.kdl"))
    }

    #[test]
    fn the_attach_section_sets_the_prefix_escape_time_and_history_limit() {
        let config = parse(
            "hosts {\n  box \"me@b\"\n}\nattach {\n  prefix \"C-a\"\n  escape-time 10\n  \
             history-limit 5000\n}\n",
        )
        .unwrap();
        assert_eq!(config.detach_key.as_deref(), Some("C-a d"));
        assert_eq!(config.escape_time, Some(Duration::from_millis(10)));
        assert_eq!(config.history_limit, Some(5000));
        assert_eq!(
            parse("attach {\n  detach-key \"C-q\"\n}\n")
                .unwrap()
                .detach_key
                .as_deref(),
            Some("C-q")
        );
        assert_eq!(parse("").unwrap(), AttachConfig::default());
        for (text, on) in [
            ("on", true),
            ("off", false),
            ("#true", true),
            ("#false", false),
        ] {
            let config = parse(&format!("attach {{\n  status {text}\n}}\n")).unwrap();
            assert_eq!(config.status, Some(on), "{text}");
        }
        // The command line wins without the file being read.
        assert_eq!(detach_key_spec(Some("C-q")).unwrap(), "C-q");
    }

    #[test]
    fn bind_lines_change_the_keys_after_the_prefix() {
        let config = parse(
            "attach {\n  bind \"x\" \"detach\"\n  bind \"[\" \"none\"\n  bind \"C-t\" \
             \"status\"\n}\n",
        )
        .unwrap();
        let table = bindings(&config);
        assert_eq!(table.get(b'x'), Some(Command::Detach));
        assert_eq!(table.get(b'['), None);
        assert_eq!(
            table.get(0x14),
            Some(Command::Bound(belfry_cli::keys::Binding::StatusLine))
        );
        assert_eq!(table.get(b's'), Bindings::default().get(b's'));
    }

    #[test]
    fn a_bad_attach_section_is_named_by_line_and_column() {
        for (text, place, words) in [
            ("attach {\n  escape-time \"x\"\n}\n", ":2:3:", "escape-time"),
            ("attach {\n  escape-time 9000\n}\n", ":2:3:", "0 to 5000"),
            (
                "attach {\n  prefix \"C-1\"\n}\n",
                ":2:3:",
                "not a control key",
            ),
            ("attach {\n  prefix \"C-a x\"\n}\n", ":2:3:", "one key"),
            (
                "attach {\n  prefix \"C-a\"\n  detach-key \"C-q\"\n}\n",
                ":3:3:",
                "given twice",
            ),
            (
                "attach {\n  zoom off\n}\n",
                ":2:3:",
                "unknown option \"zoom\"",
            ),
            ("attach {\n  status maybe\n}\n", ":2:3:", "on or off, not"),
            ("attach {\n  history-limit 0\n}\n", ":2:3:", "history-limit"),
            (
                "attach {\n  status on\n  bind \"C-1\" \"history\"\n}\n",
                ":3:3:",
                "`bind` key \"C-1\"",
            ),
            (
                "attach {\n  bind \"v\" \"zoom\"\n}\n",
                ":2:3:",
                "unknown action \"zoom\"; the actions are detach, history",
            ),
            (
                "attach {\n  bind \"v\"\n}\n",
                ":2:3:",
                "takes a key and an action",
            ),
            ("attach {\n  bind \"a b\" \"help\"\n}\n", ":2:3:", "not two"),
            ("attach \"x\"\n", ":1:1:", "takes a block"),
            (
                "attach {\n  prefix \"C-a\n}\n",
                "/c/config.kdl:",
                "not valid KDL",
            ),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(
                err.starts_with("/c/config.kdl") && err.contains(place) && err.contains(words),
                "{text:?}: {err}"
            );
        }
    }
}
