//! The grammars built into this library from `adapters/*/screen.json` (see `build.rs`).

use crate::error::{Error, Result};
use crate::grammar::Grammar;

include!(concat!(env!("OUT_DIR"), "/embedded_grammars.rs"));

/// The names of the built-in grammars, sorted.
pub fn names() -> Vec<&'static str> {
    EMBEDDED.iter().map(|(name, _)| *name).collect()
}

/// The built-in grammar called `name`, compiled.
pub fn grammar(name: &str) -> Result<Grammar> {
    let Some((_, text)) = EMBEDDED.iter().find(|(known, _)| *known == name) else {
        return Err(Error::UnknownProvider {
            name: name.to_string(),
            known: names().join(", "),
        });
    };
    Grammar::parse(&format!("built-in {name}/screen.json"), text)
}
