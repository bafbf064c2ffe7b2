//! The `explain` knowledge base: recognise an exporter / ONNX Runtime / TensorRT error from its
//! text (the data file `data/explain.toml`, format in docs/explain.md) and find the innermost
//! frame of a Python traceback that is in the user's own code.

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// One knowledge-base entry as stored in `data/explain.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub id: String,
    pub title: String,
    /// `pytorch-exporter`, `pytorch-tracer`, `pytorch`, `torch.export`, `onnx`, `onnxruntime`,
    /// `tensorrt`, `openvino`, `ncnn`, `converter` (tf2onnx, skl2onnx, paddle2onnx and other converters to or from ONNX).
    pub origin: String,
    #[serde(default)]
    pub priority: i32,
    pub patterns: Vec<String>,
    pub cause: String,
    pub fix: String,
    #[serde(default)]
    pub code: String,
    pub facts: Vec<String>,
    pub links: Vec<String>,
    #[serde(default)]
    pub rules: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    entry: Vec<Entry>,
}

mod literals;

/// The knowledge base with its patterns read.
pub struct KnowledgeBase {
    pub entries: Vec<Entry>,
    /// Each entry's patterns, in the entry's order.
    patterns: Vec<Vec<Pattern>>,
    /// Whether to skip the patterns whose literals are not in the text (see [`literals`]).
    prefilter: bool,
    /// Every pattern's literals, numbered, and how to find them in a text.
    literals: literals::Index,
    /// Entry indices from the highest priority down (file order within a priority).
    by_priority: Vec<usize>,
}

/// One pattern: what it needs in a text, and its regex, compiled the first time a text has
/// what it needs.
struct Pattern {
    source: String,
    needs: literals::Needs,
    regex: OnceLock<Result<Regex, String>>,
}

impl Pattern {
    /// The pattern compiled as the matcher reads it (case-insensitive, `^`/`$` per line), once.
    fn compiled(&self) -> &Result<Regex, String> {
        self.regex.get_or_init(|| {
            RegexBuilder::new(&self.source)
                .case_insensitive(true)
                .multi_line(true)
                .build()
                .map_err(|e| e.to_string())
        })
    }

    /// The compiled regex; `None` if it does not compile (`KnowledgeBase::compile_all` reports
    /// that, and the tests run it on the built-in data).
    fn regex(&self) -> Option<&Regex> {
        self.compiled().as_ref().ok()
    }
}

/// The origins an entry may name.
pub const ORIGINS: &[&str] = &[
    "pytorch-exporter",
    "pytorch-tracer",
    "pytorch",
    "torch.export",
    "onnx",
    "onnxruntime",
    "tensorrt",
    "openvino",
    "ncnn",
    "converter",
];

/// The knowledge-base text shipped in the binary.
pub const DATA: &str = include_str!("../data/explain.toml");

/// An entry's patterns with the literals each needs; a syntax error names the entry.
fn read_patterns(e: &Entry) -> Result<Vec<Pattern>, String> {
    e.patterns
        .iter()
        .map(|p| {
            let needs = literals::needs(p)
                .map_err(|err| format!("explain.toml: entry '{}': pattern {p:?}: {err}", e.id))?;
            Ok(Pattern {
                source: p.clone(),
                needs,
                regex: OnceLock::new(),
            })
        })
        .collect()
}

