//! `onnx-doctor explain [FILE|-|CODE] [--format human|json]`
//!
//! Reads an exporter, ONNX Runtime or TensorRT error (or a whole traceback) from FILE or stdin,
//! recognises it from the knowledge base (`crates/source-lint/data/explain.toml`, see
//! docs/explain.md), and shows the cause, the fix and the innermost frame of the user's own code.
//! Unknown errors are reported as unknown, with the user frame all the same. Given a lint rule
//! code (`explain ODL001`) it prints the rule's documentation.
//!
//! JSON schema: `{"recognised": bool, "error": str|null, "entry": null | {"id", "title",
//! "origin", "cause", "fix", "code", "facts", "links", "rules", "matched"}, "user_frame": null |
//! {"file", "line", "function", "code"}}`; for a rule: `{"rule": {"code", "name", "severity",
//! "fix", "summary", "doc"}}`.

use crate::format::Format;
use anyhow::{bail, Context as _};
use source_lint::explain::{self, KnowledgeBase};
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A file holding the error text or traceback, `-` (or nothing) for stdin, or a lint rule
    /// code such as ODL001.
    pub input: Option<String>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// The text of an error log as users save it: UTF-8 (a stray byte of another encoding, as
/// Windows paths in a log may hold, is replaced), or UTF-16 as PowerShell's `2> err.txt` writes
/// it. Binary data is refused, with the reason.
fn decode_error_text(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |little: bool, body: &[u8]| {
        let units = body.chunks_exact(2).map(|p| {
            if little {
                u16::from_le_bytes([p[0], p[1]])
            } else {
                u16::from_be_bytes([p[0], p[1]])
            }
        });
        char::decode_utf16(units)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect::<String>()
    };
    // ASCII text in UTF-16LE without a byte order mark: every second byte is zero.
    let zero_high = |bytes: &[u8]| {
        let pairs = bytes.len() / 2;
        pairs >= 2
            && bytes
                .chunks_exact(2)
                .filter(|p| p[1] == 0 && p[0] != 0)
                .count()
                * 10
                >= pairs * 9
    };
    let text = match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(true, rest),
        [0xFE, 0xFF, rest @ ..] => utf16(false, rest),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8_lossy(rest).into_owned(),
        _ if zero_high(bytes) => utf16(true, bytes),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    };
    // A log cut short after a crash ends in NULs.
    let text = text.trim_end_matches('\0');
    // Logs hold text, line breaks, tabs, terminal colour codes, a spinner's backspaces and
    // bells, and in a legacy code page (GBK, cp1252) bytes that are not UTF-8; not NULs or other
    // control bytes, which binary data is full of.
    let odd = text
        .chars()
        .filter(|&c| {
            (c as u32) < 0x20
                && !matches!(c, '\n' | '\r' | '\t' | '\x1b' | '\x0c' | '\x08' | '\x07')
        })
        .count();
    let total = text.chars().count();
    if odd >= 8 && odd * 20 > total {
        return Err(format!(
            "not text ({odd} of {total} characters are control bytes)"
        ));
    }
    Ok(without_colours(text))
}

