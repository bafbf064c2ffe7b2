//! What a pattern needs in a text before it can match: literals read from the pattern's syntax
//! tree. `explain` compiles only the patterns whose literals are all in the text at hand;
//! compiling every pattern was most of the time (and memory) an `explain` call took.
//!
//! The check may let through a pattern that then does not match (it is only a filter), but it
//! never turns away a pattern that would match: every literal it asks for is in every match.
//!
//! In a long text all the knowledge base's literals are looked for in one pass ([`Index`]):
//! testing each literal with `str::contains` reads the text once per literal, which was most of
//! the time on a long log (8 MB: 9 s). A short message is still read once per literal: building
//! the one-pass automaton costs more than that, unless many texts are read (the tests, a server).

use aho_corasick::{AhoCorasick, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Once the texts read (this one included) total this many bytes, texts are searched in one
/// pass for all literals.
const ONE_PASS_FROM: usize = 16 * 1024;

/// Clauses kept per pattern, most selective first; dropping clauses only weakens the filter.
const MAX_CLAUSES: usize = 4;

/// Literals every match of a pattern contains, as clauses: one of a clause's folded ASCII
/// strings occurs in every match. No clauses: nothing known, the pattern is always tried.
#[derive(Debug)]
pub struct Needs {
    clauses: Vec<Vec<String>>,
    /// The clauses as numbers of literals in an [`Index`] (filled by [`Index::new`]).
    ids: Vec<Vec<usize>>,
}

/// Every literal a set of patterns needs, numbered, and (built for the first long text) one
/// automaton that finds them all in one pass.
pub struct Index {
    literals: Vec<String>,
    /// `None` if the automaton could not be built (too large): texts are then read per literal.
    searcher: OnceLock<Option<AhoCorasick>>,
    /// Bytes of the texts read so far.
    read: AtomicUsize,
}

impl Index {
    /// Numbers the literals of every pattern's needs.
    pub fn new<'a>(needs: impl IntoIterator<Item = &'a mut Needs>) -> Index {
        let mut number: HashMap<String, usize> = HashMap::new();
        let mut literals: Vec<String> = Vec::new();
        for n in needs {
            n.ids = n
                .clauses
                .iter()
                .map(|c| {
                    c.iter()
                        .map(|l| {
                            *number.entry(l.clone()).or_insert_with(|| {
                                literals.push(l.clone());
                                literals.len() - 1
                            })
                        })
                        .collect()
                })
                .collect();
        }
        Index {
            literals,
            searcher: OnceLock::new(),
            read: AtomicUsize::new(0),
        }
    }

    /// Which literals occur in a text (passed through [`folded`]), by number.
    pub fn found_in(&self, folded: &str) -> Vec<bool> {
        let read = self.read.fetch_add(folded.len(), Ordering::Relaxed) + folded.len();
        if read >= ONE_PASS_FROM {
            if let Some(found) = self.found_in_one_pass(folded) {
                return found;
            }
        }
        self.found_by_literal(folded)
    }

    /// Reads the text once per literal.
    fn found_by_literal(&self, folded: &str) -> Vec<bool> {
        self.literals
            .iter()
            .map(|l| folded.contains(l.as_str()))
            .collect()
    }

    /// Reads the text once for all literals; `None` if the automaton could not be built.
    fn found_in_one_pass(&self, folded: &str) -> Option<Vec<bool>> {
        let searcher = self.searcher.get_or_init(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(&self.literals)
                .ok()
        });
        let searcher = searcher.as_ref()?;
        let mut found = vec![false; self.literals.len()];
        for m in searcher.find_overlapping_iter(folded) {
            found[m.pattern().as_usize()] = true;
        }
        Some(found)
    }
}

/// What a pattern needs; an error is a syntax error in the pattern.
///
/// The pattern is parsed case-sensitively, which is much cheaper than the case-insensitive
/// parse (folding Unicode classes such as `\w` was most of it); the matcher's case-insensitivity
/// is accounted for by folding both the literals and the text (see [`folded`]).
pub fn needs(pattern: &str) -> Result<Needs, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .multi_line(true)
        .build()
        .parse(pattern)
        .map_err(|e| e.to_string())?;
    Ok(Needs::of(&hir))
}