impl KnowledgeBase {
    /// Parses and validates a knowledge base; errors name the entry and what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("explain.toml: {e}"))?;
        let mut patterns = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for e in &file.entry {
            if !ids.insert(e.id.clone()) {
                return Err(format!("explain.toml: duplicate entry id '{}'", e.id));
            }
            if !ORIGINS.contains(&e.origin.as_str()) {
                return Err(format!(
                    "explain.toml: entry '{}': origin '{}' is not one of {ORIGINS:?}",
                    e.id, e.origin
                ));
            }
            if e.patterns.is_empty() || e.facts.is_empty() || e.links.is_empty() {
                return Err(format!(
                    "explain.toml: entry '{}' needs patterns, facts and links",
                    e.id
                ));
            }
            patterns.push(read_patterns(e)?);
        }
        let literals = literals::Index::new(patterns.iter_mut().flatten().map(|p| &mut p.needs));
        let mut by_priority: Vec<usize> = (0..file.entry.len()).collect();
        by_priority.sort_by_key(|&i| std::cmp::Reverse(file.entry[i].priority));
        Ok(KnowledgeBase {
            entries: file.entry,
            patterns,
            prefilter: true,
            literals,
            by_priority,
        })
    }

    /// Compiles every pattern; an error names the entry and the pattern. `parse` checks the
    /// syntax; this also catches what only compiling finds (a pattern too big).
    pub fn compile_all(&self) -> Result<(), String> {
        for (e, pats) in self.entries.iter().zip(&self.patterns) {
            for p in pats {
                if let Err(err) = p.compiled() {
                    return Err(format!(
                        "explain.toml: entry '{}': pattern {:?}: {err}",
                        e.id, p.source
                    ));
                }
            }
        }
        Ok(())
    }

    /// The same knowledge base trying every pattern on every text: what the literal filter
    /// must never change (the tests compare the two).
    pub fn without_prefilter(mut self) -> Self {
        self.prefilter = false;
        self
    }

    /// The knowledge base built into the binary (parsed once). The data file is checked by
    /// tests; an error here means a broken build, reported rather than panicking.
    pub fn builtin() -> Result<&'static KnowledgeBase, String> {
        static KB: OnceLock<Result<KnowledgeBase, String>> = OnceLock::new();
        KB.get_or_init(|| KnowledgeBase::parse(DATA))
            .as_ref()
            .map_err(|e| format!("built-in knowledge base: {e}"))
    }

    /// The best entry for an error text, read as the library printed it (see `normalized`):
    /// highest priority, then the match that starts last (the final exception of a traceback),
    /// then the longest match. The text is also tried with its lines joined — a message wrapped
    /// by a terminal, a mail client or an issue excerpt (`CUDAE` / `xecutionProvider`) — and a
    /// match there wins when it outranks the best match as given — and the catch-alls, when the
    /// text as given matched anything at all.
    pub fn recognise(&self, text: &str) -> Option<Match<'_>> {
        let text = &normalized(text);
        let raw = self.best(text, i32::MIN);
        let floor = raw
            .as_ref()
            .map_or(i32::MIN, |(p, _, _)| (*p).max(CATCH_ALL_PRIORITY));
        let mut best = raw;
        for (joined, joins) in unwrapped(text) {
            if joins.is_empty() {
                // One line: no match can cross a join.
                continue;
            }
            // Only a match that outranks the floor and the best so far can count.
            let above = best.as_ref().map_or(floor, |(b, _, _)| (*b).max(floor));
            let Some((p, span, m)) = self.best(&joined, above) else {
                continue;
            };
            // Only a match that a wrap had cut counts: it crosses at least one join, and every
            // line it spans whole is as long as a wrapped line is, so that a pattern bounding its
            // context to one line does not reach across a log of short lines.
            let crossed: Vec<usize> = joins
                .iter()
                .copied()
                .filter(|&j| span.0 < j && j < span.1)
                .collect();
            let wrapped =
                !crossed.is_empty() && crossed.windows(2).all(|w| w[1] - w[0] > MIN_WRAPPED_LINE);
            if wrapped && p > floor && best.as_ref().is_none_or(|(b, _, _)| p > *b) {
                best = Some((p, span, m));
            }
        }
        // "`0xC0000005` in function `buildSerializedNetwork`": parts of a message quoted as
        // Markdown inline code in an issue's prose. The text read without its backticks (of a
        // long log, only the lines holding them, so that it is not read twice) gives a match
        // that counts when it outranks the best so far (and the catch-alls, when the text
        // matched anything).
        if text.contains('`') {
            let plain = if text.len() <= BACKTICKS_WHOLE_UP_TO {
                text.replace('`', "")
            } else {
                let lines: Vec<String> = text
                    .lines()
                    .filter(|l| l.contains('`'))
                    .map(|l| l.replace('`', ""))
                    .collect();
                lines.join("\n")
            };
            let above = best.as_ref().map_or(floor, |(b, _, _)| (*b).max(floor));
            if let Some((p, span, m)) = self.best(&plain, above) {
                if p > above {
                    best = Some((p, span, m));
                }
            }
        }
        best.map(|(_, _, m)| m)
    }

    /// The best match in `text` with its effective priority and byte span, among the entries of
    /// priority above `above`: highest effective priority, then the match that starts last, then
    /// the longest, then the higher priority of the entry itself (which differs from the
    /// effective one on a warning line), then the entry and pattern first in the file. Entries
    /// are tried from the highest priority down, and the search stops at the first entry that can
    /// no longer win (a match's effective priority is at most its entry's), so lower-priority
    /// patterns are not compiled or run.
    fn best(&self, text: &str, above: i32) -> Option<(i32, (usize, usize), Match<'_>)> {
        let mut best: Option<(Rank, usize, regex::Captures<'_>)> = None;
        let found = if self.prefilter {
            self.literals.found_in(&literals::folded(text))
        } else {
            Vec::new()
        };
        for &i in &self.by_priority {
            let entry = &self.entries[i];
            if entry.priority <= above || best.as_ref().is_some_and(|b| entry.priority < b.0 .0) {
                break;
            }
            for pat in &self.patterns[i] {
                if self.prefilter && !pat.needs.met_by(&found) {
                    continue;
                }
                let Some(re) = pat.regex() else {
                    continue;
                };
                // The last occurrence of this pattern in the text.
                let Some(caps) = re.captures_iter(text).last() else {
                    continue;
                };
                let m = caps.get(0).expect("group 0");
                let mut priority = entry.priority;
                if is_warning_line(text, m.start()) {
                    priority = priority.min(WARNING_PRIORITY);
                }
                // Two matches that a warning line brought down to the same priority keep the
                // order of their entries' own priorities: the same text matched on a warning
                // line goes to the specific entry, not the catch-all.
                let key = (priority, m.start(), m.len(), entry.priority);
                // On a full tie the entry first in the file wins; within an entry, the first
                // pattern.
                let better = match &best {
                    None => true,
                    Some((k, b, _)) => key > *k || (key == *k && i < *b),
                };
                if better {
                    best = Some((key, i, caps));
                }
            }
        }
        let ((priority, start, len, _), i, caps) = best?;
        let entry = &self.entries[i];
        let mut values = Vec::new();
        let mut groups: Vec<String> = Vec::new();
        for re in self.patterns[i].iter().filter_map(Pattern::regex) {
            for name in re.capture_names().flatten() {
                if !groups.iter().any(|g| g == name) {
                    groups.push(name.to_string());
                }
                if let Some(v) = caps.name(name) {
                    let v = v.as_str().trim();
                    if !v.is_empty() && !values.iter().any(|(k, _): &(String, String)| k == name) {
                        values.push((name.to_string(), v.to_string()));
                    }
                }
            }
        }
        let matched = caps.get(0).map_or("", |m| m.as_str()).to_string();
        Some((
            priority,
            (start, start + len),
            Match {
                entry,
                matched,
                values,
                groups,
            },
        ))
    }
}

