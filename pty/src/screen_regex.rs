//! The screen regexes of `wait --regex`: the `regex` crate's syntax and meaning, Unicode
//! classes and case folding included (an adapter's readiness rule matches a prompt glyph
//! followed by a no-break space with `\s`), matched by regex-automata's PikeVM. The `regex`
//! crate would bring its DFAs and literal searchers, about 0.7 MB of code, into every pane host
//! for a match run once per revision while someone waits (docs/decisions.md).
//!
//! The PikeVM reads every byte of the screen at tens of nanoseconds each, once per revision
//! while someone waits, so a waiter on a pane that prints without pause cost the pane host a
//! tenth of its time. Most patterns say how a match begins: `DONE`, `(?m)^»\s*$`, `(?i)error`.
//! Those prefixes are read from the pattern once ([`Prefixes`]) and looked for with `memchr`'s
//! substring search first; no match can start before the first of them on the screen, so the
//! PikeVM reads only from there, and not at all when none is there.

use memchr::memmem::Finder;
use regex_automata::nfa::thompson::pikevm::{Cache, PikeVM};
use regex_automata::nfa::thompson::{Compiler, Config};
use regex_automata::Input;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::Hir;

/// The compiled program's size limit, the `regex` crate's default: a hostile pattern
/// (`(?:a{1000}){1000}`) is refused instead of filling memory.
const SIZE_LIMIT: usize = 10 * (1 << 20);

/// The most prefixes looked for one by one; a pattern with more (a case-insensitive word of
/// many letters, a long alternation) goes to the PikeVM whole.
const MAX_PREFIXES: usize = 16;

/// A compiled screen regex and the scratch space its matches use.
pub struct ScreenRegex {
    vm: PikeVM,
    cache: Cache,
    prefixes: Option<Prefixes>,
}

impl ScreenRegex {
    /// Compiles `pattern`, or says what is wrong with it in the `regex` crate's words.
    pub fn new(pattern: &str) -> Result<ScreenRegex, String> {
        let hir = regex_automata::util::syntax::parse(pattern).map_err(|err| err.to_string())?;
        let prefixes = Prefixes::of(&hir);
        let nfa = Compiler::new()
            .configure(Config::new().nfa_size_limit(Some(SIZE_LIMIT)))
            .build_from_hir(&hir)
            .map_err(|err| err.to_string())?;
        let vm = PikeVM::new_from_nfa(nfa).map_err(|err| err.to_string())?;
        let cache = vm.create_cache();
        Ok(ScreenRegex {
            vm,
            cache,
            prefixes,
        })
    }

    /// Whether the pattern matches anywhere in `haystack`.
    pub fn is_match(&mut self, haystack: &str) -> bool {
        let start = match &self.prefixes {
            Some(prefixes) => match prefixes.first_in(haystack.as_bytes()) {
                Some(at) => at,
                None => return false,
            },
            None => 0,
        };
        // The whole haystack stays the input: `^`, `\b` and the like at `start` see the byte
        // before it.
        let input = Input::new(haystack).span(start..haystack.len());
        self.vm.is_match(&mut self.cache, input)
    }
}

/// The literals every match of a pattern begins with, when the pattern says so: a match can
/// start only where one of them occurs.
struct Prefixes {
    finders: Vec<Finder<'static>>,
}

impl Prefixes {
    /// `None` when a match may begin with anything (a class too large to spell out, an empty
    /// prefix such as `a*`'s), or with more literals than [`MAX_PREFIXES`].
    fn of(hir: &Hir) -> Option<Prefixes> {
        let mut extractor = Extractor::new();
        extractor.kind(ExtractKind::Prefix);
        let mut seq = extractor.extract(hir);
        // Keeps the set finite and small: literals are shortened (still prefixes of every
        // match) and ones that start with another are merged into it.
        seq.optimize_for_prefix_by_preference();
        let literals = seq.literals()?;
        if literals.is_empty()
            || literals.len() > MAX_PREFIXES
            || literals.iter().any(|literal| literal.is_empty())
        {
            return None;
        }
        let finders = literals
            .iter()
            .map(|literal| Finder::new(literal.as_bytes()).into_owned())
            .collect();
        Some(Prefixes { finders })
    }