/// `text` without terminal colour and style codes (`ESC [ 31 m`), which a log saved from a
/// terminal keeps around each line.
fn without_colours(text: &str) -> String {
    if !text.contains('\x1b') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            // CSI: parameters and intermediates up to the final byte (`m`, `K`, ...); a cut-off
            // one ends at the first character that cannot belong to it.
            Some('[') => {
                chars.next();
                while let Some(&c) = chars.peek() {
                    if !(' '..='~').contains(&c) {
                        break;
                    }
                    chars.next();
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC (a hyperlink, a window title): up to BEL or `ESC \`, within the line.
            Some(']') => {
                chars.next();
                while let Some(&c) = chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    chars.next();
                    if c == '\x07' {
                        break;
                    }
                    if c == '\x1b' {
                        if chars.peek() == Some(&'\\') {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            // A character-set choice (`ESC ( B`, what `tput sgr0` sends).
            Some('(' | ')') => {
                chars.next();
                chars.next();
            }
            _ => {}
        }
    }
    out
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input = args.input.as_deref().unwrap_or("-");
    if input != "-" && !Path::new(input).exists() {
        if let Some(rule) = source_lint::rule(input) {
            print_rule(rule, args.format)?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    let name = if input == "-" { "stdin" } else { input };
    let bytes = if input == "-" {
        let mut b = Vec::new();
        std::io::stdin()
            .read_to_end(&mut b)
            .context("stdin: cannot read the error text")?;
        b
    } else {
        std::fs::read(input).with_context(|| format!("{input}: cannot read the error text"))?
    };
    let text = decode_error_text(&bytes).map_err(|why| {
        anyhow::anyhow!(
            "{name}: {why}: expected an exporter, ONNX Runtime or TensorRT error or a Python traceback"
        )
    })?;
    if text.trim().is_empty() {
        bail!(
            "{name}: no error text: expected an exporter, ONNX Runtime or TensorRT error or a Python traceback"
        );
    }
    let kb = KnowledgeBase::builtin().map_err(|e| anyhow::anyhow!(e))?;
    let found = kb.recognise(&text);
    let frame = explain::user_frame(&text);
    // Prefer the line as it is now on disk; fall back to the line the traceback printed.
    let frame_code = frame.as_ref().and_then(|f| {
        std::fs::read_to_string(&f.file)
            .ok()
            .and_then(|s| {
                s.lines()
                    .nth(f.line.saturating_sub(1))
                    .map(|l| l.trim().to_string())
            })
            .or_else(|| f.code.clone())
    });
    let error = explain::error_line_near(&text, found.as_ref().map(|m| m.matched.as_str()));

    match args.format {
        Format::Json => {
            let entry = found.as_ref().map(|m| {
                serde_json::json!({
                    "id": m.entry.id,
                    "title": m.entry.title,
                    "origin": m.entry.origin,
                    "cause": m.fill(&m.entry.cause),
                    "fix": m.fill(&m.entry.fix),
                    "code": m.fill(m.entry.code.trim()),
                    "facts": m.entry.facts,
                    "links": m.entry.links,
                    "rules": m.entry.rules,
                    "matched": m.matched,
                })
            });
            let frame_json = frame.as_ref().map(|f| {
                serde_json::json!({"file": f.file, "line": f.line, "function": f.function, "code": frame_code})
            });
            let v = serde_json::json!({
                "recognised": found.is_some(),
                "error": error,
                "entry": entry,
                "user_frame": frame_json,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Human => {
            let mut out = String::new();
            match &found {
                Some(m) => {
                    out.push_str(&format!(
                        "recognised: {} [{}] ({})\n",
                        m.entry.title, m.entry.id, m.entry.origin
                    ));
                    if let Some(e) = &error {
                        out.push_str(&format!("error: {e}\n"));
                    }
                }
                None => {
                    out.push_str(&format!(
                        "unknown error: none of the {} knowledge-base entries matches it\n",
                        kb.entries.len()
                    ));
                    if let Some(e) = &error {
                        out.push_str(&format!("error: {e}\n"));
                    }
                }
            }
            match &frame {
                Some(f) => {
                    out.push_str(&format!(
                        "your code: {}:{} in {}\n",
                        f.file, f.line, f.function
                    ));
                    if let Some(code) = &frame_code {
                        let gutter = f.line.to_string();
                        let pad = " ".repeat(gutter.len());
                        out.push_str(&format!("{pad} |\n{gutter} | {code}\n{pad} |\n"));
                    }
                }
                None if !explain::frames(&text).is_empty() => {
                    out.push_str("your code: every traceback frame is in library code\n");
                }
                None => {}
            }
            if let Some(m) = &found {
                out.push_str(&format!("cause: {}\n", m.fill(&m.entry.cause)));
                out.push_str(&format!("fix: {}\n", m.fill(&m.entry.fix)));
                let code = m.fill(m.entry.code.trim());
                if !code.is_empty() {
                    for l in code.lines() {
                        out.push_str(&format!("    {l}\n"));
                    }
                }
                if !m.entry.facts.is_empty() {
                    out.push_str("facts:\n");
                    for f in &m.entry.facts {
                        out.push_str(&format!("  - {f}\n"));
                    }
                }
                if !m.entry.rules.is_empty() {
                    out.push_str(&format!(
                        "lint: `onnx-doctor lint --select {}` finds this pattern in source\n",
                        m.entry.rules.join(",")
                    ));
                }
                out.push_str("see:\n");
                for l in &m.entry.links {
                    out.push_str(&format!("  - {l}\n"));
                }
            } else {
                out.push_str("help: search the message in the exporter/runtime issue trackers; `onnx-doctor lint` may point at the cause in your source\n");
            }
            print!("{out}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn print_rule(rule: &source_lint::Rule, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            let v = serde_json::json!({"rule": {
                "code": rule.code,
                "name": rule.name,
                "severity": rule.severity.as_str(),
                "fix": rule.fix.as_str(),
                "summary": rule.summary,
                "doc": rule.doc(),
            }});
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Human => {
            println!(
                "{} ({}) [{}, fix: {}]\n{}\n\n{}",
                rule.code,
                rule.name,
                rule.severity.as_str(),
                rule.fix.as_str(),
                rule.summary,
                rule.doc().trim_end()
            );
        }
    }
    Ok(())
}