/// The text as the library printed it, undoing what copying it from a browser, a terminal or a
/// scraped page does: HTML entities (`&#39;`, `&quot;`, `&gt;` …), typographic quotes, non-breaking
/// and zero-width spaces, ANSI colour codes and CRLF line ends.
fn normalized(text: &str) -> String {
    static ANSI: OnceLock<Regex> = OnceLock::new();
    let ansi = ANSI.get_or_init(|| Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").expect("ansi regex"));
    let text = ansi.replace_all(text, "");
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(c) = rest.chars().next() {
        if c == '&' {
            let entity = [
                ("&#39;", '\''),
                ("&#x27;", '\''),
                ("&apos;", '\''),
                ("&quot;", '"'),
                ("&#34;", '"'),
                ("&lt;", '<'),
                ("&gt;", '>'),
                ("&nbsp;", ' '),
                ("&amp;", '&'),
            ]
            .into_iter()
            .find(|(e, _)| rest.starts_with(e));
            if let Some((e, ch)) = entity {
                out.push(ch);
                rest = &rest[e.len()..];
                continue;
            }
        }
        match c {
            '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201F}' | '\u{2033}' => out.push('"'),
            '\u{00A0}' | '\u{2007}' | '\u{202F}' => out.push(' '),
            '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}' | '\r' => {}
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    despaced(&dedented(&out))
}

/// The text with letter-spaced lines closed up. A UTF-16 console log read as single-byte text
/// (Windows PowerShell redirecting a program's output) shows every character followed by a space,
/// `L o a d L i b r a r y   f a i l e d`; such a line (at least 20 space-separated pieces, nine in
/// ten of them one character long) is read with the single spaces removed and each longer run of
/// spaces (a space of the original line, followed by its own filler) read as one space:
/// `LoadLibrary failed`.
fn despaced(text: &str) -> String {
    if !text.contains(" ") {
        return text.to_string();
    }
    text.split('\n')
        .map(|line| {
            let pieces: Vec<&str> = line.split(' ').filter(|p| !p.is_empty()).collect();
            let single = pieces.iter().filter(|p| p.chars().count() == 1).count();
            if pieces.len() >= 20 && single * 10 >= pieces.len() * 9 {
                line.split("  ")
                    .map(|word| word.split(' ').collect::<String>())
                    .filter(|word| !word.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text without a prefix every non-empty line carries: a Markdown quote (`> `), pytest's
/// `E   `, a comment mark (`# `, a message quoted in a script's comment), or a common indentation.
fn dedented(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let filled = || lines.iter().filter(|l| !l.trim().is_empty());
    let strip = |prefix: &dyn Fn(&str) -> Option<usize>| -> Option<String> {
        let cuts: Vec<usize> = filled().map(|l| prefix(l)).collect::<Option<_>>()?;
        if cuts.is_empty() {
            return None;
        }
        let mut cuts = cuts.into_iter();
        let out: Vec<&str> = lines
            .iter()
            .map(|l| {
                if l.trim().is_empty() {
                    ""
                } else {
                    &l[cuts.next().unwrap_or(0)..]
                }
            })
            .collect();
        Some(out.join("\n"))
    };
    let quote = |l: &str| {
        let t = l.trim_start();
        t.strip_prefix('>')
            .map(|r| l.len() - r.strip_prefix(' ').unwrap_or(r).len())
    };
    let pytest = |l: &str| {
        let r = l.strip_prefix('E')?;
        let spaces = r.len() - r.trim_start_matches(' ').len();
        (spaces > 0).then_some(1 + spaces.min(3))
    };
    let comment = |l: &str| {
        // `# text` on every line; a bare `#` line (as in a JVM crash log) keeps the marks.
        let r = l.trim_start().strip_prefix("# ")?;
        (!r.trim().is_empty()).then(|| l.len() - r.len())
    };
    // `immich_ml  | Traceback ...`: docker compose's service prefix.
    let compose = |l: &str| {
        let bar = l.find('|')?;
        let name = l[..bar].trim_end();
        let named = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        named.then(|| bar + 1 + usize::from(l[bar + 1..].starts_with(' ')))
    };
    if let Some(t) = strip(&quote)
        .or_else(|| strip(&pytest))
        .or_else(|| strip(&comment))
        .or_else(|| strip(&compose))
    {
        return dedented(&t);
    }
    // A log whose lines start with a timestamp (`2024-05-01 10:22:33.123 `, `[2024-05-01T10:22:33Z]`):
    // when most lines carry one, it is the logger's and comes off where present.
    static STAMP: OnceLock<Regex> = OnceLock::new();
    let stamp = STAMP.get_or_init(|| {
        Regex::new(
            r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?(?: |\t|$)",
        )
        .expect("timestamp regex")
    });
    let stamped = filled().filter(|l| stamp.is_match(l)).count();
    if stamped >= 1 && stamped * 2 > filled().count() {
        let out: Vec<&str> = lines
            .iter()
            .map(|l| match stamp.find(l) {
                Some(m) => &l[m.end()..],
                None => l,
            })
            .collect();
        return dedented(&out.join("\n"));
    }
    let indent = filled()
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    if indent == 0 {
        return text.to_string();
    }
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The shortest line a wrap leaves inside a message, in bytes: terminals, mail clients and issue
/// excerpts wrap at 60 to 80 columns or more.
const MIN_WRAPPED_LINE: usize = 40;

/// Entries at or below this priority are catch-alls: when the text as given matched anything, a
/// match in the joined text must rank above them to count.
const CATCH_ALL_PRIORITY: i32 = -4;

/// Texts up to this size are read again whole without their backticks; longer ones (a log) only
/// by the lines holding backticks.
const BACKTICKS_WHOLE_UP_TO: usize = 16 * 1024;

/// The text with its line breaks undone two ways — lines trimmed and joined by a space (a wrap
/// at a space, which drops it), and joined with nothing (a hard wrap at a column, which keeps
/// every character, inside a word or not) — each with the byte offsets of its joins. The text is
/// already normalized (no `\r`).
fn unwrapped(text: &str) -> [(String, Vec<usize>); 2] {
    let mut spaced = (String::with_capacity(text.len()), Vec::new());
    let mut glued = (String::with_capacity(text.len()), Vec::new());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            spaced.1.push(spaced.0.len());
            spaced.0.push(' ');
            glued.1.push(glued.0.len());
        }
        spaced.0.push_str(line.trim());
        glued.0.push_str(line);
    }
    [spaced, glued]
}

/// How a match ranks: effective priority, start, length, then its entry's own priority (compared
/// as a tuple, higher wins).
type Rank = (i32, usize, usize, i32);

/// The highest priority a match on a warning line can have: a logged warning (TensorRT's
/// `[W]`, ONNX Runtime's `[W:onnxruntime:…]`, Python's `UserWarning:`) loses to any specific entry
/// matched on another line, since the run failed on an error, and wins only over the catch-alls.
const WARNING_PRIORITY: i32 = -3;

/// Whether the line holding byte `at` of `text` is a logged warning.
fn is_warning_line(text: &str, at: usize) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\[W\]|\[W:onnxruntime|\[WARNING\]|^\s*(\[[^\]]*\]\s*)*WARNING:|\w*Warning: ")
            .expect("warning-line regex")
    });
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = &text[start..end];
    // Not a warning: ONNX Runtime's TensorRT provider logs TensorRT's `ERROR`s at its own
    // warning level, and old PyTorch exporters gave the reason for a failure as a UserWarning
    // (`ONNX export failed on X because …`) before raising a generic error.
    let warning = |line: &str| {
        re.is_match(line)
            && !line.contains("ERROR")
            && !line.contains("[E]")
            && !line.contains("ONNX export failed")
    };
    // A warning that ends in a colon goes on to the next line: Polygraphy's `[W] Inference
    // failed. ... Note: Error was:` then the error it caught and went past.
    let previous = text[..start.saturating_sub(1)]
        .rsplit('\n')
        .next()
        .filter(|_| start > 0)
        .unwrap_or("");
    warning(line) || (warning(previous) && previous.trim_end().ends_with(':'))
}

/// A recognised error.
#[derive(Debug, Clone)]
pub struct Match<'k> {
    pub entry: &'k Entry,
    /// The text the pattern matched.
    pub matched: String,
    /// Named groups captured from the error (`op`, `opset`, ...); a group that did not take part
    /// in the match, or matched only blanks, is absent.
    pub values: Vec<(String, String)>,
    /// Every named group of the entry's patterns: the names `{name}` may use in its text.
    pub groups: Vec<String>,
}

/// Generic wording for a placeholder whose group is absent from the match.
const GENERIC: &[(&str, &str)] = &[
    ("op", "the operator"),
    ("opset", "the requested opset"),
    ("need", "the opset the message names"),
    ("what", "see the message"),
];

impl Match<'_> {
    /// The captured value of a named group, if it took part in the match.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Renders an entry text: `{name}` becomes the captured value of the named group `name`; an
    /// optional part `{?with {name}|without}` renders its first half when every placeholder in it
    /// has a value and its second half (empty when there is no `|`) otherwise. A placeholder with
    /// no value outside an optional part falls back to a generic wording, never to the literal
    /// `{name}`. Braces that do not name a group of the entry (code such as `{"x": {0: "batch"}}`)
    /// are left as they are.
    pub fn fill(&self, template: &str) -> String {
        render(
            template,
            &|name| {
                self.groups.iter().any(|g| g == name) || GENERIC.iter().any(|(k, _)| *k == name)
            },
            &|name| self.value(name).map(str::to_string),
        )
    }
}

/// Renders `template` (syntax at [`Match::fill`]); `is_name` says which `{name}`s are placeholders.
pub fn render(
    template: &str,
    is_name: &dyn Fn(&str) -> bool,
    value: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        if let Some(body_len) = tail.strip_prefix("{?").and_then(closing_brace) {
            let body = &tail[2..2 + body_len];
            let (with, without) = split_alternatives(body);
            let complete = placeholders(with, is_name)
                .iter()
                .all(|n| value(n).is_some());
            out.push_str(&render(
                if complete { with } else { without },
                is_name,
                value,
            ));
            rest = &tail[2 + body_len + 1..];
            continue;
        }
        if let Some(name) = placeholder_at(tail).filter(|n| is_name(n)) {
            let filled = value(name).unwrap_or_else(|| {
                GENERIC
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map_or("(see the message)", |(_, g)| g)
                    .to_string()
            });
            out.push_str(&filled);
            rest = &tail[name.len() + 2..];
            continue;
        }
        out.push('{');
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// The identifier of a `{name}` at the start of `s`.
fn placeholder_at(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('{')?;
    let end = inner.find('}')?;
    let name = &inner[..end];
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some(name)
}

/// The length of `s` up to the `}` that closes an already opened brace.
fn closing_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Splits an optional part at its top-level `|`.
fn split_alternatives(body: &str) -> (&str, &str) {
    let mut depth = 0usize;
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '|' if depth == 0 => return (&body[..i], &body[i + 1..]),
            _ => {}
        }
    }
    (body, "")
}

/// The placeholder names used in a text (including inside optional parts).
pub fn placeholders(template: &str, is_name: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut names = Vec::new();
    for (i, _) in template.match_indices('{') {
        if let Some(n) = placeholder_at(&template[i..]).filter(|n| is_name(n)) {
            names.push(n.to_string());
        }
    }
    names
}

/// A frame of a Python traceback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frame {
    pub file: String,
    pub line: usize,
    pub function: String,
    /// The source line printed under the frame, if the traceback had it.
    pub code: Option<String>,
}

