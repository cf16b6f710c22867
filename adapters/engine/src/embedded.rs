//! The grammars built into this library from `adapters/*/screen.json`, and the declarations
//! beside them (see `build.rs`).

use crate::activity::FreshStart;
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

/// The fresh-start signal the built-in declaration of `name` declares, if any.
pub fn fresh_start(name: &str) -> Result<Option<FreshStart>> {
    match EMBEDDED_DECLARATIONS
        .iter()
        .find(|(known, _)| *known == name)
    {
        Some((_, text)) => {
            FreshStart::from_declaration(&format!("built-in {name}/declaration.json"), text)
        }
        None => Ok(None),
    }
}