    /// Where the first of the prefixes occurs in `haystack`.
    fn first_in(&self, haystack: &[u8]) -> Option<usize> {
        let mut first: Option<usize> = None;
        for finder in &self.finders {
            // Only what lies before the best position so far can improve on it (a prefix
            // that starts there is found there too).
            let end = first.map_or(haystack.len(), |at| {
                (at + finder.needle().len()).min(haystack.len())
            });
            if let Some(at) = finder.find(&haystack[..end]) {
                first = Some(first.map_or(at, |best| best.min(at)));
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The PikeVM alone, over the whole haystack: what a screen regex answered before it
    /// looked for prefixes.
    fn whole(pattern: &str) -> (PikeVM, Cache) {
        let vm = PikeVM::new(pattern).expect("compiles");
        let cache = vm.create_cache();
        (vm, cache)
    }

    #[test]
    fn patterns_that_say_how_a_match_begins_have_prefixes_and_others_none() {
        let prefixed = |pattern: &str| {
            let hir = regex_automata::util::syntax::parse(pattern).expect("parses");
            Prefixes::of(&hir).is_some()
        };
        for pattern in [
            "DONE",
            r"(?m)^»\s*$",
            "(?i)error",
            r"\$ $",
            "(?m)^(ready|idle)>",
            r"\bbuild (ok|failed)\b",
            // Shortened to the letters whose cases fit the limit.
            "(?i)abcdefghij",
            r"a*b",
        ] {
            assert!(prefixed(pattern), "{pattern} has prefixes");
        }
        for pattern in [r"a*", r"\w+ 42", ".", r"(?s).*x", r"[^x]y", ""] {
            assert!(!prefixed(pattern), "{pattern} has none");
        }
    }

    #[test]
    fn looking_for_prefixes_first_answers_as_the_whole_search() {
        // Screens of a few lines over an alphabet that makes the patterns' pieces (and near
        // misses) likely; every pattern is asked of every screen, with and without prefixes.
        let patterns = [
            "DONE",
            "(?i)done",
            r"(?m)^»\s*$",
            r"(?m)^» ",
            r"(?m)ab$",
            r"\bab\b",
            r"\Bb",
            "(a|ab|b)c",
            "ab|ba|DONE",
            r"(?i)ǅ|k",
            "»",
            "a{2,}b",
            r"b\s+a",
            "(?m)^$",
            r"a*b",
            r"\w+ 42",
        ];
        let pieces = [
            "a", "b", "c", "ab", "ba", "D", "O", "N", "E", "DONE", "done", "DoNe", "»", "\u{a0}",
            " ", "\n", "42", "ǆ", "ǅ", "K", "\u{212a}", "x",
        ];
        let mut compiled: Vec<(ScreenRegex, (PikeVM, Cache))> = patterns
            .iter()
            .map(|p| (ScreenRegex::new(p).expect("compiles"), whole(p)))
            .collect();
        let mut rng = Rng(0x5c2e_e111_9a7b_0d13);
        let mut matched = 0;
        for _ in 0..3000 {
            let mut screen = String::new();
            for _ in 0..rng.below(40) {
                screen.push_str(pieces[rng.index(pieces.len())]);
            }
            for (index, (filtered, (vm, cache))) in compiled.iter_mut().enumerate() {
                let expected = vm.is_match(cache, screen.as_str());
                matched += usize::from(expected);
                assert_eq!(
                    filtered.is_match(&screen),
                    expected,
                    "{} on {screen:?}",
                    patterns[index]
                );
            }
        }
        // The screens exercise both answers.
        assert!(
            matched > 3000 && matched < 3000 * patterns.len() - 3000,
            "{matched}"
        );
    }

    #[test]
    fn the_search_starts_at_the_first_prefix_and_sees_the_byte_before_it() {
        // `\b` and `^` at the first prefix's position are decided by the byte before it.
        let mut word = ScreenRegex::new(r"\bDONE").expect("compiles");
        assert!(!word.is_match("xDONE"));
        assert!(word.is_match("xDONE DONE"));
        let mut line = ScreenRegex::new(r"(?m)^» $").expect("compiles");
        assert!(!line.is_match("a» \nb» x"));
        assert!(line.is_match("a» \n» "));
        // A prefix that occurs first but leads nowhere does not hide an earlier one that
        // overlaps it, whichever of the two is looked for first.
        for pattern in [r"abc|b[a-z]+1", r"b[a-z]+1|abc"] {
            let mut overlapping = ScreenRegex::new(pattern).expect("compiles");
            assert!(overlapping.is_match("abcd"), "{pattern}");
            assert!(!overlapping.is_match("abd"), "{pattern}");
        }
    }

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