impl Needs {
    fn of(hir: &Hir) -> Needs {
        let mut clauses = required(hir);
        // The clause whose shortest literal is longest is the least likely to be met by chance.
        clauses.sort_by_key(|c| std::cmp::Reverse(c.iter().map(String::len).min().unwrap_or(0)));
        clauses.truncate(MAX_CLAUSES);
        Needs {
            clauses,
            ids: Vec::new(),
        }
    }

    /// Whether a text has every clause, given the literals [`Index::found_in`] it (the index
    /// these needs were numbered by).
    pub fn met_by(&self, found: &[bool]) -> bool {
        self.ids.iter().all(|c| c.iter().any(|&l| found[l]))
    }
}

/// A text as the literals are compared with it: ASCII lowercased, and the two non-ASCII
/// characters that case-insensitive matching takes for ASCII letters (`ſ` U+017F for `s`, the
/// Kelvin sign U+212A for `k`) replaced by those letters. A literal character that is not
/// ASCII is not used.
pub fn folded(text: &str) -> String {
    text.chars().map(|c| fold(c).unwrap_or(c)).collect()
}

/// The ASCII letter or character `c` folds to, if any.
fn fold(c: char) -> Option<char> {
    match c {
        '\u{17F}' => Some('s'),
        '\u{212A}' => Some('k'),
        c if c.is_ascii() => Some(c.to_ascii_lowercase()),
        _ => None,
    }
}

/// The clauses every match of `hir` meets.
fn required(hir: &Hir) -> Vec<Vec<String>> {
    match hir.kind() {
        HirKind::Literal(_) | HirKind::Class(_) => pieces(hir)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(|p| vec![p])
            .collect(),
        HirKind::Capture(c) => required(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => required(&r.sub),
        HirKind::Concat(subs) => {
            let mut out = Vec::new();
            let mut run = String::new();
            for sub in subs {
                if let Some(pieces) = pieces(sub) {
                    // A character that is not ASCII ends one piece and starts the next.
                    for (k, p) in pieces.into_iter().enumerate() {
                        if k > 0 && !run.is_empty() {
                            out.push(vec![std::mem::take(&mut run)]);
                        }
                        run.push_str(&p);
                    }
                } else {
                    if !run.is_empty() {
                        out.push(vec![std::mem::take(&mut run)]);
                    }
                    out.extend(required(sub));
                }
            }
            if !run.is_empty() {
                out.push(vec![run]);
            }
            out
        }
        HirKind::Alternation(branches) => {
            // One literal of each branch's most selective clause: whichever branch matched,
            // one of them is in the match. A branch with nothing known makes the clause void.
            let mut clause = Vec::new();
            for b in branches {
                let best = required(b)
                    .into_iter()
                    .max_by_key(|c| c.iter().map(String::len).min().unwrap_or(0));
                match best {
                    Some(c) => clause.extend(c),
                    None => return Vec::new(),
                }
            }
            clause.sort();
            clause.dedup();
            vec![clause]
        }
        // Empty, look-arounds (`^`, `\b`) and optional repetitions need nothing.
        _ => Vec::new(),
    }
}

/// The folded ASCII text a literal or a one-letter class (`[Ee]`) stands for, in pieces split
/// where the literal has a character that is not ASCII (`abécd`: `ab`, `cd`).
fn pieces(hir: &Hir) -> Option<Vec<String>> {
    match hir.kind() {
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).ok()?;
            let mut out = vec![String::new()];
            for c in s.chars() {
                match fold(c).filter(char::is_ascii) {
                    Some(f) => out.last_mut().expect("one piece").push(f),
                    None => out.push(String::new()),
                }
            }
            Some(out)
        }
        HirKind::Class(_) => class_letter(hir).map(|c| vec![c]),
        _ => None,
    }
}

