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
    /// `pytorch-exporter`, `pytorch-tracer`, `pytorch`, `torch.export`, `onnx`, `onnxruntime`, `tensorrt`, `openvino`.
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

/// The knowledge base with its patterns compiled.
pub struct KnowledgeBase {
    pub entries: Vec<Entry>,
    compiled: Vec<Vec<Regex>>,
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
];

/// The knowledge-base text shipped in the binary.
pub const DATA: &str = include_str!("../data/explain.toml");

impl KnowledgeBase {
    /// Parses and validates a knowledge base; errors name the entry and what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("explain.toml: {e}"))?;
        let mut compiled = Vec::new();
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
            let mut res = Vec::new();
            for p in &e.patterns {
                let re = RegexBuilder::new(p)
                    .case_insensitive(true)
                    .multi_line(true)
                    .build()
                    .map_err(|err| {
                        format!("explain.toml: entry '{}': pattern {p:?}: {err}", e.id)
                    })?;
                res.push(re);
            }
            compiled.push(res);
        }
        Ok(KnowledgeBase {
            entries: file.entry,
            compiled,
        })
    }

    /// The knowledge base built into the binary (parsed once). The data file is checked by
    /// tests; an error here means a broken build, reported rather than panicking.
    pub fn builtin() -> Result<&'static KnowledgeBase, String> {
        static KB: OnceLock<Result<KnowledgeBase, String>> = OnceLock::new();
        KB.get_or_init(|| KnowledgeBase::parse(DATA))
            .as_ref()
            .map_err(|e| format!("built-in knowledge base: {e}"))
    }

    /// The best entry for an error text: highest priority, then the match that starts last
    /// (the final exception of a traceback), then the longest match.
    pub fn recognise(&self, text: &str) -> Option<Match<'_>> {
        let mut best: Option<(i32, usize, usize, usize, regex::Captures<'_>)> = None;
        for (i, (entry, res)) in self.entries.iter().zip(&self.compiled).enumerate() {
            for re in res {
                // The last occurrence of this pattern in the text.
                let Some(caps) = re.captures_iter(text).last() else {
                    continue;
                };
                let m = caps.get(0).expect("group 0");
                let key = (entry.priority, m.start(), m.len());
                let better = match &best {
                    None => true,
                    Some((p, s, l, _, _)) => key > (*p, *s, *l),
                };
                if better {
                    best = Some((key.0, key.1, key.2, i, caps));
                }
            }
        }
        let (_, _, _, i, caps) = best?;
        let entry = &self.entries[i];
        let mut values = Vec::new();
        for re in &self.compiled[i] {
            for name in re.capture_names().flatten() {
                if let Some(v) = caps.name(name) {
                    values.push((name.to_string(), v.as_str().trim().to_string()));
                }
            }
        }
        let matched = caps.get(0).map_or("", |m| m.as_str()).to_string();
        Some(Match {
            entry,
            matched,
            values,
        })
    }
}

/// A recognised error.
#[derive(Debug, Clone)]
pub struct Match<'k> {
    pub entry: &'k Entry,
    /// The text the pattern matched.
    pub matched: String,
    /// Named groups captured from the error (`op`, `opset`, ...).
    pub values: Vec<(String, String)>,
}

impl Match<'_> {
    /// Replaces `{name}` with the captured value; placeholders without a value stay readable.
    pub fn fill(&self, template: &str) -> String {
        let mut out = template.to_string();
        for (k, v) in &self.values {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        for (k, generic) in [
            ("op", "the operator"),
            ("opset", "the requested opset"),
            ("need", "the opset the message names"),
            ("what", "see the message"),
        ] {
            out = out.replace(&format!("{{{k}}}"), generic);
        }
        out
    }
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

/// The line that states the error: the last `SomeError: message` line, else the last
/// non-empty line.
pub fn error_line(text: &str) -> Option<String> {
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
    lines
        .iter()
        .rev()
        .find(|l| re.is_match(l))
        .or_else(|| lines.last())
        .map(|s| s.to_string())
}