/// All `File "...", line N, in f` frames, outermost first.
pub fn frames(text: &str) -> Vec<Frame> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r#"^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+?))?\s*$"#)
            .expect("frame regex")
    });
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(c) = re.captures(l) else { continue };
        let Ok(line) = c["line"].parse::<usize>() else {
            continue;
        };
        let code = lines
            .get(i + 1)
            .map(|s| s.trim())
            .filter(|s| {
                !s.is_empty()
                    && !s.starts_with("File \"")
                    && !s.starts_with('^')
                    && !s.starts_with('~')
                    && !s.starts_with("Traceback")
            })
            .map(str::to_string);
        out.push(Frame {
            file: c["file"].to_string(),
            line,
            function: c
                .name("func")
                .map_or("<module>", |m| m.as_str())
                .to_string(),
            code,
        });
    }
    out
}

/// Whether a traceback path is library code (site-packages, the standard library, frozen
/// modules) rather than the user's.
pub fn is_library(path: &str) -> bool {
    let p = path.replace('\\', "/");
    p.starts_with('<')
        || p.contains("/site-packages/")
        || p.contains("/dist-packages/")
        || p.contains("/lib/python3")
        || p.contains("/lib64/python3")
        || p.contains("/Lib/")
        || p.contains("/torch/")
        || p.contains("/onnxruntime/")
        || p.contains("/tensorrt/")
        || p.contains("/onnx/")
        || p.contains("/importlib/")
}

