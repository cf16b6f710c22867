//! The screen regexes of `wait --regex`: the `regex` crate's syntax and meaning, Unicode
//! classes and case folding included (an adapter's readiness rule matches a prompt glyph
//! followed by a no-break space with `\s`), matched by regex-automata's PikeVM alone. The
//! `regex` crate would bring its DFAs and literal searchers, about 0.7 MB of code, into every
//! pane host for a match run once per revision while someone waits (docs/decisions.md).

use regex_automata::nfa::thompson::pikevm::{Cache, PikeVM};
use regex_automata::nfa::thompson::{Compiler, Config};

/// The compiled program's size limit, the `regex` crate's default: a hostile pattern
/// (`(?:a{1000}){1000}`) is refused instead of filling memory.
const SIZE_LIMIT: usize = 10 * (1 << 20);

/// A compiled screen regex and the scratch space its matches use.
pub struct ScreenRegex {
    vm: PikeVM,
    cache: Cache,
}

impl ScreenRegex {
    /// Compiles `pattern`, or says what is wrong with it in the `regex` crate's words.
    pub fn new(pattern: &str) -> Result<ScreenRegex, String> {
        let hir = regex_automata::util::syntax::parse(pattern).map_err(|err| err.to_string())?;
        let nfa = Compiler::new()
            .configure(Config::new().nfa_size_limit(Some(SIZE_LIMIT)))
            .build_from_hir(&hir)
            .map_err(|err| err.to_string())?;
        let vm = PikeVM::new_from_nfa(nfa).map_err(|err| err.to_string())?;
        let cache = vm.create_cache();
        Ok(ScreenRegex { vm, cache })
    }

    /// Whether the pattern matches anywhere in `haystack`.
    pub fn is_match(&mut self, haystack: &str) -> bool {
        self.vm.is_match(&mut self.cache, haystack)
    }
}

#[cfg(test)]
mod tests {
    use super::ScreenRegex;

    #[test]
    fn matches_as_the_regex_crate_does_and_names_what_is_wrong() {
        let mut prompt = ScreenRegex::new(r"(?m)^»\s*$").expect("compiles");
        assert!(
            prompt.is_match("header\n»\u{a0}\nfooter"),
            "a no-break space is \\s"
        );
        assert!(!prompt.is_match("» typed"));
        let mut greek = ScreenRegex::new(r"(?i)\p{Greek}+ΔΕΛΤΑ").expect("compiles");
        assert!(greek.is_match("αβδελτα"));
        let mut word = ScreenRegex::new(r"^\w+ 42$").expect("compiles");
        assert!(word.is_match("Δelta 42"));

        let err = ScreenRegex::new("(").err().expect("an unclosed group");
        assert!(err.contains("unclosed group"), "{err}");
        let err = ScreenRegex::new(r"\p{Nope}")
            .err()
            .expect("an unknown class");
        assert!(err.contains("Unicode property not found"), "{err}");
        let err = ScreenRegex::new("(?:a{1000}){1000}")
            .err()
            .expect("a program over the size limit");
        assert!(err.contains("exceeded"), "{err}");
    }
}