/// The folded ASCII character a class of one letter in its cases stands for.
fn class_letter(hir: &Hir) -> Option<String> {
    let ranges: Vec<(u32, u32)> = match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        // A byte class (`(?-u)`) above 0x7F holds bytes, not characters.
        HirKind::Class(Class::Bytes(class)) if class.is_ascii() => class
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        _ => return None,
    };
    let mut letter = None;
    let mut count = 0;
    for (start, end) in ranges {
        count += end - start + 1;
        if count > 4 {
            return None;
        }
        for c in (start..=end).filter_map(char::from_u32) {
            let f = fold(c)?;
            if letter.is_some_and(|l| l != f) {
                return None;
            }
            letter = Some(f);
        }
    }
    letter.map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clauses(pattern: &str) -> Vec<Vec<String>> {
        needs(pattern).unwrap().clauses
    }

    #[test]
    fn literals_are_read_through_case_classes_and_groups() {
        assert_eq!(
            clauses(r"Unsupported ONNX opset version: (?P<opset>\d+)"),
            vec![vec!["unsupported onnx opset version: ".to_string()]]
        );
        assert_eq!(
            clauses(r"(?:CUDA|TensorRT) failure \d+: (\w+) ; GPU=\d"),
            vec![
                vec![" failure ".to_string()],
                vec![" ; gpu=".to_string()],
                vec!["cuda".to_string(), "tensorrt".to_string()],
                vec![": ".to_string()],
            ]
        );
        assert_eq!(
            clauses(r"[Ee]rror: [Kk]"),
            vec![vec!["error: k".to_string()]]
        );
        assert_eq!(clauses(r"(?-u:[Ee])rror"), vec![vec!["error".to_string()]]);
    }

    /// One pass finds every literal, overlapping ones included, and a clause is met by any of
    /// its literals.
    #[test]
    fn the_index_finds_overlapping_literals() {
        let mut a = needs("(?:CUDA|TensorRT) failure").unwrap();
        let mut b = needs("tensor").unwrap();
        let mut c = needs("sorted").unwrap();
        let index = Index::new([&mut a, &mut b, &mut c]);
        let one_pass = |t: &str| index.found_in_one_pass(&folded(t)).unwrap();
        let found = one_pass("TensorRT failure");
        assert!(a.met_by(&found) && b.met_by(&found));
        assert!(!c.met_by(&found));
        let found = one_pass("cuda failure; tensorted");
        assert!(a.met_by(&found) && b.met_by(&found) && c.met_by(&found));
        let found = one_pass("CUDA error");
        assert!(!a.met_by(&found));
    }

    /// The one pass and the per-literal reading find the same literals of the built-in base in
    /// every fixture message, and in all of them joined into one long log.
    #[test]
    fn one_pass_and_per_literal_find_the_same() {
        let kb = crate::explain::KnowledgeBase::parse(crate::explain::DATA).unwrap();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/explain_cases.toml"
        );
        let cases: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let texts: Vec<String> = cases["case"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| folded(c["text"].as_str().unwrap()))
            .collect();
        assert!(texts.len() > 4_000);
        let index = &kb.literals;
        for t in texts.iter().chain([&texts.join("\n")]) {
            assert_eq!(
                index.found_in_one_pass(t).unwrap(),
                index.found_by_literal(t),
                "{}",
                &t[..t.len().min(200)]
            );
        }
        assert!(texts.join("\n").len() >= ONE_PASS_FROM);
    }

    #[test]
    fn optional_parts_open_branches_and_other_scripts_need_nothing() {
        assert_eq!(clauses(r"(?:foo)?bar"), vec![vec!["bar".to_string()]]);
        assert_eq!(clauses(r"foo|\w+"), Vec::<Vec<String>>::new());
        assert_eq!(clauses(r"^\s*$"), Vec::<Vec<String>>::new());
        assert_eq!(
            clauses("ab\u{e9}cd"),
            vec![vec!["ab".to_string()], vec!["cd".to_string()]]
        );
    }

    /// `fold` covers every character that case-insensitive matching equates with an ASCII letter.
    #[test]
    fn every_character_a_letter_matches_folds_to_it() {
        let letter = regex::RegexBuilder::new("^[a-z]$")
            .case_insensitive(true)
            .build()
            .unwrap();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            if letter.is_match(c.encode_utf8(&mut [0; 4])) {
                let f = fold(c).unwrap_or_else(|| panic!("{c:?} is not folded"));
                assert!(f.is_ascii_lowercase(), "{c:?} folds to {f:?}");
                assert!(
                    regex::RegexBuilder::new(&f.to_string())
                        .case_insensitive(true)
                        .build()
                        .unwrap()
                        .is_match(c.encode_utf8(&mut [0; 4])),
                    "{c:?} folds to {f:?}, which does not match it"
                );
            }
        }
        let mut n = needs("kernels").unwrap();
        let index = Index::new([&mut n]);
        assert!(n.met_by(&index.found_in(&folded("\u{212A}ernel\u{17F}"))));
        assert!(!n.met_by(&index.found_in(&folded("kernel"))));
    }
}