/// The innermost frame in the user's own code.
pub fn user_frame(text: &str) -> Option<Frame> {
    frames(text)
        .into_iter()
        .rev()
        .find(|f| !is_library(&f.file))
}

/// The line that states the error: the last `SomeError: message` line (when that line is only
/// `SomeError:`, as TorchScript prints it, the line after it, which holds the message); else, for a
/// TorchScript compile error (a source excerpt marked `<--- HERE`), the first line, which states it;
/// else the last non-empty line.
pub fn error_line(text: &str) -> Option<String> {
    error_line_near(text, None)
}

/// [`error_line`], told what a knowledge-base pattern matched: when no line reads like an error
/// (`RuntimeError: ...`, `[E]`), the line where the match starts is the error.
pub fn error_line_near(text: &str, matched: Option<&str>) -> Option<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^[\w.]*(Error|Exception|Warning|Fail|Failure)\b.*:|^\[ONNXRuntimeError\]|\[E\]|^ERROR")
            .expect("error regex")
    });
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(i) = lines.iter().rposition(|l| re.is_match(l)) {
        let bare = lines[i].ends_with(':') && !lines[i].contains(' ');
        let next = lines.get(i + 1).filter(|n| !n.starts_with("File \""));
        return Some(match (bare, next) {
            (true, Some(n)) => format!("{} {n}", lines[i]),
            _ => lines[i].to_string(),
        });
    }
    if lines.iter().any(|l| l.ends_with("<--- HERE")) {
        return lines.first().map(|s| s.to_string());
    }
    if let Some(first) = matched
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .filter(|f| f.len() >= 8)
    {
        if let Some(l) = lines.iter().find(|l| l.contains(first)) {
            return Some(l.to_string());
        }
    }
    // An error quoted inside a sentence ("转换时报错：onnxruntime...Fail: ...") and followed by the
    // command that failed: the last line that names an error or a failure (a linker's `undefined
    // reference to` too), else the last line that is not a Markdown fence. IPython's traceback
    // header (`RuntimeError    Traceback (most recent call last)`) and malloc's hint (`set a
    // breakpoint in malloc_error_break to debug`) name an error without stating one.
    let names_error = |l: &&&str| {
        let low = l.to_lowercase();
        if low.contains("traceback (most recent call last)") || low.contains("malloc_error_break") {
            return false;
        }
        low.contains("error")
            || low.contains("fail")
            || low.contains("undefined reference")
            || low.contains("undefined symbol")
    };
    let not_fence = |l: &&&str| !l.starts_with("```");
    lines
        .iter()
        .rev()
        .find(names_error)
        .or_else(|| lines.iter().rev().find(not_fence))
        .map(|s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letter_spaced_lines_close_up_and_keep_their_words() {
        let spaced =
            "E r r o r   C o d e   4 :   I n t e r n a l   E r r o r   ( R e s h a p e _ 4 2 )";
        assert_eq!(
            despaced(&format!("a line\n{spaced}\n")),
            "a line\nError Code 4: Internal Error (Reshape_42)\n"
        );
        // Ordinary text with a few one-letter words stays as it is.
        let plain =
            "RuntimeError: a Tensor with 2 elements cannot be converted to Scalar  (x = a + b)";
        assert_eq!(despaced(plain), plain);
    }

    fn fill(template: &str, values: &[(&str, &str)]) -> String {
        let names = ["dtype", "op", "got", "want"];
        render(template, &|n| names.contains(&n), &|n| {
            values
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn an_optional_part_is_dropped_when_its_group_did_not_take_part() {
        let t = "A tensor{? of type {dtype}} reaches a layer.";
        assert_eq!(
            fill(t, &[("dtype", "UINT8")]),
            "A tensor of type UINT8 reaches a layer."
        );
        assert_eq!(fill(t, &[]), "A tensor reaches a layer.");
        let t = "weights {?have {got} values, expected {want}|have the wrong count}.";
        assert_eq!(
            fill(t, &[("got", "9"), ("want", "27")]),
            "weights have 9 values, expected 27."
        );
        assert_eq!(fill(t, &[("got", "9")]), "weights have the wrong count.");
    }

    #[test]
    fn a_missing_placeholder_never_renders_as_its_name() {
        assert_eq!(
            fill("no translation for {op}", &[]),
            "no translation for the operator"
        );
        assert_eq!(fill("here: {dtype}", &[]), "here: (see the message)");
        // Braces that are not placeholders of the entry are code and stay as written.
        let code = r#"sess.run(None, {"x": {0: "batch"}}); Ort::Env{}; {names[0]: x} {other}"#;
        assert_eq!(fill(code, &[]), code);
        assert_eq!(
            fill("{? unclosed {dtype}", &[]),
            "{? unclosed (see the message)"
        );
    }

    /// A knowledge base of entries `(id, priority, pattern)`, in file order.
    fn base(entries: &[(&str, i32, &str)]) -> KnowledgeBase {
        let text: String = entries
            .iter()
            .map(|(id, priority, pattern)| {
                format!(
                    "[[entry]]\nid = \"{id}\"\ntitle = \"t\"\norigin = \"onnx\"\npriority = {priority}\n\
                     patterns = ['{pattern}']\ncause = \"c\"\nfix = \"f\"\nfacts = [\"f (s)\"]\n\
                     links = [\"https://onnx.ai\"]\n\n"
                )
            })
            .collect();
        KnowledgeBase::parse(&text).unwrap()
    }

    /// Entries are tried from the highest priority down, but the answer is the one the ranking
    /// gives: priority, then the latest start, then the longest match, then file order.
    #[test]
    fn the_search_order_does_not_change_the_ranking() {
        let id = |kb: &KnowledgeBase, text: &str| kb.recognise(text).map(|m| m.entry.id.clone());
        // Same priority and the same match: the entry first in the file wins, whichever way
        // round they are written.
        let kb = base(&[("first", 2, "bad shape"), ("second", 2, "bad shape")]);
        assert_eq!(id(&kb, "error: bad shape"), Some("first".into()));
        let kb = base(&[("second", 2, "bad shape"), ("first", 2, "bad shape")]);
        assert_eq!(id(&kb, "error: bad shape"), Some("second".into()));
        // A higher priority later in the file wins over an earlier, longer match.
        let kb = base(&[("low", 1, "error: bad shape"), ("high", 3, "shape")]);
        assert_eq!(id(&kb, "error: bad shape"), Some("high".into()));
        // Among equal priorities the later start, then the longer match, wins.
        let kb = base(&[("early", 2, "error"), ("late", 2, "shape")]);
        assert_eq!(id(&kb, "error: bad shape"), Some("late".into()));
        let kb = base(&[("short", 2, "shape"), ("long", 2, "shape!")]);
        assert_eq!(id(&kb, "bad shape!"), Some("long".into()));
        // On a warning line both count WARNING_PRIORITY: the same match then goes to the
        // entry of higher priority of its own, wherever it is in the file; the entry first in
        // the file wins only among equal priorities.
        let kb = base(&[("plain", 2, "slow path"), ("urgent", 5, "slow path")]);
        assert_eq!(id(&kb, "[W] slow path taken"), Some("urgent".into()));
        let kb = base(&[("urgent", 5, "slow path"), ("plain", 2, "slow path")]);
        assert_eq!(id(&kb, "[W] slow path taken"), Some("urgent".into()));
        let kb = base(&[("plain", 2, "slow path"), ("also", 2, "slow path")]);
        assert_eq!(id(&kb, "[W] slow path taken"), Some("plain".into()));
        // A later match on a warning line still beats an earlier one of higher priority there.
        let kb = base(&[("urgent", 5, "slow"), ("plain", 2, "path")]);
        assert_eq!(id(&kb, "[W] slow path taken"), Some("plain".into()));
        // A high-priority match on a warning line counts at most WARNING_PRIORITY: a
        // lower-priority error on another line, tried after it, still wins.
        let kb = base(&[("warned", 5, "slow path"), ("failed", 0, "bad shape")]);
        assert_eq!(
            id(&kb, "[W] slow path taken\nerror: bad shape"),
            Some("failed".into())
        );
    }

    #[test]
    fn a_logged_warning_loses_to_the_error_that_failed_the_run() {
        let kb = KnowledgeBase::builtin().unwrap();
        let warning = "2024-05-01 10:00:00.1 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:965 CreateExecutionProviderInstance] Failed to create CUDAExecutionProvider. Please reference https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements to ensure all dependencies are met.";
        let error = "onnxruntime.capi.onnxruntime_pybind11_state.InvalidProtobuf: [ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model from m.onnx failed:Protobuf parsing failed.";
        // Alone, the warning is recognised for what it is.
        assert_eq!(
            kb.recognise(warning).unwrap().entry.id,
            "ort-cuda-provider-load"
        );
        // Before the fatal error, in either order, the error decides.
        for text in [format!("{warning}\n{error}"), format!("{error}\n{warning}")] {
            assert_eq!(
                kb.recognise(&text).unwrap().entry.id,
                "ort-protobuf-parse",
                "{text}"
            );
        }
        // ONNX Runtime's TensorRT provider logs TensorRT errors at warning level: still errors.
        assert!(!is_warning_line("[W:onnxruntime:Default, tensorrt_execution_provider.h:35 log] [2020-04-01 ERROR] Network validation failed.", 0));
        assert!(is_warning_line("[12/03/2020-15:23:43] [W] [TRT] onnx2trt_utils.cpp:220: Your ONNX model has been generated with INT64 weights", 0));
        assert!(is_warning_line(
            "model.py:41: TracerWarning: Converting a tensor to a Python boolean",
            0
        ));
        assert!(!is_warning_line(
            "UserWarning: ONNX export failed on RNN/GRU/LSTM because batch_first not supported",
            0
        ));
    }

    #[test]
    fn log_prefixes_on_every_line_come_off() {
        let kb = KnowledgeBase::builtin().unwrap();
        let bare = "Traceback (most recent call last):\n  File \"export.py\", line 3, in <module>\n    torch.onnx.export(m, x, \"m.onnx\", opset_version=11)\nRuntimeError: Exporting the operator aten::repeat_interleave to ONNX opset version 11 is not supported.";
        let want = kb.recognise(bare).unwrap().entry.id.clone();
        let each = |prefix: &str| {
            bare.split('\n')
                .map(|l| format!("{prefix}{l}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for text in [
            each("ml_worker-1  | "),
            each("2024-05-01 10:22:33.123456 "),
            each("[2024-05-01T10:22:33Z] "),
            each("api | 2024-05-01 10:22:33,120 "),
        ] {
            let got = kb.recognise(&text).unwrap();
            assert_eq!(got.entry.id, want, "{text}");
        }
        // The user frame is found through the prefixes too.
        assert_eq!(
            dedented(&each("2024-05-01 10:22:33 ")),
            bare,
            "timestamps stripped"
        );
        // A table with a `|` on a few lines is not a compose log.
        let table = "name | value\nopset | 11\nRuntimeError: boom";
        assert_eq!(dedented(table), table);
    }

    #[test]
    fn the_trt_datatype_entry_reads_well_without_a_captured_type() {
        let kb = KnowledgeBase::builtin().unwrap();
        let m = kb.recognise("[TRT] [E] Unsupported data type").unwrap();
        assert_eq!(m.entry.id, "trt-unsupported-datatype");
        let cause = m.fill(&m.entry.cause);
        assert!(cause.starts_with("A tensor reaches a layer"), "{cause}");
        let m = kb
            .recognise("Unsupported ONNX data type: UINT8 (2)")
            .unwrap();
        assert!(m
            .fill(&m.entry.cause)
            .starts_with("A tensor of type UINT8 reaches"));
    }

    #[test]
    fn the_error_line_of_a_torchscript_message_is_its_statement_not_the_caret() {
        let bare = "attribute 'w' of type 'NoneType' is not usable in a script method:\n@torch.jit.script_method\ndef forward(self, x):\n    return x + self.w\n               ~~~~~~ <--- HERE\n";
        assert_eq!(
            error_line(bare).as_deref(),
            Some("attribute 'w' of type 'NoneType' is not usable in a script method:")
        );
        let raised = "Traceback (most recent call last):\n  File \"m.py\", line 3, in <module>\n    torch.jit.script(M())\nRuntimeError: \nExpected integer literal for index:\n  File \"m.py\", line 9\n        return self.layers[i](x)\n               ~~~~~~~~~~~~~~ <--- HERE\n";
        assert_eq!(
            error_line(raised).as_deref(),
            Some("RuntimeError: Expected integer literal for index:")
        );
        let plain = "RuntimeError: shape mismatch\n";
        assert_eq!(
            error_line(plain).as_deref(),
            Some("RuntimeError: shape mismatch")
        );
        let log = "[I] building\nsomething went wrong\n";
        assert_eq!(error_line(log).as_deref(), Some("something went wrong"));
    }

    #[test]
    fn an_error_quoted_in_a_sentence_is_the_error_line_not_the_command_after_it() {
        let quoted = "转换时报错：onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : Failed to load library\n```\npython tools/deploy.py \\\n--device cpu\n```";
        assert_eq!(
            error_line(quoted).as_deref(),
            Some("转换时报错：onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : Failed to load library")
        );
        assert_eq!(error_line("it stopped\n```").as_deref(), Some("it stopped"));
        let prose = "I am getting this error when loading the engine\n`network has dynamic or shape inputs, but no optimization profile has been defined`\nany idea?";
        assert_eq!(
            error_line_near(prose, Some("no optimization profile has been defined")).as_deref(),
            Some("`network has dynamic or shape inputs, but no optimization profile has been defined`")
        );
    }

    #[test]
    fn a_line_that_only_names_an_error_is_not_the_error_line() {
        // The linker's message, not the title above it (pytorch/pytorch#166546).
        let ld = "Build with USE_SYSTEM_ONNX=ON fails

/usr/bin/ld: /usr/lib/libonnx.so: undefined reference to `onnx::ValueInfoProto::~ValueInfoProto()'
";
        assert_eq!(
            error_line(ld).as_deref(),
            Some("/usr/bin/ld: /usr/lib/libonnx.so: undefined reference to `onnx::ValueInfoProto::~ValueInfoProto()'")
        );
        // malloc's error, not its debugging hint (microsoft/onnxruntime#11446).
        let malloc = "crashed in construction of Ort::Env
App(5283,0x106ca4580) malloc: *** error for object 0x281dd9458: pointer being freed was not allocated
App(5283,0x106ca4580) malloc: *** set a breakpoint in malloc_error_break to debug
";
        assert_eq!(
            error_line(malloc).as_deref(),
            Some("App(5283,0x106ca4580) malloc: *** error for object 0x281dd9458: pointer being freed was not allocated")
        );
        // A notebook traceback cut off before its last line: the header states nothing, the
        // title does.
        let cut = "Caffe2 fails: Dimension mismatch\n-----\nRuntimeError                              Traceback (most recent call last)\n<ipython-input-48> in <module>()\n----> 2 rep.run(x)\n";
        assert_eq!(
            error_line(cut).as_deref(),
            Some("Caffe2 fails: Dimension mismatch")
        );
    }
}
